// The CUDA frontend: pyramid, FAST, suppression (this file) and LK (lk_cuda.cu). The
// design is in features/fast_cuda.h; the per-pixel test is features/fast_score_inl.h, the
// same source the CPU reference compiles, so corners agree bit for bit.
#include "features/fast_cuda.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "features/fast_score_inl.h"
#include "features/lk_cuda.h"
#include "io/base/cuda_check.h"
#include "io/base/cuda_device.h"

namespace tiepoint {
namespace {

using cuda_internal::kMaxLevels;
using cuda_internal::PyramidView;

// One cell's winner (level -1: none). 16 bytes, one store per cell.
struct CellCorner {
  float score;
  int level;
  int x;
  int y;
};

struct PlainCorner {
  float score;
  int level;
  int x;
  int y;
};

__device__ __forceinline__ int MirrorIndex(int i, int n) {
  if (n == 1) return 0;
  if (i < 0) i = -i;
  if (i >= n) i = 2 * n - 2 - i;
  return min(max(i, 0), n - 1);
}

// Programmatic dependent launch (Hopper): the pyramid kernels let the detection kernel
// that follows them start at once (TriggerDependents); detection scores level 0, which the
// pyramid does not write, and waits for the pyramid (WaitForPrerequisite: its completion
// and its writes) before it reads levels 1 and up. Without the launch attribute, or before
// sm_90, both are no-ops and the kernels run one after the other.
__device__ __forceinline__ void TriggerDependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}
__device__ __forceinline__ void WaitForPrerequisite() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
#endif
}

// Level l+1 from level l: 5x5 binomial, integer, exactly as features/pyramid.cc.
__global__ void DownsampleKernel(const uint8_t* __restrict__ in, int in_w, int in_h,
                                 uint8_t* __restrict__ out, int out_w, int out_h) {
  TriggerDependents();
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= out_w || y >= out_h) return;
  const int w[5] = {1, 4, 6, 4, 1};
  int cols[5];
#pragma unroll
  for (int i = 0; i < 5; ++i) cols[i] = MirrorIndex(2 * x + i - 2, in_w);
  int s = 0;
#pragma unroll
  for (int j = 0; j < 5; ++j) {
    const uint8_t* row = in + static_cast<size_t>(MirrorIndex(2 * y + j - 2, in_h)) * in_w;
    int r = 0;
#pragma unroll
    for (int i = 0; i < 5; ++i) r += w[i] * __ldg(row + cols[i]);
    s += w[j] * r;
  }
  out[static_cast<size_t>(y) * out_w + x] = static_cast<uint8_t>((s + 128) >> 8);
}

// Levels l+1 and l+2 from level l in one launch (the launch, not the arithmetic, dominates
// these small kernels): a block of 32x8 threads makes a 32x8 tile of level l+2. It first
// computes the 67x19 pixels of level l+1 that tile reads (mirrored at the level's border
// exactly as DownsampleKernel would index them) into shared memory, writes the 64x16 of
// them it owns to level l+1, then filters the tile. Same integer arithmetic as
// DownsampleKernel and features/pyramid.cc, so the same bits.
constexpr int kDown2W = 32, kDown2H = 8;
constexpr int kMidW = 2 * kDown2W + 3, kMidH = 2 * kDown2H + 3;
__global__ void __launch_bounds__(kDown2W * kDown2H)
    Downsample2Kernel(const uint8_t* __restrict__ in, int in_w, int in_h,
                      uint8_t* __restrict__ mid, int mid_w, int mid_h,
                      uint8_t* __restrict__ out, int out_w, int out_h) {
  __shared__ int tile[kMidH][kMidW];
  TriggerDependents();
  const int w[5] = {1, 4, 6, 4, 1};
  const int ox0 = blockIdx.x * kDown2W, oy0 = blockIdx.y * kDown2H;
  const int rx0 = 2 * ox0 - 2, ry0 = 2 * oy0 - 2;  // level l+1 index of tile[0][0]
  const int t = threadIdx.y * kDown2W + threadIdx.x;
  for (int i = t; i < kMidW * kMidH; i += kDown2W * kDown2H) {
    const int ty = i / kMidW, tx = i % kMidW;
    const int my = MirrorIndex(ry0 + ty, mid_h), mx = MirrorIndex(rx0 + tx, mid_w);
    int cols[5];
#pragma unroll
    for (int k = 0; k < 5; ++k) cols[k] = MirrorIndex(2 * mx + k - 2, in_w);
    int s = 0;
#pragma unroll
    for (int j = 0; j < 5; ++j) {
      const uint8_t* row = in + static_cast<size_t>(MirrorIndex(2 * my + j - 2, in_h)) * in_w;
      int r = 0;
#pragma unroll
      for (int k = 0; k < 5; ++k) r += w[k] * __ldg(row + cols[k]);
      s += w[j] * r;
    }
    const int v = (s + 128) >> 8;
    tile[ty][tx] = v;
    // Owned pixels: level l+1 indices [2 ox0, 2 ox0 + 64) x [2 oy0, 2 oy0 + 16).
    const int ux = rx0 + tx, uy = ry0 + ty;
    if (tx >= 2 && tx < 2 + 2 * kDown2W && ty >= 2 && ty < 2 + 2 * kDown2H && ux < mid_w &&
        uy < mid_h) {
      mid[static_cast<size_t>(uy) * mid_w + ux] = static_cast<uint8_t>(v);
    }
  }
  __syncthreads();
  const int x = ox0 + threadIdx.x, y = oy0 + threadIdx.y;
  if (x >= out_w || y >= out_h) return;
  int s = 0;
#pragma unroll
  for (int j = 0; j < 5; ++j) {
    int r = 0;
#pragma unroll
    for (int k = 0; k < 5; ++k) r += w[k] * tile[2 * threadIdx.y + j][2 * threadIdx.x + k];
    s += w[j] * r;
  }
  out[static_cast<size_t>(y) * out_w + x] = static_cast<uint8_t>((s + 128) >> 8);
}

