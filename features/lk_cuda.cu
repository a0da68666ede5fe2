// LK on the GPU: a warp per feature (features/fast_cuda.h describes the design). The model
// and the per-sample arithmetic are those of the CPU reference (features/lk_inl.h); the
// rounding differs (TrackLevel says where), which moves the converged positions by far
// less than 0.01 px (tests/features/lk_test.cc).
#include "features/lk_cuda.h"

#include <cmath>
#include <string>

#include "features/lk_inl.h"

namespace tiepoint::cuda_internal {
namespace {

constexpr int kWarpsPerBlock = 4;

struct LkParams {
  int levels;
  int coarse_level;
  int max_iterations;
  float min_step;
  int upper_max_iterations;
  float upper_min_step;
  float min_eigenvalue;
  float fb_threshold;
  int gain_bias;
  float map[4];      // the forward pass's linear map A (row-major; kMapped kernels only)
  float inverse[4];  // A^-1, the backward pass's
};

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

// Sums of N values over the kWarps warps that share a feature (one block per feature when
// kWarps > 1): butterfly within each warp, then lane 0 of each warp posts its N partial sums
// to shared memory and every thread adds the kWarps posts in warp order, so all threads of
// the block hold bitwise identical sums and take the same branches. Two buffers alternate
// (`*parity`), so one barrier per reduction suffices: a warp can only overwrite a buffer
// after the next reduction's barrier, which every warp reaches after reading it.
template <int kWarps, int N>
__device__ __forceinline__ void GroupSum(float (&v)[N], float* red, int* parity) {
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] = WarpSum(v[i]);
  if constexpr (kWarps > 1) {
    float* buf = red + *parity * (kWarps * 10);
    const int warp = threadIdx.x >> 5;
    if ((threadIdx.x & 31) == 0) {
#pragma unroll
      for (int i = 0; i < N; ++i) buf[warp * 10 + i] = v[i];
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < N; ++i) {
      float t = buf[i];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) t += buf[w * 10 + i];
      v[i] = t;
    }
    *parity ^= 1;
  }
}

// Bilinear weights and integer base of the patch's top-left sample at (x, y): every sample
// of a patch sits at an integer offset from it, so all of them share the weights.
struct PatchOrigin {
  int x0, y0;    // floor of the top-left sample
  float fx, fy;  // its fractional part
};
__device__ __forceinline__ PatchOrigin OriginAt(float x, float y) {
  const float xf = floorf(x), yf = floorf(y);
  return {static_cast<int>(xf), static_cast<int>(yf), x - xf, y - yf};
}
// True when every pixel the patch's samples read (one more on each side for the template
// gradient) lies inside the level: the reads then need no clamping.
__device__ __forceinline__ bool PatchInside(const PatchOrigin& o, int patch, int w, int h) {
  return o.x0 >= 1 && o.y0 >= 1 && o.x0 + patch + 1 <= w - 1 && o.y0 + patch + 1 <= h - 1;
}
// Bilinear sample at integer offset (i, j) from an interior origin (no clamping).
__device__ __forceinline__ float BilinearAt(const uint8_t* __restrict__ img, int w,
                                            const PatchOrigin& o, int i, int j) {
  const uint8_t* p = img + (o.y0 + j) * w + (o.x0 + i);
  const float a = __ldg(p), b = __ldg(p + 1), c = __ldg(p + w), d = __ldg(p + w + 1);
  // a + fx (b - a), then the same down the column: fused multiply-adds (this file is built
  // with --fmad=false for the rest, see features/CMakeLists.txt).
  const float top = __fmaf_rn(o.fx, b - a, a), bottom = __fmaf_rn(o.fx, d - c, c);
  return __fmaf_rn(o.fy, bottom - top, top);
}

