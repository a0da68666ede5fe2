// Fundamental-matrix estimation (internal to solver/; the public entry point is
// solver/geometry/two_view_geometry.h).
//
// x2^T F x1 = 0 for homogeneous pixel coordinates. Each correspondence gives one row
// (x2 x1, x2 y1, x2, y2 x1, y2 y1, y2, x1, y1, 1) . vec_rowmajor(F) = 0.
//  - 7 points (Hartley & Zisserman, sec. 11.1.2): the 7x9 system has a 2-dimensional
//    null space {a F1 + (1 - a) F2}; det(a F1 + (1 - a) F2) = 0 is a cubic in a whose
//    1 or 3 real roots give rank-2 solutions.
//  - 8 or more points: least-squares null vector, then the smallest singular value set
//    to zero (closest rank-2 matrix in Frobenius norm).
// Callers pass Hartley-normalised coordinates for conditioning.
#pragma once

#include <Eigen/Core>
#include <vector>

namespace tiepoint {
namespace two_view {

// Up to 3 rank-2 fundamental matrices from exactly 7 correspondences; returns how many
// (0 for a degenerate sample).
int FundamentalFromSevenPoints(const Eigen::Vector2d x1[7], const Eigen::Vector2d x2[7],
                               Eigen::Matrix3d F[3]);

// Least-squares 8-point solution over `indices` (>= 8), rank 2 enforced.
bool FundamentalLeastSquares(const std::vector<Eigen::Vector2d>& x1,
                             const std::vector<Eigen::Vector2d>& x2,
                             const std::vector<int>& indices, Eigen::Matrix3d* F);

// Squared Sampson distance (x2^T F x1)^2 / ((F x1)_1^2 + (F x1)_2^2 + (F^T x2)_1^2 +
// (F^T x2)_2^2), in the units of the coordinates.
double SampsonSquaredError(const Eigen::Matrix3d& F, const Eigen::Vector2d& x1,
                           const Eigen::Vector2d& x2);

// Levenberg-Marquardt on the signed Sampson distances (pixels) of `indices`, with F kept
// rank 2 by the parametrisation Fn = U diag(1, s, 0) V^T in Hartley-normalised
// coordinates (7 degrees of freedom: rotations of U and V, and s). Returns F in pixels,
// Frobenius norm 1. With robust_scale_px > 0 each residual goes through the Cauchy loss
// of that scale (ransac_utils.h).
Eigen::Matrix3d RefineFundamental(const Eigen::Matrix3d& F, const std::vector<Eigen::Vector2d>& x1,
                                  const std::vector<Eigen::Vector2d>& x2,
                                  const std::vector<int>& indices, double robust_scale_px = 0.0);

// The closest rank-2 matrix (Frobenius) to M.
Eigen::Matrix3d EnforceRankTwo(const Eigen::Matrix3d& M);

}  // namespace two_view
}  // namespace tiepoint
