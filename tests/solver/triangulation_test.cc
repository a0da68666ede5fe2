// Triangulation: exact on noise-free data (two-view and multi-view DLT), DLT + refinement
// within the noise, camera centres, depths, cheirality and angles against hand-worked
// geometry, degenerate input, and robust triangulation of a track with outlier views.
#include "solver/geometry/triangulation.h"

#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <Eigen/Geometry>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace tiepoint {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kFocal = 1000.0;  // pixels: noise and thresholds below are px / kFocal

CamFromWorld MakePose(const Eigen::Matrix3d& R, const Eigen::Vector3d& t) {
  CamFromWorld P;
  P << R, t;
  return P;
}

// A camera at `center` looking at `target` (z forward, y roughly down).
CamFromWorld LookAt(const Eigen::Vector3d& center, const Eigen::Vector3d& target) {
  const Eigen::Vector3d z = (target - center).normalized();
  const Eigen::Vector3d x = Eigen::Vector3d::UnitY().cross(z).normalized();
  const Eigen::Vector3d y = z.cross(x);
  Eigen::Matrix3d R;
  R.row(0) = x;
  R.row(1) = y;
  R.row(2) = z;
  return MakePose(R, -R * center);
}

Eigen::Vector2d Project(const CamFromWorld& P, const Eigen::Vector3d& X) {
  return (P.leftCols<3>() * X + P.col(3)).hnormalized();
}

// n cameras on an arc of `arc_deg` degrees at distance 10 around the origin, all looking at it.
std::vector<CamFromWorld> Ring(int n, double arc_deg) {
  std::vector<CamFromWorld> cams;
  for (int i = 0; i < n; ++i) {
    const double a = (n == 1 ? 0.0 : (i / (n - 1.0) - 0.5)) * arc_deg * kPi / 180.0;
    cams.push_back(LookAt(Eigen::Vector3d(10.0 * std::sin(a), -1.0, -10.0 * std::cos(a)), Eigen::Vector3d::Zero()));
  }
  return cams;
}

TEST(Triangulation, CentresDepthsAndAngles) {
  const Eigen::Matrix3d R = Eigen::AngleAxisd(0.3, Eigen::Vector3d(1, 2, 2).normalized()).toRotationMatrix();
  const Eigen::Vector3d C(1.0, -2.0, 3.0);
  const CamFromWorld P = MakePose(R, -R * C);
  EXPECT_LT((CameraCenter(P) - C).norm(), 1e-14);
  const Eigen::Vector3d X = C + R.transpose() * Eigen::Vector3d(0.2, 0.1, 4.0);
  EXPECT_NEAR(PointDepth(P, X), 4.0, 1e-12);
  const Eigen::Vector3d behind = C + R.transpose() * Eigen::Vector3d(0.2, 0.1, -4.0);
  EXPECT_NEAR(PointDepth(P, behind), -4.0, 1e-12);
  EXPECT_TRUE(IsInFrontOfAll({P}, X));
  EXPECT_FALSE(IsInFrontOfAll({P}, behind));
  EXPECT_FALSE(IsInFrontOfAll({}, X));
  EXPECT_NEAR(ReprojectionError(P, X, Eigen::Vector2d(0.05, 0.025)), 0.0, 1e-14);
  EXPECT_NEAR(ReprojectionError(P, X, Eigen::Vector2d(0.08, 0.065)), 0.05, 1e-12);
  EXPECT_TRUE(std::isinf(ReprojectionError(P, behind, Eigen::Vector2d(0.05, 0.025))));

  const Eigen::Vector3d c1(-1, 0, 0), c2(1, 0, 0);
  EXPECT_NEAR(TriangulationAngle(c1, c2, Eigen::Vector3d(0, 0, 1)), kPi / 2, 1e-14);
  EXPECT_NEAR(TriangulationAngle(c1, c2, Eigen::Vector3d(0, 0, std::sqrt(3.0))), kPi / 3, 1e-14);
  // Far away: 2 atan(1 / range); atan2 keeps the small angle to full precision.
  EXPECT_NEAR(TriangulationAngle(c1, c2, Eigen::Vector3d(0, 5, 1000)), 2.0 * std::atan(1.0 / std::sqrt(1000.0 * 1000.0 + 25.0)),
              1e-17);
  EXPECT_NEAR(TriangulationAngle(c1, c2, Eigen::Vector3d(3, 0, 0)), 0.0, 1e-14);     // on the baseline
  EXPECT_EQ(TriangulationAngle(c1, c2, c1), 0.0);
}

