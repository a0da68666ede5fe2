// Two-view geometry: minimal solvers on exact data, RANSAC + refinement on synthetic
// scenes with noise and outliers (known truth), bad input, and real images with ground
// truth (Middlebury rings: relative rotation; Oxford boat / graf: homography).
#include "solver/geometry/two_view_geometry.h"

#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <algorithm>
#include <array>
#include <cstdlib>
#include <utility>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "features/sift.h"
#include "io/image.h"
#include "io/middlebury.h"
#include "solver/geometry/essential.h"
#include "solver/geometry/fundamental.h"
#include "solver/geometry/homography.h"
#include "solver/geometry/ransac_utils.h"
#include "tests/common/shared_data.h"

namespace tiepoint {
namespace {

using Points = std::vector<std::array<double, 2>>;
constexpr double kPi = 3.14159265358979323846;

Eigen::Matrix3d ToMatrix(const double m[9]) {
  Eigen::Matrix3d M;
  M << m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8];
  return M;
}

// Angle of a rotation matrix, accurate near 0 too (atan2 of sin and cos).
double RotationAngleDeg(const Eigen::Matrix3d& R) {
  const Eigen::Vector3d v(R(2, 1) - R(1, 2), R(0, 2) - R(2, 0), R(1, 0) - R(0, 1));
  return std::atan2(0.5 * v.norm(), 0.5 * (R.trace() - 1.0)) * 180.0 / kPi;
}

// Distance between two matrices up to scale and sign (both scaled to unit norm).
double DistanceUpToScale(const Eigen::Matrix3d& A, const Eigen::Matrix3d& B) {
  const Eigen::Matrix3d a = A / A.norm(), b = B / B.norm();
  return std::min((a - b).norm(), (a + b).norm());
}

Eigen::Vector2d MapH(const Eigen::Matrix3d& H, const Eigen::Vector2d& p) {
  return (H * p.homogeneous()).hnormalized();
}

// Largest distance between where H and H_true map the corners of a w x h image.
double CornerError(const Eigen::Matrix3d& H, const Eigen::Matrix3d& H_true, int w, int h) {
  double worst = 0.0;
  for (const Eigen::Vector2d c : {Eigen::Vector2d(0, 0), Eigen::Vector2d(w - 1, 0),
                                  Eigen::Vector2d(0, h - 1), Eigen::Vector2d(w - 1, h - 1)}) {
    worst = std::max(worst, (MapH(H, c) - MapH(H_true, c)).norm());
  }
  return worst;
}

// A random two-camera scene: camera 1 at the origin, camera 2 = (R, t) looking at a
// box of points 4-8 units in front, intrinsics f = 800, 640 x 480.
struct Scene {
  Intrinsics k{800, 820, 320, 240};
  Eigen::Matrix3d K;
  Eigen::Matrix3d R;
  Eigen::Vector3d t;
  Eigen::Vector3d plane_normal;  // planar scenes: points X1 (camera 1) with n . X1 = 6
  Points x1, x2;
  std::vector<uint8_t> is_inlier;
  std::vector<Eigen::Vector2d> clean1, clean2;  // noise-free inlier projections
};

Eigen::Matrix3d RandomRotation(std::mt19937& rng, double max_angle) {
  std::normal_distribution<double> g(0.0, 1.0);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const Eigen::Vector3d axis = Eigen::Vector3d(g(rng), g(rng), g(rng)).normalized();
  return Eigen::AngleAxisd(max_angle * (0.3 + 0.7 * u(rng)), axis).toRotationMatrix();
}

// planar: points on a plane (for H); else in a box (for F and E).
Scene MakeScene(int num_points, double outlier_fraction, double noise_px, bool planar, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::normal_distribution<double> g(0.0, 1.0);
  Scene s;
  s.K << s.k.fx, 0, s.k.cx, 0, s.k.fy, s.k.cy, 0, 0, 1;
  s.R = RandomRotation(rng, 0.25);
  s.t = Eigen::Vector3d(1.0, 0.2 * g(rng), 0.2 * g(rng));
  s.plane_normal = Eigen::Vector3d(0.2 * g(rng), 0.2 * g(rng), 1.0).normalized();
  const Eigen::Vector3d& plane_normal = s.plane_normal;
  const int num_outliers = static_cast<int>(std::lround(outlier_fraction * num_points));
  while (static_cast<int>(s.x1.size()) < num_points) {
    const bool outlier = static_cast<int>(s.x1.size()) < num_outliers;
    if (outlier) {
      s.x1.push_back({640 * u(rng), 480 * u(rng)});
      s.x2.push_back({640 * u(rng), 480 * u(rng)});
      s.is_inlier.push_back(0);
      continue;
    }
    // A ray of camera 1 through a random pixel, at a random depth (or on the plane).
    const Eigen::Vector3d ray = s.K.inverse() * Eigen::Vector3d(640 * u(rng), 480 * u(rng), 1.0);
    double depth = 4.0 + 4.0 * u(rng);
    if (planar) depth = 6.0 / plane_normal.dot(ray);  // plane n . X = 6
    const Eigen::Vector3d X1 = depth * ray, X2 = s.R * X1 + s.t;
    if (X2.z() <= 0.5) continue;
    const Eigen::Vector2d p1 = (s.K * X1).hnormalized(), p2 = (s.K * X2).hnormalized();
    if (p2.x() < 0 || p2.x() > 640 || p2.y() < 0 || p2.y() > 480) continue;
    s.clean1.push_back(p1);
    s.clean2.push_back(p2);
    s.x1.push_back({p1.x() + noise_px * g(rng), p1.y() + noise_px * g(rng)});
    s.x2.push_back({p2.x() + noise_px * g(rng), p2.y() + noise_px * g(rng)});
    s.is_inlier.push_back(1);
  }
  // Shuffle so that outliers are not all first.
  std::vector<int> order(num_points);
  for (int i = 0; i < num_points; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  Scene shuffled = s;
  for (int i = 0; i < num_points; ++i) {
    shuffled.x1[i] = s.x1[order[i]];
    shuffled.x2[i] = s.x2[order[i]];
    shuffled.is_inlier[i] = s.is_inlier[order[i]];
  }
  return shuffled;
}

// Mask agreement: every true inlier found, at most `max_false` outliers accepted.
void ExpectMask(const TwoViewGeometry& g, const Scene& s, int max_missed, int max_false) {
  int missed = 0, accepted_outliers = 0;
  for (size_t i = 0; i < s.is_inlier.size(); ++i) {
    if (s.is_inlier[i] && !g.inlier_mask[i]) ++missed;
    if (!s.is_inlier[i] && g.inlier_mask[i]) ++accepted_outliers;
  }
  EXPECT_LE(missed, max_missed);
  EXPECT_LE(accepted_outliers, max_false);
}

#ifndef TIEPOINT_TWO_VIEW_FULL_SWEEP
TEST(TwoViewGeometry, ModelNamesRoundTrip) {
  for (TwoViewModel m : {TwoViewModel::kHomography, TwoViewModel::kFundamental, TwoViewModel::kEssential}) {
    TwoViewModel parsed;
    ASSERT_TRUE(TwoViewModelFromString(ToString(m), &parsed).ok());
    EXPECT_EQ(parsed, m);
  }
  TwoViewModel parsed;
  const Status s = TwoViewModelFromString("affine", &parsed);
  EXPECT_EQ(s.code(), StatusCode::kInvalidOptions);
  EXPECT_NE(s.message().find("homography"), std::string::npos);
}

TEST(TwoViewGeometry, OptionsCheck) {
  EXPECT_TRUE(RansacOptions().Check().ok());
  RansacOptions o;
  o.max_error_px = 0;
  EXPECT_NE(o.Check().message().find("max_error_px"), std::string::npos);
  o = RansacOptions();
  o.confidence = 1.0;
  EXPECT_NE(o.Check().message().find("confidence"), std::string::npos);
  o = RansacOptions();
  o.min_iterations = 10;
  o.max_iterations = 5;
  EXPECT_FALSE(o.Check().ok());
  o = RansacOptions();
  o.min_inliers = 0;
  EXPECT_FALSE(o.Check().ok());
}

// --- minimal solvers on exact data -------------------------------------------------------

TEST(TwoViewMinimalSolvers, FourPointHomographyIsExact) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int trial = 0; trial < 50; ++trial) {
    Eigen::Matrix3d H = Eigen::Matrix3d::Identity() + 0.3 * Eigen::Matrix3d::NullaryExpr([&] { return u(rng); });
    Eigen::Vector2d a[4], b[4];
    for (int k = 0; k < 4; ++k) {
      a[k] = Eigen::Vector2d(u(rng), u(rng));
      b[k] = MapH(H, a[k]);
    }
    Eigen::Matrix3d Hs;
    ASSERT_TRUE(two_view::HomographyFromFourPoints(a, b, &Hs));
    EXPECT_LT(DistanceUpToScale(Hs, H), 1e-9) << "trial " << trial;
  }
}

