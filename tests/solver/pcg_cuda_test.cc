// The CUDA pcg-schur backend against the CPU reference (PcgLinearization<float> and the
// CPU solver), on seeded random problems: every kernel is exercised through the
// Linearization and LinearSolver interfaces. Skips where no GPU is present (CI); there it
// checks that asking for CUDA is a clear kUnavailable error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <random>

#include "io/bal.h"
#include "io/base/cuda_device.h"
#include "solver/ba_problem.h"
#include "solver/bundle_adjuster.h"
#include "solver/pcg_cuda.h"
#include "solver/pcg_linearization.h"
#include "solver/pcg_solver.h"
#include "solver/synthetic.h"
#include "tests/common/ba_helpers.h"
#include "tests/common/shared_data.h"

namespace tiepoint {
namespace {

bool HaveGpu() {
  std::vector<CudaDeviceInfo> devices;
  return QueryCudaDevices(&devices).ok();
}

Scene Synthetic(int cameras, int points, double k, uint64_t seed) {
  return testing::Synthetic(cameras, points, k, 1.0, seed);
}

double RelativeError(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0, n = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    d += (a[k] - b[k]) * (a[k] - b[k]);
    n += b[k] * b[k];
  }
  return std::sqrt(d / n);
}

TEST(PcgCuda, WithoutGpuCudaIsUnavailable) {
  if (HaveGpu()) GTEST_SKIP() << "a GPU is present: the kernels are tested below";
  const Scene scene = Synthetic(5, 100, 3, 1);
  BAProblem problem;
  ASSERT_TRUE(BAProblem::Build(scene, {}, false, 1, &problem).ok());
  LinearSystem system;
  const Status s = CreateCudaPcgLinearSystem(PcgOptions(), problem, LossFunction(), &system);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("--device cpu"), std::string::npos);
}

// Linearization (cost, gradient, diagonal, |J x|^2) and one solve, CUDA vs CPU.
void CompareWithCpu(const Scene& scene, const std::vector<int>& fixed, bool fix_intrinsics,
                    const LossFunction& loss, PcgKind kind = PcgKind::kSchur,
                    bool recompute = false) {
  BAProblem problem;
  ASSERT_TRUE(BAProblem::Build(scene, fixed, fix_intrinsics, 1, &problem).ok());
  PcgOptions o;
  o.kind = kind;
  o.recompute_jacobian = recompute;
  o.termination = CgTermination::kResidual;
  o.eta = 1e-4;
  o.max_iterations = 500;
  LinearSystem cpu, gpu;
  ASSERT_TRUE(CreatePcgLinearSystem(o, problem, loss, &cpu).ok());
  const Status st = CreateCudaPcgLinearSystem(o, problem, loss, &gpu);
  ASSERT_TRUE(st.ok()) << st.ToString();
  const double* cams = scene.cameras.data();
  const double* pts = scene.points.data();
  const double cost_cpu = cpu.linearization->Linearize(cams, pts);
  const double cost_gpu = gpu.linearization->Linearize(cams, pts);
  EXPECT_NEAR(cost_gpu, cost_cpu, 1e-10 * cost_cpu) << "cost";
  EXPECT_NEAR(gpu.linearization->Cost(cams, pts), cost_cpu, 1e-10 * cost_cpu) << "cost only";
  const int nc = 9 * problem.num_cameras, np = 3 * problem.num_points;
  std::vector<double> gc(nc + np), gg(nc + np), dc(nc + np), dg(nc + np);
  cpu.linearization->Gradient(gc.data(), gc.data() + nc);
  gpu.linearization->Gradient(gg.data(), gg.data() + nc);
  cpu.linearization->JtJDiagonal(dc.data(), dc.data() + nc);
  gpu.linearization->JtJDiagonal(dg.data(), dg.data() + nc);
  EXPECT_LT(RelativeError(gg, gc), 1e-5) << "gradient";
  EXPECT_LT(RelativeError(dg, dc), 1e-5) << "diag(J^T J)";
  std::mt19937_64 rng(3);
  std::normal_distribution<double> n01;
  std::vector<double> x(nc + np);
  for (double& v : x) v = n01(rng);
  const double jx_cpu = cpu.linearization->JacobianNormSquared(x.data(), x.data() + nc);
  const double jx_gpu = gpu.linearization->JacobianNormSquared(x.data(), x.data() + nc);
  EXPECT_NEAR(jx_gpu, jx_cpu, 1e-5 * jx_cpu) << "|J x|^2";

  // One damped step: (J^T J + D) dx = -g.
  std::vector<double> d(nc + np), rhs(nc + np), dx_cpu(nc + np), dx_gpu(nc + np);
  for (int k = 0; k < nc + np; ++k) {
    d[k] = std::max(dc[k], 1e-6) * 1e-2;
    rhs[k] = -gc[k];
  }
  LinearSolverSummary sc, sg;
  ASSERT_TRUE(cpu.solver->Solve(d.data(), d.data() + nc, rhs.data(), rhs.data() + nc,
                                dx_cpu.data(), dx_cpu.data() + nc, &sc).ok());
  const Status ss = gpu.solver->Solve(d.data(), d.data() + nc, rhs.data(), rhs.data() + nc,
                                      dx_gpu.data(), dx_gpu.data() + nc, &sg);
  ASSERT_TRUE(ss.ok()) << ss.ToString();
  EXPECT_TRUE(sg.success);
  EXPECT_LT(RelativeError(dx_gpu, dx_cpu), 2e-3)
      << "step; CG iterations cpu " << sc.iterations << " gpu " << sg.iterations;
}