TEST(Triangulation, ExactOnNoiseFreeData) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  const std::vector<CamFromWorld> cams = Ring(6, 60.0);
  for (int trial = 0; trial < 200; ++trial) {
    const Eigen::Vector3d X(2.0 * unit(rng), 2.0 * unit(rng), 2.0 * unit(rng));
    std::vector<Eigen::Vector2d> x;
    for (const auto& P : cams) x.push_back(Project(P, X));
    Eigen::Vector3d Y;
    ASSERT_TRUE(TriangulateTwoView(cams[0], cams[3], x[0], x[3], &Y));
    EXPECT_LT((Y - X).norm(), 1e-9) << trial;
    ASSERT_TRUE(TriangulateMultiView(cams, x, &Y));
    EXPECT_LT((Y - X).norm(), 1e-9) << trial;
    EXPECT_TRUE(IsInFrontOfAll(cams, Y));
    ASSERT_TRUE(RefineTriangulation(cams, x, &Y));
    EXPECT_LT((Y - X).norm(), 1e-9) << trial;
  }
}

// 0.5 px noise at f = 1000 on 5 views of a 40-degree arc at range 10: DLT + refinement
// gives the least-squares point (its cost at or below the true point's, the gradient
// zero), and its RMS 3D error is the Cramer-Rao bound sqrt(sigma^2 trace (J^T J)^-1) of
// the reprojection Jacobian J at the true point (numeric differences here), ~1e-2.
TEST(Triangulation, RefinementReachesTheLeastSquaresPoint) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  const double sigma = 0.5 / kFocal;
  std::normal_distribution<double> noise(0.0, sigma);
  const std::vector<CamFromWorld> cams = Ring(5, 40.0);
  double sum_error2 = 0.0, sum_bound2 = 0.0;
  const int trials = 400;
  for (int trial = 0; trial < trials; ++trial) {
    const Eigen::Vector3d X(unit(rng), unit(rng), unit(rng));
    std::vector<Eigen::Vector2d> x;
    for (const auto& P : cams) x.push_back(Project(P, X) + Eigen::Vector2d(noise(rng), noise(rng)));
    Eigen::Vector3d Y;
    ASSERT_TRUE(TriangulateMultiView(cams, x, &Y));
    auto cost = [&](const Eigen::Vector3d& Z) {
      double c = 0.0;
      for (size_t v = 0; v < cams.size(); ++v) c += std::pow(ReprojectionError(cams[v], Z, x[v]), 2);
      return c;
    };
    const double dlt_cost = cost(Y);
    ASSERT_TRUE(RefineTriangulation(cams, x, &Y));
    EXPECT_LE(cost(Y), dlt_cost * (1.0 + 1e-12));
    EXPECT_LE(cost(Y), cost(X) * (1.0 + 1e-12)) << trial;
    // Zero gradient: a small move in any direction does not lower the cost.
    for (int k = 0; k < 3; ++k) {
      for (double h : {-1e-5, 1e-5}) {
        Eigen::Vector3d Z = Y;
        Z[k] += h;
        EXPECT_GE(cost(Z), cost(Y) * (1.0 - 1e-9)) << trial;
      }
    }
    sum_error2 += (Y - X).squaredNorm();
    Eigen::MatrixXd J(2 * cams.size(), 3);
    for (int k = 0; k < 3; ++k) {
      Eigen::Vector3d d = Eigen::Vector3d::Zero();
      d[k] = 1e-6;
      for (size_t v = 0; v < cams.size(); ++v) {
        J.block<2, 1>(2 * v, k) = (Project(cams[v], X + d) - Project(cams[v], X - d)) / 2e-6;
      }
    }
    sum_bound2 += sigma * sigma * (J.transpose() * J).inverse().trace();
  }
  const double rms = std::sqrt(sum_error2 / trials), bound = std::sqrt(sum_bound2 / trials);
  std::printf("3D RMS error %.5f, Cramer-Rao bound %.5f (range 10, 5 views, 40 degrees, 0.5 px)\n", rms, bound);
  // 400 trials: the RMS of 3 coordinates is within ~3% (one sigma) of its expectation.
  EXPECT_NEAR(rms / bound, 1.0, 0.12);
}

