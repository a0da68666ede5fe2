// ParallelCopy (the GPU uploads' host copies into pinned staging buffers): memcpy's bytes
// for every size and thread count, wherever the slices are cut, source and destination
// at any alignment, nothing written past the end.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "io/base/parallel_copy.h"

namespace tiepoint {
namespace {

TEST(ParallelCopy, SameBytesAsMemcpyForEverySizeAndThreadCount) {
  std::mt19937 rng(5);
  std::vector<unsigned char> src((size_t{5} << 20) + 64);
  for (unsigned char& b : src) b = static_cast<unsigned char>(rng());
  const size_t sizes[] = {0, 1, 63, (size_t{1} << 20) - 1, (size_t{1} << 20), (size_t{1} << 20) + 13,
                          (size_t{5} << 20) + 7};
  for (size_t bytes : sizes) {
    for (int threads : {0, 1, 3, 16}) {
      for (size_t src_off : {0, 3}) {
        std::vector<unsigned char> dst(bytes + 64 + 5, 0xA5);
        const size_t dst_off = 5;  // unaligned destination
        ParallelCopy(dst.data() + dst_off, src.data() + src_off, bytes, threads);
        bool same = true;
        for (size_t k = 0; k < bytes && same; ++k) same = dst[dst_off + k] == src[src_off + k];
        EXPECT_TRUE(same) << bytes << " bytes, " << threads << " threads, source offset " << src_off;
        for (size_t k = 0; k < dst_off; ++k) EXPECT_EQ(dst[k], 0xA5);
        for (size_t k = dst_off + bytes; k < dst.size(); ++k) {
          ASSERT_EQ(dst[k], 0xA5) << "written past the end: " << bytes << " bytes, " << threads << " threads";
        }
      }
    }
  }
}

}  // namespace
}  // namespace tiepoint