TEST(TwoViewMinimalSolvers, SevenPointFundamentalContainsTruth) {
  int exact = 0;
  for (int trial = 0; trial < 50; ++trial) {
    const Scene s = MakeScene(7, 0.0, 0.0, false, 100 + trial);
    const Eigen::Matrix3d F_true = s.K.inverse().transpose() * two_view::Skew(s.t) * s.R * s.K.inverse();
    // Hartley-normalise as the estimator does.
    std::vector<Eigen::Vector2d> p1(s.clean1.begin(), s.clean1.end()), p2(s.clean2.begin(), s.clean2.end());
    const Eigen::Matrix3d T1 = two_view::NormalizingTransform(p1), T2 = two_view::NormalizingTransform(p2);
    Eigen::Vector2d a[7], b[7];
    for (int k = 0; k < 7; ++k) {
      a[k] = two_view::Apply(T1, p1[k]);
      b[k] = two_view::Apply(T2, p2[k]);
    }
    Eigen::Matrix3d F[3];
    const int n = two_view::FundamentalFromSevenPoints(a, b, F);
    double best = 1e9;
    for (int k = 0; k < n; ++k) {
      best = std::min(best, DistanceUpToScale(T2.transpose() * F[k] * T1, F_true));
      EXPECT_LT(std::abs(F[k].determinant()), 1e-9);  // rank 2 by construction
    }
    if (best < 1e-7) ++exact;
  }
  EXPECT_EQ(exact, 50);
}

TEST(TwoViewMinimalSolvers, FivePointEssentialContainsTruth) {
  int exact = 0;
  constexpr int kTrials = 200;
  for (int trial = 0; trial < kTrials; ++trial) {
    const Scene s = MakeScene(5, 0.0, 0.0, false, 1000 + trial);
    const Eigen::Matrix3d E_true = two_view::Skew(s.t) * s.R;
    Eigen::Vector3d a[5], b[5];
    for (int k = 0; k < 5; ++k) {
      a[k] = s.K.inverse() * s.clean1[k].homogeneous();
      b[k] = s.K.inverse() * s.clean2[k].homogeneous();
    }
    std::vector<Eigen::Matrix3d> E;
    two_view::EssentialFromFivePoints(a, b, &E);
    EXPECT_LE(E.size(), 10u);
    double best = 1e9;
    for (const auto& e : E) {
      best = std::min(best, DistanceUpToScale(e, E_true));
      // Every solution satisfies the five epipolar constraints and is essential.
      for (int k = 0; k < 5; ++k) EXPECT_LT(std::abs(b[k].dot(e * a[k])), 1e-8);
      const Eigen::Vector3d sv = Eigen::JacobiSVD<Eigen::Matrix3d>(e).singularValues();
      EXPECT_NEAR(sv[0], sv[1], 1e-6);
      EXPECT_LT(sv[2], 1e-6);
    }
    if (best < 1e-6) ++exact;
  }
  // Exact up to rounding on every sample here (random well-conditioned scenes).
  EXPECT_EQ(exact, kTrials);
}

