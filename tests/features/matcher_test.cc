// The CPU matcher (features/matcher.h) against a naive double loop that computes every
// distance as sum (a - b)^2 and applies the definition literally; on random descriptors,
// on descriptors drawn from {0, 1} (many equal distances: the tie rules), and on small
// hand-made cases for each of the ratio, mutual and distance tests. ctest runs them on the
// scan the CPU picks (AVX-512 VNNI, else AVX2, else portable) and, as
// matcher_test.{avx2,scalar}_scan, on the narrower ones (TIEPOINT_MATCHER_SCAN).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "features/matcher.h"
#include "tests/features/matcher_reference.h"

namespace tiepoint {
namespace {

using testing::MatchOn;
using testing::NaiveMatch;
using testing::RandomDescriptors;

struct Case {
  int n1, n2, levels;  // levels: descriptor values 0..levels-1 (2: many ties)
  double ratio;
  bool mutual;
  double max_distance;
};

class MatcherVsNaive : public ::testing::TestWithParam<Case> {};

TEST_P(MatcherVsNaive, SameMatches) {
  const Case c = GetParam();
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    const auto a = RandomDescriptors(c.n1, c.levels, seed * 7);
    const auto b = RandomDescriptors(c.n2, c.levels, seed * 7 + 1);
    MatcherOptions o;
    o.ratio = c.ratio;
    o.mutual = c.mutual;
    o.max_distance = c.max_distance;
    const auto want = NaiveMatch(o, a, b);
    const auto got = MatchOn(Device::kCpu, o, a, b);
    ASSERT_EQ(got.size(), want.size()) << "seed " << seed;
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(got[k].index1, want[k].index1) << k;
      EXPECT_EQ(got[k].index2, want[k].index2) << k;
      EXPECT_EQ(got[k].distance_sq, want[k].distance_sq) << k;
    }
    // A test that keeps nothing proves little: random cases must produce matches.
    if (c.ratio >= 0.99 || c.levels == 256) EXPECT_GT(want.size(), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MatcherVsNaive,
    ::testing::Values(Case{57, 43, 256, 1.0, false, -1}, Case{57, 43, 256, 1.0, true, -1},
                      Case{200, 300, 256, 0.97, false, -1}, Case{300, 200, 256, 0.97, true, -1},
                      Case{150, 150, 256, 1.0, true, 1500.0},
                      // {0,1} descriptors: every distance is a small integer, ties everywhere.
                      Case{120, 90, 2, 1.0, false, -1}, Case{120, 90, 2, 1.0, true, -1},
                      Case{90, 120, 2, 0.9, true, 7.0}, Case{64, 1, 256, 0.8, false, -1},
                      Case{1, 64, 256, 1.0, true, -1}, Case{1, 1, 256, 0.8, true, -1}));

TEST(Matcher, ThreadCountDoesNotChangeMatches) {
  const auto a = RandomDescriptors(333, 3, 11);
  const auto b = RandomDescriptors(287, 3, 12);
  MatcherOptions o;
  o.ratio = 1.0;
  o.mutual = true;
  o.num_threads = 1;
  const auto one = MatchOn(Device::kCpu, o, a, b);
  o.num_threads = 4;
  const auto four = MatchOn(Device::kCpu, o, a, b);
  EXPECT_EQ(one, four);
  EXPECT_GT(one.size(), 0u);
}

// Hand-made cases: descriptor i of A is e_k-style vectors whose distances are known.
std::vector<uint8_t> Rows(const std::vector<std::vector<std::pair<int, int>>>& rows) {
  std::vector<uint8_t> d(rows.size() * 128, 0);
  for (size_t i = 0; i < rows.size(); ++i) {
    for (auto [k, v] : rows[i]) d[i * 128 + k] = static_cast<uint8_t>(v);
  }
  return d;
}

TEST(Matcher, RatioTest) {
  // A0 = 100 e0. B0 = 100 e0 + 10 e1 (d = 100), B1 = 100 e0 + 11 e2 (d = 121),
  // B2 = far. Ratio sqrt(100/121) = 0.909: kept at 0.92, dropped at 0.90.
  const auto a = Rows({{{0, 100}}});
  const auto b = Rows({{{0, 100}, {1, 10}}, {{0, 100}, {2, 11}}, {{5, 200}}});
  MatcherOptions o;
  o.ratio = 0.92;
  auto m = MatchOn(Device::kCpu, o, a, b);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].index2, 0u);
  EXPECT_EQ(m[0].distance_sq, 100u);
  o.ratio = 0.90;
  EXPECT_TRUE(MatchOn(Device::kCpu, o, a, b).empty());
  // Exactly at the ratio (d1 = ratio^2 d2) is dropped: the test is strict.
  const auto b_equal = Rows({{{0, 100}, {1, 10}}, {{0, 100}, {2, 20}}});  // 100 vs 400
  o.ratio = 0.5;
  EXPECT_TRUE(MatchOn(Device::kCpu, o, a, b_equal).empty());
  o.ratio = 0.5000001;
  EXPECT_EQ(MatchOn(Device::kCpu, o, a, b_equal).size(), 1u);
}

