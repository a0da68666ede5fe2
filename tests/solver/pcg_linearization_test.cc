// Each matrix-free PCG operator, and the Linearization's gradient, diagonal and |J x|^2,
// against a dense double-precision reference built from the double evaluator's Jacobian,
// on random small problems, in float and in double, with stored and recomputed blocks.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <random>

#include "solver/ba_problem.h"
#include "solver/evaluator.h"
#include "solver/pcg_linearization.h"
#include "solver/synthetic.h"

namespace tiepoint {
namespace {

using MatX = Eigen::MatrixXd;
using VecX = Eigen::VectorXd;

struct Dense {
  int nc = 0, np = 0;
  MatX J;       // scaled Jacobian, 2N x (9C + 3P)
  VecX d;       // scaled damping
  MatX H;       // J^T J + diag(d)
};

class PcgOperatorsTest : public ::testing::Test {
 protected:
  void Build(uint64_t seed) {
    SyntheticOptions o;
    o.num_cameras = 6;
    o.num_points = 50;
    o.observations_per_point = 3;
    o.seed = seed;
    ASSERT_TRUE(MakeSyntheticProblem(o, &scene_, nullptr).ok());
    ASSERT_TRUE(BAProblem::Build(scene_, {}, false, 1, &problem_).ok());
    Evaluator evaluator(problem_, LossFunction(), 2);
    evaluator.Evaluate(scene_.cameras.data(), scene_.points.data(), &jac_);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0.1, 10.0);
    dc_.resize(9 * problem_.num_cameras);
    dp_.resize(3 * problem_.num_points);
    for (double& v : dc_) v = u(rng);
    for (double& v : dp_) v = u(rng);

    // Independent dense reference: J from the blocks, s = 1 / sqrt(diag(J^T J) + d).
    const int nc = 9 * problem_.num_cameras, np = 3 * problem_.num_points;
    MatX J = MatX::Zero(2 * problem_.num_observations, nc + np);
    for (int64_t i = 0; i < problem_.num_observations; ++i) {
      for (int r = 0; r < 2; ++r) {
        for (int a = 0; a < 9; ++a) J(2 * i + r, 9 * problem_.obs_camera[i] + a) = jac_.jc[18 * i + 9 * r + a];
        for (int a = 0; a < 3; ++a) J(2 * i + r, nc + 3 * problem_.obs_point[i] + a) = jac_.jp[6 * i + 3 * r + a];
      }
    }
    VecX d(nc + np);
    d << Eigen::Map<VecX>(dc_.data(), nc), Eigen::Map<VecX>(dp_.data(), np);
    const VecX s = (J.transpose() * J).diagonal().cwiseSqrt().cwiseInverse();
    J_ = J;
    r_ = Eigen::Map<VecX>(jac_.residuals.data(), jac_.residuals.size());
    dense_.nc = nc;
    dense_.np = np;
    dense_.J = J * s.asDiagonal();
    dense_.d = d.cwiseProduct(s).cwiseProduct(s);
    dense_.H = dense_.J.transpose() * dense_.J;
    dense_.H.diagonal() += dense_.d;
    scale_ = s;
  }

