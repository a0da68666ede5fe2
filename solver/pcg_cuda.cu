#include <cub/cub.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <limits>
#include <vector>

#include "io/base/cuda_buffer.h"
#include "io/base/cuda_check.h"
#include "io/base/cuda_device.h"
#include "solver/pcg_cuda.h"

namespace tiepoint {
namespace {

constexpr int kThreads = 256;             // threads per block for per-item kernels

int Blocks(int64_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

// With TIEPOINT_TIMING set, prints the milliseconds since the previous mark (device
// synchronized) to stderr: where the set-up time goes.
void TimingMark(const char* what) {
  static const bool on = std::getenv("TIEPOINT_TIMING") != nullptr;
  if (!on) return;
  static auto last = std::chrono::steady_clock::now();
  cudaDeviceSynchronize();
  const auto now = std::chrono::steady_clock::now();
  std::fprintf(stderr, "[timing] cuda %-28s %8.2f ms\n", what,
               std::chrono::duration<double, std::milli>(now - last).count());
  last = now;
}

// Status assignment whose result is discarded (nvcc warns on the [[nodiscard]] type).
inline void Set(Status& dst, Status src) { static_cast<void>(dst = std::move(src)); }

struct DeviceLoss {
  int type;      // 0 none, 1 huber, 2 cauchy (LossType order)
  double scale;
};

__device__ void LossEval(const DeviceLoss& loss, double s, double* rho, double* drho) {
  if (loss.type == 1) {
    const double b = loss.scale * loss.scale;
    if (s <= b) { *rho = s; *drho = 1.0; }
    else { const double r = sqrt(s); *rho = 2.0 * loss.scale * r - b; *drho = loss.scale / r; }
  } else if (loss.type == 2) {
    const double b = loss.scale * loss.scale;
    *rho = b * log1p(s / b);
    *drho = 1.0 / (1.0 + s / b);
  } else {
    *rho = s;
    *drho = 1.0;
  }
}

// The BAL residual and its analytic Jacobian (the same mathematics as
// BalResidualAndJacobian in solver/camera_model.cc, in plain arrays for the device).
__device__ void BalEvaluate(const double* cam, const double* X, const double* obs, double* r,
                            double* jc, double* jp) {
  const double w0 = cam[0], w1 = cam[1], w2 = cam[2];
  const double t2 = w0 * w0 + w1 * w1 + w2 * w2;
  double R[9], a, b;
  if (t2 > 2.220446049250313e-16) {
    const double t = sqrt(t2), c = cos(t), s = sin(t);
    const double u0 = w0 / t, u1 = w1 / t, u2 = w2 / t, k = 1.0 - c;
    R[0] = c + k * u0 * u0;      R[1] = k * u0 * u1 - s * u2; R[2] = k * u0 * u2 + s * u1;
    R[3] = k * u1 * u0 + s * u2; R[4] = c + k * u1 * u1;      R[5] = k * u1 * u2 - s * u0;
    R[6] = k * u2 * u0 - s * u1; R[7] = k * u2 * u1 + s * u0; R[8] = c + k * u2 * u2;
    if (t2 < 1e-4) {
      a = 0.5 - t2 / 24.0 + t2 * t2 / 720.0;
      b = 1.0 / 6.0 - t2 / 120.0 + t2 * t2 / 5040.0;
    } else {
      a = (1.0 - c) / t2;
      b = (t - s) / (t2 * t);
    }
  } else {
    R[0] = 1;   R[1] = -w2; R[2] = w1;
    R[3] = w2;  R[4] = 1;   R[5] = -w0;
    R[6] = -w1; R[7] = w0;  R[8] = 1;
    a = -1.0;  // marks the first-order branch: d(RX)/dw = -[X]x
    b = 0.0;
  }
  const double P0 = R[0] * X[0] + R[1] * X[1] + R[2] * X[2] + cam[3];
  const double P1 = R[3] * X[0] + R[4] * X[1] + R[5] * X[2] + cam[4];
  const double P2 = R[6] * X[0] + R[7] * X[1] + R[8] * X[2] + cam[5];
  const double iz = 1.0 / P2;
  const double px = -P0 * iz, py = -P1 * iz;
  const double f = cam[6], k1 = cam[7], k2 = cam[8];
  const double r2 = px * px + py * py;
  const double d = 1.0 + r2 * (k1 + k2 * r2);
  r[0] = f * d * px - obs[0];
  r[1] = f * d * py - obs[1];
  if (!jc) return;
  const double dd = 2.0 * (k1 + 2.0 * k2 * r2);
  const double A00 = f * (d + dd * px * px), A01 = f * dd * px * py, A11 = f * (d + dd * py * py);
  // dpred/dP = A * dp/dP, dp/dP = [[-iz, 0, P0 iz^2], [0, -iz, P1 iz^2]].
  const double B[6] = {-A00 * iz, -A01 * iz, (A00 * P0 + A01 * P1) * iz * iz,
                       -A01 * iz, -A11 * iz, (A01 * P0 + A11 * P1) * iz * iz};
  // dRX/dw = -R [X]x J_r, J_r = I - a W + b W^2 (or -[X]x on the first-order branch).
  double M[9];
  const double SX[9] = {0, -X[2], X[1], X[2], 0, -X[0], -X[1], X[0], 0};
  if (a < 0.0) {
    for (int i = 0; i < 9; ++i) M[i] = -SX[i];
  } else {
    const double W[9] = {0, -w2, w1, w2, 0, -w0, -w1, w0, 0};
    double Jr[9];
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        double w2ij = 0;
        for (int k = 0; k < 3; ++k) w2ij += W[3 * i + k] * W[3 * k + j];
        Jr[3 * i + j] = (i == j ? 1.0 : 0.0) - a * W[3 * i + j] + b * w2ij;
      }
    double XJ[9];
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        double v = 0;
        for (int k = 0; k < 3; ++k) v += SX[3 * i + k] * Jr[3 * k + j];
        XJ[3 * i + j] = v;
      }
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        double v = 0;
        for (int k = 0; k < 3; ++k) v += R[3 * i + k] * XJ[3 * k + j];
        M[3 * i + j] = -v;
      }
  }
  for (int row = 0; row < 2; ++row) {
    const double* Br = B + 3 * row;
    for (int j = 0; j < 3; ++j) {
      jc[9 * row + j] = Br[0] * M[j] + Br[1] * M[3 + j] + Br[2] * M[6 + j];
      jc[9 * row + 3 + j] = Br[j];
      jp[3 * row + j] = Br[0] * R[j] + Br[1] * R[3 + j] + Br[2] * R[6 + j];
    }
  }
  jc[6] = d * px;            jc[15] = d * py;
  jc[7] = f * r2 * px;       jc[16] = f * r2 * py;
  jc[8] = f * r2 * r2 * px;  jc[17] = f * r2 * r2 * py;
}

// Jacobian storage: structure-of-arrays planes over the observations (point-major order),
// plane a of J'_c at jc + a n (a < 18: row 0 then row 1), of J'_p at jp + a n (a < 6), of
// the weighted residual at r + a n (a < 2): consecutive threads (observations) read
// consecutive addresses, so every warp load is a whole number of 128-byte lines.
struct ProblemView {
  int64_t n;
  int nc, np;
  const int* obs_camera;
  const int* obs_point;
  const double* obs_xy;
  const int* point_ptr;
  const int* camera_ptr;
  const int* camera_obs;
  const unsigned char* fixed;  // 9 per camera, or null
  const int* chunk_point;      // first point of each chunk (num_chunks + 1)
  int num_chunks;
};

// Chunks of whole points for the fused Schur kernel: at most kChunkObs observations
// (unless one point has more) and kChunkPoints points each.
constexpr int kChunkObs = 1024;
constexpr int kChunkPoints = 1024;
constexpr int kFusedThreads = 512;

// Per observation: cost (rho), and with `jc`: weighted residual and scaled Jacobian blocks.
__global__ void EvaluateKernel(ProblemView p, DeviceLoss loss, const double* cams,
                               const double* pts, const double* cam_scale,
                               const double* pt_scale, float* jc_out, float* jp_out,
                               float* r_out, double* cost_out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= p.n) return;
  const int c = p.obs_camera[i], j = p.obs_point[i];
  double r[2], jc[18], jp[6];
  BalEvaluate(cams + 9 * c, pts + 3 * j, p.obs_xy + 2 * i, r, r_out ? jc : nullptr, jp);
  double rho, drho;
  LossEval(loss, r[0] * r[0] + r[1] * r[1], &rho, &drho);
  cost_out[i] = 0.5 * rho;
  if (!r_out) return;
  const double w = sqrt(drho);
  const unsigned char* f = p.fixed ? p.fixed + 9 * c : nullptr;
  const int64_t n = p.n;
  for (int row = 0; row < 2; ++row) {
    if (jc_out) {
      for (int a = 0; a < 9; ++a) {
        const double v = (f && f[a]) ? 0.0 : jc[9 * row + a] * w * cam_scale[9 * c + a];
        jc_out[(9 * row + a) * n + i] = static_cast<float>(v);
      }
      for (int a = 0; a < 3; ++a) jp_out[(3 * row + a) * n + i] = static_cast<float>(jp[3 * row + a] * w * pt_scale[3 * j + a]);
    }
    r_out[row * n + i] = static_cast<float>(r[row] * w);
  }
}

// Where kernels get the scaled Jacobian blocks of an observation: the stored planes, or
// (jc null: --jacobian recompute, or stored blocks did not fit in device memory) a fresh
// evaluation at the linearization point, weighted, masked and scaled exactly as
// EvaluateKernel stores them.
struct BlockSource {
  const float* jc;       // planes (ProblemView), or null
  const float* jp;
  const double* params;  // linearization point: 9 per camera, then 3 per point
  const double* scale;   // column scales, same layout
  DeviceLoss loss;
};

// kRecompute a template argument in the CG kernels, so the stored path carries none of
// the evaluation's registers (occupancy); a run-time choice elsewhere.
template <bool kRecompute>
__device__ __forceinline__ void LoadBlocksT(const ProblemView& p, const BlockSource& src,
                                            int64_t i, float* Jc, float* Jp) {
  const int64_t n = p.n;
  if constexpr (!kRecompute) {
    if (Jc) {
#pragma unroll
      for (int a = 0; a < 18; ++a) Jc[a] = src.jc[a * n + i];
    }
    if (Jp) {
#pragma unroll
      for (int a = 0; a < 6; ++a) Jp[a] = src.jp[a * n + i];
    }
    return;
  } else {
  const int c = p.obs_camera[i], j = p.obs_point[i];
  double r[2], jc[18], jp[6];
  const double* pts = src.params + 9LL * p.nc;
  BalEvaluate(src.params + 9 * c, pts + 3LL * j, p.obs_xy + 2 * i, r, jc, jp);
  double rho, drho;
  LossEval(src.loss, r[0] * r[0] + r[1] * r[1], &rho, &drho);
  const double w = sqrt(drho);
  if (Jc) {
    const unsigned char* f = p.fixed ? p.fixed + 9 * c : nullptr;
    const double* cs = src.scale + 9 * c;
#pragma unroll
    for (int k = 0; k < 18; ++k) {
      const int a = k % 9;
      Jc[k] = (f && f[a]) ? 0.0f : static_cast<float>(jc[k] * w * cs[a]);
    }
  }
  if (Jp) {
    const double* ps = src.scale + 9LL * p.nc + 3LL * j;
#pragma unroll
    for (int k = 0; k < 6; ++k) Jp[k] = static_cast<float>(jp[k] * w * ps[k % 3]);
  }
  }
}

__device__ inline void LoadBlocks(const ProblemView& p, const BlockSource& src, int64_t i,
                                  float* Jc, float* Jp) {
  if (src.jc) {
    LoadBlocksT<false>(p, src, i, Jc, Jp);
  } else {
    LoadBlocksT<true>(p, src, i, Jc, Jp);
  }
}

// Per point: unscaled gradient and diag(J^T J) from the scaled blocks (thread per point).
__global__ void PointGradientKernel(ProblemView p, BlockSource src, const float* r,
                                    const double* pt_scale, double* g, double* diag) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= p.np) return;
  const int64_t n = p.n;
  double gs[3] = {0, 0, 0}, ds[3] = {0, 0, 0};
  for (int i = p.point_ptr[j]; i < p.point_ptr[j + 1]; ++i) {
    const double r0 = r[i], r1 = r[n + i];
    float Jp[6];
    LoadBlocks(p, src, i, nullptr, Jp);
    for (int a = 0; a < 3; ++a) {
      const double j0 = Jp[a], j1 = Jp[3 + a];
      gs[a] += j0 * r0 + j1 * r1;
      ds[a] += j0 * j0 + j1 * j1;
    }
  }
  for (int a = 0; a < 3; ++a) {
    const double s = pt_scale[3 * j + a];
    g[3 * j + a] = gs[a] / s;
    diag[3 * j + a] = ds[a] / (s * s);
  }
}

__device__ double WarpSum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

// Per camera, a block over its observations (camera-major index): each thread sums, in
// float, its observations' 45 upper entries of U = J'_c^T J'_c and 9 of J'_c^T r (every
// thread's loads are independent, so many are in flight); warp shuffles, then shared
// memory, reduce the 54 sums in double. Out: U (81 doubles, as stored: scaled once the
// scaling is fixed), the unscaled gradient and diagonal.
constexpr int kGramThreads = 256;
__global__ void __launch_bounds__(kGramThreads)
CameraGramKernel(ProblemView p, BlockSource src, const float* r, const double* cam_scale,
                 double* u0, double* g, double* diag) {
  __shared__ double part[kGramThreads / 32][54];
  const int c = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t n = p.n;
  float acc[54];
#pragma unroll
  for (int e = 0; e < 54; ++e) acc[e] = 0.0f;
  for (int k = p.camera_ptr[c] + threadIdx.x; k < p.camera_ptr[c + 1]; k += kGramThreads) {
    const int64_t i = p.camera_obs[k];
    float Jc[18];
    LoadBlocks(p, src, i, Jc, nullptr);
    const float* J0 = Jc;
    const float* J1 = Jc + 9;
    const float r0 = r[i], r1 = r[n + i];
    int e = 0;
#pragma unroll
    for (int a = 0; a < 9; ++a) {
#pragma unroll
      for (int b = a; b < 9; ++b) acc[e++] += J0[a] * J0[b] + J1[a] * J1[b];
    }
#pragma unroll
    for (int a = 0; a < 9; ++a) acc[45 + a] += J0[a] * r0 + J1[a] * r1;
  }
#pragma unroll
  for (int e = 0; e < 54; ++e) {
    const double w = WarpSum(static_cast<double>(acc[e]));
    if (lane == 0) part[warp][e] = w;
  }
  __syncthreads();
  if (threadIdx.x >= 54) return;
  const int e = threadIdx.x;
  double s = 0.0;
  for (int w = 0; w < kGramThreads / 32; ++w) s += part[w][e];
  if (e >= 45) {
    const int a = e - 45;
    g[9 * c + a] = s / cam_scale[9 * c + a];
    return;
  }
  int idx = e, a = 0;
  while (idx >= 9 - a) { idx -= 9 - a; ++a; }
  const int b = a + idx;
  u0[81LL * c + 9 * a + b] = s;
  u0[81LL * c + 9 * b + a] = s;
  if (a == b) {
    const double sc = cam_scale[9 * c + a];
    diag[9 * c + a] = s / (sc * sc);
  }
}

