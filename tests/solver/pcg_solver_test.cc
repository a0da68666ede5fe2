// The PCG solvers end to end: the linear step against a dense solve, the final cost
// against cholmod (synthetic and the shared real BAL files), normalization as a round
// trip, and degenerate inputs that must never produce NaN.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <cmath>
#include <random>

#include "io/bal.h"
#include "solver/ba_problem.h"
#include "solver/bundle_adjuster.h"
#include "solver/evaluator.h"
#include "solver/normalization.h"
#include "solver/pcg_solver.h"
#include "solver/synthetic.h"
#include "tests/common/ba_helpers.h"
#include "tests/common/shared_data.h"

namespace tiepoint {
namespace {

using testing::Synthetic;

BundleAdjusterSummary Solve(SolverType type, Scene* scene, bool single = true,
                            bool recompute = false) {
  BundleAdjusterOptions options;
  options.single_precision = single;
  options.recompute_jacobian = recompute;
  return testing::SolveWith(type, scene, options);
}

bool AllFinite(const Scene& s) {
  for (double v : s.cameras) if (!std::isfinite(v)) return false;
  for (double v : s.points) if (!std::isfinite(v)) return false;
  return true;
}

// The PCG step with a tight tolerance equals the dense solution of (J^T J + D) dx = -g.
TEST(PcgSolver, StepMatchesDenseSolve) {
  const Scene scene = Synthetic(6, 60, 3, 1.0, 4);
  BAProblem problem;
  ASSERT_TRUE(BAProblem::Build(scene, {}, false, 1, &problem).ok());
  Evaluator evaluator(problem, LossFunction(), 2);
  JacobianBlocks jac;
  evaluator.Evaluate(scene.cameras.data(), scene.points.data(), &jac);
  const int nc = 9 * problem.num_cameras, np = 3 * problem.num_points;
  std::vector<double> gc(nc), gp(np), dc(nc), dp(np), rc(nc), rp(np);
  evaluator.Gradient(jac, gc.data(), gp.data());
  evaluator.JtJDiagonal(jac, dc.data(), dp.data());
  for (double& v : dc) v = std::max(v, 1e-6) * 1e-3;
  for (double& v : dp) v = std::max(v, 1e-6) * 1e-3;
  for (int k = 0; k < nc; ++k) rc[k] = -gc[k];
  for (int k = 0; k < np; ++k) rp[k] = -gp[k];

  Eigen::MatrixXd J = Eigen::MatrixXd::Zero(2 * problem.num_observations, nc + np);
  for (int64_t i = 0; i < problem.num_observations; ++i) {
    for (int r = 0; r < 2; ++r) {
      for (int a = 0; a < 9; ++a) J(2 * i + r, 9 * problem.obs_camera[i] + a) = jac.jc[18 * i + 9 * r + a];
      for (int a = 0; a < 3; ++a) J(2 * i + r, nc + 3 * problem.obs_point[i] + a) = jac.jp[6 * i + 3 * r + a];
    }
  }
  Eigen::MatrixXd H = J.transpose() * J;
  Eigen::VectorXd d(nc + np), b(nc + np);
  d << Eigen::Map<Eigen::VectorXd>(dc.data(), nc), Eigen::Map<Eigen::VectorXd>(dp.data(), np);
  b << Eigen::Map<Eigen::VectorXd>(rc.data(), nc), Eigen::Map<Eigen::VectorXd>(rp.data(), np);
  H.diagonal() += d;
  const Eigen::VectorXd expected = H.ldlt().solve(b);

  for (PcgKind kind : {PcgKind::kSchur, PcgKind::kHessian}) {
    for (Precision precision : {Precision::kDouble, Precision::kFloat}) {
      for (bool recompute : {false, true}) {
        PcgOptions o;
        o.kind = kind;
        o.precision = precision;
        o.recompute_jacobian = recompute;
        o.termination = CgTermination::kResidual;
        o.eta = precision == Precision::kDouble ? 1e-12 : 1e-6;
        o.max_iterations = 2000;
        LinearSystem system;
        ASSERT_TRUE(CreatePcgLinearSystem(o, problem, LossFunction(), &system).ok());
        system.linearization->Linearize(scene.cameras.data(), scene.points.data());
        std::vector<double> xc(nc), xp(np);
        LinearSolverSummary summary;
        ASSERT_TRUE(system.solver->Solve(dc.data(), dp.data(), rc.data(), rp.data(), xc.data(),
                                         xp.data(), &summary).ok());
        EXPECT_TRUE(summary.success);
        Eigen::VectorXd x(nc + np);
        x << Eigen::Map<Eigen::VectorXd>(xc.data(), nc), Eigen::Map<Eigen::VectorXd>(xp.data(), np);
        const double err = (x - expected).norm() / expected.norm();
        EXPECT_LT(err, precision == Precision::kDouble ? 1e-8 : 2e-3)
            << (kind == PcgKind::kSchur ? "schur" : "hessian") << " "
            << (precision == Precision::kDouble ? "double" : "float")
            << (recompute ? " recompute" : " stored") << " after " << summary.iterations
            << " CG iterations";
      }
    }
  }
}

TEST(PcgSolver, FinalCostMatchesCholmodOnSynthetic) {
  const Scene initial = Synthetic(15, 1500, 4, 1.0, 8);
  Scene reference = initial;
  const double cholmod = Solve(SolverType::kCholmod, &reference).final_cost;
  for (SolverType type : {SolverType::kPcgSchur, SolverType::kPcgHessian}) {
    for (bool single : {true, false}) {
      for (bool recompute : {false, true}) {
        Scene scene = initial;
        const BundleAdjusterSummary s = Solve(type, &scene, single, recompute);
        EXPECT_TRUE(s.IsSolutionUsable());
        EXPECT_NEAR(s.final_cost, cholmod, 1e-3 * cholmod)
            << ToString(type) << (single ? " float" : " double") << (recompute ? " recompute" : "");
        EXPECT_TRUE(AllFinite(scene));
      }
    }
  }
}

TEST(Normalization, RoundTripAndCostInvariance) {
  const Scene scene = Synthetic(8, 300, 4, 1.0, 12);
  BAProblem problem;
  ASSERT_TRUE(BAProblem::Build(scene, {}, false, 1, &problem).ok());
  std::vector<double> cams = scene.cameras, pts = scene.points;
  const Normalization n = ComputeNormalization(problem, cams.data(), pts.data());
  EXPECT_GT(n.length_scale, 1.0);   // synthetic scenes have depths of tens of units
  EXPECT_GT(n.pixel_scale, 400.0);  // focal lengths 500..1500 px
  const double cost = Evaluator(problem, LossFunction(), 1).Cost(cams.data(), pts.data());
  // The scales are powers of two, so normalizing and back is exact.
  EXPECT_EQ(std::exp2(std::round(std::log2(n.length_scale))), n.length_scale);
  EXPECT_EQ(std::exp2(std::round(std::log2(n.pixel_scale))), n.pixel_scale);
  NormalizeParameters(n, problem.num_cameras, problem.num_points, cams.data(), pts.data());
  Scene normalized_scene = scene;
  NormalizeObservations(n, &normalized_scene);
  BAProblem normalized;
  ASSERT_TRUE(BAProblem::Build(normalized_scene, {}, false, 1, &normalized).ok());
  const double normalized_cost = Evaluator(normalized, LossFunction(), 1).Cost(cams.data(), pts.data());
  EXPECT_NEAR(normalized_cost * n.CostScale(), cost, 1e-9 * cost);
  DenormalizeParameters(n, problem.num_cameras, problem.num_points, cams.data(), pts.data());
  DenormalizeObservations(n, &normalized_scene);
  EXPECT_EQ(cams, scene.cameras);
  EXPECT_EQ(pts, scene.points);
  EXPECT_EQ(normalized_scene.obs_xy, scene.obs_xy);
}

// Degenerate inputs: a camera without observations, a point seen once, a point behind a
// camera, a free gauge (nothing fixed): no NaN in the output.
TEST(PcgSolver, DegenerateInputsNeverYieldNaN) {
  Scene scene = Synthetic(8, 400, 3, 1.0, 14);
  // An extra camera with no observations.
  scene.cameras.insert(scene.cameras.end(), {0.1, 0.2, 0.3, 1, 2, 3, 800, 0, 0});
  // An extra point seen once.
  scene.points.insert(scene.points.end(), {0.5, 0.5, 0.5});
  scene.obs_camera.push_back(0);
  scene.obs_point.push_back(scene.num_points() - 1);
  scene.obs_xy.insert(scene.obs_xy.end(), {10.0, -5.0});
  // A point moved behind the camera that observes it first.
  double* p = scene.point(scene.obs_point[0]);
  const double* c = scene.camera(scene.obs_camera[0]);
  for (int k = 0; k < 3; ++k) p[k] = -c[3 + k] * 3.0;
  for (SolverType type : {SolverType::kPcgSchur, SolverType::kPcgHessian, SolverType::kCholmod}) {
    Scene s = scene;
    const BundleAdjusterSummary summary = Solve(type, &s);
    EXPECT_TRUE(AllFinite(s)) << ToString(type);
    EXPECT_TRUE(std::isfinite(summary.final_cost)) << ToString(type);
    EXPECT_LE(summary.final_cost, summary.initial_cost) << ToString(type);
    // The unobserved camera does not move.
    for (int k = 0; k < 9; ++k) EXPECT_EQ(s.camera(s.num_cameras() - 1)[k], scene.camera(scene.num_cameras() - 1)[k]);
  }
}

TEST(PcgSolver, NaNInitialValueIsNamedNotPropagated) {
  Scene scene = Synthetic(6, 200, 3, 1.0, 15);
  scene.camera(2)[4] = std::nan("");
  const Scene before = scene;
  const BundleAdjusterSummary s = Solve(SolverType::kPcgSchur, &scene);
  EXPECT_FALSE(s.IsSolutionUsable());
  EXPECT_NE(s.message.find("camera 2"), std::string::npos) << s.message;
}

class RealDataPcg : public ::testing::TestWithParam<const char*> {};

TEST_P(RealDataPcg, FloatSolversWithinTenthPercentOfCholmod) {
  TIEPOINT_REQUIRE_SHARED(path, GetParam());
  Scene initial;
  ASSERT_TRUE(ReadBal(path, &initial).ok());
  Scene reference = initial;
  const BundleAdjusterSummary c = Solve(SolverType::kCholmod, &reference, false);
  for (SolverType type : {SolverType::kPcgSchur, SolverType::kPcgHessian}) {
    Scene scene = initial;
    const BundleAdjusterSummary s = Solve(type, &scene, true);
    if (c.num_observations * 2 > 9LL * c.num_cameras + 3LL * c.num_points) {
      EXPECT_NEAR(s.final_cost, c.final_cost, 1e-3 * c.final_cost) << ToString(type);
    } else {
      // GTSAM's tiny subsets have fewer residuals than parameters: the minimum cost is 0
      // and neither solver ends at a comparable point; both must fit to < 0.1 px RMS.
      EXPECT_LT(s.RmsReprojectionError(s.final_cost), 0.1) << ToString(type);
      EXPECT_LT(c.RmsReprojectionError(c.final_cost), 0.1);
    }
    std::printf("%s: %s float %.6e (%d it, %.2f s) vs cholmod %.6e (%d it, %.2f s)\n", GetParam(),
                ToString(type), s.final_cost, s.iterations, s.total_time_s, c.final_cost,
                c.iterations, c.total_time_s);
  }
}

INSTANTIATE_TEST_SUITE_P(SharedBal, RealDataPcg,
                         ::testing::Values("bal/problem-49-7776-pre.txt",
                                           "bal/problem-21-11315-pre.txt",
                                           "bal/problem-16-22106-pre.txt.bz2",
                                           "bal/tiny_gtsam/dubrovnik-3-7-pre.txt",
                                           "bal/tiny_gtsam/dubrovnik-3-7-18-pre.txt",
                                           "bal/tiny_gtsam/dubrovnik-1-1-pre.txt"));

}  // namespace
}  // namespace tiepoint
