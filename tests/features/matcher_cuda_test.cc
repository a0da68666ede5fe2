// The CUDA matcher against the CPU reference (features/matcher_cuda.h): IDENTICAL matches
// (indices and distances) on random descriptors of sizes that are and are not multiples
// of the kernel's tiles, on {0, 1} descriptors (ties everywhere), on extreme values, with
// every column split, through MatchPairs, and on real SIFT descriptors of the Oxford boat
// images. Skips when no GPU is usable (CI has none).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "features/matcher.h"
#include "features/matcher_cuda.h"
#include "features/sift.h"
#include "io/image.h"
#include "tests/common/gpu.h"
#include "tests/common/shared_data.h"
#include "tests/features/matcher_reference.h"

namespace tiepoint {
namespace {

using testing::MatchOn;
using testing::RandomDescriptors;

void ExpectSame(const std::vector<FeatureMatch>& cuda, const std::vector<FeatureMatch>& cpu) {
  ASSERT_EQ(cuda.size(), cpu.size());
  size_t differ = 0;
  for (size_t k = 0; k < cuda.size(); ++k) {
    if (!(cuda[k] == cpu[k])) {
      if (differ++ < 5) {
        ADD_FAILURE() << "match " << k << ": cuda (" << cuda[k].index1 << ", " << cuda[k].index2
                      << ", " << cuda[k].distance_sq << ") cpu (" << cpu[k].index1 << ", "
                      << cpu[k].index2 << ", " << cpu[k].distance_sq << ")";
      }
    }
  }
  EXPECT_EQ(differ, 0u);
}

struct Case {
  int n1, n2, levels;
  double ratio;
  bool mutual;
  double max_distance;
  int splits;
};

class CudaVsCpu : public ::testing::TestWithParam<Case> {};

TEST_P(CudaVsCpu, IdenticalMatches) {
  TIEPOINT_REQUIRE_GPU();
  const Case c = GetParam();
  for (uint32_t seed = 1; seed <= 2; ++seed) {
    const auto a = RandomDescriptors(c.n1, c.levels, 1000 * seed + c.n1);
    const auto b = RandomDescriptors(c.n2, c.levels, 1000 * seed + c.n2 + 7);
    MatcherOptions o;
    o.ratio = c.ratio;
    o.mutual = c.mutual;
    o.max_distance = c.max_distance;
    o.cuda_column_splits = c.splits;
    const auto cpu = MatchOn(Device::kCpu, o, a, b);
    const auto cuda = MatchOn(Device::kCuda, o, a, b);
    ExpectSame(cuda, cpu);
    if (c.ratio >= 0.99) EXPECT_GT(cpu.size(), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CudaVsCpu,
    ::testing::Values(
        Case{64, 128, 256, 1.0, true, -1, 0}, Case{1000, 777, 256, 1.0, true, -1, 0},
        Case{1000, 777, 256, 0.97, false, -1, 0}, Case{777, 1000, 256, 1.0, true, 1800, 3},
        Case{17, 3000, 256, 1.0, true, -1, 0}, Case{3000, 17, 256, 1.0, true, -1, 0},
        Case{1, 1, 256, 0.8, true, -1, 0}, Case{5, 1, 256, 1.0, true, -1, 0},
        Case{1, 300, 256, 1.0, true, -1, 0}, Case{500, 700, 2, 1.0, true, -1, 0},
        Case{700, 500, 2, 1.0, false, -1, 2}, Case{640, 640, 3, 0.95, true, 9.0, 5},
        Case{2048, 2048, 256, 1.0, true, -1, 1}, Case{2048, 2048, 256, 1.0, true, -1, 16},
        Case{4100, 3900, 256, 0.99, true, -1, 0}));

TEST(CudaMatcher, ExtremeValues) {
  TIEPOINT_REQUIRE_GPU();
  // Descriptors of only 0 and 255: distances up to 128 x 255^2, the keys' largest range.
  auto a = RandomDescriptors(300, 2, 5), b = RandomDescriptors(400, 2, 6);
  for (auto& v : a) v *= 255;
  for (auto& v : b) v *= 255;
  a.insert(a.end(), 128, 255);
  b.insert(b.end(), 128, 0);
  MatcherOptions o;
  o.ratio = 1.0;
  o.mutual = true;
  ExpectSame(MatchOn(Device::kCuda, o, a, b), MatchOn(Device::kCpu, o, a, b));
  o.mutual = false;
  ExpectSame(MatchOn(Device::kCuda, o, a, b), MatchOn(Device::kCpu, o, a, b));
}

TEST(CudaMatcher, SameResultEveryRun) {
  TIEPOINT_REQUIRE_GPU();
  const auto a = RandomDescriptors(3000, 2, 21), b = RandomDescriptors(2500, 2, 22);
  MatcherOptions o;
  o.ratio = 1.0;
  o.mutual = true;
  const auto first = MatchOn(Device::kCuda, o, a, b);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(MatchOn(Device::kCuda, o, a, b), first);
}

TEST(CudaMatcher, MatchPairsEqualsCpu) {
  TIEPOINT_REQUIRE_GPU();
  std::vector<Features> images(6);
  for (int i = 0; i < 6; ++i) {
    images[i].descriptors = RandomDescriptors(i == 4 ? 0 : 300 + 211 * i, 256, 300 + i);
    images[i].keypoints.resize(images[i].descriptors.size() / 128);
  }
  std::vector<const Features*> ptrs;
  for (auto& f : images) ptrs.push_back(&f);
  std::vector<std::pair<int, int>> pairs;
  for (int i = 0; i < 6; ++i)
    for (int j = i + 1; j < 6; ++j) pairs.emplace_back(i, j);
  MatcherOptions o;
  o.ratio = 0.95;
  o.mutual = true;
  o.cuda_streams = 3;
  std::unique_ptr<DescriptorMatcher> cpu, cuda;
  ASSERT_TRUE(DescriptorMatcher::Create(o, Device::kCpu, &cpu).ok());
  ASSERT_TRUE(DescriptorMatcher::Create(o, Device::kCuda, &cuda).ok());
  std::vector<std::vector<FeatureMatch>> want, got;
  ASSERT_TRUE(cpu->MatchPairs(ptrs, pairs, &want).ok());
  size_t calls = 0;
  ASSERT_TRUE(cuda->MatchPairs(ptrs, pairs, &got, [&](size_t, size_t) { ++calls; }).ok());
  EXPECT_EQ(calls, pairs.size());
  ASSERT_EQ(got.size(), want.size());
  for (size_t p = 0; p < pairs.size(); ++p) EXPECT_EQ(got[p], want[p]) << "pair " << p;
}

TEST(CudaMatcher, RealSiftDescriptors) {
  TIEPOINT_REQUIRE_GPU();
  TIEPOINT_REQUIRE_SHARED(img1, "features/oxford_boat/img1.pgm");
  TIEPOINT_REQUIRE_SHARED(img2, "features/oxford_boat/img2.pgm");
  GrayImage i1, i2;
  ASSERT_TRUE(ReadImageGray(img1, &i1).ok());
  ASSERT_TRUE(ReadImageGray(img2, &i2).ok());
  std::unique_ptr<FeatureExtractor> sift;
  ASSERT_TRUE(FeatureExtractor::Create(SiftOptions(), Device::kCpu, &sift).ok());
  Features f1, f2;
  ASSERT_TRUE(sift->Extract(i1, &f1).ok());
  ASSERT_TRUE(sift->Extract(i2, &f2).ok());
  ASSERT_GT(f1.size(), 1000u);
  for (bool mutual : {false, true}) {
    for (double ratio : {0.8, 1.0}) {
      MatcherOptions o;
      o.ratio = ratio;
      o.mutual = mutual;
      const auto cpu = MatchOn(Device::kCpu, o, f1.descriptors, f2.descriptors);
      const auto cuda = MatchOn(Device::kCuda, o, f1.descriptors, f2.descriptors);
      EXPECT_GT(cpu.size(), 100u);
      ExpectSame(cuda, cpu);
    }
  }
}

TEST(CudaMatcher, TimingHookAgreesWithMatch) {
  TIEPOINT_REQUIRE_GPU();
  const auto a = RandomDescriptors(1500, 256, 41), b = RandomDescriptors(1300, 256, 42);
  MatcherOptions o;
  o.ratio = 0.99;
  o.mutual = true;
  std::vector<double> kernels, with_copy;
  std::vector<FeatureMatch> matches;
  const Status s = CudaMatchTiming(o, a.data(), 1500, b.data(), 1300, 1, 3, &kernels,
                                   &with_copy, &matches);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(kernels.size(), 3u);
  EXPECT_EQ(matches, MatchOn(Device::kCpu, o, a, b));
}

}  // namespace
}  // namespace tiepoint
