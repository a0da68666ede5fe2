// The bundle-adjustment scene as files describe it: cameras, points, observations.
//
// Conventions (BAL, "Bundle Adjustment in the Large", Agarwal et al. ECCV 2010):
//   camera  = [angle-axis rotation (3), translation t (3), focal f, radial k1, k2]
//             (9 doubles; cam_from_world: P = R X + t)
//   point   = [X, Y, Z] in world coordinates
//   observation = (camera index, point index, x, y) in pixels, origin at the image
//             centre, +x right, +y up (BAL's convention; p = -P / P_z).
//
// Storage is structure-of-arrays so solvers can view it without copying.
// io/ owns this type; solver/ builds its own grouped problem from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tiepoint {

inline constexpr int kCameraParams = 9;
inline constexpr int kPointParams = 3;

struct Scene {
  std::vector<double> cameras;      // kCameraParams * num_cameras()
  std::vector<double> points;       // kPointParams * num_points()
  std::vector<int32_t> obs_camera;  // camera index per observation
  std::vector<int32_t> obs_point;   // point index per observation
  std::vector<double> obs_xy;       // 2 * num_observations(): x0 y0 x1 y1 ...

  int num_cameras() const { return static_cast<int>(cameras.size() / kCameraParams); }
  int num_points() const { return static_cast<int>(points.size() / kPointParams); }
  int64_t num_observations() const { return static_cast<int64_t>(obs_camera.size()); }

  double* camera(int i) { return cameras.data() + static_cast<size_t>(kCameraParams) * i; }
  const double* camera(int i) const { return cameras.data() + static_cast<size_t>(kCameraParams) * i; }
  double* point(int j) { return points.data() + static_cast<size_t>(kPointParams) * j; }
  const double* point(int j) const { return points.data() + static_cast<size_t>(kPointParams) * j; }
};

}  // namespace tiepoint
