// RANSAC early stopping (RansacOptions::early_stop, solver/geometry/ransac.h): the float
// SIMD residuals against the double ones, the Gaussian null space, the give-up bound, and
// over many seeds on synthetic pairs with known inliers: the same model as the reference
// loop on easy pairs, pure-outlier pairs rejected quickly, pairs whose true inlier count
// clears min_inliers by a margin never rejected, and results independent of num_threads.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "solver/geometry/essential.h"
#include "solver/geometry/fundamental.h"
#include "solver/geometry/homography.h"
#include "solver/geometry/ransac.h"
#include "solver/geometry/ransac_scoring.h"
#include "solver/geometry/ransac_utils.h"
#include "solver/geometry/two_view_geometry.h"

namespace tiepoint {
namespace {

using Points = std::vector<std::array<double, 2>>;

struct Pair {
  Intrinsics k{700, 700, 320, 240};
  Eigen::Matrix3d K;
  Points x1, x2;
  int num_inliers = 0;
};

// num_inliers correspondences of a random two-view scene (on a plane when `planar`), with
// Gaussian noise of noise_px, among num_points (the rest uniform on the 640x480 image);
// shuffled.
Pair MakePair(int num_points, int num_inliers, bool planar, double noise_px, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::normal_distribution<double> g(0.0, 1.0);
  Pair p;
  p.K << p.k.fx, 0, p.k.cx, 0, p.k.fy, p.k.cy, 0, 0, 1;
  const Eigen::Vector3d axis = Eigen::Vector3d(g(rng), g(rng), g(rng)).normalized();
  const Eigen::Matrix3d R = Eigen::AngleAxisd(0.1 + 0.15 * u(rng), axis).toRotationMatrix();
  const Eigen::Vector3d t(1.0, 0.2 * g(rng), 0.2 * g(rng));
  const Eigen::Vector3d normal = Eigen::Vector3d(0.2 * g(rng), 0.2 * g(rng), 1.0).normalized();
  std::vector<std::pair<std::array<double, 2>, std::array<double, 2>>> all;
  while (static_cast<int>(all.size()) < num_inliers) {
    const Eigen::Vector3d ray = p.K.inverse() * Eigen::Vector3d(640 * u(rng), 480 * u(rng), 1.0);
    const double depth = planar ? 6.0 / normal.dot(ray) : 4.0 + 4.0 * u(rng);
    const Eigen::Vector3d X1 = depth * ray, X2 = R * X1 + t;
    if (X2.z() <= 0.5) continue;
    const Eigen::Vector2d a = (p.K * X1).hnormalized(), b = (p.K * X2).hnormalized();
    if (b.x() < 0 || b.x() > 640 || b.y() < 0 || b.y() > 480) continue;
    all.push_back({{a.x() + noise_px * g(rng), a.y() + noise_px * g(rng)},
                   {b.x() + noise_px * g(rng), b.y() + noise_px * g(rng)}});
  }
  while (static_cast<int>(all.size()) < num_points) {
    all.push_back({{640 * u(rng), 480 * u(rng)}, {640 * u(rng), 480 * u(rng)}});
  }
  std::shuffle(all.begin(), all.end(), rng);
  for (const auto& [a, b] : all) {
    p.x1.push_back(a);
    p.x2.push_back(b);
  }
  p.num_inliers = num_inliers;
  return p;
}

TwoViewGeometry Estimate(TwoViewModel model, const Pair& p, const RansacOptions& o) {
  TwoViewGeometry g;
  EXPECT_TRUE(EstimateTwoViewGeometry(model, p.x1, p.x2, &p.k, &p.k, o, &g).ok());
  return g;
}

double DistanceUpToScale(const double a[9], const double b[9]) {
  Eigen::Map<const Eigen::Matrix<double, 9, 1>> A(a), B(b);
  if (!(A.norm() > 0 && B.norm() > 0)) return std::numeric_limits<double>::infinity();
  const Eigen::Matrix<double, 9, 1> x = A / A.norm(), y = B / B.norm();
  return std::min((x - y).norm(), (x + y).norm());
}

TEST(RansacScoring, FloatResidualsMatchDouble) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int trial = 0; trial < 20; ++trial) {
    const Pair p = MakePair(200, 150, trial % 2 == 0, 0.5, 100 + trial);
    // Origins and float arrays as two_view_geometry.cc makes them.
    Eigen::Vector2d o1(0, 0), o2(0, 0);
    for (size_t i = 0; i < p.x1.size(); ++i) {
      o1 += Eigen::Vector2d(p.x1[i][0], p.x1[i][1]);
      o2 += Eigen::Vector2d(p.x2[i][0], p.x2[i][1]);
    }
    o1 /= p.x1.size();
    o2 /= p.x2.size();
    const int n = static_cast<int>(p.x1.size());
    std::vector<float> ax(n), ay(n), bx(n), by(n);
    for (int i = 0; i < n; ++i) {
      ax[i] = static_cast<float>(p.x1[i][0] - o1.x());
      ay[i] = static_cast<float>(p.x1[i][1] - o1.y());
      bx[i] = static_cast<float>(p.x2[i][0] - o2.x());
      by[i] = static_cast<float>(p.x2[i][1] - o2.y());
    }
    Eigen::Matrix3d C1 = Eigen::Matrix3d::Identity(), C2 = Eigen::Matrix3d::Identity();
    C1.block<2, 1>(0, 2) = o1;
    C2.block<2, 1>(0, 2) = o2;
    // A random fundamental matrix and homography near the scene's.
    Eigen::Matrix3d M = Eigen::Matrix3d::Random();
    const Eigen::Matrix3d F = two_view::EnforceRankTwo(p.K.inverse().transpose() * M * p.K.inverse());
    Eigen::Matrix3d H = Eigen::Matrix3d::Identity();
    H(0, 2) = 20 * u(rng), H(1, 2) = -15 * u(rng), H(2, 0) = 1e-4 * u(rng), H(0, 1) = 0.05 * u(rng);
    auto to_float = [](const Eigen::Matrix3d& A, float out[9]) {
      const double s = A.cwiseAbs().maxCoeff();
      for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 3; ++c) out[3 * r + c] = static_cast<float>(A(r, c) / s);
    };
    float Ff[9], Hf[9];
    to_float(C2.transpose() * F * C1, Ff);
    to_float(C2.inverse() * H * C1, Hf);
    std::vector<float> es(n), eh(n);
    two_view::SampsonSquaredErrors(Ff, ax.data(), ay.data(), bx.data(), by.data(), n, es.data());
    two_view::TransferSquaredErrors(Hf, ax.data(), ay.data(), bx.data(), by.data(), n, eh.data());
    for (int i = 0; i < n; ++i) {
      const Eigen::Vector2d a(p.x1[i][0], p.x1[i][1]), b(p.x2[i][0], p.x2[i][1]);
      const double ds = two_view::SampsonSquaredError(F, a, b);
      const double dh = two_view::HomographySquaredError(H, a, b);
      EXPECT_NEAR(es[i], ds, 1e-4 * (1.0 + ds)) << "trial " << trial << " point " << i;
      EXPECT_NEAR(eh[i], dh, 1e-4 * (1.0 + dh)) << "trial " << trial << " point " << i;
    }
    // Cheirality against InFrontOfBoth, for each of the four decompositions of an E.
    Eigen::Matrix3d Rs[4];
    Eigen::Vector3d ts[4];
    const Eigen::Matrix3d E = two_view::Skew(Eigen::Vector3d(1, 0.1, -0.2)) *
                              Eigen::AngleAxisd(0.2, Eigen::Vector3d(0.3, 1, 0).normalized()).toRotationMatrix();
    two_view::DecomposeEssential(E, Rs, ts);
    std::vector<float> u1x(n), u1y(n), u2x(n), u2y(n);
    std::vector<Eigen::Vector3d> r1(n), r2(n);
    for (int i = 0; i < n; ++i) {
      r1[i] = p.K.inverse() * Eigen::Vector3d(p.x1[i][0], p.x1[i][1], 1);
      r2[i] = p.K.inverse() * Eigen::Vector3d(p.x2[i][0], p.x2[i][1], 1);
      u1x[i] = static_cast<float>(r1[i].x()), u1y[i] = static_cast<float>(r1[i].y());
      u2x[i] = static_cast<float>(r2[i].x()), u2y[i] = static_cast<float>(r2[i].y());
    }
    for (int k = 0; k < 4; ++k) {
      float Rf[9], tf[3];
      for (int r = 0; r < 3; ++r) {
        for (int c = 0; c < 3; ++c) Rf[3 * r + c] = static_cast<float>(Rs[k](r, c));
        tf[r] = static_cast<float>(ts[k][r]);
      }
      std::vector<float> e(n, 1.0f);
      two_view::MarkBehindCameras(Rf, tf, u1x.data(), u1y.data(), u2x.data(), u2y.data(), n, e.data());
      int disagree = 0;
      for (int i = 0; i < n; ++i) {
        disagree += (e[i] == 1.0f) != two_view::InFrontOfBoth(Rs[k], ts[k], r1[i], r2[i]);
      }
      EXPECT_EQ(disagree, 0) << "trial " << trial << " decomposition " << k;
    }
  }
}

