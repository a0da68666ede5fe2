// The mapper's view of solver/geometry/: absolute pose and robust triangulation in the
// form the mapper uses (Eigen types, normalized image coordinates, thresholds in
// normalized units = pixels / focal length).
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <vector>

namespace tiepoint {

using Pose34 = Eigen::Matrix<double, 3, 4>;  // cam_from_world [R | t]

// P3P in LO-RANSAC plus refinement on the inliers. Returns false when no pose was found;
// *num_inliers is set either way (0 when nothing was found).
bool SolveAbsolutePose(const std::vector<Eigen::Vector2d>& normalized,
                       const std::vector<Eigen::Vector3d>& world, double max_error, uint64_t seed,
                       Eigen::Matrix3d* R, Eigen::Vector3d* t, std::vector<uint8_t>* inliers,
                       int* num_inliers);

// Refinement of a pose on the correspondences flagged in `inliers` (all when empty), least
// squares or, with loss_scale > 0 (normalized units), under a Cauchy loss; false (pose
// untouched) when it cannot be refined.
bool RefineAbsolutePosePair(const std::vector<Eigen::Vector2d>& normalized,
                            const std::vector<Eigen::Vector3d>& world, const std::vector<uint8_t>& inliers,
                            Eigen::Matrix3d* R, Eigen::Vector3d* t, double loss_scale = 0);

// A point from two or more views that agrees with as many of them as possible (within
// max_error, in front, from a pair of views at least min_angle_rad apart), refined on
// those. False when no pair of views gives such a point. *max_angle_rad, when given: the
// largest triangulation angle between two inlier views at X.
bool RobustTriangulate(const std::vector<Pose34>& poses, const std::vector<Eigen::Vector2d>& normalized,
                       double max_error, double min_angle_rad, Eigen::Vector3d* X,
                       std::vector<uint8_t>* inliers, double* max_angle_rad = nullptr);

// Squared Sampson distance (normalized units) of x1 <-> x2 to the epipolar geometry of the
// relative pose cam2_from_cam1 (R, t), t of any non-zero length.
double PoseSampsonSquaredError(const Eigen::Matrix3d& R, const Eigen::Vector3d& t, const Eigen::Vector2d& x1,
                               const Eigen::Vector2d& x2);

}  // namespace tiepoint
