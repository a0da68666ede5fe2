// The GPU hypothesis search of fundamental-matrix RANSAC (solver/geometry/fundamental_cuda.h)
// against the CPU search, and the parts of it that run without a GPU: the counter-based
// sampler (solver/geometry/sample_draw.h) and RansacOptions::candidate_samples.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "io/base/cuda_device.h"
#include "solver/geometry/fundamental_cuda.h"
#include "solver/geometry/sample_draw.h"
#include "solver/geometry/two_view_geometry.h"

namespace tiepoint {
namespace {

using Points = std::vector<std::array<double, 2>>;

bool HaveGpu() {
  std::vector<CudaDeviceInfo> devices;
  return FundamentalSearchCudaBuilt() && QueryCudaDevices(&devices).ok() && !devices.empty();
}

struct Pair {
  Points x1, x2;
  std::vector<int> inlier;  // indices of the true correspondences
};

// num_inliers projections of a random 3-D scene into two 1920x1080 views (noise_px
// Gaussian noise) among num_points, the rest uniform on the images; shuffled.
Pair MakePair(int num_points, int num_inliers, double noise_px, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::normal_distribution<double> g(0.0, 1.0);
  Eigen::Matrix3d K;
  K << 1500, 0, 960, 0, 1500, 540, 0, 0, 1;
  const Eigen::Vector3d axis = Eigen::Vector3d(g(rng), g(rng), g(rng)).normalized();
  const Eigen::Matrix3d R = Eigen::AngleAxisd(0.1 + 0.2 * u(rng), axis).toRotationMatrix();
  const Eigen::Vector3d t(1.0, 0.2 * g(rng), 0.2 * g(rng));
  std::vector<std::pair<std::array<double, 2>, std::array<double, 2>>> all;
  std::vector<bool> is_inlier;
  while (static_cast<int>(all.size()) < num_inliers) {
    const Eigen::Vector3d ray = K.inverse() * Eigen::Vector3d(1920 * u(rng), 1080 * u(rng), 1.0);
    const Eigen::Vector3d X1 = (4.0 + 6.0 * u(rng)) * ray, X2 = R * X1 + t;
    if (X2.z() <= 0.5) continue;
    const Eigen::Vector2d a = (K * X1).hnormalized(), b = (K * X2).hnormalized();
    if (b.x() < 0 || b.x() > 1920 || b.y() < 0 || b.y() > 1080) continue;
    all.push_back({{a.x() + noise_px * g(rng), a.y() + noise_px * g(rng)},
                   {b.x() + noise_px * g(rng), b.y() + noise_px * g(rng)}});
    is_inlier.push_back(true);
  }
  while (static_cast<int>(all.size()) < num_points) {
    all.push_back({{1920 * u(rng), 1080 * u(rng)}, {1920 * u(rng), 1080 * u(rng)}});
    is_inlier.push_back(false);
  }
  std::vector<int> order(all.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::shuffle(order.begin(), order.end(), rng);
  Pair p;
  for (int k : order) {
    if (is_inlier[k]) p.inlier.push_back(static_cast<int>(p.x1.size()));
    p.x1.push_back(all[k].first);
    p.x2.push_back(all[k].second);
  }
  return p;
}

TwoViewGeometry Fundamental(const Pair& p, const RansacOptions& o) {
  TwoViewGeometry g;
  const Status s = EstimateTwoViewGeometry(TwoViewModel::kFundamental, p.x1, p.x2, nullptr, nullptr, o, &g);
  EXPECT_TRUE(s.ok()) << s.message();
  return g;
}

TEST(SampleDraw, DistinctInRangeRepeatableAndUniform) {
  std::vector<int> hits(20, 0);
  for (uint64_t t = 0; t < 20000; ++t) {
    int a[7], b[7];
    two_view::DrawSample<7>(42, 3, t, 20, a);
    two_view::DrawSample<7>(42, 3, t, 20, b);
    const std::set<int> distinct(a, a + 7);
    ASSERT_EQ(distinct.size(), 7u) << "sample " << t;
    for (int k = 0; k < 7; ++k) {
      ASSERT_GE(a[k], 0);
      ASSERT_LT(a[k], 20);
      ASSERT_EQ(a[k], b[k]);
      ++hits[a[k]];
    }
  }
  // Each index is in 7/20 of the samples: 7,000 of 20,000 (sd ~ 67).
  for (int i = 0; i < 20; ++i) EXPECT_NEAR(hits[i], 7000, 400) << "index " << i;
  // Other streams and seeds give other samples.
  int a[7], b[7], c[7];
  two_view::DrawSample<7>(42, 3, 5, 1000, a);
  two_view::DrawSample<7>(42, 4, 5, 1000, b);
  two_view::DrawSample<7>(43, 3, 5, 1000, c);
  EXPECT_FALSE(std::equal(a, a + 7, b));
  EXPECT_FALSE(std::equal(a, a + 7, c));
}

TEST(CandidateSamples, AnInlierSampleVerifiesAnOutlierSampleDoesNot) {
  const Pair p = MakePair(300, 150, 0.5, 7);
  RansacOptions o;
  o.max_error_px = 2.0;
  const TwoViewGeometry searched = Fundamental(p, o);
  ASSERT_TRUE(searched.verified);

  std::vector<int> good(p.inlier.begin(), p.inlier.begin() + 7);
  o.candidate_samples = &good;
  const TwoViewGeometry g = Fundamental(p, o);
  EXPECT_TRUE(g.verified);
  EXPECT_EQ(g.ransac_iterations, 1);
  // Local optimisation and refinement reach the search's consensus.
  EXPECT_NEAR(g.num_inliers, searched.num_inliers, 2);

  std::vector<int> bad;
  for (int i = 0; i < static_cast<int>(p.x1.size()) && bad.size() < 7; ++i) {
    if (!std::binary_search(p.inlier.begin(), p.inlier.end(), i)) bad.push_back(i);
  }
  o.candidate_samples = &bad;
  const TwoViewGeometry b = Fundamental(p, o);
  EXPECT_LT(b.num_inliers, 60);  // a model through 7 random points: chance inliers only

  std::vector<int> both = bad;
  both.insert(both.end(), good.begin(), good.end());
  o.candidate_samples = &both;
  EXPECT_NEAR(Fundamental(p, o).num_inliers, searched.num_inliers, 2);

  const std::vector<int> none;
  o.candidate_samples = &none;
  EXPECT_FALSE(Fundamental(p, o).verified);
}

TEST(CandidateSamples, BadCandidatesAreRejected) {
  const Pair p = MakePair(40, 30, 0.5, 8);
  RansacOptions o;
  TwoViewGeometry g;
  const std::vector<int> six = {0, 1, 2, 3, 4, 5};
  o.candidate_samples = &six;
  Status s = EstimateTwoViewGeometry(TwoViewModel::kFundamental, p.x1, p.x2, nullptr, nullptr, o, &g);
  EXPECT_EQ(s.code(), StatusCode::kInvalidOptions);
  EXPECT_NE(s.message().find("multiple of the sample size 7"), std::string::npos) << s.message();
  const std::vector<int> out_of_range = {0, 1, 2, 3, 4, 5, 40};
  o.candidate_samples = &out_of_range;
  s = EstimateTwoViewGeometry(TwoViewModel::kFundamental, p.x1, p.x2, nullptr, nullptr, o, &g);
  EXPECT_EQ(s.code(), StatusCode::kInvalidOptions);
  EXPECT_NE(s.message().find("outside [0, 40)"), std::string::npos) << s.message();
  o.candidate_samples = &six;
  o.early_stop = false;
  EXPECT_EQ(o.Check().code(), StatusCode::kInvalidOptions);
}

TEST(FundamentalCuda, WithoutGpuIsUnavailable) {
  if (HaveGpu()) GTEST_SKIP() << "a GPU is present: the search is tested below";
  const Pair p = MakePair(100, 60, 0.5, 9);
  std::vector<FundamentalSearchPair> pairs(1);
  pairs[0].x1 = &p.x1;
  pairs[0].x2 = &p.x2;
  std::vector<FundamentalCandidates> out;
  const Status s = SearchFundamentalCuda(pairs, FundamentalSearchOptions(), &out);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("--verify-device cpu"), std::string::npos) << s.message();
}

TEST(FundamentalCuda, BadInputIsNamed) {
  const Pair p = MakePair(100, 60, 0.5, 9);
  Points shorter = p.x2;
  shorter.pop_back();
  std::vector<FundamentalSearchPair> pairs(2);
  pairs[0].x1 = &p.x1, pairs[0].x2 = &p.x2;
  pairs[1].x1 = &p.x1, pairs[1].x2 = &shorter;
  std::vector<FundamentalCandidates> out;
  Status s = SearchFundamentalCuda(pairs, FundamentalSearchOptions(), &out);
  if (FundamentalSearchCudaBuilt()) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
    EXPECT_NE(s.message().find("pair 1"), std::string::npos) << s.message();
  } else {
    EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  }
}

// Many pairs in one call, from all-inlier to pure noise, 14 to 3,000 correspondences:
// the GPU's candidates, finished on the CPU, verify the same pairs as the CPU search and
// find the same inliers up to a few borderline points, keep the true correspondences,
// and on noise find a chance model of the CPU's size; repeated calls give the same
// candidates. (Emulating the GPU's choice on the CPU, its best 1, 4 or 32 samples by
// cost ended at the same model after local optimisation on each case tried.)
TEST(FundamentalCuda, MatchesTheCpuSearch) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  struct Case { int n, inliers; };
  // With 10,000 samples a 7-point RANSAC reliably draws an all-inlier sample down to
  // about 40% inliers (0.4^7 x 10,000 = 16 expected); below that both searches are luck.
  const std::vector<Case> cases = {{15, 15}, {20, 16},   {40, 30},    {60, 0},    {130, 0},
                                   {130, 60}, {200, 100}, {500, 250}, {800, 400}, {3000, 2400},
                                   {1000, 0}, {300, 290}, {2000, 900}, {14, 14},  {150, 70}};
  std::vector<Pair> data;
  for (int rep = 0; rep < 4; ++rep) {
    for (size_t c = 0; c < cases.size(); ++c) {
      data.push_back(MakePair(cases[c].n, cases[c].inliers, 0.7, static_cast<uint32_t>(100 * rep + c)));
    }
  }
  std::vector<FundamentalSearchPair> pairs(data.size());
  for (size_t k = 0; k < data.size(); ++k) pairs[k].x1 = &data[k].x1, pairs[k].x2 = &data[k].x2;
  FundamentalSearchOptions so;
  so.max_error_px = 2.0;
  so.samples = 10000;
  so.seed = 5;
  std::vector<FundamentalCandidates> first, second;
  size_t progress_calls = 0;
  ASSERT_TRUE(SearchFundamentalCuda(pairs, so, &first, [&](size_t, size_t) { ++progress_calls; }).ok());
  ASSERT_TRUE(SearchFundamentalCuda(pairs, so, &second).ok());
  EXPECT_GT(progress_calls, 0u);
  ASSERT_EQ(first.size(), data.size());
  RansacOptions o;
  o.max_error_px = so.max_error_px;
  o.seed = so.seed;
  for (size_t k = 0; k < data.size(); ++k) {
    const Case& c = cases[k % cases.size()];
    SCOPED_TRACE("pair " + std::to_string(k) + ": " + std::to_string(c.n) + " correspondences, " +
                 std::to_string(c.inliers) + " true");
    EXPECT_EQ(first[k].samples, second[k].samples);
    if (c.n < o.min_inliers) {
      EXPECT_EQ(first[k].samples_drawn, 0);
      EXPECT_TRUE(first[k].samples.empty());
      continue;
    }
    EXPECT_EQ(first[k].samples_drawn, so.samples);
    ASSERT_FALSE(first[k].samples.empty());
    EXPECT_EQ(first[k].samples.size() % 7, 0u);
    const TwoViewGeometry cpu = Fundamental(data[k], o);
    RansacOptions g = o;
    g.candidate_samples = &first[k].samples;
    const TwoViewGeometry gpu = Fundamental(data[k], g);
    if (c.inliers >= 2 * o.min_inliers) {
      EXPECT_TRUE(cpu.verified);
      EXPECT_TRUE(gpu.verified);
      // The GPU's model keeps the true correspondences, and about as many as the CPU's.
      int true_kept = 0, cpu_true_kept = 0;
      for (int i : data[k].inlier) true_kept += gpu.inlier_mask[i], cpu_true_kept += cpu.inlier_mask[i];
      EXPECT_GE(true_kept, 0.95 * c.inliers) << "CPU: " << cpu_true_kept;
      EXPECT_GE(gpu.num_inliers, cpu.num_inliers - std::max(3.0, 0.03 * cpu.num_inliers))
          << "true kept: GPU " << true_kept << ", CPU " << cpu_true_kept;
    } else if (c.inliers == 0) {
      // Noise: both find a model through chance inliers only (11-25 of 60-1,000 points
      // here), of about the same size; whether it reaches min_inliers is chance.
      EXPECT_NEAR(gpu.num_inliers, cpu.num_inliers, 4);
      EXPECT_LT(gpu.num_inliers, 0.05 * c.n + 10);
    }
  }
}

}  // namespace
}  // namespace tiepoint
