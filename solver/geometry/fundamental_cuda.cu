// GPU hypothesis search for fundamental-matrix RANSAC (fundamental_cuda.h).
#include "solver/geometry/fundamental_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "io/base/cuda_buffer.h"
#include "io/base/cuda_check.h"
#include "solver/geometry/cubic.h"
#include "solver/geometry/hartley.h"
#include "solver/geometry/sample_draw.h"

namespace tiepoint {
namespace {

constexpr int kThreads = 128;  // samples per block
constexpr unsigned long long kNoCandidate = ~0ull;

// A searched pair; pair k of the launch owns blocks [k, k + 1) * blocks_per_pair.
struct PairInfo {
  int offset;       // first correspondence in the concatenated arrays
  int count;        // correspondences
  int index;        // the pair's index in the caller's list
  uint64_t stream;  // the sampler's stream: first_stream + index
  float s1sq, s2sq; // squared Hartley scales of image 1 and image 2
};

// Null space of the 7x9 system by Gaussian elimination with partial pivoting: two
// vectors spanning it (not orthonormal). False for rank below 7 (a degenerate sample).
__device__ bool NullSpace7(double A[7][9], double basis[2][9]) {
  double scale = 0.0;
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 9; ++j) scale = fmax(scale, fabs(A[i][j]));
  if (!(scale > 0.0) || !isfinite(scale)) return false;
  const double tiny = 1e-9 * scale;
  int pivot_col[7], free_col[2];
  int row = 0, num_free = 0;
  for (int j = 0; j < 9; ++j) {
    if (row == 7) {
      if (num_free < 2) free_col[num_free] = j;
      ++num_free;
      continue;
    }
    int pi = row;
    double best = fabs(A[row][j]);
    for (int i = row + 1; i < 7; ++i) {
      const double v = fabs(A[i][j]);
      if (v > best) best = v, pi = i;
    }
    if (!(best > tiny)) {
      if (num_free < 2) free_col[num_free] = j;
      ++num_free;
      continue;
    }
    if (pi != row) {
      for (int c = j; c < 9; ++c) {
        const double t = A[row][c];
        A[row][c] = A[pi][c];
        A[pi][c] = t;
      }
    }
    const double inv = 1.0 / A[row][j];
    for (int i = row + 1; i < 7; ++i) {
      const double f = A[i][j] * inv;
      for (int c = j + 1; c < 9; ++c) A[i][c] -= f * A[row][c];
      A[i][j] = 0.0;
    }
    pivot_col[row++] = j;
  }
  if (row < 7 || num_free != 2) return false;
  for (int f = 0; f < 2; ++f) {
    double* x = basis[f];
    for (int c = 0; c < 9; ++c) x[c] = 0.0;
    x[free_col[f]] = 1.0;
    for (int i = 6; i >= 0; --i) {
      const int pc = pivot_col[i];
      double sum = 0.0;
      for (int c = pc + 1; c < 9; ++c) sum += A[i][c] * x[c];
      x[pc] = -sum / A[i][pc];
    }
  }
  return true;
}

__device__ double Det3(const double* m) {
  return m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
         m[2] * (m[3] * m[7] - m[4] * m[6]);
}

// MSAC cost of the float matrix f (normalised coordinates) over the pair's
// correspondences, or +inf once it exceeds the slot's best cost (read every 32).
__device__ float ScoreModel(const float f[9], const float4* __restrict__ pts, int count, float s1sq,
                            float s2sq, float t2, const volatile unsigned long long* slot) {
  float cost = 0.0f;
  for (int begin = 0; begin < count; begin += 32) {
    const int end = min(count, begin + 32);
    for (int i = begin; i < end; ++i) {
      const float4 p = __ldg(pts + i);  // (x1, y1, x2, y2), normalised
      const float a0 = f[0] * p.x + f[1] * p.y + f[2];
      const float a1 = f[3] * p.x + f[4] * p.y + f[5];
      const float a2 = f[6] * p.x + f[7] * p.y + f[8];
      const float b0 = f[0] * p.z + f[3] * p.w + f[6];
      const float b1 = f[1] * p.z + f[4] * p.w + f[7];
      const float r = p.z * a0 + p.w * a1 + a2;
      const float den = s2sq * (a0 * a0 + a1 * a1) + s1sq * (b0 * b0 + b1 * b1);
      const float e2 = r * r / den;
      cost += fminf(e2, t2);  // NaN (den = 0 and r = 0) counts as an outlier
    }
    const float bound = __uint_as_float(static_cast<unsigned>(*slot >> 32));
    if (cost > bound) return INFINITY;
  }
  return cost;
}

__global__ void __launch_bounds__(kThreads) SearchKernel(const float4* __restrict__ pts,
                                                         const PairInfo* __restrict__ pairs,
                                                         int blocks_per_pair, int samples,
                                                         int block_base, float t2,
                                                         unsigned long long seed, int slots,
                                                         unsigned long long* best) {
  const int b = block_base + blockIdx.x;
  const int pair = b / blocks_per_pair, chunk = b % blocks_per_pair;
  const PairInfo P = pairs[pair];
  const int sample = chunk * kThreads + threadIdx.x;
  unsigned long long* slot = best + static_cast<size_t>(pair) * slots + chunk % slots;
  unsigned long long key = kNoCandidate;
  if (sample < samples) {
    int idx[7];
    two_view::DrawSample<7>(seed, P.stream, static_cast<uint64_t>(sample), P.count, idx);
    double A[7][9];
    for (int k = 0; k < 7; ++k) {
      const float4 p = __ldg(pts + P.offset + idx[k]);
      const double x = p.x, y = p.y, u = p.z, v = p.w;
      A[k][0] = u * x, A[k][1] = u * y, A[k][2] = u;
      A[k][3] = v * x, A[k][4] = v * y, A[k][5] = v;
      A[k][6] = x, A[k][7] = y, A[k][8] = 1.0;
    }
    double N[2][9];
    if (NullSpace7(A, N)) {
      // det(a N0 + (1 - a) N1) from its values at a = 0, 1, -1, 2.
      double M[9];
      double dv[4];
      const double as[4] = {0.0, 1.0, -1.0, 2.0};
      for (int s = 0; s < 4; ++s) {
        for (int e = 0; e < 9; ++e) M[e] = as[s] * N[0][e] + (1.0 - as[s]) * N[1][e];
        dv[s] = Det3(M);
      }
      double c[4];
      two_view::CubicThroughValues(dv[0], dv[1], dv[2], dv[3], c);
      double roots[3];
      const int nr = two_view::SolveCubic(c[3], c[2], c[1], c[0], roots);
      float best_cost = INFINITY;
      for (int r = 0; r < nr; ++r) {
        double maxabs = 0.0;
        for (int e = 0; e < 9; ++e) {
          M[e] = roots[r] * N[0][e] + (1.0 - roots[r]) * N[1][e];
          maxabs = fmax(maxabs, fabs(M[e]));
        }
        if (!(maxabs > 0.0) || !isfinite(maxabs)) continue;
        float f[9];
        for (int e = 0; e < 9; ++e) f[e] = static_cast<float>(M[e] / maxabs);
        const float c = ScoreModel(f, pts + P.offset, P.count, P.s1sq, P.s2sq, t2, slot);
        best_cost = fminf(best_cost, c);
      }
      if (best_cost < INFINITY) {
        key = (static_cast<unsigned long long>(__float_as_uint(best_cost)) << 32) |
              static_cast<unsigned>(sample);
      }
    }
  }
  // The block's lowest key, then one atomicMin on the slot.
  for (int o = 16; o > 0; o >>= 1) key = min(key, __shfl_xor_sync(0xffffffffu, key, o));
  __shared__ unsigned long long warp_min[kThreads / 32];
  if ((threadIdx.x & 31) == 0) warp_min[threadIdx.x >> 5] = key;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long m = warp_min[0];
    for (int w = 1; w < kThreads / 32; ++w) m = min(m, warp_min[w]);
    if (m != kNoCandidate) atomicMin(slot, m);
  }
}

}  // namespace

