// Pyramidal inverse-compositional Lucas-Kanade tracking with affine illumination (gain and
// bias), one feature at a time, and a forward-backward check (after Baker & Matthews,
// "Lucas-Kanade 20 Years On", IJCV 2004, and Nagy, Foehn & Scaramuzza, IROS 2020). This is
// the CPU reference (OpenMP over features); features/lk_cuda.cu runs a warp per feature and
// agrees to well under 0.01 px.
//
// Model, on pyramid level l (features/pyramid.h; a level-0 point p sits at p / 2^l):
// template T is the P x P patch of the previous frame centred on the feature, sampled
// bilinearly at offsets (i - (P-1)/2, j - (P-1)/2), i, j = 0..P-1 (P = 16 on levels below
// coarse_level, 8 from it up); its gradient is the central difference of bilinear samples
// one pixel apart. The next frame's patch is matched as
//     I(x + d) ~ (1 + alpha) T(x) + beta
// minimising sum_x e(x)^2, e = I(x + d) - (1 + alpha) T(x) - beta, over
// q = (d_x, d_y, alpha, beta) by Gauss-Newton with the template's Jacobian
//     J = [ (1 + alpha) grad T, T, 1 ]   (sign folded into the update),
// so sum J J^T = S G S with G = sum u u^T, u = [gx gy T 1], computed once per level and
// S = diag(1 + alpha, 1 + alpha, -1, -1): no image gradient of the next frame is ever taken
// (the inverse-compositional saving). Each iteration solves G z = sum u e (Cholesky of G,
// factored once per level) and updates d -= (z_0, z_1) / (1 + alpha), alpha += z_2,
// beta += z_3, until |delta d| < min_step (level pixels) or max_iterations on level 0
// (upper_min_step and upper_max_iterations on the levels above).
// Intensities are 8-bit values (0..255); beta is in those units.
// Coarse to fine: d at level l+1 doubles into level l; alpha and beta carry over.
// Samples outside a level are clamped to its border.
//
// Linear prediction (LkLinearMap A, fixed during the solve): the next frame's sample of
// template offset x is read at A x + d instead of x + d, so that a patch turned or zoomed
// by a known amount (a gyro's rotation, or one fitted to the tracks of a first pass:
// TrackWithLinearPrediction in features/frontend.h) is matched without changing the
// model: the inverse-compositional update of W(x) = A x + d by a template translation
// delta is W o W(delta)^-1, i.e. d -= A delta; the template, its gradients, G and its
// factor are those of the identity (the template stays in the previous frame). A is the
// same on every level (d scales with the level), and the backward pass uses A^-1.
// A = identity runs the identity code path: bit-identical results to TrackLk without a map.
//
// A feature is lost (LkStatus) when: the 4x4 system is singular or the smallest eigenvalue
// of the level-0 gradient matrix sum grad T grad T^T / P^2 is below min_eigenvalue
// (kFlat); the tracked point leaves the level-0 image (kOutside); tracking it back from the
// next frame to the previous one ends more than fb_threshold level-0 pixels from where it
// started (kForwardBackward; fb_threshold <= 0 disables the backward pass). A level's
// iterations that carry the point more than 64 level pixels from where they started
// (kLkMaxLevelShift in lk_inl.h) have diverged: kOutside too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "features/pyramid.h"
#include "io/base/status.h"

