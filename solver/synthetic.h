// Synthetic bundle-adjustment problems with the statistics of real BAL files.
//
// Cameras stand on a ring around the scene (with jitter in height and radius) and look
// at it; focal lengths are drawn in [500, 1500] px, k1 and k2 small; points fill a
// ball inside the ring. Each point is observed by about `observations_per_point` cameras
// chosen among those that see it in front and inside a 2*f-wide image; observations get
// Gaussian pixel noise. The initial parameters are the truth perturbed (rotation,
// translation, focal length, point position). Deterministic for a seed, whatever the
// thread count: each point draws from its own counter-based random stream.
#pragma once

#include <cstdint>

#include "io/base/status.h"
#include "io/scene.h"

namespace tiepoint {

struct SyntheticOptions {
  // Number of cameras (>= 2).
  int num_cameras = 50;
  // Number of points (>= 1).
  int num_points = 10000;
  // Mean number of cameras observing a point (>= 2, <= num_cameras).
  double observations_per_point = 4.0;
  // Standard deviation of the pixel noise added to observations.
  double noise_px = 0.5;
  // Seed of every random draw.
  uint64_t seed = 1;
  // Perturbation of the initial values (standard deviations): rotation in radians,
  // translation and points relative to the scene radius, focal length relative.
  double rotation_noise = 2e-3;
  double translation_noise = 5e-3;
  double point_noise = 5e-3;
  double focal_noise = 2e-3;
  // Worker threads; 0 means all hardware threads.
  int num_threads = 0;
  // One physical camera: every camera gets camera 0's focal length and distortion, in the
  // truth and in the initial values (a problem for shared-intrinsics bundle adjustment,
  // bench/reconstruction_ba_bench --single-camera).
  bool shared_intrinsics = false;

  Status Check() const;
};

// Fills `initial` (perturbed, what a solver starts from) and `truth` (the exact
// parameters; same observations). `truth` may be null; `initial` must not be.
Status MakeSyntheticProblem(const SyntheticOptions& options, Scene* initial, Scene* truth);

}  // namespace tiepoint