TEST(Triangulation, DegenerateInput) {
  const std::vector<CamFromWorld> cams = Ring(2, 30.0);
  const Eigen::Vector3d X(0.3, 0.2, -0.1);
  const std::vector<Eigen::Vector2d> x = {Project(cams[0], X), Project(cams[1], X)};
  Eigen::Vector3d Y(7, 7, 7);
  EXPECT_FALSE(TriangulateMultiView({cams[0]}, {x[0]}, &Y));
  EXPECT_FALSE(TriangulateMultiView(cams, {x[0]}, &Y));
  EXPECT_FALSE(RefineTriangulation({cams[0]}, {x[0]}, &Y));
  std::vector<Eigen::Vector2d> nan_x = x;
  nan_x[1].y() = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(TriangulateMultiView(cams, nan_x, &Y));
  EXPECT_EQ(Y, Eigen::Vector3d(7, 7, 7));
  // Parallel rays (same direction from two centres side by side): a point at infinity.
  const CamFromWorld a = MakePose(Eigen::Matrix3d::Identity(), Eigen::Vector3d(0, 0, 0));
  const CamFromWorld b = MakePose(Eigen::Matrix3d::Identity(), Eigen::Vector3d(-1, 0, 0));
  EXPECT_FALSE(TriangulateTwoView(a, b, Eigen::Vector2d(0.1, 0.2), Eigen::Vector2d(0.1, 0.2), &Y));
  // Rays that meet behind both cameras: the DLT finds the point, cheirality rejects it,
  // and the refinement refuses to start from it.
  const Eigen::Vector3d behind(0.5, 0.0, -5.0);
  const Eigen::Vector2d xa = (behind).hnormalized();
  const Eigen::Vector2d xb = (behind + Eigen::Vector3d(-1, 0, 0)).hnormalized();
  ASSERT_TRUE(TriangulateTwoView(a, b, xa, xb, &Y));
  EXPECT_LT((Y - behind).norm(), 1e-9);
  EXPECT_FALSE(IsInFrontOfAll({a, b}, Y));
  EXPECT_FALSE(RefineTriangulation({a, b}, {xa, xb}, &Y));
}

TEST(TriangulateTrackRobust, RejectsOutlierViews) {
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::normal_distribution<double> noise(0.0, 0.5 / kFocal);
  const std::vector<CamFromWorld> cams = Ring(8, 60.0);
  RobustTriangulationOptions options;
  options.max_error = 2.0 / kFocal;
  for (int trial = 0; trial < 50; ++trial) {
    const Eigen::Vector3d X(unit(rng), unit(rng), unit(rng));
    std::vector<Eigen::Vector2d> x;
    for (const auto& P : cams) x.push_back(Project(P, X) + Eigen::Vector2d(noise(rng), noise(rng)));
    // Two wrong matches (30 px and 80 px off) in views 2 and 5.
    const int bad1 = 2, bad2 = 5;
    x[bad1] += Eigen::Vector2d(30.0, -10.0) / kFocal;
    x[bad2] += Eigen::Vector2d(-20.0, 80.0) / kFocal;
    RobustTriangulation result;
    ASSERT_TRUE(TriangulateTrackRobust(cams, x, options, &result).ok());
    ASSERT_TRUE(result.found) << trial;
    EXPECT_EQ(result.num_inliers, 6) << trial;
    for (int v = 0; v < 8; ++v) EXPECT_EQ(result.inlier_mask[v], (v == bad1 || v == bad2) ? 0 : 1) << trial;
    EXPECT_LT((result.point - X).norm(), 0.02) << trial;
    EXPECT_LT(result.inlier_rms_error * kFocal, 1.5);
    // Views 0 and 7 (the ends of the arc) are inliers: their angle at the point.
    EXPECT_NEAR(result.max_angle_rad, TriangulationAngle(CameraCenter(cams[0]), CameraCenter(cams[7]), X), 2e-3);
    // Plain DLT over all views is pulled off by the wrong matches.
    Eigen::Vector3d Y;
    ASSERT_TRUE(TriangulateMultiView(cams, x, &Y));
    EXPECT_GT((Y - X).norm(), 0.05) << trial;
  }
}

