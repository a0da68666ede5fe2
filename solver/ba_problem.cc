#include "solver/ba_problem.h"

#include <omp.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <numeric>

namespace tiepoint {

Status BAProblem::Build(const Scene& scene, const std::vector<int>& fixed_cameras,
                        bool fix_intrinsics, int num_threads, BAProblem* problem) {
  BAProblem& p = *problem;
  p = BAProblem();
  p.num_cameras = scene.num_cameras();
  p.num_points = scene.num_points();
  p.num_observations = scene.num_observations();
  const int64_t n = p.num_observations;
  if (n > INT32_MAX) {
    return Status::InvalidInput("more than 2^31-1 observations: not supported");
  }

  // Counting sort by point, stable in camera order: sort each point's slice by camera
  // afterwards (slices are short, a few to a few hundred observations).
  p.point_ptr.assign(p.num_points + 1, 0);
  for (int64_t i = 0; i < n; ++i) ++p.point_ptr[scene.obs_point[i] + 1];
  std::partial_sum(p.point_ptr.begin(), p.point_ptr.end(), p.point_ptr.begin());
  // Scene position of each sorted observation (a temporary: freed after the copy).
  std::vector<int32_t> scene_index(n);
  {
    std::vector<int64_t> next(p.point_ptr.begin(), p.point_ptr.end() - 1);
    for (int64_t i = 0; i < n; ++i) scene_index[next[scene.obs_point[i]]++] = static_cast<int32_t>(i);
  }
#pragma omp parallel for num_threads(num_threads > 0 ? num_threads : omp_get_max_threads()) schedule(static)
  for (int j = 0; j < p.num_points; ++j) {
    std::sort(scene_index.begin() + p.point_ptr[j], scene_index.begin() + p.point_ptr[j + 1],
              [&](int32_t a, int32_t b) { return scene.obs_camera[a] < scene.obs_camera[b]; });
  }
  p.obs_camera.resize(n);
  p.obs_point.resize(n);
  p.obs_xy.resize(2 * n);
#pragma omp parallel for num_threads(num_threads > 0 ? num_threads : omp_get_max_threads()) schedule(static)
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = scene_index[k];
    p.obs_camera[k] = scene.obs_camera[i];
    p.obs_point[k] = scene.obs_point[i];
    p.obs_xy[2 * k] = scene.obs_xy[2 * i];
    p.obs_xy[2 * k + 1] = scene.obs_xy[2 * i + 1];
  }

  // Camera-major index; a stable counting sort keeps point order within a camera.
  p.camera_ptr.assign(p.num_cameras + 1, 0);
  for (int64_t k = 0; k < n; ++k) ++p.camera_ptr[p.obs_camera[k] + 1];
  std::partial_sum(p.camera_ptr.begin(), p.camera_ptr.end(), p.camera_ptr.begin());
  p.camera_obs.resize(n);
  {
    std::vector<int64_t> next(p.camera_ptr.begin(), p.camera_ptr.end() - 1);
    for (int64_t k = 0; k < n; ++k) p.camera_obs[next[p.obs_camera[k]]++] = static_cast<int32_t>(k);
  }

  p.camera_param_fixed.assign(static_cast<size_t>(kCameraParams) * p.num_cameras, 0);
  for (int c : fixed_cameras) {
    if (c < 0 || c >= p.num_cameras) {
      return Status::InvalidOptions("fixed camera index " + std::to_string(c) +
                                    " is out of range: the scene has " +
                                    std::to_string(p.num_cameras) + " cameras");
    }
    std::fill_n(p.camera_param_fixed.begin() + kCameraParams * c, kCameraParams, 1);
  }
  if (fix_intrinsics) {
    for (int c = 0; c < p.num_cameras; ++c) {
      for (int k = 6; k < 9; ++k) p.camera_param_fixed[kCameraParams * c + k] = 1;
    }
  }
  p.has_fixed_parameters = fix_intrinsics || !fixed_cameras.empty();
  return Status::Ok();
}

}  // namespace tiepoint