TEST(TwoViewMinimalSolvers, EssentialDecompositionAndCheirality) {
  const Scene s = MakeScene(30, 0.0, 0.0, false, 77);
  std::vector<Eigen::Vector3d> u1, u2;
  std::vector<int> all;
  for (size_t i = 0; i < s.clean1.size(); ++i) {
    u1.push_back(s.K.inverse() * s.clean1[i].homogeneous());
    u2.push_back(s.K.inverse() * s.clean2[i].homogeneous());
    all.push_back(static_cast<int>(i));
  }
  Eigen::Matrix3d R;
  Eigen::Vector3d t;
  const int in_front = two_view::PoseFromEssential(two_view::Skew(s.t) * s.R, u1, u2, all, &R, &t);
  EXPECT_EQ(in_front, 30);
  EXPECT_LT(RotationAngleDeg(R * s.R.transpose()), 1e-6);
  EXPECT_LT((t - s.t.normalized()).norm(), 1e-9);
}

// --- RANSAC + refinement on synthetic data ---------------------------------------------

TEST(TwoViewGeometry, HomographyWithNoiseAndOutliers) {
  const Scene s = MakeScene(300, 0.4, 0.5, true, 11);
  // The plane n . X1 = 6 induces H = K (R + t n^T / 6) K^-1.
  const Eigen::Matrix3d H_true = s.K * (s.R + s.t * s.plane_normal.transpose() / 6.0) * s.K.inverse();
  for (size_t i = 0; i < s.clean1.size(); ++i) ASSERT_LT((MapH(H_true, s.clean1[i]) - s.clean2[i]).norm(), 1e-9);
  TwoViewGeometry g;
  ASSERT_TRUE(EstimateTwoViewGeometry(TwoViewModel::kHomography, s.x1, s.x2, nullptr, nullptr,
                                      RansacOptions(), &g).ok());
  ASSERT_TRUE(g.verified);
  EXPECT_EQ(g.model, TwoViewModel::kHomography);
  // 0.5 px noise on 180 inliers: corners of the 640 x 480 image within 1 px of the truth.
  EXPECT_LT(CornerError(ToMatrix(g.matrix), H_true, 640, 480), 1.0);
  EXPECT_NEAR(g.matrix[8], 1.0, 1e-12);
  ExpectMask(g, s, 2, 3);
  EXPECT_LT(g.inlier_rms_error_px, 1.2);
  EXPECT_GT(g.ransac_iterations, 0);
}

TEST(TwoViewGeometry, FundamentalWithNoiseAndOutliers) {
  const Scene s = MakeScene(300, 0.4, 0.5, false, 12);
  const Eigen::Matrix3d F_true = s.K.inverse().transpose() * two_view::Skew(s.t) * s.R * s.K.inverse();
  TwoViewGeometry g;
  ASSERT_TRUE(EstimateTwoViewGeometry(TwoViewModel::kFundamental, s.x1, s.x2, nullptr, nullptr,
                                      RansacOptions(), &g).ok());
  ASSERT_TRUE(g.verified);
  const Eigen::Matrix3d F = ToMatrix(g.matrix);
  EXPECT_NEAR(F.norm(), 1.0, 1e-9);
  EXPECT_LT(std::abs(F.determinant()), 1e-12);
  // The noise-free inliers lie within 0.5 px (Sampson, RMS) of the estimated epipolar
  // geometry, and the truth gives them 0.
  double sum = 0.0;
  for (size_t i = 0; i < s.clean1.size(); ++i) {
    sum += two_view::SampsonSquaredError(F, s.clean1[i], s.clean2[i]);
    ASSERT_LT(two_view::SampsonSquaredError(F_true, s.clean1[i], s.clean2[i]), 1e-18);
  }
  EXPECT_LT(std::sqrt(sum / s.clean1.size()), 0.5);
  ExpectMask(g, s, 2, 10);  // a random outlier near its epipolar line (3 px) is an inlier
}

TEST(TwoViewGeometry, EssentialWithNoiseAndOutliers) {
  const Scene s = MakeScene(300, 0.4, 0.5, false, 13);
  TwoViewGeometry g;
  ASSERT_TRUE(EstimateTwoViewGeometry(TwoViewModel::kEssential, s.x1, s.x2, &s.k, &s.k,
                                      RansacOptions(), &g).ok());
  ASSERT_TRUE(g.verified);
  const Eigen::Matrix3d R = ToMatrix(g.rotation);
  const Eigen::Vector3d t(g.translation[0], g.translation[1], g.translation[2]);
  // The estimate is the optimum of the refinement's cost on its inliers (Sampson, Cauchy
  // loss of scale max_error_px / 2): refining from the true pose on the same inliers
  // lands on it (within 1e-3 degree).
  {
    std::vector<Eigen::Vector2d> a, b;
    std::vector<int> inliers;
    for (size_t i = 0; i < s.x1.size(); ++i) {
      a.emplace_back(s.x1[i][0], s.x1[i][1]);
      b.emplace_back(s.x2[i][0], s.x2[i][1]);
      if (g.inlier_mask[i]) inliers.push_back(static_cast<int>(i));
    }
    Eigen::Matrix3d R_from_truth = s.R;
    Eigen::Vector3d t_from_truth = s.t.normalized();
    two_view::RefineRelativePose(a, b, s.K, s.K, inliers, &R_from_truth, &t_from_truth,
                                 0.5 * RansacOptions().max_error_px);
    EXPECT_LT(RotationAngleDeg(R_from_truth * R.transpose()), 1e-3);
  }
  // 0.5 px noise, f = 800, 180 inliers: rotation within 0.5 degree (0.27 measured for
  // this seed: the optimum itself, see above), direction of t within 1 degree.
  EXPECT_LT(RotationAngleDeg(R * s.R.transpose()), 0.5);
  EXPECT_NEAR(t.norm(), 1.0, 1e-12);
  EXPECT_LT(std::acos(std::clamp(t.dot(s.t.normalized()), -1.0, 1.0)) * 180 / kPi, 1.0);
  EXPECT_LT(DistanceUpToScale(ToMatrix(g.matrix), two_view::Skew(t) * R), 1e-9);
  EXPECT_NEAR(ToMatrix(g.matrix).norm(), std::sqrt(2.0), 1e-9);
  ExpectMask(g, s, 2, 10);
}

