#include "solver/two_view_geometry.h"

#include <cmath>
#include <string>

namespace tiepoint {

const char* ToString(TwoViewModel m) {
  switch (m) {
    case TwoViewModel::kHomography: return "homography";
    case TwoViewModel::kFundamental: return "fundamental";
    case TwoViewModel::kEssential: return "essential";
  }
  return "unknown";
}

Status TwoViewModelFromString(const std::string& text, TwoViewModel* m) {
  for (TwoViewModel t : {TwoViewModel::kHomography, TwoViewModel::kFundamental,
                         TwoViewModel::kEssential}) {
    if (text == ToString(t)) {
      *m = t;
      return Status::Ok();
    }
  }
  return Status::InvalidOptions("two-view model '" + text +
                                "': expected one of homography, fundamental, essential");
}

Status RansacOptions::Check() const {
  auto bad = [](const std::string& m) { return Status::InvalidOptions(m); };
  if (!(max_error_px > 0.0 && std::isfinite(max_error_px))) {
    return bad("max_error_px must be a positive number of pixels, got " + std::to_string(max_error_px));
  }
  if (!(confidence > 0.0 && confidence < 1.0)) {
    return bad("confidence must lie in (0, 1), got " + std::to_string(confidence));
  }
  if (min_iterations < 1 || max_iterations < min_iterations) {
    return bad("RANSAC iteration bounds must satisfy 1 <= min_iterations <= max_iterations (got min " +
               std::to_string(min_iterations) + ", max " + std::to_string(max_iterations) + ")");
  }
  if (min_inliers < 1) return bad("min_inliers must be >= 1, got " + std::to_string(min_inliers));
  return Status::Ok();
}

Status EstimateTwoViewGeometry(TwoViewModel model, const std::vector<std::array<double, 2>>& x1,
                               const std::vector<std::array<double, 2>>& x2,
                               const Intrinsics* intrinsics1, const Intrinsics* intrinsics2,
                               const RansacOptions& options, TwoViewGeometry* result) {
  TIEPOINT_RETURN_IF_ERROR(options.Check());
  if (x1.size() != x2.size()) {
    return Status::InvalidInput("two-view geometry: " + std::to_string(x1.size()) +
                                " points in image 1 but " + std::to_string(x2.size()) +
                                " in image 2 (one per correspondence expected in both)");
  }
  (void)intrinsics1;
  (void)intrinsics2;
  *result = TwoViewGeometry();
  result->model = model;
  result->inlier_mask.assign(x1.size(), 0);
  // Skeleton: the estimators land in the next commit.
  return Status::Ok();
}

}  // namespace tiepoint