TEST(RansacScoring, TruncatedSumCountsAndCaps) {
  std::vector<float> e2 = {0.5f, 4.0f, 9.0f, 10.0f, std::numeric_limits<float>::quiet_NaN(),
                           std::numeric_limits<float>::infinity(), 1.0f, 0.0f, 2.0f, 100.0f, 3.0f};
  int count = 0;
  const float sum = two_view::TruncatedSum(e2.data(), static_cast<int>(e2.size()), 9.0f, &count);
  // Inliers (<= 9): 0.5, 4, 9, 1, 0, 2, 3 -> 7 of them, sum 19.5; 4 others at 9 each.
  EXPECT_EQ(count, 7);
  EXPECT_FLOAT_EQ(sum, 19.5f + 4 * 9.0f);
}

TEST(RansacNullSpace, GaussSolvesRandomSystemsAndFlagsRankLoss) {
  std::mt19937 rng(3);
  std::normal_distribution<double> g(0.0, 1.0);
  for (int trial = 0; trial < 100; ++trial) {
    double A[7][9], copy[7][9], basis[2][9];
    for (int i = 0; i < 7; ++i)
      for (int j = 0; j < 9; ++j) copy[i][j] = A[i][j] = g(rng);
    ASSERT_TRUE(two_view::NullSpaceGauss<7>(A, basis));
    for (int f = 0; f < 2; ++f) {
      double norm2 = 0;
      for (int j = 0; j < 9; ++j) norm2 += basis[f][j] * basis[f][j];
      EXPECT_NEAR(norm2, 1.0, 1e-12);
      for (int i = 0; i < 7; ++i) {
        double r = 0;
        for (int j = 0; j < 9; ++j) r += copy[i][j] * basis[f][j];
        EXPECT_NEAR(r, 0.0, 1e-10);
      }
    }
    double dot = 0;
    for (int j = 0; j < 9; ++j) dot += basis[0][j] * basis[1][j];
    EXPECT_LT(std::abs(dot), 1.0 - 1e-6);  // independent
    // Row 6 a combination of rows 0 and 1: rank 6.
    for (int j = 0; j < 9; ++j) A[6][j] = copy[6][j] = 0.3 * copy[0][j] - 2.0 * copy[1][j];
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 9; ++j) A[i][j] = copy[i][j];
    EXPECT_FALSE(two_view::NullSpaceGauss<7>(A, basis));
  }
}