// U' = S U S after the scaling is fixed (instead of a second pass over the blocks).
__global__ void ScaleGramKernel(int nc, const double* cam_scale, double* u0) {
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= 81LL * nc) return;
  const int64_t c = t / 81;
  const int a = static_cast<int>(t % 81) / 9, b = static_cast<int>(t % 9);
  u0[t] *= cam_scale[9 * c + a] * cam_scale[9 * c + b];
}

// s = 1 / sqrt(diag(J^T J)), 1 for empty or non-finite columns (the first linearization).
__global__ void ColumnScaleKernel(int64_t m, const double* diag, double* scale) {
  const int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (k >= m) return;
  const double d = diag[k];
  scale[k] = d > 0.0 && isfinite(d) ? 1.0 / sqrt(d) : 1.0;
}

__global__ void RescaleKernel(ProblemView p, const double* cam_scale, const double* pt_scale,
                              float* jc, float* jp) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= p.n) return;
  const int c = p.obs_camera[i], j = p.obs_point[i];
  const int64_t n = p.n;
  for (int k = 0; k < 18; ++k) jc[k * n + i] = static_cast<float>(jc[k * n + i] * cam_scale[9 * c + k % 9]);
  for (int k = 0; k < 6; ++k) jp[k * n + i] = static_cast<float>(jp[k * n + i] * pt_scale[3 * j + k % 3]);
}

// Point blocks V_p = J'_p^T J'_p + D'_p, inverted (3x3, adjugate in double).
__global__ void PointPreconditionerKernel(ProblemView p, BlockSource src, const double* d,
                                          const double* pt_scale, float* dp, float* vinv) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= p.np) return;
  double V[9] = {0};
  for (int i = p.point_ptr[j]; i < p.point_ptr[j + 1]; ++i) {
    float Jf[6];
    LoadBlocks(p, src, i, nullptr, Jf);
    double J[6];
    for (int k = 0; k < 6; ++k) J[k] = Jf[k];
    for (int a = 0; a < 3; ++a)
      for (int b = 0; b < 3; ++b) V[3 * a + b] += J[a] * J[b] + J[3 + a] * J[3 + b];
  }
  for (int a = 0; a < 3; ++a) {
    const double s = pt_scale[3 * j + a];
    const double da = d[3 * j + a] * s * s;
    dp[3 * j + a] = static_cast<float>(da);
    V[4 * a] += da;
  }
  const double c00 = V[4] * V[8] - V[5] * V[7], c01 = V[5] * V[6] - V[3] * V[8], c02 = V[3] * V[7] - V[4] * V[6];
  const double det = V[0] * c00 + V[1] * c01 + V[2] * c02;
  const double id = 1.0 / det;
  float* out = vinv + 9 * static_cast<int64_t>(j);
  out[0] = c00 * id; out[1] = (V[2] * V[7] - V[1] * V[8]) * id; out[2] = (V[1] * V[5] - V[2] * V[4]) * id;
  out[3] = c01 * id; out[4] = (V[0] * V[8] - V[2] * V[6]) * id; out[5] = (V[2] * V[3] - V[0] * V[5]) * id;
  out[6] = c02 * id; out[7] = (V[1] * V[6] - V[0] * V[7]) * id; out[8] = (V[0] * V[4] - V[1] * V[3]) * id;
}

// Camera blocks U_i + D'_i (U from CameraGramKernel), inverted by Cholesky in double
// (thread per camera).
__global__ void CameraPreconditionerKernel(int nc, const double* u0, const double* d,
                                           const double* cam_scale, float* dc, float* uinv) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= nc) return;
  double A[81];
  for (int k = 0; k < 81; ++k) A[k] = u0[81LL * c + k];
  for (int a = 0; a < 9; ++a) {
    const double s = cam_scale[9 * c + a];
    const double da = d[9 * c + a] * s * s;
    dc[9 * c + a] = static_cast<float>(da);
    A[10 * a] += da;
  }
  // A = L L^T, then the inverse L^-T L^-1 column by column.
  double L[81] = {0};
  for (int j = 0; j < 9; ++j) {
    double s = A[10 * j];
    for (int k = 0; k < j; ++k) s -= L[9 * j + k] * L[9 * j + k];
    const double ljj = sqrt(fmax(s, 1e-300));
    L[10 * j] = ljj;
    for (int i = j + 1; i < 9; ++i) {
      double v = A[9 * i + j];
      for (int k = 0; k < j; ++k) v -= L[9 * i + k] * L[9 * j + k];
      L[9 * i + j] = v / ljj;
    }
  }
  float* out = uinv + 81 * static_cast<int64_t>(c);
  for (int col = 0; col < 9; ++col) {
    double y[9], x[9];
    for (int i = 0; i < 9; ++i) {  // L y = e_col
      double v = (i == col) ? 1.0 : 0.0;
      for (int k = 0; k < i; ++k) v -= L[9 * i + k] * y[k];
      y[i] = v / L[10 * i];
    }
    for (int i = 8; i >= 0; --i) {  // L^T x = y
      double v = y[i];
      for (int k = i + 1; k < 9; ++k) v -= L[9 * k + i] * x[k];
      x[i] = v / L[10 * i];
    }
    for (int i = 0; i < 9; ++i) out[9 * i + col] = static_cast<float>(x[i]);
  }
}

// The Schur product in one streaming pass over the point-major blocks (CG's hot loop),
// block-persistent over chunks of whole points:
//   phase 1 (kRhs false): per observation y_o = J'_c x_c, and sum J'_p^T y_o per point in
//            shared memory;
//   per point: z = V^-1 (that sum), or z = V^-1 b_p (kRhs: the reduced right-hand side);
//   phase 2: e_o = y_o - J'_p z (or J'_p z), and J'_c^T e_o summed per camera: in this
//            block's shared-memory camera accumulators (kSharedCameras, written out as
//            one partial per block at the end), else straight into `partial` (one buffer).
// Phase 2 re-reads the chunk's blocks, which the block read a moment before (L2), so
// DRAM sees each block about once per product. SchurReduceKernel sums the partials.
template <bool kRhs, bool kSharedCameras, bool kRecompute>
__global__ void __launch_bounds__(kFusedThreads)
SchurFusedKernel(ProblemView p, BlockSource src, const float* vinv,
                 const float* x, const float* bp, float* partial) {
  extern __shared__ float smem[];
  float* cam_acc = smem;
  float* pt = smem + (kSharedCameras ? 9 * p.nc : 0);  // 3 per point of the chunk
  if (kSharedCameras) {
    for (int k = threadIdx.x; k < 9 * p.nc; k += blockDim.x) cam_acc[k] = 0.0f;
  }
  float* cams_out = kSharedCameras ? cam_acc : partial;
  for (int chunk = blockIdx.x; chunk < p.num_chunks; chunk += gridDim.x) {
    const int p0 = p.chunk_point[chunk], p1 = p.chunk_point[chunk + 1];
    const int o0 = p.point_ptr[p0], o1 = p.point_ptr[p1];
    const int npts = p1 - p0;
    __syncthreads();  // the previous chunk is done with pt[]
    if (!kRhs) {
      for (int k = threadIdx.x; k < 3 * npts; k += blockDim.x) pt[k] = 0.0f;
      __syncthreads();
      for (int i = o0 + threadIdx.x; i < o1; i += blockDim.x) {
        float Jc[18], Jp[6];
        LoadBlocksT<kRecompute>(p, src, i, Jc, Jp);
        const float* xc = x + 9 * p.obs_camera[i];
        float y0 = 0.0f, y1 = 0.0f;
#pragma unroll
        for (int a = 0; a < 9; ++a) {
          const float xa = xc[a];
          y0 += Jc[a] * xa;
          y1 += Jc[9 + a] * xa;
        }
        float* acc = pt + 3 * (p.obs_point[i] - p0);
#pragma unroll
        for (int a = 0; a < 3; ++a) atomicAdd(acc + a, Jp[a] * y0 + Jp[3 + a] * y1);
      }
      __syncthreads();
    }
    for (int q = threadIdx.x; q < npts; q += blockDim.x) {
      const int j = p0 + q;
      float s[3];
      for (int a = 0; a < 3; ++a) s[a] = kRhs ? bp[3 * j + a] : pt[3 * q + a];
      const float* Vi = vinv + 9 * static_cast<int64_t>(j);
      for (int a = 0; a < 3; ++a) pt[3 * q + a] = Vi[3 * a] * s[0] + Vi[3 * a + 1] * s[1] + Vi[3 * a + 2] * s[2];
    }
    __syncthreads();
    for (int i = o0 + threadIdx.x; i < o1; i += blockDim.x) {
      const int c = p.obs_camera[i];
      float Jc[18], Jp[6];
      LoadBlocksT<kRecompute>(p, src, i, Jc, Jp);
      const float* z = pt + 3 * (p.obs_point[i] - p0);
      float e0 = 0.0f, e1 = 0.0f;
      if (!kRhs) {
        const float* xc = x + 9 * c;
#pragma unroll
        for (int a = 0; a < 9; ++a) {
          const float xa = xc[a];
          e0 += Jc[a] * xa;
          e1 += Jc[9 + a] * xa;
        }
      }
      float w0 = 0.0f, w1 = 0.0f;
#pragma unroll
      for (int a = 0; a < 3; ++a) {
        w0 += Jp[a] * z[a];
        w1 += Jp[3 + a] * z[a];
      }
      e0 = kRhs ? w0 : e0 - w0;
      e1 = kRhs ? w1 : e1 - w1;
      float* out = cams_out + 9 * c;
#pragma unroll
      for (int a = 0; a < 9; ++a) atomicAdd(out + a, Jc[a] * e0 + Jc[9 + a] * e1);
    }
  }
  if (kSharedCameras) {
    __syncthreads();
    float* mine = partial + static_cast<int64_t>(blockIdx.x) * 9 * p.nc;
    for (int k = threadIdx.x; k < 9 * p.nc; k += blockDim.x) mine[k] = cam_acc[k];
  }
}


// The Schur product of CG as three streaming passes over the point-major planes (every
// load coalesced, nothing but registers carried between loads and stores, so many loads
// are in flight on every multiprocessor):
//   SchurStreamKernel: per observation y_o = J'_c x_c (stored), and J'_p^T y_o summed per
//     point by a segmented warp scan (observations of a point are contiguous), one atomic
//     add per point and warp into acc;
//   SchurPointSolveKernel: per point z = V^-1 acc (and acc reset to zero for next time);
//   SchurCameraStreamKernel: per observation e_o = y_o - J'_p z, J'_c^T e_o summed per
//     camera in this block's shared memory (else in global memory), one partial per block.
// Adds (w0, w1, w2) of every lane of the warp to acc[3 key ..]: a segmented inclusive scan
// over equal keys (observations sorted by point, so equal keys are contiguous), then one
// atomic add per key and warp, by the last lane of its run. Every lane must call it.
__device__ __forceinline__ void SegmentedAddToPoints(int key, bool valid, float w0, float w1,
                                                     float w2, float* acc) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int kd = __shfl_up_sync(0xffffffffu, key, d);
    const float t0 = __shfl_up_sync(0xffffffffu, w0, d);
    const float t1 = __shfl_up_sync(0xffffffffu, w1, d);
    const float t2 = __shfl_up_sync(0xffffffffu, w2, d);
    if (lane >= d && kd == key) {
      w0 += t0;
      w1 += t1;
      w2 += t2;
    }
  }
  const int next = __shfl_down_sync(0xffffffffu, key, 1);
  if (valid && (lane == 31 || next != key)) {
    float* a = acc + 3 * static_cast<int64_t>(key);
    atomicAdd(a, w0);
    atomicAdd(a + 1, w1);
    atomicAdd(a + 2, w2);
  }
}

template <bool kRecompute>
__global__ void SchurStreamKernel(ProblemView p, BlockSource src, const float* x,
                                  float* y, float* acc) {
  const int64_t n = p.n;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.x; base < n; base += stride) {
    const int64_t i = base + threadIdx.x;
    const bool valid = i < n;
    int key = -1;
    float w0 = 0.0f, w1 = 0.0f, w2 = 0.0f;
    if (valid) {
      key = p.obs_point[i];
      float Jc[18], Jp[6];
      LoadBlocksT<kRecompute>(p, src, i, Jc, Jp);
      const float* xc = x + 9 * p.obs_camera[i];
      float y0 = 0.0f, y1 = 0.0f;
#pragma unroll
      for (int a = 0; a < 9; ++a) {
        const float xa = __ldg(xc + a);
        y0 += Jc[a] * xa;
        y1 += Jc[9 + a] * xa;
      }
      if (y) {  // null where the camera pass recomputes it (camera groups)
        y[i] = y0;
        y[n + i] = y1;
      }
      w0 = Jp[0] * y0 + Jp[3] * y1;
      w1 = Jp[1] * y0 + Jp[4] * y1;
      w2 = Jp[2] * y0 + Jp[5] * y1;
    }
    SegmentedAddToPoints(key, valid, w0, w1, w2, acc);
  }
}

