// Test-only: the matcher's definition (features/matcher.h) as a literal double loop, and
// seeded random descriptors. Independent of features/matcher.cc: distances as
// sum (a - b)^2, every row and column scanned in full. Also MatchOn, which runs the
// matcher under test on one device.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "features/matcher.h"

namespace tiepoint::testing {

// The matches of DescriptorMatcher on `device` (the test fails, and the result is empty,
// when the matcher cannot be made or fails).
inline std::vector<FeatureMatch> MatchOn(Device device, const MatcherOptions& options,
                                         const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  std::unique_ptr<DescriptorMatcher> matcher;
  const Status created = DescriptorMatcher::Create(options, device, &matcher);
  EXPECT_TRUE(created.ok()) << created.ToString();
  std::vector<FeatureMatch> matches;
  if (!created.ok()) return matches;
  const Status s = matcher->Match(a.data(), a.size() / 128, b.data(), b.size() / 128, &matches);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return matches;
}

// n descriptors of 128 bytes with values uniform in 0..levels-1 (levels <= 256).
inline std::vector<uint8_t> RandomDescriptors(int n, int levels, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(0, levels - 1);
  std::vector<uint8_t> d(static_cast<size_t>(n) * 128);
  for (uint8_t& v : d) v = static_cast<uint8_t>(u(rng));
  return d;
}

inline std::vector<FeatureMatch> NaiveMatch(const MatcherOptions& o, const std::vector<uint8_t>& a,
                                            const std::vector<uint8_t>& b) {
  const size_t n1 = a.size() / 128, n2 = b.size() / 128;
  std::vector<FeatureMatch> out;
  if (n1 == 0 || n2 == 0) return out;
  auto dist = [&](size_t i, size_t j) {
    uint64_t s = 0;
    for (int k = 0; k < 128; ++k) {
      const int64_t x = static_cast<int64_t>(a[i * 128 + k]) - b[j * 128 + k];
      s += static_cast<uint64_t>(x * x);
    }
    return s;
  };
  std::vector<size_t> col_best(n2, 0);
  for (size_t j = 0; j < n2; ++j) {
    uint64_t best = std::numeric_limits<uint64_t>::max();
    for (size_t i = 0; i < n1; ++i) {
      const uint64_t d = dist(i, j);
      if (d < best) {
        best = d;
        col_best[j] = i;
      }
    }
  }
  for (size_t i = 0; i < n1; ++i) {
    size_t bj = 0;
    uint64_t best = std::numeric_limits<uint64_t>::max();
    for (size_t j = 0; j < n2; ++j) {
      const uint64_t d = dist(i, j);
      if (d < best) {
        best = d;
        bj = j;
      }
    }
    bool has_second = false;
    uint64_t second = std::numeric_limits<uint64_t>::max();
    for (size_t j = 0; j < n2; ++j) {
      if (j == bj) continue;
      has_second = true;
      second = std::min(second, dist(i, j));
    }
    if (has_second && !(static_cast<double>(best) <
                        o.ratio * o.ratio * static_cast<double>(second))) {
      continue;
    }
    if (o.max_distance >= 0 &&
        !(static_cast<double>(best) <= o.max_distance * o.max_distance)) {
      continue;
    }
    if (o.mutual && col_best[bj] != i) continue;
    out.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(bj),
                   static_cast<uint32_t>(best)});
  }
  return out;
}

}  // namespace tiepoint::testing