TEST(Matcher, TiesGoToTheLowestIndexAndFailTheRatioTest) {
  // B1 and B2 are both at distance 100 from A0; B0 is farther.
  const auto a = Rows({{{0, 100}}});
  const auto b = Rows({{{3, 50}}, {{0, 100}, {1, 10}}, {{0, 100}, {2, 10}}});
  MatcherOptions o;
  o.ratio = 1.0;
  EXPECT_TRUE(MatchOn(Device::kCpu, o, a, b).empty());  // second == best: not unique
  // With a single candidate the ratio test passes (no second neighbour).
  const auto b1 = Rows({{{0, 100}, {2, 10}}});
  auto m = MatchOn(Device::kCpu, o, a, b1);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].index2, 0u);
}

TEST(Matcher, MutualCheck) {
  // A0 and A1 both have B0 as nearest; B0's nearest is A1 (closer).
  const auto a = Rows({{{0, 100}, {1, 30}}, {{0, 100}, {1, 10}}});
  const auto b = Rows({{{0, 100}}, {{7, 250}}});
  MatcherOptions o;
  o.ratio = 1.0;
  auto plain = MatchOn(Device::kCpu, o, a, b);
  ASSERT_EQ(plain.size(), 2u);
  EXPECT_EQ(plain[0].index2, 0u);
  EXPECT_EQ(plain[1].index2, 0u);
  o.mutual = true;
  auto mutual = MatchOn(Device::kCpu, o, a, b);
  ASSERT_EQ(mutual.size(), 1u);
  EXPECT_EQ(mutual[0].index1, 1u);
  EXPECT_EQ(mutual[0].index2, 0u);
  // Equal distances from both rows: the column's nearest is the lowest row.
  const auto a_tie = Rows({{{0, 100}, {1, 10}}, {{0, 100}, {2, 10}}});
  auto tie = MatchOn(Device::kCpu, o, a_tie, b);
  ASSERT_EQ(tie.size(), 1u);
  EXPECT_EQ(tie[0].index1, 0u);
}

TEST(Matcher, MaxDistance) {
  const auto a = Rows({{{0, 100}}});
  const auto b = Rows({{{0, 100}, {1, 30}}});  // distance 30
  MatcherOptions o;
  o.max_distance = 30.0;
  EXPECT_EQ(MatchOn(Device::kCpu, o, a, b).size(), 1u);  // <= is kept
  o.max_distance = 29.99;
  EXPECT_TRUE(MatchOn(Device::kCpu, o, a, b).empty());
  o.max_distance = -1;  // no limit
  EXPECT_EQ(MatchOn(Device::kCpu, o, a, b).size(), 1u);
}