// One pyramid level of one pass for the warp's feature, with the patch side a compile-time
// constant (kPatch^2 / 32 samples per lane, no predicated-off slots on the 8x8 levels).
// Updates (dx, dy, alpha, beta) in level pixels; returns kTracked to go on to the next level.
// Differs from the CPU reference only in rounding: samples are taken at integer offsets
// from the patch origin (shared bilinear weights, no clamping while the patch is inside
// the level), explicit fused multiply-adds, the butterfly sums, and each iteration applies G^-1
// (float, from the double Cholesky factor, once per level) instead of a double solve.
// kMapped: the next frame's samples are read at A x + d (m = A, row-major), each a clamped
// bilinear sample as in the CPU reference, and the update is d -= A delta; without it, the
// identity code (shared weights), unchanged.
template <int kPatch, int kWarps, bool kMapped>
__device__ __forceinline__ int TrackLevel(float* red, int* parity, float* grid,
                                          const uint8_t* __restrict__ ti, int tw, int th,
                                          const uint8_t* __restrict__ ni, int nw, int nh,
                                          float px, float py, int unknowns, bool finest,
                                          const LkParams& o, const float* m, float* dx_io,
                                          float* dy_io, float* alpha_io, float* beta_io) {
  // Sample slots of the patch (32 samples each): warp w of the feature takes slots
  // w, w + kWarps, ...; kSlots per warp, the last ones past the patch skipped (8x8 patches
  // with 4 warps leave half of the warps idle there).
  constexpr int kPer = kPatch * kPatch / 32;
  constexpr int kSlots = (kPer + kWarps - 1) / kWarps;
  constexpr float kHalf = 0.5f * static_cast<float>(kPatch - 1);
  const int lane = threadIdx.x & 31;
  const int warp = kWarps > 1 ? static_cast<int>(threadIdx.x >> 5) : 0;
  float dx = *dx_io, dy = *dy_io, alpha = *alpha_io, beta = *beta_io;
  const float dx0 = dx, dy0 = dy;  // the level's start: divergence is measured from it
  float tv[kSlots], tgx[kSlots], tgy[kSlots];
  float g[10];
#pragma unroll
  for (int i = 0; i < 10; ++i) g[i] = 0.f;
  const PatchOrigin to = OriginAt(px - kHalf, py - kHalf);
  const bool t_inside = PatchInside(to, kPatch, tw, th);  // uniform over the feature's warps
  // Inside the level, the template's samples and the +-1 samples of its gradient all lie on
  // one (kPatch + 2)^2 grid of integer offsets from the origin (shared weights): each grid
  // value is computed once into shared memory (the same bits as computing it per use, 1.3
  // instead of 5 bilinear samples per template sample).
  constexpr int kGrid = kPatch + 2;
  if (t_inside) {
    const int tid = kWarps > 1 ? static_cast<int>(threadIdx.x) : lane;
    for (int q = tid; q < kGrid * kGrid; q += 32 * kWarps) {
      grid[q] = BilinearAt(ti, tw, to, q % kGrid - 1, q / kGrid - 1);
    }
    if constexpr (kWarps > 1) {
      __syncthreads();
    } else {
      __syncwarp();
    }
  }
#pragma unroll
  for (int j = 0; j < kSlots; ++j) {
    const int slot = warp + kWarps * j;
    const int k = lane + 32 * slot;
    const int si = k % kPatch, sj = k / kPatch;
    if (kPer % kWarps != 0 && slot >= kPer) {
      tv[j] = tgx[j] = tgy[j] = 0.f;  // contributes nothing to G or b
      continue;
    }
    if (t_inside) {
      const float* c = grid + (sj + 1) * kGrid + (si + 1);
      tv[j] = c[0];
      tgx[j] = 0.5f * (c[1] - c[-1]);
      tgy[j] = 0.5f * (c[kGrid] - c[-kGrid]);
    } else {
      lk_internal::TemplateSample(ti, tw, th, px + (si - kHalf), py + (sj - kHalf), &tv[j], &tgx[j],
                                  &tgy[j]);
    }
    const float u[4] = {tgx[j], tgy[j], 1.0f, tv[j]};
#pragma unroll
    for (int r = 0; r < 4; ++r) {
#pragma unroll
      for (int c = r; c < 4; ++c) {
        float& gi = g[lk_internal::Packed(r, c)];
        gi = __fmaf_rn(u[r], u[c], gi);
      }
    }
  }
  // The grid is written again on the next level only after this reduction: its barrier
  // (kWarps > 1) or this __syncwarp orders every read before those writes.
  if constexpr (kWarps == 1) __syncwarp();
  double gd[10], chol[16];
  GroupSum<kWarps>(g, red, parity);
#pragma unroll
  for (int i = 0; i < 10; ++i) gd[i] = g[i];
  if (!lk_internal::Cholesky(gd, unknowns, chol)) return static_cast<int>(LkStatus::kFlat);
  if (finest && lk_internal::MinEigen2(gd[0], gd[1], gd[4]) / (kPatch * kPatch) < o.min_eigenvalue) {
    return static_cast<int>(LkStatus::kFlat);
  }
  // G^-1 of the leading `unknowns` block (zero beyond it), column by column.
  float ginv[4][4];
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const double e[4] = {c == 0 ? 1.0 : 0.0, c == 1 ? 1.0 : 0.0, c == 2 ? 1.0 : 0.0,
                         c == 3 ? 1.0 : 0.0};
    double col[4] = {0, 0, 0, 0};
    lk_internal::CholeskySolve(chol, unknowns, e, col);
#pragma unroll
    for (int r = 0; r < 4; ++r) ginv[r][c] = c < unknowns ? static_cast<float>(col[r]) : 0.0f;
  }
  const int max_iterations = finest ? o.max_iterations : o.upper_max_iterations;
  const float min_step = finest ? o.min_step : o.upper_min_step;
  for (int it = 0; it < max_iterations; ++it) {
    float b0 = 0.f, b1 = 0.f, b2 = 0.f, b3 = 0.f;
    const float gain1 = 1.0f + alpha;
    const PatchOrigin no = OriginAt(px + dx - kHalf, py + dy - kHalf);
    const bool n_inside = !kMapped && PatchInside(no, kPatch, nw, nh);
#pragma unroll
    for (int j = 0; j < kSlots; ++j) {
      const int slot = warp + kWarps * j;
      if (kPer % kWarps != 0 && slot >= kPer) continue;
      const int k = lane + 32 * slot;
      const int si = k % kPatch, sj = k / kPatch;
      float v;
      if constexpr (kMapped) {
        const float u = static_cast<float>(si) - kHalf, w = static_cast<float>(sj) - kHalf;
        v = lk_internal::Bilinear(ni, nw, nh, px + dx + (m[0] * u + m[1] * w),
                                  py + dy + (m[2] * u + m[3] * w));
      } else {
        v = n_inside ? BilinearAt(ni, nw, no, si, sj)
                     : lk_internal::Bilinear(ni, nw, nh, px + dx + (si - kHalf),
                                             py + dy + (sj - kHalf));
      }
      const float e = __fmaf_rn(-gain1, tv[j], v) - beta;
      b0 = __fmaf_rn(tgx[j], e, b0);
      b1 = __fmaf_rn(tgy[j], e, b1);
      b2 += e;
      b3 = __fmaf_rn(tv[j], e, b3);
    }
    float b[4] = {b0, b1, b2, b3};
    GroupSum<kWarps>(b, red, parity);
    float z[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      z[r] = __fmaf_rn(ginv[r][3], b[3],
                       __fmaf_rn(ginv[r][2], b[2], __fmaf_rn(ginv[r][1], b[1], ginv[r][0] * b[0])));
    }
    const float inv_gain = 1.0f / gain1;
    float step_x = -z[0] * inv_gain;
    float step_y = -z[1] * inv_gain;
    if constexpr (kMapped) {  // d -= A delta
      const float tx = step_x, ty = step_y;
      step_x = m[0] * tx + m[1] * ty;
      step_y = m[2] * tx + m[3] * ty;
    }
    dx += step_x;
    dy += step_y;
    beta += z[2];
    alpha = fminf(fmaxf(alpha + z[3], lk_internal::kLkMinGain - 1.0f), lk_internal::kLkMaxGain - 1.0f);
    if (!(fabsf(dx - dx0) < lk_internal::kLkMaxLevelShift &&
          fabsf(dy - dy0) < lk_internal::kLkMaxLevelShift) ||
        !lk_internal::InsideLevel(px + dx, py + dy, nw, nh, kHalf)) {
      return static_cast<int>(LkStatus::kOutside);
    }
    if (step_x * step_x + step_y * step_y < min_step * min_step) break;
  }
  *dx_io = dx;
  *dy_io = dy;
  *alpha_io = alpha;
  *beta_io = beta;
  return static_cast<int>(LkStatus::kTracked);
}