// The implicit-Hessian product (J'^T J' + D') x, first pass: per observation
// e_o = J'_c x_c + J'_p x_p (stored), and J'_p^T e_o summed per point as in
// SchurStreamKernel. The camera pass is SchurCameraStreamKernel with z = null.
template <bool kRecompute>
__global__ void HessianStreamKernel(ProblemView p, BlockSource src,
                                    const float* x, float* e, float* acc) {
  const int64_t n = p.n;
  const float* xpts = x + 9LL * p.nc;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.x; base < n; base += stride) {
    const int64_t i = base + threadIdx.x;
    const bool valid = i < n;
    int key = -1;
    float w0 = 0.0f, w1 = 0.0f, w2 = 0.0f;
    if (valid) {
      key = p.obs_point[i];
      float Jc[18], Jp[6];
      LoadBlocksT<kRecompute>(p, src, i, Jc, Jp);
      const float* xc = x + 9 * p.obs_camera[i];
      const float* xq = xpts + 3 * static_cast<int64_t>(key);
      float e0 = 0.0f, e1 = 0.0f;
#pragma unroll
      for (int a = 0; a < 9; ++a) {
        const float xa = __ldg(xc + a);
        e0 += Jc[a] * xa;
        e1 += Jc[9 + a] * xa;
      }
#pragma unroll
      for (int a = 0; a < 3; ++a) {
        const float xa = xq[a];
        e0 += Jp[a] * xa;
        e1 += Jp[3 + a] * xa;
      }
      if (e) {
        e[i] = e0;
        e[n + i] = e1;
      }
      w0 = Jp[0] * e0 + Jp[3] * e1;
      w1 = Jp[1] * e0 + Jp[4] * e1;
      w2 = Jp[2] * e0 + Jp[5] * e1;
    }
    SegmentedAddToPoints(key, valid, w0, w1, w2, acc);
  }
}

// y_p = D'_p x_p + acc (and acc reset), thread per point entry.
__global__ void HessianPointKernel(int64_t np3, const float* dp, const float* xp, float* acc,
                                   float* yp) {
  const int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (k >= np3) return;
  yp[k] = dp[k] * xp[k] + acc[k];
  acc[k] = 0.0f;
}

// out = V_p^-1 in, per point (3x3 blocks).
__global__ void PointPreconditionKernel(int np, const float* vinv, const float* in, float* out) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= np) return;
  const float* Vi = vinv + 9 * static_cast<int64_t>(j);
  const float a = in[3 * j], b = in[3 * j + 1], c = in[3 * j + 2];
  for (int r = 0; r < 3; ++r) out[3 * j + r] = Vi[3 * r] * a + Vi[3 * r + 1] * b + Vi[3 * r + 2] * c;
}

// z = V^-1 acc per point (the Schur product), or with `bp` z = V^-1 (b_p - acc) (the
// back-substitution, acc = sum J'_p^T J'_c x_c); acc is reset for the next pass.
__global__ void SchurPointSolveKernel(int np, const float* vinv, const float* bp, float* acc, float* z) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= np) return;
  float s0 = acc[3 * j], s1 = acc[3 * j + 1], s2 = acc[3 * j + 2];
  if (bp) {
    s0 = bp[3 * j] - s0;
    s1 = bp[3 * j + 1] - s1;
    s2 = bp[3 * j + 2] - s2;
  }
  acc[3 * j] = acc[3 * j + 1] = acc[3 * j + 2] = 0.0f;
  const float* Vi = vinv + 9 * static_cast<int64_t>(j);
  for (int a = 0; a < 3; ++a) z[3 * j + a] = Vi[3 * a] * s0 + Vi[3 * a + 1] * s1 + Vi[3 * a + 2] * s2;
}

template <bool kSharedCameras, bool kRecompute>
__global__ void __launch_bounds__(kFusedThreads)
SchurCameraStreamKernel(ProblemView p, BlockSource src, const float* y,
                        const float* z, float* partial) {
  extern __shared__ float cam_acc[];
  const int64_t n = p.n;
  if (kSharedCameras) {
    for (int k = threadIdx.x; k < 9 * p.nc; k += blockDim.x) cam_acc[k] = 0.0f;
    __syncthreads();
  }
  float* sums = kSharedCameras ? cam_acc : partial;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int c = p.obs_camera[i];
    float Jc[18], Jp[6];
    LoadBlocksT<kRecompute>(p, src, i, Jc, z ? Jp : nullptr);
    float e0 = y[i], e1 = y[n + i];
    if (z) {  // Schur: e = y - J'_p z; Hessian (z null): e = y
      const float* zp = z + 3 * static_cast<int64_t>(p.obs_point[i]);
      const float z0 = zp[0], z1 = zp[1], z2 = zp[2];
      e0 -= Jp[0] * z0 + Jp[1] * z1 + Jp[2] * z2;
      e1 -= Jp[3] * z0 + Jp[4] * z1 + Jp[5] * z2;
    }
    float* out = sums + 9 * c;
#pragma unroll
    for (int a = 0; a < 9; ++a) atomicAdd(out + a, Jc[a] * e0 + Jc[9 + a] * e1);
  }
  if (kSharedCameras) {
    __syncthreads();
    float* mine = partial + static_cast<int64_t>(blockIdx.x) * 9 * p.nc;
    for (int k = threadIdx.x; k < 9 * p.nc; k += blockDim.x) mine[k] = cam_acc[k];
  }
}

// out_k = base_k + sign * sum over `parts` partials, base = D'_c x_c (product) or b_c.
__global__ void SchurReduceKernel(int64_t nc9, int parts, const float* partial, const float* dc,
                                  const float* x, const float* b, float sign, float* out) {
  const int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (k >= nc9) return;
  float s = 0.0f;
  for (int t = 0; t < parts; ++t) s += partial[t * nc9 + k];
  const float base = b ? b[k] : dc[k] * x[k];
  out[k] = base + sign * s;
}

// ---- Camera groups: the camera pass when the camera sums do not fit in shared memory ----
// The cameras are cut into groups of `size` consecutive indices whose sums do fit, and a
// second copy of the blocks is kept in (group, point, camera) order. Each block of the
// camera pass belongs to one group, streams that group's observations (coalesced) and
// adds J'_c^T e_o into its group's shared-memory sums; one partial per block, summed per
// camera by GroupReduceKernel. The pass recomputes e_o = J'_c x_c + sign J'_p z_p from x
// (small, cached) instead of storing y: within a group the observations are sorted by
// point, so the z reads are close to sequential.
struct GroupLayout {
  int size;                // cameras per group (the last may have fewer)
  int groups;
  const int* obs_begin;    // groups + 1: the group's observations in the grouped order
  const int* block_begin;  // groups + 1: the group's blocks
};

__global__ void GroupPointKeysKernel(int64_t n, const int* point, const int* camera, int size,
                                     int pt_bits, unsigned long long* keys, int* values) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  keys[i] = (static_cast<unsigned long long>(camera[i] / size) << pt_bits) | static_cast<unsigned>(point[i]);
  values[i] = static_cast<int>(i);
}

// Grouped copy of the stored blocks (after every linearization): position k takes the
// point-major observation perm[k].
__global__ void GatherPlanesKernel(int64_t n, const int* perm, const float* jc, const float* jp,
                                   float* gjc, float* gjp) {
  const int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (k >= n) return;
  const int64_t i = perm[k];
#pragma unroll
  for (int a = 0; a < 18; ++a) gjc[a * n + k] = jc[a * n + i];
#pragma unroll
  for (int a = 0; a < 6; ++a) gjp[a * n + k] = jp[a * n + i];
}

// Per block of group g: sum over the group's observations of J'_c^T e_o, with
// e_o = J'_c x_c (x non-null) + sign J'_p z_p (z non-null), into partial + 9 size blockIdx.x.
template <bool kRecompute>
__global__ void __launch_bounds__(kFusedThreads)
CameraGroupKernel(ProblemView p, BlockSource src, GroupLayout L, const float* x,
                  const float* z, float sign, float* partial) {
  extern __shared__ float cam_acc[];
  int g = 0;
  while (L.block_begin[g + 1] <= static_cast<int>(blockIdx.x)) ++g;
  const int c0 = g * L.size;
  const int count = min(L.size, p.nc - c0);
  for (int k = threadIdx.x; k < 9 * count; k += blockDim.x) cam_acc[k] = 0.0f;
  __syncthreads();
  const int64_t nb = L.block_begin[g + 1] - L.block_begin[g];
  const int64_t lb = static_cast<int64_t>(blockIdx.x) - L.block_begin[g];
  const int64_t o1 = L.obs_begin[g + 1];
  for (int64_t i = L.obs_begin[g] + lb * blockDim.x + threadIdx.x; i < o1; i += nb * blockDim.x) {
    const int c = p.obs_camera[i];
    float Jc[18], Jp[6];
    LoadBlocksT<kRecompute>(p, src, i, Jc, z ? Jp : nullptr);
    float e0 = 0.0f, e1 = 0.0f;
    if (x) {
      const float* xc = x + 9 * c;
#pragma unroll
      for (int a = 0; a < 9; ++a) {
        const float xa = __ldg(xc + a);
        e0 += Jc[a] * xa;
        e1 += Jc[9 + a] * xa;
      }
    }
    if (z) {
      const float* zp = z + 3 * static_cast<int64_t>(p.obs_point[i]);
      const float z0 = zp[0], z1 = zp[1], z2 = zp[2];
      e0 += sign * (Jp[0] * z0 + Jp[1] * z1 + Jp[2] * z2);
      e1 += sign * (Jp[3] * z0 + Jp[4] * z1 + Jp[5] * z2);
    }
    float* out = cam_acc + 9 * (c - c0);
#pragma unroll
    for (int a = 0; a < 9; ++a) atomicAdd(out + a, Jc[a] * e0 + Jc[9 + a] * e1);
  }
  __syncthreads();
  float* mine = partial + static_cast<int64_t>(blockIdx.x) * 9 * L.size;
  for (int k = threadIdx.x; k < 9 * count; k += blockDim.x) mine[k] = cam_acc[k];
}

// out_k = base_k + sign * (camera k / 9's group partials), base = D'_c x_c or b_c.
__global__ void GroupReduceKernel(int64_t nc9, GroupLayout L, const float* partial,
                                  const float* dc, const float* x, const float* b, float sign,
                                  float* out) {
  const int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (k >= nc9) return;
  const int g = static_cast<int>(k / 9) / L.size;
  const int64_t local = k - 9LL * g * L.size;
  float s = 0.0f;
  for (int t = L.block_begin[g]; t < L.block_begin[g + 1]; ++t) s += partial[static_cast<int64_t>(t) * 9 * L.size + local];
  const float base = b ? b[k] : dc[k] * x[k];
  out[k] = base + sign * s;
}

__global__ void CameraPreconditionKernel(int nc, const float* uinv, const float* in, float* out) {
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= 9LL * nc) return;
  const int64_t c = t / 9, a = t % 9;
  const float* U = uinv + 81 * c + 9 * a;
  const float* v = in + 9 * c;
  float s = 0;
  for (int k = 0; k < 9; ++k) s += U[k] * v[k];
  out[t] = s;
}

// Per observation |J' (x/s)|^2 into `out` (x already divided by the scales, in double).
__global__ void JacobianNormKernel(ProblemView p, BlockSource src,
                                   const double* xs, double* out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= p.n) return;
  float Jc[18], Jp[6];
  LoadBlocks(p, src, i, Jc, Jp);
  const double* xc = xs + 9 * p.obs_camera[i];
  const double* xp = xs + 9LL * p.nc + 3 * p.obs_point[i];
  double s = 0;
  for (int row = 0; row < 2; ++row) {
    double v = 0;
    for (int a = 0; a < 9; ++a) v += Jc[9 * row + a] * xc[a];
    for (int a = 0; a < 3; ++a) v += Jp[3 * row + a] * xp[a];
    s += v * v;
  }
  out[i] = s;
}

// Several dot products of float vectors at once, in double: per-block partial sums
// (warp shuffles, then shared memory), then one block sums the partials.
constexpr int kMaxDots = 4;
constexpr int kDotBlocks = 256;
struct DotArgs {
  const float* a[kMaxDots];
  const float* b[kMaxDots];
  int m;
};
__global__ void DotsPartialKernel(int64_t n, DotArgs args, double* partial) {
  __shared__ double sh[kMaxDots][kThreads / 32];
  double s[kMaxDots] = {0, 0, 0, 0};
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    for (int d = 0; d < args.m; ++d) s[d] += static_cast<double>(args.a[d][i]) * args.b[d][i];
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int d = 0; d < args.m; ++d) {
    const double w = WarpSum(s[d]);
    if (lane == 0) sh[d][warp] = w;
  }
  __syncthreads();
  if (threadIdx.x < args.m) {
    double t = 0.0;
    for (int w = 0; w < kThreads / 32; ++w) t += sh[threadIdx.x][w];
    partial[blockIdx.x * kMaxDots + threadIdx.x] = t;
  }
}
__global__ void DotsFinalKernel(int blocks, int m, const double* partial, double* out) {
  if (threadIdx.x >= m) return;
  double t = 0.0;
  for (int b = 0; b < blocks; ++b) t += partial[b * kMaxDots + threadIdx.x];
  out[threadIdx.x] = t;
}

// x += alpha p; r -= alpha q.
__global__ void CgUpdateKernel(int64_t n, float alpha, const float* p, const float* q, float* x,
                               float* r) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) { x[i] += alpha * p[i]; r[i] -= alpha * q[i]; }
}

// p = z + beta p.
__global__ void CgDirectionKernel(int64_t n, float beta, const float* z, float* p) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) p[i] = z[i] + beta * p[i];
}

// d = 1 for constant parameters, else clamp(diag, 1e-6, 1e32) / radius; and the scaled
// right-hand side b' = -g s in float (cameras then points, as the solver expects).
__global__ void DampingKernel(int64_t nc9, int64_t n, const unsigned char* fixed,
                              const double* diag, const double* g, const double* scale,
                              double inv_radius, double* d, float* bc, float* bp) {
  const int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (k >= n) return;
  const bool is_fixed = fixed && k < nc9 && fixed[k];
  d[k] = is_fixed ? 1.0 : fmin(fmax(diag[k], 1e-6), 1e32) * inv_radius;
  const float b = static_cast<float>(-g[k] * scale[k]);
  if (k < nc9) bc[k] = b; else bp[k - nc9] = b;
}

// dx = x' s (double); also writes x' promoted to double into xs (for |J dx|^2 = |J' x'|^2)
// and the per-entry products g dx, dx dx, x x for the step's scalars.
__global__ void StepKernel(int64_t nc9, int64_t n, const float* xc, const float* xp,
                           const double* scale, const double* g, const double* x, double* dx,
                           double* xs, double* g_dx, double* dx_dx, double* x_x) {
  const int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (k >= n) return;
  const double v = k < nc9 ? xc[k] : xp[k - nc9];
  xs[k] = v;
  const double step = v * scale[k];
  dx[k] = step;
  g_dx[k] = g[k] * step;
  dx_dx[k] = step * step;
  x_x[k] = x[k] * x[k];
}

