// CUDA descriptor matcher (design in matcher_cuda.h).
#include "features/matcher_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "features/matcher_inl.h"
#include "io/base/cuda_buffer.h"
#include "io/base/cuda_check.h"
#include "io/base/timer.h"

namespace tiepoint {
namespace {

using matcher_internal::kNoSecond;
using matcher_internal::PassesRatioAndDistance;

constexpr int kDim = 128;          // bytes per descriptor
constexpr int kBlockRows = 64;     // rows of A per block
constexpr int kTileCols = 128;     // columns of B per shared-memory tile
constexpr int kThreads = 128;      // 4 warps: 2 (rows) x 2 (columns), 32 x 64 each
constexpr int kPadRows = 128;      // device descriptor sets are padded to this multiple
constexpr int kKeyInvalid = INT_MAX;

// ---- Buffers (io/base/cuda_buffer.h) whose allocation failures name the matcher -----
Status MatcherAllocation(Status s) {
  if (s.ok()) return s;
  return Status(s.code(), "CUDA matcher: " + s.message() +
                              (s.code() == StatusCode::kOutOfMemory ? "; use --device cpu" : ""));
}

template <typename T>
class DeviceArray : public DeviceBuffer<T> {
 public:
  Status Reserve(size_t n, const char* what) { return MatcherAllocation(DeviceBuffer<T>::Reserve(n, what)); }
};

template <typename T>
class PinnedArray : public PinnedBuffer<T> {
 public:
  Status Reserve(size_t n) { return MatcherAllocation(PinnedBuffer<T>::Reserve(n, "match results")); }
};

// Per row and column range: nearest distance, its column, second-nearest distance.
struct RowPartial {
  uint32_t best;
  uint32_t index;
  uint32_t second;
};

// ---- PTX wrappers --------------------------------------------------------------------
__device__ __forceinline__ uint32_t SmemAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void CpAsync16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void CpAsyncWaitAll() { asm volatile("cp.async.wait_group 0;\n" ::); }

__device__ __forceinline__ void LdMatrixX4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                           uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

// D = A B + D for a 16 x 32 (row-major) u8 A and a 32 x 8 (column-major) u8 B, s32 sums.
__device__ __forceinline__ void MmaU8(int (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                      uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Byte offset of 16-byte chunk `chunk` (0..7) of descriptor row `row` in a swizzled tile.
__device__ __forceinline__ uint32_t Swizzle(int row, int chunk) {
  return static_cast<uint32_t>(row * kDim + ((chunk ^ (row & 7)) << 4));
}

// Lexicographic (distance, index) merge of two (best, index, second) triples.
__device__ __forceinline__ void MergeRow(uint32_t& best, uint32_t& index, uint32_t& second,
                                         uint32_t ob, uint32_t oi, uint32_t os) {
  if (ob < best || (ob == best && oi < index)) {
    second = min(os, best);
    best = ob;
    index = oi;
  } else {
    second = min(second, ob);
  }
}

// ---- Kernels -------------------------------------------------------------------------
__global__ void NormsKernel(const uint8_t* __restrict__ d, int n, int* __restrict__ norms) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const uint4* v = reinterpret_cast<const uint4*>(d + static_cast<size_t>(i) * kDim);
  int s = 0;
#pragma unroll
  for (int q = 0; q < kDim / 16; ++q) {
    const uint4 w = v[q];
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t x = words[k];
      s = static_cast<int>(__dp4a(x, x, static_cast<uint32_t>(s)));
    }
  }
  norms[i] = s;
}

// A: n1 rows (padded to kPadRows, zeros), B: n2 rows (padded likewise). Grid: x = row
// blocks, y = column ranges of `tiles_per_split` tiles. partial[y * n1 + i] gets row i's
// (best, index, second) over that range; col_best[j] gets atomicMin'd packed
// (distance << 32 | row) with kMutual.
// 3 blocks per SM: measured on the H100 (16,384^2, mutual) 0.244 ms against 0.303 ms with 2
// (A fragments held in registers); forcing 4 (128 registers, 80 bytes of spills) gave 0.244.
template <bool kMutual>
__global__ void __launch_bounds__(kThreads, 3)
    MatchTileKernel(const uint8_t* __restrict__ a, const int* __restrict__ norm_a, int n1,
                    const uint8_t* __restrict__ b, const int* __restrict__ norm_b, int n2,
                    int num_tiles, int tiles_per_split, RowPartial* __restrict__ partial,
                    unsigned long long* __restrict__ col_best) {
  __shared__ __align__(128) uint8_t s_a[kBlockRows * kDim];
  __shared__ __align__(128) uint8_t s_b[2][kTileCols * kDim];
  __shared__ int s_col[2][kTileCols];
  __shared__ RowPartial s_row[2][kBlockRows];

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int wm = warp & 1;   // rows wm*32 .. +31
  const int wn = warp >> 1;  // columns wn*64 .. +63 of a tile
  const int g = lane >> 2;   // mma group
  const int t4 = lane & 3;   // thread in group
  const int row_base = blockIdx.x * kBlockRows;
  const int tile_begin = blockIdx.y * tiles_per_split;
  const int tile_end = min(num_tiles, tile_begin + tiles_per_split);
  if (tile_begin >= tile_end) return;

  auto load_b = [&](int tile, int buf) {
    const uint8_t* src = b + static_cast<size_t>(tile) * kTileCols * kDim;
    const uint32_t base = SmemAddress(s_b[buf]);
#pragma unroll
    for (int k = 0; k < kTileCols * kDim / 16 / kThreads; ++k) {
      const int c = tid + k * kThreads;
      const int row = c >> 3, chunk = c & 7;
      CpAsync16(base + Swizzle(row, chunk), src + row * kDim + chunk * 16);
    }
  };
  {
    const uint8_t* src = a + static_cast<size_t>(row_base) * kDim;
    const uint32_t base = SmemAddress(s_a);
#pragma unroll
    for (int k = 0; k < kBlockRows * kDim / 16 / kThreads; ++k) {
      const int c = tid + k * kThreads;
      const int row = c >> 3, chunk = c & 7;
      CpAsync16(base + Swizzle(row, chunk), src + row * kDim + chunk * 16);
    }
  }
  load_b(tile_begin, 0);
  CpAsyncCommit();
  CpAsyncWaitAll();
  __syncthreads();

  // The thread's 4 rows: r = mt * 2 + h is row wm*32 + mt*16 + h*8 + g of the block.
  int na256[4];      // |a|^2 * 256
  int row_key0[4];   // |a|^2 * 256 + row in block (column keys), or invalid
  uint32_t best[4], best_index[4], second[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int in_block = wm * 32 + (r >> 1) * 16 + (r & 1) * 8 + g;
    const int row = row_base + in_block;
    const int n = row < n1 ? norm_a[row] : 0;
    na256[r] = n * 256;
    row_key0[r] = row < n1 ? n * 256 + in_block : kKeyInvalid;
    best[r] = kNoSecond;
    best_index[r] = 0;
    second[r] = kNoSecond;
  }

  for (int tile = tile_begin; tile < tile_end; ++tile) {
    const int buf = (tile - tile_begin) & 1;
    if (tile > tile_begin) {
      CpAsyncWaitAll();
      __syncthreads();  // tile's data visible; every thread is done with the other buffer
    }
    if (tile + 1 < tile_end) {
      load_b(tile + 1, buf ^ 1);
      CpAsyncCommit();
    }
    const int col_base = tile * kTileCols;
    // Column keys |b|^2 * 256 + column in tile; invalid for padding columns (their
    // descriptors are zero, so the product is 0 and the key stays invalid).
    int col_key0[16];
#pragma unroll
    for (int c = 0; c < 16; ++c) {
      const int in_tile = wn * 64 + (c >> 1) * 8 + 2 * t4 + (c & 1);
      const int col = col_base + in_tile;
      col_key0[c] = col < n2 ? __ldg(norm_b + col) * 256 + in_tile : kKeyInvalid;
    }
    int acc[2][8][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[mt][nt][q] = 0;
    {
      const uint32_t base = SmemAddress(s_b[buf]);
      const uint32_t base_a = SmemAddress(s_a);
      const int m = lane >> 3;
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        // A fragments (the warp's 32 rows, this k-step) from shared memory: reloaded per
        // tile rather than held in 32 registers for the whole kernel, so that 3 blocks fit
        // on an SM (ncu on the H100: with 180 registers, 2 blocks, 8 warps per SM, the
        // kernel was latency-bound at 37% issue-slot use).
        uint32_t frag_a[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          const int row = wm * 32 + mt * 16 + (lane & 7) + ((m & 1) << 3);
          LdMatrixX4(base_a + Swizzle(row, ks * 2 + (m >> 1)), frag_a[mt][0], frag_a[mt][1],
                     frag_a[mt][2], frag_a[mt][3]);
        }
        uint32_t frag_b[8][2];
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          const int row = wn * 64 + (2 * np + (m >> 1)) * 8 + (lane & 7);
          const int chunk = ks * 2 + (m & 1);
          LdMatrixX4(base + Swizzle(row, chunk), frag_b[2 * np][0], frag_b[2 * np][1],
                     frag_b[2 * np + 1][0], frag_b[2 * np + 1][1]);
        }
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
          for (int nt = 0; nt < 8; ++nt) MmaU8(acc[mt][nt], frag_a[mt], frag_b[nt][0], frag_b[nt][1]);
      }
    }
    // Epilogue: keys, then per-thread reductions.
    int tile_best[4], tile_second[4];
    int col_min[16];
#pragma unroll
    for (int r = 0; r < 4; ++r) tile_best[r] = tile_second[r] = kKeyInvalid;
#pragma unroll
    for (int c = 0; c < 16; ++c) col_min[c] = kKeyInvalid;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int r = mt * 2 + (q >> 1);
          const int c = nt * 2 + (q & 1);
          const uint32_t dot512 = static_cast<uint32_t>(acc[mt][nt][q]) << 9;
          // (|b|^2 - 2 a.b) * 256 + column: equals (d - |a|^2) * 256 + column, in
          // [-2^31, 2^31) for any uint8 descriptors; unsigned arithmetic wraps exactly.
          const int kr = static_cast<int>(static_cast<uint32_t>(col_key0[c]) - dot512);
          tile_second[r] = min(tile_second[r], max(tile_best[r], kr));
          tile_best[r] = min(tile_best[r], kr);
          if (kMutual) {
            const int kc = static_cast<int>(static_cast<uint32_t>(row_key0[r]) - dot512);
            col_min[c] = min(col_min[c], kc);
          }
        }
      }
    }
    // Fold the tile's nearest two into the running (best, index, second) of each row.
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      if (tile_best[r] == kKeyInvalid) continue;  // only padding columns
      const uint32_t key = static_cast<uint32_t>(tile_best[r] + na256[r]);
      const uint32_t d = key >> 8;
      const uint32_t col = static_cast<uint32_t>(col_base) + (key & 255u);
      const uint32_t d2 = tile_second[r] == kKeyInvalid
                              ? kNoSecond
                              : static_cast<uint32_t>(tile_second[r] + na256[r]) >> 8;
      if (d < best[r]) {  // tiles come in increasing column order: '<' keeps the lowest
        second[r] = min(best[r], d2);
        best[r] = d;
        best_index[r] = col;
      } else {
        second[r] = min(second[r], d);
      }
    }
    if (kMutual) {
      // Over the warp's 32 rows (lanes with the same t4 hold the same columns)...
#pragma unroll
      for (int c = 0; c < 16; ++c) {
        int v = col_min[c];
        v = min(v, __shfl_xor_sync(0xffffffffu, v, 4));
        v = min(v, __shfl_xor_sync(0xffffffffu, v, 8));
        v = min(v, __shfl_xor_sync(0xffffffffu, v, 16));
        if (g == 0) s_col[wm][wn * 64 + (c >> 1) * 8 + 2 * t4 + (c & 1)] = v;
      }
      __syncthreads();
      // ... then over the block's two row warps, one atomic per column.
      {
        const int in_tile = tid;  // kThreads == kTileCols
        const int col = col_base + in_tile;
        const int v = min(s_col[0][in_tile], s_col[1][in_tile]);
        if (col < n2 && v != kKeyInvalid) {
          const uint32_t key = static_cast<uint32_t>(v + __ldg(norm_b + col) * 256);
          const unsigned long long packed =
              (static_cast<unsigned long long>(key >> 8) << 32) |
              static_cast<unsigned long long>(row_base + static_cast<int>(key & 255u));
          atomicMin(col_best + col, packed);
        }
      }
    }
  }

  // Merge the four threads of a group (same rows, different columns)...