TEST(RansacGiveUp, BoundFollowsTheHypergeometric) {
  EXPECT_EQ(two_view::GiveUpIterations(14, 15, 7, 0.9999), 0.0);  // no model can reach 15
  // Every sample is inside, but only half are taken to reproduce the model: 14 samples.
  EXPECT_EQ(two_view::GiveUpIterations(15, 15, 7, 0.9999), 14.0);
  EXPECT_TRUE(std::isinf(two_view::GiveUpIterations(100, 0, 7, 0.9999)));
  EXPECT_TRUE(std::isinf(two_view::GiveUpIterations(100, 5, 7, 0.9999)));
  // n = 22, m = 15, s = 7: P = C(15,7) / C(22,7) = 6435 / 170544, at half that rate.
  const double p = 6435.0 / 170544.0;
  EXPECT_EQ(two_view::GiveUpIterations(22, 15, 7, 0.9999), std::ceil(std::log(1e-4) / std::log1p(-0.5 * p)));
  EXPECT_EQ(two_view::GiveUpIterations(22, 15, 7, 0.9999), 484.0);
}

struct Case {
  TwoViewModel model;
  bool planar;
};
const Case kCases[] = {{TwoViewModel::kHomography, true},
                       {TwoViewModel::kFundamental, false},
                       {TwoViewModel::kEssential, false}};

