// Two-view geometric verification: robust estimation of a homography, a fundamental
// matrix or an essential matrix from putative point correspondences (on the CPU).
//
// Pipeline (EstimateTwoViewGeometry):
//  1. RANSAC over minimal samples (solver/geometry/ransac.h): homography from 4 points (Hartley-
//     normalised DLT), fundamental matrix from 7 points (normalised, rank 2 by
//     construction, up to 3 solutions), essential matrix from 5 points (Nister's
//     cubic constraints, solved as the real eigenvalues of a 10x10 action matrix after
//     Stewenius, up to 10 solutions; solver/geometry/essential.h). Models are scored by MSAC, sum_i min(e_i^2, max_error_px^2)
//     (lower is better: the inlier count, with better-fitting inliers winning ties);
//     the number of iterations adapts as
//         N = log(1 - confidence) / log(1 - w^s),
//     w the best inlier ratio seen so far, s the sample size, clamped to
//     [min_iterations, max_iterations].
//  2. Each time a new best model is found, a local optimisation (LO-RANSAC) re-fits the
//     model to all its inliers by linear least squares (DLT for H, 8-point for F and E)
//     and keeps the result while it scores better (at most 4 times).
//  3. The final model is refined on its inliers by Levenberg-Marquardt on the error below
//     (H: transfer residuals x2 - H x1, least squares; F: Sampson distance,
//     least squares, rank 2 kept by the parametrisation; E: Sampson distance in pixels
//     under a Cauchy loss of scale max_error_px / 2 (measured gain: two_view_geometry.cc), over the 5 degrees of freedom of
//     (R, t)); the inliers are re-counted and the refinement repeated (at most 3 rounds)
//     while the MSAC cost drops.
//
// Errors (what max_error_px is compared with), all in pixels:
//  - homography: the transfer distance in image 2, |x2 - H x1| (as OpenCV's
//    findHomography and COLMAP). Measured on Oxford boat with tiepoint SIFT and ratio
//    matching: boat 1-5 corner error 2.49 px (1.98 px with upsampled SIFT), against
//    3.02 (3.75) px when the larger of |x2 - H x1| and |x1 - H^-1 x2| was the error;
//    the other pairs within 0.15 px of each other;
//  - fundamental: the Sampson distance sqrt((x2^T F x1)^2 / (|F x1|_12^2 + |F^T x2|_12^2)),
//    a first-order approximation of the geometric distance to the epipolar geometry
//    (|v|_12 is the norm of the first two components of v);
//  - essential: the Sampson distance of the fundamental matrix F = K2^-T E K1^-1, so the
//    same threshold in pixels works for all three models; in addition the pair must
//    triangulate in front of both cameras for the model's pose (cheirality), else it is
//    an outlier. Each RANSAC sample keeps only the solutions with all 5 points in front.
//
// Coordinates: pixel (0,0) is the centre of the top-left pixel, x right, y down (as
// everywhere in tiepoint). Deterministic for a given seed, whatever num_threads; runs on
// the calling thread unless RansacOptions::num_threads > 1 (OpenMP); reentrant.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "io/base/status.h"

