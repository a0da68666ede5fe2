#include "solver/ba_problem.h"

#include <omp.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <numeric>
#include <string>

#include "solver/parallel.h"

namespace tiepoint {

int ThreadsForObservations(int requested, int64_t num_observations) {
  const int64_t hw = requested > 0 ? requested : omp_get_max_threads();
  const int64_t useful = std::max<int64_t>(1, num_observations / kMinObservationsPerThread);
  return static_cast<int>(std::max<int64_t>(1, std::min(hw, useful)));
}
namespace {

int Threads(int n) { return n > 0 ? n : omp_get_max_threads(); }

bool SortedByPoint(const int32_t* cam, const int32_t* pt, int64_t n) {
  for (int64_t i = 1; i < n; ++i) {
    if (pt[i] < pt[i - 1] || (pt[i] == pt[i - 1] && cam[i] < cam[i - 1])) return false;
  }
  return true;
}

// Stable sort of three parallel arrays by (point, camera): a counting sort by point, each
// point's slice (a few to a few hundred observations) sorted by camera, then the
// permutation applied one array at a time (transient memory: 4 + 16 bytes per observation).
void SortArrays(int num_points, int threads, std::vector<int32_t>* cam, std::vector<int32_t>* pt,
                std::vector<double>* xy) {
  const int64_t n = static_cast<int64_t>(cam->size());
  if (SortedByPoint(cam->data(), pt->data(), n)) return;
  std::vector<int64_t> ptr(static_cast<size_t>(num_points) + 1, 0);
  for (int64_t i = 0; i < n; ++i) ++ptr[(*pt)[i] + 1];
  std::partial_sum(ptr.begin(), ptr.end(), ptr.begin());
  std::vector<int32_t> order(n);
  {
    std::vector<int64_t> next(ptr.begin(), ptr.end() - 1);
    for (int64_t i = 0; i < n; ++i) order[next[(*pt)[i]]++] = static_cast<int32_t>(i);
  }
  // Each point's slice by camera: insertion sort (stable, in place; slices are short),
  // std::stable_sort for the rare long ones.
  const int32_t* c = cam->data();
  ParallelRegion(threads, [&] {
#pragma omp for schedule(static)
    for (int j = 0; j < num_points; ++j) {
      int32_t* first = order.data() + ptr[j];
      const int64_t m = ptr[j + 1] - ptr[j];
      if (m > 64) {
        std::stable_sort(first, first + m, [c](int32_t a, int32_t b) { return c[a] < c[b]; });
        continue;
      }
      for (int64_t k = 1; k < m; ++k) {
        const int32_t v = first[k];
        int64_t q = k;
        while (q > 0 && c[first[q - 1]] > c[v]) {
          first[q] = first[q - 1];
          --q;
        }
        first[q] = v;
      }
    }
  });
  {
    std::vector<int32_t> tmp(n);
    ParallelRegion(threads, [&] {
#pragma omp for schedule(static)
      for (int64_t k = 0; k < n; ++k) tmp[k] = (*cam)[order[k]];
    });
    cam->swap(tmp);
    ParallelRegion(threads, [&] {
#pragma omp for schedule(static)
      for (int64_t k = 0; k < n; ++k) tmp[k] = (*pt)[order[k]];
    });
    pt->swap(tmp);
  }
  std::vector<double> tmp(2 * n);
  ParallelRegion(threads, [&] {
#pragma omp for schedule(static)
    for (int64_t k = 0; k < n; ++k) {
      tmp[2 * k] = (*xy)[2 * order[k]];
      tmp[2 * k + 1] = (*xy)[2 * order[k] + 1];
    }
  });
  xy->swap(tmp);
}

Status CheckSize(int64_t n) {
  if (n > INT32_MAX) return Status::InvalidInput("more than 2^31-1 observations: not supported");
  return Status::Ok();
}

// Row pointers over observations sorted by (point, camera), and the camera-major index.
void BuildRowPointers(bool camera_index, BAProblem* problem) {
  BAProblem& p = *problem;
  const int64_t n = p.num_observations;
  p.point_ptr.assign(static_cast<size_t>(p.num_points) + 1, 0);
  for (int64_t i = 0; i < n; ++i) ++p.point_ptr[p.obs_point[i] + 1];
  std::partial_sum(p.point_ptr.begin(), p.point_ptr.end(), p.point_ptr.begin());

  p.camera_ptr.assign(static_cast<size_t>(p.num_cameras) + 1, 0);
  for (int64_t k = 0; k < n; ++k) ++p.camera_ptr[p.obs_camera[k] + 1];
  std::partial_sum(p.camera_ptr.begin(), p.camera_ptr.end(), p.camera_ptr.begin());
  if (camera_index) {
    // A stable counting sort keeps point order within a camera.
    p.camera_obs.resize(n);
    std::vector<int64_t> next(p.camera_ptr.begin(), p.camera_ptr.end() - 1);
    for (int64_t k = 0; k < n; ++k) p.camera_obs[next[p.obs_camera[k]]++] = static_cast<int32_t>(k);
  }
}

// The structure `layout` asks for (nothing for kUnsorted) and the parameter mask, over
// the problem's views.
Status Finish(const std::vector<int>& fixed_cameras, bool fix_intrinsics, BAProblemLayout layout,
              BAProblem* problem) {
  BAProblem& p = *problem;
  if (layout != BAProblemLayout::kUnsorted) {
    BuildRowPointers(layout == BAProblemLayout::kByPointWithCameraIndex, &p);
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

}  // namespace

bool ObservationsSortedByPoint(const Scene& scene) {
  return SortedByPoint(scene.obs_camera.data(), scene.obs_point.data(), scene.num_observations());
}

Status SortObservationsByPoint(Scene* scene, int num_threads) {
  TIEPOINT_RETURN_IF_ERROR(CheckSize(scene->num_observations()));
  SortArrays(scene->num_points(), Threads(num_threads), &scene->obs_camera, &scene->obs_point,
             &scene->obs_xy);
  return Status::Ok();
}

Status BAProblem::Build(const Scene& scene, const std::vector<int>& fixed_cameras,
                        bool fix_intrinsics, int num_threads, BAProblem* problem) {
  BAProblem& p = *problem;
  p = BAProblem();
  TIEPOINT_RETURN_IF_ERROR(CheckSize(scene.num_observations()));
  p.num_cameras = scene.num_cameras();
  p.num_points = scene.num_points();
  p.num_observations = scene.num_observations();
  p.own_camera_ = scene.obs_camera;
  p.own_point_ = scene.obs_point;
  p.own_xy_ = scene.obs_xy;
  SortArrays(p.num_points, Threads(num_threads), &p.own_camera_, &p.own_point_, &p.own_xy_);
  p.obs_camera = p.own_camera_.data();
  p.obs_point = p.own_point_.data();
  p.obs_xy = p.own_xy_.data();
  return Finish(fixed_cameras, fix_intrinsics, BAProblemLayout::kByPointWithCameraIndex, &p);
}

Status BAProblem::BuildInPlace(Scene* scene, const std::vector<int>& fixed_cameras,
                               bool fix_intrinsics, BAProblemLayout layout, int num_threads,
                               BAProblem* problem) {
  BAProblem& p = *problem;
  p = BAProblem();
  TIEPOINT_RETURN_IF_ERROR(CheckSize(scene->num_observations()));
  if (layout != BAProblemLayout::kUnsorted) {
    TIEPOINT_RETURN_IF_ERROR(SortObservationsByPoint(scene, num_threads));
  }
  p.num_cameras = scene->num_cameras();
  p.num_points = scene->num_points();
  p.num_observations = scene->num_observations();
  p.obs_camera = scene->obs_camera.data();
  p.obs_point = scene->obs_point.data();
  p.obs_xy = scene->obs_xy.data();
  return Finish(fixed_cameras, fix_intrinsics, layout, &p);
}

}  // namespace tiepoint