TEST(Matcher, EmptySets) {
  const auto a = RandomDescriptors(10, 256, 1);
  const std::vector<uint8_t> none;
  MatcherOptions o;
  EXPECT_TRUE(MatchOn(Device::kCpu, o, a, none).empty());
  EXPECT_TRUE(MatchOn(Device::kCpu, o, none, a).empty());
}

TEST(Matcher, ExtremeDescriptorsStayExact) {
  // All-255 against all-0: the largest possible distance, 128 x 255^2.
  std::vector<uint8_t> a(128, 255), b(2 * 128, 0);
  b[128] = 1;  // second column one step closer
  MatcherOptions o;
  o.ratio = 1.0;
  auto m = MatchOn(Device::kCpu, o, a, b);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].index2, 1u);
  EXPECT_EQ(m[0].distance_sq, 127u * 255u * 255u + 254u * 254u);
}

TEST(Matcher, OptionsAreChecked) {
  MatcherOptions o;
  o.ratio = 0;
  EXPECT_NE(o.Check().message().find("ratio"), std::string::npos);
  o.ratio = 1.2;
  EXPECT_EQ(o.Check().code(), StatusCode::kInvalidOptions);
  o = {};
  o.max_distance = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(o.Check().message().find("max_distance"), std::string::npos);
  o = {};
  o.num_threads = -2;
  EXPECT_NE(o.Check().message().find("num_threads"), std::string::npos);
  o = {};
  o.cuda_streams = 0;
  EXPECT_NE(o.Check().message().find("cuda_streams"), std::string::npos);
  std::unique_ptr<DescriptorMatcher> m;
  o = {};
  o.ratio = -1;
  EXPECT_EQ(DescriptorMatcher::Create(o, Device::kCpu, &m).code(), StatusCode::kInvalidOptions);
}

TEST(Matcher, MismatchedFeaturesAreRejected) {
  Features a, b;
  a.keypoints.resize(2);
  a.descriptors.resize(128);  // one descriptor for two keypoints
  b.keypoints.resize(1);
  b.descriptors.resize(128);
  std::unique_ptr<DescriptorMatcher> m;
  ASSERT_TRUE(DescriptorMatcher::Create({}, Device::kCpu, &m).ok());
  std::vector<FeatureMatch> out;
  EXPECT_EQ(m->Match(a, b, &out).code(), StatusCode::kInvalidInput);
}

// MatchRestricted (guided matching's descriptor step) against the definition applied
// literally to the allowed pairs only.
std::vector<FeatureMatch> NaiveRestricted(const MatcherOptions& o, const std::vector<uint8_t>& a,
                                          const std::vector<uint8_t>& b, const std::vector<uint64_t>& ptr,
                                          const std::vector<uint32_t>& cols) {
  const size_t n1 = a.size() / 128, n2 = b.size() / 128;
  auto dist = [&](size_t i, size_t j) {
    uint32_t d = 0;
    for (int k = 0; k < 128; ++k) {
      const int e = int(a[i * 128 + k]) - int(b[j * 128 + k]);
      d += static_cast<uint32_t>(e * e);
    }
    return d;
  };
  constexpr uint32_t kInf = std::numeric_limits<uint32_t>::max();
  std::vector<uint32_t> col_best(n2, kInf), col_row(n2, 0);
  for (size_t i = 0; i < n1; ++i)
    for (uint64_t k = ptr[i]; k < ptr[i + 1]; ++k)
      if (dist(i, cols[k]) < col_best[cols[k]]) {
        col_best[cols[k]] = dist(i, cols[k]);
        col_row[cols[k]] = static_cast<uint32_t>(i);
      }
  std::vector<FeatureMatch> out;
  for (size_t i = 0; i < n1; ++i) {
    if (ptr[i] == ptr[i + 1]) continue;
    uint32_t d1 = kInf, d2 = kInf, j1 = 0;
    for (uint64_t k = ptr[i]; k < ptr[i + 1]; ++k) {
      const uint32_t d = dist(i, cols[k]);
      if (d < d1) {
        d2 = d1;
        d1 = d;
        j1 = cols[k];
      } else if (d < d2) {
        d2 = d;
      }
    }
    if (o.max_distance >= 0 && !(double(d1) <= o.max_distance * o.max_distance)) continue;
    if (d2 != kInf && !(double(d1) < o.ratio * o.ratio * double(d2))) continue;
    if (o.mutual && col_row[j1] != i) continue;
    out.push_back({static_cast<uint32_t>(i), j1, d1});
  }
  return out;
}