// The reported rotation uncertainty is the spread the estimates really have: one scene
// (f = 800 px, 150 correspondences, no outliers) under 60 draws of 0.5 px noise; the RMS
// of the reported values and the RMS of the actual rotation errors agree within 25%
// (measured: 0.151 and 0.154 degrees over 200 draws; least squares started from the true
// pose 0.149).
// The number of false alarms tells a pair with a real epipolar geometry (25 inliers among
// 80 matches) from one whose matches are all wrong and whose best model gathers its
// inliers by chance, with the same RANSAC and the same minimum.
TEST(TwoViewGeometry, NumberOfFalseAlarmsSeparatesRealFromChanceSupport) {
  RansacOptions o;
  o.min_inliers = 8;
  o.max_iterations = 2000;
  int chance_inliers_max = 0;
  for (uint32_t seed = 40; seed < 44; ++seed) {
    const Scene real = MakeScene(80, 55.0 / 80, 0.5, false, seed);
    TwoViewGeometry f, e;
    ASSERT_TRUE(EstimateTwoViewGeometry(TwoViewModel::kFundamental, real.x1, real.x2, nullptr, nullptr, o, &f).ok());
    ASSERT_TRUE(EstimateTwoViewGeometry(TwoViewModel::kEssential, real.x1, real.x2, &real.k, &real.k, o, &e).ok());
    ASSERT_TRUE(f.verified && e.verified);
    EXPECT_GE(f.num_inliers, 24);
    EXPECT_LT(FundamentalLog10Nfa(f.matrix, real.x1, real.x2, o.max_error_px, f.num_inliers), -5.0) << seed;
    EXPECT_LT(EssentialLog10Nfa(e.matrix, real.k, real.k, real.x1, real.x2, o.max_error_px, e.num_inliers), -5.0)
        << seed;

    const Scene junk = MakeScene(80, 1.0, 0.5, false, seed);
    ASSERT_TRUE(EstimateTwoViewGeometry(TwoViewModel::kFundamental, junk.x1, junk.x2, nullptr, nullptr, o, &f).ok());
    ASSERT_TRUE(EstimateTwoViewGeometry(TwoViewModel::kEssential, junk.x1, junk.x2, &junk.k, &junk.k, o, &e).ok());
    ASSERT_GT(f.num_inliers, 0);
    ASSERT_GT(e.num_inliers, 0);
    chance_inliers_max = std::max({chance_inliers_max, f.num_inliers, e.num_inliers});
    EXPECT_GT(FundamentalLog10Nfa(f.matrix, junk.x1, junk.x2, o.max_error_px, f.num_inliers), 0.0) << seed;
    EXPECT_GT(EssentialLog10Nfa(e.matrix, junk.k, junk.k, junk.x1, junk.x2, o.max_error_px, e.num_inliers), 0.0)
        << seed;
    // More support for the same model is less likely to be chance.
    EXPECT_LT(FundamentalLog10Nfa(f.matrix, junk.x1, junk.x2, o.max_error_px, f.num_inliers + 10),
              FundamentalLog10Nfa(f.matrix, junk.x1, junk.x2, o.max_error_px, f.num_inliers));
  }
  // RANSAC did find chance models of some size: the test above is not vacuous.
  EXPECT_GE(chance_inliers_max, 8);
  // No sample beyond the minimal one: no test.
  const Scene tiny = MakeScene(7, 0.0, 0.5, false, 1);
  const double F[9] = {0, 0, 0, 0, 0, -1, 0, 1, 0};
  EXPECT_TRUE(std::isinf(FundamentalLog10Nfa(F, tiny.x1, tiny.x2, 3.0, 7)));
}

TEST(TwoViewGeometry, RotationUncertaintyPredictsTheSpreadOfEstimates) {
  const Scene exact = MakeScene(150, 0.0, 0.0, false, 100);
  std::mt19937 rng(5);
  std::normal_distribution<double> noise(0.0, 0.5);
  double reported_sq = 0.0, actual_sq = 0.0;
  const int draws = 60;
  for (int d = 0; d < draws; ++d) {
    Points x1 = exact.x1, x2 = exact.x2;
    for (size_t i = 0; i < x1.size(); ++i) {
      for (int c = 0; c < 2; ++c) {
        x1[i][c] += noise(rng);
        x2[i][c] += noise(rng);
      }
    }
    TwoViewGeometry g;
    ASSERT_TRUE(EstimateTwoViewGeometry(TwoViewModel::kEssential, x1, x2, &exact.k, &exact.k,
                                        RansacOptions(), &g).ok());
    ASSERT_TRUE(g.verified);
    ASSERT_TRUE(std::isfinite(g.rotation_uncertainty_deg));
    const double error = RotationAngleDeg(ToMatrix(g.rotation) * exact.R.transpose());
    reported_sq += g.rotation_uncertainty_deg * g.rotation_uncertainty_deg;
    actual_sq += error * error;
  }
  const double reported = std::sqrt(reported_sq / draws), actual = std::sqrt(actual_sq / draws);
  std::printf("rotation uncertainty: reported RMS %.4f deg, actual RMS error %.4f deg\n", reported, actual);
  EXPECT_GT(reported, 0.0);
  EXPECT_LT(reported / actual, 1.25);
  EXPECT_GT(reported / actual, 1.0 / 1.25);
}