namespace tiepoint {

enum class TwoViewModel { kHomography, kFundamental, kEssential };

// "homography", "fundamental", "essential".
const char* ToString(TwoViewModel m);
// Parses the names ToString returns; anything else is kInvalidOptions naming the choices.
Status TwoViewModelFromString(const std::string& text, TwoViewModel* m);

// Pinhole intrinsics in pixels, without distortion: x_px = fx * X/Z + cx, y_px = fy * Y/Z + cy,
// with pixel (0,0) the centre of the top-left pixel, x right, y down.
struct Intrinsics {
  double fx = 0.0, fy = 0.0, cx = 0.0, cy = 0.0;
};

struct RansacOptions {
  // Inlier threshold in pixels on the model's error (see the top of this file): the
  // transfer distance in image 2 for H, the Sampson distance for F and E. > 0.
  double max_error_px = 3.0;
  // Adaptive stopping: stop once P(an all-inlier sample was drawn) >= confidence. In (0, 1).
  double confidence = 0.9999;
  // Iteration bounds of RANSAC: 1 <= min_iterations <= max_iterations.
  int min_iterations = 100;
  int max_iterations = 10000;
  // Seed of the sampler: same seed, same inputs -> same result.
  uint64_t seed = 0;
  // A model with fewer inliers than this is reported as not verified. >= the minimal
  // sample size of the model (4 for H, 7 for F, 5 for E).
  int min_inliers = 15;
  // Work saved on pairs that cannot verify, without changing what verifies (measured in
  // bench/verify_bench.sh: the same verified pairs and inlier counts):
  //  - fewer correspondences than min_inliers: not verified, RANSAC not run (no model);
  //  - the give-up bound: while the best model has fewer than min_inliers inliers, RANSAC
  //    stops after max(min_iterations, log(1 - confidence) / log(1 - C(m, s) / (2 C(n, s))))
  //    samples (m = min_inliers, n correspondences, s the sample size), by when a model
  //    with m inliers would have been sampled with probability `confidence` even if only
  //    half of its all-inlier samples reproduced it (solver/geometry/ransac.h);
  //  - each hypothesis is scored in chunks with float SIMD residuals and dropped once its
  //    MSAC cost reaches the best one's (exact: it could not win).
  // An unverified pair's diagnostic model and inliers may differ from those of the full
  // search. false: the reference loop (before these changes), every hypothesis scored in
  // full in double precision, for comparisons.
  bool early_stop = true;
  // Threads for one estimation (with early_stop): batches of hypotheses are solved and
  // scored in parallel, then taken in sample order, so the result is the same for any
  // count. For callers that verify fewer pairs at once than they have threads. >= 1.
  int num_threads = 1;
  // How minimal samples are drawn (with early_stop; the reference loop samples uniformly):
  //  - kUniform: s distinct correspondences, uniformly (what the sfm pipeline uses);
  //  - kProsac: PROSAC (Chum & Matas 2005, solver/geometry/ransac.h): samples first from
  //    the best-ranked correspondences (by the match costs passed to
  //    EstimateTwoViewGeometry, lowest first, e.g. descriptor distances; input order when
  //    none are given), the pool growing to all of them by max_iterations samples, and
  //    PROSAC's stopping rule: once a model has >= min_inliers inliers, stop when, for the
  //    prefix of the ranking where it needs the fewest, enough samples were drawn from that
  //    prefix to see an all-inlier one with probability `confidence`, the prefix's inlier
  //    count passing a non-randomness test. Pairs with few inliers among many matches
  //    stop after hundreds of samples instead of max_iterations when their good matches
  //    rank high (bench/verify_bench.sh).
  enum class Sampling { kUniform, kProsac };
  Sampling sampling = Sampling::kUniform;
  // Samples to evaluate instead of drawing them (with early_stop and uniform sampling):
  // groups of the model's minimal sample size (4 for H, 7 for F, 5 for E) of
  // correspondence indices, for example the best samples of the GPU search
  // (solver/geometry/fundamental_cuda.h). RANSAC solves and scores exactly these, in
  // order, with the same local optimisation, then the same refinement as after a search;
  // ransac_iterations counts them. Empty: no model is found. Not owned; null: search.
  const std::vector<int>* candidate_samples = nullptr;