TEST(RansacEarlyStop, SameModelAsReferenceOnEasyPairs) {
  for (const Case& c : kCases) {
    for (uint32_t seed = 0; seed < 30; ++seed) {
      const Pair p = MakePair(150, 100, c.planar, 0.5, 1000 + seed);
      RansacOptions o;
      o.seed = seed;
      o.early_stop = false;
      const TwoViewGeometry ref = Estimate(c.model, p, o);
      o.early_stop = true;
      const TwoViewGeometry now = Estimate(c.model, p, o);
      ASSERT_TRUE(ref.verified) << ToString(c.model) << " seed " << seed;
      ASSERT_TRUE(now.verified) << ToString(c.model) << " seed " << seed;
      EXPECT_NEAR(now.num_inliers, ref.num_inliers, 0.02 * ref.num_inliers)
          << ToString(c.model) << " seed " << seed;
      EXPECT_LT(DistanceUpToScale(now.matrix, ref.matrix), 1e-3) << ToString(c.model) << " seed " << seed;
      int same = 0;
      for (size_t i = 0; i < p.x1.size(); ++i) same += now.inlier_mask[i] == ref.inlier_mask[i];
      EXPECT_GE(same, static_cast<int>(p.x1.size()) - 2) << ToString(c.model) << " seed " << seed;
    }
  }
}

TEST(RansacEarlyStop, RejectsPureOutlierPairsQuickly) {
  for (const Case& c : kCases) {
    for (uint32_t seed = 0; seed < 20; ++seed) {
      RansacOptions o;
      o.seed = seed;
      // Fewer matches than min_inliers: no RANSAC at all.
      const Pair few = MakePair(12, 0, c.planar, 0.5, 2000 + seed);
      const TwoViewGeometry a = Estimate(c.model, few, o);
      EXPECT_FALSE(a.verified);
      EXPECT_EQ(a.ransac_iterations, 0);
      if (c.model == TwoViewModel::kEssential) {
        EXPECT_TRUE(std::isinf(a.rotation_uncertainty_deg));
      }
      // 20 unrelated matches, min_inliers 15: the give-up bound ends RANSAC after a few
      // hundred samples where the reference draws its 10,000.
      const Pair outliers = MakePair(20, 0, c.planar, 0.5, 3000 + seed);
      const TwoViewGeometry b = Estimate(c.model, outliers, o);
      EXPECT_FALSE(b.verified);
      const int s = c.model == TwoViewModel::kHomography ? 4 : c.model == TwoViewModel::kFundamental ? 7 : 5;
      EXPECT_LE(b.ransac_iterations,
                std::max<double>(o.min_iterations, two_view::GiveUpIterations(20, 15, s, o.confidence)))
          << ToString(c.model) << " seed " << seed;
      EXPECT_LE(b.ransac_iterations, 500) << ToString(c.model) << " seed " << seed;
      o.early_stop = false;
      EXPECT_FALSE(Estimate(c.model, outliers, o).verified);
    }
  }
}