__global__ void AddKernel(int64_t n, const double* a, const double* b, double* out) {
  const int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (k < n) out[k] = a[k] + b[k];
}

__global__ void FillKernel(int64_t n, double v, double* out) {
  const int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (k < n) out[k] = v;
}

__global__ void AbsKernel(int64_t n, const double* a, double* out) {
  const int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (k < n) out[k] = fabs(a[k]);
}

// ---- The block-CSR structure, built on the device ----------------------------------------
// Observations arrive in any order. A key-value radix sort by (point, camera) gives the
// point-major order; the positions where the point changes are the row pointers
// (interval starts: each observation whose point differs from its predecessor's writes
// itself as the start of every point in between, so points without observations get
// empty ranges). A stable sort of the point-major camera indices gives the camera-major
// index the same way. Chunks of the fused Schur kernel start where (point_ptr[p] + p) /
// kChunkObs changes, so a chunk holds at most kChunkObs points, and kChunkObs
// observations plus those of its last point.
static_assert(kChunkObs == kChunkPoints, "one chunk key bounds both");

int Bits(int64_t v) {
  int b = 1;
  while ((int64_t{1} << b) <= v) ++b;
  return b;
}

__global__ void PointCameraKeysKernel(int64_t n, const int* point, const int* camera, int cam_bits,
                                      unsigned long long* keys, int* values) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  keys[i] = (static_cast<unsigned long long>(point[i]) << cam_bits) | static_cast<unsigned>(camera[i]);
  values[i] = static_cast<int>(i);
}

// xy_out = xy_in / xy_scale (a power of two: exact, the same bits as the host's division).
__global__ void GatherObservationsKernel(int64_t n, const int* order, const int* camera_in,
                                         const int* point_in, const double2* xy_in,
                                         double xy_scale, int* camera_out, int* point_out,
                                         double2* xy_out) {
  const int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (k >= n) return;
  const int i = order[k];
  camera_out[k] = camera_in[i];
  point_out[k] = point_in[i];
  if (xy_out) {
    const double2 v = xy_in[i];
    xy_out[k] = make_double2(v.x / xy_scale, v.y / xy_scale);
  }
}

// ptr[q] = first position whose key sorted[.] / divisor is >= q, for q in [0, count];
// keys sorted (divisor > 1: camera groups of that many cameras).
__global__ void IntervalStartsKernel(int64_t n, const int* sorted, int count, int* ptr,
                                     int divisor = 1) {
  const int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (k >= n) return;
  const int here = sorted[k] / divisor;
  const int prev = k > 0 ? sorted[k - 1] / divisor : -1;
  for (int q = prev + 1; q <= here; ++q) ptr[q] = static_cast<int>(k);
  if (k == n - 1) {
    for (int q = here + 1; q <= count; ++q) ptr[q] = static_cast<int>(n);
  }
}

__global__ void IotaKernel(int64_t n, int* out) {
  const int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (k < n) out[k] = static_cast<int>(k);
}

__global__ void ChunkFlagsKernel(int np, const int* point_ptr, unsigned char* flags) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= np) return;
  const int64_t key = (static_cast<int64_t>(point_ptr[p]) + p) / kChunkObs;
  const int64_t prev = p > 0 ? (static_cast<int64_t>(point_ptr[p - 1]) + p - 1) / kChunkObs : -1;
  flags[p] = key != prev;
}

// Cameras per group of the camera pass (GroupLayout), 0 for none: none where the sums of
// all cameras fit in shared memory beside the fused kernel's point sums, else balanced
// groups whose sums take at most a quarter of a multiprocessor's shared memory (the pass
// runs two blocks per multiprocessor, limited by registers; measured on an H200 at 13,682
// cameras and 29M observations: groups of 1,000 and 1,520 cameras 2.39 and 2.38 ms per
// product, of 1,955, 2,737 and 3,421 cameras 3.12, 2.99 and 2.80 ms: the rest of the
// shared memory serves as L1 cache for the x and z reads).
// TIEPOINT_CUDA_CAMERA_GROUP_SIZE (tests, benchmarks): 0 never, N > 0 groups of N cameras.
int WantedGroupSize(int nc) {
  if (nc == 0) return 0;
  int device = 0, max_smem = 0, sm_smem = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sm_smem, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  const int cap = std::max(1, (max_smem - 1024) / 36);
  if (const char* env = std::getenv("TIEPOINT_CUDA_CAMERA_GROUP_SIZE")) {
    const int v = std::atoi(env);
    return v <= 0 ? 0 : std::min({v, nc, cap});
  }
  if (3LL * kChunkPoints * 4 + 36LL * nc <= max_smem - 8192) return 0;
  const int per_group = std::max(1, std::min(cap, (sm_smem / 4 - 1024) / 36));
  const int groups = (nc + per_group - 1) / per_group;
  return (nc + groups - 1) / groups;
}

class CudaPcg;
class CudaState;

class CudaLinearization : public Linearization {
 public:
  CudaLinearization(const BAProblem& problem, const LossFunction& loss, bool recompute)
      : p_(problem), loss_{static_cast<int>(loss.type), loss.scale}, recompute_(recompute) {}

  Status Initialize();
  bool allow_groups_ = true;  // false (tests): the fused kernel's global camera sums
  double Cost(const double* cameras, const double* points) override;
  double Linearize(const double* cameras, const double* points) override;
  void Gradient(double* g_cameras, double* g_points) override {
    std::copy(g_.begin(), g_.begin() + 9LL * p_.num_cameras, g_cameras);
    std::copy(g_.begin() + 9LL * p_.num_cameras, g_.end(), g_points);
  }
  void JtJDiagonal(double* d_cameras, double* d_points) override {
    std::copy(diag_.begin(), diag_.begin() + 9LL * p_.num_cameras, d_cameras);
    std::copy(diag_.begin() + 9LL * p_.num_cameras, diag_.end(), d_points);
  }
  double JacobianNormSquared(const double* x_cameras, const double* x_points) override;

  // Sum of a device array of doubles (CUB device reduction).
  double Sum(const double* d_values, int64_t n);

  // Sum and maximum of a device array of doubles (CUB device reductions).
  double Max(const double* d_values, int64_t n);

  // The same on parameters already in device memory (9 per camera, then 3 per point);
  // gradient and diagonal stay on the device (g_dev_, diag_dev_).
  double CostDevice(const double* d_params);
  double LinearizeDevice(const double* d_params);

 private:
  friend class CudaPcg;
  friend class CudaState;
  Status UploadParameters(const double* cameras, const double* points);
  Status BuildStructure();
  Status BuildCameraGroups();
  // The observations in camera-group order (GroupLayout), for the camera pass.
  ProblemView GroupView() const {
    return {p_.num_observations, p_.num_cameras, p_.num_points, g_obs_camera_.get(),
            g_obs_point_.get(), g_obs_xy_.get(), nullptr, nullptr, nullptr,
            p_.has_fixed_parameters ? fixed_.get() : nullptr, nullptr, 0};
  }
  BlockSource GroupSrc() const {
    return {recompute_ ? nullptr : gjc_.get(), recompute_ ? nullptr : gjp_.get(), lin_point_,
            scale_.get(), loss_};
  }
  BlockSource Src() const {
    return {recompute_ ? nullptr : jc_.get(), recompute_ ? nullptr : jp_.get(), lin_point_,
            scale_.get(), loss_};
  }
  // Host copies of the column scales, for the host-memory interface calls (tests).
  Status EnsureHostScales() {
    if (host_scales_valid_) return Status::Ok();
    const size_t nc9 = 9 * static_cast<size_t>(p_.num_cameras), np3 = 3 * static_cast<size_t>(p_.num_points);
    cam_scale_h_.resize(nc9);
    pt_scale_h_.resize(np3);
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpy(cam_scale_h_.data(), scale_.get(), nc9 * sizeof(double), cudaMemcpyDeviceToHost));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpy(pt_scale_h_.data(), scale_.get() + nc9, np3 * sizeof(double), cudaMemcpyDeviceToHost));
    host_scales_valid_ = true;
    return Status::Ok();
  }
  ProblemView View() const {
    return {p_.num_observations, p_.num_cameras, p_.num_points, obs_camera_.get(),
            obs_point_.get(), obs_xy_.get(), point_ptr_.get(), camera_ptr_.get(),
            camera_obs_.get(), p_.has_fixed_parameters ? fixed_.get() : nullptr,
            chunk_point_.get(), num_chunks_};
  }

  const BAProblem& p_;
  DeviceLoss loss_;
  bool scaled_ = false;
  Status error_;  // first CUDA error seen by an interface call that returns a scalar
  PoolArray<int> obs_camera_, obs_point_, point_ptr_, camera_ptr_, camera_obs_, chunk_point_;
  int num_chunks_ = 0;
  PoolArray<double> u0_;  // 81 per camera: J'_c^T J'_c at the last linearization
  // params_: 9 per camera then 3 per point; scale_ likewise (column scaling s).
  PoolArray<double> obs_xy_, params_, scale_, g_dev_, diag_dev_, per_obs_;
  const double* cam_scale() const { return scale_.get(); }
  const double* pt_scale() const { return scale_.get() + 9LL * p_.num_cameras; }
  PoolArray<unsigned char> fixed_;
  PoolArray<float> jc_, jp_, r_;  // structure-of-arrays planes (see ProblemView)
  // Camera groups (0: none): the grouped order (position -> point-major observation), its
  // indices (and coordinates, when recomputing), and the grouped copy of stored blocks,
  // gathered after every linearization.
  int group_size_ = 0, groups_ = 0;
  std::vector<int> group_obs_begin_h_;
  PoolArray<int> gperm_, g_obs_camera_, g_obs_point_, g_obs_begin_;
  PoolArray<double> g_obs_xy_;
  PoolArray<float> gjc_, gjp_;
  PoolArray<unsigned char> cub_temp_;
  PoolArray<double> sum_;
  std::vector<double> g_, diag_, cam_scale_h_, pt_scale_h_;
  bool host_scales_valid_ = false;
  bool recompute_ = false;             // blocks evaluated in every product, not stored
  int marks_ = 0;                      // linearizations so far (TIEPOINT_TIMING marks)
  const double* lin_point_ = nullptr;  // device parameters of the last linearization
};

Status CudaLinearization::Initialize() {
  const int64_t n = p_.num_observations;
  const int nc = p_.num_cameras, np = p_.num_points;
  // Everything the solve keeps on the device, to say how much is needed if it does not fit.
  // Per observation: indices and coordinates (4 + 4 + 16), the camera-major index (4),
  // the stored blocks (72 + 24), residual (8), a per-observation double (8) and the Schur
  // product's y (8); per point and per camera the vectors, scales, blocks and partials.
  const size_t blocks = static_cast<size_t>(n) * (72 + 24);
  const size_t need_recompute = n * (4 + 4 + 16 + 4 + 8 + 8 + 8) +
                                np * (4 + 24 + 24 + 24 + 36 + 12 + 40 + 36) +
                                nc * (4 + 72 + 72 + 72 + 324 + 648 + 36 + 200) + 512LL * 36 * nc;
  const size_t need = need_recompute + blocks;
  // Camera groups (many cameras): the grouped indices and permutation (12 per observation)
  // and either the grouped blocks (96) or the grouped coordinates (16). Without room for
  // them the camera sums go to global memory (the fused kernel), as before groups.
  int want_groups = allow_groups_ ? WantedGroupSize(nc) : 0;
  const size_t group_stored = want_groups ? n * (12 + 96) : 0;
  const size_t group_recompute = want_groups ? n * (12 + 16) : 0;
  size_t free_bytes = 0, total_bytes = 0;
  TimingMark("start");
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  {
    // Memory the stream-ordered pool holds but does not use is free to us too.
    int device = 0;
    cudaMemPool_t pool;
    uint64_t reserved = 0, used = 0;
    if (cudaGetDevice(&device) == cudaSuccess && cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess &&
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved) == cudaSuccess &&
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used) == cudaSuccess &&
        reserved > used) {
      free_bytes += reserved - used;
    }
    cudaGetLastError();
  }
  if (const char* limit = std::getenv("TIEPOINT_CUDA_MEMORY_LIMIT_MB")) {
    // Tests and users sharing a GPU: behave as if at most this much were free.
    free_bytes = std::min<size_t>(free_bytes, static_cast<size_t>(std::atoll(limit)) << 20);
  }
  if (!recompute_ && need > free_bytes && need_recompute <= free_bytes) {
    recompute_ = true;
    std::fprintf(stderr,
                 "tiepoint: the stored Jacobian blocks would need about %zu MiB of device memory "
                 "and %zu MiB are free: recomputing them in every product instead (about %zu "
                 "MiB; slower per iteration)\n",
                 need >> 20, free_bytes >> 20, need_recompute >> 20);
  }
  const size_t needed = recompute_ ? need_recompute : need;
  if (want_groups && needed + (recompute_ ? group_recompute : group_stored) > free_bytes) want_groups = 0;
  group_size_ = want_groups;
  if (needed > free_bytes) {
    return Status::OutOfMemory("the CUDA pcg solver needs about " + std::to_string(needed >> 20) +
                               " MiB of device memory even with the Jacobian blocks recomputed in "
                               "every product, and " + std::to_string(free_bytes >> 20) +
                               " MiB are free; use --device cpu");
  }
  TIEPOINT_RETURN_IF_ERROR(BuildStructure());
  TimingMark("structure (upload + sort)");
  if (group_size_ > 0) {
    TIEPOINT_RETURN_IF_ERROR(BuildCameraGroups());
    TimingMark("camera groups");
  }
  TIEPOINT_RETURN_IF_ERROR(u0_.Allocate(81LL * nc));
  if (p_.has_fixed_parameters) {
    TIEPOINT_RETURN_IF_ERROR(fixed_.Allocate(9LL * nc));
    TIEPOINT_RETURN_IF_ERROR(fixed_.Upload(p_.camera_param_fixed.data(), 9LL * nc));
  }
  TIEPOINT_RETURN_IF_ERROR(params_.Allocate(9LL * nc + 3LL * np));
  TIEPOINT_RETURN_IF_ERROR(scale_.Allocate(9LL * nc + 3LL * np));
  {
    const int64_t m = 9LL * nc + 3LL * np;
    FillKernel<<<Blocks(m), kThreads>>>(m, 1.0, scale_.get());
  }
  TIEPOINT_RETURN_IF_ERROR(g_dev_.Allocate(9LL * nc + 3LL * np));
  TIEPOINT_RETURN_IF_ERROR(diag_dev_.Allocate(9LL * nc + 3LL * np));
  TIEPOINT_RETURN_IF_ERROR(per_obs_.Allocate(std::max<int64_t>(n, 9LL * nc + 3LL * np)));
  if (!recompute_) {
    TIEPOINT_RETURN_IF_ERROR(jc_.Allocate(18 * n));
    TIEPOINT_RETURN_IF_ERROR(jp_.Allocate(6 * n));
    if (group_size_ > 0) {
      TIEPOINT_RETURN_IF_ERROR(gjc_.Allocate(18 * n));
      TIEPOINT_RETURN_IF_ERROR(gjp_.Allocate(6 * n));
    }
  }
  TIEPOINT_RETURN_IF_ERROR(r_.Allocate(2 * n));
  TIEPOINT_RETURN_IF_ERROR(sum_.Allocate(1));
  size_t sum_bytes = 0, max_bytes = 0;
  cub::DeviceReduce::Sum(nullptr, sum_bytes, per_obs_.get(), sum_.get(), per_obs_.size());
  cub::DeviceReduce::Max(nullptr, max_bytes, per_obs_.get(), sum_.get(), per_obs_.size());
  TIEPOINT_RETURN_IF_ERROR(cub_temp_.Allocate(std::max(sum_bytes, max_bytes)));
  return Status::Ok();
}

