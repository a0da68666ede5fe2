// SIFT on the GPU (contract in features/sift_cuda.h, algorithm in features/sift.h).
//
// This file is compiled with --fmad=false (features/CMakeLists.txt): every float product
// and sum is rounded on its own, as in the CPU reference built without -mfma, so the
// blurs and differences of Gaussians are bit-identical to the CPU's and extrema are found
// at the same samples.
#include "features/sift_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "io/base/cuda_buffer.h"
#include "io/base/cuda_check.h"
#include "io/base/cuda_device.h"

namespace tiepoint {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kTwoPi = 2.0 * kPi;
constexpr float kTwoPiF = static_cast<float>(kTwoPi);

// Same constants as the CPU reference (features/sift.cc).
constexpr int kMaxRefineMoves = 5;
constexpr int kOrientationBins = 36;
constexpr double kOrientationSigmaFactor = 1.5;
constexpr double kOrientationRadiusFactor = 3.0;
constexpr float kOrientationPeakRatio = 0.8f;
constexpr int kDescriptorWidth = 4;
constexpr int kDescriptorBins = 8;
constexpr double kDescriptorBinFactor = 3.0;
constexpr float kDescriptorClip = 0.2f;
constexpr float kDescriptorQuantScale = 512.0f;
constexpr int kDescriptorSize = kDescriptorWidth * kDescriptorWidth * kDescriptorBins;
static_assert(kDescriptorSize == kSiftDescriptorDim, "descriptor layout");

// More than any image can have: 65535 px sides upsampled give 14 octaves.
constexpr int kMaxOctaves = 24;
// A local maximum of 36 circular bins must beat both neighbours: at most 18 per histogram.
constexpr int kMaxPeaks = kOrientationBins / 2;

// Fused blur: a kTile-wide output tile per block of kTile x kBlurRows threads.
constexpr int kTile = 32;
constexpr int kBlurRows = 8;
// Orientation: one block of kOrientationThreads per detection; descriptors: one block of
// kDescriptorThreads per keypoint, voting into one shared histogram (see Vote()).
// Measured on an H100 (ncu, one 1920 x 1080 image, 4000 keypoints): with per-thread float
// histograms (64 threads, 33 KB of shared memory a block) the descriptors took 229 us.
constexpr int kOrientationThreads = 128;
constexpr int kDescriptorThreads = 128;
// Uploads go in chunks of at least this many pixels (1 MiB), at most 8 per image.
constexpr size_t kUploadChunkPixels = 1 << 18;
// Candidates the queue holds before it grows (and the image is detected again).
constexpr int kInitialCandidateCapacity = 1 << 16;
// Detections and keypoints the per-image arrays (tasks, angles, descriptors; pinned and
// device) hold from the first image on, about 5.4 MB of each per stream: a 1080p image has
// a few thousand, so a batch does not reallocate them (each cudaFree or cudaFreeHost waits
// for the whole device, every stream, to go idle).
constexpr size_t kMinKeypointRoom = 1 << 14;

// ---------------------------------------------------------------------------------------
// Device code.

struct BlurTaps {
  int radius;
  float k[kSiftCudaMaxBlurRadius + 1];
};

struct Candidate {
  int octave, layer, x, y;
};

struct GpuDetection {
  int valid;
  int octave, layer, xi, yi;  // refined sample
  int cand_layer, cand_x, cand_y;
  double x, y, layer_offset, response;
};

// Where each octave's planes live in the workspace's DoG and gradient buffers.
struct PyramidView {
  int num_octaves;
  int S;
  int width[kMaxOctaves];
  int height[kMaxOctaves];
  long long dog_offset[kMaxOctaves];   // S + 2 planes from here
  long long grad_offset[kMaxOctaves];  // S planes (layers 1..S) from here
  const float* dog;
  const float* magnitude;
  const float* angle;
  // Largest gradient magnitude of each plane (float bits), index octave * S + layer - 1.
  const unsigned* max_magnitude;
};

struct RefineParams {
  double contrast_threshold;
  double edge_threshold;
};

struct OrientationTask {
  int octave, layer, cx, cy, radius;
  float ox, oy;         // refined position minus (cx, cy)
  float inv_two_sw2;    // 1 / (2 (1.5 sigma_L)^2)
};

struct DescriptorTask {
  int octave, layer, cx, cy, radius;
  int box;  // half-size of the bounding box of the pixels that can vote, <= radius
  float ox, oy;
  float cos_t, sin_t;  // cos and sin of the angle over the bin width
  float angle;
};

__host__ __device__ inline int Reflect101(int i, int n) {
  if (n == 1) return 0;
  while (i < 0 || i >= n) {
    if (i < 0) i = -i;
    if (i >= n) i = 2 * n - 2 - i;
  }
  return i;
}

// out (when not null) = Gaussian blur of in; dog (when not null) = out - in. A kTile x TH
// output tile and its halo are read once into shared memory, blurred along rows there, then
// along columns, in the CPU's order of operations. R (the kernel radius) is a template
// parameter so the tap loops unroll with the taps in registers; TH is 64 for R <= 16 (less
// halo per output row), 32 above. Each thread computes 4 adjacent outputs of a row in the
// row pass and TH / 8 adjacent outputs of a column in the column pass from a window held in
// registers, so each shared-memory value is read once per thread instead of once per tap:
// the row pass reads (4 + 2R) / 4 values per output and the column pass (TH/8 + 2R) /
// (TH/8), instead of 2R + 1 each. The raw tile's row stride is 1 mod 4, so the 4 rows a
// warp reads in the row pass (8 lanes each, 4 floats apart) fall in distinct banks.
// Measured on an H100 (ncu, one 1920 x 1080 level, r = 13): 37 us with a runtime radius
// and 32 x 32 tiles; 42 us with one output per thread per pass; 34 us with the register
// windows; 26 us with the tile's loads in flight together as well.
template <int R>
__host__ __device__ constexpr int BlurTileHeight() {
  return R <= 16 ? 64 : 32;
}

template <int R>
__host__ __device__ constexpr int BlurRawStride() {
  return (kTile + 2 * R) + ((1 - (kTile + 2 * R) % 4) + 4) % 4;  // >= side, 1 mod 4
}

template <int R>
__host__ __device__ constexpr int BlurRawFloats() {
  return ((BlurTileHeight<R>() + 2 * R) * BlurRawStride<R>() + 3) / 4 * 4;  // 16-byte multiple
}

template <int R>
size_t BlurSharedBytes() {
  return sizeof(float) *
         static_cast<size_t>(BlurRawFloats<R>() + (BlurTileHeight<R>() + 2 * R) * kTile);
}

template <int R>
__global__ void __launch_bounds__(kTile * kBlurRows)
    BlurDogKernel(const float* __restrict__ in, float* __restrict__ out, float* __restrict__ dog,
                  int w, int h, BlurTaps taps) {
  constexpr int TH = BlurTileHeight<R>();
  constexpr int side_x = kTile + 2 * R;
  constexpr int side_y = TH + 2 * R;
  constexpr int RS = BlurRawStride<R>();
  constexpr int kRowOut = 4;               // row-pass outputs per thread
  constexpr int kColOut = TH / kBlurRows;  // column-pass outputs per thread
  static_assert(kTile == 32 && kBlurRows == 8, "the row pass maps a warp onto 4 x 8 segments");
  extern __shared__ float4 smem4[];
  float* raw = reinterpret_cast<float*>(smem4);  // side_y x RS
  float* rows = raw + BlurRawFloats<R>();        // side_y x kTile
  const int x0 = blockIdx.x * kTile, y0 = blockIdx.y * TH;
  const int tx = threadIdx.x, ty = threadIdx.y;
  // Loops stride by the block's shape, so no index is divided; borders mirror as the CPU's.
  // All of a thread's loads are issued before the first store (unrolled into registers), so
  // the tile arrives in one memory latency rather than one per row.
  {
    constexpr int kLoadRows = (side_y + kBlurRows - 1) / kBlurRows;
    constexpr int kLoadCols = (side_x + kTile - 1) / kTile;
    float v[kLoadRows][kLoadCols];
#pragma unroll
    for (int a = 0; a < kLoadRows; ++a) {
      const int ry = ty + a * kBlurRows;
      if (ry < side_y) {
        const float* src = in + static_cast<size_t>(Reflect101(y0 + ry - R, h)) * w;
#pragma unroll
        for (int b = 0; b < kLoadCols; ++b) {
          const int rx = tx + b * kTile;
          if (rx < side_x) v[a][b] = src[Reflect101(x0 + rx - R, w)];
        }
      }
    }
#pragma unroll
    for (int a = 0; a < kLoadRows; ++a) {
      const int ry = ty + a * kBlurRows;
#pragma unroll
      for (int b = 0; b < kLoadCols; ++b) {
        const int rx = tx + b * kTile;
        if (ry < side_y && rx < side_x) raw[ry * RS + rx] = v[a][b];
      }
    }
  }
  float k[R + 1];
#pragma unroll
  for (int j = 0; j <= R; ++j) k[j] = taps.k[j];
  __syncthreads();
  {
    // Warp ty covers rows 4 ty .. 4 ty + 3 (+ 32 per round); lane = 8 q + s computes
    // outputs 4 s .. 4 s + 3 of row 4 ty + q.
    const int q = tx >> 3, s = tx & 7;
    for (int ry = 4 * ty + q; ry < side_y; ry += 4 * kBlurRows) {
      const float* p = raw + ry * RS + kRowOut * s;
      float win[kRowOut + 2 * R];
#pragma unroll
      for (int i = 0; i < kRowOut + 2 * R; ++i) win[i] = p[i];
      float acc[kRowOut];
#pragma unroll
      for (int m = 0; m < kRowOut; ++m) {
        float a = k[0] * win[m + R];
#pragma unroll
        for (int j = 1; j <= R; ++j) a += k[j] * (win[m + R - j] + win[m + R + j]);
        acc[m] = a;
      }
      *reinterpret_cast<float4*>(rows + ry * kTile + kRowOut * s) =
          make_float4(acc[0], acc[1], acc[2], acc[3]);
    }
  }
  __syncthreads();
  const int gx = x0 + tx;
  if (gx >= w) return;
  const int oy0 = ty * kColOut;
  if (y0 + oy0 >= h) return;
  const float* c = rows + oy0 * kTile + tx;
  float win[kColOut + 2 * R];
#pragma unroll
  for (int i = 0; i < kColOut + 2 * R; ++i) win[i] = c[i * kTile];
#pragma unroll
  for (int m = 0; m < kColOut; ++m) {
    const int gy = y0 + oy0 + m;
    if (gy < h) {
      float acc = k[0] * win[m + R];
#pragma unroll
      for (int j = 1; j <= R; ++j) acc += k[j] * (win[m + R - j] + win[m + R + j]);
      const size_t o = static_cast<size_t>(gy) * w + gx;
      if (out != nullptr) out[o] = acc;
      if (dog != nullptr) dog[o] = acc - raw[(oy0 + m + R) * RS + tx + R];
    }
  }
}

// Launches BlurDogKernel<taps.radius> (radius 1..kSiftCudaMaxBlurRadius).
struct BlurLauncher {
  using Kernel = void (*)(const float*, float*, float*, int, int, BlurTaps);
  Kernel kernel;
  int tile_height;
  size_t shared_bytes;
};

template <int... Rs>
std::array<BlurLauncher, sizeof...(Rs)> MakeBlurLaunchers(std::integer_sequence<int, Rs...>) {
  return {BlurLauncher{&BlurDogKernel<Rs + 1>, BlurTileHeight<Rs + 1>(), BlurSharedBytes<Rs + 1>()}...};
}

const BlurLauncher& BlurFor(int radius) {
  static const std::array<BlurLauncher, kSiftCudaMaxBlurRadius> launchers =
      MakeBlurLaunchers(std::make_integer_sequence<int, kSiftCudaMaxBlurRadius>());
  return launchers[radius - 1];
}

// Bilinear 2x onto (2w-1) x (2h-1), as Upsample2x in sift.cc.
__global__ void Upsample2xKernel(const float* __restrict__ in, int w, int h,
                                 float* __restrict__ out) {
  const int ow = 2 * w - 1, oh = 2 * h - 1;
  const int ox = blockIdx.x * blockDim.x + threadIdx.x;
  const int oy = blockIdx.y * blockDim.y + threadIdx.y;
  if (ox >= ow || oy >= oh) return;
  const int y0 = oy / 2, y1 = (oy % 2) ? y0 + 1 : y0;
  const int x0 = ox / 2, x1 = (ox % 2) ? x0 + 1 : x0;
  const float* a = in + static_cast<size_t>(y0) * w;
  const float* b = in + static_cast<size_t>(y1) * w;
  out[static_cast<size_t>(oy) * ow + ox] = 0.25f * ((a[x0] + a[x1]) + (b[x0] + b[x1]));
}

__global__ void Downsample2xKernel(const float* __restrict__ in, int w, float* __restrict__ out,
                                   int ow, int oh) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= ow || y >= oh) return;
  out[static_cast<size_t>(y) * ow + x] = in[static_cast<size_t>(2 * y) * w + 2 * x];
}