#pragma unroll
  for (int r = 0; r < 4; ++r) {
#pragma unroll
    for (int x = 1; x <= 2; x <<= 1) {
      const uint32_t ob = __shfl_xor_sync(0xffffffffu, best[r], x);
      const uint32_t oi = __shfl_xor_sync(0xffffffffu, best_index[r], x);
      const uint32_t os = __shfl_xor_sync(0xffffffffu, second[r], x);
      MergeRow(best[r], best_index[r], second[r], ob, oi, os);
    }
    if (t4 == 0) {
      const int in_block = wm * 32 + (r >> 1) * 16 + (r & 1) * 8 + g;
      s_row[wn][in_block] = {best[r], best_index[r], second[r]};
    }
  }
  __syncthreads();
  // ... and the two column warps.
  if (tid < kBlockRows && row_base + tid < n1) {
    RowPartial p = s_row[0][tid];
    const RowPartial o = s_row[1][tid];
    MergeRow(p.best, p.index, p.second, o.best, o.index, o.second);
    partial[static_cast<size_t>(blockIdx.y) * n1 + row_base + tid] = p;
  }
}

// One thread per row: merge the column ranges, apply the tests, write the match.
__global__ void FinalKernel(const RowPartial* __restrict__ partial, int n1, int splits,
                            const unsigned long long* __restrict__ col_best, bool mutual,
                            double ratio_sq, double max_distance_sq, int2* __restrict__ out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n1) return;
  RowPartial p = partial[i];
  for (int s = 1; s < splits; ++s) {
    const RowPartial o = partial[static_cast<size_t>(s) * n1 + i];
    MergeRow(p.best, p.index, p.second, o.best, o.index, o.second);
  }
  bool ok = p.best != kNoSecond && PassesRatioAndDistance(ratio_sq, max_distance_sq, p.best, p.second);
  if (ok && mutual) ok = static_cast<uint32_t>(col_best[p.index] & 0xffffffffull) == static_cast<uint32_t>(i);
  out[i] = make_int2(ok ? static_cast<int>(p.index) : -1, static_cast<int>(p.best));
}