TEST(PcgCuda, KernelsMatchCpuReference) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  for (uint64_t seed : {1, 2}) {
    CompareWithCpu(Synthetic(20, 3000, 4, seed), {}, false, LossFunction());
  }
}

// The fused Schur product and reduced right-hand side, directly against the CPU operators
// (float, same damping), through both camera-sum paths (shared and global memory).
void CompareSchurOperators(const Scene& scene, bool global_camera_sums) {
  BAProblem problem;
  ASSERT_TRUE(BAProblem::Build(scene, {}, false, 1, &problem).ok());
  PcgLinearization<float> cpu(problem, LossFunction(), 2, false);
  cpu.Linearize(scene.cameras.data(), scene.points.data());
  const int nc = 9 * problem.num_cameras, np = 3 * problem.num_points;
  std::vector<double> d(nc + np), diag(nc + np);
  cpu.JtJDiagonal(diag.data(), diag.data() + nc);
  for (int k = 0; k < nc + np; ++k) d[k] = std::max(diag[k], 1e-6) * 1e-2;
  cpu.PrepareDamping(d.data(), d.data() + nc);
  std::mt19937_64 rng(9);
  std::normal_distribution<float> n01;
  std::vector<float> x(nc), bc(nc), bp(np), sx_cpu(nc), red_cpu(nc), sx_gpu, red_gpu;
  for (float& v : x) v = n01(rng);
  for (float& v : bc) v = n01(rng);
  for (float& v : bp) v = n01(rng);
  cpu.SchurTimes(x.data(), sx_cpu.data());
  cpu.ReducedRhs(bc.data(), bp.data(), red_cpu.data());
  const Status s = CudaSchurOperatorsForTest(problem, LossFunction(), scene.cameras.data(),
                                             scene.points.data(), d.data(), x, bc, bp,
                                             global_camera_sums, &sx_gpu, &red_gpu);
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto rel = [](const std::vector<float>& a, const std::vector<float>& b) {
    double e = 0, n = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      e += (static_cast<double>(a[k]) - b[k]) * (static_cast<double>(a[k]) - b[k]);
      n += static_cast<double>(b[k]) * b[k];
    }
    return std::sqrt(e / n);
  };
  EXPECT_LT(rel(sx_gpu, sx_cpu), 1e-5) << "S x" << (global_camera_sums ? " (global sums)" : "");
  EXPECT_LT(rel(red_gpu, red_cpu), 1e-5) << "reduced rhs" << (global_camera_sums ? " (global sums)" : "");
}

TEST(PcgCuda, FusedSchurOperatorsMatchCpu) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  // A point seen by more cameras than a chunk holds takes a chunk of its own.
  for (bool global : {false, true}) {
    CompareSchurOperators(Synthetic(25, 4000, 5, 21), global);
    CompareSchurOperators(Synthetic(1200, 300, 1100, 22), global);
  }
}