// One pass prev -> next for the feature of the warp (kWarps = 1) or of the block (kWarps
// warps); every thread returns the same values.
template <int kWarps, bool kMapped>
__device__ int TrackOneWarp(float* red, int* parity, float* grid, const PyramidView& prev,
                            const PyramidView& next, const LkParams& o, const float* m,
                            float px0, float py0, float gx0, float gy0, float* out_x,
                            float* out_y, float* out_gain, float* out_bias) {
  float dx = 0.f, dy = 0.f, alpha = 0.f, beta = 0.f;
  for (int l = o.levels - 1; l >= 0; --l) {
    const float scale = 1.0f / static_cast<float>(1 << l);
    if (l == o.levels - 1) {
      dx = (gx0 - px0) * scale;
      dy = (gy0 - py0) * scale;
    } else {
      dx *= 2.0f;
      dy *= 2.0f;
    }
    const int unknowns = lk_internal::LkUnknowns(o.gain_bias, o.coarse_level, l);
    const float px = px0 * scale, py = py0 * scale;
    const int status =
        l >= o.coarse_level
            ? TrackLevel<8, kWarps, kMapped>(red, parity, grid, prev.level[l], prev.width[l],
                                             prev.height[l], next.level[l], next.width[l],
                                             next.height[l], px, py, unknowns, l == 0, o, m, &dx,
                                             &dy, &alpha, &beta)
            : TrackLevel<16, kWarps, kMapped>(red, parity, grid, prev.level[l], prev.width[l],
                                              prev.height[l], next.level[l], next.width[l],
                                              next.height[l], px, py, unknowns, l == 0, o, m, &dx,
                                              &dy, &alpha, &beta);
    if (status != static_cast<int>(LkStatus::kTracked)) return status;
  }
  *out_x = px0 + dx;
  *out_y = py0 + dy;
  *out_gain = 1.0f + alpha;
  *out_bias = beta;
  if (!(*out_x >= 0.0f && *out_y >= 0.0f && *out_x <= next.width[0] - 1.0f &&
        *out_y <= next.height[0] - 1.0f)) {
    return static_cast<int>(LkStatus::kOutside);
  }
  return static_cast<int>(LkStatus::kTracked);
}