TEST(RansacEarlyStop, NeverRejectsPairsAboveTheMinimumByAMargin) {
  // Few matches, so that the give-up bound is in force (for 30 matches and F: 2,900
  // samples), with true inliers 5 above min_inliers = 15; 1 px noise, 3 px threshold.
  int trials = 0;
  for (const Case& c : kCases) {
    for (uint32_t seed = 0; seed < 100; ++seed) {
      const Pair p = MakePair(30, 20, c.planar, 0.7, 4000 + seed);
      RansacOptions o;
      o.seed = seed;
      const TwoViewGeometry g = Estimate(c.model, p, o);
      EXPECT_TRUE(g.verified) << ToString(c.model) << " seed " << seed << ": " << g.num_inliers
                              << " inliers after " << g.ransac_iterations << " samples";
      // The reference loop finds the same support (a sample's model may fit a few of
      // the 20 less well than the truth; both loops then keep the same model).
      o.early_stop = false;
      const TwoViewGeometry ref = Estimate(c.model, p, o);
      EXPECT_TRUE(ref.verified);
      EXPECT_GE(g.num_inliers, ref.num_inliers - 1) << ToString(c.model) << " seed " << seed;
      ++trials;
    }
  }
  EXPECT_EQ(trials, 300);
}

TEST(RansacEarlyStop, ThreadCountDoesNotChangeTheResult) {
  for (const Case& c : kCases) {
    for (uint32_t seed = 0; seed < 5; ++seed) {
      for (int inliers : {0, 40, 120}) {
        const Pair p = MakePair(150, inliers, c.planar, 0.5, 5000 + seed);
        RansacOptions o;
        o.seed = seed;
        const TwoViewGeometry one = Estimate(c.model, p, o);
        o.num_threads = 4;
        const TwoViewGeometry four = Estimate(c.model, p, o);
        EXPECT_EQ(one.verified, four.verified);
        EXPECT_EQ(one.num_inliers, four.num_inliers);
        EXPECT_EQ(one.ransac_iterations, four.ransac_iterations);
        EXPECT_EQ(one.inlier_mask, four.inlier_mask);
        for (int k = 0; k < 9; ++k) EXPECT_EQ(one.matrix[k], four.matrix[k]);
      }
    }
  }
}

TEST(RansacEarlyStop, ThreadOptionIsChecked) {
  RansacOptions o;
  o.num_threads = 0;
  const Status s = o.Check();
  EXPECT_EQ(s.code(), StatusCode::kInvalidOptions);
  EXPECT_NE(s.message().find("num_threads"), std::string::npos);
}

// PROSAC (RansacOptions::Sampling::kProsac). Match costs as a matcher's distances behave:
// the inliers' lower on average, overlapping the outliers'.
// The pair with, in addition, `costs`: inliers uniform in [0, 1), outliers in [0.5, 1.5).
struct RankedPair {
  Pair p;
  std::vector<double> costs;
};
RankedPair MakeRankedPair(int num_points, int num_inliers, bool planar, uint32_t seed, bool informative) {
  // MakePair shuffles; build the inliers and outliers apart to know which is which.
  RankedPair r;
  const Pair in = MakePair(num_inliers, num_inliers, planar, 0.5, seed);
  const Pair out = MakePair(num_points - num_inliers, 0, planar, 0.5, seed + 77777);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<std::tuple<std::array<double, 2>, std::array<double, 2>, double>> all;
  for (size_t i = 0; i < in.x1.size(); ++i) all.emplace_back(in.x1[i], in.x2[i], u(rng));
  for (size_t i = 0; i < out.x1.size(); ++i)
    all.emplace_back(out.x1[i], out.x2[i], informative ? 0.5 + u(rng) : u(rng));
  std::shuffle(all.begin(), all.end(), rng);
  r.p = in;
  r.p.x1.clear(), r.p.x2.clear();
  for (const auto& [a, b, c] : all) {
    r.p.x1.push_back(a);
    r.p.x2.push_back(b);
    r.costs.push_back(c);
  }
  r.p.num_inliers = num_inliers;
  return r;
}

TwoViewGeometry EstimateRanked(TwoViewModel model, const RankedPair& r, const RansacOptions& o) {
  TwoViewGeometry g;
  EXPECT_TRUE(EstimateTwoViewGeometry(model, r.p.x1, r.p.x2, &r.costs, &r.p.k, &r.p.k, o, &g).ok());
  return g;
}