  template <typename T>
  void CheckAll(double tol, bool recompute) {
    PcgLinearization<T> ops(problem_, LossFunction(), 2, recompute);
    const double cost = ops.Linearize(scene_.cameras.data(), scene_.points.data());
    EXPECT_NEAR(cost, 0.5 * r_.squaredNorm(), 1e-12 * cost) << "cost";
    ops.PrepareDamping(dc_.data(), dp_.data());
    const int nc = dense_.nc, np = dense_.np;
    auto rel0 = [](const VecX& a, const VecX& b) { return (a - b).norm() / b.norm(); };
    {
      // Linearization interface, unscaled, in double (camera parts accumulate in double;
      // point parts are kept in T, so float rounds them to ~1e-7).
      const double interface_tol = std::is_same<T, float>::value ? 2e-7 : 1e-12;
      VecX g(nc + np), d(nc + np);
      ops.Gradient(g.data(), g.data() + nc);
      ops.JtJDiagonal(d.data(), d.data() + nc);
      const VecX g_ref = J_.transpose() * r_, d_ref = (J_.transpose() * J_).diagonal();
      EXPECT_LT(rel0(g.head(nc), g_ref.head(nc)), 1e-12) << "camera gradient";
      EXPECT_LT(rel0(d.head(nc), d_ref.head(nc)), 1e-12) << "camera diag(J^T J)";
      EXPECT_LT(rel0(g, g_ref), interface_tol) << "gradient";
      EXPECT_LT(rel0(d, d_ref), interface_tol) << "diag(J^T J)";
      std::mt19937_64 g2(5);
      std::normal_distribution<double> n2;
      VecX x(nc + np);
      for (int k = 0; k < nc + np; ++k) x[k] = n2(g2);
      const double jx = ops.JacobianNormSquared(x.data(), x.data() + nc);
      EXPECT_NEAR(jx, (J_ * x).squaredNorm(), tol * jx) << "|J x|^2";
    }
    const int64_t nobs = 2 * problem_.num_observations;
    std::mt19937_64 rng(99);
    std::normal_distribution<double> n01;
    auto random = [&](int n) { VecX v(n); for (int k = 0; k < n; ++k) v[k] = n01(rng); return v; };
    auto to_t = [](const VecX& v) { std::vector<T> out(v.size()); for (int k = 0; k < v.size(); ++k) out[k] = static_cast<T>(v[k]); return out; };
    auto to_d = [](const std::vector<T>& v) { VecX out(v.size()); for (size_t k = 0; k < v.size(); ++k) out[k] = v[k]; return out; };
    auto rel = [](const VecX& a, const VecX& b) { return (a - b).norm() / b.norm(); };

    // Scaling matches the dense reference.
    VecX s(nc + np);
    // (Point scales are kept in T.)
    s << Eigen::Map<const VecX>(ops.camera_scale().data(), nc), to_d(ops.point_scale());
    EXPECT_LT(rel(s, scale_), (std::is_same<T, float>::value ? 1e-7 : 1e-12)) << "column scaling";

    const VecX xc = random(nc), xp = random(np), y = random(nobs);
    VecX x(nc + np);
    x << xc, xp;
    const auto txc = to_t(xc), txp = to_t(xp), ty = to_t(y);

    std::vector<T> out(nobs);
    ops.JTimes(txc.data(), txp.data(), out.data());
    EXPECT_LT(rel(to_d(out), dense_.J * x), tol) << "J x";

    std::vector<T> gc(nc), gp(np);
    ops.JtTimes(ty.data(), gc.data(), gp.data());
    VecX g(nc + np);
    g << to_d(gc), to_d(gp);
    EXPECT_LT(rel(g, dense_.J.transpose() * y), tol) << "J^T y";

    std::vector<T> hc(nc), hp(np);
    ops.HessianTimes(txc.data(), txp.data(), hc.data(), hp.data());
    VecX h(nc + np);
    h << to_d(hc), to_d(hp);
    EXPECT_LT(rel(h, dense_.H * x), tol) << "(J^T J + D) x";

    const MatX Hcc = dense_.H.topLeftCorner(nc, nc), Hcp = dense_.H.topRightCorner(nc, np);
    const MatX Hpp = dense_.H.bottomRightCorner(np, np);
    const MatX S = Hcc - Hcp * Hpp.inverse() * Hcp.transpose();
    std::vector<T> sx(nc);
    ops.SchurTimes(txc.data(), sx.data());
    EXPECT_LT(rel(to_d(sx), S * xc), tol) << "S p";

    // Block-Jacobi preconditioners: inverse 9x9 camera blocks of U, 3x3 point blocks of V.
    VecX mc(nc), mp(np);
    for (int c = 0; c < nc / 9; ++c) mc.segment<9>(9 * c) = Hcc.block<9, 9>(9 * c, 9 * c).inverse() * xc.segment<9>(9 * c);
    for (int j = 0; j < np / 3; ++j) mp.segment<3>(3 * j) = Hpp.block<3, 3>(3 * j, 3 * j).inverse() * xp.segment<3>(3 * j);
    std::vector<T> pc(nc), pp(np);
    ops.CameraPrecondition(txc.data(), pc.data());
    ops.PointPrecondition(txp.data(), pp.data());
    EXPECT_LT(rel(to_d(pc), mc), tol) << "camera preconditioner";
    EXPECT_LT(rel(to_d(pp), mp), tol) << "point preconditioner";

    // Reduced right-hand side and back-substitution.
    std::vector<T> red(nc);
    ops.ReducedRhs(txc.data(), txp.data(), red.data());
    EXPECT_LT(rel(to_d(red), xc - Hcp * Hpp.inverse() * xp), tol) << "reduced rhs";
    std::vector<T> back(np);
    ops.BackSubstitute(txp.data(), txc.data(), back.data());
    EXPECT_LT(rel(to_d(back), Hpp.inverse() * (xp - Hcp.transpose() * xc)), tol) << "back-substitution";
  }

