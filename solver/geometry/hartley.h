// Hartley's normalizing similarity for 2D points, without Eigen, so that CUDA files can
// use it (nvcc warns on Eigen's headers): the CPU estimators take it as a 3x3 matrix
// through two_view::NormalizingTransform (ransac_utils.h), the GPU fundamental search as
// its three numbers.
#pragma once

#include <cmath>
#include <vector>

namespace tiepoint {
namespace two_view {

// (x, y) -> (scale * x + tx, scale * y + ty), with tx = -scale * cx, ty = -scale * cy for
// the centroid (cx, cy): the centroid of the points to the origin, and their mean distance
// from it to sqrt(2) (Hartley, "In defense of the eight-point algorithm", PAMI 1997).
// Scale 1 when all points coincide.
struct HartleySimilarity {
  double scale = 1.0;
  double tx = 0.0;
  double ty = 0.0;
  bool finite() const { return std::isfinite(scale) && std::isfinite(tx) && std::isfinite(ty); }
};

// Point: anything with p[0] and p[1] (Eigen::Vector2d, std::array<double, 2>).
template <class Point>
HartleySimilarity ComputeHartleySimilarity(const std::vector<Point>& points) {
  double cx = 0.0, cy = 0.0;
  for (const auto& p : points) cx += p[0], cy += p[1];
  if (!points.empty()) cx /= static_cast<double>(points.size()), cy /= static_cast<double>(points.size());
  double mean_distance = 0.0;
  for (const auto& p : points) {
    const double dx = p[0] - cx, dy = p[1] - cy;
    mean_distance += std::sqrt(dx * dx + dy * dy);
  }
  if (!points.empty()) mean_distance /= static_cast<double>(points.size());
  HartleySimilarity h;
  h.scale = mean_distance > 0.0 ? std::sqrt(2.0) / mean_distance : 1.0;
  h.tx = -h.scale * cx;
  h.ty = -h.scale * cy;
  return h;
}

}  // namespace two_view
}  // namespace tiepoint
