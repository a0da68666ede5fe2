// Absolute pose: Lambda Twist P3P on exact data (every solution consistent, one equal to
// the truth), LO-RANSAC + refinement on synthetic scenes with noise and outliers against
// the true pose, cheirality, degenerate and bad input, and RefineAbsolutePose alone.
#include "solver/geometry/absolute_pose.h"

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

// Angle of a rotation matrix in degrees, accurate near 0 too.
double RotationAngleDeg(const Eigen::Matrix3d& R) {
  const Eigen::Vector3d v(R(2, 1) - R(1, 2), R(0, 2) - R(2, 0), R(1, 0) - R(0, 1));
  return std::atan2(0.5 * v.norm(), 0.5 * (R.trace() - 1.0)) * 180.0 / kPi;
}

Eigen::Matrix3d RandomRotation(std::mt19937_64* rng) {
  std::normal_distribution<double> g(0.0, 1.0);
  Eigen::Quaterniond q(g(*rng), g(*rng), g(*rng), g(*rng));
  return q.normalized().toRotationMatrix();
}

struct Scene {
  Eigen::Matrix3d R;  // cam_from_world
  Eigen::Vector3d t;
  std::vector<Eigen::Vector3d> world;
  std::vector<Eigen::Vector2d> normalized;
  std::vector<uint8_t> is_outlier;
};

// n points in a 60-degree frustum at depths 2..8 of a random camera; observations with
// Gaussian noise of sigma_px / kFocal per coordinate; a fraction of them replaced by
// uniform random image points (outliers).
Scene MakeScene(int n, double sigma_px, double outlier_fraction, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0), depth(2.0, 8.0), coin(0.0, 1.0);
  std::normal_distribution<double> noise(0.0, sigma_px / kFocal);
  Scene s;
  s.R = RandomRotation(&rng);
  s.t = Eigen::Vector3d(unit(rng), unit(rng), unit(rng)) * 3.0;
  for (int i = 0; i < n; ++i) {
    const double z = depth(rng);
    const Eigen::Vector3d P(0.55 * z * unit(rng), 0.55 * z * unit(rng), z);
    s.world.push_back(s.R.transpose() * (P - s.t));
    const bool outlier = coin(rng) < outlier_fraction;
    s.is_outlier.push_back(outlier);
    if (outlier) {
      s.normalized.emplace_back(0.55 * unit(rng), 0.55 * unit(rng));
    } else {
      s.normalized.emplace_back(P.x() / z + noise(rng), P.y() / z + noise(rng));
    }
  }
  return s;
}

Eigen::Vector3d Center(const Eigen::Matrix3d& R, const Eigen::Vector3d& t) { return -R.transpose() * t; }

TEST(P3P, ExactDataGivesTheTruePoseAmongAtMostFour) {
  std::mt19937_64 rng(7);
  int multiple = 0;
  for (int trial = 0; trial < 500; ++trial) {
    const Scene s = MakeScene(3, 0.0, 0.0, 1000 + trial);
    const Eigen::Vector3d y[3] = {s.normalized[0].homogeneous(), s.normalized[1].homogeneous(),
                                  s.normalized[2].homogeneous()};
    const Eigen::Vector3d X[3] = {s.world[0], s.world[1], s.world[2]};
    std::vector<Eigen::Matrix3d> Rs;
    std::vector<Eigen::Vector3d> ts;
    const int n = SolveP3P(y, X, &Rs, &ts);
    ASSERT_GE(n, 1) << "trial " << trial;
    ASSERT_LE(n, 4);
    ASSERT_EQ(static_cast<int>(Rs.size()), n);
    if (n > 1) ++multiple;
    double best = std::numeric_limits<double>::infinity();
    for (int k = 0; k < n; ++k) {
      // Every solution is a rotation that projects the three points exactly, in front.
      EXPECT_NEAR((Rs[k] * Rs[k].transpose() - Eigen::Matrix3d::Identity()).norm(), 0.0, 1e-12);
      EXPECT_NEAR(Rs[k].determinant(), 1.0, 1e-12);
      for (int i = 0; i < 3; ++i) {
        EXPECT_LT(std::sqrt(SquaredReprojectionError(Rs[k], ts[k], X[i], s.normalized[i])), 1e-8)
            << "trial " << trial << " solution " << k << " point " << i;
      }
      best = std::min(best, (Rs[k] - s.R).norm() + (ts[k] - s.t).norm() / s.t.norm());
    }
    EXPECT_LT(best, 1e-8) << "trial " << trial;
  }
  // The solver does return the other roots: P3P has several solutions for many triangles.
  EXPECT_GT(multiple, 50);
}