TEST(TriangulateTrackRobust, SampledPairsOnALongTrack) {
  std::mt19937_64 rng(13);
  std::normal_distribution<double> noise(0.0, 0.5 / kFocal);
  std::uniform_real_distribution<double> coin(0.0, 1.0), unit(-1.0, 1.0);
  const std::vector<CamFromWorld> cams = Ring(40, 90.0);  // 780 pairs > max_pairs
  const Eigen::Vector3d X(0.4, -0.3, 0.2);
  std::vector<Eigen::Vector2d> x;
  std::vector<int> outlier;
  for (const auto& P : cams) {
    const bool out = coin(rng) < 0.3;
    outlier.push_back(out);
    x.push_back(out ? Eigen::Vector2d(0.3 * unit(rng), 0.3 * unit(rng))
                    : Project(P, X) + Eigen::Vector2d(noise(rng), noise(rng)));
  }
  RobustTriangulationOptions options;
  options.max_error = 2.0 / kFocal;
  options.max_pairs = 50;
  RobustTriangulation result, again;
  ASSERT_TRUE(TriangulateTrackRobust(cams, x, options, &result).ok());
  ASSERT_TRUE(result.found);
  EXPECT_LT((result.point - X).norm(), 0.01);
  for (size_t v = 0; v < cams.size(); ++v) {
    if (!outlier[v]) EXPECT_EQ(result.inlier_mask[v], 1) << v;
    // An outlier that lands within 2 px of the true projection is an inlier; none does here.
    if (outlier[v]) EXPECT_EQ(result.inlier_mask[v], 0) << v;
  }
  ASSERT_TRUE(TriangulateTrackRobust(cams, x, options, &again).ok());
  EXPECT_EQ(result.point, again.point);
  EXPECT_EQ(result.inlier_mask, again.inlier_mask);
}

TEST(TriangulateTrackRobust, NarrowBaselineAndBadInput) {
  // Three views 0.05 degrees apart: no pair reaches the 1.5-degree minimum angle.
  const std::vector<CamFromWorld> cams = Ring(3, 0.1);
  const Eigen::Vector3d X(0.1, 0.1, 0.1);
  std::vector<Eigen::Vector2d> x;
  for (const auto& P : cams) x.push_back(Project(P, X));
  RobustTriangulationOptions options;
  RobustTriangulation result;
  ASSERT_TRUE(TriangulateTrackRobust(cams, x, options, &result).ok());
  EXPECT_FALSE(result.found);
  EXPECT_EQ(result.inlier_mask.size(), 3u);
  options.min_angle_rad = 0.0;
  ASSERT_TRUE(TriangulateTrackRobust(cams, x, options, &result).ok());
  EXPECT_TRUE(result.found);
  // One view: nothing to triangulate.
  ASSERT_TRUE(TriangulateTrackRobust({cams[0]}, {x[0]}, options, &result).ok());
  EXPECT_FALSE(result.found);
  // Rays that meet only behind both cameras: no pair gives a point in front.
  const CamFromWorld a = MakePose(Eigen::Matrix3d::Identity(), Eigen::Vector3d(0, 0, 0));
  const CamFromWorld b = MakePose(Eigen::Matrix3d::Identity(), Eigen::Vector3d(-1, 0, 0));
  const Eigen::Vector3d behind(0.5, 0.0, -5.0);
  ASSERT_TRUE(TriangulateTrackRobust({a, b}, {behind.hnormalized(), (behind + Eigen::Vector3d(-1, 0, 0)).hnormalized()},
                                     options, &result).ok());
  EXPECT_FALSE(result.found);
  // Bad input.
  EXPECT_EQ(TriangulateTrackRobust(cams, {x[0]}, options, &result).code(), StatusCode::kInvalidInput);
  std::vector<Eigen::Vector2d> nan_x = x;
  nan_x[1].x() = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(TriangulateTrackRobust(cams, nan_x, options, &result).code(), StatusCode::kInvalidInput);
  RobustTriangulationOptions bad;
  bad.max_error = -1.0;
  EXPECT_EQ(bad.Check().code(), StatusCode::kInvalidOptions);
  bad = RobustTriangulationOptions();
  bad.min_inliers = 1;
  EXPECT_EQ(bad.Check().code(), StatusCode::kInvalidOptions);
  EXPECT_TRUE(RobustTriangulationOptions().Check().ok());
}

}  // namespace
}  // namespace tiepoint