// kWarps = 1: a warp per feature, kWarpsPerBlock features per block. kWarps > 1: a block
// of kWarps warps per feature, splitting the patch's samples (features/lk.h:
// LkOptions::cuda_warps_per_feature). kMapped: the linear prediction (params.map).
template <int kWarps, bool kMapped>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    LkKernel(PyramidView prev, PyramidView next, LkParams params, const float* __restrict__ points,
             const float* __restrict__ guesses, int n, LkDeviceResult* __restrict__ results) {
  __shared__ float red[kWarps > 1 ? 2 * kWarps * 10 : 1];
  __shared__ float grids[kWarps > 1 ? 1 : kWarpsPerBlock][18 * 18];  // 16x16 patch + ring
  float* grid = grids[kWarps > 1 ? 0 : threadIdx.x >> 5];
  int parity = 0;
  const int feature = kWarps > 1 ? static_cast<int>(blockIdx.x)
                                 : static_cast<int>(blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5));
  if (feature >= n) return;  // whole warps (kWarps > 1: the whole block) leave together
  const float px = points[2 * feature], py = points[2 * feature + 1];
  const float gx = guesses ? guesses[2 * feature] : px;
  const float gy = guesses ? guesses[2 * feature + 1] : py;
  LkDeviceResult r;
  r.fb_error = 0.f;
  r.x = r.y = 0.f;
  r.gain = 1.f;
  r.bias = 0.f;
  r.status = TrackOneWarp<kWarps, kMapped>(red, &parity, grid, prev, next, params, params.map, px,
                                           py, gx, gy, &r.x, &r.y, &r.gain, &r.bias);
  if (r.status == static_cast<int>(LkStatus::kTracked) && params.fb_threshold > 0.f) {
    float bx = 0.f, by = 0.f, bg, bb;
    const int bs = TrackOneWarp<kWarps, kMapped>(red, &parity, grid, next, prev, params,
                                                 params.inverse, r.x, r.y, px, py, &bx, &by, &bg,
                                                 &bb);
    if (bs != static_cast<int>(LkStatus::kTracked)) {
      r.status = static_cast<int>(LkStatus::kForwardBackward);
      r.fb_error = INFINITY;
    } else {
      r.fb_error = hypotf(bx - px, by - py);
      if (!(r.fb_error <= params.fb_threshold)) {
        r.status = static_cast<int>(LkStatus::kForwardBackward);
      }
    }
  }
  if (threadIdx.x == 0 || (kWarps == 1 && (threadIdx.x & 31) == 0)) results[feature] = r;
}

}  // namespace