TEST(P3P, DegenerateTrianglesGiveNoSolution) {
  const Eigen::Vector3d y[3] = {{0.1, 0.0, 1.0}, {0.0, 0.1, 1.0}, {-0.1, 0.05, 1.0}};
  std::vector<Eigen::Matrix3d> Rs;
  std::vector<Eigen::Vector3d> ts;
  const Eigen::Vector3d collinear[3] = {{0, 0, 5}, {1, 1, 5}, {2, 2, 5}};
  EXPECT_EQ(SolveP3P(y, collinear, &Rs, &ts), 0);
  const Eigen::Vector3d coincident[3] = {{0, 0, 5}, {0, 0, 5}, {1, 0, 5}};
  EXPECT_EQ(SolveP3P(y, coincident, &Rs, &ts), 0);
  const Eigen::Vector3d same_ray[3] = {{0.1, 0.0, 1.0}, {0.2, 0.0, 2.0}, {0.0, 0.1, 1.0}};
  const Eigen::Vector3d good[3] = {{0, 0, 5}, {1, 0, 5}, {0, 1, 5}};
  EXPECT_EQ(SolveP3P(same_ray, good, &Rs, &ts), 0);
  const Eigen::Vector3d zero[3] = {{0, 0, 0}, {0.1, 0, 1}, {0, 0.1, 1}};
  EXPECT_EQ(SolveP3P(zero, good, &Rs, &ts), 0);
  EXPECT_TRUE(Rs.empty());
}

TEST(AbsolutePose, NoiseAndOutliersRecoverTheTruePose) {
  double worst_rotation = 0.0, worst_center = 0.0;
  for (int scene = 0; scene < 10; ++scene) {
    const double outliers = scene % 2 == 0 ? 0.3 : 0.5;
    const Scene s = MakeScene(200, 0.5, outliers, 50 + scene);
    AbsolutePoseOptions options;
    options.max_error = 2.0 / kFocal;
    options.seed = scene;
    AbsolutePose result;
    ASSERT_TRUE(EstimateAbsolutePose(s.normalized, s.world, options, &result).ok());
    ASSERT_TRUE(result.found) << "scene " << scene;
    const double rotation_deg = RotationAngleDeg(result.rotation * s.R.transpose());
    // Camera centre error relative to the scene depth (2..8 units).
    const double center = (Center(result.rotation, result.translation) - Center(s.R, s.t)).norm();
    worst_rotation = std::max(worst_rotation, rotation_deg);
    worst_center = std::max(worst_center, center);
    // 0.5 px noise at f = 1000 over ~100-140 inliers in a 60-degree view: the errors are
    // ~0.01 degree and ~1 mm; a solver off by one noisy P3P sample would be ~0.1-1 degree.
    EXPECT_LT(rotation_deg, 0.05) << "scene " << scene;
    EXPECT_LT(center, 0.01) << "scene " << scene;
    // The inliers are the true inliers: a 2 px threshold keeps all but 0.5 px noise's rare
    // > 4-sigma tail, and admits outliers only where one falls near its true projection.
    int true_inliers = 0, found_true = 0, found_false = 0;
    for (size_t i = 0; i < s.world.size(); ++i) {
      true_inliers += !s.is_outlier[i];
      if (result.inlier_mask[i]) (s.is_outlier[i] ? found_false : found_true)++;
    }
    EXPECT_GE(found_true, true_inliers - 1) << "scene " << scene;  // 4-sigma tail: ~3e-4 a point
    EXPECT_LE(found_false, 2) << "scene " << scene;
    EXPECT_EQ(result.num_inliers, found_true + found_false);
    // The inlier RMS is the noise level: sqrt(2) * 0.5 px for 2D errors (less the 6 fitted dof).
    EXPECT_NEAR(result.inlier_rms_error * kFocal, 0.5 * std::sqrt(2.0), 0.15);
    EXPECT_GT(result.ransac_iterations, 0);
    EXPECT_LE(result.ransac_iterations, options.max_iterations);
  }
  std::printf("worst rotation error %.4f deg, worst centre error %.5f\n", worst_rotation, worst_center);
}

TEST(AbsolutePose, SameSeedSameResult) {
  const Scene s = MakeScene(150, 0.5, 0.4, 3);
  AbsolutePoseOptions options;
  options.max_error = 2.0 / kFocal;
  options.seed = 11;
  AbsolutePose a, b;
  ASSERT_TRUE(EstimateAbsolutePose(s.normalized, s.world, options, &a).ok());
  ASSERT_TRUE(EstimateAbsolutePose(s.normalized, s.world, options, &b).ok());
  EXPECT_EQ(a.rotation, b.rotation);
  EXPECT_EQ(a.translation, b.translation);
  EXPECT_EQ(a.inlier_mask, b.inlier_mask);
  EXPECT_EQ(a.ransac_iterations, b.ransac_iterations);
}