  // Explains bad values in words (kInvalidOptions naming the field).
  Status Check() const;
};

struct TwoViewGeometry {
  TwoViewModel model = TwoViewModel::kHomography;
  // A model with >= min_inliers inliers was found. When false, the fields below hold the
  // best model found (if any; matrix all zeros if none) and its inliers, for diagnostics.
  bool verified = false;
  // Row-major 3x3: H (x2 ~ H x1, pixels, H[8] = 1 when possible), F (x2^T F x1 = 0,
  // pixels, Frobenius norm 1) or E (x2n^T E x1n = 0 in normalized coordinates
  // xn = K^-1 x, E = [t]x R, Frobenius norm sqrt(2)).
  double matrix[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  // Essential matrix only: the pose cam2_from_cam1 (X2 = R X1 + t), row-major R, |t| = 1,
  // chosen among the four decompositions of E as the one that puts most inliers in front
  // of both cameras. Identity and zero for H and F.
  double rotation[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  double translation[3] = {0, 0, 0};
  // One entry per correspondence: 1 for an inlier of the final model, else 0.
  std::vector<uint8_t> inlier_mask;
  int num_inliers = 0;
  // RANSAC iterations drawn (samples, including degenerate ones rejected at once).
  int ransac_iterations = 0;
  // Root mean square of the model's error (pixels, as above) over the final inliers.
  double inlier_rms_error_px = 0.0;
  // Essential matrix only (else 0): how well the inliers fix the rotation, as the
  // first-order standard error of R in degrees, sqrt(trace) of the rotation block of
  // s^2 (J^T J)^-1 with J the Jacobian of the inliers' Sampson distances over the 5 pose
  // parameters at the estimate and s = inlier_rms_error_px (two_view::RotationStandardError).
  // Infinity when no model was found or its inliers do not determine the pose. Large
  // values flag pairs where two views cannot pin the rotation down (narrow field of view,
  // few or clustered inliers):
  // on the Middlebury dino ring (f = 3,310 px on 640x480) 0.89-8.5 degrees on the 14
  // pairs with a pose, on the temple ring 0.15-0.78; the actual errors there are 0.23-54
  // and 0.07-1.6 degrees (bench/essential_bench.cc). First order: where the cost has
  // several basins (the dino) an estimate in the wrong one can be off by more.
  double rotation_uncertainty_deg = 0.0;
};

// x1[i] <-> x2[i] are pixel coordinates of correspondence i in image 1 and image 2.
// intrinsics1/2 are required (non-null, positive focal lengths) for kEssential and
// ignored otherwise.
//
// Returns OK with result->verified = false when there are fewer correspondences than a
// minimal sample (or min_inliers), or no model reaches min_inliers inliers. Returns
// kInvalidInput for mismatched sizes or non-finite coordinates (naming the index),
// kInvalidOptions for bad options or missing/invalid intrinsics. `result` must not be null.
Status EstimateTwoViewGeometry(TwoViewModel model, const std::vector<std::array<double, 2>>& x1,
                               const std::vector<std::array<double, 2>>& x2,
                               const Intrinsics* intrinsics1, const Intrinsics* intrinsics2,
                               const RansacOptions& options, TwoViewGeometry* result);

// The same with a cost per correspondence (lower is better: e.g. the descriptor distance)
// that ranks them for RansacOptions::Sampling::kProsac; null: input order. Ignored with
// uniform sampling. kInvalidInput when its size differs from x1's or a cost is NaN.
Status EstimateTwoViewGeometry(TwoViewModel model, const std::vector<std::array<double, 2>>& x1,
                               const std::vector<std::array<double, 2>>& x2,
                               const std::vector<double>* match_costs,
                               const Intrinsics* intrinsics1, const Intrinsics* intrinsics2,
                               const RansacOptions& options, TwoViewGeometry* result);

// A-contrario significance of an epipolar model's inliers: the number of false alarms of
// Moisan & Stival ("A probabilistic criterion to detect rigid point matches between two
// images and estimate the fundamental matrix", IJCV 2004), as log10 of
//     NFA = (n - s) * m * C(n, s) * P(Binomial(n, p0) >= k),
// the number of models, among those RANSAC could form from minimal samples (s points, up
// to m models each), expected to gather k or more of the n correspondences by chance.
// p0 is the chance rate measured on the pair itself: the fraction of mismatched
// correspondences x1[i] <-> x2[(i + d) mod n], d = 1 .. min(n - 1, 64), whose Sampson
// distance to the model is within max_error_px. It is high where the points cluster and
// the epipolar lines cross the cluster, as between opposite views of a ring around an
// object, where unrelated views reach 15-20 inliers among 60-100 matches by chance.
// k = num_inliers (clamped to [0, n]). A negative result (NFA < 1) says that support so
// large is unlikely to be chance. Returns +infinity when n <= s.
//
// Fundamental matrix (x2^T F x1 = 0, pixels, TwoViewGeometry::matrix of kFundamental):
// s = 7, m = 3.
double FundamentalLog10Nfa(const double F[9], const std::vector<std::array<double, 2>>& x1,
                           const std::vector<std::array<double, 2>>& x2, double max_error_px,
                           int num_inliers);
// Essential matrix (TwoViewGeometry::matrix of kEssential, normalized coordinates) with
// the pair's intrinsics, scored as F = K2^-T E K1^-1 in pixels: s = 5, m = 10.
double EssentialLog10Nfa(const double E[9], const Intrinsics& intrinsics1, const Intrinsics& intrinsics2,
                         const std::vector<std::array<double, 2>>& x1,
                         const std::vector<std::array<double, 2>>& x2, double max_error_px,
                         int num_inliers);

}  // namespace tiepoint