// Rows each thread of the gradient and detection kernels takes (kBlurRows apart), so that
// a thread's loads are in flight together. Measured on an H100 (ncu, 1920 x 1080, three
// layers): 46 and 42 us, as with one pixel per thread (41 and 42 us): these kernels are not
// latency-bound; fusing them into the blurs is what would save their memory traffic.
constexpr int kRowsPerThread = 4;

// Central-difference gradient of L_1..L_S (blockIdx.z = layer - 1; L_i starts at
// L + i * gauss_stride); zero on the outermost pixels (they never vote). A block covers
// 32 x 32 pixels. The largest magnitude of each layer goes to max_magnitude[layer - 1]
// (float bits; magnitudes are >= 0, so their bits order as the floats do): one atomicMax
// per block, skipped when an earlier block already stored as much. The result is a
// maximum, whatever the order.
__global__ void __launch_bounds__(256)
    GradientKernel(const float* __restrict__ L, size_t gauss_stride, int w, int h,
                   float* __restrict__ magnitude, float* __restrict__ angle,
                   unsigned* __restrict__ max_magnitude) {
  __shared__ unsigned warp_max[8];
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y0 = blockIdx.y * blockDim.y * kRowsPerThread + threadIdx.y;
  const size_t plane = static_cast<size_t>(w) * h;
  const float* src = L + (blockIdx.z + 1) * gauss_stride;
  float dx[kRowsPerThread], dy[kRowsPerThread];
  bool inner[kRowsPerThread];
#pragma unroll
  for (int m = 0; m < kRowsPerThread; ++m) {
    const int y = y0 + m * blockDim.y;
    inner[m] = x > 0 && y > 0 && x < w - 1 && y < h - 1;
    dx[m] = dy[m] = 0.0f;
    if (inner[m]) {
      const size_t i = static_cast<size_t>(y) * w + x;
      dx[m] = src[i + 1] - src[i - 1];
      dy[m] = src[i + w] - src[i - w];
    }
  }
  unsigned mx = 0;
#pragma unroll
  for (int m = 0; m < kRowsPerThread; ++m) {
    const int y = y0 + m * blockDim.y;
    if (x >= w || y >= h) continue;
    const size_t o = blockIdx.z * plane + static_cast<size_t>(y) * w + x;
    if (!inner[m]) {
      magnitude[o] = 0.0f;
      angle[o] = 0.0f;
    } else {
      const float mag = sqrtf(dx[m] * dx[m] + dy[m] * dy[m]);
      magnitude[o] = mag;
      angle[o] = atan2f(dy[m], dx[m]);
      mx = max(mx, __float_as_uint(mag));
    }
  }
  mx = __reduce_max_sync(0xffffffffu, mx);
  const int lane = (threadIdx.y * blockDim.x + threadIdx.x) & 31;
  const int warp = (threadIdx.y * blockDim.x + threadIdx.x) >> 5;
  if (lane == 0) warp_max[warp] = mx;
  __syncthreads();
  if (warp == 0) {
    const int warps = (blockDim.x * blockDim.y + 31) >> 5;
    mx = __reduce_max_sync(0xffffffffu, lane < warps ? warp_max[lane] : 0u);
    unsigned* target = max_magnitude + blockIdx.z;
    if (lane == 0 && mx > *static_cast<volatile unsigned*>(target)) atomicMax(target, mx);
  }
}

// Extrema of D_1..D_S (blockIdx.z = layer - 1) with the CPU's tie rule, appended to the
// queue. A block covers 32 x 32 samples, kRowsPerThread rows per thread whose centre
// values are loaded together. The slot order depends on scheduling; the host sorts the
// refined results.
__device__ __forceinline__ bool IsExtremum(const float* __restrict__ cur, size_t plane, int w,
                                           int x, int y, float v) {
  const float* prev = cur - plane;
  const float* next = cur + plane;
  const float sign = v > 0 ? 1.0f : -1.0f;
  const float sv = sign * v;
  // The CPU's test (strictly beyond the earlier neighbours in (layer, y, x) order, at least
  // equal to the later ones), evaluated same layer first: most pixels fail there. Each
  // group's loads are issued together (in flight at once) before its comparisons.
  // Measured on an H100 (ncu, one 1920 x 1080 image): 40 -> 32 us for octave 0's three
  // layers (91 -> 63 us over all octaves) against a load and a test per neighbour with
  // early exits; batch throughput +3-5% (same run, 16-32 streams).
  {
    float c[9];
#pragma unroll
    for (int k = 0; k < 9; ++k) {
      if (k != 4) c[k] = __ldg(cur + static_cast<size_t>(y + k / 3 - 1) * w + (x + k % 3 - 1));
    }
    bool ok = true;
#pragma unroll
    for (int k = 0; k < 9; ++k) {
      if (k == 4) continue;
      const float n = sign * c[k];
      ok &= k < 4 ? sv > n : sv >= n;
    }
    if (!ok) return false;
  }
  float p[9], q[9];
#pragma unroll
  for (int k = 0; k < 9; ++k) {
    const size_t idx = static_cast<size_t>(y + k / 3 - 1) * w + (x + k % 3 - 1);
    p[k] = __ldg(prev + idx);
    q[k] = __ldg(next + idx);
  }
  bool ok = true;
#pragma unroll
  for (int k = 0; k < 9; ++k) ok &= (sv > sign * p[k]) & (sv >= sign * q[k]);
  return ok;
}

