// Tests of the Ceres backends (kCeresSparse, kCeresIterative) on small scenes built in
// code, and on real BAL problems from the shared data directory when it is present.
#include "solver/ceres_bundle_adjuster.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "io/bal.h"
#include "io/scene.h"
#include "solver/bundle_adjuster.h"
#include "solver/camera_model.h"
#include "solver/loss.h"

namespace tiepoint {
namespace {

// ---------------------------------------------------------------------------------------
// Helpers.

std::string SharedDataDir() {
  const char* env = std::getenv("TIEPOINT_SHARED_DATA");
  if (env != nullptr && *env != '\0') return env;
#ifdef TIEPOINT_DEFAULT_SHARED_DATA
  return TIEPOINT_DEFAULT_SHARED_DATA;
#else
  return "";
#endif
}

bool FileExists(const std::string& path) {
  std::ifstream in(path);
  return in.good();
}

// 1/2 sum_i rho(|r_i|^2), computed independently of any solver.
double Cost(const Scene& scene, const LossFunction& loss) {
  double sum = 0.0;
  for (int64_t i = 0; i < scene.num_observations(); ++i) {
    double predicted[2];
    ProjectBal(scene.camera(scene.obs_camera[i]), scene.point(scene.obs_point[i]), predicted);
    const double rx = predicted[0] - scene.obs_xy[2 * i];
    const double ry = predicted[1] - scene.obs_xy[2 * i + 1];
    double rho = 0.0, drho = 0.0;
    loss.Evaluate(rx * rx + ry * ry, &rho, &drho);
    sum += rho;
  }
  return 0.5 * sum;
}

bool SameBits(const double* a, const double* b, int n) {
  return std::memcmp(a, b, sizeof(double) * static_cast<size_t>(n)) == 0;
}

bool SameParameters(const Scene& a, const Scene& b) {
  return a.cameras.size() == b.cameras.size() && a.points.size() == b.points.size() &&
         SameBits(a.cameras.data(), b.cameras.data(), static_cast<int>(a.cameras.size())) &&
         SameBits(a.points.data(), b.points.data(), static_cast<int>(a.points.size()));
}

// A small scene: every camera sees every point, observations exact for `truth`;
// `initial` is the truth slightly perturbed. BAL cameras look down -z, so the cameras
// sit about 10 units along +z of a ball of points of radius 2 (P_z in [-12, -8]).
struct SmallProblem {
  Scene truth;
  Scene initial;
};

SmallProblem MakeSmallProblem(int num_cameras = 5, int num_points = 200, uint32_t seed = 7) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::normal_distribution<double> normal(0.0, 1.0);

  SmallProblem p;
  Scene& truth = p.truth;
  truth.cameras.resize(static_cast<size_t>(kCameraParams) * num_cameras);
  truth.points.resize(static_cast<size_t>(kPointParams) * num_points);
  for (int c = 0; c < num_cameras; ++c) {
    double* cam = truth.camera(c);
    cam[0] = 0.05 * uniform(rng);
    cam[1] = 0.15 * (c - 0.5 * (num_cameras - 1)) / num_cameras + 0.02 * uniform(rng);
    cam[2] = 0.05 * uniform(rng);
    cam[3] = 0.5 * uniform(rng);
    cam[4] = 0.5 * uniform(rng);
    cam[5] = -10.0 + 0.5 * uniform(rng);
    cam[6] = 400.0 + 50.0 * c;
    cam[7] = 0.02 * uniform(rng);
    cam[8] = 0.002 * uniform(rng);
  }
  for (int j = 0; j < num_points; ++j) {
    double* X = truth.point(j);
    do {
      for (int k = 0; k < 3; ++k) X[k] = 2.0 * uniform(rng);
    } while (X[0] * X[0] + X[1] * X[1] + X[2] * X[2] > 4.0);
  }
  for (int j = 0; j < num_points; ++j) {
    for (int c = 0; c < num_cameras; ++c) {
      double predicted[2];
      ProjectBal(truth.camera(c), truth.point(j), predicted);
      truth.obs_camera.push_back(c);
      truth.obs_point.push_back(j);
      truth.obs_xy.push_back(predicted[0]);
      truth.obs_xy.push_back(predicted[1]);
    }
  }