// A narrow field of view (f = 3,300 px: a small object 10 units away, turned 22.5 degrees
// about its centre, as the Middlebury dino ring) leaves the rotation poorly fixed, and the
// estimate says so; the same object at 1.5 units seen with f = 500 px (same image size,
// stronger perspective) is fixed several times better. Measured: 6.6 and 0.97 degrees
// reported, 4.4 and 0.56 degrees actual error.
TEST(TwoViewGeometry, RotationUncertaintyFlagsANarrowFieldOfView) {
  double reported[2], actual[2];
  for (int wide = 0; wide < 2; ++wide) {
    const double f = wide ? 500.0 : 3300.0;
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::normal_distribution<double> noise(0.0, 0.7);
    const Intrinsics k{f, f, 320, 240};
    Eigen::Matrix3d K;
    K << f, 0, 320, 0, f, 240, 0, 0, 1;
    const Eigen::Vector3d centre(0, 0, 10.0 * f / 3300.0);  // the object spans ~200 px
    const Eigen::Matrix3d R =
        Eigen::AngleAxisd(22.5 * kPi / 180, Eigen::Vector3d::UnitY()).toRotationMatrix();
    const Eigen::Vector3d t = centre - R * centre;
    Points x1, x2;
    while (x1.size() < 100) {
      const Eigen::Vector3d X1 = centre + 0.3 * Eigen::Vector3d(u(rng), u(rng), u(rng));
      const Eigen::Vector2d p1 = (K * X1).hnormalized(), p2 = (K * (R * X1 + t)).hnormalized();
      x1.push_back({p1.x() + noise(rng), p1.y() + noise(rng)});
      x2.push_back({p2.x() + noise(rng), p2.y() + noise(rng)});
    }
    TwoViewGeometry g;
    ASSERT_TRUE(EstimateTwoViewGeometry(TwoViewModel::kEssential, x1, x2, &k, &k, RansacOptions(), &g).ok());
    ASSERT_TRUE(g.verified);
    reported[wide] = g.rotation_uncertainty_deg;
    actual[wide] = RotationAngleDeg(ToMatrix(g.rotation) * R.transpose());
    std::printf("f = %.0f px: reported rotation uncertainty %.3f deg, error %.3f deg\n", f,
                reported[wide], actual[wide]);
  }
  EXPECT_GT(reported[0], 3.0);
  EXPECT_GT(reported[0], 4.0 * reported[1]);
  for (int wide = 0; wide < 2; ++wide) EXPECT_LT(actual[wide], 3.0 * reported[wide]);
}

TEST(TwoViewGeometry, DeterministicForASeed) {
  const Scene s = MakeScene(200, 0.5, 1.0, false, 14);
  RansacOptions o;
  o.seed = 42;
  for (TwoViewModel m : {TwoViewModel::kHomography, TwoViewModel::kFundamental, TwoViewModel::kEssential}) {
    TwoViewGeometry a, b;
    ASSERT_TRUE(EstimateTwoViewGeometry(m, s.x1, s.x2, &s.k, &s.k, o, &a).ok());
    ASSERT_TRUE(EstimateTwoViewGeometry(m, s.x1, s.x2, &s.k, &s.k, o, &b).ok());
    EXPECT_EQ(a.ransac_iterations, b.ransac_iterations) << ToString(m);
    EXPECT_EQ(a.inlier_mask, b.inlier_mask) << ToString(m);
    for (int k = 0; k < 9; ++k) EXPECT_EQ(a.matrix[k], b.matrix[k]) << ToString(m);
  }
}

TEST(TwoViewGeometry, AdaptiveStoppingUsesFewerIterationsWithFewerOutliers) {
  RansacOptions o;
  o.min_iterations = 1;
  TwoViewGeometry clean, dirty;
  const Scene a = MakeScene(200, 0.0, 0.5, false, 15), b = MakeScene(200, 0.6, 0.5, false, 15);
  ASSERT_TRUE(EstimateTwoViewGeometry(TwoViewModel::kFundamental, a.x1, a.x2, nullptr, nullptr, o, &clean).ok());
  ASSERT_TRUE(EstimateTwoViewGeometry(TwoViewModel::kFundamental, b.x1, b.x2, nullptr, nullptr, o, &dirty).ok());
  EXPECT_TRUE(clean.verified);
  EXPECT_TRUE(dirty.verified);
  // No outliers: w ~ 1, N = log(1e-4)/log(1 - w^7) is a handful.
  EXPECT_LT(clean.ransac_iterations, 20);
  // 60% outliers: w = 0.4, N = log(1e-4)/log(1 - 0.4^7) ~ 5,600.
  EXPECT_GT(dirty.ransac_iterations, 1000);
  EXPECT_LE(dirty.ransac_iterations, o.max_iterations);
}

// --- degenerate and bad input ---------------------------------------------------------

TEST(TwoViewGeometry, TooFewPointsIsAResultNotAnError) {
  const Scene s = MakeScene(4, 0.0, 0.0, false, 16);
  for (TwoViewModel m : {TwoViewModel::kHomography, TwoViewModel::kFundamental, TwoViewModel::kEssential}) {
    const int n = m == TwoViewModel::kHomography ? 3 : 4;
    Points a(s.x1.begin(), s.x1.begin() + n), b(s.x2.begin(), s.x2.begin() + n);
    TwoViewGeometry g;
    const Status st = EstimateTwoViewGeometry(m, a, b, &s.k, &s.k, RansacOptions(), &g);
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_FALSE(g.verified);
    EXPECT_EQ(g.inlier_mask.size(), static_cast<size_t>(n));
    EXPECT_EQ(g.num_inliers, 0);
  }
  TwoViewGeometry g;
  EXPECT_TRUE(EstimateTwoViewGeometry(TwoViewModel::kHomography, {}, {}, nullptr, nullptr, RansacOptions(), &g).ok());
  EXPECT_FALSE(g.verified);
}

