#include "solver/normalization.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "solver/ba_problem.h"
#include "solver/camera_model.h"
#include "solver/parallel.h"
#include "io/scene.h"

namespace tiepoint {
namespace {

double Median(std::vector<double>& v) {
  if (v.empty()) return 1.0;
  auto mid = v.begin() + v.size() / 2;
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// Scaling is memory-bound: threads only pay off for long arrays.
int ScaleThreads(int64_t m) { return m > (1 << 20) ? omp_get_max_threads() : 1; }

}  // namespace

Normalization ComputeNormalization(const BAProblem& problem, const double* cameras,
                                   const double* points) {
  Normalization n;
  // The median of an evenly strided sample of at most 100k observations is plenty.
  const int64_t total = problem.num_observations;
  const int64_t stride = std::max<int64_t>(1, total / 100000);
  std::vector<double> depths;
  depths.reserve(static_cast<size_t>(total / stride + 1));
  const std::vector<BalCameraFrame> frames = MakeBalCameraFrames(cameras, problem.num_cameras);
  for (int64_t i = 0; i < total; i += stride) {
    const BalCameraFrame& f = frames[problem.obs_camera[i]];
    const double* X = points + 3 * problem.obs_point[i];
    const double depth = std::abs(f.R[6] * X[0] + f.R[7] * X[1] + f.R[8] * X[2] + f.t[2]);
    if (std::isfinite(depth) && depth > 0) depths.push_back(depth);
  }
  const double depth = Median(depths);
  std::vector<double> focals;
  for (int c = 0; c < problem.num_cameras; ++c) {
    const double f = std::abs(cameras[9 * c + 6]);
    if (std::isfinite(f) && f > 0) focals.push_back(f);
  }
  const double focal = Median(focals);
  auto power_of_two = [](double v) {
    if (!(v > 0) || !std::isfinite(v)) return 1.0;
    return std::ldexp(1.0, std::clamp(static_cast<int>(std::lround(std::log2(v))), -500, 500));
  };
  n.length_scale = power_of_two(depth);
  n.pixel_scale = power_of_two(focal);
  return n;
}

void NormalizeParameters(const Normalization& n, int num_cameras, int num_points,
                         double* cameras, double* points) {
  for (int c = 0; c < num_cameras; ++c) {
    double* cam = cameras + 9 * c;
    for (int k = 3; k < 6; ++k) cam[k] /= n.length_scale;
    cam[6] /= n.pixel_scale;
  }
  const int64_t m = 3LL * num_points;
  ParallelRegion(ScaleThreads(m), [&] {
#pragma omp for schedule(static)
    for (int64_t k = 0; k < m; ++k) points[k] /= n.length_scale;
  });
}

void DenormalizeParameters(const Normalization& n, int num_cameras, int num_points,
                           double* cameras, double* points) {
  for (int c = 0; c < num_cameras; ++c) {
    double* cam = cameras + 9 * c;
    for (int k = 3; k < 6; ++k) cam[k] *= n.length_scale;
    cam[6] *= n.pixel_scale;
  }
  const int64_t m = 3LL * num_points;
  ParallelRegion(ScaleThreads(m), [&] {
#pragma omp for schedule(static)
    for (int64_t k = 0; k < m; ++k) points[k] *= n.length_scale;
  });
}

void NormalizeObservations(const Normalization& n, Scene* scene) {
  double* v = scene->obs_xy.data();
  const int64_t m = static_cast<int64_t>(scene->obs_xy.size());
  ParallelRegion(ScaleThreads(m), [&] {
#pragma omp for schedule(static)
    for (int64_t k = 0; k < m; ++k) v[k] /= n.pixel_scale;
  });
}

void DenormalizeObservations(const Normalization& n, Scene* scene) {
  double* v = scene->obs_xy.data();
  const int64_t m = static_cast<int64_t>(scene->obs_xy.size());
  ParallelRegion(ScaleThreads(m), [&] {
#pragma omp for schedule(static)
    for (int64_t k = 0; k < m; ++k) v[k] *= n.pixel_scale;
  });
}

}  // namespace tiepoint