__global__ void DetectKernel(const float* __restrict__ dog, int w, int h, float prefilter,
                             int octave, Candidate* __restrict__ queue, int* __restrict__ count,
                             int capacity) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x + kSiftBorder;
  const int y0 = blockIdx.y * blockDim.y * kRowsPerThread + threadIdx.y + kSiftBorder;
  const int layer = blockIdx.z + 1;
  if (x >= w - kSiftBorder) return;
  const size_t plane = static_cast<size_t>(w) * h;
  const float* cur = dog + layer * plane;
  float v[kRowsPerThread];
#pragma unroll
  for (int m = 0; m < kRowsPerThread; ++m) {
    const int y = y0 + m * blockDim.y;
    v[m] = y < h - kSiftBorder ? cur[static_cast<size_t>(y) * w + x] : 0.0f;
  }
#pragma unroll
  for (int m = 0; m < kRowsPerThread; ++m) {
    const int y = y0 + m * blockDim.y;
    if (y >= h - kSiftBorder || !(fabsf(v[m]) > prefilter)) continue;
    if (!IsExtremum(cur, plane, w, x, y, v[m])) continue;
    const int slot = atomicAdd(count, 1);
    if (slot < capacity) queue[slot] = Candidate{octave, layer, x, y};
  }
}

// SiftCpu::Refine in double, operation for operation (float differences of DoG samples,
// then double), one thread per queued candidate.
// Accepted detections are appended to `out` through count[1] (any order: the host sorts).
__global__ void RefineKernel(PyramidView pyr, RefineParams params,
                             const Candidate* __restrict__ queue, int* __restrict__ count,
                             int capacity, GpuDetection* __restrict__ out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= min(count[0], capacity)) return;
  const Candidate cand = queue[i];
  GpuDetection det;
  det.valid = 0;
  det.octave = cand.octave;
  det.cand_layer = cand.layer;
  det.cand_x = cand.x;
  det.cand_y = cand.y;
  const int S = pyr.S;
  const int o = cand.octave;
  const int w = pyr.width[o], h = pyr.height[o];
  const size_t plane = static_cast<size_t>(w) * h;
  const float* dog = pyr.dog + pyr.dog_offset[o];
  int x = cand.x, y = cand.y, layer = cand.layer;
  double g[3], H[9], off[3];
  double value = 0;
  int prev_x = -1, prev_y = -1, prev_layer = -1;
  bool ok = true;
  for (int moves = 0;; ++moves) {
    const float* prev = dog + (layer - 1) * plane;
    const float* cur = dog + layer * plane;
    const float* next = dog + (layer + 1) * plane;
    auto C = [&](int xx, int yy) { return cur[static_cast<size_t>(yy) * w + xx]; };
    auto P = [&](int xx, int yy) { return prev[static_cast<size_t>(yy) * w + xx]; };
    auto N = [&](int xx, int yy) { return next[static_cast<size_t>(yy) * w + xx]; };
    value = C(x, y);
    g[0] = 0.5 * (C(x + 1, y) - C(x - 1, y));
    g[1] = 0.5 * (C(x, y + 1) - C(x, y - 1));
    g[2] = 0.5 * (N(x, y) - P(x, y));
    const double dxx = (C(x + 1, y) + C(x - 1, y)) - 2.0 * value;
    const double dyy = (C(x, y + 1) + C(x, y - 1)) - 2.0 * value;
    const double dss = (N(x, y) + P(x, y)) - 2.0 * value;
    const double dxy = 0.25 * (C(x + 1, y + 1) - C(x - 1, y + 1) - C(x + 1, y - 1) + C(x - 1, y - 1));
    const double dxs = 0.25 * (N(x + 1, y) - N(x - 1, y) - P(x + 1, y) + P(x - 1, y));
    const double dys = 0.25 * (N(x, y + 1) - N(x, y - 1) - P(x, y + 1) + P(x, y - 1));
    H[0] = dxx; H[1] = dxy; H[2] = dxs;
    H[3] = dxy; H[4] = dyy; H[5] = dys;
    H[6] = dxs; H[7] = dys; H[8] = dss;
    // Inverse by cofactors (what Eigen does for 3x3), with its invertibility threshold.
    const double c00 = H[4] * H[8] - H[5] * H[7];
    const double c01 = H[5] * H[6] - H[3] * H[8];
    const double c02 = H[3] * H[7] - H[4] * H[6];
    const double det3 = H[0] * c00 + H[1] * c01 + H[2] * c02;
    if (!(fabs(det3) > 1e-30)) { ok = false; break; }
    const double inv_det = 1.0 / det3;
    const double i00 = c00 * inv_det;
    const double i01 = (H[2] * H[7] - H[1] * H[8]) * inv_det;
    const double i02 = (H[1] * H[5] - H[2] * H[4]) * inv_det;
    const double i10 = c01 * inv_det;
    const double i11 = (H[0] * H[8] - H[2] * H[6]) * inv_det;
    const double i12 = (H[2] * H[3] - H[0] * H[5]) * inv_det;
    const double i20 = c02 * inv_det;
    const double i21 = (H[1] * H[6] - H[0] * H[7]) * inv_det;
    const double i22 = (H[0] * H[4] - H[1] * H[3]) * inv_det;
    off[0] = -(i00 * g[0] + i01 * g[1] + i02 * g[2]);
    off[1] = -(i10 * g[0] + i11 * g[1] + i12 * g[2]);
    off[2] = -(i20 * g[0] + i21 * g[1] + i22 * g[2]);
    double max_abs = 0;
    bool finite = true;
    for (int k = 0; k < 3; ++k) {
      finite = finite && isfinite(off[k]);
      max_abs = fmax(max_abs, fabs(off[k]));
    }
    if (!finite || max_abs > 1e6) { ok = false; break; }
    const int step_x = fabs(off[0]) > 0.5 ? static_cast<int>(llround(off[0])) : 0;
    const int step_y = fabs(off[1]) > 0.5 ? static_cast<int>(llround(off[1])) : 0;
    const int step_s =
        fabs(off[2]) > 0.5 ? min(max(static_cast<int>(llround(off[2])), 1 - layer), S - layer)
                           : 0;
    const bool converged = step_x == 0 && step_y == 0 && step_s == 0;
    const bool bouncing =
        x + step_x == prev_x && y + step_y == prev_y && layer + step_s == prev_layer;
    if (converged || bouncing) {
      ok = max_abs < 1.0;
      break;
    }
    if (moves == kMaxRefineMoves) { ok = false; break; }
    prev_x = x;
    prev_y = y;
    prev_layer = layer;
    x += step_x;
    y += step_y;
    layer += step_s;
    if (x < kSiftBorder || x >= w - kSiftBorder || y < kSiftBorder || y >= h - kSiftBorder) {
      ok = false;
      break;
    }
  }
  if (ok) {
    const double contrast = value + 0.5 * (g[0] * off[0] + g[1] * off[1] + g[2] * off[2]);
    const double tr = H[0] + H[4];
    const double det2 = H[0] * H[4] - H[1] * H[1];
    const double r = params.edge_threshold;
    if (fabs(contrast) * S < params.contrast_threshold) {
      ok = false;
    } else if (det2 <= 0 || tr * tr * r >= (r + 1) * (r + 1) * det2) {
      ok = false;
    }
    if (ok) {
      det.valid = 1;
      det.layer = layer;
      det.xi = x;
      det.yi = y;
      det.x = x + off[0];
      det.y = y + off[1];
      det.layer_offset = off[2];
      det.response = fabs(contrast);
    }
  }
  if (det.valid) out[atomicAdd(&count[1], 1)] = det;
}

// Histograms are sums of non-negative float votes. Each vote is rounded to a multiple of a
// power-of-two unit and added as a 32-bit unsigned integer with the native shared-memory
// atomic add: integer addition does not depend on order, so the atomics give the same bits
// every run (deterministic) while all threads of a block vote at once. The unit is chosen
// per keypoint so that no bin can overflow: every pixel's votes sum to at most its gradient
// magnitude, so a bin is at most (pixels in the window) x (largest magnitude of the plane,
// kept by GradientKernel); the scale makes that bound <= 2^30 (the roundings of up to 8
// votes per pixel add at most 4 units per pixel, far under the 2^32 - 2^30 left).
// Measured on an H100 (ncu, one 1920 x 1080 image, 4000 keypoints): 64-bit fixed-point
// atomics (compiled to compare-and-swap loops) took 299 us for the descriptors.
// Threads visit the window's pixels in a scattered order (stride coprime with the pixel
// count, about a 32nd of it) so that the lanes of a warp, which would otherwise vote for
// the same bins from neighbouring pixels, seldom collide on an address.
__device__ __forceinline__ void Vote(unsigned* bin, float value, float scale) {
  atomicAdd(bin, __float2uint_rn(value * scale));
}

