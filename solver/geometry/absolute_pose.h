// Absolute pose (camera resectioning) of a calibrated camera from 2D-3D correspondences.
//
// Conventions:
//  - The pose is cam_from_world: a world point X maps to P = R X + t in the camera frame
//    (x right, y down, z forward), and is seen at the normalized image coordinates
//    (u, v) = (P.x / P.z, P.y / P.z). The caller forms them from pixels after undistortion:
//    u = (x_px - cx) / f, v = (y_px - cy) / f (fx, fy for two focal lengths).
//  - Errors are reprojection errors in normalized units, |(u, v) - proj(R X + t)|: a pixel
//    threshold becomes max_error = max_error_px / f.
//  - Cheirality: a point with P.z <= 0 (behind, or in the plane of, the camera) has
//    infinite error and is never an inlier.
//
// Pipeline (EstimateAbsolutePose):
//  1. Minimal solver: P3P by Lambda Twist (Persson & Nordberg, "Lambda Twist: an accurate
//     fast robust perspective three point (P3P) solver", ECCV 2018). With unit bearings
//     y_i and depths lambda_i (lambda_i y_i = R X_i + t), the three distance constraints
//         lambda^T M_ij lambda = a_ij = |X_i - X_j|^2,
//         M_ij = e_i e_i^T + e_j e_j^T - b_ij (e_i e_j^T + e_j e_i^T),  b_ij = y_i . y_j,
//     give the two homogeneous conics D1 = a23 M12 - a12 M23 and D2 = a23 M13 - a13 M23
//     (lambda^T D lambda = 0). A real root gamma of the cubic det(D1 + gamma D2) = 0 makes
//     D0 = D1 + gamma D2 a degenerate conic, a pair of planes through the origin; on each
//     plane the remaining quadratic gives at most two rays, scaled to satisfy the
//     distances: at most 4 solutions with all lambda_i > 0, each polished by Gauss-Newton
//     on the three distance equations. (R, t) then follows from the two triangles.
//  2. LO-RANSAC (solver/geometry/ransac.h): MSAC scoring with the threshold above,
//     adaptive stopping N = log(1 - confidence) / log(1 - w^3), and on every new best
//     model a local optimisation that re-fits the pose to its inliers by nonlinear least
//     squares (RefineAbsolutePose) while the MSAC cost drops.
//  3. The best pose is refined by Levenberg-Marquardt on the reprojection error of its
//     inliers (RefineAbsolutePose), the inliers re-counted and the refinement repeated
//     (at most 3 rounds) while the MSAC cost drops.
//
// Deterministic for a seed; single-threaded; reentrant.
#pragma once

#include <Eigen/Core>

#include <cstdint>
#include <vector>

#include "io/base/status.h"

namespace tiepoint {

struct AbsolutePoseOptions {
  // Inlier threshold on the reprojection error, in normalized units (pixels / focal
  // length: e.g. 4 px at f = 1000 is 0.004). > 0.
  double max_error = 0.004;
  // Adaptive stopping: stop once P(an all-inlier sample was drawn) >= confidence. In (0, 1).
  double confidence = 0.9999;
  // Iteration bounds of RANSAC: 1 <= min_iterations <= max_iterations.
  int min_iterations = 50;
  int max_iterations = 10000;
  // Seed of the sampler: same seed, same inputs -> same result.
  uint64_t seed = 0;
  // A pose with fewer inliers than this is reported as not found. >= 3 (the minimal sample;
  // COLMAP's mapper asks for 30 to register an image).
  int min_inliers = 6;
  // Refine the best pose on its inliers (step 3 above). Off: the LO-RANSAC pose as is.
  bool refine = true;