struct ScoreParams {
  int threshold;
  int arc_length;
  int score_kind;
};

struct MapView {
  float* level[kMaxLevels];
};

// Level `l` of the views, selected with compile-time indices: a run-time index into a
// by-value kernel parameter makes the compiler copy the whole struct to local memory.
struct LevelRefs {
  const uint8_t* img;
  float* map;
  int w, h;
};
__device__ __forceinline__ LevelRefs SelectLevel(const PyramidView& pyr, const MapView& maps, int l) {
  LevelRefs r{pyr.level[0], maps.level[0], pyr.width[0], pyr.height[0]};
#pragma unroll
  for (int i = 1; i < kMaxLevels; ++i) {
    if (i == l) r = {pyr.level[i], maps.level[i], pyr.width[i], pyr.height[i]};
  }
  return r;
}

// Segment test + score of every pixel of level blockIdx.z; -inf for no corner.
__global__ void ScoreKernel(PyramidView pyr, MapView maps, ScoreParams p,
                            const uint32_t* __restrict__ table) {
  const LevelRefs level = SelectLevel(pyr, maps, blockIdx.z);
  const int w = level.w, h = level.h;
  const uint8_t* img = level.img;
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  float s = -INFINITY;
  if (x >= kFastBorder && y >= kFastBorder && x < w - kFastBorder && y < h - kFastBorder) {
    s = fast_internal::PixelScore(img + static_cast<size_t>(y) * w + x, w, p.threshold,
                                  p.arc_length, p.score_kind, table);
  }
  level.map[static_cast<size_t>(y) * w + x] = s;
}

__device__ __forceinline__ bool Beats(float sa, int la, int ya, int xa, float sb, int lb, int yb,
                                      int xb) {
  if (sa != sb) return sa > sb;
  if (la != lb) return la < lb;
  if (ya != yb) return ya < yb;
  return xa < xb;
}

__device__ __forceinline__ bool LocalMax(const float* map, int w, int h, int level, int x, int y,
                                         float s, int radius) {
  for (int qy = max(0, y - radius); qy <= min(h - 1, y + radius); ++qy) {
    for (int qx = max(0, x - radius); qx <= min(w - 1, x + radius); ++qx) {
      if (qx == x && qy == y) continue;
      const float q = map[static_cast<size_t>(qy) * w + qx];
      if (q == -INFINITY) continue;
      if (!Beats(s, level, y, x, q, level, qy, qx)) return false;
    }
  }
  return true;
}

// Picks the best of the warp's candidates (every lane ends with it), then the block's
// through shared memory; thread 0 writes the cell.
template <int kWarps>
__device__ __forceinline__ void ReduceCellBest(float bs, int bl, int bx, int by,
                                               CellCorner* __restrict__ out) {
  __shared__ CellCorner warp_best[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) {
    const float os = __shfl_xor_sync(0xffffffffu, bs, m);
    const int ol = __shfl_xor_sync(0xffffffffu, bl, m);
    const int ox = __shfl_xor_sync(0xffffffffu, bx, m);
    const int oy = __shfl_xor_sync(0xffffffffu, by, m);
    if (ol >= 0 && (bl < 0 || Beats(os, ol, oy, ox, bs, bl, by, bx))) {
      bs = os;
      bl = ol;
      bx = ox;
      by = oy;
    }
  }
  if (lane == 0) warp_best[warp] = {bs, bl, bx, by};
  __syncthreads();
  if (threadIdx.x == 0) {
    CellCorner best = warp_best[0];
    for (int i = 1; i < kWarps; ++i) {
      const CellCorner c = warp_best[i];
      if (c.level >= 0 &&
          (best.level < 0 || Beats(c.score, c.level, c.y, c.x, best.score, best.level, best.y, best.x))) {
        best = c;
      }
    }
    *out = best;
  }
}

// Segment test, score and grid suppression in one launch (no score map in global memory):
// a block per cell, kDetectWarps warps. For each level the cell's pixels are visited in
// sub-tiles of at most kTileW x kTileH (one sub-tile for cells up to 128x32); the block
// scores the sub-tile and a 1-pixel ring around it into shared memory (a thread per pixel,
// strided), then warp w takes the sub-tile rows w, w + kDetectWarps, ..., lane i the
// columns i, i + 32, ...: each corner that beats its 8 neighbours and the lane's best so
// far becomes the lane's best. The block's best is the cell's corner.
constexpr int kDetectWarps = 8;
constexpr int kTileW = 128;
constexpr int kTileH = 32;

