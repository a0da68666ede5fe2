#include "sfm/geometry_adapters.h"

#include "solver/geometry/absolute_pose.h"
#include "solver/geometry/fundamental.h"
#include "solver/geometry/ransac_utils.h"
#include "solver/geometry/triangulation.h"

namespace tiepoint {

bool SolveAbsolutePose(const std::vector<Eigen::Vector2d>& normalized,
                       const std::vector<Eigen::Vector3d>& world, double max_error, uint64_t seed,
                       Eigen::Matrix3d* R, Eigen::Vector3d* t, std::vector<uint8_t>* inliers,
                       int* num_inliers) {
  *num_inliers = 0;
  AbsolutePoseOptions options;
  options.max_error = max_error;
  options.seed = seed;
  options.min_inliers = 6;
  AbsolutePose pose;
  if (!EstimateAbsolutePose(normalized, world, options, &pose).ok()) return false;
  *num_inliers = pose.num_inliers;
  if (!pose.found) return false;
  *R = pose.rotation;
  *t = pose.translation;
  *inliers = pose.inlier_mask;
  return true;
}

bool RefineAbsolutePosePair(const std::vector<Eigen::Vector2d>& normalized,
                            const std::vector<Eigen::Vector3d>& world, const std::vector<uint8_t>& inliers,
                            Eigen::Matrix3d* R, Eigen::Vector3d* t, double loss_scale) {
  AbsolutePoseRefineOptions options;
  options.loss_scale = loss_scale;
  return RefineAbsolutePose(normalized, world, inliers, R, t, options);
}

bool RobustTriangulate(const std::vector<Pose34>& poses, const std::vector<Eigen::Vector2d>& normalized,
                       double max_error, double min_angle_rad, Eigen::Vector3d* X,
                       std::vector<uint8_t>* inliers, double* max_angle_rad) {
  RobustTriangulationOptions options;
  options.max_error = max_error;
  options.min_angle_rad = min_angle_rad;
  RobustTriangulation result;
  if (!TriangulateTrackRobust(poses, normalized, options, &result).ok() || !result.found) return false;
  *X = result.point;
  *inliers = result.inlier_mask;
  if (max_angle_rad != nullptr) *max_angle_rad = result.max_angle_rad;
  return true;
}

double PoseSampsonSquaredError(const Eigen::Matrix3d& R, const Eigen::Vector3d& t, const Eigen::Vector2d& x1,
                               const Eigen::Vector2d& x2) {
  return two_view::SampsonSquaredError(two_view::Skew(t.normalized()) * R, x1, x2);
}

}  // namespace tiepoint