  Scene scene_;
  BAProblem problem_;
  JacobianBlocks jac_;
  std::vector<double> dc_, dp_;
  Dense dense_;
  VecX scale_;
  MatX J_;
  VecX r_;
};

TEST_F(PcgOperatorsTest, DoubleMatchesDenseReference) {
  for (uint64_t seed : {1, 2, 3}) {
    Build(seed);
    CheckAll<double>(1e-10, false);
  }
}

TEST_F(PcgOperatorsTest, FloatMatchesDenseReference) {
  for (uint64_t seed : {1, 2, 3}) {
    Build(seed);
    CheckAll<float>(1e-5, false);
  }
}

TEST_F(PcgOperatorsTest, RecomputedBlocksMatchDenseReference) {
  for (uint64_t seed : {4, 5}) {
    Build(seed);
    CheckAll<double>(1e-10, true);
    CheckAll<float>(1e-5, true);
  }
}

// The operators split over threads (orphaned worksharing loops in a team, per-thread
// camera accumulators) give what one thread gives, to rounding, on a problem large enough
// for two threads (kMinObservationsPerThread observations each); in double, with stored
// and recomputed blocks. The dense tests above run on one thread.
template <typename T>
std::vector<std::vector<double>> AllOperators(const BAProblem& problem, const Scene& scene,
                                              int threads, bool recompute) {
  PcgLinearization<T> ops(problem, LossFunction(), threads, recompute);
  const int64_t nc = 9LL * problem.num_cameras, np = 3LL * problem.num_points;
  const int64_t ny = 2 * problem.num_observations;
  std::vector<std::vector<double>> out;
  out.push_back({ops.Linearize(scene.cameras.data(), scene.points.data()),
                 ops.Cost(scene.cameras.data(), scene.points.data())});
  std::vector<double> g(nc + np), d(nc + np);
  ops.Gradient(g.data(), g.data() + nc);
  ops.JtJDiagonal(d.data(), d.data() + nc);
  out.push_back(g);
  out.push_back(d);
  ops.PrepareLmDamping(1e3);
  std::mt19937_64 rng(7);
  std::normal_distribution<double> n01;
  std::vector<T> xc(nc), xp(np), y(ny);
  for (T& v : xc) v = static_cast<T>(n01(rng));
  for (T& v : xp) v = static_cast<T>(n01(rng));
  for (T& v : y) v = static_cast<T>(n01(rng));
  auto push = [&out](const std::vector<T>& v) { out.emplace_back(v.begin(), v.end()); };
  std::vector<T> a(ny), bc(nc), bp(np);
  ops.JTimes(xc.data(), xp.data(), a.data());
  push(a);
  ops.JtTimes(y.data(), bc.data(), bp.data());
  push(bc);
  push(bp);
  ops.HessianTimes(xc.data(), xp.data(), bc.data(), bp.data());
  push(bc);
  push(bp);
  ops.SchurTimes(xc.data(), bc.data());
  push(bc);
  ops.CameraPrecondition(xc.data(), bc.data());
  ops.PointPrecondition(xp.data(), bp.data());
  push(bc);
  push(bp);
  ops.ReducedRhs(xc.data(), xp.data(), bc.data());
  push(bc);
  ops.BackSubstitute(xp.data(), xc.data(), bp.data());
  push(bp);
  out.push_back({ops.ScaledJacobianNormSquared(xc.data(), xp.data()),
                 ops.StepCost(xc.data(), xp.data())});
  out.push_back({static_cast<double>(ops.num_threads())});  // last: not compared
  return out;
}

TEST(PcgOperatorsThreads, TwoThreadsMatchOne) {
  SyntheticOptions o;
  o.num_cameras = 12;
  o.num_points = 2000;
  o.observations_per_point = 4;  // 8,000 observations: 2 threads
  o.seed = 11;
  Scene scene;
  BAProblem problem;
  ASSERT_TRUE(MakeSyntheticProblem(o, &scene, nullptr).ok());
  ASSERT_TRUE(BAProblem::Build(scene, {}, false, 1, &problem).ok());
  for (bool recompute : {false, true}) {
    const auto one = AllOperators<double>(problem, scene, 1, recompute);
    const auto two = AllOperators<double>(problem, scene, 2, recompute);
    ASSERT_EQ(one.back().back(), 1.0);
    ASSERT_EQ(two.back().back(), 2.0) << "the problem is too small to use two threads";
    ASSERT_EQ(one.size(), two.size());
    for (size_t k = 0; k + 1 < one.size(); ++k) {
      ASSERT_EQ(one[k].size(), two[k].size());
      double diff = 0.0, norm = 0.0;
      for (size_t i = 0; i < one[k].size(); ++i) {
        diff = std::max(diff, std::abs(one[k][i] - two[k][i]));
        norm = std::max(norm, std::abs(one[k][i]));
      }
      EXPECT_LE(diff, 1e-11 * norm) << "output " << k << (recompute ? " (recomputed)" : "");
    }
  }
}

}  // namespace
}  // namespace tiepoint