Status LaunchLk(const PyramidView& prev, const PyramidView& next, int levels,
                const float* d_points, const float* d_guesses, int n, const LkLinearMap& map,
                const LkOptions& options, LkDeviceResult* d_results, cudaStream_t stream) {
  if (n == 0) return Status::Ok();
  TIEPOINT_RETURN_IF_ERROR(map.Check());
  LkParams p;
  p.levels = levels;
  p.coarse_level = options.coarse_level;
  p.max_iterations = options.max_iterations;
  p.min_step = options.min_step;
  p.upper_max_iterations = options.upper_max_iterations;
  p.upper_min_step = options.upper_min_step;
  p.min_eigenvalue = options.min_eigenvalue;
  p.fb_threshold = options.fb_threshold;
  p.gain_bias = options.gain_bias ? 1 : 0;
  const LkLinearMap inverse = map.Inverse();
  const float fwd[4] = {map.a00, map.a01, map.a10, map.a11};
  const float bwd[4] = {inverse.a00, inverse.a01, inverse.a10, inverse.a11};
  for (int i = 0; i < 4; ++i) {
    p.map[i] = fwd[i];
    p.inverse[i] = bwd[i];
  }
  const bool mapped = !map.IsIdentity();
  switch (options.cuda_warps_per_feature) {
    case 1: {
      const int blocks = (n + kWarpsPerBlock - 1) / kWarpsPerBlock;
      if (mapped) {
        LkKernel<1, true><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(prev, next, p, d_points,
                                                                      d_guesses, n, d_results);
      } else {
        LkKernel<1, false><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(prev, next, p, d_points,
                                                                       d_guesses, n, d_results);
      }
      break;
    }
    case 2:
      if (mapped) {
        LkKernel<2, true><<<n, 64, 0, stream>>>(prev, next, p, d_points, d_guesses, n, d_results);
      } else {
        LkKernel<2, false><<<n, 64, 0, stream>>>(prev, next, p, d_points, d_guesses, n, d_results);
      }
      break;
    case 4:
      if (mapped) {
        LkKernel<4, true><<<n, 128, 0, stream>>>(prev, next, p, d_points, d_guesses, n, d_results);
      } else {
        LkKernel<4, false><<<n, 128, 0, stream>>>(prev, next, p, d_points, d_guesses, n, d_results);
      }
      break;
    default:
      return Status::InvalidOptions("LK cuda_warps_per_feature " +
                                    std::to_string(options.cuda_warps_per_feature) +
                                    ": expected 1, 2 or 4");
  }
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::Ok();
}

}  // namespace tiepoint::cuda_internal