bool FundamentalSearchCudaBuilt() { return true; }

Status SearchFundamentalCuda(const std::vector<FundamentalSearchPair>& pairs,
                             const FundamentalSearchOptions& options,
                             std::vector<FundamentalCandidates>* out,
                             const std::function<void(size_t, size_t)>& progress) {
  if (out == nullptr) return Status::Internal("SearchFundamentalCuda: out is null");
  if (!(options.max_error_px > 0.0) || !std::isfinite(options.max_error_px)) {
    return Status::InvalidOptions("fundamental search: max_error_px must be > 0");
  }
  if (options.samples < 1) return Status::InvalidOptions("fundamental search: samples must be >= 1");
  if (options.candidates < 1 || options.candidates > 32) {
    return Status::InvalidOptions("fundamental search: candidates must be in 1..32");
  }
  out->assign(pairs.size(), FundamentalCandidates());
  const int min_count = std::max(7, options.min_inliers);
  std::vector<PairInfo> info;
  std::vector<float4> pts;
  size_t total_points = 0;
  for (size_t p = 0; p < pairs.size(); ++p) {
    const FundamentalSearchPair& q = pairs[p];
    if (q.x1 == nullptr || q.x2 == nullptr || q.x1->size() != q.x2->size()) {
      return Status::InvalidInput("fundamental search: pair " + std::to_string(p) +
                                  " has missing or mismatched coordinate arrays");
    }
    if (static_cast<int64_t>(q.x1->size()) >= min_count) total_points += q.x1->size();
  }
  if (total_points > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return Status::InvalidInput("fundamental search: " + std::to_string(total_points) +
                                " correspondences in one call (at most 2^31 - 1)");
  }
  pts.reserve(total_points);
  int64_t blocks = 0;
  const int64_t blocks_per_pair = (options.samples + kThreads - 1) / kThreads;
  for (size_t p = 0; p < pairs.size(); ++p) {
    const auto& x1 = *pairs[p].x1;
    const auto& x2 = *pairs[p].x2;
    const int n = static_cast<int>(x1.size());
    if (n < min_count) continue;
    // The CPU's normalization (two_view::NormalizingTransform's matrix entries).
    const two_view::HartleySimilarity h1 = two_view::ComputeHartleySimilarity(x1);
    const two_view::HartleySimilarity h2 = two_view::ComputeHartleySimilarity(x2);
    if (!h1.finite() || !h2.finite()) continue;  // EstimateTwoViewGeometry names the bad coordinate
    PairInfo pi;
    pi.offset = static_cast<int>(pts.size());
    pi.count = n;
    pi.index = static_cast<int>(p);
    pi.stream = options.first_stream + p;
    pi.s1sq = static_cast<float>(h1.scale * h1.scale);
    pi.s2sq = static_cast<float>(h2.scale * h2.scale);
    for (int i = 0; i < n; ++i) {
      pts.push_back(make_float4(static_cast<float>(h1.scale * x1[i][0] + h1.tx),
                                static_cast<float>(h1.scale * x1[i][1] + h1.ty),
                                static_cast<float>(h2.scale * x2[i][0] + h2.tx),
                                static_cast<float>(h2.scale * x2[i][1] + h2.ty)));
    }
    blocks += blocks_per_pair;
    if (blocks > std::numeric_limits<int>::max()) {
      return Status::InvalidInput("fundamental search: too many pairs x samples in one call");
    }
    info.push_back(pi);
    (*out)[p].samples_drawn = options.samples;
  }
  if (info.empty()) return Status::Ok();
  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
    (void)cudaGetLastError();
    return Status::Unavailable("fundamental search: no CUDA device (use --device cpu, or --verify-device cpu)");
  }
  const int slots = options.candidates;
  DeviceBuffer<float4> d_pts;
  DeviceBuffer<PairInfo> d_info;
  DeviceBuffer<unsigned long long> d_best;
  TIEPOINT_RETURN_IF_ERROR(d_pts.Upload(pts.data(), pts.size()));
  TIEPOINT_RETURN_IF_ERROR(d_info.Upload(info.data(), info.size()));
  TIEPOINT_RETURN_IF_ERROR(d_best.Reserve(info.size() * slots, "the search's best samples"));
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemset(d_best.get(), 0xff, info.size() * slots * sizeof(unsigned long long)));
  const float t2 = static_cast<float>(options.max_error_px * options.max_error_px);
  // Launches of about a 32nd of the blocks each, so the caller can show progress.
  const int64_t per_launch = std::max<int64_t>(4096, blocks / 32);
  for (int64_t base = 0; base < blocks; base += per_launch) {
    const int64_t count = std::min(per_launch, blocks - base);
    SearchKernel<<<static_cast<unsigned>(count), kThreads>>>(d_pts.get(), d_info.get(),
                                                              static_cast<int>(blocks_per_pair), options.samples,
                                                              static_cast<int>(base), t2, options.seed, slots,
                                                              d_best.get());
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    if (progress) {
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
      // Pairs whose blocks all ran (each pair has the same number of blocks).
      const size_t done = std::min<size_t>(info.size(), (base + count) / blocks_per_pair);
      progress(done, info.size());
    }
  }
  std::vector<unsigned long long> best(info.size() * slots);
  TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpy(best.data(), d_best.get(), best.size() * sizeof(unsigned long long),
                                           cudaMemcpyDeviceToHost));
  for (size_t k = 0; k < info.size(); ++k) {
    unsigned long long* b = best.data() + k * slots;
    std::sort(b, b + slots);
    FundamentalCandidates& c = (*out)[info[k].index];
    for (int s = 0; s < slots; ++s) {
      if (b[s] == kNoCandidate) break;
      int idx[7];
      two_view::DrawSample<7>(options.seed, info[k].stream,
                              static_cast<uint64_t>(b[s] & 0xffffffffu), info[k].count, idx);
      c.samples.insert(c.samples.end(), idx, idx + 7);
    }
  }
  return Status::Ok();
}

}  // namespace tiepoint