namespace tiepoint {

struct LkOptions {
  // Pyramid levels used (1..8); fewer when the image is too small.
  int levels = 4;
  // Levels >= coarse_level use 8x8 patches, finer ones 16x16. With 4 levels: 16x16 on
  // levels 0-2, 8x8 on level 3 (the patch then reaches 32 level-0 pixels on levels 2 and
  // 3 alike, LkPatchReach). KITTI 00 frames 0-4 (bench/fast_lk_bench.cc, quality): 92.2%
  // of the tracks survive a step, every step >= 90.9%, against 91.3% and a worst step of
  // 89.6% with 8x8 from level 2: the 8x8 level-2 patch (1/4 resolution) loses features
  // whose neighbourhood expands as the car drives on.
  int coarse_level = 3;
  // Gauss-Newton iterations per level, at most. On the GPU the slowest feature sets the
  // kernel's time; on KITTI 10 iterations keep 95% of the features within 0.002 px of
  // their 200-iteration solution (30: 0.0015 px, same survival).
  int max_iterations = 10;
  // Stop a level when the translation update is below this (level pixels).
  float min_step = 0.002f;
  // The same two limits on the levels above the finest (l >= 1), which only have to bring
  // the feature into the next level's basin. On KITTI 00 frames 0-4 (4 levels), 5 and 0.02
  // give the survival and forward-backward error of 10 and 0.002 (86.8% vs 86.7%, 0.019
  // vs 0.020 px): 7-13% of the coarse level solves ran into the cap of 10 (oscillating
  // between bilinear cells), and on the GPU the slowest feature sets the kernel's time.
  int upper_max_iterations = 5;
  float upper_min_step = 0.02f;
  // Smallest eigenvalue of the mean level-0 gradient matrix (grey levels^2 / px^2).
  float min_eigenvalue = 1.0f;
  // Forward-backward threshold in level-0 pixels; <= 0 skips the backward pass.
  // 1 px: on KITTI 00 frames 0-4 the tracks whose forward-backward error lies in
  // (0.5, 2] px are as consistent with the ground-truth epipolar geometry as those below
  // 0.5 px (median distance to the epipolar line 0.8-1.2 px against 0.75-0.94, the pose
  // noise floor), while above 2 px half of them are > 3 px off their epipolar line: the
  // check rejects the wrong tracks there, and 0.5 px rejected good ones (3 points of
  // survival per step).
  float fb_threshold = 1.0f;
  // Estimate gain and bias; false keeps alpha = beta = 0 (translation only).
  bool gain_bias = true;
  // OpenMP threads of the CPU reference; 0 uses all. Never changes the output.
  int num_threads = 0;
  // CUDA only: warps that share one feature (1, 2 or 4), each taking every k-th 32-sample
  // slot of the patch, their partial sums combined through shared memory once per
  // iteration. The kernel is latency-bound (one warp per feature leaves most of the GPU
  // idle for a few hundred features), so splitting a feature's samples shortens each
  // iteration's serial chain. Changes only the summation order (positions move by far
  // less than 0.01 px). H100, 200 KITTI features x 4 levels with the backward pass
  // (bench/results/fast-lk-h100-20261124b.json, default patches): 1 warp 76.2 us, 2 warps
  // 53.2 us, 4 warps 43.0 us (24.4 us forward only); positions within 7e-5 px of each other.
  int cuda_warps_per_feature = 4;

  // Explains the first option out of range, naming the field.
  Status Check() const;
};

enum class LkStatus : uint8_t { kTracked = 0, kFlat, kOutside, kForwardBackward };
const char* ToString(LkStatus status);

struct Point2f {
  float x = 0;
  float y = 0;
};

struct LkResult {
  float x = 0;         // tracked position in the next frame, level-0 pixels
  float y = 0;
  float fb_error = 0;  // |backward(forward(p)) - p|, level-0 pixels (0 when not checked)
  float gain = 1;      // 1 + alpha of the finest level
  float bias = 0;      // beta, grey levels
  LkStatus status = LkStatus::kTracked;
};

// The fixed 2x2 linear part A of the warp x -> A x + d (row-major; see the top).
struct LkLinearMap {
  float a00 = 1, a01 = 0, a10 = 0, a11 = 1;

  bool IsIdentity() const { return a00 == 1 && a01 == 0 && a10 == 0 && a11 == 1; }
  // A^-1 (computed in double; the identity gives the identity exactly).
  LkLinearMap Inverse() const;
  // The rotation (degrees, counter-clockwise in image coordinates: x right, y down) and
  // the scale sqrt(det A) of the map's similarity part.
  double RotationDegrees() const;
  double Scale() const;
  // A similarity: scale * rotation(degrees).
  static LkLinearMap Similarity(double scale, double degrees);
  // Explains a map LK refuses: not finite, det <= 0, or singular values outside
  // [1/4, 4] (patches that shrink or grow that much no longer overlap their template).
  Status Check() const;
};

// Patch side of level `level`.
inline int LkPatchSize(const LkOptions& options, int level) {
  return level >= options.coarse_level ? 8 : 16;
}

// How far (level-0 pixels) the patches of the levels in use reach from a feature:
// max over levels l < levels of 2^l * patch(l) / 2 (32 for the defaults: 16x16 on level 2
// and 8x8 on level 3).
inline int LkPatchReach(const LkOptions& options, int levels) {
  int reach = 0;
  for (int l = 0; l < levels; ++l) {
    const int r = (1 << l) * LkPatchSize(options, l) / 2;
    reach = r > reach ? r : reach;
  }
  return reach;
}

// Tracks `points` (level-0 pixels of the previous frame) into the next frame. `guesses`
// (optional, same size) are predicted positions in the next frame; without them the
// prediction is the point itself. Both pyramids must have the same level-0 size.
Status TrackLk(const ImagePyramid& previous, const ImagePyramid& next,
               const std::vector<Point2f>& points, const std::vector<Point2f>* guesses,
               const LkOptions& options, std::vector<LkResult>* results);
// The same with the linear prediction `map` (see the top): the next frame's patch of each
// feature is sampled at map * offset + d; the backward pass uses map^-1.
Status TrackLk(const ImagePyramid& previous, const ImagePyramid& next,
               const std::vector<Point2f>& points, const std::vector<Point2f>* guesses,
               const LkLinearMap& map, const LkOptions& options, std::vector<LkResult>* results);

}  // namespace tiepoint