// The power of two s with pixels * max_magnitude * s <= 2^30 (1 when the bound is 0 or not
// finite: then every vote is 0, or the input was not finite to begin with).
__device__ __forceinline__ float VoteScale(int pixels, float max_magnitude) {
  const float bound = static_cast<float>(pixels) * max_magnitude;
  if (!(bound > 0.0f) || !(bound < 3.0e38f)) return 1.0f;
  int e = 0;
  frexpf(1073741824.0f / bound, &e);  // 2^30 / bound = m 2^e, m in [0.5, 1)
  return ldexpf(1.0f, min(e - 1, 120));
}

__device__ __forceinline__ int Gcd(int a, int b) {
  while (b != 0) {
    const int t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// An odd stride near n / 32 with gcd(stride, n) == 1 (so p -> p * stride mod n permutes).
__device__ __forceinline__ int ScatterStride(int n) {
  int stride = (n / 32) | 1;
  while (Gcd(stride, n) != 1) stride += 2;
  return stride;
}

// p = (k * stride) mod n for k = first, first + step_k, ..., without a division per step.
struct ScatterWalk {
  int p, step, n;
  __device__ ScatterWalk(int first, int step_k, int stride, int count) {
    n = count;
    p = static_cast<int>((static_cast<long long>(first) * stride) % n);
    step = static_cast<int>((static_cast<long long>(step_k) * stride) % n);
  }
  __device__ __forceinline__ void Next() {
    p += step;
    if (p >= n) p -= n;
  }
};

// Offsets (i, j) in [-r, r]^2 of the row-major index p of a (2r + 1)^2 window, without an
// integer division: the row comes from a float reciprocal, corrected when it is off by one
// (it is exact for any window that fits a GPU).
__device__ __forceinline__ void WindowOffsets(int p, int side, float inv_side, int r, int* i,
                                              int* j) {
  int row = static_cast<int>((static_cast<float>(p) + 0.5f) * inv_side);
  int col = p - row * side;
  if (col < 0) {
    --row;
    col += side;
  } else if (col >= side) {
    ++row;
    col -= side;
  }
  *i = col - r;
  *j = row - r;
}

// Calls vote(i, j, magnitude, angle) for every pixel (cx + i, cy + j), |i|, |j| <= r, of the
// window that lies in [1, w - 1) x [1, h - 1), from all threads of the block, in a
// scattered order (see Vote()), reading the gradients straight from global memory (the
// L1 cache serves most of a warp's neighbouring loads).
// Measured on an H100 (one 1920 x 1080 image, 4000 keypoints): 163 us for the descriptors
// and 45 us for the orientations when the window was first copied into shared memory
// (coalesced, 2048 pixels at a time: barriers, index arithmetic and 16 KiB of shared memory
// per block) against 128 and 34 us this way (ncu); in the batch throughput, once the host
// costs were cut, 2,110 against 1,993 images/s (24 streams, same run).
// Starts and ends with __syncthreads(): the caller's shared state before is visible to
// vote, and the votes are complete after.
template <int kThreads, typename VoteFn>
__device__ __forceinline__ void ForWindowPixels(const float* __restrict__ mag,
                                                const float* __restrict__ ang, int w, int h,
                                                int cx, int cy, int r, VoteFn vote) {
  const int side = 2 * r + 1, total = side * side;
  const float inv_side = 1.0f / static_cast<float>(side);
  const int tid = threadIdx.x;
  __syncthreads();
  ScatterWalk walk(tid, kThreads, ScatterStride(total), total);
  for (int k = tid; k < total; k += kThreads, walk.Next()) {
    int i, j;
    WindowOffsets(walk.p, side, inv_side, r, &i, &j);
    const int py = cy + j, px = cx + i;
    if (py < 1 || py >= h - 1 || px < 1 || px >= w - 1) continue;
    const size_t idx = static_cast<size_t>(py) * w + px;
    vote(i, j, __ldg(mag + idx), __ldg(ang + idx));
  }
  __syncthreads();
}

// One block per detection: 36-bin orientation histogram, [1 4 6 4 1] smoothing, peaks
// >= 80% of the highest, parabolic refinement (as SiftCpu::Orientations).
__global__ void __launch_bounds__(kOrientationThreads)
    OrientationKernel(PyramidView pyr, const OrientationTask* __restrict__ tasks,
                      float* __restrict__ angles, int* __restrict__ num_angles) {
  constexpr int n = kOrientationBins;
  __shared__ unsigned hist[n];
  const OrientationTask t = tasks[blockIdx.x];
  const int tid = threadIdx.x;
  const int r = t.radius, total = (2 * r + 1) * (2 * r + 1);
  if (tid < n) hist[tid] = 0;
  const int w = pyr.width[t.octave], h = pyr.height[t.octave];
  const size_t plane_off =
      pyr.grad_offset[t.octave] + static_cast<size_t>(t.layer - 1) * w * h;
  const float bin_scale = static_cast<float>(n / kTwoPi);
  const float scale =
      VoteScale(total, __uint_as_float(pyr.max_magnitude[t.octave * pyr.S + t.layer - 1]));
  auto vote = [&](int i, int j, float m, float a) {
    if (i * i + j * j > r * r) return;
    const float dx = i - t.ox, dy = j - t.oy;
    const float weight = expf(-(dx * dx + dy * dy) * t.inv_two_sw2) * m;
    float bin = a * bin_scale;
    if (bin < 0) bin += n;
    const float b0 = floorf(bin);
    const float frac = bin - b0;
    const int i0 = static_cast<int>(b0) % n;
    Vote(&hist[i0], weight * (1.0f - frac), scale);
    Vote(&hist[(i0 + 1) % n], weight * frac, scale);
  };
  ForWindowPixels<kOrientationThreads>(pyr.magnitude + plane_off, pyr.angle + plane_off, w, h,
                                       t.cx, t.cy, r, vote);
  if (tid != 0) return;
  float total_votes[n];
  const float unit = 1.0f / scale;  // a power of two: exact
  for (int b = 0; b < n; ++b) total_votes[b] = __uint2float_rn(hist[b]) * unit;
  float smooth[n];
  for (int i = 0; i < n; ++i) {
    smooth[i] = (total_votes[(i + n - 2) % n] + total_votes[(i + 2) % n]) * (1.0f / 16) +
                (total_votes[(i + n - 1) % n] + total_votes[(i + 1) % n]) * (4.0f / 16) +
                total_votes[i] * (6.0f / 16);
  }
  float peak = smooth[0];
  for (int i = 1; i < n; ++i) peak = fmaxf(peak, smooth[i]);
  int count = 0;
  if (peak > 0) {
    for (int i = 0; i < n; ++i) {
      const float l = smooth[(i + n - 1) % n], c = smooth[i], rr = smooth[(i + 1) % n];
      if (c > l && c > rr && c >= kOrientationPeakRatio * peak) {
        const float offset = 0.5f * (l - rr) / (l - 2.0f * c + rr);
        float a = (i + offset) * (kTwoPiF / n);
        if (a < 0) a += kTwoPiF;
        if (a >= kTwoPiF) a -= kTwoPiF;
        angles[blockIdx.x * kMaxPeaks + count++] = a;
      }
    }
  }
  num_angles[blockIdx.x] = count;
}

// One block per keypoint: the 4 x 4 x 8 descriptor with trilinear votes (as
// SiftCpu::Descriptor), over the window's bounding box (task.box <= task.radius: pixels
// outside it fail the bin test in any case), normalised, clipped, quantised.
__global__ void __launch_bounds__(kDescriptorThreads)
    DescriptorKernel(PyramidView pyr, const DescriptorTask* __restrict__ tasks, int root_sift,
                     uint8_t* __restrict__ out) {
  constexpr int d = kDescriptorWidth, nb = kDescriptorBins, n = kDescriptorSize;
  __shared__ unsigned hist[n];
  __shared__ float v[n];
  const DescriptorTask t = tasks[blockIdx.x];
  const int tid = threadIdx.x;
  const int r = t.box, total = (2 * r + 1) * (2 * r + 1);
  for (int b = tid; b < n; b += kDescriptorThreads) hist[b] = 0;
  const int w = pyr.width[t.octave], h = pyr.height[t.octave];
  const size_t plane_off =
      pyr.grad_offset[t.octave] + static_cast<size_t>(t.layer - 1) * w * h;
  const float inv_two_sigma2 = 1.0f / (2.0f * (0.5f * d) * (0.5f * d));
  const float obin_scale = static_cast<float>(nb / kTwoPi);
  const float scale =
      VoteScale(total, __uint_as_float(pyr.max_magnitude[t.octave * pyr.S + t.layer - 1]));
  auto vote = [&](int i, int j, float m, float a) {
    const float dx = i - t.ox, dy = j - t.oy;
    const float rx = t.cos_t * dx + t.sin_t * dy;
    const float ry = -t.sin_t * dx + t.cos_t * dy;
    const float cbin = rx + 0.5f * d - 0.5f;
    const float rbin = ry + 0.5f * d - 0.5f;
    if (rbin <= -1 || rbin >= d || cbin <= -1 || cbin >= d) return;
    const float weight = expf(-(rx * rx + ry * ry) * inv_two_sigma2) * m;
    float rel = a - t.angle;
    rel -= kTwoPiF * floorf(rel / kTwoPiF);
    float obin = rel * obin_scale;
    if (obin >= nb) obin -= nb;
    const int r0 = static_cast<int>(floorf(rbin));
    const int c0 = static_cast<int>(floorf(cbin));
    const int o0 = static_cast<int>(floorf(obin));
    const float fr = rbin - r0, fc = cbin - c0, fo = obin - o0;
    for (int ea = 0; ea < 2; ++ea) {
      const int rr = r0 + ea;
      if (rr < 0 || rr >= d) continue;
      const float wr = weight * (ea ? fr : 1.0f - fr);
      for (int eb = 0; eb < 2; ++eb) {
        const int cc = c0 + eb;
        if (cc < 0 || cc >= d) continue;
        const float wc = wr * (eb ? fc : 1.0f - fc);
        unsigned* cell = &hist[(rr * d + cc) * nb];
        Vote(&cell[o0 % nb], wc * (1.0f - fo), scale);
        Vote(&cell[(o0 + 1) % nb], wc * fo, scale);
      }
    }
  };
  ForWindowPixels<kDescriptorThreads>(pyr.magnitude + plane_off, pyr.angle + plane_off, w, h,
                                      t.cx, t.cy, r, vote);
  const float unit = 1.0f / scale;  // a power of two: exact
  for (int b = tid; b < n; b += kDescriptorThreads) v[b] = __uint2float_rn(hist[b]) * unit;
  __syncthreads();
  // Normalisation by one warp in a fixed order (deterministic).
  if (tid < 32) {
    float s = 0.0f;
    for (int k = 0; k < n / 32; ++k) s += v[tid * (n / 32) + k] * v[tid * (n / 32) + k];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    const float norm2 = __shfl_sync(0xffffffffu, s, 0);
    if (norm2 > 0) {
      const float clip = kDescriptorClip * sqrtf(norm2);
      float s2 = 0.0f;
      for (int k = 0; k < n / 32; ++k) {
        const int b = tid * (n / 32) + k;
        v[b] = fminf(v[b], clip);
        s2 += v[b] * v[b];
      }
      for (int o = 16; o > 0; o >>= 1) s2 += __shfl_down_sync(0xffffffffu, s2, o);
      const float inv = 1.0f / sqrtf(__shfl_sync(0xffffffffu, s2, 0));
      for (int k = 0; k < n / 32; ++k) v[tid * (n / 32) + k] *= inv;
      if (root_sift) {
        float l1 = 0.0f;
        for (int k = 0; k < n / 32; ++k) l1 += v[tid * (n / 32) + k];
        for (int o = 16; o > 0; o >>= 1) l1 += __shfl_down_sync(0xffffffffu, l1, o);
        l1 = __shfl_sync(0xffffffffu, l1, 0);
        for (int k = 0; k < n / 32; ++k) v[tid * (n / 32) + k] = sqrtf(v[tid * (n / 32) + k] / l1);
      }
    }
    __syncwarp();
    uint8_t* dst = out + static_cast<size_t>(blockIdx.x) * n;
    for (int k = 0; k < n / 32; ++k) {
      const int b = tid * (n / 32) + k;
      const float q = rintf(kDescriptorQuantScale * v[b]);
      dst[b] = static_cast<uint8_t>(fminf(255.0f, fmaxf(0.0f, q)));
    }
  }
}

// ---------------------------------------------------------------------------------------
// Host side.

// Allocation failures of the workspace name CUDA SIFT and what the user can do.
Status SiftAllocation(Status s) {
  if (s.ok()) return s;
  return Status(s.code(), "CUDA SIFT: " + s.message() +
                              (s.code() == StatusCode::kOutOfMemory
                                   ? "; use fewer cuda streams, smaller images or --device cpu"
                                   : ""));
}

// Device buffers of the workspace (io/base/cuda_buffer.h). Grow: for arrays whose size
// changes from image to image.
template <typename T>
class DeviceArray : public DeviceBuffer<T> {
 public:
  Status Reserve(size_t n, const char* what) { return SiftAllocation(DeviceBuffer<T>::Reserve(n, what)); }
  Status Grow(size_t n, const char* what) { return SiftAllocation(DeviceBuffer<T>::Grow(n, what)); }
};

// Pinned staging buffers: they grow by half again (slowly growing counts do not
// reallocate every image).
template <typename T>
class PinnedArray : public PinnedBuffer<T> {
 public:
  Status Reserve(size_t n, const char* what) { return SiftAllocation(PinnedBuffer<T>::Grow(n, what)); }
};

// The CPU reference's Gaussian taps (sift.cc GaussianBlur), as floats.
BlurTaps MakeTaps(double sigma) {
  BlurTaps taps;
  const int r = std::max(1, static_cast<int>(std::ceil(4.0 * sigma)));
  taps.radius = r;
  std::vector<float> k(r + 1);
  double sum = 0;
  for (int i = 0; i <= r; ++i) {
    const double v = std::exp(-0.5 * i * i / (sigma * sigma));
    k[i] = static_cast<float>(v);
    sum += i == 0 ? v : 2 * v;
  }
  for (float& v : k) v = static_cast<float>(v / sum);
  std::fill(std::begin(taps.k), std::end(taps.k), 0.0f);
  for (int i = 0; i <= r && i <= kSiftCudaMaxBlurRadius; ++i) taps.k[i] = k[i];
  return taps;
}

// Copies n floats into pinned staging memory with non-temporal stores where the CPU has
// them: the staging pages are read next by the DMA engine, not by the CPU, so writing them
// around the caches saves reading them in first (a third of the host memory traffic of the
// copy) and keeps the image from evicting other threads' data.
void CopyToStaging(float* dst, const float* src, size_t n) {
#if defined(__SSE2__)
  size_t i = 0;
  for (; i < n && (reinterpret_cast<uintptr_t>(dst + i) & 15) != 0; ++i) dst[i] = src[i];
  for (; i + 16 <= n; i += 16) {
    const __m128 a = _mm_loadu_ps(src + i), b = _mm_loadu_ps(src + i + 4);
    const __m128 c = _mm_loadu_ps(src + i + 8), d = _mm_loadu_ps(src + i + 12);
    _mm_stream_ps(dst + i, a);
    _mm_stream_ps(dst + i + 4, b);
    _mm_stream_ps(dst + i + 8, c);
    _mm_stream_ps(dst + i + 12, d);
  }
  for (; i < n; ++i) dst[i] = src[i];
  _mm_sfence();  // the streamed stores are visible before the copy is queued
#else
  std::memcpy(dst, src, n * sizeof(float));
#endif
}

int BlurRadius(double sigma) { return std::max(1, static_cast<int>(std::ceil(4.0 * sigma))); }

dim3 Grid2d(int w, int h, dim3 block) {
  return dim3((w + block.x - 1) / block.x, (h + block.y - 1) / block.y);
}

// Packs (octave, layer, row, column) into an integer that orders as the tuple does.
// Sides are < 2^17 (65535 px upsampled), octaves < 2^5 (kMaxOctaves), layers <= 13 < 2^4.
inline uint64_t SampleKey(int octave, int layer, int y, int x) {
  return (static_cast<uint64_t>(octave) << 38) | (static_cast<uint64_t>(layer) << 34) |
         (static_cast<uint64_t>(y) << 17) | static_cast<uint64_t>(x);
}
static_assert(kMaxOctaves <= 32, "SampleKey holds 5 bits of octave");

// The valid detections of in[0, count) in (octave, layer, row, column) order of the refined
// sample, one per sample: the first in (octave, candidate layer, row, column) order.
void SortDetections(const GpuDetection* in, int count, std::vector<GpuDetection>* out) {
  struct Entry {
    uint64_t key, scan;
    int index;
  };
  std::vector<Entry> entries;
  entries.reserve(count);
  for (int i = 0; i < count; ++i) {
    const GpuDetection& d = in[i];
    if (!d.valid) continue;
    entries.push_back({SampleKey(d.octave, d.layer, d.yi, d.xi),
                       SampleKey(d.octave, d.cand_layer, d.cand_y, d.cand_x), i});
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.key != b.key ? a.key < b.key : a.scan < b.scan;
  });
  out->clear();
  out->reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0 && entries[i].key == entries[i - 1].key) continue;
    out->push_back(in[entries[i].index]);
  }
}