TEST(TwoViewGeometry, CollinearPointsAreNotVerified) {
  Points a, b;
  for (int i = 0; i < 100; ++i) {
    a.push_back({10.0 + 5.0 * i, 20.0 + 2.0 * i});
    b.push_back({30.0 + 4.0 * i, 50.0 - 1.0 * i});
  }
  const Intrinsics k{800, 800, 320, 240};
  for (TwoViewModel m : {TwoViewModel::kHomography, TwoViewModel::kFundamental, TwoViewModel::kEssential}) {
    TwoViewGeometry g;
    ASSERT_TRUE(EstimateTwoViewGeometry(m, a, b, &k, &k, RansacOptions(), &g).ok()) << ToString(m);
    EXPECT_FALSE(g.verified) << ToString(m);
  }
}

TEST(TwoViewGeometry, BadInputIsAnErrorNamingTheProblem) {
  const Scene s = MakeScene(50, 0.0, 0.5, false, 17);
  TwoViewGeometry g;
  Points a = s.x1;
  a[7][1] = std::numeric_limits<double>::quiet_NaN();
  Status st = EstimateTwoViewGeometry(TwoViewModel::kFundamental, a, s.x2, nullptr, nullptr, RansacOptions(), &g);
  EXPECT_EQ(st.code(), StatusCode::kInvalidInput);
  EXPECT_NE(st.message().find("correspondence 7"), std::string::npos) << st.message();
  Points b = s.x2;
  b.pop_back();
  st = EstimateTwoViewGeometry(TwoViewModel::kHomography, s.x1, b, nullptr, nullptr, RansacOptions(), &g);
  EXPECT_EQ(st.code(), StatusCode::kInvalidInput);
  st = EstimateTwoViewGeometry(TwoViewModel::kEssential, s.x1, s.x2, nullptr, &s.k, RansacOptions(), &g);
  EXPECT_EQ(st.code(), StatusCode::kInvalidOptions);
  EXPECT_NE(st.message().find("intrinsics1"), std::string::npos);
  const Intrinsics bad{0, 800, 320, 240};
  st = EstimateTwoViewGeometry(TwoViewModel::kEssential, s.x1, s.x2, &s.k, &bad, RansacOptions(), &g);
  EXPECT_EQ(st.code(), StatusCode::kInvalidOptions);
  RansacOptions o;
  o.confidence = 2.0;
  st = EstimateTwoViewGeometry(TwoViewModel::kHomography, s.x1, s.x2, nullptr, nullptr, o, &g);
  EXPECT_EQ(st.code(), StatusCode::kInvalidOptions);
}
#endif  // TIEPOINT_TWO_VIEW_FULL_SWEEP

// --- real images with ground truth ------------------------------------------------------

Features ExtractSift(const std::string& path, const SiftOptions& options = SiftOptions()) {
  GrayImage image;
  const Status read = ReadImageGray(path, &image);
  EXPECT_TRUE(read.ok()) << read.ToString();
  std::unique_ptr<FeatureExtractor> extractor;
  const Status created = FeatureExtractor::Create(options, Device::kCpu, &extractor);
  EXPECT_TRUE(created.ok()) << created.ToString();
  Features features;
  const Status s = extractor->Extract(image, &features);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return features;
}

// Brute-force nearest neighbours (squared L2 on the bytes) with Lowe's ratio test and a
// mutual check: the matcher proper lives in features/, this is only the test's input.
void RatioMatch(const Features& a, const Features& b, double ratio, Points* x1, Points* x2) {
  const int na = static_cast<int>(a.size()), nb = static_cast<int>(b.size());
  std::vector<int> best_ab(na, -1), best_ba(nb, -1);
  std::vector<int> d1_ab(na, std::numeric_limits<int>::max()), d2_ab(na, std::numeric_limits<int>::max());
  std::vector<int> d1_ba(nb, std::numeric_limits<int>::max());
  for (int i = 0; i < na; ++i) {
    const uint8_t* p = a.descriptor(i);
    for (int j = 0; j < nb; ++j) {
      const uint8_t* q = b.descriptor(j);
      int d = 0;
      for (int k = 0; k < kSiftDescriptorDim; ++k) {
        const int diff = static_cast<int>(p[k]) - static_cast<int>(q[k]);
        d += diff * diff;
      }
      if (d < d1_ab[i]) {
        d2_ab[i] = d1_ab[i];
        d1_ab[i] = d;
        best_ab[i] = j;
      } else if (d < d2_ab[i]) {
        d2_ab[i] = d;
      }
      if (d < d1_ba[j]) {
        d1_ba[j] = d;
        best_ba[j] = i;
      }
    }
  }
  x1->clear();
  x2->clear();
  for (int i = 0; i < na; ++i) {
    const int j = best_ab[i];
    if (j < 0 || best_ba[j] != i) continue;
    if (static_cast<double>(d1_ab[i]) > ratio * ratio * static_cast<double>(d2_ab[i])) continue;
    x1->push_back({a.keypoints[i].x, a.keypoints[i].y});
    x2->push_back({b.keypoints[j].x, b.keypoints[j].y});
  }
}

struct MiddleburyView {
  Intrinsics k;
  Eigen::Matrix3d R;  // cam_from_world
  Eigen::Vector3d t;
};

// A ring camera (io/middlebury.h) as the estimator's intrinsics and an Eigen pose.
MiddleburyView ToView(const MiddleburyCamera& c) {
  MiddleburyView view;
  view.k = Intrinsics{c.K[0], c.K[4], c.K[2], c.K[5]};
  view.R = ToMatrix(c.R.data());
  view.t = Eigen::Vector3d(c.t[0], c.t[1], c.t[2]);
  return view;
}