Status CudaLinearization::BuildStructure() {
  const int64_t n = p_.num_observations;
  const int nc = p_.num_cameras, np = p_.num_points;
  TIEPOINT_RETURN_IF_ERROR(obs_camera_.Allocate(n));
  TIEPOINT_RETURN_IF_ERROR(obs_point_.Allocate(n));
  TIEPOINT_RETURN_IF_ERROR(obs_xy_.Allocate(2 * n));
  TIEPOINT_RETURN_IF_ERROR(point_ptr_.Allocate(np + 1));
  TIEPOINT_RETURN_IF_ERROR(camera_ptr_.Allocate(nc + 1));
  TIEPOINT_RETURN_IF_ERROR(camera_obs_.Allocate(n));
  if (n == 0) {
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemset(point_ptr_.get(), 0, (np + 1) * sizeof(int)));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemset(camera_ptr_.get(), 0, (nc + 1) * sizeof(int)));
  } else {
    PoolArray<int> cam_in, pt_in, order_in, order;
    PoolArray<double> xy_in;
    PoolArray<unsigned long long> keys_in, keys;
    TimingMark("structure: allocations");
    TIEPOINT_RETURN_IF_ERROR(cam_in.Allocate(n));
    TIEPOINT_RETURN_IF_ERROR(pt_in.Allocate(n));
    TIEPOINT_RETURN_IF_ERROR(xy_in.Allocate(2 * n));
    TimingMark("structure: input allocations");
    TIEPOINT_RETURN_IF_ERROR(cam_in.Upload(p_.obs_camera, n));
    TIEPOINT_RETURN_IF_ERROR(pt_in.Upload(p_.obs_point, n));
    TIEPOINT_RETURN_IF_ERROR(xy_in.Upload(p_.obs_xy, 2 * n));
    TimingMark("structure: upload");
    TIEPOINT_RETURN_IF_ERROR(keys_in.Allocate(n));
    TIEPOINT_RETURN_IF_ERROR(keys.Allocate(n));
    TIEPOINT_RETURN_IF_ERROR(order_in.Allocate(n));
    TIEPOINT_RETURN_IF_ERROR(order.Allocate(n));
    const int cam_bits = Bits(nc), pt_bits = Bits(np);
    PointCameraKeysKernel<<<Blocks(n), kThreads>>>(n, pt_in.get(), cam_in.get(), cam_bits,
                                                   keys_in.get(), order_in.get());
    // (point, camera) order.
    size_t temp_bytes = 0;
    cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys_in.get(), keys.get(), order_in.get(),
                                    order.get(), n, 0, cam_bits + pt_bits);
    PoolArray<unsigned char> temp;
    TIEPOINT_RETURN_IF_ERROR(temp.Allocate(temp_bytes));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(
        temp.get(), temp_bytes, keys_in.get(), keys.get(), order_in.get(), order.get(), n, 0,
        cam_bits + pt_bits));
    GatherObservationsKernel<<<Blocks(n), kThreads>>>(
        n, order.get(), cam_in.get(), pt_in.get(), reinterpret_cast<const double2*>(xy_in.get()),
        p_.obs_scale, obs_camera_.get(), obs_point_.get(), reinterpret_cast<double2*>(obs_xy_.get()));
    IntervalStartsKernel<<<Blocks(n), kThreads>>>(n, obs_point_.get(), np, point_ptr_.get());
    // Camera-major index: a stable sort of the cameras, carrying point-major positions.
    IotaKernel<<<Blocks(n), kThreads>>>(n, order_in.get());
    size_t temp2 = 0;
    cub::DeviceRadixSort::SortPairs(nullptr, temp2, obs_camera_.get(), cam_in.get(),
                                    order_in.get(), camera_obs_.get(), n, 0, cam_bits);
    if (temp2 > temp_bytes) {
      TIEPOINT_RETURN_IF_ERROR(temp.Allocate(temp2));
      temp_bytes = temp2;
    }
    TIEPOINT_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(
        temp.get(), temp_bytes, obs_camera_.get(), cam_in.get(), order_in.get(),
        camera_obs_.get(), n, 0, cam_bits));
    IntervalStartsKernel<<<Blocks(n), kThreads>>>(n, cam_in.get(), nc, camera_ptr_.get());
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  // Chunks for the fused Schur kernel: compaction of the chunk-start flags.
  num_chunks_ = 0;
  TIEPOINT_RETURN_IF_ERROR(chunk_point_.Allocate(np + 1));
  if (np > 0) {
    PoolArray<unsigned char> flags, temp;
    PoolArray<int> count;
    TIEPOINT_RETURN_IF_ERROR(flags.Allocate(np));
    TIEPOINT_RETURN_IF_ERROR(count.Allocate(1));
    ChunkFlagsKernel<<<Blocks(np), kThreads>>>(np, point_ptr_.get(), flags.get());
    thrust::counting_iterator<int> points(0);
    size_t temp_bytes = 0;
    cub::DeviceSelect::Flagged(nullptr, temp_bytes, points, flags.get(), chunk_point_.get(),
                               count.get(), np);
    TIEPOINT_RETURN_IF_ERROR(temp.Allocate(temp_bytes));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cub::DeviceSelect::Flagged(
        temp.get(), temp_bytes, points, flags.get(), chunk_point_.get(), count.get(), np));
    TIEPOINT_RETURN_IF_ERROR(count.Download(&num_chunks_, 1));
  }
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpy(chunk_point_.get() + num_chunks_, &np, sizeof(int),
                                           cudaMemcpyHostToDevice));
  return Status::Ok();
}

// The (camera group, point) order: a stable radix sort of the point-major observations
// (so cameras stay sorted within a point), the gathered indices and the groups' bounds.
Status CudaLinearization::BuildCameraGroups() {
  const int64_t n = p_.num_observations;
  const int nc = p_.num_cameras, np = p_.num_points;
  groups_ = (nc + group_size_ - 1) / group_size_;
  TIEPOINT_RETURN_IF_ERROR(gperm_.Allocate(n));
  TIEPOINT_RETURN_IF_ERROR(g_obs_camera_.Allocate(n));
  TIEPOINT_RETURN_IF_ERROR(g_obs_point_.Allocate(n));
  TIEPOINT_RETURN_IF_ERROR(g_obs_begin_.Allocate(groups_ + 1));
  if (recompute_) TIEPOINT_RETURN_IF_ERROR(g_obs_xy_.Allocate(2 * n));
  group_obs_begin_h_.assign(groups_ + 1, 0);
  if (n == 0) return g_obs_begin_.Upload(group_obs_begin_h_.data(), groups_ + 1);
  {
    PoolArray<unsigned long long> keys_in, keys;
    PoolArray<int> order_in;
    PoolArray<unsigned char> temp;
    TIEPOINT_RETURN_IF_ERROR(keys_in.Allocate(n));
    TIEPOINT_RETURN_IF_ERROR(keys.Allocate(n));
    TIEPOINT_RETURN_IF_ERROR(order_in.Allocate(n));
    const int pt_bits = Bits(np), bits = pt_bits + Bits(groups_);
    GroupPointKeysKernel<<<Blocks(n), kThreads>>>(n, obs_point_.get(), obs_camera_.get(), group_size_,
                                                  pt_bits, keys_in.get(), order_in.get());
    size_t temp_bytes = 0;
    cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys_in.get(), keys.get(), order_in.get(),
                                    gperm_.get(), n, 0, bits);
    TIEPOINT_RETURN_IF_ERROR(temp.Allocate(temp_bytes));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(
        temp.get(), temp_bytes, keys_in.get(), keys.get(), order_in.get(), gperm_.get(), n, 0, bits));
  }
  GatherObservationsKernel<<<Blocks(n), kThreads>>>(
      n, gperm_.get(), obs_camera_.get(), obs_point_.get(),
      reinterpret_cast<const double2*>(obs_xy_.get()), 1.0, g_obs_camera_.get(), g_obs_point_.get(),
      recompute_ ? reinterpret_cast<double2*>(g_obs_xy_.get()) : nullptr);
  IntervalStartsKernel<<<Blocks(n), kThreads>>>(n, g_obs_camera_.get(), groups_,
                                                g_obs_begin_.get(), group_size_);
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return g_obs_begin_.Download(group_obs_begin_h_.data(), groups_ + 1);
}

double CudaLinearization::Sum(const double* d_values, int64_t n) {
  size_t temp_bytes = cub_temp_.size();
  cub::DeviceReduce::Sum(cub_temp_.get(), temp_bytes, d_values, sum_.get(), n);
  double s = 0.0;
  const Status st = sum_.Download(&s, 1);
  if (!st.ok() && error_.ok()) Set(error_, st);
  return s;
}

double CudaLinearization::Max(const double* d_values, int64_t n) {
  size_t temp_bytes = cub_temp_.size();
  cub::DeviceReduce::Max(cub_temp_.get(), temp_bytes, d_values, sum_.get(), n);
  double m = 0.0;
  const Status st = sum_.Download(&m, 1);
  if (!st.ok() && error_.ok()) Set(error_, st);
  return m;
}

Status CudaLinearization::UploadParameters(const double* cameras, const double* points) {
  const size_t nc9 = 9 * static_cast<size_t>(p_.num_cameras), np3 = 3 * static_cast<size_t>(p_.num_points);
  TIEPOINT_RETURN_IF_ERROR(UploadStaged(params_.get(), cameras, nc9 * sizeof(double)));
  TIEPOINT_RETURN_IF_ERROR(UploadStaged(params_.get() + nc9, points, np3 * sizeof(double)));
  return Status::Ok();
}

double CudaLinearization::Cost(const double* cameras, const double* points) {
  const Status st = UploadParameters(cameras, points);
  if (!st.ok()) { Set(error_, st); return std::numeric_limits<double>::infinity(); }
  return CostDevice(params_.get());
}

double CudaLinearization::CostDevice(const double* d_params) {
  EvaluateKernel<<<Blocks(p_.num_observations), kThreads>>>(View(), loss_, d_params,
                                                           d_params + 9LL * p_.num_cameras,
                                                           cam_scale(), pt_scale(), nullptr,
                                                           nullptr, nullptr, per_obs_.get());
  const double cost = Sum(per_obs_.get(), p_.num_observations);
  return std::isfinite(cost) ? cost : std::numeric_limits<double>::infinity();
}

double CudaLinearization::Linearize(const double* cameras, const double* points) {
  const Status st = UploadParameters(cameras, points);
  if (!st.ok()) { Set(error_, st); return std::numeric_limits<double>::infinity(); }
  const double cost = LinearizeDevice(params_.get());
  g_.resize(9LL * p_.num_cameras + 3LL * p_.num_points);
  diag_.resize(g_.size());
  Status s = g_dev_.Download(g_.data(), g_.size());
  if (s.ok()) Set(s, diag_dev_.Download(diag_.data(), diag_.size()));
  if (!s.ok()) { Set(error_, s); return std::numeric_limits<double>::infinity(); }
  return cost;
}

double CudaLinearization::LinearizeDevice(const double* d_params) {
  const ProblemView v = View();
  lin_point_ = d_params;
  const double* d_cams = d_params;
  const double* d_pts = d_params + 9LL * v.nc;
  EvaluateKernel<<<Blocks(v.n), kThreads>>>(v, loss_, d_cams, d_pts, cam_scale(),
                                           pt_scale(), jc_.get(), jp_.get(), r_.get(),
                                           per_obs_.get());
  const double cost = Sum(per_obs_.get(), v.n);
  const bool mark = marks_++ < 2;  // TIEPOINT_TIMING: the first two linearizations
  if (mark) TimingMark("linearize: evaluation");
  double* gdev = g_dev_.get();
  double* ddev = diag_dev_.get();
  PointGradientKernel<<<Blocks(v.np), kThreads>>>(v, Src(), r_.get(), pt_scale(),
                                                  gdev + 9LL * v.nc, ddev + 9LL * v.nc);
  if (v.nc > 0) {
    CameraGramKernel<<<v.nc, kGramThreads>>>(v, Src(), r_.get(), cam_scale(), u0_.get(),
                                             gdev, ddev);
  }
  if (mark) TimingMark("linearize: point gradient, Gram");
  if (!scaled_) {
    // Fix the column scaling s = 1 / sqrt(diag(J^T J)) on the device, rescale the stored
    // blocks and the Gram blocks; the host copy of the scales is fetched when an interface
    // call needs it.
    const int64_t m = 9LL * v.nc + 3LL * v.np;
    ColumnScaleKernel<<<Blocks(m), kThreads>>>(m, ddev, scale_.get());
    if (!recompute_) RescaleKernel<<<Blocks(v.n), kThreads>>>(v, cam_scale(), pt_scale(), jc_.get(), jp_.get());
    if (v.nc > 0) ScaleGramKernel<<<Blocks(81LL * v.nc), kThreads>>>(v.nc, cam_scale(), u0_.get());
    scaled_ = true;
    host_scales_valid_ = false;
    TimingMark("first scaling");
  }
  if (group_size_ > 0 && !recompute_ && v.n > 0) {
    GatherPlanesKernel<<<Blocks(v.n), kThreads>>>(v.n, gperm_.get(), jc_.get(), jp_.get(),
                                                  gjc_.get(), gjp_.get());
    if (mark) TimingMark("linearize: grouped copy");
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    Set(error_, Status::Unavailable(std::string("CUDA kernel failed: ") + cudaGetErrorString(err)));
    return std::numeric_limits<double>::infinity();
  }
  return std::isfinite(cost) ? cost : std::numeric_limits<double>::infinity();
}