TEST(AbsolutePose, PointsBehindTheCameraAreNeverInliers) {
  Scene s = MakeScene(120, 0.5, 0.0, 21);
  // Mirror every third point through the camera centre: P -> -P projects to the same
  // (u, v) but lies behind the camera.
  const Eigen::Vector3d C = Center(s.R, s.t);
  std::vector<uint8_t> behind(s.world.size(), 0);
  for (size_t i = 0; i < s.world.size(); i += 3) {
    s.world[i] = C - (s.world[i] - C);
    behind[i] = 1;
  }
  EXPECT_TRUE(std::isinf(SquaredReprojectionError(s.R, s.t, s.world[0], s.normalized[0])));
  AbsolutePoseOptions options;
  options.max_error = 2.0 / kFocal;
  AbsolutePose result;
  ASSERT_TRUE(EstimateAbsolutePose(s.normalized, s.world, options, &result).ok());
  ASSERT_TRUE(result.found);
  EXPECT_LT(RotationAngleDeg(result.rotation * s.R.transpose()), 0.05);
  for (size_t i = 0; i < s.world.size(); ++i) {
    if (behind[i]) {
      EXPECT_EQ(result.inlier_mask[i], 0) << i;
    } else {
      EXPECT_EQ(result.inlier_mask[i], 1) << i;
    }
    if (result.inlier_mask[i]) {
      EXPECT_GT((result.rotation * s.world[i] + result.translation).z(), 0.0);
    }
  }
}

TEST(AbsolutePose, DegenerateAndTooFewPointsAreNotFound) {
  AbsolutePoseOptions options;
  options.max_error = 2.0 / kFocal;
  AbsolutePose result;
  // Two points: below the minimal sample.
  const Scene s = MakeScene(2, 0.0, 0.0, 5);
  ASSERT_TRUE(EstimateAbsolutePose(s.normalized, s.world, options, &result).ok());
  EXPECT_FALSE(result.found);
  EXPECT_EQ(result.inlier_mask.size(), 2u);
  // Empty input.
  ASSERT_TRUE(EstimateAbsolutePose({}, {}, options, &result).ok());
  EXPECT_FALSE(result.found);
  // Fewer than min_inliers.
  const Scene five = MakeScene(5, 0.0, 0.0, 6);
  ASSERT_TRUE(EstimateAbsolutePose(five.normalized, five.world, options, &result).ok());
  EXPECT_FALSE(result.found);
  // All world points on one line: every sample is degenerate.
  std::vector<Eigen::Vector3d> line;
  std::vector<Eigen::Vector2d> x;
  for (int i = 0; i < 40; ++i) {
    line.emplace_back(0.1 * i - 2.0, 0.05 * i - 1.0, 5.0 + 0.02 * i);
    x.push_back(line.back().hnormalized());
  }
  options.max_iterations = 500;
  ASSERT_TRUE(EstimateAbsolutePose(x, line, options, &result).ok());
  EXPECT_FALSE(result.found);
  EXPECT_EQ(result.num_inliers, 0);
  // All points identical.
  std::vector<Eigen::Vector3d> same(20, Eigen::Vector3d(0.0, 0.0, 4.0));
  std::vector<Eigen::Vector2d> same_x(20, Eigen::Vector2d(0.0, 0.0));
  ASSERT_TRUE(EstimateAbsolutePose(same_x, same, options, &result).ok());
  EXPECT_FALSE(result.found);
}

TEST(AbsolutePose, BadInputAndOptionsAreErrors) {
  const Scene s = MakeScene(20, 0.0, 0.0, 8);
  AbsolutePoseOptions options;
  AbsolutePose result;
  std::vector<Eigen::Vector3d> short_world(s.world.begin(), s.world.end() - 1);
  EXPECT_EQ(EstimateAbsolutePose(s.normalized, short_world, options, &result).code(), StatusCode::kInvalidInput);
  std::vector<Eigen::Vector2d> nan_x = s.normalized;
  nan_x[4].x() = std::numeric_limits<double>::quiet_NaN();
  const Status nan_status = EstimateAbsolutePose(nan_x, s.world, options, &result);
  EXPECT_EQ(nan_status.code(), StatusCode::kInvalidInput);
  EXPECT_NE(nan_status.message().find("4"), std::string::npos) << nan_status.message();
  std::vector<Eigen::Vector3d> inf_world = s.world;
  inf_world[2].z() = std::numeric_limits<double>::infinity();
  EXPECT_EQ(EstimateAbsolutePose(s.normalized, inf_world, options, &result).code(), StatusCode::kInvalidInput);
  AbsolutePoseOptions bad = options;
  bad.max_error = 0.0;
  EXPECT_EQ(bad.Check().code(), StatusCode::kInvalidOptions);
  bad = options;
  bad.confidence = 1.0;
  EXPECT_EQ(bad.Check().code(), StatusCode::kInvalidOptions);
  bad = options;
  bad.min_iterations = 20;
  bad.max_iterations = 10;
  EXPECT_EQ(EstimateAbsolutePose(s.normalized, s.world, bad, &result).code(), StatusCode::kInvalidOptions);
  bad = options;
  bad.min_inliers = 2;
  EXPECT_EQ(bad.Check().code(), StatusCode::kInvalidOptions);
  EXPECT_TRUE(options.Check().ok());
}