// Estimates E for every neighbouring pair of a ring and compares the relative rotation
// with the ground truth R2 R1^T; prints the per-pair figures. Pairs (0-based views) in
// `one_degree` (all when empty) must come within 1 degree; pairs in `not_verified` must
// be reported as not verified (too few inliers); every other pair must be verified.
//
// SIFT: upsampled first octave and contrast threshold 0.01 (the objects are dark, matte
// and sit on black): 150-570 matches per temple pair instead of 50-120 with the
// defaults, where E is too weakly determined for 1 degree (templeSR 9-10: 5.7 degrees
// with 62 inliers).
void CheckMiddleburyRing(const std::string& dir, const std::string& prefix,
                         const std::vector<std::pair<int, int>>& one_degree,
                         const std::vector<std::pair<int, int>>& not_verified,
                         const std::vector<std::pair<int, int>>& only = {}) {
  SiftOptions sift;
  sift.upsample = true;
  sift.contrast_threshold = 0.01;
  std::vector<MiddleburyCamera> cameras;
  const Status read = ReadMiddleburyCameras(dir + "/" + prefix + "_par.txt", &cameras);
  ASSERT_TRUE(read.ok()) << read.ToString();
  std::vector<std::string> names;
  std::vector<MiddleburyView> views;
  for (const MiddleburyCamera& c : cameras) {
    names.push_back(c.name);
    views.push_back(ToView(c));
  }
  const int n = static_cast<int>(views.size());
  const std::vector<std::pair<int, int>> pairs = MiddleburyNeighbourPairs(cameras);
  auto listed = [](const std::vector<std::pair<int, int>>& list, int i, int j) {
    return std::find(list.begin(), list.end(), std::make_pair(i, j)) != list.end();
  };
  std::vector<Features> features(n);
  std::vector<bool> extracted(n, false);
  auto get = [&](int v) -> const Features& {
    if (!extracted[v]) {
      features[v] = ExtractSift(dir + "/" + names[v], sift);
      extracted[v] = true;
    }
    return features[v];
  };
  double worst = 0.0;
  int checked = 0;
  for (const auto& [i, j] : pairs) {
    if (!only.empty() && !listed(only, i, j)) continue;
    ++checked;
    Points x1, x2;
    RatioMatch(get(i), get(j), 0.8, &x1, &x2);
    TwoViewGeometry g;
    RansacOptions o;
    o.max_error_px = 2.0;
    ASSERT_TRUE(EstimateTwoViewGeometry(TwoViewModel::kEssential, x1, x2, &views[i].k, &views[j].k, o, &g).ok());
    const Eigen::Matrix3d R_true = views[j].R * views[i].R.transpose();
    const Eigen::Vector3d t_true = (views[j].t - R_true * views[i].t).normalized();
    const Eigen::Vector3d t(g.translation[0], g.translation[1], g.translation[2]);
    const double angle = RotationAngleDeg(ToMatrix(g.rotation) * R_true.transpose());
    const double t_angle = std::acos(std::clamp(t.dot(t_true), -1.0, 1.0)) * 180.0 / kPi;
    std::printf("%s %s-%s: %zu matches, %d inliers (rms %.2f px, %d iterations), rotation error %.3f deg, "
                "translation direction error %.2f deg, true relative rotation %.1f deg\n",
                prefix.c_str(), names[i].c_str(), names[j].c_str(), x1.size(), g.num_inliers,
                g.inlier_rms_error_px, g.ransac_iterations, angle, t_angle, RotationAngleDeg(R_true));
    // How well the ground-truth pose explains the estimate's inliers (Sampson RMS, px):
    // when it is worse than the estimate's own, the data, not the search, is what
    // separates the two poses.
    Eigen::Matrix3d K1, K2;
    K1 << views[i].k.fx, 0, views[i].k.cx, 0, views[i].k.fy, views[i].k.cy, 0, 0, 1;
    K2 << views[j].k.fx, 0, views[j].k.cx, 0, views[j].k.fy, views[j].k.cy, 0, 0, 1;
    const Eigen::Matrix3d F_true = K2.inverse().transpose() * two_view::Skew(t_true) * R_true * K1.inverse();
    const Eigen::Matrix3d F_est = K2.inverse().transpose() * ToMatrix(g.matrix) * K1.inverse();
    double sum_true = 0.0, sum_est = 0.0;
    for (size_t m = 0; m < x1.size(); ++m) {
      if (!g.inlier_mask[m]) continue;
      const Eigen::Vector2d a(x1[m][0], x1[m][1]), b(x2[m][0], x2[m][1]);
      sum_true += two_view::SampsonSquaredError(F_true, a, b);
      sum_est += two_view::SampsonSquaredError(F_est, a, b);
    }
    const double rms_true = std::sqrt(sum_true / std::max(1, g.num_inliers));
    const double rms_est = std::sqrt(sum_est / std::max(1, g.num_inliers));
    std::printf("    Sampson RMS on these inliers: estimate %.3f px, ground truth %.3f px\n", rms_est, rms_true);
    if (listed(not_verified, i, j)) {
      EXPECT_FALSE(g.verified) << names[i] << " - " << names[j];
      continue;
    }
    EXPECT_LE(rms_est, rms_true + 0.02) << names[i] << " - " << names[j];
    EXPECT_TRUE(g.verified) << names[i] << " - " << names[j];
    if (one_degree.empty() || listed(one_degree, i, j)) EXPECT_LT(angle, 1.0) << names[i] << " - " << names[j];
    worst = std::max(worst, angle);
  }
  std::printf("%s: worst rotation error %.3f deg over %d pairs\n", prefix.c_str(), worst, checked);
}

bool ReadHomographyFile(const std::string& path, Eigen::Matrix3d* H) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  const size_t open = text.find("<data>");  // OpenCV XML storage
  if (open != std::string::npos) text = text.substr(open + 6, text.find("</data>") - open - 6);
  std::istringstream numbers(text);
  double h[9];
  for (double& x : h) {
    if (!(numbers >> x)) return false;
  }
  *H = ToMatrix(h);
  return true;
}

