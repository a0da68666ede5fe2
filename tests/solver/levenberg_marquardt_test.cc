// tiepoint's LM driver with the CHOLMOD Schur solver, checked against Ceres Solver
// (SPARSE_SCHUR, double precision) on real BAL problems and against ground truth on
// synthetic ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include <Eigen/Geometry>
#include <cmath>

#include "io/bal.h"
#include "solver/ba_problem.h"
#include "solver/bundle_adjuster.h"
#include "solver/camera_model.h"
#include "solver/loss.h"
#include "solver/synthetic.h"
#include "tests/common/ba_helpers.h"
#include "tests/common/shared_data.h"

namespace tiepoint {
namespace {

using testing::SolveWith;

Scene SmallSynthetic(double noise, uint64_t seed, Scene* truth = nullptr) {
  SyntheticOptions o;
  o.num_cameras = 12;
  o.num_points = 800;
  o.observations_per_point = 4;
  o.noise_px = noise;
  o.seed = seed;
  Scene initial;
  EXPECT_TRUE(MakeSyntheticProblem(o, &initial, truth).ok());
  return initial;
}

double IndependentCost(const Scene& scene, const LossFunction& loss) {
  double cost = 0.0;
  for (int64_t i = 0; i < scene.num_observations(); ++i) {
    double predicted[2];
    ProjectBal(scene.camera(scene.obs_camera[i]), scene.point(scene.obs_point[i]), predicted);
    const double dx = predicted[0] - scene.obs_xy[2 * i], dy = predicted[1] - scene.obs_xy[2 * i + 1];
    double rho, drho;
    loss.Evaluate(dx * dx + dy * dy, &rho, &drho);
    cost += 0.5 * rho;
  }
  return cost;
}

TEST(LevenbergMarquardt, NoiseFreeProblemConvergesToZeroCost) {
  Scene scene = SmallSynthetic(0.0, 3);
  const BundleAdjusterSummary s = SolveWith(SolverType::kCholmod, &scene);
  EXPECT_TRUE(s.IsSolutionUsable()) << s.message;
  EXPECT_GT(s.initial_cost, 1.0);
  EXPECT_LT(s.final_cost, 1e-12 * s.initial_cost);
  ASSERT_GE(s.trace.size(), 2u);
  EXPECT_EQ(s.trace.front().iteration, 0);
  EXPECT_DOUBLE_EQ(s.trace.front().cost, s.initial_cost);
  for (size_t k = 1; k < s.trace.size(); ++k) EXPECT_LE(s.trace[k].cost, s.trace[k - 1].cost);
  EXPECT_NEAR(IndependentCost(scene, {}), s.final_cost, 1e-9 * s.initial_cost);
}

TEST(LevenbergMarquardt, MatchesCeresSparseOnNoisySynthetic) {
  Scene a = SmallSynthetic(1.0, 5);
  Scene b = a;
  const BundleAdjusterSummary sa = SolveWith(SolverType::kCholmod, &a);
  const BundleAdjusterSummary sb = SolveWith(SolverType::kCeresSparse, &b);
  // Same cost function, summed in another order (and rotated by a matrix rather than
  // Rodrigues' formula): equal to rounding.
  EXPECT_NEAR(sa.initial_cost, sb.initial_cost, 1e-12 * sb.initial_cost);
  EXPECT_NEAR(sa.final_cost, sb.final_cost, 1e-5 * sb.final_cost);
}

TEST(LevenbergMarquardt, RobustLossesMatchCeres) {
  for (const LossFunction loss : {LossFunction{LossType::kHuber, 1.0}, LossFunction{LossType::kCauchy, 2.0}}) {
    Scene a = SmallSynthetic(1.0, 9);
    // Outliers: every 50th observation off by 40 px.
    for (int64_t i = 0; i < a.num_observations(); i += 50) a.obs_xy[2 * i] += 40.0;
    Scene b = a;
    BundleAdjusterOptions options;
    options.loss = loss;
    const BundleAdjusterSummary sa = SolveWith(SolverType::kCholmod, &a, options);
    const BundleAdjusterSummary sb = SolveWith(SolverType::kCeresSparse, &b, options);
    EXPECT_NEAR(sa.initial_cost, sb.initial_cost, 1e-9 * sb.initial_cost) << ToString(loss);
    EXPECT_NEAR(sa.final_cost, sb.final_cost, 1e-4 * sb.final_cost) << ToString(loss);
    EXPECT_NEAR(IndependentCost(a, loss), sa.final_cost, 1e-9 * sa.final_cost) << ToString(loss);
  }
}

// LossFunction::Derivative gives Evaluate's rho'(s) bit for bit (the reconstruction
// bundle adjuster weights its Jacobians with it), on both sides of Huber's knee, at zero,
// and for huge s.
TEST(LossFunction, DerivativeIsEvaluatesDerivative) {
  for (const LossFunction loss : {LossFunction{}, LossFunction{LossType::kHuber, 1.5}, LossFunction{LossType::kCauchy, 1.0},
                                  LossFunction{LossType::kCauchy, 2.0}}) {
    for (double s : {0.0, 1e-300, 1e-8, 0.5, 1.0, 2.25, 2.2500000001, 3.0, 17.0, 1e6, 1e300}) {
      double rho = 0, drho = 0;
      loss.Evaluate(s, &rho, &drho);
      EXPECT_EQ(loss.Derivative(s), drho) << ToString(loss) << " s = " << s;
    }
  }
  // A robust loss weights a large residual down: the test would see a Derivative of 1.
  EXPECT_LT(LossFunction({LossType::kCauchy, 1.0}).Derivative(99.0), 0.011);
  EXPECT_LT(LossFunction({LossType::kHuber, 1.0}).Derivative(100.0), 0.11);
}

TEST(LevenbergMarquardt, FixedCamerasAndIntrinsicsStayConstant) {
  for (SolverType type : {SolverType::kCholmod, SolverType::kPcgSchur, SolverType::kPcgHessian}) {
    Scene scene = SmallSynthetic(0.5, 13);
    const Scene before = scene;
    BundleAdjusterOptions options;
    options.fixed_cameras = {0, 4};
    options.fix_intrinsics = true;
    options.loss = LossFunction{LossType::kHuber, 2.0};
    const BundleAdjusterSummary s = SolveWith(type, &scene, options);
    EXPECT_LT(s.final_cost, 0.5 * s.initial_cost) << ToString(type);
    for (int c : options.fixed_cameras) {
      for (int k = 0; k < 9; ++k) EXPECT_EQ(scene.camera(c)[k], before.camera(c)[k]) << ToString(type);
    }
    bool moved = false;
    for (int c = 0; c < scene.num_cameras(); ++c) {
      for (int k = 6; k < 9; ++k) EXPECT_EQ(scene.camera(c)[k], before.camera(c)[k]) << ToString(type);
      if (c != 0 && c != 4) moved |= scene.camera(c)[3] != before.camera(c)[3];
    }
    EXPECT_TRUE(moved) << ToString(type);
  }
}

TEST(LevenbergMarquardt, BadFixedCameraIsAnOptionsErrorAndLeavesSceneUnchanged) {
  Scene scene = SmallSynthetic(0.5, 13);
  const Scene before = scene;
  BundleAdjusterOptions options;
  options.fixed_cameras = {99};
  std::unique_ptr<BundleAdjuster> adjuster;
  ASSERT_TRUE(BundleAdjuster::Create(options, &adjuster).ok());
  BundleAdjusterSummary summary;
  const Status s = adjuster->Solve(&scene, &summary);
  EXPECT_EQ(s.code(), StatusCode::kInvalidOptions);
  EXPECT_NE(s.message().find("99"), std::string::npos);
  EXPECT_EQ(scene.cameras, before.cameras);
}

TEST(LevenbergMarquardt, NonFiniteInitialValueNamesTheObservation) {
  Scene scene = SmallSynthetic(0.5, 17);
  const int bad = scene.obs_point[5];
  scene.point(bad)[0] = std::nan("");
  const BundleAdjusterSummary s = SolveWith(SolverType::kCholmod, &scene);
  EXPECT_FALSE(s.IsSolutionUsable());
  EXPECT_NE(s.message.find("point " + std::to_string(bad)), std::string::npos) << s.message;
}

// The solve sorts the observations by (point, camera) in place (BAL's own order) and
// otherwise leaves them bit for bit as they were, normalization included.
TEST(LevenbergMarquardt, ObservationsComeBackSortedByPointAndUnchanged) {
  Scene scene = SmallSynthetic(0.5, 17);
  ASSERT_FALSE(ObservationsSortedByPoint(scene));
  std::vector<std::tuple<int, int, double, double>> before, after;
  for (int64_t i = 0; i < scene.num_observations(); ++i) {
    before.emplace_back(scene.obs_point[i], scene.obs_camera[i], scene.obs_xy[2 * i], scene.obs_xy[2 * i + 1]);
  }
  std::sort(before.begin(), before.end());
  SolveWith(SolverType::kPcgSchur, &scene);
  EXPECT_TRUE(ObservationsSortedByPoint(scene));
  for (int64_t i = 0; i < scene.num_observations(); ++i) {
    after.emplace_back(scene.obs_point[i], scene.obs_camera[i], scene.obs_xy[2 * i], scene.obs_xy[2 * i + 1]);
  }
  EXPECT_EQ(after, before);
}

// Similarity-aligns `points` onto `truth_points` (both 3xN) and returns the RMS distance.
double AlignedRms(const Eigen::Matrix3Xd& points, const Eigen::Matrix3Xd& truth_points) {
  const Eigen::Matrix4d T = Eigen::umeyama(points, truth_points, true);
  const Eigen::Matrix3Xd aligned =
      (T.topLeftCorner<3, 3>() * points).colwise() + T.topRightCorner<3, 1>();
  return std::sqrt((aligned - truth_points).colwise().squaredNorm().mean());
}

Eigen::Matrix3Xd PointsOf(const Scene& s) {
  return Eigen::Map<const Eigen::Matrix3Xd>(s.points.data(), 3, s.num_points());
}

TEST(LevenbergMarquardt, SyntheticProblemReturnsToGroundTruthWithinNoise) {
  const double noise = 0.5;
  Scene truth;
  SyntheticOptions o;
  o.num_cameras = 20;
  o.num_points = 3000;
  o.observations_per_point = 5;
  o.noise_px = noise;
  o.seed = 21;
  Scene scene;
  ASSERT_TRUE(MakeSyntheticProblem(o, &scene, &truth).ok());
  const double initial_error = AlignedRms(PointsOf(scene), PointsOf(truth));
  const BundleAdjusterSummary s = SolveWith(SolverType::kCholmod, &scene);
  ASSERT_TRUE(s.IsSolutionUsable());
  const double final_error = AlignedRms(PointsOf(scene), PointsOf(truth));
  // Per-observation RMS of the 2D error: noise sqrt(2) sigma, less the part the
  // parameters absorb: E|r|^2 = 2 sigma^2 (1 - params / (2 N)), params net of the gauge.
  const double rms = ReprojectionRms(scene, 0);
  const double params = 9.0 * o.num_cameras + 3.0 * o.num_points - 7.0;
  const double expected =
      noise * std::sqrt(2.0) * std::sqrt(1.0 - params / (2.0 * scene.num_observations()));
  EXPECT_NEAR(rms, expected, 0.03 * expected);
  // The truth itself is no better a fit than the solution.
  EXPECT_LE(s.final_cost, IndependentCost(truth, {}) * (1 + 1e-9));
  // Started from the truth itself, the solver lands where the noise puts the optimum; from
  // the perturbed start it must land at the same point (up to the gauge): the remaining
  // error is the noise's, not the start's.
  Scene from_truth = truth;
  const BundleAdjusterSummary t = SolveWith(SolverType::kCholmod, &from_truth);
  const double noise_error = AlignedRms(PointsOf(from_truth), PointsOf(truth));
  EXPECT_NEAR(s.final_cost, t.final_cost, 1e-6 * t.final_cost);
  EXPECT_NEAR(final_error, noise_error, 0.02 * noise_error)
      << "initial " << initial_error << " final " << final_error << " noise-only " << noise_error;
  EXPECT_LT(final_error, 0.25 * initial_error);
}

// Real BAL problems: Ceres documents 4.185660e+06 -> 1.803390e+04 for problem-16-22106.
TEST(LevenbergMarquardtRealData, Dubrovnik16ReachesCeresDocumentedCost) {
  TIEPOINT_REQUIRE_SHARED(path, "bal/problem-16-22106-pre.txt.bz2");
  Scene scene;
  ASSERT_TRUE(ReadBal(path, &scene).ok());
  const BundleAdjusterSummary s = SolveWith(SolverType::kCholmod, &scene);
  EXPECT_NEAR(s.initial_cost, 4.185660e6, 0.5e-6 * 4.185660e6 + 1.0);
  EXPECT_NEAR(s.final_cost, 1.803390e4, 5e-4 * 1.803390e4);
  std::printf("problem-16-22106: cholmod %.6e -> %.6e in %d iterations, %.2f s\n",
              s.initial_cost, s.final_cost, s.iterations, s.total_time_s);
}

class RealDataVsCeres : public ::testing::TestWithParam<const char*> {};

TEST_P(RealDataVsCeres, CholmodFinalCostWithinTolerance) {
  TIEPOINT_REQUIRE_SHARED(path, GetParam());
  Scene a;
  ASSERT_TRUE(ReadBal(path, &a).ok());
  Scene b = a;
  const BundleAdjusterSummary sa = SolveWith(SolverType::kCholmod, &a);
  const BundleAdjusterSummary sb = SolveWith(SolverType::kCeresSparse, &b);
  EXPECT_NEAR(sa.final_cost, sb.final_cost, 5e-4 * sb.final_cost);
  std::printf("%s: cholmod %.6e (%d it, %.2f s)  ceres-sparse %.6e (%d it, %.2f s)\n", GetParam(),
              sa.final_cost, sa.iterations, sa.total_time_s, sb.final_cost, sb.iterations,
              sb.total_time_s);
}

INSTANTIATE_TEST_SUITE_P(SharedBal, RealDataVsCeres,
                         ::testing::Values("bal/problem-49-7776-pre.txt",
                                           "bal/problem-21-11315-pre.txt",
                                           "bal/tiny_gtsam/dubrovnik-3-7-pre.txt"));

}  // namespace
}  // namespace tiepoint