double CudaLinearization::JacobianNormSquared(const double* xc, const double* xp) {
  const int64_t nc9 = 9LL * p_.num_cameras, np3 = 3LL * p_.num_points;
  std::vector<double> xs(nc9 + np3);
  {
    const Status hs = EnsureHostScales();
    if (!hs.ok()) { Set(error_, hs); return 0.0; }
  }
  for (int64_t k = 0; k < nc9; ++k) xs[k] = xc[k] / cam_scale_h_[k];
  for (int64_t k = 0; k < np3; ++k) xs[nc9 + k] = xp[k] / pt_scale_h_[k];
  // g_dev_ is free between linearizations: reuse it for x / s.
  Status s = g_dev_.Upload(xs.data(), xs.size());
  if (!s.ok()) { Set(error_, s); return 0.0; }
  JacobianNormKernel<<<Blocks(p_.num_observations), kThreads>>>(View(), Src(),
                                                               g_dev_.get(), per_obs_.get());
  return Sum(per_obs_.get(), p_.num_observations);
}

class CudaPcg : public LinearSolver {
 public:
  CudaPcg(const PcgOptions& o, CudaLinearization& lin) : o_(o), lin_(lin) {}
  bool force_global_camera_sums_ = false;  // tests: exercise the global-memory path

  Status Initialize() {
    const int nc = lin_.p_.num_cameras;
    const int64_t nc9 = 9LL * nc, np3 = 3LL * lin_.p_.num_points;
    for (PoolArray<float>* a : {&b_, &bc_, &x_, &r_, &z_, &q_, &dir_, &dc_}) TIEPOINT_RETURN_IF_ERROR(a->Allocate(nc9));
    for (PoolArray<float>* a : {&bp_, &xp_, &dp_}) TIEPOINT_RETURN_IF_ERROR(a->Allocate(np3));
    TIEPOINT_RETURN_IF_ERROR(uinv_.Allocate(81LL * nc));
    TIEPOINT_RETURN_IF_ERROR(vinv_.Allocate(9LL * lin_.p_.num_points));
    TIEPOINT_RETURN_IF_ERROR(d_.Allocate(nc9 + np3));
    TIEPOINT_RETURN_IF_ERROR(dot_partial_.Allocate(kDotBlocks * kMaxDots));
    TIEPOINT_RETURN_IF_ERROR(dot_out_.Allocate(kMaxDots));
    // The fused Schur kernel keeps the camera sums in shared memory when they fit (one
    // partial per block, summed by SchurReduceKernel), else adds them in global memory.
    int device = 0, sms = 1, max_smem = 0;
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    const size_t point_bytes = 3 * kChunkPoints * sizeof(float);
    const size_t camera_bytes = 9 * static_cast<size_t>(nc) * sizeof(float);
    shared_cameras_ = !force_global_camera_sums_ &&
                      point_bytes + camera_bytes <= static_cast<size_t>(max_smem) - 8192;
    smem_bytes_ = point_bytes + (shared_cameras_ ? camera_bytes : 0);
    int per_sm = 1;
    if (shared_cameras_) {
      const int sb = static_cast<int>(smem_bytes_);
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(SchurFusedKernel<false, true, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, sb));
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(SchurFusedKernel<true, true, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, sb));
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(SchurFusedKernel<false, true, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, sb));
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(SchurFusedKernel<true, true, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, sb));
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, SchurFusedKernel<false, true, false>, kFusedThreads, smem_bytes_));
    } else {
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, SchurFusedKernel<false, false, false>, kFusedThreads, smem_bytes_));
    }
    grid_ = std::max(1, std::min(std::max(1, per_sm) * sms, std::max(1, lin_.num_chunks_)));
    parts_ = shared_cameras_ ? grid_ : 1;
    // The streaming product: camera pass with the camera sums only in shared memory.
    int per_sm3 = 1, per_sm1 = 1;
    if (shared_cameras_) {
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(SchurCameraStreamKernel<true, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(camera_bytes)));
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(SchurCameraStreamKernel<true, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(camera_bytes)));
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm3, SchurCameraStreamKernel<true, false>, kFusedThreads, camera_bytes));
    } else {
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm3, SchurCameraStreamKernel<false, false>, kFusedThreads, 0));
    }
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm1, SchurStreamKernel<false>, kThreads, 0));
    const int64_t n = lin_.p_.num_observations;
    grid3_ = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(std::max(1, per_sm3) * sms, (n + kFusedThreads - 1) / kFusedThreads)));
    grid1_ = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(std::max(1, per_sm1) * sms * 4, Blocks(n))));
    parts3_ = shared_cameras_ ? grid3_ : 1;
    int64_t partial_floats = std::max(parts_, parts3_) * nc9;
    if (lin_.group_size_ > 0) {
      // Camera groups: blocks for each group in proportion to its observations (at least
      // one), as many in all as fit on the device at once.
      const int size = lin_.group_size_, groups = lin_.groups_;
      group_bytes_ = 36 * static_cast<size_t>(size);
      const int gb = static_cast<int>(group_bytes_);
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(CameraGroupKernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, gb));
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(CameraGroupKernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, gb));
      int per_smg = 1;
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_smg, CameraGroupKernel<false>, kFusedThreads, group_bytes_));
      const int total = std::max(groups, std::max(1, per_smg) * sms);
      const std::vector<int>& ob = lin_.group_obs_begin_h_;
      std::vector<int> bb(groups + 1, 0);
      for (int g = 0; g < groups; ++g) {
        const int64_t count = ob[g + 1] - ob[g];
        const int64_t useful = std::max<int64_t>(1, (count + kFusedThreads - 1) / kFusedThreads);
        const int64_t share = std::llround(static_cast<double>(total) * count / std::max<int64_t>(1, n));
        bb[g + 1] = bb[g] + static_cast<int>(std::max<int64_t>(1, std::min(share, useful)));
      }
      group_grid_ = bb[groups];
      TIEPOINT_RETURN_IF_ERROR(group_block_begin_.Allocate(groups + 1));
      TIEPOINT_RETURN_IF_ERROR(group_block_begin_.Upload(bb.data(), groups + 1));
      layout_ = {size, groups, lin_.g_obs_begin_.get(), group_block_begin_.get()};
      partial_floats = std::max<int64_t>(partial_floats, static_cast<int64_t>(group_grid_) * 9 * size);
    }
    TIEPOINT_RETURN_IF_ERROR(partial_.Allocate(std::max<int64_t>(1, partial_floats)));
    TIEPOINT_RETURN_IF_ERROR(y_.Allocate(2 * n));
    TIEPOINT_RETURN_IF_ERROR(acc_.Allocate(3LL * lin_.p_.num_points));
    TIEPOINT_RETURN_IF_ERROR(zp_.Allocate(3LL * lin_.p_.num_points));
    if (lin_.p_.num_points > 0) {
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemset(acc_.get(), 0, 3LL * lin_.p_.num_points * sizeof(float)));
    }
    if (o_.kind == PcgKind::kHessian) {
      for (PoolArray<float>* a : {&hx_, &hr_, &hz_, &hq_, &hdir_, &hb_}) TIEPOINT_RETURN_IF_ERROR(a->Allocate(nc9 + np3));
    }
    return Status::Ok();
  }

  Status Solve(const double* d_cameras, const double* d_points, const double* rhs_cameras,
               const double* rhs_points, double* dx_cameras, double* dx_points,
               LinearSolverSummary* summary) override;
  // CG on the device: damping `d_dev` (double, cameras then points), scaled right-hand
  // side in bc_, bp_; leaves the scaled solution in x_ (cameras) and xp_ (points).
  Status SolveDevice(const double* d_dev, LinearSolverSummary* summary);
  Status MeasureBandwidth(int repetitions, CudaBandwidthReport* report);
  Status OperatorsForTest(const double* d, const std::vector<float>& x,
                          const std::vector<float>& bc, const std::vector<float>& bp,
                          std::vector<float>* sx, std::vector<float>* reduced);

 private:
  friend class CudaState;
  // Up to kMaxDots dot products of nc9-long device vectors, one transfer to the host.
  Status Dots(std::initializer_list<std::pair<const float*, const float*>> pairs, int64_t n,
              double* out) {
    DotArgs args{};
    args.m = 0;
    for (const auto& ab : pairs) {
      args.a[args.m] = ab.first;
      args.b[args.m] = ab.second;
      ++args.m;
    }
    const int blocks = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(kDotBlocks, Blocks(n))));
    DotsPartialKernel<<<blocks, kThreads>>>(n, args, dot_partial_.get());
    DotsFinalKernel<<<1, 32>>>(blocks, args.m, dot_partial_.get(), dot_out_.get());
    return dot_out_.Download(out, args.m);
  }
  double Dot(const PoolArray<float>& a, const PoolArray<float>& b, int64_t n) {
    double v = 0.0;
    const Status s = Dots({{a.get(), b.get()}}, n, &v);
    if (!s.ok() && lin_.error_.ok()) Set(lin_.error_, s);
    return v;
  }
  // y = S x (kRhs false), or y = b - W V^-1 bp (kRhs true, x unused).
  template <bool kRhs>
  void Schur(const float* x, const float* bp, const float* b, float* y) {
    const ProblemView v = lin_.View();
    const int64_t nc9 = 9LL * v.nc;
    if (nc9 == 0) return;
    const BlockSource src = lin_.Src();
    const bool rc = lin_.recompute_;
    if (Grouped() && kRhs) {
      // b_c - W V^-1 b_p: z = V^-1 b_p, then the camera pass with e = J'_p z.
      if (v.np > 0) PointPreconditionKernel<<<Blocks(v.np), kThreads>>>(v.np, vinv_.get(), bp, zp_.get());
      GroupPass(nullptr, zp_.get(), 1.0f);
      GroupReduceKernel<<<Blocks(nc9), kThreads>>>(nc9, layout_, partial_.get(), dc_.get(), x, b, -1.0f, y);
      return;
    }
    if (shared_cameras_) {
      if (rc) {
        SchurFusedKernel<kRhs, true, true><<<grid_, kFusedThreads, smem_bytes_>>>(v, src, vinv_.get(), x, bp, partial_.get());
      } else {
        SchurFusedKernel<kRhs, true, false><<<grid_, kFusedThreads, smem_bytes_>>>(v, src, vinv_.get(), x, bp, partial_.get());
      }
    } else {
      cudaMemsetAsync(partial_.get(), 0, nc9 * sizeof(float));
      if (rc) {
        SchurFusedKernel<kRhs, false, true><<<grid_, kFusedThreads, smem_bytes_>>>(v, src, vinv_.get(), x, bp, partial_.get());
      } else {
        SchurFusedKernel<kRhs, false, false><<<grid_, kFusedThreads, smem_bytes_>>>(v, src, vinv_.get(), x, bp, partial_.get());
      }
    }
    SchurReduceKernel<<<Blocks(nc9), kThreads>>>(nc9, parts_, partial_.get(), dc_.get(), x, b,
                                                 kRhs ? -1.0f : 1.0f, y);
  }
  // S x (the CG product): by the three streaming passes when the camera sums fit in shared
  // memory (measured on an H100 at 10M observations: 1.02 ms against 1.28 ms for the fused
  // kernel), else by the fused kernel (its global-memory path adds 9 atomics per
  // observation only once, where the streaming camera pass would too: 4.2 ms against 5.4
  // ms at 29M observations and 13,682 cameras). With camera groups (too many cameras for
  // shared memory) the streaming point pass, then the grouped camera pass (GroupPass),
  // which also gives the reduced right-hand side; else the right-hand side, once per step,
  // takes the fused kernel.
  bool Streaming() const { return shared_cameras_ || Grouped(); }
  // The streaming point pass: per-point sums of J'_p^T J'_c x into acc_ (and J'_c x into y
  // unless y is null).
  void PointPass(const float* x, float* y) {
    const ProblemView v = lin_.View();
    if (v.n == 0) return;
    if (lin_.recompute_) {
      SchurStreamKernel<true><<<grid1_, kThreads>>>(v, lin_.Src(), x, y, acc_.get());
    } else {
      SchurStreamKernel<false><<<grid1_, kThreads>>>(v, lin_.Src(), x, y, acc_.get());
    }
  }
  bool Grouped() const { return lin_.group_size_ > 0; }
  // The camera pass by camera groups: partials of J'_c^T (J'_c x_c + sign J'_p z_p).
  void GroupPass(const float* x, const float* z, float sign) {
    if (lin_.recompute_) {
      CameraGroupKernel<true><<<group_grid_, kFusedThreads, group_bytes_>>>(
          lin_.GroupView(), lin_.GroupSrc(), layout_, x, z, sign, partial_.get());
    } else {
      CameraGroupKernel<false><<<group_grid_, kFusedThreads, group_bytes_>>>(
          lin_.GroupView(), lin_.GroupSrc(), layout_, x, z, sign, partial_.get());
    }
  }
  // The camera pass of the streaming products (z null: Hessian).
  void CameraPass(const float* y, const float* z) {
    const ProblemView v = lin_.View();
    const BlockSource src = lin_.Src();
    const bool rc = lin_.recompute_;
    if (shared_cameras_) {
      const size_t bytes = 9 * static_cast<size_t>(v.nc) * sizeof(float);
      if (rc) {
        SchurCameraStreamKernel<true, true><<<grid3_, kFusedThreads, bytes>>>(v, src, y, z, partial_.get());
      } else {
        SchurCameraStreamKernel<true, false><<<grid3_, kFusedThreads, bytes>>>(v, src, y, z, partial_.get());
      }
    } else {
      cudaMemsetAsync(partial_.get(), 0, 9LL * v.nc * sizeof(float));
      if (rc) {
        SchurCameraStreamKernel<false, true><<<grid3_, kFusedThreads>>>(v, src, y, z, partial_.get());
      } else {
        SchurCameraStreamKernel<false, false><<<grid3_, kFusedThreads>>>(v, src, y, z, partial_.get());
      }
    }
  }
  // (J'^T J' + D') x over cameras then points (pcg-hessian).
  void ApplyHessian(const float* x, float* out) {
    const ProblemView v = lin_.View();
    const int64_t nc9 = 9LL * v.nc, np3 = 3LL * v.np;
    float* e = Grouped() ? nullptr : y_.get();  // the grouped camera pass recomputes it
    if (v.n > 0) {
      if (lin_.recompute_) {
        HessianStreamKernel<true><<<grid1_, kThreads>>>(v, lin_.Src(), x, e, acc_.get());
      } else {
        HessianStreamKernel<false><<<grid1_, kThreads>>>(v, lin_.Src(), x, e, acc_.get());
      }
    }
    if (np3 > 0) HessianPointKernel<<<Blocks(np3), kThreads>>>(np3, dp_.get(), x + nc9, acc_.get(), out + nc9);
    if (nc9 == 0) return;
    if (Grouped()) {
      GroupPass(x, x + nc9, 1.0f);
      GroupReduceKernel<<<Blocks(nc9), kThreads>>>(nc9, layout_, partial_.get(), dc_.get(), x,
                                                   nullptr, 1.0f, out);
      return;
    }
    CameraPass(y_.get(), nullptr);
    SchurReduceKernel<<<Blocks(nc9), kThreads>>>(nc9, parts3_, partial_.get(), dc_.get(), x,
                                                 nullptr, 1.0f, out);
  }
  void PreconditionAll(const float* in, float* out) {
    const ProblemView v = lin_.View();
    const int64_t nc9 = 9LL * v.nc;
    if (nc9 > 0) CameraPreconditionKernel<<<Blocks(nc9), kThreads>>>(v.nc, uinv_.get(), in, out);
    if (v.np > 0) PointPreconditionKernel<<<Blocks(v.np), kThreads>>>(v.np, vinv_.get(), in + nc9, out + nc9);
  }
  Status SolveHessianDevice(LinearSolverSummary* summary);
  // Preconditioned CG on A x = b from x = 0, the same rules as the CPU solver; two
  // transfers to the host per iteration: p.q, then (r.r, x.b, x.r, r.z) together (the
  // preconditioned residual is computed before the stopping test).
  template <typename Apply, typename Precondition>
  Status Cg(int64_t m, PoolArray<float>& b, PoolArray<float>& x, PoolArray<float>& r,
            PoolArray<float>& z, PoolArray<float>& q, PoolArray<float>& dir, Apply apply,
            Precondition precondition, int* iterations) {
    int it = 0;
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemset(x.get(), 0, m * sizeof(float)));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpy(r.get(), b.get(), m * sizeof(float), cudaMemcpyDeviceToDevice));
    const double r0 = std::sqrt(Dot(r, r, m));
    if (r0 > 0.0) {
      precondition(r.get(), z.get());
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpy(dir.get(), z.get(), m * sizeof(float), cudaMemcpyDeviceToDevice));
      double rz = Dot(r, z, m);
      double q_prev = 0.0;
      while (it < o_.max_iterations) {
        apply(dir.get(), q.get());
        const double pq = Dot(dir, q, m);
        if (!(pq > 0.0) || !std::isfinite(pq)) break;
        const float alpha = static_cast<float>(rz / pq);
        CgUpdateKernel<<<Blocks(m), kThreads>>>(m, alpha, dir.get(), q.get(), x.get(), r.get());
        precondition(r.get(), z.get());
        double dots[4];
        TIEPOINT_RETURN_IF_ERROR(Dots({{r.get(), r.get()}, {x.get(), b.get()}, {x.get(), r.get()}, {r.get(), z.get()}}, m, dots));
        ++it;
        if (it >= o_.min_iterations) {
          if (o_.termination == CgTermination::kResidual) {
            if (std::sqrt(dots[0]) <= o_.eta * r0) break;
          } else {
            const double q_now = -0.5 * (dots[1] + dots[2]);
            if (it > 1 && q_now < 0.0 && it * (q_now - q_prev) / q_now < o_.eta) break;
            q_prev = q_now;
          }
        }
        const double rz_new = dots[3];
        const float beta = static_cast<float>(rz_new / rz);
        rz = rz_new;
        CgDirectionKernel<<<Blocks(m), kThreads>>>(m, beta, z.get(), dir.get());
      }
    }
    *iterations = it;
    return Status::Ok();
  }

  void ApplySchur(const float* x, float* out) {
    if (!Streaming()) {
      Schur<false>(x, nullptr, nullptr, out);
      return;
    }
    const ProblemView v = lin_.View();
    const int64_t nc9 = 9LL * v.nc;
    if (nc9 == 0) return;
    if (v.n > 0) {
      PointPass(x, Grouped() ? nullptr : y_.get());  // the grouped camera pass recomputes y
      SchurPointSolveKernel<<<Blocks(v.np), kThreads>>>(v.np, vinv_.get(), nullptr, acc_.get(), zp_.get());
    }
    if (Grouped()) {
      GroupPass(x, zp_.get(), -1.0f);
      GroupReduceKernel<<<Blocks(nc9), kThreads>>>(nc9, layout_, partial_.get(), dc_.get(), x,
                                                   nullptr, 1.0f, out);
      return;
    }
    CameraPass(y_.get(), zp_.get());
    SchurReduceKernel<<<Blocks(nc9), kThreads>>>(nc9, parts3_, partial_.get(), dc_.get(), x,
                                                 nullptr, 1.0f, out);
  }

  PcgOptions o_;
  CudaLinearization& lin_;
  PoolArray<float> b_, bc_, x_, r_, z_, q_, dir_, dc_, bp_, xp_, dp_, uinv_, vinv_, partial_;
  PoolArray<float> y_, acc_, zp_;  // the streaming product: J'_c x, per-point sums, V^-1 sums
  PoolArray<float> hx_, hr_, hz_, hq_, hdir_, hb_;  // pcg-hessian: CG over cameras then points
  int grid1_ = 1, grid3_ = 1, parts3_ = 1;
  PoolArray<double> d_, dot_partial_, dot_out_;
  bool shared_cameras_ = false;
  size_t smem_bytes_ = 0;
  int solve_marks_ = 0;
  // Camera groups (lin_.group_size_ > 0): blocks per group, the pass's grid and shared memory.
  PoolArray<int> group_block_begin_;
  GroupLayout layout_{};
  int group_grid_ = 0;
  size_t group_bytes_ = 0;
  int grid_ = 1, parts_ = 1;
};

