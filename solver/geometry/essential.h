// Essential-matrix estimation and relative pose (internal to solver/; the public entry
// point is solver/geometry/two_view_geometry.h).
//
// Normalised coordinates u = K^-1 (x, y, 1)^T. E = [t]x R for the pose cam2_from_cam1
// (X2 = R X1 + t), so u2^T E u1 = 0.
//
// Five-point solver (after Nister, "An efficient solution to the five-point relative pose
// problem", PAMI 2004, and Stewenius, Engels & Nister, "Recent developments on direct
// relative orientation", ISPRS J. 2006): the 5x9 epipolar system leaves
// E = x X + y Y + z Z + W (null-space basis X, Y, Z, W). The constraints
//     det(E) = 0,     2 E E^T E - trace(E E^T) E = 0
// are 10 cubic polynomials in (x, y, z), i.e. a 10x20 matrix over the monomials of
// degree <= 3. Eliminating the 10 cubic monomials leaves each one as a combination of
// the 10 monomials b = (x^2, xy, xz, y^2, yz, z^2, x, y, z, 1); multiplication by x maps
// span(b) into itself (x b_i is cubic or in b), and the 10x10 matrix of that map has
// b(solution) as eigenvectors with eigenvalue x. Real eigenvalues give up to 10 E: only the
// eigenvalues are computed, each eigenvector then from six of its rows, which are linear
// in its unknown entries (y^2, yz, z^2, y, z) once x is known (the solutions agree with
// the full eigendecomposition's to 1.5e-9 on 2,000 random samples, at 14.4 instead of
// 19.4 us a call).
#pragma once

#include <Eigen/Core>
#include <vector>

namespace tiepoint {
namespace two_view {

// Essential matrices (each scaled to Frobenius norm sqrt(2)) from exactly 5
// correspondences of normalised coordinates (u = (x, y, 1)). Appends to *E and returns
// how many (0 for a degenerate sample).
int EssentialFromFivePoints(const Eigen::Vector3d u1[5], const Eigen::Vector3d u2[5],
                            std::vector<Eigen::Matrix3d>* E);

// Linear least squares over `indices` (>= 8) followed by projection onto the essential
// manifold (singular values (1, 1, 0)).
bool EssentialLeastSquares(const std::vector<Eigen::Vector3d>& u1,
                           const std::vector<Eigen::Vector3d>& u2,
                           const std::vector<int>& indices, Eigen::Matrix3d* E);

// The four (R, t) with E ~ [t]x R, |t| = 1, det R = +1.
void DecomposeEssential(const Eigen::Matrix3d& E, Eigen::Matrix3d R[4], Eigen::Vector3d t[4]);

// True when the ray pair (u1, u2) triangulates in front of both cameras for the pose
// (R, t) = cam2_from_cam1.
bool InFrontOfBoth(const Eigen::Matrix3d& R, const Eigen::Vector3d& t, const Eigen::Vector3d& u1,
                   const Eigen::Vector3d& u2);

// Of the four decompositions of E, the one with the most of `indices` in front of both
// cameras; returns that count.
int PoseFromEssential(const Eigen::Matrix3d& E, const std::vector<Eigen::Vector3d>& u1,
                      const std::vector<Eigen::Vector3d>& u2, const std::vector<int>& indices,
                      Eigen::Matrix3d* R, Eigen::Vector3d* t);

// The pixel-space fundamental matrix K2^-T E K1^-1.
Eigen::Matrix3d FundamentalFromEssential(const Eigen::Matrix3d& E, const Eigen::Matrix3d& K1,
                                         const Eigen::Matrix3d& K2);

// Levenberg-Marquardt on the signed Sampson distances in pixels (of the fundamental
// matrix K2^-T [t]x R K1^-1) of `indices`, over R (3 parameters, R exp([w]x)) and the
// direction of t (2 parameters). x1/x2 in pixels. With robust_scale_px > 0 the squared
// residuals go through the Cauchy loss c^2 log(1 + e^2 / c^2), c = robust_scale_px.
void RefineRelativePose(const std::vector<Eigen::Vector2d>& x1, const std::vector<Eigen::Vector2d>& x2,
                        const Eigen::Matrix3d& K1, const Eigen::Matrix3d& K2,
                        const std::vector<int>& indices, Eigen::Matrix3d* R, Eigen::Vector3d* t,
                        double robust_scale_px = 0.0);

// First-order standard error of the rotation of the pose (R, t) fitted to `indices` by
// least squares on the Sampson distance, with isotropic Gaussian noise of sigma_px per
// image coordinate: the Sampson distance is the first-order distance of (x1, x2) to the
// epipolar geometry with the 3D point profiled out, so the pose's covariance is
// sigma^2 (J^T J)^-1, J = d(Sampson) / d(pose) over the 5 parameters of
// RefineRelativePose (central differences). Returns sqrt(trace of its rotation block),
// radians: the RMS rotation error to expect (at the true pose: the Cramer-Rao bound).
// Infinity for fewer than 6 indices or a singular J^T J.
double RotationStandardError(const std::vector<Eigen::Vector2d>& x1, const std::vector<Eigen::Vector2d>& x2,
                             const Eigen::Matrix3d& K1, const Eigen::Matrix3d& K2,
                             const std::vector<int>& indices, const Eigen::Matrix3d& R,
                             const Eigen::Vector3d& t, double sigma_px);

}  // namespace two_view
}  // namespace tiepoint