__global__ void __launch_bounds__(32 * kDetectWarps)
    GridDetectKernel(PyramidView pyr, int levels, ScoreParams p, const uint32_t* __restrict__ table,
                     int cell_w, int cell_h, int grid_x, const uint8_t* __restrict__ blocked,
                     CellCorner* __restrict__ cells) {
  __shared__ float tile[(kTileW + 2) * (kTileH + 2)];
  const int cell = blockIdx.x;
  if (blocked && blocked[cell]) {
    if (threadIdx.x == 0) cells[cell] = {-INFINITY, -1, 0, 0};
    return;  // the whole block leaves
  }
  const int cx = cell % grid_x, cy = cell / grid_x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float bs = -INFINITY;
  int bl = -1, bx = 0, by = 0;
  for (int l = 0; l < levels; ++l) {
    if (l == 1) WaitForPrerequisite();  // levels 1.. come from the pyramid kernel before
    const uint8_t* img = pyr.level[0];
    int w = pyr.width[0], h = pyr.height[0];
#pragma unroll
    for (int i = 1; i < kMaxLevels; ++i) {
      if (i == l) {
        img = pyr.level[i];
        w = pyr.width[i];
        h = pyr.height[i];
      }
    }
    const int scale = 1 << l;
    const int x_begin = (cx * cell_w + scale - 1) / scale;
    const int x_end = min(w, ((cx + 1) * cell_w + scale - 1) / scale);
    const int y_begin = (cy * cell_h + scale - 1) / scale;
    const int y_end = min(h, ((cy + 1) * cell_h + scale - 1) / scale);
    for (int sy = y_begin; sy < y_end; sy += kTileH) {
      for (int sx = x_begin; sx < x_end; sx += kTileW) {
        const int sx_end = min(x_end, sx + kTileW), sy_end = min(y_end, sy + kTileH);
        const int tx0 = max(0, sx - 1), tx1 = min(w, sx_end + 1);
        const int ty0 = max(0, sy - 1), ty1 = min(h, sy_end + 1);
        const int tw = tx1 - tx0, n = tw * (ty1 - ty0);
        __syncthreads();  // the previous sub-tile's reads are done
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
          const int y = ty0 + i / tw, x = tx0 + i % tw;
          float s = -INFINITY;
          if (x >= kFastBorder && y >= kFastBorder && x < w - kFastBorder && y < h - kFastBorder) {
            s = fast_internal::PixelScore(img + static_cast<size_t>(y) * w + x, w, p.threshold,
                                          p.arc_length, p.score_kind, table);
          }
          tile[i] = s;
        }
        __syncthreads();
        for (int y = sy + warp; y < sy_end; y += kDetectWarps) {
          for (int x = sx + lane; x < sx_end; x += 32) {
            const float* t = tile + (y - ty0) * tw + (x - tx0);
            const float s = *t;
            if (s == -INFINITY) continue;
            if (bl >= 0 && !Beats(s, l, y, x, bs, bl, by, bx)) continue;
            // The 3x3 neighbours inside the level (the ring is clipped to it as well).
            bool is_max = true;
#pragma unroll
            for (int dy = -1; dy <= 1; ++dy) {
#pragma unroll
              for (int dx = -1; dx <= 1; ++dx) {
                if (dx == 0 && dy == 0) continue;
                const int qx = x + dx, qy = y + dy;
                if (qx < 0 || qy < 0 || qx >= w || qy >= h) continue;
                const float q = t[dy * tw + dx];
                if (q != -INFINITY && !Beats(s, l, y, x, q, l, qy, qx)) is_max = false;
              }
            }
            if (!is_max) continue;
            bs = s;
            bl = l;
            bx = x;
            by = y;
          }
        }
      }
    }
  }
  ReduceCellBest<kDetectWarps>(bs, bl, bx, by, cells + cell);
}

// Spins for `cycles` clocks: queued ahead of a timed region, it lets the host enqueue the
// whole region before the GPU reaches its first event, so the events see device time only.
// Launched on every SM the GPU counts as busy (its clocks rise as under sustained work);
// one thread leaves it nearly idle. Thread 0 of block 0 stores the clocks it counted and
// the nanoseconds they took (the SM clock) in clock[0..1] when `clock` is not null.
__global__ void SpinKernel(long long cycles, long long* clock) {
  const long long t0 = clock64();
  unsigned long long g0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
  long long t = t0;
  while ((t = clock64()) - t0 < cycles) {
  }
  unsigned long long g1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
  if (clock && blockIdx.x == 0 && threadIdx.x == 0) {
    clock[0] = t - t0;
    clock[1] = static_cast<long long>(g1 - g0);
  }
}