  p.initial = truth;
  for (int c = 0; c < num_cameras; ++c) {
    double* cam = p.initial.camera(c);
    for (int k = 0; k < 3; ++k) cam[k] += 1e-3 * normal(rng);
    for (int k = 3; k < 6; ++k) cam[k] += 1e-2 * normal(rng);
    cam[6] *= 1.0 + 1e-3 * normal(rng);
    cam[7] += 1e-4 * normal(rng);
    cam[8] += 1e-5 * normal(rng);
  }
  for (double& x : p.initial.points) x += 1e-2 * normal(rng);
  return p;
}

BundleAdjusterOptions OptionsFor(SolverType solver) {
  BundleAdjusterOptions options;
  options.solver = solver;
  options.num_threads = 2;
  return options;
}

Status Solve(const BundleAdjusterOptions& options, Scene* scene,
             BundleAdjusterSummary* summary) {
  std::unique_ptr<BundleAdjuster> adjuster = CreateCeresBundleAdjuster(options);
  if (!adjuster) return Status::Internal("CreateCeresBundleAdjuster returned null");
  return adjuster->Solve(scene, summary);
}

void ExpectWellFormedTrace(const BundleAdjusterSummary& summary) {
  ASSERT_FALSE(summary.trace.empty());
  EXPECT_EQ(summary.trace.front().iteration, 0);
  EXPECT_EQ(summary.trace.front().cost, summary.initial_cost);
  EXPECT_EQ(summary.iterations + 1, static_cast<int>(summary.trace.size()));
  int accepted = 0;
  for (size_t k = 1; k < summary.trace.size(); ++k) {
    const IterationSummary& row = summary.trace[k];
    EXPECT_EQ(row.iteration, static_cast<int>(k));
    EXPECT_LE(row.cost, summary.trace[k - 1].cost) << "iteration " << k;
    EXPECT_GE(row.time_s, summary.trace[k - 1].time_s);
    if (row.step_accepted) {
      ++accepted;
    } else {
      EXPECT_EQ(row.cost_change, 0.0);
      EXPECT_EQ(row.cost, summary.trace[k - 1].cost);
    }
    EXPECT_GT(row.trust_region_radius, 0.0);
    EXPECT_DOUBLE_EQ(row.lambda, 1.0 / row.trust_region_radius);
  }
  EXPECT_EQ(accepted, summary.successful_iterations);
  EXPECT_LE(summary.final_cost, summary.initial_cost);
  EXPECT_NEAR(summary.trace.back().cost, summary.final_cost,
              1e-9 * std::max(1.0, summary.final_cost) + 1e-12 * summary.initial_cost);
}

// ---------------------------------------------------------------------------------------
// Small problems built in code.

class CeresSolverTypeTest : public ::testing::TestWithParam<SolverType> {};

TEST_P(CeresSolverTypeTest, ConvergesToZeroCostOnExactObservations) {
  SmallProblem p = MakeSmallProblem();
  Scene scene = p.initial;
  BundleAdjusterOptions options = OptionsFor(GetParam());
  int callback_calls = 0;
  int last_iteration = -1;
  options.callback = [&](const IterationSummary& row) {
    ++callback_calls;
    EXPECT_EQ(row.iteration, last_iteration + 1);
    last_iteration = row.iteration;
  };
  BundleAdjusterSummary summary;
  const Status status = Solve(options, &scene, &summary);
  ASSERT_TRUE(status.ok()) << status.ToString();

  const double initial = Cost(p.initial, LossFunction());
  EXPECT_NEAR(summary.initial_cost, initial, 1e-9 * initial);
  EXPECT_GT(initial, 1.0);  // a real perturbation
  EXPECT_LT(summary.final_cost, 1e-10 * summary.initial_cost)
      << "message: " << summary.message;
  EXPECT_LT(Cost(scene, LossFunction()), 1e-10 * initial);
  EXPECT_TRUE(summary.IsSolutionUsable());
  EXPECT_NE(summary.termination, TerminationType::kMaxIterations) << summary.message;
  EXPECT_FALSE(summary.message.empty());

  EXPECT_EQ(summary.solver, ToString(GetParam()));
  EXPECT_EQ(summary.num_threads, 2);
  EXPECT_EQ(summary.num_cameras, 5);
  EXPECT_EQ(summary.num_points, 200);
  EXPECT_EQ(summary.num_observations, 1000);
  EXPECT_GT(summary.total_time_s, 0.0);
  EXPECT_GE(summary.linear_solver_time_s, 0.0);
  EXPECT_GT(summary.evaluation_time_s, 0.0);
  EXPECT_LE(summary.linear_solver_time_s + summary.evaluation_time_s,
            summary.total_time_s * 1.01 + 1e-3);

  ExpectWellFormedTrace(summary);
  EXPECT_GT(summary.iterations, 1);
  EXPECT_GT(summary.successful_iterations, 1);
  EXPECT_EQ(callback_calls, static_cast<int>(summary.trace.size()));
  if (GetParam() == SolverType::kCeresIterative) {
    int cg = 0;
    for (const IterationSummary& row : summary.trace) cg += row.linear_iterations;
    EXPECT_GT(cg, summary.iterations);  // conjugate gradients take several iterations
  }
}

TEST_P(CeresSolverTypeTest, FixedCamerasStayBitIdentical) {
  SmallProblem p = MakeSmallProblem();
  Scene scene = p.initial;
  BundleAdjusterOptions options = OptionsFor(GetParam());
  options.fixed_cameras = {0, 3};
  BundleAdjusterSummary summary;
  const Status status = Solve(options, &scene, &summary);
  ASSERT_TRUE(status.ok()) << status.ToString();
  ExpectWellFormedTrace(summary);
  EXPECT_LT(summary.final_cost, 0.1 * summary.initial_cost);
  EXPECT_NEAR(summary.final_cost, Cost(scene, LossFunction()),
              1e-9 * summary.final_cost + 1e-12 * summary.initial_cost);
  for (int c = 0; c < scene.num_cameras(); ++c) {
    const bool fixed = c == 0 || c == 3;
    EXPECT_EQ(SameBits(scene.camera(c), p.initial.camera(c), kCameraParams), fixed)
        << "camera " << c;
  }
}

TEST_P(CeresSolverTypeTest, FixedIntrinsicsStayBitIdentical) {
  SmallProblem p = MakeSmallProblem();
  Scene scene = p.initial;
  BundleAdjusterOptions options = OptionsFor(GetParam());
  options.fix_intrinsics = true;
  options.fixed_cameras = {1};  // a constant camera together with the subset manifold
  BundleAdjusterSummary summary;
  const Status status = Solve(options, &scene, &summary);
  ASSERT_TRUE(status.ok()) << status.ToString();
  ExpectWellFormedTrace(summary);
  EXPECT_LT(summary.final_cost, 0.1 * summary.initial_cost);
  for (int c = 0; c < scene.num_cameras(); ++c) {
    EXPECT_TRUE(SameBits(scene.camera(c) + 6, p.initial.camera(c) + 6, 3)) << "camera " << c;
    EXPECT_EQ(SameBits(scene.camera(c), p.initial.camera(c), 6), c == 1) << "camera " << c;
  }
  EXPECT_FALSE(SameBits(scene.points.data(), p.initial.points.data(),
                        static_cast<int>(scene.points.size())));
}

TEST_P(CeresSolverTypeTest, RobustLossCostMatchesIndependentRecomputation) {
  for (LossType type : {LossType::kHuber, LossType::kCauchy}) {
    SCOPED_TRACE(type == LossType::kHuber ? "huber" : "cauchy");
    SmallProblem p = MakeSmallProblem();
    // Outliers: every 17th observation moved by tens of pixels.
    for (size_t i = 0; i < p.initial.obs_camera.size(); i += 17) {
      p.initial.obs_xy[2 * i] += 40.0;
      p.initial.obs_xy[2 * i + 1] -= 25.0;
    }
    Scene scene = p.initial;
    BundleAdjusterOptions options = OptionsFor(GetParam());
    options.loss.type = type;
    options.loss.scale = type == LossType::kHuber ? 1.0 : 2.0;
    BundleAdjusterSummary summary;
    const Status status = Solve(options, &scene, &summary);
    ASSERT_TRUE(status.ok()) << status.ToString();
    ExpectWellFormedTrace(summary);

    const double initial = Cost(p.initial, options.loss);
    const double final_cost = Cost(scene, options.loss);
    EXPECT_NEAR(summary.initial_cost, initial, 1e-9 * initial);
    EXPECT_NEAR(summary.final_cost, final_cost, 1e-9 * final_cost);
    EXPECT_LT(summary.final_cost, summary.initial_cost);
  }
}

TEST_P(CeresSolverTypeTest, UnobservedCamerasAndPointsAreLeftAlone) {
  SmallProblem p = MakeSmallProblem();
  Scene initial = p.initial;
  // One extra camera and one extra point that nothing observes.
  const double extra_camera[9] = {0.1, 0.2, 0.3, 1, 2, 3, 500, 0.01, 0.001};
  initial.cameras.insert(initial.cameras.end(), extra_camera, extra_camera + 9);
  initial.points.insert(initial.points.end(), {7.0, 8.0, 9.0});
  Scene scene = initial;
  BundleAdjusterOptions options = OptionsFor(GetParam());
  options.fix_intrinsics = true;
  options.fixed_cameras = {5};
  BundleAdjusterSummary summary;
  const Status status = Solve(options, &scene, &summary);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(summary.num_cameras, 6);
  EXPECT_EQ(summary.num_points, 201);
  EXPECT_TRUE(SameBits(scene.camera(5), initial.camera(5), kCameraParams));
  EXPECT_TRUE(SameBits(scene.point(200), initial.point(200), kPointParams));
  EXPECT_LT(summary.final_cost, 0.1 * summary.initial_cost);
}

TEST_P(CeresSolverTypeTest, FixedCameraOutOfRangeIsAnErrorAndLeavesSceneUnchanged) {
  SmallProblem p = MakeSmallProblem();
  for (int bad : {5, -1, 1000}) {
    Scene scene = p.initial;
    BundleAdjusterOptions options = OptionsFor(GetParam());
    options.fixed_cameras = {0, bad};
    BundleAdjusterSummary summary;
    const Status status = Solve(options, &scene, &summary);
    EXPECT_FALSE(status.ok()) << "fixed camera " << bad;
    EXPECT_EQ(status.code(), StatusCode::kInvalidOptions) << status.ToString();
    EXPECT_FALSE(status.message().empty());
    EXPECT_TRUE(SameParameters(scene, p.initial));
    EXPECT_EQ(scene.obs_xy, p.initial.obs_xy);
  }
}

TEST_P(CeresSolverTypeTest, MalformedSceneIsAnErrorAndLeavesSceneUnchanged) {
  SmallProblem p = MakeSmallProblem();
  Scene broken = p.initial;
  broken.obs_point[10] = 200;  // one past the last point
  Scene scene = broken;
  BundleAdjusterSummary summary;
  const Status status = Solve(OptionsFor(GetParam()), &scene, &summary);
  EXPECT_EQ(status.code(), StatusCode::kInvalidInput) << status.ToString();
  EXPECT_TRUE(SameParameters(scene, broken));
}

TEST_P(CeresSolverTypeTest, SceneWithoutObservationsConvergesAtOnce) {
  SmallProblem p = MakeSmallProblem();
  Scene scene = p.initial;
  scene.obs_camera.clear();
  scene.obs_point.clear();
  scene.obs_xy.clear();
  const Scene before = scene;
  BundleAdjusterSummary summary;
  const Status status = Solve(OptionsFor(GetParam()), &scene, &summary);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_TRUE(summary.IsSolutionUsable()) << summary.message;
  EXPECT_EQ(summary.initial_cost, 0.0);
  EXPECT_EQ(summary.final_cost, 0.0);
  EXPECT_EQ(summary.iterations, 0);
  ASSERT_EQ(summary.trace.size(), 1u);
  EXPECT_TRUE(SameParameters(scene, before));
}

TEST_P(CeresSolverTypeTest, NonFiniteInitialCostIsReportedAsFailure) {
  SmallProblem p = MakeSmallProblem();
  Scene scene = p.initial;
  scene.point(3)[1] = std::nan("");
  const Scene before = scene;
  BundleAdjusterSummary summary;
  const Status status = Solve(OptionsFor(GetParam()), &scene, &summary);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(summary.termination, TerminationType::kFailure);
  EXPECT_FALSE(summary.IsSolutionUsable());
  EXPECT_FALSE(summary.message.empty());
  EXPECT_TRUE(std::isnan(summary.initial_cost));
  EXPECT_TRUE(SameParameters(scene, before));
}

TEST_P(CeresSolverTypeTest, RejectedStepsKeepTheCostInTheTrace) {
  // A large perturbation and no damping at first: early steps overshoot and are rejected.
  SmallProblem p = MakeSmallProblem();
  std::mt19937 rng(3);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (double& x : p.initial.points) x += 0.3 * normal(rng);
  for (int c = 0; c < p.initial.num_cameras(); ++c) {
    for (int k = 0; k < 3; ++k) p.initial.camera(c)[k] += 0.05 * normal(rng);
  }
  Scene scene = p.initial;
  BundleAdjusterOptions options = OptionsFor(GetParam());
  options.initial_trust_region_radius = 1e16;
  // One thread: whether a step overshoots must not depend on the summation order of a
  // multithreaded evaluation (with all threads it passed on one machine and not another).
  options.num_threads = 1;
  BundleAdjusterSummary summary;
  const Status status = Solve(options, &scene, &summary);
  ASSERT_TRUE(status.ok()) << status.ToString();
  ExpectWellFormedTrace(summary);
  EXPECT_LT(summary.successful_iterations, summary.iterations) << "no step was rejected";
  EXPECT_LT(summary.final_cost, 1e-3 * summary.initial_cost);
  EXPECT_NEAR(Cost(scene, LossFunction()), summary.final_cost,
              1e-9 * summary.final_cost + 1e-12 * summary.initial_cost);
}

TEST_P(CeresSolverTypeTest, MaxIterationsIsHonoured) {
  SmallProblem p = MakeSmallProblem();
  Scene scene = p.initial;
  BundleAdjusterOptions options = OptionsFor(GetParam());
  options.max_iterations = 2;
  BundleAdjusterSummary summary;
  const Status status = Solve(options, &scene, &summary);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(summary.termination, TerminationType::kMaxIterations) << summary.message;
  EXPECT_EQ(summary.iterations, 2);
  ExpectWellFormedTrace(summary);
  EXPECT_NEAR(Cost(scene, LossFunction()), summary.final_cost, 1e-9 * summary.final_cost);
}

INSTANTIATE_TEST_SUITE_P(Ceres, CeresSolverTypeTest,
                         ::testing::Values(SolverType::kCeresSparse,
                                           SolverType::kCeresIterative),
                         [](const ::testing::TestParamInfo<SolverType>& param_info) {
                           return param_info.param == SolverType::kCeresSparse ? "Sparse"
                                                                         : "Iterative";
                         });

TEST(CeresBundleAdjusterTest, RejectsNonCeresSolverType) {
  SmallProblem p = MakeSmallProblem();
  Scene scene = p.initial;
  BundleAdjusterSummary summary;
  const Status status = Solve(OptionsFor(SolverType::kCholmod), &scene, &summary);
  EXPECT_EQ(status.code(), StatusCode::kInvalidOptions) << status.ToString();
  EXPECT_TRUE(SameParameters(scene, p.initial));
}

TEST(CeresBundleAdjusterTest, TerminationNamesTheConvergenceTest) {
  SmallProblem p = MakeSmallProblem();
  {
    // A huge parameter tolerance stops at the first step.
    Scene scene = p.initial;
    BundleAdjusterOptions options = OptionsFor(SolverType::kCeresSparse);
    options.parameter_tolerance = 1.0;
    BundleAdjusterSummary summary;
    ASSERT_TRUE(Solve(options, &scene, &summary).ok());
    EXPECT_EQ(summary.termination, TerminationType::kConvergenceParameter) << summary.message;
  }
  {
    Scene scene = p.initial;
    BundleAdjusterOptions options = OptionsFor(SolverType::kCeresSparse);
    options.gradient_tolerance = 1e30;
    BundleAdjusterSummary summary;
    ASSERT_TRUE(Solve(options, &scene, &summary).ok());
    EXPECT_EQ(summary.termination, TerminationType::kConvergenceGradient) << summary.message;
  }
  {
    Scene scene = p.initial;
    BundleAdjusterOptions options = OptionsFor(SolverType::kCeresSparse);
    options.function_tolerance = 0.99;
    BundleAdjusterSummary summary;
    ASSERT_TRUE(Solve(options, &scene, &summary).ok());
    EXPECT_EQ(summary.termination, TerminationType::kConvergenceFunction) << summary.message;
  }
}

// ---------------------------------------------------------------------------------------
// Real BAL problems.

// Minimal reader for plain-text BAL files, independent of io/bal.
bool ReadPlainBal(const std::string& path, Scene* scene) {
  std::ifstream in(path);
  long long nc = 0, np = 0, no = 0;
  if (!(in >> nc >> np >> no)) return false;
  scene->obs_camera.resize(no);
  scene->obs_point.resize(no);
  scene->obs_xy.resize(2 * no);
  for (long long i = 0; i < no; ++i) {
    if (!(in >> scene->obs_camera[i] >> scene->obs_point[i] >> scene->obs_xy[2 * i] >>
          scene->obs_xy[2 * i + 1])) {
      return false;
    }
  }
  scene->cameras.resize(9 * nc);
  for (double& v : scene->cameras) {
    if (!(in >> v)) return false;
  }
  scene->points.resize(3 * np);
  for (double& v : scene->points) {
    if (!(in >> v)) return false;
  }
  return true;
}

void PrintFigures(const std::string& name, const BundleAdjusterSummary& s) {
  std::printf(
      "[ figures  ] %s %s threads=%d cameras=%d points=%d observations=%lld\n"
      "[ figures  ]   initial_cost=%.6e final_cost=%.6e iterations=%d (successful %d)\n"
      "[ figures  ]   total=%.3fs linear_solver=%.3fs evaluation=%.3fs termination=%s\n"
      "[ figures  ]   %s\n",
      name.c_str(), s.solver.c_str(), s.num_threads, s.num_cameras, s.num_points,
      s.num_observations, s.initial_cost, s.final_cost, s.iterations,
      s.successful_iterations, s.total_time_s, s.linear_solver_time_s, s.evaluation_time_s,
      ToString(s.termination), s.message.c_str());
  std::fflush(stdout);
}

TEST(CeresBundleAdjusterRealData, Problem16_22106SparseMatchesCeresDocs) {
  const std::string path = SharedDataDir() + "/bal/problem-16-22106-pre.txt.bz2";
  if (!FileExists(path)) GTEST_SKIP() << "shared data absent: " << path;
  Scene scene;
  const Status read = ReadBal(path, &scene);
  ASSERT_TRUE(read.ok()) << read.ToString();
  ASSERT_EQ(scene.num_cameras(), 16);
  ASSERT_EQ(scene.num_points(), 22106);

  BundleAdjusterOptions options;
  options.solver = SolverType::kCeresSparse;
  BundleAdjusterSummary summary;
  const Status status = Solve(options, &scene, &summary);
  ASSERT_TRUE(status.ok()) << status.ToString();
  PrintFigures("problem-16-22106", summary);
  // Ceres's documentation: 4.185660e+06 -> 1.803390e+04.
  EXPECT_NEAR(summary.initial_cost, 4.185660e+06, 1e-6 * 4.185660e+06);
  EXPECT_NEAR(summary.final_cost, 1.803390e+04, 5e-4 * 1.803390e+04);
  EXPECT_TRUE(summary.IsSolutionUsable());
  ExpectWellFormedTrace(summary);
  EXPECT_NEAR(Cost(scene, LossFunction()), summary.final_cost, 1e-9 * summary.final_cost);
}

class CeresPlainBalTest
    : public ::testing::TestWithParam<std::tuple<const char*, SolverType>> {};

TEST_P(CeresPlainBalTest, ReducesCost) {
  const std::string name = std::get<0>(GetParam());
  const std::string path = SharedDataDir() + "/bal/" + name + ".txt";
  if (!FileExists(path)) GTEST_SKIP() << "shared data absent: " << path;
  Scene scene;
  ASSERT_TRUE(ReadPlainBal(path, &scene)) << "cannot parse " << path;

  BundleAdjusterOptions options;
  options.solver = std::get<1>(GetParam());
  BundleAdjusterSummary summary;
  const Status status = Solve(options, &scene, &summary);
  ASSERT_TRUE(status.ok()) << status.ToString();
  PrintFigures(name, summary);
  EXPECT_TRUE(summary.IsSolutionUsable());
  EXPECT_LT(summary.final_cost, 0.1 * summary.initial_cost);
  ExpectWellFormedTrace(summary);
  EXPECT_NEAR(Cost(scene, LossFunction()), summary.final_cost, 1e-9 * summary.final_cost);
}

INSTANTIATE_TEST_SUITE_P(
    Bal, CeresPlainBalTest,
    ::testing::Values(std::make_tuple("problem-49-7776-pre", SolverType::kCeresSparse),
                      std::make_tuple("problem-49-7776-pre", SolverType::kCeresIterative),
                      std::make_tuple("problem-21-11315-pre", SolverType::kCeresSparse)),
    [](const ::testing::TestParamInfo<std::tuple<const char*, SolverType>>& param_info) {
      std::string n = std::get<0>(param_info.param);
      std::string out;
      for (char ch : n) out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return out + (std::get<1>(param_info.param) == SolverType::kCeresSparse ? "_Sparse"
                                                                         : "_Iterative");
    });

}  // namespace
}  // namespace tiepoint