// ---- Host side -----------------------------------------------------------------------
size_t Padded(uint64_t n) { return (n + kPadRows - 1) / kPadRows * kPadRows; }

// One uploaded descriptor set with its norms.
struct DeviceSet {
  DeviceArray<uint8_t> descriptors;
  DeviceArray<int> norms;
  uint64_t n = 0;
};

Status Upload(const uint8_t* d, uint64_t n, cudaStream_t stream, DeviceSet* set) {
  const size_t padded = Padded(n);
  TIEPOINT_RETURN_IF_ERROR(set->descriptors.Reserve(padded * kDim, "descriptors"));
  TIEPOINT_RETURN_IF_ERROR(set->norms.Reserve(padded, "descriptor norms"));
  set->n = n;
  if (n > 0) {
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(set->descriptors.get(), d, n * kDim,
                                                  cudaMemcpyHostToDevice, stream));
  }
  if (padded > n) {
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(set->descriptors.get() + n * kDim, 0,
                                                  (padded - n) * kDim, stream));
  }
  if (n > 0) {
    NormsKernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(
        set->descriptors.get(), static_cast<int>(n), set->norms.get());
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  return Status::Ok();
}

// Per-stream workspace for one pair in flight.
struct Workspace {
  cudaStream_t stream = nullptr;
  DeviceArray<RowPartial> partial;
  DeviceArray<unsigned long long> col_best;
  DeviceArray<int2> out;
  PinnedArray<int2> host_out;
  uint64_t n1 = 0;  // rows of the pair in flight (0: none)
  ~Workspace() {
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
  }
};