// The indices of the k entries with the largest response[i] (ties: lower index first), in
// increasing order: what a stable sort by decreasing response, cut to k and sorted by index
// gives, in linear time (0.2 instead of 1.7 ms per 1080p image on the H100 machine's
// host, 24 streams). k < n.
std::vector<int> StrongestInOrder(const std::vector<double>& response, int k) {
  std::vector<double> sorted(response);
  for (double& r : sorted) {
    if (!(r == r)) r = -HUGE_VAL;  // no NaN in the selection's comparisons
  }
  std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(),
                   std::greater<double>());
  const double threshold = sorted[k - 1];
  int above = 0;
  for (double r : sorted) above += r > threshold;
  int ties = k - above;  // entries equal to the threshold to keep, the first ones
  std::vector<int> kept;
  kept.reserve(k);
  for (int i = 0; i < static_cast<int>(response.size()); ++i) {
    const double r = response[i] == response[i] ? response[i] : -HUGE_VAL;
    if (r > threshold || (r == threshold && ties-- > 0)) kept.push_back(i);
  }
  return kept;
}

// Everything one image in flight needs: a stream, device pyramid, queues, pinned staging.
class SiftCudaWorker {
 public:
  SiftCudaWorker(const SiftOptions& options, int device) : options_(options), device_(device) {}
  ~SiftCudaWorker() {
    if (graph_exec_ != nullptr) cudaGraphExecDestroy(graph_exec_);
    if (done_ != nullptr) cudaEventDestroy(done_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  Status Extract(const GrayImage& image, Features* features);
  // The next Extract's threshold (the captured graph is keyed on it too).
  void SetContrastThreshold(double t) { options_.contrast_threshold = t; }

 private:
  Status Init();
  Status Pyramid(const SiftScaleSpacePlan& plan, const GrayImage& image);
  Status PyramidKernels(const SiftScaleSpacePlan& plan, const GrayImage& image);
  Status Wait();

  SiftOptions options_;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t done_ = nullptr;
  cudaGraphExec_t graph_exec_ = nullptr;
  std::array<long long, 17> graph_key_{};

  DeviceArray<float> d_image_, d_upsampled_, d_gauss_, d_dog_, d_magnitude_, d_angle_;
  DeviceArray<Candidate> d_queue_;
  DeviceArray<GpuDetection> d_detections_;
  DeviceArray<int> d_count_;
  DeviceArray<unsigned> d_max_magnitude_;
  DeviceArray<OrientationTask> d_orientation_tasks_;
  DeviceArray<float> d_angles_;
  DeviceArray<int> d_num_angles_;
  DeviceArray<DescriptorTask> d_descriptor_tasks_;
  DeviceArray<uint8_t> d_descriptors_;

  PinnedArray<float> h_image_;
  PinnedArray<int> h_count_;
  PinnedArray<GpuDetection> h_detections_;
  PinnedArray<OrientationTask> h_orientation_tasks_;
  PinnedArray<float> h_angles_;
  PinnedArray<int> h_num_angles_;
  PinnedArray<DescriptorTask> h_descriptor_tasks_;
  PinnedArray<uint8_t> h_descriptors_;

  PyramidView view_{};
  int candidate_capacity_ = kInitialCandidateCapacity;
  size_t detections_guess_ = 0;
};

Status SiftCudaWorker::Init() {
  // Every call: the calling thread may be new (ExtractBatch starts threads per batch).
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  if (stream_ != nullptr) return Status::Ok();
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  TIEPOINT_CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&done_, cudaEventBlockingSync | cudaEventDisableTiming));
  // The widest blur tiles need more than the default 48 KiB of shared memory.
  for (int r = 1; r <= kSiftCudaMaxBlurRadius; ++r) {
    const BlurLauncher& l = BlurFor(r);
    if (l.shared_bytes > 48 * 1024) {
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
          l.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(l.shared_bytes)));
    }
  }
  return Status::Ok();
}