  // Explains bad values in words (kInvalidOptions naming the field).
  Status Check() const;
};

struct AbsolutePose {
  // A pose with >= min_inliers inliers was found. When false, the fields below hold the
  // best pose seen (identity and zero if none) and its inliers, for diagnostics.
  bool found = false;
  // cam_from_world: P = rotation * X + translation.
  Eigen::Matrix3d rotation = Eigen::Matrix3d::Identity();
  Eigen::Vector3d translation = Eigen::Vector3d::Zero();
  // One entry per correspondence: 1 for an inlier of the final pose (error <= max_error
  // and in front of the camera), else 0.
  std::vector<uint8_t> inlier_mask;
  int num_inliers = 0;
  // RANSAC iterations drawn (samples, including degenerate ones rejected at once).
  int ransac_iterations = 0;
  // Root mean square reprojection error over the final inliers, normalized units.
  double inlier_rms_error = 0.0;
};

// normalized[i] (normalized image coordinates, see the top of this file) observes world[i].
// Returns OK with result->found = false when there are fewer than max(3, min_inliers)
// correspondences, the points are degenerate (e.g. all collinear) or no pose reaches
// min_inliers inliers. kInvalidInput for mismatched sizes or non-finite values (naming
// the index), kInvalidOptions for bad options. `result` must not be null.
Status EstimateAbsolutePose(const std::vector<Eigen::Vector2d>& normalized,
                            const std::vector<Eigen::Vector3d>& world,
                            const AbsolutePoseOptions& options, AbsolutePose* result);

// Lambda Twist P3P: every pose cam_from_world (R, t) with lambda_i bearing[i] = R world[i] + t
// for some lambda_i > 0 (i = 0, 1, 2): the points lie on the rays, in the direction the
// bearings point (for normalized coordinates (u, v, 1): in front of the camera). The
// bearings need not be unit length. Appends to *R, *t and returns how many (0 to 4; 0 for
// collinear or coincident world points, or parallel bearings). ~5 us per call.
int SolveP3P(const Eigen::Vector3d bearing[3], const Eigen::Vector3d world[3],
             std::vector<Eigen::Matrix3d>* R, std::vector<Eigen::Vector3d>* t);

struct AbsolutePoseRefineOptions {
  // Levenberg-Marquardt iterations at most.
  int max_iterations = 50;
  // > 0: Cauchy loss of this scale (normalized units) on the reprojection errors,
  // rho(e^2) = c^2 log(1 + e^2 / c^2), for refining on a set that may hold outliers.
  // <= 0: least squares.
  double loss_scale = 0.0;
};

struct AbsolutePoseRefineSummary {
  // Root mean square reprojection error (normalized units) over the points used, before
  // and after (points behind the camera count as not used).
  double initial_rms_error = 0.0;
  double final_rms_error = 0.0;
  int iterations = 0;
};

// Levenberg-Marquardt on the reprojection error (normalized units) of the correspondences
// with inlier_mask[i] != 0, over the 6 parameters of the pose: the rotation as an
// angle-axis update R <- exp([w]x) R and the translation t <- t + dt (analytic Jacobian).
// *R, *t (cam_from_world) are the start and receive the result; the cost never rises.
// inlier_mask may be empty, meaning all correspondences. Returns false (pose untouched)
// for fewer than 3 usable points (selected, finite, in front of the start pose), mismatched
// sizes or a non-finite start. `summary` is optional.
bool RefineAbsolutePose(const std::vector<Eigen::Vector2d>& normalized,
                        const std::vector<Eigen::Vector3d>& world,
                        const std::vector<uint8_t>& inlier_mask, Eigen::Matrix3d* R,
                        Eigen::Vector3d* t, const AbsolutePoseRefineOptions& options = {},
                        AbsolutePoseRefineSummary* summary = nullptr);

// Squared reprojection error (normalized units^2) of world point X seen at `normalized`
// under cam_from_world (R, t); +infinity when X is not in front of the camera (P.z <= 0).
double SquaredReprojectionError(const Eigen::Matrix3d& R, const Eigen::Vector3d& t,
                                const Eigen::Vector3d& X, const Eigen::Vector2d& normalized);

}  // namespace tiepoint