// Plain suppression: a thread per pixel of level blockIdx.z; survivors appended.
__global__ void PlainNmsKernel(PyramidView pyr, MapView maps, int radius, int capacity,
                               PlainCorner* __restrict__ out, int* __restrict__ count) {
  const int l = blockIdx.z;
  const LevelRefs level = SelectLevel(pyr, maps, l);
  const int w = level.w, h = level.h;
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  const float s = level.map[static_cast<size_t>(y) * w + x];
  if (s == -INFINITY) return;
  if (!LocalMax(level.map, w, h, l, x, y, s, radius)) return;
  const int i = atomicAdd(count, 1);
  if (i < capacity) out[i] = {s, l, x, y};
}

class CudaFrontEnd : public FastLkFrontEnd {
 public:
  explicit CudaFrontEnd(const FrontEndOptions& options)
      : options_(options), slots_(options.slots) {}

  ~CudaFrontEnd() override {
    if (stream_) {
      cudaStreamSynchronize(stream_);
      for (cudaEvent_t e : events_) {
        if (e) cudaEventDestroy(e);
      }
      cudaStreamDestroy(stream_);
    }
  }

  Status Init() {
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    for (cudaEvent_t& e : events_) TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
    int device = 0;
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&num_sms_, cudaDevAttrMultiProcessorCount, device));
    const std::array<uint32_t, 2048> table = FastLookupTable(options_.fast.arc_length);
    TIEPOINT_RETURN_IF_ERROR(d_table_.Reserve(table.size()));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpy(d_table_.get(), table.data(),
                                             table.size() * sizeof(uint32_t),
                                             cudaMemcpyHostToDevice));
    return Status::Ok();
  }

  Status SetFrame(int slot, const ImageU8& image) override {
    TIEPOINT_RETURN_IF_ERROR(CheckSlot(slot, false));
    if (image.empty()) return Status::InvalidInput("frontend: empty image");
    if (image.data.size() != static_cast<size_t>(image.width) * image.height) {
      return Status::InvalidInput("frontend: image data size disagrees with its sides");
    }
    Slot& s = slots_[slot];
    s.filled = false;
    s.view = PyramidView();
    s.view.levels = PyramidLevelsFor(image.width, image.height, options_.pyramid_levels());
    size_t total = 0;
    size_t offsets[kMaxLevels];
    for (int l = 0; l < s.view.levels; ++l) {
      PyramidLevelSize(image.width, image.height, l, &s.view.width[l], &s.view.height[l]);
      offsets[l] = total;
      total += static_cast<size_t>(s.view.width[l]) * s.view.height[l];
    }
    TIEPOINT_RETURN_IF_ERROR(s.data.Reserve(total));
    for (int l = 0; l < s.view.levels; ++l) s.view.level[l] = s.data.get() + offsets[l];
    s.total = total;
    TIEPOINT_RETURN_IF_ERROR(h_frame_.Reserve(image.data.size()));
    std::memcpy(h_frame_.get(), image.data.data(), image.data.size());
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[0], stream_));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s.data.get(), h_frame_.get(), image.data.size(),
                                                  cudaMemcpyHostToDevice, stream_));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[1], stream_));
    TIEPOINT_RETURN_IF_ERROR(EnqueuePyramid(s));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[2], stream_));
    // The pinned staging buffer is reused by the next call: wait for the copy.
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    float ms = 0;
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, events_[0], events_[1]));
    times_.upload_us = 1e3 * ms;
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, events_[1], events_[2]));
    times_.pyramid_us = 1e3 * ms;
    s.filled = true;
    return Status::Ok();
  }

  Status GetPyramid(int slot, ImagePyramid* pyramid) override {
    TIEPOINT_RETURN_IF_ERROR(CheckSlot(slot, true));
    const Slot& s = slots_[slot];
    pyramid->levels.resize(s.view.levels);
    for (int l = 0; l < s.view.levels; ++l) {
      ImageU8& img = pyramid->levels[l];
      img.width = s.view.width[l];
      img.height = s.view.height[l];
      img.data.resize(static_cast<size_t>(img.width) * img.height);
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(img.data.data(), s.view.level[l], img.data.size(),
                                                    cudaMemcpyDeviceToHost, stream_));
    }
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return Status::Ok();
  }

  Status DetectRaw(int slot, std::vector<std::vector<FastCorner>>* per_level) override {
    TIEPOINT_RETURN_IF_ERROR(CheckSlot(slot, true));
    int levels = 0;
    TIEPOINT_RETURN_IF_ERROR(LaunchScores(slot, &levels));
    const Slot& s = slots_[slot];
    per_level->assign(levels, {});
    std::vector<float> map;
    for (int l = 0; l < levels; ++l) {
      const int w = s.view.width[l], h = s.view.height[l];
      map.resize(static_cast<size_t>(w) * h);
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(map.data(), maps_.level[l], map.size() * sizeof(float),
                                                    cudaMemcpyDeviceToHost, stream_));
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
      for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) {
          const float v = map[static_cast<size_t>(y) * w + x];
          if (v == -INFINITY) continue;
          (*per_level)[l].push_back(MakeFastCorner(l, x, y, v));
        }
      }
    }
    return Status::Ok();
  }

  Status Detect(int slot, const std::vector<uint8_t>* blocked_cells,
                std::vector<FastCorner>* corners) override {
    TIEPOINT_RETURN_IF_ERROR(CheckSlot(slot, true));
    const Slot& s = slots_[slot];
    const FastOptions& fo = options_.fast;
    corners->clear();
    const int gx = FastGridColumns(s.view.width[0], fo.cell_width);
    const int gy = FastGridRows(s.view.height[0], fo.cell_height);
    const int cells = gx * gy;
    if (fo.nms == FastNms::kGrid && blocked_cells) {
      if (blocked_cells->size() != static_cast<size_t>(cells)) {
        return Status::InvalidInput("FAST: blocked-cell mask of " +
                                    std::to_string(blocked_cells->size()) + " cells, expected " +
                                    std::to_string(cells));
      }
      TIEPOINT_RETURN_IF_ERROR(h_blocked_.Reserve(cells));
      TIEPOINT_RETURN_IF_ERROR(d_blocked_.Reserve(cells));
      std::memcpy(h_blocked_.get(), blocked_cells->data(), cells);
    }
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[3], stream_));
    if (fo.nms == FastNms::kGrid && blocked_cells) {
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_blocked_.get(), h_blocked_.get(), cells,
                                                    cudaMemcpyHostToDevice, stream_));
    }
    if (fo.nms == FastNms::kGrid) {
      TIEPOINT_RETURN_IF_ERROR(d_cells_.Reserve(cells));
      TIEPOINT_RETURN_IF_ERROR(h_cells_.Reserve(cells));
      TIEPOINT_RETURN_IF_ERROR(EnqueueGridDetect(s, blocked_cells ? d_blocked_.get() : nullptr));
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[4], stream_));
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(h_cells_.get(), d_cells_.get(),
                                                    cells * sizeof(CellCorner),
                                                    cudaMemcpyDeviceToHost, stream_));
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[5], stream_));
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
      for (int i = 0; i < cells; ++i) {
        const CellCorner& c = h_cells_.get()[i];
        if (c.level < 0) continue;
        corners->push_back(MakeFastCorner(c.level, c.x, c.y, c.score));
      }
    } else {
      int levels = 0;
      TIEPOINT_RETURN_IF_ERROR(LaunchScores(slot, &levels));
      size_t total = 0;
      for (int l = 0; l < levels; ++l) total += static_cast<size_t>(s.view.width[l]) * s.view.height[l];
      const int capacity = static_cast<int>(total);
      TIEPOINT_RETURN_IF_ERROR(d_plain_.Reserve(total));
      TIEPOINT_RETURN_IF_ERROR(d_count_.Reserve(1));
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_count_.get(), 0, sizeof(int), stream_));
      const dim3 block(32, 8);
      const dim3 grid((s.view.width[0] + 31) / 32, (s.view.height[0] + 7) / 8, levels);
      PlainNmsKernel<<<grid, block, 0, stream_>>>(s.view, maps_, fo.nms_radius, capacity,
                                                  d_plain_.get(), d_count_.get());
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[4], stream_));
      int count = 0;
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&count, d_count_.get(), sizeof(int),
                                                    cudaMemcpyDeviceToHost, stream_));
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
      count = std::min(count, capacity);
      std::vector<PlainCorner> found(count);
      if (count > 0) {
        TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(found.data(), d_plain_.get(),
                                                      count * sizeof(PlainCorner),
                                                      cudaMemcpyDeviceToHost, stream_));
      }
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[5], stream_));
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
      std::sort(found.begin(), found.end(), [](const PlainCorner& a, const PlainCorner& b) {
        if (a.level != b.level) return a.level < b.level;
        if (a.y != b.y) return a.y < b.y;
        return a.x < b.x;
      });
      for (const PlainCorner& c : found) corners->push_back(MakeFastCorner(c.level, c.x, c.y, c.score));
    }
    float ms = 0;
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, events_[3], events_[4]));
    times_.detect_us = 1e3 * ms;
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, events_[4], events_[5]));
    times_.download_us = 1e3 * ms;
    return Status::Ok();
  }

  Status TrackMapped(int from, int to, const std::vector<Point2f>& points,
                     const std::vector<Point2f>* guesses, const LkLinearMap& map,
                     std::vector<LkResult>* results) override {
    TIEPOINT_RETURN_IF_ERROR(options_.lk.Check());
    TIEPOINT_RETURN_IF_ERROR(map.Check());
    TIEPOINT_RETURN_IF_ERROR(CheckSlot(from, true));
    TIEPOINT_RETURN_IF_ERROR(CheckSlot(to, true));
    const Slot& a = slots_[from];
    const Slot& b = slots_[to];
    if (a.view.width[0] != b.view.width[0] || a.view.height[0] != b.view.height[0]) {
      return Status::InvalidInput("LK: frames differ in size (" + std::to_string(a.view.width[0]) +
                                  "x" + std::to_string(a.view.height[0]) + " then " +
                                  std::to_string(b.view.width[0]) + "x" +
                                  std::to_string(b.view.height[0]) + ")");
    }
    if (guesses && guesses->size() != points.size()) {
      return Status::InvalidInput("LK: " + std::to_string(guesses->size()) + " guesses for " +
                                  std::to_string(points.size()) + " points");
    }
    const int n = static_cast<int>(points.size());
    results->assign(n, LkResult());
    if (n == 0) return Status::Ok();
    const int levels = std::min({options_.lk.levels, a.view.levels, b.view.levels});
    const size_t floats = 2 * static_cast<size_t>(n) * (guesses ? 2 : 1);
    TIEPOINT_RETURN_IF_ERROR(h_points_.Reserve(floats));
    TIEPOINT_RETURN_IF_ERROR(d_points_.Reserve(floats));
    TIEPOINT_RETURN_IF_ERROR(h_results_.Reserve(n));
    TIEPOINT_RETURN_IF_ERROR(d_results_.Reserve(n));
    float* hp = h_points_.get();
    for (int i = 0; i < n; ++i) {
      hp[2 * i] = points[i].x;
      hp[2 * i + 1] = points[i].y;
      if (guesses) {
        hp[2 * n + 2 * i] = (*guesses)[i].x;
        hp[2 * n + 2 * i + 1] = (*guesses)[i].y;
      }
    }
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_points_.get(), hp, floats * sizeof(float),
                                                  cudaMemcpyHostToDevice, stream_));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[6], stream_));
    TIEPOINT_RETURN_IF_ERROR(cuda_internal::LaunchLk(
        a.view, b.view, levels, d_points_.get(), guesses ? d_points_.get() + 2 * n : nullptr, n,
        map, options_.lk, d_results_.get(), stream_));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[7], stream_));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(h_results_.get(), d_results_.get(),
                                                  n * sizeof(cuda_internal::LkDeviceResult),
                                                  cudaMemcpyDeviceToHost, stream_));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    float ms = 0;
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, events_[6], events_[7]));
    times_.track_us = 1e3 * ms;
    for (int i = 0; i < n; ++i) {
      const cuda_internal::LkDeviceResult& d = h_results_.get()[i];
      LkResult& r = (*results)[i];
      r.x = d.x;
      r.y = d.y;
      r.fb_error = d.fb_error;
      r.gain = d.gain;
      r.bias = d.bias;
      r.status = static_cast<LkStatus>(d.status);
    }
    return Status::Ok();
  }

  const CudaFrontEndTimes& times() const { return times_; }

  // TimeCudaDetect of features/fast_cuda.h.
  Status TimeDetect(int slot, int reps, int batch, bool busy, CudaDetectTiming* timing) {
    TIEPOINT_RETURN_IF_ERROR(CheckSlot(slot, true));
    if (options_.fast.nms != FastNms::kGrid) {
      return Status::InvalidOptions("TimeCudaDetect times grid suppression (fast.nms = grid)");
    }
    const Slot& s = slots_[slot];
    const int cells = FastGridColumns(s.view.width[0], options_.fast.cell_width) *
                      FastGridRows(s.view.height[0], options_.fast.cell_height);
    TIEPOINT_RETURN_IF_ERROR(d_cells_.Reserve(cells));
    std::vector<double> detect, all;
    float ms = 0;
    for (int r = 0; r < reps + 10; ++r) {
      Spin(busy);
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[0], stream_));
      TIEPOINT_RETURN_IF_ERROR(EnqueueGridDetect(s, nullptr));
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[1], stream_));
      Spin(busy);
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[2], stream_));
      TIEPOINT_RETURN_IF_ERROR(EnqueuePyramid(s));
      TIEPOINT_RETURN_IF_ERROR(EnqueueGridDetect(s, nullptr));
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[3], stream_));
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
      if (r < 10) continue;
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, events_[0], events_[1]));
      detect.push_back(1e3 * ms);
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, events_[2], events_[3]));
      all.push_back(1e3 * ms);
    }
    timing->fast_nms_us = MedianOf(detect);
    timing->pyramid_fast_nms_us = MedianOf(all);
    // `batch` frames back to back: one CUDA graph of their launches, replayed.
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    auto enqueue = [&]() -> Status {
      for (int i = 0; i < batch; ++i) {
        TIEPOINT_RETURN_IF_ERROR(EnqueuePyramid(s));
        TIEPOINT_RETURN_IF_ERROR(EnqueueGridDetect(s, nullptr));
      }
      return Status::Ok();
    };
    const Status captured = enqueue();
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
    TIEPOINT_RETURN_IF_ERROR(captured);
    TIEPOINT_CUDA_RETURN_IF_ERROR(ended);
    cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    std::vector<double> per_frame;
    for (int r = 0; r < 6 && e == cudaSuccess; ++r) {
      Spin(busy);
      if ((e = cudaEventRecord(events_[0], stream_)) != cudaSuccess) break;
      if ((e = cudaGraphLaunch(exec, stream_)) != cudaSuccess) break;
      if ((e = cudaEventRecord(events_[1], stream_)) != cudaSuccess) break;
      if ((e = cudaStreamSynchronize(stream_)) != cudaSuccess) break;
      if ((e = cudaEventElapsedTime(&ms, events_[0], events_[1])) != cudaSuccess) break;
      if (r > 0) per_frame.push_back(1e3 * ms / batch);
    }
    if (exec) cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    TIEPOINT_CUDA_RETURN_IF_ERROR(e);
    timing->batch_frame_us = MedianOf(per_frame);
    return SmClockMhz(&timing->sm_mhz);
  }

  // TimeCudaTrack of features/fast_cuda.h.
  Status TimeTrack(int from, int to, const std::vector<Point2f>& points, int reps, bool busy,
                   double* kernel_us, double* sm_mhz) {
    std::vector<LkResult> results;
    TIEPOINT_RETURN_IF_ERROR(Track(from, to, points, nullptr, &results));  // checks, uploads
    const Slot& a = slots_[from];
    const Slot& b = slots_[to];
    const int n = static_cast<int>(points.size());
    const int levels = std::min({options_.lk.levels, a.view.levels, b.view.levels});
    std::vector<double> t;
    float ms = 0;
    for (int r = 0; r < reps + 10; ++r) {
      Spin(busy);
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[6], stream_));
      TIEPOINT_RETURN_IF_ERROR(cuda_internal::LaunchLk(a.view, b.view, levels, d_points_.get(),
                                                       nullptr, n, LkLinearMap(), options_.lk,
                                                       d_results_.get(), stream_));
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[7], stream_));
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, events_[6], events_[7]));
      if (r >= 10) t.push_back(1e3 * ms);
    }
    *kernel_us = MedianOf(t);
    return SmClockMhz(sm_mhz);
  }

 private:
  struct Slot {
    DeviceBuffer<uint8_t> data;
    PyramidView view;
    size_t total = 0;
    bool filled = false;
  };

  // About 100 us at H100 clocks: far longer than the host needs to enqueue a timed region.
  static constexpr long long kSpinCycles = 200000;

  // The spin kernel ahead of a timed region (see SpinKernel); records the SM clock.
  void Spin(bool busy) {
    if (d_clock_.Reserve(2).ok()) {
      SpinKernel<<<busy ? 4 * num_sms_ : 1, busy ? 128 : 1, 0, stream_>>>(kSpinCycles, d_clock_.get());
    }
  }

  // The SM clock the last spin kernel counted (MHz).
  Status SmClockMhz(double* mhz) {
    long long c[2] = {0, 0};
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpy(c, d_clock_.get(), sizeof(c), cudaMemcpyDeviceToHost));
    *mhz = c[1] > 0 ? 1e3 * static_cast<double>(c[0]) / static_cast<double>(c[1]) : 0.0;
    return Status::Ok();
  }

  static double MedianOf(std::vector<double> v) {
    if (v.empty()) return 0;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  }

  Status CheckSlot(int slot, bool must_be_filled) const {
    if (slot < 0 || slot >= options_.slots) {
      return Status::InvalidOptions("frontend slot " + std::to_string(slot) + ": expected 0.." +
                                    std::to_string(options_.slots - 1));
    }
    if (must_be_filled && !slots_[slot].filled) {
      return Status::InvalidOptions("frontend slot " + std::to_string(slot) + " holds no frame");
    }
    return Status::Ok();
  }

  // Levels 1.. of the slot's pyramid from its level 0 (asynchronous).
  // Two levels per launch where two remain (Downsample2Kernel).
  Status EnqueuePyramid(const Slot& s) {
    for (int l = 1; l < s.view.levels; ++l) {
      if (l + 1 < s.view.levels) {
        const dim3 grid((s.view.width[l + 1] + kDown2W - 1) / kDown2W,
                        (s.view.height[l + 1] + kDown2H - 1) / kDown2H);
        Downsample2Kernel<<<grid, dim3(kDown2W, kDown2H), 0, stream_>>>(
            s.view.level[l - 1], s.view.width[l - 1], s.view.height[l - 1],
            const_cast<uint8_t*>(s.view.level[l]), s.view.width[l], s.view.height[l],
            const_cast<uint8_t*>(s.view.level[l + 1]), s.view.width[l + 1], s.view.height[l + 1]);
        TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
        ++l;
        continue;
      }
      const dim3 block(32, 8);
      const dim3 grid((s.view.width[l] + 31) / 32, (s.view.height[l] + 7) / 8);
      DownsampleKernel<<<grid, block, 0, stream_>>>(
          s.view.level[l - 1], s.view.width[l - 1], s.view.height[l - 1],
          const_cast<uint8_t*>(s.view.level[l]), s.view.width[l], s.view.height[l]);
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    }
    return Status::Ok();
  }

  // FAST + grid suppression of the slot into d_cells_ (reserved by the caller; asynchronous).
  Status EnqueueGridDetect(const Slot& s, const uint8_t* d_blocked) {
    const FastOptions& fo = options_.fast;
    const int levels = std::min(fo.levels, s.view.levels);
    const int gx = FastGridColumns(s.view.width[0], fo.cell_width);
    const int cells = gx * FastGridRows(s.view.height[0], fo.cell_height);
    ScoreParams p{fo.threshold, fo.arc_length, static_cast<int>(fo.score)};
    // Launched as a programmatic dependent of the pyramid kernel before it in the stream
    // (when that is the previous operation): level 0 is scored while the pyramid is built.
    // TIEPOINT_CUDA_NO_PDL=1 launches it plainly (for comparisons).
    static const bool pdl = std::getenv("TIEPOINT_CUDA_NO_PDL") == nullptr;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(cells);
    config.blockDim = dim3(32 * kDetectWarps);
    config.stream = stream_;
    cudaLaunchAttribute attribute[1];
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attribute;
    config.numAttrs = pdl ? 1 : 0;
    const uint32_t* table = d_table_.get();
    CellCorner* out = d_cells_.get();
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaLaunchKernelEx(&config, GridDetectKernel, s.view, levels, p, table,
                                                     fo.cell_width, fo.cell_height, gx, d_blocked, out));
    return Status::Ok();
  }

  // Score maps of the searched levels of `slot` into maps_ (asynchronous).
  Status LaunchScores(int slot, int* levels) {
    const Slot& s = slots_[slot];
    *levels = std::min(options_.fast.levels, s.view.levels);
    TIEPOINT_RETURN_IF_ERROR(d_maps_.Reserve(s.total));
    size_t offset = 0;
    for (int l = 0; l < kMaxLevels; ++l) maps_.level[l] = nullptr;
    for (int l = 0; l < *levels; ++l) {
      maps_.level[l] = d_maps_.get() + offset;
      offset += static_cast<size_t>(s.view.width[l]) * s.view.height[l];
    }
    ScoreParams p{options_.fast.threshold, options_.fast.arc_length,
                  static_cast<int>(options_.fast.score)};
    const dim3 block(32, 8);
    const dim3 grid((s.view.width[0] + 31) / 32, (s.view.height[0] + 7) / 8, *levels);
    ScoreKernel<<<grid, block, 0, stream_>>>(s.view, maps_, p, d_table_.get());
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return Status::Ok();
  }

  FrontEndOptions options_;
  std::vector<Slot> slots_;
  int num_sms_ = 1;
  DeviceBuffer<long long> d_clock_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t events_[8] = {};
  DeviceBuffer<uint32_t> d_table_;
  DeviceBuffer<float> d_maps_;
  MapView maps_{};
  DeviceBuffer<uint8_t> d_blocked_;
  PinnedBuffer<uint8_t> h_blocked_;
  DeviceBuffer<CellCorner> d_cells_;
  PinnedBuffer<CellCorner> h_cells_;
  DeviceBuffer<PlainCorner> d_plain_;
  DeviceBuffer<int> d_count_;
  PinnedBuffer<uint8_t> h_frame_;
  PinnedBuffer<float> h_points_;
  DeviceBuffer<float> d_points_;
  PinnedBuffer<cuda_internal::LkDeviceResult> h_results_;
  DeviceBuffer<cuda_internal::LkDeviceResult> d_results_;
  CudaFrontEndTimes times_;
};

}  // namespace