// Waits for the stream's work so far on an event created with cudaEventBlockingSync: the
// thread sleeps instead of spinning (cudaStreamSynchronize spins with the default flags,
// and with cuda_streams threads waiting at once the spinning took the cores that the other
// threads' host work needs: 8.6 ms of CPU per 1080p image against 5.5 with sleeping
// waits, measured on the H100 machine's 16 cores with 24 streams).
Status SiftCudaWorker::Wait() {
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(done_, stream_));
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(done_));
  return Status::Ok();
}

// Builds the DoG pyramid and gradients of every octave and fills the candidate queue.
Status SiftCudaWorker::Pyramid(const SiftScaleSpacePlan& plan, const GrayImage& image) {
  const int w0 = plan.base_width, h0 = plan.base_height, num_octaves = plan.num_octaves;
  const int S = options_.octave_layers;
  const size_t base_pixels = static_cast<size_t>(w0) * h0;
  view_.num_octaves = num_octaves;
  view_.S = S;
  long long total = 0;
  for (int o = 0, w = w0, h = h0; o < num_octaves; ++o, w = (w + 1) / 2, h = (h + 1) / 2) {
    view_.width[o] = w;
    view_.height[o] = h;
    view_.dog_offset[o] = total * (S + 2);
    view_.grad_offset[o] = total * S;
    total += static_cast<long long>(w) * h;
  }
  const std::string size = std::to_string(image.width) + " x " + std::to_string(image.height);
  const std::string pyr_what = "the pyramid of a " + size + " image";
  TIEPOINT_RETURN_IF_ERROR(d_image_.Reserve(image.pixels.size(), "the input image"));
  if (options_.upsample) {
    TIEPOINT_RETURN_IF_ERROR(d_upsampled_.Reserve(base_pixels, pyr_what.c_str()));
  }
  TIEPOINT_RETURN_IF_ERROR(d_gauss_.Reserve(base_pixels * (S + 3), pyr_what.c_str()));
  TIEPOINT_RETURN_IF_ERROR(d_dog_.Reserve(static_cast<size_t>(total) * (S + 2), pyr_what.c_str()));
  TIEPOINT_RETURN_IF_ERROR(d_magnitude_.Reserve(static_cast<size_t>(total) * S, pyr_what.c_str()));
  TIEPOINT_RETURN_IF_ERROR(d_angle_.Reserve(static_cast<size_t>(total) * S, pyr_what.c_str()));
  TIEPOINT_RETURN_IF_ERROR(d_count_.Reserve(2, "counters"));
  TIEPOINT_RETURN_IF_ERROR(
      d_max_magnitude_.Reserve(static_cast<size_t>(num_octaves) * S, "magnitude maxima"));
  TIEPOINT_RETURN_IF_ERROR(d_queue_.Reserve(candidate_capacity_, "the candidate queue"));
  TIEPOINT_RETURN_IF_ERROR(d_detections_.Reserve(candidate_capacity_, "the detections"));
  view_.dog = d_dog_.get();
  view_.magnitude = d_magnitude_.get();
  view_.angle = d_angle_.get();
  view_.max_magnitude = d_max_magnitude_.get();

  // Upload through pinned memory (the copy is asynchronous only from pinned pages).
  TIEPOINT_RETURN_IF_ERROR(h_image_.Reserve(image.pixels.size(), "the image upload"));
  // In chunks, so that copying one chunk into pinned memory overlaps the DMA of the last.
  const size_t num_pixels = image.pixels.size();
  const size_t chunk = std::max<size_t>(kUploadChunkPixels, (num_pixels + 7) / 8);
  for (size_t begin = 0; begin < num_pixels; begin += chunk) {
    const size_t n = std::min(chunk, num_pixels - begin);
    CopyToStaging(h_image_.get() + begin, image.pixels.data() + begin, n);
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_image_.get() + begin, h_image_.get() + begin,
                                                  n * sizeof(float), cudaMemcpyHostToDevice,
                                                  stream_));
  }
  // The kernels (about 55 for a 1080p image) as one CUDA graph, captured once per image
  // size and workspace and replayed: one launch call per image instead of one per kernel
  // (less host time, and less contention between the threads launching into their streams).
  auto bits = [](const void* p) { return static_cast<long long>(reinterpret_cast<uintptr_t>(p)); };
  long long threshold_bits = 0;
  static_assert(sizeof(threshold_bits) == sizeof(options_.contrast_threshold), "64-bit double");
  std::memcpy(&threshold_bits, &options_.contrast_threshold, sizeof(threshold_bits));
  const std::array<long long, 17> key = {
      w0, h0, num_octaves, candidate_capacity_, image.width, image.height,
      bits(d_image_.get()), bits(d_upsampled_.get()), bits(d_gauss_.get()), bits(d_dog_.get()),
      bits(d_magnitude_.get()), bits(d_angle_.get()), bits(d_count_.get()),
      bits(d_max_magnitude_.get()), bits(d_queue_.get()), bits(d_detections_.get()),
      threshold_bits};  // the detection and refinement kernels' prefilter and threshold
  if (graph_exec_ == nullptr || key != graph_key_) {
    if (graph_exec_ != nullptr) cudaGraphExecDestroy(graph_exec_);
    graph_exec_ = nullptr;
    TIEPOINT_CUDA_RETURN_IF_ERROR(
        cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    const Status launched = PyramidKernels(plan, image);
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
    TIEPOINT_RETURN_IF_ERROR(launched);
    TIEPOINT_CUDA_RETURN_IF_ERROR(ended);
    const cudaError_t made = cudaGraphInstantiate(&graph_exec_, graph, 0);
    cudaGraphDestroy(graph);
    TIEPOINT_CUDA_RETURN_IF_ERROR(made);
    graph_key_ = key;
  }
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graph_exec_, stream_));
  return Status::Ok();
}