class CudaMatcher : public DescriptorMatcher {
 public:
  explicit CudaMatcher(const MatcherOptions& options) : options_(options) {}

  Status Init() {
    int device = 0;
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
    TIEPOINT_CUDA_RETURN_IF_ERROR(
        cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount, device));
    int per_sm_plain = 0, per_sm_mutual = 0;
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm_plain, MatchTileKernel<false>, kThreads, 0));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm_mutual, MatchTileKernel<true>, kThreads, 0));
    resident_blocks_ = multiprocessors_ * std::max(1, std::min(per_sm_plain, per_sm_mutual));
    workspaces_.resize(options_.cuda_streams);
    for (auto& w : workspaces_) {
      w = std::make_unique<Workspace>();
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking));
    }
    return Status::Ok();
  }

  Status Match(const uint8_t* a, uint64_t n1, const uint8_t* b, uint64_t n2,
               std::vector<FeatureMatch>* matches) override {
    const Timer timer;
    TIEPOINT_RETURN_IF_ERROR(BeginMatch(n1, n2, matches));
    if (n1 == 0 || n2 == 0) return Status::Ok();
    Workspace& w = *workspaces_[0];
    TIEPOINT_RETURN_IF_ERROR(Upload(a, n1, w.stream, &set_a_));
    TIEPOINT_RETURN_IF_ERROR(Upload(b, n2, w.stream, &set_b_));
    TIEPOINT_RETURN_IF_ERROR(Enqueue(set_a_, set_b_, &w));
    TIEPOINT_RETURN_IF_ERROR(Collect(&w, matches));
    summary_.seconds = timer.Seconds();
    return Status::Ok();
  }

  Status MatchPairs(const std::vector<const Features*>& images,
                    const std::vector<std::pair<int, int>>& pairs,
                    std::vector<std::vector<FeatureMatch>>* matches,
                    const std::function<void(size_t, size_t)>& progress) override {
    const Timer timer;
    matches->assign(pairs.size(), {});
    summary_ = {};
    std::vector<bool> used(images.size(), false);
    for (size_t p = 0; p < pairs.size(); ++p) {
      const auto [i, j] = pairs[p];
      if (i < 0 || j < 0 || i >= static_cast<int>(images.size()) ||
          j >= static_cast<int>(images.size())) {
        return Status::InvalidInput("pair " + std::to_string(p) + " names an image outside 0.." +
                                    std::to_string(images.size()) + "-1");
      }
      used[i] = used[j] = true;
    }
    // Upload each image used once (on stream 0, then wait: every stream reads them).
    std::vector<DeviceSet> sets(images.size());
    for (size_t i = 0; i < images.size(); ++i) {
      if (!used[i]) continue;
      TIEPOINT_RETURN_IF_ERROR(images[i]->CheckConsistent());
      TIEPOINT_RETURN_IF_ERROR(CheckMatcherSizes(images[i]->size(), 0));
      TIEPOINT_RETURN_IF_ERROR(Upload(images[i]->descriptors.data(), images[i]->size(),
                                      workspaces_[0]->stream, &sets[i]));
    }
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(workspaces_[0]->stream));
    const size_t streams = workspaces_.size();
    std::vector<long long> in_flight(streams, -1);  // pair index per stream
    size_t done = 0;
    auto collect = [&](size_t s) -> Status {
      if (in_flight[s] < 0) return Status::Ok();
      TIEPOINT_RETURN_IF_ERROR(Collect(workspaces_[s].get(), &(*matches)[in_flight[s]]));
      in_flight[s] = -1;
      ++done;
      if (progress) progress(done, pairs.size());
      return Status::Ok();
    };
    for (size_t p = 0; p < pairs.size(); ++p) {
      const size_t s = p % streams;
      TIEPOINT_RETURN_IF_ERROR(collect(s));
      const auto [i, j] = pairs[p];
      summary_.descriptor_pairs += static_cast<double>(sets[i].n) * sets[j].n;
      summary_.exact_distances = summary_.descriptor_pairs;
      if (sets[i].n == 0 || sets[j].n == 0) {
        ++done;
        if (progress) progress(done, pairs.size());
        continue;
      }
      TIEPOINT_RETURN_IF_ERROR(Enqueue(sets[i], sets[j], workspaces_[s].get()));
      in_flight[s] = static_cast<long long>(p);
    }
    for (size_t k = 0; k < streams; ++k) {
      TIEPOINT_RETURN_IF_ERROR(collect((pairs.size() + k) % streams));
    }
    summary_.seconds = timer.Seconds();
    return Status::Ok();
  }

  // Kernels of one pair on w's stream, results into w.host_out (asynchronous).
  Status Enqueue(const DeviceSet& a, const DeviceSet& b, Workspace* w) {
    TIEPOINT_RETURN_IF_ERROR(EnqueueKernels(a, b, w));
    return EnqueueCopy(w);
  }

  Status EnqueueCopy(Workspace* w) {
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(w->host_out.get(), w->out.get(),
                                                  sizeof(int2) * w->n1, cudaMemcpyDeviceToHost,
                                                  w->stream));
    return Status::Ok();
  }

  Status EnqueueKernels(const DeviceSet& a, const DeviceSet& b, Workspace* w) {
    const int n1 = static_cast<int>(a.n), n2 = static_cast<int>(b.n);
    const int row_blocks = (n1 + kBlockRows - 1) / kBlockRows;
    const int tiles = (n2 + kTileCols - 1) / kTileCols;
    int splits = options_.cuda_column_splits;
    if (splits == 0) splits = AutoSplits(row_blocks, tiles);
    splits = std::min(splits, tiles);
    const int per_split = (tiles + splits - 1) / splits;
    splits = (tiles + per_split - 1) / per_split;
    TIEPOINT_RETURN_IF_ERROR(w->partial.Reserve(static_cast<size_t>(splits) * n1, "row results"));
    TIEPOINT_RETURN_IF_ERROR(w->col_best.Reserve(n2, "column results"));
    TIEPOINT_RETURN_IF_ERROR(w->out.Reserve(n1, "matches"));
    TIEPOINT_RETURN_IF_ERROR(w->host_out.Reserve(n1));
    if (options_.mutual) {
      TIEPOINT_CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(w->col_best.get(), 0xff, sizeof(unsigned long long) * n2, w->stream));
    }
    const dim3 grid(row_blocks, splits);
    if (options_.mutual) {
      MatchTileKernel<true><<<grid, kThreads, 0, w->stream>>>(
          a.descriptors.get(), a.norms.get(), n1, b.descriptors.get(), b.norms.get(), n2, tiles,
          per_split, w->partial.get(), w->col_best.get());
    } else {
      MatchTileKernel<false><<<grid, kThreads, 0, w->stream>>>(
          a.descriptors.get(), a.norms.get(), n1, b.descriptors.get(), b.norms.get(), n2, tiles,
          per_split, w->partial.get(), w->col_best.get());
    }
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    const double ratio_sq = options_.ratio * options_.ratio;
    const double max_sq =
        options_.max_distance < 0 ? -1.0 : options_.max_distance * options_.max_distance;
    FinalKernel<<<(n1 + 255) / 256, 256, 0, w->stream>>>(w->partial.get(), n1, splits,
                                                         w->col_best.get(), options_.mutual,
                                                         ratio_sq, max_sq, w->out.get());
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    w->n1 = a.n;
    return Status::Ok();
  }

  // Column ranges that fill the GPU in whole waves: the smallest split count whose blocks
  // use >= 90% of the resident-block slots over all waves (the best one found otherwise).
  // 16,384 rows on an H100 (132 SMs x 3 blocks): 256 row blocks -> 3 splits, 97%.
  int AutoSplits(int row_blocks, int tiles) const {
    int best = 1;
    double best_use = 0;
    for (int s = 1; s <= std::min(tiles, 64); ++s) {
      const long long blocks = static_cast<long long>(row_blocks) * s;
      const long long waves = (blocks + resident_blocks_ - 1) / resident_blocks_;
      const double use = double(blocks) / double(waves * resident_blocks_);
      if (use > best_use + 1e-9) {
        best_use = use;
        best = s;
      }
      if (use >= 0.9) break;
    }
    return best;
  }

  Status Collect(Workspace* w, std::vector<FeatureMatch>* matches) {
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(w->stream));
    matches->clear();
    const int2* out = w->host_out.get();
    for (uint64_t i = 0; i < w->n1; ++i) {
      if (out[i].x >= 0) {
        matches->push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(out[i].x),
                            static_cast<uint32_t>(out[i].y)});
      }
    }
    w->n1 = 0;
    return Status::Ok();
  }

  Workspace& workspace(int s) { return *workspaces_[s]; }

 private:
  MatcherOptions options_;
  int multiprocessors_ = 1;
  int resident_blocks_ = 1;
  std::vector<std::unique_ptr<Workspace>> workspaces_;
  DeviceSet set_a_, set_b_;
};

}  // namespace

