// Homography estimation from point correspondences (internal to solver/; the public
// entry point is solver/geometry/two_view_geometry.h).
//
// x2 ~ H x1 in homogeneous coordinates. The DLT (Hartley & Zisserman, "Multiple View
// Geometry", 2nd ed., alg. 4.2) stacks, per correspondence (x1, y1) <-> (x2, y2), the two
// rows of [x2]x H x1 = 0 that are linear in h = vec(H):
//     [ 0 0 0   -x1 -y1 -1   y2 x1  y2 y1  y2 ]
//     [ x1 y1 1   0   0   0  -x2 x1 -x2 y1 -x2 ] h = 0,
// and takes h as the null vector (4 points) or the least-squares null vector (more).
// Callers pass Hartley-normalised coordinates for conditioning.
#pragma once

#include <Eigen/Core>
#include <vector>

namespace tiepoint {
namespace two_view {

// H from exactly 4 correspondences. False for a degenerate sample (three collinear
// points in either image, or a rank-deficient system).
bool HomographyFromFourPoints(const Eigen::Vector2d x1[4], const Eigen::Vector2d x2[4],
                              Eigen::Matrix3d* H);

// Least-squares DLT over `indices` (>= 4 points). False when the system is degenerate.
bool HomographyLeastSquares(const std::vector<Eigen::Vector2d>& x1,
                            const std::vector<Eigen::Vector2d>& x2,
                            const std::vector<int>& indices, Eigen::Matrix3d* H);

// Squared transfer error in image 2, |x2 - H x1|^2 (pixels^2); +inf when x1 maps to
// infinity.
double HomographySquaredError(const Eigen::Matrix3d& H, const Eigen::Vector2d& x1, const Eigen::Vector2d& x2);

// Levenberg-Marquardt on the transfer residuals x2 - H x1 (2 per point) of the
// correspondences `indices`, in pixels; H is parametrised in Hartley-normalised
// coordinates with its 8 degrees of freedom. Returns the refined H (pixels, H(2,2) = 1
// when that entry is not ~0). With robust_scale_px > 0 each residual goes through the
// Cauchy loss of that scale (ransac_utils.h).
Eigen::Matrix3d RefineHomography(const Eigen::Matrix3d& H, const std::vector<Eigen::Vector2d>& x1,
                                 const std::vector<Eigen::Vector2d>& x2,
                                 const std::vector<int>& indices, double robust_scale_px = 0.0);

// Scales H to H(2,2) = 1 when |H(2,2)| is not tiny, else to Frobenius norm 1.
Eigen::Matrix3d NormalizeHomographyScale(const Eigen::Matrix3d& H);

}  // namespace two_view
}  // namespace tiepoint