Status SiftCudaWorker::PyramidKernels(const SiftScaleSpacePlan& plan, const GrayImage& image) {
  const int w0 = plan.base_width, h0 = plan.base_height, num_octaves = plan.num_octaves;
  const int S = options_.octave_layers;
  const size_t base_pixels = static_cast<size_t>(w0) * h0;
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_count_.get(), 0, 2 * sizeof(int), stream_));
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(
      d_max_magnitude_.get(), 0, sizeof(unsigned) * num_octaves * S, stream_));

  const std::vector<double>& blurs = plan.blurs;

  const dim3 block2d(32, 8);
  const dim3 blur_block(kTile, kBlurRows);
  auto blur = [&](const float* in, float* out, float* dog, int w, int h,
                  const BlurTaps& taps) -> Status {
    const BlurLauncher& l = BlurFor(taps.radius);
    const dim3 grid((w + kTile - 1) / kTile, (h + l.tile_height - 1) / l.tile_height);
    l.kernel<<<grid, blur_block, l.shared_bytes, stream_>>>(in, out, dog, w, h, taps);
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return Status::Ok();
  };
  float* gauss = d_gauss_.get();
  auto G = [&](int i) { return gauss + static_cast<size_t>(i) * base_pixels; };

  const float* base_in = d_image_.get();
  if (options_.upsample) {
    Upsample2xKernel<<<Grid2d(w0, h0, block2d), block2d, 0, stream_>>>(
        d_image_.get(), image.width, image.height, d_upsampled_.get());
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    base_in = d_upsampled_.get();
  }
  TIEPOINT_RETURN_IF_ERROR(blur(base_in, G(0), nullptr, w0, h0, MakeTaps(blurs[0])));
  std::vector<BlurTaps> taps(S + 3);
  for (int i = 1; i < S + 3; ++i) taps[i] = MakeTaps(blurs[i]);
  const float prefilter = static_cast<float>(0.5 * options_.contrast_threshold / S);
  for (int o = 0; o < num_octaves; ++o) {
    const int w = view_.width[o], h = view_.height[o];
    const size_t plane = static_cast<size_t>(w) * h;
    float* dog = d_dog_.get() + view_.dog_offset[o];
    for (int i = 1; i < S + 3; ++i) {
      // The last level L_{S+2} only makes D_{S+1}: nothing reads it, so it is not stored
      // (8.3 MB less written per 1080p image; alone, within the noise of the throughput).
      float* level = i < S + 2 ? G(i) : nullptr;
      TIEPOINT_RETURN_IF_ERROR(blur(G(i - 1), level, dog + (i - 1) * plane, w, h, taps[i]));
    }
    {
      dim3 grid = Grid2d(w, h, dim3(block2d.x, block2d.y * kRowsPerThread));
      grid.z = S;
      GradientKernel<<<grid, block2d, 0, stream_>>>(G(0), base_pixels, w, h,
                                                    d_magnitude_.get() + view_.grad_offset[o],
                                                    d_angle_.get() + view_.grad_offset[o],
                                                    d_max_magnitude_.get() + o * S);
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    }
    const int iw = w - 2 * kSiftBorder, ih = h - 2 * kSiftBorder;
    if (iw > 0 && ih > 0) {
      dim3 grid = Grid2d(iw, ih, dim3(block2d.x, block2d.y * kRowsPerThread));
      grid.z = S;
      DetectKernel<<<grid, block2d, 0, stream_>>>(dog, w, h, prefilter, o, d_queue_.get(),
                                                  d_count_.get(), candidate_capacity_);
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    }
    if (o + 1 < num_octaves) {
      const int nw = view_.width[o + 1], nh = view_.height[o + 1];
      Downsample2xKernel<<<Grid2d(nw, nh, block2d), block2d, 0, stream_>>>(G(S), w, G(0), nw,
                                                                           nh);
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    }
  }
  const RefineParams params{options_.contrast_threshold, options_.edge_threshold};
  RefineKernel<<<(candidate_capacity_ + 127) / 128, 128, 0, stream_>>>(
      view_, params, d_queue_.get(), d_count_.get(), candidate_capacity_, d_detections_.get());
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::Ok();
}

Status SiftCudaWorker::Extract(const GrayImage& image, Features* features) {
  if (image.width < 0 || image.height < 0 ||
      image.pixels.size() != static_cast<size_t>(image.width) * image.height) {
    return Status::InvalidInput("SIFT: image of " + std::to_string(image.width) + " x " +
                                std::to_string(image.height) + " pixels holds " +
                                std::to_string(image.pixels.size()) + " values");
  }
  TIEPOINT_RETURN_IF_ERROR(Init());
  const int S = options_.octave_layers;
  Features result;
  result.contrast_threshold = options_.contrast_threshold;  // one threshold, no lowering
  const SiftScaleSpacePlan plan = PlanSiftScaleSpace(options_, image.width, image.height);
  const int num_octaves = plan.num_octaves;
  if (num_octaves == 0) {
    *features = std::move(result);
    return Status::Ok();
  }
  if (num_octaves > kMaxOctaves) {
    return Status::InvalidInput("CUDA SIFT: an image of " + std::to_string(image.width) + " x " +
                                std::to_string(image.height) + " needs more than " +
                                std::to_string(kMaxOctaves) + " octaves");
  }

  // Detection and refinement; again with a larger queue when it overflowed (rare: the
  // queue starts at 65536 candidates), so the result never depends on the capacity.
  // The count comes back with a guess of the detections (the last image's count and a
  // quarter more), so that one wait usually brings both.
  int count = 0;
  size_t guessed = 0;
  for (;;) {
    TIEPOINT_RETURN_IF_ERROR(Pyramid(plan, image));
    TIEPOINT_RETURN_IF_ERROR(h_count_.Reserve(2, "counters"));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(h_count_.get(), d_count_.get(), 2 * sizeof(int),
                                                  cudaMemcpyDeviceToHost, stream_));
    guessed = std::min<size_t>(candidate_capacity_, detections_guess_);
    if (guessed > 0) {
      TIEPOINT_RETURN_IF_ERROR(
          h_detections_.Reserve(std::max(guessed, kMinKeypointRoom), "the detections"));
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(h_detections_.get(), d_detections_.get(),
                                                    sizeof(GpuDetection) * guessed,
                                                    cudaMemcpyDeviceToHost, stream_));
    }
    TIEPOINT_RETURN_IF_ERROR(Wait());
    if (h_count_.get()[0] <= candidate_capacity_) break;
    candidate_capacity_ = h_count_.get()[0] + h_count_.get()[0] / 4;
  }
  count = h_count_.get()[1];  // accepted detections
  detections_guess_ = static_cast<size_t>(count) + count / 4 + 64;
  if (static_cast<size_t>(count) > guessed) {
    // The guess fell short: the staging buffer may be reallocated, so copy all of them.
    TIEPOINT_RETURN_IF_ERROR(h_detections_.Reserve(count, "the detections"));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(h_detections_.get(), d_detections_.get(),
                                                  sizeof(GpuDetection) * count,
                                                  cudaMemcpyDeviceToHost, stream_));
    TIEPOINT_RETURN_IF_ERROR(Wait());
  }

  // The CPU's order: (octave, layer, row, column) of the refined sample; of detections
  // refined onto the same sample the first in scan order is kept. Detections refined onto
  // the same sample are equal in every field but the candidate's (refinement ends with
  // the same computation at that sample), so which one is kept does not change the output;
  // the scan order only makes the choice independent of the atomics' order.
  // Sorted as packed 64-bit keys (octave: 5 bits, layer: 4, row and column: 17 each)
  // instead of tuples of the 64-byte records: 0.4 instead of 1.2 ms per 1080p image on the
  // H100 machine's host (24 streams).
  std::vector<GpuDetection> dets;
  SortDetections(h_detections_.get(), count, &dets);
  const int num_dets = static_cast<int>(dets.size());
  if (num_dets == 0) {
    *features = std::move(result);
    return Status::Ok();
  }
  auto lowe_sigma = [&](const GpuDetection& d) {
    return options_.sigma * std::pow(2.0, (d.layer + d.layer_offset) / S);
  };

  // Orientations, one block per detection.
  const size_t det_room = std::max<size_t>(num_dets, kMinKeypointRoom);
  TIEPOINT_RETURN_IF_ERROR(h_orientation_tasks_.Reserve(det_room, "orientation tasks"));
  TIEPOINT_RETURN_IF_ERROR(d_orientation_tasks_.Grow(det_room, "orientation tasks"));
  TIEPOINT_RETURN_IF_ERROR(h_angles_.Reserve(det_room * kMaxPeaks, "angles"));
  TIEPOINT_RETURN_IF_ERROR(d_angles_.Grow(det_room * kMaxPeaks, "angles"));
  TIEPOINT_RETURN_IF_ERROR(h_num_angles_.Reserve(det_room, "angle counts"));
  TIEPOINT_RETURN_IF_ERROR(d_num_angles_.Grow(det_room, "angle counts"));
  for (int i = 0; i < num_dets; ++i) {
    const GpuDetection& d = dets[i];
    const double sw = kOrientationSigmaFactor * lowe_sigma(d);
    OrientationTask& t = h_orientation_tasks_.get()[i];
    t.octave = d.octave;
    t.layer = d.layer;
    t.cx = static_cast<int>(std::lround(d.x));
    t.cy = static_cast<int>(std::lround(d.y));
    t.radius = static_cast<int>(std::lround(kOrientationRadiusFactor * sw));
    t.ox = static_cast<float>(d.x - t.cx);
    t.oy = static_cast<float>(d.y - t.cy);
    t.inv_two_sw2 = static_cast<float>(1.0 / (2.0 * sw * sw));
  }
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_orientation_tasks_.get(),
                                                h_orientation_tasks_.get(),
                                                sizeof(OrientationTask) * num_dets,
                                                cudaMemcpyHostToDevice, stream_));
  OrientationKernel<<<num_dets, kOrientationThreads, 0, stream_>>>(
      view_, d_orientation_tasks_.get(), d_angles_.get(), d_num_angles_.get());
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(h_num_angles_.get(), d_num_angles_.get(),
                                                sizeof(int) * num_dets, cudaMemcpyDeviceToHost,
                                                stream_));
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(h_angles_.get(), d_angles_.get(),
                                                sizeof(float) * num_dets * kMaxPeaks,
                                                cudaMemcpyDeviceToHost, stream_));
  TIEPOINT_RETURN_IF_ERROR(Wait());

  struct Oriented {
    int detection;
    float angle;
  };
  std::vector<Oriented> oriented;
  oriented.reserve(num_dets + num_dets / 4);
  for (int i = 0; i < num_dets; ++i) {
    for (int k = 0; k < h_num_angles_.get()[i]; ++k) {
      oriented.push_back({i, h_angles_.get()[static_cast<size_t>(i) * kMaxPeaks + k]});
    }
  }
  if (options_.max_features > 0 && oriented.size() > static_cast<size_t>(options_.max_features)) {
    std::vector<double> response(oriented.size());
    for (size_t i = 0; i < oriented.size(); ++i) {
      response[i] = dets[oriented[i].detection].response;
    }
    const std::vector<int> order = StrongestInOrder(response, options_.max_features);
    std::vector<Oriented> kept;
    kept.reserve(order.size());
    for (int i : order) kept.push_back(oriented[i]);
    oriented = std::move(kept);
  }
  const int n = static_cast<int>(oriented.size());
  result.keypoints.resize(n);
  result.descriptors.resize(static_cast<size_t>(n) * kSiftDescriptorDim);
  if (n == 0) {
    *features = std::move(result);
    return Status::Ok();
  }

  // Descriptors, one block per keypoint.
  const size_t kp_room = std::max<size_t>(n, kMinKeypointRoom);
  TIEPOINT_RETURN_IF_ERROR(h_descriptor_tasks_.Reserve(kp_room, "descriptor tasks"));
  TIEPOINT_RETURN_IF_ERROR(d_descriptor_tasks_.Grow(kp_room, "descriptor tasks"));
  TIEPOINT_RETURN_IF_ERROR(h_descriptors_.Reserve(kp_room * kSiftDescriptorDim, "descriptors"));
  TIEPOINT_RETURN_IF_ERROR(d_descriptors_.Grow(kp_room * kSiftDescriptorDim, "descriptors"));
  const double up = options_.upsample ? 0.5 : 1.0;
  const double characteristic = std::pow(2.0, 0.5 / S);
  constexpr int d = kDescriptorWidth;
  for (int i = 0; i < n; ++i) {
    const GpuDetection& det = dets[oriented[i].detection];
    const double sigma_l = lowe_sigma(det);
    const double angle = oriented[i].angle;
    const double bin_width = kDescriptorBinFactor * sigma_l;
    DescriptorTask& t = h_descriptor_tasks_.get()[i];
    t.octave = det.octave;
    t.layer = det.layer;
    t.cx = static_cast<int>(std::lround(det.x));
    t.cy = static_cast<int>(std::lround(det.y));
    t.radius = static_cast<int>(std::lround(bin_width * std::sqrt(2.0) * (d + 1) * 0.5));
    // Votes come from |rx|, |ry| < (d + 1) / 2 bins (rotated): within this many pixels of
    // (cx, cy) along x and y (one more for the rounding of the centre, one for safety).
    const double reach =
        0.5 * (d + 1) * bin_width * (std::fabs(std::cos(angle)) + std::fabs(std::sin(angle)));
    t.box = std::min(t.radius, static_cast<int>(std::ceil(reach)) + 2);
    t.ox = static_cast<float>(det.x - t.cx);
    t.oy = static_cast<float>(det.y - t.cy);
    t.cos_t = static_cast<float>(std::cos(angle) / bin_width);
    t.sin_t = static_cast<float>(std::sin(angle) / bin_width);
    t.angle = oriented[i].angle;

    const double factor = std::ldexp(up, det.octave);
    Keypoint& k = result.keypoints[i];
    k.x = static_cast<float>(det.x * factor);
    k.y = static_cast<float>(det.y * factor);
    k.scale = static_cast<float>(sigma_l * characteristic * factor);
    k.orientation = oriented[i].angle;
    if (k.orientation >= kTwoPiF) k.orientation = 0.0f;
  }
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_descriptor_tasks_.get(), h_descriptor_tasks_.get(),
                                                sizeof(DescriptorTask) * n,
                                                cudaMemcpyHostToDevice, stream_));
  DescriptorKernel<<<n, kDescriptorThreads, 0, stream_>>>(view_, d_descriptor_tasks_.get(),
                                                          options_.root_sift ? 1 : 0,
                                                          d_descriptors_.get());
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(h_descriptors_.get(), d_descriptors_.get(),
                                                static_cast<size_t>(n) * kSiftDescriptorDim,
                                                cudaMemcpyDeviceToHost, stream_));
  TIEPOINT_RETURN_IF_ERROR(Wait());
  std::memcpy(result.descriptors.data(), h_descriptors_.get(),
              static_cast<size_t>(n) * kSiftDescriptorDim);
  *features = std::move(result);
  return Status::Ok();
}