Status CreateCudaMatcher(const MatcherOptions& options,
                         std::unique_ptr<DescriptorMatcher>* matcher) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    cudaGetLastError();
    return Status::Unavailable(std::string("CUDA matcher: no usable CUDA device (") +
                               (err != cudaSuccess ? cudaGetErrorString(err) : "none found") +
                               "); use --device cpu");
  }
  auto m = std::make_unique<CudaMatcher>(options);
  TIEPOINT_RETURN_IF_ERROR(m->Init());
  *matcher = std::move(m);
  return Status::Ok();
}

Status CudaMatchTiming(const MatcherOptions& options, const uint8_t* a, uint64_t n1,
                       const uint8_t* b, uint64_t n2, int warmup, int repeats,
                       std::vector<double>* device_ms, std::vector<double>* with_copy_ms,
                       std::vector<FeatureMatch>* matches) {
  TIEPOINT_RETURN_IF_ERROR(options.Check());
  TIEPOINT_RETURN_IF_ERROR(CheckMatcherSizes(n1, n2));
  if (n1 == 0 || n2 == 0) return Status::InvalidInput("CudaMatchTiming: empty descriptor set");
  std::unique_ptr<DescriptorMatcher> base;
  TIEPOINT_RETURN_IF_ERROR(CreateCudaMatcher(options, &base));
  auto* m = static_cast<CudaMatcher*>(base.get());
  Workspace& w = m->workspace(0);
  DeviceSet sa, sb;
  TIEPOINT_RETURN_IF_ERROR(Upload(a, n1, w.stream, &sa));
  TIEPOINT_RETURN_IF_ERROR(Upload(b, n2, w.stream, &sb));
  cudaEvent_t start, kernels_done, copied;
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventCreate(&kernels_done));
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventCreate(&copied));
  device_ms->clear();
  with_copy_ms->clear();
  auto run_once = [&](float* kernels, float* with_copy) -> Status {
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(start, w.stream));
    TIEPOINT_RETURN_IF_ERROR(m->EnqueueKernels(sa, sb, &w));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(kernels_done, w.stream));
    TIEPOINT_RETURN_IF_ERROR(m->EnqueueCopy(&w));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(copied, w.stream));
    TIEPOINT_RETURN_IF_ERROR(m->Collect(&w, matches));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(kernels, start, kernels_done));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(with_copy, start, copied));
    return Status::Ok();
  };
  Status status = Status::Ok();
  for (int r = 0; r < warmup + repeats; ++r) {
    float kernels = 0, with_copy = 0;
    const Status s = run_once(&kernels, &with_copy);
    if (!s.ok()) {
      status = s;
      break;
    }
    if (r >= warmup) {
      device_ms->push_back(kernels);
      with_copy_ms->push_back(with_copy);
    }
  }
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(kernels_done);
  (void)cudaEventDestroy(copied);
  return status;
}

}  // namespace tiepoint