// A pose 2 degrees and 5 cm off returns to the truth within the noise, and the RMS error
// falls to the noise level.
TEST(RefineAbsolutePose, ConvergesFromAPerturbedPose) {
  const Scene s = MakeScene(100, 0.5, 0.0, 31);
  Eigen::Matrix3d R = Eigen::AngleAxisd(2.0 * kPi / 180.0, Eigen::Vector3d(1, 2, 3).normalized()) * s.R;
  Eigen::Vector3d t = s.t + Eigen::Vector3d(0.05, -0.03, 0.04);
  AbsolutePoseRefineSummary summary;
  ASSERT_TRUE(RefineAbsolutePose(s.normalized, s.world, {}, &R, &t, {}, &summary));
  EXPECT_LT(RotationAngleDeg(R * s.R.transpose()), 0.05);
  EXPECT_LT((Center(R, t) - Center(s.R, s.t)).norm(), 0.01);
  EXPECT_GT(summary.initial_rms_error * kFocal, 10.0);
  EXPECT_NEAR(summary.final_rms_error * kFocal, 0.5 * std::sqrt(2.0), 0.2);
  EXPECT_GT(summary.iterations, 0);
  // The refined pose is at least as good as the truth on its own cost.
  double truth = 0.0, refined = 0.0;
  for (size_t i = 0; i < s.world.size(); ++i) {
    truth += SquaredReprojectionError(s.R, s.t, s.world[i], s.normalized[i]);
    refined += SquaredReprojectionError(R, t, s.world[i], s.normalized[i]);
  }
  EXPECT_LE(refined, truth);
}

TEST(RefineAbsolutePose, MaskAndRobustLoss) {
  // 30% outliers: least squares on all points is pulled off; the mask, or a Cauchy loss,
  // keeps the pose at the truth.
  const Scene s = MakeScene(150, 0.5, 0.3, 41);
  std::vector<uint8_t> mask(s.world.size());
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = !s.is_outlier[i];
  const Eigen::Matrix3d R0 = Eigen::AngleAxisd(0.5 * kPi / 180.0, Eigen::Vector3d::UnitY()) * s.R;
  Eigen::Matrix3d R = R0;
  Eigen::Vector3d t = s.t;
  ASSERT_TRUE(RefineAbsolutePose(s.normalized, s.world, mask, &R, &t));
  EXPECT_LT(RotationAngleDeg(R * s.R.transpose()), 0.05);
  R = R0;
  t = s.t;
  AbsolutePoseRefineOptions robust;
  robust.loss_scale = 2.0 / kFocal;
  ASSERT_TRUE(RefineAbsolutePose(s.normalized, s.world, {}, &R, &t, robust));
  EXPECT_LT(RotationAngleDeg(R * s.R.transpose()), 0.05);
  R = R0;
  t = s.t;
  ASSERT_TRUE(RefineAbsolutePose(s.normalized, s.world, {}, &R, &t));
  EXPECT_GT(RotationAngleDeg(R * s.R.transpose()), 0.1);  // least squares on outliers: off
}

TEST(RefineAbsolutePose, RejectsUnusableInput) {
  const Scene s = MakeScene(10, 0.0, 0.0, 51);
  Eigen::Matrix3d R = s.R;
  Eigen::Vector3d t = s.t;
  std::vector<uint8_t> two(10, 0);
  two[0] = two[1] = 1;
  EXPECT_FALSE(RefineAbsolutePose(s.normalized, s.world, two, &R, &t));
  EXPECT_FALSE(RefineAbsolutePose(s.normalized, s.world, std::vector<uint8_t>(3, 1), &R, &t));
  std::vector<Eigen::Vector3d> short_world(s.world.begin(), s.world.end() - 1);
  EXPECT_FALSE(RefineAbsolutePose(s.normalized, short_world, {}, &R, &t));
  // A start pose with every point behind the camera has nothing to refine.
  Eigen::Matrix3d R_flip = Eigen::AngleAxisd(kPi, Eigen::Vector3d::UnitX()) * s.R;
  Eigen::Vector3d t_flip = Eigen::AngleAxisd(kPi, Eigen::Vector3d::UnitX()) * s.t;
  EXPECT_FALSE(RefineAbsolutePose(s.normalized, s.world, {}, &R_flip, &t_flip));
  EXPECT_EQ(R, s.R);
  EXPECT_EQ(t, s.t);
}

}  // namespace
}  // namespace tiepoint