class SiftCuda : public FeatureExtractor {
 public:
  SiftCuda(const SiftOptions& options, int device) : options_(options), device_(device) {
    for (int i = 0; i < options.cuda_streams; ++i) {
      workers_.push_back(std::make_unique<SiftCudaWorker>(options, device));
    }
  }
  Status Extract(const GrayImage& image, Features* features) override {
    return workers_[0]->Extract(image, features);
  }

  Status SetContrastThreshold(double contrast_threshold) override {
    SiftOptions changed = options_;
    changed.contrast_threshold = contrast_threshold;
    TIEPOINT_RETURN_IF_ERROR(changed.Check());
    options_.contrast_threshold = contrast_threshold;
    for (auto& w : workers_) w->SetContrastThreshold(contrast_threshold);
    return Status::Ok();
  }

  void ExtractBatch(const std::vector<const GrayImage*>& images, std::vector<Features>* features,
                    std::vector<Status>* statuses) override {
    features->assign(images.size(), Features());
    statuses->assign(images.size(), Status::Ok());
    std::atomic<size_t> next{0};
    auto work = [&](SiftCudaWorker* worker) {
      for (size_t i = next++; i < images.size(); i = next++) {
        Status s = worker->Extract(*images[i], &(*features)[i]);
        if (!s.ok()) (*features)[i] = Features();
        std::swap((*statuses)[i], s);
      }
    };
    const size_t num_threads = std::min(workers_.size(), images.size());
    std::vector<std::thread> threads;
    for (size_t t = 1; t < num_threads; ++t) threads.emplace_back(work, workers_[t].get());
    if (num_threads > 0) work(workers_[0].get());
    for (std::thread& t : threads) t.join();
  }

  // One host thread per stream for the whole run, each taking the next image as soon as
  // its previous one is done: no barrier between images.
  void ExtractStream(int count, int /*group*/, const NextImage& next, const ImageDone& done) override {
    std::atomic<int> next_index{0};
    auto work = [&](SiftCudaWorker* worker) {
      for (int i = next_index++; i < count; i = next_index++) {
        const GrayImage* image = next(i);
        if (image == nullptr) continue;
        Features f;
        Status s = worker->Extract(*image, &f);
        if (!s.ok()) f = Features();
        done(i, std::move(f), std::move(s));
      }
    };
    const size_t num_threads = std::min(workers_.size(), static_cast<size_t>(std::max(0, count)));
    std::vector<std::thread> threads;
    for (size_t t = 1; t < num_threads; ++t) threads.emplace_back(work, workers_[t].get());
    if (num_threads > 0) work(workers_[0].get());
    for (std::thread& t : threads) t.join();
  }

 private:
  SiftOptions options_;
  int device_ = 0;
  std::vector<std::unique_ptr<SiftCudaWorker>> workers_;
};

}  // namespace

Status CreateCudaSiftExtractor(const SiftOptions& options,
                               std::unique_ptr<FeatureExtractor>* extractor) {
  std::vector<CudaDeviceInfo> devices;
  const Status found = QueryCudaDevices(&devices);
  if (!found.ok()) {
    return Status::Unavailable("CUDA SIFT: no usable GPU (" + found.message() +
                               "); use --device cpu");
  }
  int widest = 0;
  for (double blur : PlanSiftScaleSpace(options, 0, 0).blurs) widest = std::max(widest, BlurRadius(blur));
  if (widest > kSiftCudaMaxBlurRadius) {
    return Status::InvalidOptions(
        "CUDA SIFT: sigma " + std::to_string(options.sigma) + " with octave_layers " +
        std::to_string(options.octave_layers) + " needs a Gaussian kernel of radius " + std::to_string(widest) +
        "; the GPU blur takes at most " + std::to_string(kSiftCudaMaxBlurRadius) +
        " (use --device cpu, or more octave layers or a smaller sigma)");
  }
  *extractor = std::make_unique<SiftCuda>(options, devices.front().index);
  return Status::Ok();
}

}  // namespace tiepoint