TEST(RansacProsac, SamplerDrawsDistinctRanksFromAGrowingPool) {
  const int N = 60, s = 7, horizon = 2000;
  two_view::ProsacSampler sampler(N, s, horizon);
  std::mt19937_64 rng(1);
  std::vector<int> hits(N, 0);
  int largest_seen = 0;
  double mean_largest_first_100 = 0;
  for (int t = 1; t <= 3 * horizon; ++t) {
    int rank[s];
    const int largest = sampler.Draw(rng, rank);
    for (int k = 0; k < s; ++k) {
      ASSERT_GE(rank[k], 0);
      ASSERT_LT(rank[k], N);
      for (int j = 0; j < k; ++j) ASSERT_NE(rank[j], rank[k]) << "sample " << t;
      if (t > horizon) ++hits[rank[k]];
    }
    if (t <= 20) EXPECT_LE(largest, s + t) << "sample " << t;  // the pool grows one a sample at most
    if (t <= 100) mean_largest_first_100 += largest / 100.0;
    if (t <= horizon) largest_seen = std::max(largest_seen, largest);
  }
  // The first samples come from the top of the ranking (uniform draws of 7 of 60 have a
  // mean largest rank of 52.4); by T_N the pool is all N.
  EXPECT_LT(mean_largest_first_100, 0.6 * N);
  EXPECT_EQ(largest_seen, N - 1);
  // Past the horizon, uniform: each point in about s / N of the samples.
  for (int r = 0; r < N; ++r) EXPECT_NEAR(hits[r], 2.0 * horizon * s / N, 0.3 * 2.0 * horizon * s / N) << r;
}

TEST(RansacProsac, StoppingRuleUsesTheBestPrefix) {
  // 100 ranked points, the first 20 inliers, 10 more among the rest.
  std::vector<uint8_t> in(100, 0);
  for (int r = 0; r < 20; ++r) in[r] = 1;
  for (int r = 25; r < 100; r += 8) in[r] = 1;
  double k = 0;
  const int n = two_view::ProsacStoppingPrefix(in, 7, 0.9999, 0.05, &k);
  EXPECT_GE(n, 8);
  EXPECT_LE(n, 20);
  EXPECT_EQ(k, 0.0);  // every sample of a prefix of the first 20 is all inliers
  in[3] = 0;          // 19 of the first 20
  two_view::ProsacStoppingPrefix(in, 7, 0.9999, 0.05, &k);
  const double p = 19.0 * 18 * 17 * 16 * 15 * 14 * 13 / (20.0 * 19 * 18 * 17 * 16 * 15 * 14);  // C(19,7)/C(20,7)
  EXPECT_LE(k, std::log(1e-4) / std::log1p(-p) + 1e-9);
  EXPECT_GT(k, 0.0);
  // No inliers: no bound.
  std::vector<uint8_t> none(100, 0);
  EXPECT_EQ(two_view::ProsacStoppingPrefix(none, 7, 0.9999, 0.05, &k), 100);
  EXPECT_TRUE(std::isinf(k));
  // A prefix whose count could be chance (7 of 40 with beta 0.3) is not used.
  std::vector<uint8_t> sparse(40, 0);
  for (int r = 0; r < 7; ++r) sparse[r] = 1;
  two_view::ProsacStoppingPrefix(sparse, 7, 0.9999, 0.3, &k);
  EXPECT_TRUE(std::isinf(k));
}

