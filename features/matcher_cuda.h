// Descriptor matching on an NVIDIA GPU: the definition of features/matcher.h, with matches
// IDENTICAL to the CPU reference's (distances are exact integers and every tie is broken
// by the lowest index, as there; tests/features/matcher_cuda_test.cc).
//
// Kernels (features/matcher_cuda.cu), per pair (A: n1 rows, B: n2 columns):
//  - squared norms |a|^2, |b|^2 once per uploaded descriptor set (int32);
//  - the tile kernel: a block owns 64 rows of A and walks a range of B in tiles of 128
//    columns. A's 64 x 128 bytes stay in shared memory (tensor-core fragments are read with
//    ldmatrix at every k-step, which keeps the kernel at <= 170 registers: 3 blocks, 12
//    warps per SM on an H100); B's tiles are staged in shared memory by cp.async, double-buffered, in a
//    XOR-swizzled layout (16-byte chunk c of row r at chunk c ^ (r & 7), so the ldmatrix
//    reads of 8 rows hit 8 different bank groups). The dot products a.b come from
//    mma.sync.m16n8k32 with u8 operands and s32 accumulators (exact). Four warps each
//    compute 32 x 64 products per tile; no distance ever reaches global memory:
//      row keys   (|b|^2 - 2 a.b) * 256 + column-in-tile   -> per-thread min and second
//                 min (one min, one max per product); |a|^2 is added back per tile, and
//                 the tile's winner folds into a running (best, index, second) per row
//                 held in registers across all tiles;
//      column keys (|a|^2 - 2 a.b) * 256 + row-in-block    -> per-thread min, then warp
//                 shuffles and shared memory over the block's 64 rows, then one 64-bit
//                 atomicMin per column and tile on (distance << 32 | row) in global memory
//                 (only with the mutual check).
//    d <= 128 x 255^2 < 2^23, so d * 256 + 255 fits a signed 32-bit key exactly; ties in
//    distance fall to the lower index through the low bits. At the end the block merges
//    its threads' rows (shuffles, shared memory) and writes one (best, index, second) per
//    row and column range;
//  - a final kernel per row merges the column ranges, applies the ratio and distance tests
//    (features/matcher_inl.h, the CPU's code) and the mutual check, and writes the match
//    index or -1; the host compacts.
// Column ranges: the columns are split over cuda_column_splits ranges (automatic: the
// smallest count whose blocks fill >= 90% of the resident-block slots over whole waves; 3
// for 16,384 rows on an H100), so small n1 and odd sizes still fill the GPU.
//
// Memory: descriptors are padded with zero rows to a multiple of 128 on the device. Per
// stream: 12 bytes per row and split, 8 per column, 8 per row of results.
// MatchPairs uploads every image's descriptors once (128 bytes per keypoint) and keeps
// cuda_streams pairs in flight, each on its own stream with pinned result buffers.
//
// Errors: kUnavailable when the build has no CUDA or no GPU is usable (the message names
// --device cpu); kOutOfMemory naming the bytes when the descriptors do not fit.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "features/matcher.h"
#include "io/base/status.h"

namespace tiepoint {

// Creates the CUDA matcher (options already checked by DescriptorMatcher::Create).
Status CreateCudaMatcher(const MatcherOptions& options,
                         std::unique_ptr<DescriptorMatcher>* matcher);

// kInvalidInput when n1 or n2 exceeds kMaxMatcherDescriptors (shared by the backends).
Status CheckMatcherSizes(uint64_t n1, uint64_t n2);

// For bench/: uploads a and b once, runs `warmup` untimed matches, then `repeats` timed
// ones; (*device_ms)[r] is repeat r's time between CUDA events around the kernels (norms
// excluded: computed once per upload, as in MatchPairs) and (*with_copy_ms)[r] the same
// plus the copy of the per-row results to the host. *matches gets the last run's matches.
Status CudaMatchTiming(const MatcherOptions& options, const uint8_t* a, uint64_t n1,
                       const uint8_t* b, uint64_t n2, int warmup, int repeats,
                       std::vector<double>* device_ms, std::vector<double>* with_copy_ms,
                       std::vector<FeatureMatch>* matches);

}  // namespace tiepoint