Features AsFeatures(const std::vector<uint8_t>& d) {
  Features f;
  f.descriptors = d;
  f.keypoints.resize(d.size() / 128);
  return f;
}

TEST(MatchRestricted, EveryColumnAllowedIsMatch) {
  for (const Case& c : {Case{57, 43, 256, 0.97, false, -1}, Case{120, 90, 2, 1.0, true, -1},
                        Case{90, 120, 2, 0.9, true, 7.0}, Case{64, 1, 256, 0.8, false, -1}}) {
    const auto a = RandomDescriptors(c.n1, c.levels, 31);
    const auto b = RandomDescriptors(c.n2, c.levels, 32);
    MatcherOptions o;
    o.ratio = c.ratio;
    o.mutual = c.mutual;
    o.max_distance = c.max_distance;
    std::vector<uint64_t> ptr(1, 0);
    std::vector<uint32_t> cols;
    for (int i = 0; i < c.n1; ++i) {
      for (int j = 0; j < c.n2; ++j) cols.push_back(j);
      ptr.push_back(cols.size());
    }
    std::vector<FeatureMatch> got;
    ASSERT_TRUE(MatchRestricted(AsFeatures(a), AsFeatures(b), ptr, cols, o, &got).ok());
    EXPECT_EQ(got, NaiveMatch(o, a, b)) << c.n1 << " x " << c.n2;
  }
}

TEST(MatchRestricted, AllowedPairsOnly) {
  std::mt19937 rng(5);
  for (int levels : {256, 2}) {
    const auto a = RandomDescriptors(150, levels, 41);
    const auto b = RandomDescriptors(170, levels, 42);
    std::vector<uint64_t> ptr(1, 0);
    std::vector<uint32_t> cols;
    for (int i = 0; i < 150; ++i) {
      const int stride = 1 + static_cast<int>(rng() % 12);  // some rows keep one column or none
      for (int j = static_cast<int>(rng() % 20); j < 170; j += stride + static_cast<int>(rng() % 30)) cols.push_back(j);
      ptr.push_back(cols.size());
    }
    for (bool mutual : {false, true}) {
      MatcherOptions o;
      o.ratio = 1.0;
      o.mutual = mutual;
      o.num_threads = 3;
      std::vector<FeatureMatch> got;
      ASSERT_TRUE(MatchRestricted(AsFeatures(a), AsFeatures(b), ptr, cols, o, &got).ok());
      const auto want = NaiveRestricted(o, a, b, ptr, cols);
      EXPECT_EQ(got, want) << "levels " << levels << " mutual " << mutual;
      EXPECT_GT(want.size(), 10u);
      // Restricting the candidates changes the answer: the unrestricted matches differ.
      EXPECT_NE(want, NaiveMatch(o, a, b));
    }
  }
}

