// The bundle-adjustment problem as tiepoint's own solvers see it, built once per solve.
//
// Observations are stored structure-of-arrays and sorted by (point, camera), so the
// observations of point p are the contiguous range [point_ptr[p], point_ptr[p+1]):
// this is the block-CSR row pointer of J_p and of the Schur elimination. A camera-major
// index (camera_obs, ranges camera_ptr) lists the same observations by (camera, point),
// for J_c^T products and for assembling the reduced camera system row by row, so no two
// threads ever write the same block.
#pragma once

#include <cstdint>
#include <vector>

#include "io/base/status.h"
#include "io/scene.h"

namespace tiepoint {

struct BAProblem {
  int num_cameras = 0;
  int num_points = 0;
  int64_t num_observations = 0;

  // Sorted by (point, camera).
  std::vector<int32_t> obs_camera;
  std::vector<int32_t> obs_point;
  std::vector<double> obs_xy;           // 2 per observation

  std::vector<int64_t> point_ptr;       // num_points + 1
  std::vector<int64_t> camera_ptr;      // num_cameras + 1
  std::vector<int32_t> camera_obs;      // observation ids ordered by (camera, point)

  // Parameter masks: 1 where the parameter is held constant. 9 per camera.
  std::vector<uint8_t> camera_param_fixed;
  bool has_fixed_parameters = false;

  // Builds the structure from a scene; `fixed_cameras` and `fix_intrinsics` fill the mask.
  // Indices are assumed valid (the reader checked them); the gauge is not fixed here.
  static Status Build(const Scene& scene, const std::vector<int>& fixed_cameras,
                      bool fix_intrinsics, int num_threads, BAProblem* problem);
};

}  // namespace tiepoint