Status CreateCudaFrontEnd(const FrontEndOptions& options, std::unique_ptr<FastLkFrontEnd>* frontend) {
  TIEPOINT_RETURN_IF_ERROR(options.Check());
  std::vector<CudaDeviceInfo> devices;
  const Status s = QueryCudaDevices(&devices);
  if (!s.ok()) {
    return Status::Unavailable("no usable CUDA device (" + s.message() + "); use --device cpu");
  }
  auto fe = std::make_unique<CudaFrontEnd>(options);
  TIEPOINT_RETURN_IF_ERROR(fe->Init());
  *frontend = std::move(fe);
  return Status::Ok();
}

Status LastCudaFrontEndTimes(FastLkFrontEnd* frontend, CudaFrontEndTimes* times) {
  auto* cuda = dynamic_cast<CudaFrontEnd*>(frontend);
  if (!cuda) return Status::InvalidOptions("not a CUDA frontend");
  *times = cuda->times();
  return Status::Ok();
}

}  // namespace tiepoint

namespace tiepoint {

Status TimeCudaDetect(FastLkFrontEnd* frontend, int slot, int reps, int batch, bool busy,
                      CudaDetectTiming* timing) {
  auto* cuda = dynamic_cast<CudaFrontEnd*>(frontend);
  if (!cuda) return Status::InvalidOptions("not a CUDA frontend");
  if (reps < 1 || batch < 1) return Status::InvalidOptions("TimeCudaDetect: reps and batch must be >= 1");
  return cuda->TimeDetect(slot, reps, batch, busy, timing);
}

Status TimeCudaTrack(FastLkFrontEnd* frontend, int from, int to, const std::vector<Point2f>& points,
                     int reps, bool busy, double* kernel_us, double* sm_mhz) {
  auto* cuda = dynamic_cast<CudaFrontEnd*>(frontend);
  if (!cuda) return Status::InvalidOptions("not a CUDA frontend");
  if (reps < 1) return Status::InvalidOptions("TimeCudaTrack: reps must be >= 1");
  return cuda->TimeTrack(from, to, points, reps, busy, kernel_us, sm_mhz);
}

}  // namespace tiepoint