TEST(MatchRestricted, BadCandidateListsAreRejected) {
  const Features a = AsFeatures(RandomDescriptors(3, 256, 1)), b = AsFeatures(RandomDescriptors(4, 256, 2));
  std::vector<FeatureMatch> out;
  const MatcherOptions o;
  auto code = [&](std::vector<uint64_t> ptr, std::vector<uint32_t> cols) {
    return MatchRestricted(a, b, ptr, cols, o, &out).code();
  };
  EXPECT_EQ(code({0, 1, 2, 3}, {0, 1, 3}), StatusCode::kOk);
  EXPECT_EQ(code({0, 1, 2}, {0, 1}), StatusCode::kInvalidInput);          // one row short
  EXPECT_EQ(code({0, 1, 2, 3}, {0, 1, 4}), StatusCode::kInvalidInput);    // column 4 of 4
  EXPECT_EQ(code({0, 2, 2, 3}, {1, 0, 3}), StatusCode::kInvalidInput);    // out of order
  EXPECT_EQ(code({0, 2, 1, 3}, {0, 1, 3}), StatusCode::kInvalidInput);    // a list ends early
  EXPECT_EQ(code({0, 1, 2, 5}, {0, 1, 3}), StatusCode::kInvalidInput);    // past the end
}

TEST(Matcher, MatchPairsEqualsMatch) {
  std::vector<Features> images(4);
  for (int i = 0; i < 4; ++i) {
    images[i].descriptors = RandomDescriptors(50 + 13 * i, 4, 100 + i);
    images[i].keypoints.resize(images[i].descriptors.size() / 128);
  }
  std::vector<const Features*> ptrs;
  for (auto& f : images) ptrs.push_back(&f);
  const std::vector<std::pair<int, int>> pairs = {{0, 1}, {0, 2}, {1, 3}, {3, 0}, {2, 2}};
  MatcherOptions o;
  o.ratio = 1.0;
  o.mutual = true;
  std::unique_ptr<DescriptorMatcher> m;
  ASSERT_TRUE(DescriptorMatcher::Create(o, Device::kCpu, &m).ok());
  std::vector<std::vector<FeatureMatch>> all;
  size_t last_done = 0;
  ASSERT_TRUE(m->MatchPairs(ptrs, pairs, &all, [&](size_t done, size_t total) {
                  EXPECT_EQ(total, pairs.size());
                  last_done = done;
                }).ok());
  EXPECT_EQ(last_done, pairs.size());
  ASSERT_EQ(all.size(), pairs.size());
  for (size_t p = 0; p < pairs.size(); ++p) {
    EXPECT_EQ(all[p], NaiveMatch(o, images[pairs[p].first].descriptors,
                                 images[pairs[p].second].descriptors))
        << "pair " << p;
  }
  // A pair naming a missing image is an error naming the pair.
  std::vector<std::vector<FeatureMatch>> bad;
  EXPECT_EQ(m->MatchPairs(ptrs, {{0, 9}}, &bad).code(), StatusCode::kInvalidInput);
}