// Corners of image 1 mapped by the estimated H, against the ground-truth mapping (px);
// prints the per-pair figures, and how many of the matches agree with the ground truth
// (transfer error within 3 px) as a measure of what the data allow.
double HomographyCornerError(const std::string& image1, const std::string& image2, const std::string& h_file,
                             const std::string& label) {
  Eigen::Matrix3d H_true;
  EXPECT_TRUE(ReadHomographyFile(h_file, &H_true)) << h_file;
  GrayImage first;
  EXPECT_TRUE(ReadImageGray(image1, &first).ok());
  Points x1, x2;
  RatioMatch(ExtractSift(image1), ExtractSift(image2), 0.8, &x1, &x2);
  TwoViewGeometry g;
  EXPECT_TRUE(EstimateTwoViewGeometry(TwoViewModel::kHomography, x1, x2, nullptr, nullptr, RansacOptions(), &g).ok());
  EXPECT_TRUE(g.verified) << label;
  const double error = CornerError(ToMatrix(g.matrix), H_true, first.width, first.height);
  int agree = 0;
  for (size_t m = 0; m < x1.size(); ++m) {
    const double e2 = two_view::HomographySquaredError(H_true, Eigen::Vector2d(x1[m][0], x1[m][1]),
                                                       Eigen::Vector2d(x2[m][0], x2[m][1]));
    agree += e2 <= 9.0 ? 1 : 0;
  }
  std::printf("%s: %zu matches (%d within 3 px of the ground truth), %d inliers (rms %.2f px, %d iterations), "
              "worst corner error %.2f px\n",
              label.c_str(), x1.size(), agree, g.num_inliers, g.inlier_rms_error_px, g.ransac_iterations, error);
  return error;
}

// The dino ring: f = 3310 px on 640 x 480 images (an 11 degree field of view) and 26-280
// matches of an untextured object: on most pairs the correspondences do not pin the
// rotation down to 1 degree (a rotation across the optical axis trades against a
// sideways translation), and the ground-truth pose explains the estimate's inliers
// worse than the estimate does (checked for every pair). The 1 degree bound is checked
// on the pairs the data resolve (views 1-2, 9-10, 10-11; 1-16 lies at 0.96); 5-6 and
// 6-7 (10-13 inliers) are rightly not verified.
const std::vector<std::pair<int, int>> kDinoResolved = {{0, 1}, {8, 9}, {9, 10}};
const std::vector<std::pair<int, int>> kDinoTooFewInliers = {{4, 5}, {5, 6}};

#ifndef TIEPOINT_TWO_VIEW_FULL_SWEEP
// Default run (CI, a few seconds): two neighbouring pairs of each ring, boat 1-2 and
// 1-5, graf 1-3. The full sweep is two_view_geometry_slow_test (label `slow`).
TEST(TwoViewRealData, MiddleburyTempleRingTwoPairs) {
  TIEPOINT_REQUIRE_SHARED(dir, "multiview/middlebury/templeSparseRing");
  CheckMiddleburyRing(dir, "templeSR", {}, {}, {{0, 1}, {9, 10}});
}

TEST(TwoViewRealData, MiddleburyDinoRingTwoPairs) {
  TIEPOINT_REQUIRE_SHARED(dir, "multiview/middlebury/dinoSparseRing");
  CheckMiddleburyRing(dir, "dinoSR", kDinoResolved, kDinoTooFewInliers, {{0, 1}, {9, 10}});
}

TEST(TwoViewRealData, OxfordBoatAndGrafThreePairs) {
  TIEPOINT_REQUIRE_SHARED(boat, "features/oxford_boat");
  TIEPOINT_REQUIRE_SHARED(samples, "features/opencv_samples");
  for (int k : {2, 5}) {
    EXPECT_LT(HomographyCornerError(boat + "/img1.pgm", boat + "/img" + std::to_string(k) + ".pgm",
                                    boat + "/H1to" + std::to_string(k) + "p", "boat 1-" + std::to_string(k)),
              3.0);
  }
  EXPECT_LT(HomographyCornerError(samples + "/graf1.png", samples + "/graf3.png", samples + "/H1to3p.xml", "graf 1-3"),
            3.0);
}
#else
// Every neighbouring pair of both rings: 17 temple pairs (all within 1 degree), 16 dino
// pairs (see kDinoResolved).
TEST(TwoViewRealData, MiddleburyTempleRingAllPairs) {
  TIEPOINT_REQUIRE_SHARED(dir, "multiview/middlebury/templeSparseRing");
  CheckMiddleburyRing(dir, "templeSR", {}, {});
}

TEST(TwoViewRealData, MiddleburyDinoRingAllPairs) {
  TIEPOINT_REQUIRE_SHARED(dir, "multiview/middlebury/dinoSparseRing");
  CheckMiddleburyRing(dir, "dinoSR", kDinoResolved, kDinoTooFewInliers);
}

TEST(TwoViewRealData, OxfordBoatAndGrafAllPairs) {
  TIEPOINT_REQUIRE_SHARED(boat, "features/oxford_boat");
  TIEPOINT_REQUIRE_SHARED(samples, "features/opencv_samples");
  for (int k = 2; k <= 6; ++k) {
    const double error = HomographyCornerError(boat + "/img1.pgm", boat + "/img" + std::to_string(k) + ".pgm",
                                               boat + "/H1to" + std::to_string(k) + "p", "boat 1-" + std::to_string(k));
    // Boat 1-6 (zoom x2.8) fails: only 30 of its 77 ratio-test matches agree with the
    // ground truth within 3 px, and a wrong homography gathers 62; reported, not required.
    if (k <= 5) EXPECT_LT(error, 3.0) << "boat 1-" << k;
  }
  EXPECT_LT(HomographyCornerError(samples + "/graf1.png", samples + "/graf3.png", samples + "/H1to3p.xml", "graf 1-3"),
            3.0);
}
#endif

}  // namespace
}  // namespace tiepoint
