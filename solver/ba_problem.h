// The bundle-adjustment problem as tiepoint's own solvers see it, built once per solve.
//
// Observations are structure-of-arrays sorted by (point, camera), so the observations of
// point p are the contiguous range [point_ptr[p], point_ptr[p+1]): this is the block-CSR
// row pointer of J_p and of the Schur elimination. A camera-major index (camera_obs,
// ranges camera_ptr) lists the same observations by (camera, point), for J_c^T gathers
// and for assembling the reduced camera system row by row, so no two threads ever write
// the same block; solvers that accumulate per thread instead do without it.
//
// The observation arrays are views: either into a Scene sorted in place (BuildInPlace,
// what the bundle adjusters do, so observations are held once: BAL files are already in
// this order and stay untouched), or into storage the problem owns (Build, a sorted copy
// of a const Scene, for tests and tools). Either way the problem is move-only.
#pragma once

#include <cstdint>
#include <vector>

#include "io/base/status.h"
#include "io/scene.h"

namespace tiepoint {

// What BuildInPlace arranges: kUnsorted only views the observations as they are (no row
// pointers: for solvers that build their structure themselves, on the GPU); kByPoint
// sorts them and fills point_ptr and camera_ptr; kByPointWithCameraIndex adds camera_obs.
enum class BAProblemLayout { kUnsorted, kByPoint, kByPointWithCameraIndex };

// The threads worth starting for per-observation work: at most `requested` (0: all
// hardware threads), and one per kMinObservationsPerThread observations. Below that a
// parallel region costs more than it saves: each one waits for every thread, and on a
// busy machine a thread that is not scheduled stalls the others for a time slice
// (measured on the 2-core machine under load: the first linearization of a 3-camera
// problem took 6-44 ms with 2 threads and 0.07 ms with one).
constexpr int64_t kMinObservationsPerThread = 2048;
int ThreadsForObservations(int requested, int64_t num_observations);

struct BAProblem {
  BAProblem() = default;
  BAProblem(BAProblem&&) = default;
  BAProblem& operator=(BAProblem&&) = default;
  BAProblem(const BAProblem&) = delete;
  BAProblem& operator=(const BAProblem&) = delete;

  int num_cameras = 0;
  int num_points = 0;
  int64_t num_observations = 0;

  // Sorted by (point, camera); num_observations each (obs_xy: 2 each).
  const int32_t* obs_camera = nullptr;
  const int32_t* obs_point = nullptr;
  const double* obs_xy = nullptr;
  // The solve's units are obs_xy / obs_scale (a power of two): 1 when the host arrays are
  // already normalized; the pixel scale when a state divides them itself (the GPU's, while
  // it uploads them: solver/levenberg_marquardt.h).
  double obs_scale = 1.0;

  std::vector<int64_t> point_ptr;       // num_points + 1
  std::vector<int64_t> camera_ptr;      // num_cameras + 1
  std::vector<int32_t> camera_obs;      // observation ids ordered by (camera, point);
                                        // empty unless built with the camera index

  // Parameter masks: 1 where the parameter is held constant. 9 per camera.
  std::vector<uint8_t> camera_param_fixed;
  bool has_fixed_parameters = false;

  // A sorted copy of `scene` (which is left as it is), with the camera index.
  // `fixed_cameras` and `fix_intrinsics` fill the mask. Indices are assumed valid (the
  // reader checked them); the gauge is not fixed here.
  static Status Build(const Scene& scene, const std::vector<int>& fixed_cameras,
                      bool fix_intrinsics, int num_threads, BAProblem* problem);

  // Views the scene's observations, first sorting them by (point, camera) in place unless
  // `layout` is kUnsorted (nothing moves when they already are, as in BAL files): the
  // scene must outlive the problem and keep its observations unchanged in size.
  static Status BuildInPlace(Scene* scene, const std::vector<int>& fixed_cameras,
                             bool fix_intrinsics, BAProblemLayout layout, int num_threads,
                             BAProblem* problem);

 private:
  std::vector<int32_t> own_camera_, own_point_;
  std::vector<double> own_xy_;
};

// True if the scene's observations are sorted by (point, camera).
bool ObservationsSortedByPoint(const Scene& scene);

// Sorts the scene's observations by (point, camera) in place, stable.
Status SortObservationsByPoint(Scene* scene, int num_threads);

}  // namespace tiepoint