// Descriptors with SIFT's kind of structure, which the bounded scan needs to prune (a few
// strong principal axes): 128 + B z + noise, clamped to 0..255, for z ~ N(0, I_6) and a
// fixed 128 x 6 B. Each image takes `shared` of its rows from a common pool of latent points
// (its own noise on each: the true matches), the rest its own, and repeats a few rows
// exactly (equal distances: the tie rules).
std::vector<std::vector<uint8_t>> StructuredImages(int images, int rows, int shared, double noise, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  constexpr int kLatent = 6;
  std::vector<double> basis(128 * kLatent);
  for (double& v : basis) v = 30.0 * normal(rng);
  std::vector<std::array<double, kLatent>> pool(2 * shared);
  for (auto& z : pool)
    for (double& v : z) v = normal(rng);
  auto descriptor = [&](const std::array<double, kLatent>& z, double noise, uint8_t* out) {
    for (int k = 0; k < 128; ++k) {
      double v = 128.0 + noise * normal(rng);
      for (int l = 0; l < kLatent; ++l) v += basis[k * kLatent + l] * z[l];
      out[k] = static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
    }
  };
  std::vector<std::vector<uint8_t>> out(images, std::vector<uint8_t>(static_cast<size_t>(rows) * 128));
  for (auto& d : out) {
    std::vector<int> order(pool.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (int i = 0; i < rows; ++i) {
      std::array<double, kLatent> z;
      if (i < shared) {
        z = pool[order[i]];
      } else {
        for (double& v : z) v = normal(rng);
      }
      descriptor(z, noise, &d[static_cast<size_t>(i) * 128]);
    }
    for (int i = 0; i < 20; ++i)  // exact repeats of earlier rows
      std::copy_n(&d[static_cast<size_t>(i) * 128], 128, &d[static_cast<size_t>(rows - 1 - i) * 128]);
  }
  return out;
}

// MatchPairs over many pairs takes the bounded scan (projected distances as lower bounds,
// exact distances only where a bound allows a nearest two): the same matches as Match,
// pair by pair, from a fraction of the exact distances. ctest also runs the whole suite
// with TIEPOINT_MATCHER_BOUND=always (the bounded scan for every pair, Match too: random
// and tied descriptors included) and, as the scalar variant, without it.
void CheckBoundedScanOnStructuredImages(double noise) {
  const auto sets = StructuredImages(6, 1200, 700, noise, 11);
  std::vector<Features> images(sets.size());
  std::vector<const Features*> ptrs;
  for (size_t i = 0; i < sets.size(); ++i) {
    images[i].descriptors = sets[i];
    images[i].keypoints.resize(sets[i].size() / 128);
    ptrs.push_back(&images[i]);
  }
  std::vector<std::pair<int, int>> pairs;
  for (int i = 0; i < 6; ++i)
    for (int j = i + 1; j < 6; ++j) pairs.emplace_back(i, j);
  MatcherOptions o;  // ratio 0.8, as reconstruct
  std::unique_ptr<DescriptorMatcher> m;
  ASSERT_TRUE(DescriptorMatcher::Create(o, Device::kCpu, &m).ok());
  std::vector<std::vector<FeatureMatch>> all;
  ASSERT_TRUE(m->MatchPairs(ptrs, pairs, &all).ok());
  const MatcherSummary summary = m->summary();
  EXPECT_EQ(summary.descriptor_pairs, 15.0 * 1200 * 1200);
  // The bounded scan runs with the AVX2 scan (not where AVX-512 VNNI is faster), or always.
  const char* bound = std::getenv("TIEPOINT_MATCHER_BOUND");
  const char* scan = std::getenv("TIEPOINT_MATCHER_SCAN");
  const bool always = bound && std::string(bound) == "always";
  const bool vnni = __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
                    !(scan && std::string(scan) == "avx2");
  const bool plain = (bound && std::string(bound) == "off") || (scan && std::string(scan) == "scalar") ||
                     !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || (vnni && !always);
  if (plain) {
    EXPECT_EQ(summary.exact_distances, summary.descriptor_pairs);
  } else {
    EXPECT_LT(summary.exact_distances, 0.25 * summary.descriptor_pairs);
  }
  size_t total = 0;
  for (size_t p = 0; p < pairs.size(); ++p) {
    std::vector<FeatureMatch> one;
    ASSERT_TRUE(m->Match(images[pairs[p].first], images[pairs[p].second], &one).ok());
    EXPECT_EQ(all[p], one) << "pair " << p;
    total += one.size();
  }
  EXPECT_GT(total, 15u * 300);  // the shared rows match
}

// Noise 4: bounds well below the distances. Noise 0: the descriptors' differences lie in
// the axes' span but for rounding, so bounds come within ~1% of the distances, the
// tightest case for the scan's threshold. (A threshold 0.8x too tight fails the first.)
TEST(Matcher, BoundedScanGivesThePlainScansMatches) {
  for (const double noise : {4.0, 0.0}) {
    SCOPED_TRACE(noise);
    CheckBoundedScanOnStructuredImages(noise);
  }
}

}  // namespace
}  // namespace tiepoint