Status CudaPcg::Solve(const double* d_cameras, const double* d_points, const double* rhs_cameras,
                      const double* rhs_points, double* dx_cameras, double* dx_points,
                      LinearSolverSummary* summary) {
  TIEPOINT_RETURN_IF_ERROR(lin_.error_);
  const int64_t nc9 = 9LL * lin_.p_.num_cameras, np3 = 3LL * lin_.p_.num_points;
  std::vector<double> d(nc9 + np3);
  std::copy(d_cameras, d_cameras + nc9, d.begin());
  std::copy(d_points, d_points + np3, d.begin() + nc9);
  TIEPOINT_RETURN_IF_ERROR(d_.Upload(d.data(), d.size()));
  // Scaled right-hand side b' = s b.
  TIEPOINT_RETURN_IF_ERROR(lin_.EnsureHostScales());
  std::vector<float> bc(nc9), bp(np3);
  for (int64_t k = 0; k < nc9; ++k) bc[k] = static_cast<float>(rhs_cameras[k] * lin_.cam_scale_h_[k]);
  for (int64_t k = 0; k < np3; ++k) bp[k] = static_cast<float>(rhs_points[k] * lin_.pt_scale_h_[k]);
  TIEPOINT_RETURN_IF_ERROR(bc_.Upload(bc.data(), nc9));
  TIEPOINT_RETURN_IF_ERROR(bp_.Upload(bp.data(), np3));
  TIEPOINT_RETURN_IF_ERROR(SolveDevice(d_.get(), summary));
  TIEPOINT_RETURN_IF_ERROR(x_.Download(bc.data(), nc9));
  TIEPOINT_RETURN_IF_ERROR(xp_.Download(bp.data(), np3));
  bool finite = true;
  for (int64_t k = 0; k < nc9; ++k) {
    dx_cameras[k] = static_cast<double>(bc[k]) * lin_.cam_scale_h_[k];
    finite &= std::isfinite(dx_cameras[k]);
  }
  for (int64_t k = 0; k < np3; ++k) {
    dx_points[k] = static_cast<double>(bp[k]) * lin_.pt_scale_h_[k];
    finite &= std::isfinite(dx_points[k]);
  }
  summary->success = finite;
  if (!finite) summary->message = "PCG produced a non-finite step";
  return Status::Ok();
}

Status CudaPcg::SolveDevice(const double* d_dev, LinearSolverSummary* summary) {
  TIEPOINT_RETURN_IF_ERROR(lin_.error_);
  const ProblemView v = lin_.View();
  const int64_t nc9 = 9LL * v.nc;
  // Damping and the block-Jacobi preconditioners.
  PointPreconditionerKernel<<<Blocks(v.np), kThreads>>>(v, lin_.Src(), d_dev + nc9,
                                                        lin_.pt_scale(), dp_.get(), vinv_.get());
  CameraPreconditionerKernel<<<Blocks(v.nc), kThreads>>>(v.nc, lin_.u0_.get(), d_dev,
                                                         lin_.cam_scale(), dc_.get(), uinv_.get());
  if (o_.kind == PcgKind::kHessian) return SolveHessianDevice(summary);
  const bool mark = solve_marks_++ < 2;  // TIEPOINT_TIMING: the first two solves
  if (mark) TimingMark("solve: preconditioners");
  // Reduced right-hand side b = b_c - W V^-1 b_p.
  Schur<true>(nullptr, bp_.get(), bc_.get(), b_.get());
  if (mark) TimingMark("solve: reduced right-hand side");
  int it = 0;
  TIEPOINT_RETURN_IF_ERROR(Cg(
      nc9, b_, x_, r_, z_, q_, dir_, [&](const float* in, float* out) { ApplySchur(in, out); },
      [&](const float* in, float* out) {
        CameraPreconditionKernel<<<Blocks(nc9), kThreads>>>(v.nc, uinv_.get(), in, out);
      },
      &it));
  if (mark) TimingMark("solve: CG");
  // x_p = V^-1 (b_p - W^T x_c): the streaming point pass (coalesced; 2.05 -> 1.13 ms at 29M
  // observations on an H200 against a thread per point), then a thread per point.
  PointPass(x_.get(), nullptr);
  if (v.np > 0) SchurPointSolveKernel<<<Blocks(v.np), kThreads>>>(v.np, vinv_.get(), bp_.get(), acc_.get(), xp_.get());
  if (mark) TimingMark("solve: back-substitution");
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  TIEPOINT_RETURN_IF_ERROR(lin_.error_);
  summary->iterations = it;
  summary->success = true;
  return Status::Ok();
}

// pcg-hessian: CG on (J'^T J' + D') x = b over all parameters, block-Jacobi
// preconditioned, the same stopping rules; the solution goes to x_ (cameras), xp_ (points).
Status CudaPcg::SolveHessianDevice(LinearSolverSummary* summary) {
  const ProblemView v = lin_.View();
  const int64_t nc9 = 9LL * v.nc, np3 = 3LL * v.np, m = nc9 + np3;
  if (nc9 > 0) TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpy(hb_.get(), bc_.get(), nc9 * sizeof(float), cudaMemcpyDeviceToDevice));
  if (np3 > 0) TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpy(hb_.get() + nc9, bp_.get(), np3 * sizeof(float), cudaMemcpyDeviceToDevice));
  int it = 0;
  TIEPOINT_RETURN_IF_ERROR(Cg(
      m, hb_, hx_, hr_, hz_, hq_, hdir_, [&](const float* in, float* out) { ApplyHessian(in, out); },
      [&](const float* in, float* out) { PreconditionAll(in, out); }, &it));
  if (nc9 > 0) TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpy(x_.get(), hx_.get(), nc9 * sizeof(float), cudaMemcpyDeviceToDevice));
  if (np3 > 0) TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpy(xp_.get(), hx_.get() + nc9, np3 * sizeof(float), cudaMemcpyDeviceToDevice));
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  TIEPOINT_RETURN_IF_ERROR(lin_.error_);
  summary->iterations = it;
  summary->success = true;
  return Status::Ok();
}