// Camera groups, the camera pass of problems with too many cameras for shared memory
// (a second copy of the blocks in (camera group, point) order): forced on small problems
// with groups of 7 cameras (TIEPOINT_CUDA_CAMERA_GROUP_SIZE), the Schur product and
// reduced right-hand side, then the Schur and Hessian steps with stored and recomputed
// blocks, against the CPU; and taken unasked by a problem of 7,000 cameras.
struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }
  const char* name_;
};

TEST(PcgCuda, CameraGroupsMatchCpu) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  {
    ScopedEnv env("TIEPOINT_CUDA_CAMERA_GROUP_SIZE", "7");
    CompareSchurOperators(Synthetic(25, 4000, 5, 41), false);
    CompareSchurOperators(Synthetic(60, 300, 40, 42), false);
    for (PcgKind kind : {PcgKind::kSchur, PcgKind::kHessian}) {
      for (bool recompute : {false, true}) {
        CompareWithCpu(Synthetic(30, 3000, 4, 43), {}, false, LossFunction(), kind, recompute);
        Scene scene = Synthetic(16, 1500, 4, 44);
        for (int64_t i = 0; i < scene.num_observations(); i += 40) scene.obs_xy[2 * i] += 30.0;
        CompareWithCpu(scene, {0, 3}, true, LossFunction{LossType::kHuber, 2.0}, kind, recompute);
      }
    }
    BAProblem problem;
    const Scene scene = Synthetic(30, 3000, 4, 45);
    ASSERT_TRUE(BAProblem::Build(scene, {}, false, 1, &problem).ok());
    CudaBandwidthReport r;
    ASSERT_TRUE(MeasureCudaCgBandwidth(problem, scene.cameras.data(), scene.points.data(), 1, &r).ok());
    EXPECT_EQ(r.camera_groups, 5);
    EXPECT_EQ(r.cameras_per_group, 7);
  }
  const Scene many = Synthetic(7000, 20000, 4, 46);
  CompareSchurOperators(many, false);
  BAProblem problem;
  ASSERT_TRUE(BAProblem::Build(many, {}, false, 1, &problem).ok());
  CudaBandwidthReport r;
  ASSERT_TRUE(MeasureCudaCgBandwidth(problem, many.cameras.data(), many.points.data(), 1, &r).ok());
  EXPECT_GT(r.camera_groups, 1) << "7,000 cameras' sums do not fit in shared memory";
  EXPECT_TRUE(r.streaming);
}

// pcg-hessian on the GPU: the damped step through the implicit-Hessian CG against the CPU's.
TEST(PcgCuda, HessianStepMatchesCpu) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  CompareWithCpu(Synthetic(20, 3000, 4, 5), {}, false, LossFunction(), PcgKind::kHessian);
  Scene scene = Synthetic(12, 1500, 4, 8);
  for (int64_t i = 0; i < scene.num_observations(); i += 40) scene.obs_xy[2 * i] += 30.0;
  CompareWithCpu(scene, {0, 3}, true, LossFunction{LossType::kHuber, 2.0}, PcgKind::kHessian);
}

BundleAdjusterSummary SolveOn(Device device, Scene* scene) {
  BundleAdjusterOptions options;
  options.device = device;
  return testing::SolveWith(SolverType::kPcgSchur, scene, options);
}

// --jacobian recompute on the GPU: every kernel evaluates the blocks instead of loading them.
TEST(PcgCuda, RecomputedBlocksMatchCpu) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  for (PcgKind kind : {PcgKind::kSchur, PcgKind::kHessian}) {
    CompareWithCpu(Synthetic(20, 3000, 4, 31), {}, false, LossFunction(), kind, true);
    Scene scene = Synthetic(12, 1500, 4, 32);
    for (int64_t i = 0; i < scene.num_observations(); i += 40) scene.obs_xy[2 * i] += 30.0;
    CompareWithCpu(scene, {0, 3}, true, LossFunction{LossType::kHuber, 2.0}, kind, true);
  }
}