TEST(RansacProsac, FindsTheReferenceSupportAtLowInlierRatiosInFewSamples) {
  // 25% inliers among 200: uniform sampling runs to max_iterations (10,000) for F.
  for (const Case& c : kCases) {
    int total_prosac = 0, total_uniform = 0;
    for (uint32_t seed = 0; seed < 8; ++seed) {
      const RankedPair r = MakeRankedPair(200, 50, c.planar, 6000 + seed, true);
      RansacOptions o;
      o.seed = seed;
      const TwoViewGeometry uniform = EstimateRanked(c.model, r, o);
      o.sampling = RansacOptions::Sampling::kProsac;
      const TwoViewGeometry prosac = EstimateRanked(c.model, r, o);
      ASSERT_TRUE(uniform.verified) << ToString(c.model) << " seed " << seed;
      ASSERT_TRUE(prosac.verified) << ToString(c.model) << " seed " << seed;
      EXPECT_GE(prosac.num_inliers, uniform.num_inliers - std::max(1, uniform.num_inliers / 50))
          << ToString(c.model) << " seed " << seed;
      EXPECT_GE(prosac.num_inliers, 47) << ToString(c.model) << " seed " << seed;
      total_prosac += prosac.ransac_iterations;
      total_uniform += uniform.ransac_iterations;
    }
    EXPECT_LT(total_prosac * 5, total_uniform) << ToString(c.model);
    if (c.model == TwoViewModel::kFundamental) EXPECT_LT(total_prosac, 8 * 1000);
  }
}

TEST(RansacProsac, UninformativeRankingStillVerifies) {
  for (const Case& c : kCases) {
    for (uint32_t seed = 0; seed < 5; ++seed) {
      const RankedPair r = MakeRankedPair(150, 75, c.planar, 7000 + seed, false);
      RansacOptions o;
      o.seed = seed;
      const TwoViewGeometry uniform = EstimateRanked(c.model, r, o);
      o.sampling = RansacOptions::Sampling::kProsac;
      const TwoViewGeometry prosac = EstimateRanked(c.model, r, o);
      ASSERT_TRUE(prosac.verified) << ToString(c.model) << " seed " << seed;
      EXPECT_GE(prosac.num_inliers, uniform.num_inliers - 2) << ToString(c.model) << " seed " << seed;
    }
  }
}

TEST(RansacProsac, DeterministicAndIndependentOfThreads) {
  for (const Case& c : kCases) {
    for (uint32_t seed = 0; seed < 4; ++seed) {
      for (int inliers : {0, 50, 120}) {
        const RankedPair r = MakeRankedPair(160, inliers, c.planar, 8000 + seed, true);
        RansacOptions o;
        o.seed = seed;
        o.sampling = RansacOptions::Sampling::kProsac;
        const TwoViewGeometry a = EstimateRanked(c.model, r, o);
        const TwoViewGeometry b = EstimateRanked(c.model, r, o);
        o.num_threads = 3;
        const TwoViewGeometry d = EstimateRanked(c.model, r, o);
        for (const TwoViewGeometry* g : {&b, &d}) {
          EXPECT_EQ(a.verified, g->verified);
          EXPECT_EQ(a.num_inliers, g->num_inliers);
          EXPECT_EQ(a.ransac_iterations, g->ransac_iterations);
          EXPECT_EQ(a.inlier_mask, g->inlier_mask);
          for (int k = 0; k < 9; ++k) EXPECT_EQ(a.matrix[k], g->matrix[k]);
        }
      }
    }
  }
}

TEST(RansacProsac, BadCostsAndOptionsAreRefused) {
  const RankedPair r = MakeRankedPair(60, 40, false, 9000, true);
  RansacOptions o;
  o.sampling = RansacOptions::Sampling::kProsac;
  std::vector<double> short_costs(r.costs.begin(), r.costs.end() - 1);
  TwoViewGeometry g;
  Status s = EstimateTwoViewGeometry(TwoViewModel::kFundamental, r.p.x1, r.p.x2, &short_costs, nullptr,
                                     nullptr, o, &g);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find("match costs"), std::string::npos) << s.message();
  std::vector<double> nan_costs = r.costs;
  nan_costs[5] = std::numeric_limits<double>::quiet_NaN();
  s = EstimateTwoViewGeometry(TwoViewModel::kFundamental, r.p.x1, r.p.x2, &nan_costs, nullptr, nullptr, o, &g);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find("match cost 5"), std::string::npos) << s.message();
  o.early_stop = false;
  s = o.Check();
  EXPECT_EQ(s.code(), StatusCode::kInvalidOptions);
  EXPECT_NE(s.message().find("PROSAC"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tiepoint