Status CudaPcg::MeasureBandwidth(int repetitions, CudaBandwidthReport* report) {
  TIEPOINT_RETURN_IF_ERROR(lin_.error_);
  if (lin_.recompute_) return Status::Unavailable("the bandwidth measurement needs stored Jacobian blocks");
  const ProblemView v = lin_.View();
  const int64_t nc9 = 9LL * v.nc, n = v.n;
  // Preconditioners with a unit damping, then a CG iteration's kernels on a fixed vector.
  std::vector<double> ones(nc9 + 3LL * v.np, 1.0);
  TIEPOINT_RETURN_IF_ERROR(d_.Upload(ones.data(), ones.size()));
  PointPreconditionerKernel<<<Blocks(v.np), kThreads>>>(v, lin_.Src(), d_.get() + nc9,
                                                        lin_.pt_scale(), dp_.get(), vinv_.get());
  CameraPreconditionerKernel<<<Blocks(v.nc), kThreads>>>(v.nc, lin_.u0_.get(), d_.get(),
                                                         lin_.cam_scale(), dc_.get(), uinv_.get());
  std::vector<float> start(nc9, 1.0f);
  TIEPOINT_RETURN_IF_ERROR(dir_.Upload(start.data(), nc9));
  TIEPOINT_RETURN_IF_ERROR(x_.Upload(start.data(), nc9));
  TIEPOINT_RETURN_IF_ERROR(r_.Upload(start.data(), nc9));
  cudaEvent_t begin, end;
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventCreate(&begin));
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventCreate(&end));
  // One CG iteration exactly as SolveDevice runs it: the fused Schur product, p.q, the
  // vector update, the preconditioner, the four dot products, the direction update; the
  // two transfers of dot products to the host (synchronizations) are inside the timing.
  double dots[4];
  auto iteration = [&]() -> Status {
    ApplySchur(dir_.get(), q_.get());
    double pq = 0.0;
    TIEPOINT_RETURN_IF_ERROR(Dots({{dir_.get(), q_.get()}}, nc9, &pq));
    CgUpdateKernel<<<Blocks(nc9), kThreads>>>(nc9, 1e-6f, dir_.get(), q_.get(), x_.get(), r_.get());
    CameraPreconditionKernel<<<Blocks(nc9), kThreads>>>(v.nc, uinv_.get(), r_.get(), z_.get());
    TIEPOINT_RETURN_IF_ERROR(Dots({{r_.get(), r_.get()}, {x_.get(), b_.get()}, {x_.get(), r_.get()}, {r_.get(), z_.get()}}, nc9, dots));
    CgDirectionKernel<<<Blocks(nc9), kThreads>>>(nc9, 0.5f, z_.get(), dir_.get());
    return Status::Ok();
  };
  TIEPOINT_RETURN_IF_ERROR(iteration());  // warm-up
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(begin));
  for (int k = 0; k < repetitions; ++k) TIEPOINT_RETURN_IF_ERROR(iteration());
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(end));
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(end));
  float ms = 0.0f;
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, begin, end));
  // The Schur product alone.
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(begin));
  for (int k = 0; k < repetitions; ++k) ApplySchur(dir_.get(), q_.get());
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(end));
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(end));
  float schur_ms = 0.0f;
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&schur_ms, begin, end));
  // Copy bandwidth: the largest Jacobian plane set (J'_c, 72 bytes per observation) copied.
  const size_t copy_bytes = 18 * static_cast<size_t>(n) * sizeof(float);
  PoolArray<float> copy;
  TIEPOINT_RETURN_IF_ERROR(copy.Allocate(18 * static_cast<size_t>(n)));
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpy(copy.get(), lin_.jc_.get(), copy_bytes, cudaMemcpyDeviceToDevice));
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(begin));
  for (int k = 0; k < repetitions; ++k) {
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpy(copy.get(), lin_.jc_.get(), copy_bytes, cudaMemcpyDeviceToDevice));
  }
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventRecord(end));
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(end));
  float copy_ms = 0.0f;
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&copy_ms, begin, end));
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  // Bytes one CG iteration must move to or from device memory, each counted once.
  // Streaming product, per observation: first pass obs_point, obs_camera (4 + 4), J'_c
  // (72), J'_p (24), y written (8); camera pass obs_camera, obs_point (8), y (8), J'_p
  // (24), J'_c (72). Per point: the per-point sums (12, read and written by the atomic
  // adds), V^-1 (36), the sums read and reset (24), z written (12) and read (12).
  // Fused product, per observation: obs_camera and obs_point (8), J'_c (72) and J'_p (24)
  // (its second pass re-reads the chunk it has just read, from L2); per point V^-1 (36)
  // and point_ptr (4). Per camera (nine floats each), either way: x read by the product,
  // the partial sums written and read (one set per block), the product's output, D', the
  // vector update (x, r, p, q read, x and r written), the preconditioner (81 floats, in
  // and out), the dot products (10 vector reads) and the direction update (z, p read, p
  // written).
  // Camera groups, per observation: the point pass as the streaming one without y (8 + 72
  // + 24), the grouped camera pass obs_camera, obs_point (8), J'_c (72), J'_p (24); z is
  // counted per point, as above (its grouped reads are near-sequential within a group).
  // Each block's partial covers its group's cameras only: 9 floats per camera and block of
  // the group, written and read, which the per-camera term counts as parts = grid / groups.
  const bool streaming = Streaming();
  const bool grouped = Grouped();
  const double per_obs = grouped ? (8 + 72 + 24) + (8 + 72 + 24)
                         : streaming ? (8 + 72 + 24 + 8) + (8 + 8 + 24 + 72) : 4 + 4 + 72 + 24;
  const double per_point = streaming ? 24 + 36 + 24 + 12 + 12 : 36 + 4;
  const double parts = grouped ? static_cast<double>(group_grid_) / lin_.groups_ : streaming ? parts3_ : parts_;
  const double per_camera = 4 * (9 + 2.0 * 9 * parts + 9 + 9 + 9 * 6 + (81 + 18) + 9 * 10 + 9 * 3);
  report->bytes_per_observation = per_obs;
  report->bytes_per_iteration = per_obs * n + per_point * v.np + per_camera * v.nc;
  report->cg_iteration_ms = ms / repetitions;
  report->schur_ms = schur_ms / repetitions;
  report->achieved_gb_per_s = report->bytes_per_iteration / (report->cg_iteration_ms * 1e-3) / 1e9;
  report->copy_gb_per_s = 2.0 * copy_bytes / (copy_ms * 1e-3 / repetitions) / 1e9;
  report->fraction_of_copy = report->achieved_gb_per_s / report->copy_gb_per_s;
  report->shared_camera_sums = shared_cameras_;
  report->blocks = grouped ? group_grid_ : streaming ? grid3_ : grid_;
  report->streaming = streaming;
  report->camera_groups = grouped ? lin_.groups_ : 0;
  report->cameras_per_group = grouped ? lin_.group_size_ : 0;
  return Status::Ok();
}

Status CudaPcg::OperatorsForTest(const double* d, const std::vector<float>& x,
                                 const std::vector<float>& bc, const std::vector<float>& bp,
                                 std::vector<float>* sx, std::vector<float>* reduced) {
  TIEPOINT_RETURN_IF_ERROR(lin_.error_);
  const ProblemView v = lin_.View();
  const int64_t nc9 = 9LL * v.nc, np3 = 3LL * v.np;
  TIEPOINT_RETURN_IF_ERROR(d_.Upload(d, nc9 + np3));
  PointPreconditionerKernel<<<Blocks(v.np), kThreads>>>(v, lin_.Src(), d_.get() + nc9,
                                                        lin_.pt_scale(), dp_.get(), vinv_.get());
  CameraPreconditionerKernel<<<Blocks(v.nc), kThreads>>>(v.nc, lin_.u0_.get(), d_.get(),
                                                         lin_.cam_scale(), dc_.get(), uinv_.get());
  TIEPOINT_RETURN_IF_ERROR(dir_.Upload(x.data(), nc9));
  ApplySchur(dir_.get(), q_.get());
  sx->resize(nc9);
  TIEPOINT_RETURN_IF_ERROR(q_.Download(sx->data(), nc9));
  TIEPOINT_RETURN_IF_ERROR(bc_.Upload(bc.data(), nc9));
  TIEPOINT_RETURN_IF_ERROR(bp_.Upload(bp.data(), np3));
  Schur<true>(nullptr, bp_.get(), bc_.get(), b_.get());
  reduced->resize(nc9);
  TIEPOINT_RETURN_IF_ERROR(b_.Download(reduced->data(), nc9));
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::Ok();
}

// The LM state on the device: parameters, gradient, diagonal, step and trial point never
// leave it during the solve; the driver gets scalars.
class CudaState : public LmState {
 public:
  CudaState(std::unique_ptr<CudaLinearization> lin, std::unique_ptr<CudaPcg> pcg)
      : lin_(std::move(lin)), pcg_(std::move(pcg)) {}

  Status Initialize(const double* cameras, const double* points) {
    const int64_t n = 9LL * lin_->p_.num_cameras + 3LL * lin_->p_.num_points;
    for (PoolArray<double>* a : {&trial_, &dx_, &xs_, &t1_, &t2_, &t3_}) TIEPOINT_RETURN_IF_ERROR(a->Allocate(n));
    return lin_->UploadParameters(cameras, points);  // x lives in lin_->params_
  }

  double Linearize() override { return lin_->LinearizeDevice(lin_->params_.get()); }

  double GradientMaxNorm() override {
    const int64_t n = static_cast<int64_t>(dx_.size());
    AbsKernel<<<Blocks(n), kThreads>>>(n, lin_->g_dev_.get(), t1_.get());
    return lin_->Max(t1_.get(), n);
  }

  Status Step(double radius, LmStep* step) override {
    const BAProblem& p = lin_->p_;
    const int64_t nc9 = 9LL * p.num_cameras, n = static_cast<int64_t>(dx_.size());
    DampingKernel<<<Blocks(n), kThreads>>>(nc9, n, p.has_fixed_parameters ? lin_->fixed_.get() : nullptr,
                                           lin_->diag_dev_.get(), lin_->g_dev_.get(), lin_->scale_.get(),
                                           1.0 / radius, pcg_->d_.get(), pcg_->bc_.get(), pcg_->bp_.get());
    LinearSolverSummary ls;
    const bool mark = step_marks_++ < 2;
    if (mark) TimingMark("step: damping");
    TIEPOINT_RETURN_IF_ERROR(pcg_->SolveDevice(pcg_->d_.get(), &ls));
    *step = LmStep();
    step->linear_iterations = ls.iterations;
    StepKernel<<<Blocks(n), kThreads>>>(nc9, n, pcg_->x_.get(), pcg_->xp_.get(), lin_->scale_.get(),
                                        lin_->g_dev_.get(), lin_->params_.get(), dx_.get(), xs_.get(),
                                        t1_.get(), t2_.get(), t3_.get());
    const double g_dx = lin_->Sum(t1_.get(), n);
    const double dx_dx = lin_->Sum(t2_.get(), n);
    const double x_x = lin_->Sum(t3_.get(), n);
    // |J dx|^2 = |J' x'|^2 with x' the scaled solution (already in xs_).
    JacobianNormKernel<<<Blocks(p.num_observations), kThreads>>>(lin_->View(), lin_->Src(), xs_.get(),
                                                                 lin_->per_obs_.get());
    const double jdx = lin_->Sum(lin_->per_obs_.get(), p.num_observations);
    if (mark) TimingMark("step: step and model decrease");
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    TIEPOINT_RETURN_IF_ERROR(lin_->error_);
    step->model_decrease = -(g_dx + 0.5 * jdx);
    step->step_norm = std::sqrt(dx_dx);
    step->x_norm = std::sqrt(x_x);
    step->valid = std::isfinite(step->model_decrease) && std::isfinite(step->step_norm);
    if (!step->valid) step->message = "PCG produced a non-finite step";
    return Status::Ok();
  }

  double TrialCost() override {
    const int64_t n = static_cast<int64_t>(dx_.size());
    AddKernel<<<Blocks(n), kThreads>>>(n, lin_->params_.get(), dx_.get(), trial_.get());
    return lin_->CostDevice(trial_.get());
  }

  void Accept() override { lin_->params_.Swap(trial_); }

  Status Parameters(double* cameras, double* points) override {
    const size_t nc9 = 9 * static_cast<size_t>(lin_->p_.num_cameras);
    const size_t np3 = 3 * static_cast<size_t>(lin_->p_.num_points);
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpy(cameras, lin_->params_.get(), nc9 * sizeof(double), cudaMemcpyDeviceToHost));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpy(points, lin_->params_.get() + nc9, np3 * sizeof(double), cudaMemcpyDeviceToHost));
    return lin_->error_;
  }

 private:
  std::unique_ptr<CudaLinearization> lin_;
  std::unique_ptr<CudaPcg> pcg_;
  PoolArray<double> trial_, dx_, xs_, t1_, t2_, t3_;
  int step_marks_ = 0;
};

}  // namespace

Status CreateCudaPcgLinearSystem(const PcgOptions& options, const BAProblem& problem,
                                 const LossFunction& loss, LinearSystem* system,
                                 bool force_global_camera_sums) {
  if (options.precision != Precision::kFloat) {
    return Status::InvalidOptions("--device cuda runs the PCG solvers in float: drop --precision double");
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return Status::Unavailable("no usable CUDA device; use --device cpu");
  }
  if (problem.num_observations >= (int64_t{1} << 31)) {
    return Status::InvalidOptions("--device cuda: more than 2^31-1 observations");
  }
  auto lin = std::make_unique<CudaLinearization>(problem, loss, options.recompute_jacobian);
  lin->allow_groups_ = !force_global_camera_sums;
  TIEPOINT_RETURN_IF_ERROR(lin->Initialize());
  auto solver = std::make_unique<CudaPcg>(options, *lin);
  solver->force_global_camera_sums_ = force_global_camera_sums;
  TIEPOINT_RETURN_IF_ERROR(solver->Initialize());
  system->solver = std::move(solver);
  system->linearization = std::move(lin);
  return Status::Ok();
}

Status CreateCudaLmState(const PcgOptions& options, const BAProblem& problem,
                         const LossFunction& loss, const double* cameras, const double* points,
                         std::unique_ptr<LmState>* state) {
  LinearSystem system;
  TIEPOINT_RETURN_IF_ERROR(CreateCudaPcgLinearSystem(options, problem, loss, &system));
  std::unique_ptr<CudaLinearization> lin(static_cast<CudaLinearization*>(system.linearization.release()));
  std::unique_ptr<CudaPcg> pcg(static_cast<CudaPcg*>(system.solver.release()));
  TimingMark("allocations");
  auto s = std::make_unique<CudaState>(std::move(lin), std::move(pcg));
  TIEPOINT_RETURN_IF_ERROR(s->Initialize(cameras, points));
  TimingMark("state + parameters upload");
  *state = std::move(s);
  return Status::Ok();
}

Status MeasureCudaCgBandwidth(const BAProblem& problem, const double* cameras,
                              const double* points, int repetitions, CudaBandwidthReport* report) {
  LinearSystem system;
  TIEPOINT_RETURN_IF_ERROR(CreateCudaPcgLinearSystem(PcgOptions(), problem, LossFunction(), &system));
  auto* lin = static_cast<CudaLinearization*>(system.linearization.get());
  auto* pcg = static_cast<CudaPcg*>(system.solver.get());
  lin->Linearize(cameras, points);
  return pcg->MeasureBandwidth(repetitions, report);
}

}  // namespace tiepoint

namespace tiepoint {

Status CudaSchurOperatorsForTest(const BAProblem& problem, const LossFunction& loss,
                                 const double* cameras, const double* points, const double* d,
                                 const std::vector<float>& x, const std::vector<float>& bc,
                                 const std::vector<float>& bp, bool global_camera_sums,
                                 std::vector<float>* sx, std::vector<float>* reduced) {
  LinearSystem system;
  TIEPOINT_RETURN_IF_ERROR(CreateCudaPcgLinearSystem(PcgOptions(), problem, loss, &system,
                                                     global_camera_sums));
  auto* lin = static_cast<CudaLinearization*>(system.linearization.get());
  auto* pcg = static_cast<CudaPcg*>(system.solver.get());
  lin->Linearize(cameras, points);
  return pcg->OperatorsForTest(d, x, bc, bp, sx, reduced);
}

}  // namespace tiepoint