// Out of device memory with stored blocks: the solver says so and recomputes them; with
// not even that much memory it names what it needs.
TEST(PcgCuda, OutOfMemorySwitchesToRecomputeThenExplains) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const Scene initial = Synthetic(30, 50000, 5, 33);  // ~250k observations: 24 MB of blocks
  Scene a = initial, b = initial;
  const BundleAdjusterSummary c = SolveOn(Device::kCpu, &a);
  setenv("TIEPOINT_CUDA_MEMORY_LIMIT_MB", "38", 1);
  ::testing::internal::CaptureStderr();
  const BundleAdjusterSummary g = SolveOn(Device::kCuda, &b);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("recomputing them in every product"), std::string::npos) << err;
  EXPECT_TRUE(g.IsSolutionUsable()) << g.message;
  EXPECT_NEAR(g.final_cost, c.final_cost, 1e-4 * c.final_cost);
  setenv("TIEPOINT_CUDA_MEMORY_LIMIT_MB", "8", 1);
  BAProblem problem;
  ASSERT_TRUE(BAProblem::Build(initial, {}, false, 1, &problem).ok());
  LinearSystem system;
  const Status s = CreateCudaPcgLinearSystem(PcgOptions(), problem, LossFunction(), &system);
  unsetenv("TIEPOINT_CUDA_MEMORY_LIMIT_MB");
  EXPECT_EQ(s.code(), StatusCode::kOutOfMemory) << s.ToString();
  EXPECT_NE(s.message().find("MiB of device memory even with the Jacobian blocks recomputed"),
            std::string::npos) << s.message();
}

TEST(PcgCuda, HessianBundleAdjustmentMatchesCpu) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const Scene initial = Synthetic(30, 5000, 5, 12);
  Scene a = initial, b = initial;
  BundleAdjusterOptions options;
  options.device = Device::kCpu;
  const BundleAdjusterSummary c = testing::SolveWith(SolverType::kPcgHessian, &a, options);
  options.device = Device::kCuda;
  const BundleAdjusterSummary g = testing::SolveWith(SolverType::kPcgHessian, &b, options);
  EXPECT_TRUE(g.IsSolutionUsable()) << g.message;
  EXPECT_NEAR(g.final_cost, c.final_cost, 1e-4 * c.final_cost);
}

TEST(PcgCuda, KernelsMatchWithFixedParametersAndRobustLoss) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  Scene scene = Synthetic(12, 1500, 4, 7);
  for (int64_t i = 0; i < scene.num_observations(); i += 40) scene.obs_xy[2 * i] += 30.0;
  CompareWithCpu(scene, {0, 3}, true, LossFunction{LossType::kHuber, 2.0});
}


TEST(PcgCuda, BundleAdjustmentMatchesCpu) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const Scene initial = Synthetic(30, 5000, 5, 11);
  Scene a = initial, b = initial;
  const BundleAdjusterSummary c = SolveOn(Device::kCpu, &a);
  const BundleAdjusterSummary g = SolveOn(Device::kCuda, &b);
  EXPECT_TRUE(g.IsSolutionUsable()) << g.message;
  EXPECT_NEAR(g.final_cost, c.final_cost, 1e-4 * c.final_cost);
}

class RealDataCuda : public ::testing::TestWithParam<const char*> {};

TEST_P(RealDataCuda, FinalCostWithinTenthPercentOfCholmod) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  TIEPOINT_REQUIRE_SHARED(path, GetParam());
  Scene initial;
  ASSERT_TRUE(ReadBal(path, &initial).ok());
  Scene a = initial, b = initial;
  const BundleAdjusterSummary c = testing::SolveWith(SolverType::kCholmod, &a);
  const BundleAdjusterSummary g = SolveOn(Device::kCuda, &b);
  EXPECT_NEAR(g.final_cost, c.final_cost, 1e-3 * c.final_cost);
  std::printf("%s: cuda pcg-schur %.6e (%d it, %.3f s) vs cholmod %.6e\n", GetParam(),
              g.final_cost, g.iterations, g.total_time_s, c.final_cost);
  Scene h = initial;
  BundleAdjusterOptions options;
  options.device = Device::kCuda;
  const BundleAdjusterSummary gh = testing::SolveWith(SolverType::kPcgHessian, &h, options);
  EXPECT_NEAR(gh.final_cost, c.final_cost, 1e-3 * c.final_cost) << "pcg-hessian";
}

INSTANTIATE_TEST_SUITE_P(SharedBal, RealDataCuda,
                         ::testing::Values("bal/problem-49-7776-pre.txt",
                                           "bal/problem-21-11315-pre.txt",
                                           "bal/problem-16-22106-pre.txt.bz2"));

}  // namespace
}  // namespace tiepoint
