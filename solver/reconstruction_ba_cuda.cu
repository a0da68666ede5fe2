// PCG on the reduced camera system of a reconstruction's bundle adjustment, on the GPU
// (solver/reconstruction_ba_cuda.h says what runs where).
#include <cuda_runtime.h>

#include <cmath>
#include <string>
#include <vector>

#include "io/base/cuda_buffer.h"
#include "io/base/cuda_check.h"
#include "io/base/cuda_device.h"
#include "solver/reconstruction_ba_cuda.h"

namespace tiepoint {
namespace {

constexpr int kThreads = 256;
int Blocks(int64_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

// y = mu D_U x (the product's first term; the others add to it).
__global__ void DampedDiagonalKernel(int n, double mu, const double* __restrict__ diagU,
                                     const double* __restrict__ x, double* __restrict__ y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = mu * diagU[i] * x[i];
}

// y += U x over U's stored blocks (A <= B): block (A, B) adds B x_B to y_A and, off the
// diagonal, B^T x_A to y_B.
__global__ void UProductKernel(int64_t num_stored, const int* __restrict__ block_row,
                               const int* __restrict__ cols, const int64_t* __restrict__ offset,
                               const int* __restrict__ start, const int* __restrict__ size,
                               const double* __restrict__ U, const double* __restrict__ x,
                               double* __restrict__ y) {
  const int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (k >= num_stored) return;
  const int a = block_row[k], bb = cols[k];
  const int sa = size[a], sb = size[bb], oa = start[a], ob = start[bb];
  const double* B = U + offset[k];
  for (int r = 0; r < sa; ++r) {
    double s = 0;
    for (int c = 0; c < sb; ++c) s += B[r * sb + c] * x[ob + c];
    atomicAdd(&y[oa + r], s);
  }
  if (a == bb) return;
  for (int c = 0; c < sb; ++c) {
    double s = 0;
    for (int r = 0; r < sa; ++r) s += B[r * sb + c] * x[oa + r];
    atomicAdd(&y[ob + c], s);
  }
}

// y -= sum_j W_j Vinv_j W_j^T x, one thread per point. Pose columns get an atomic add per
// observation. Intrinsics columns (from intr_begin on) are shared by every image of a
// camera, with one camera by every observation: adding to them per observation would
// serialise millions of atomics on a few addresses. So a thread sums its point's
// intrinsics terms in registers while consecutive observations name the same intrinsics
// block (flushing when the block changes), and at the end a warp whose threads all hold
// the same block reduces the sums by shuffles and adds them once.
// kMaxIntr: the widest intrinsics block of the system, 8 (to OPENCV) or
// kCudaMaxIntrinsicsBlock (FULL_OPENCV, THIN_PRISM_FISHEYE), so the common cameras keep 8
// sums in registers.
template <int kMaxIntr>
__global__ void PointProductKernel(int num_points, const int64_t* __restrict__ point_ptr,
                                   const uint8_t* __restrict__ point_free, int max_local,
                                   const int* __restrict__ local_cols,
                                   const uint8_t* __restrict__ num_local,
                                   const double* __restrict__ W, const double* __restrict__ Vinv,
                                   int intr_begin, const double* __restrict__ x,
                                   double* __restrict__ y) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  const bool active = j < num_points && point_free[j];
  int key = -1;  // first column of the intrinsics block summed in acc
  double acc[kMaxIntr] = {};
  if (active) {
    double w0 = 0, w1 = 0, w2 = 0;
    for (int64_t k = point_ptr[j]; k < point_ptr[j + 1]; ++k) {
      const int* ck = local_cols + k * max_local;
      const double* Wk = W + k * max_local * 3;
      for (int p = 0; p < num_local[k]; ++p) {
        const double xv = x[ck[p]];
        w0 += Wk[3 * p] * xv;
        w1 += Wk[3 * p + 1] * xv;
        w2 += Wk[3 * p + 2] * xv;
      }
    }
    const double* M = Vinv + 9 * static_cast<int64_t>(j);  // column-major
    const double v0 = M[0] * w0 + M[3] * w1 + M[6] * w2;
    const double v1 = M[1] * w0 + M[4] * w1 + M[7] * w2;
    const double v2 = M[2] * w0 + M[5] * w1 + M[8] * w2;
    for (int64_t k = point_ptr[j]; k < point_ptr[j + 1]; ++k) {
      const int* ck = local_cols + k * max_local;
      const double* Wk = W + k * max_local * 3;
      const int nl = num_local[k];
      int p = 0;
      for (; p < nl && ck[p] < intr_begin; ++p)
        atomicAdd(&y[ck[p]], -(Wk[3 * p] * v0 + Wk[3 * p + 1] * v1 + Wk[3 * p + 2] * v2));
      if (p == nl) continue;
      if (ck[p] != key) {  // another intrinsics block: flush the sums of the previous one
        if (key >= 0)
          for (int q = 0; q < kMaxIntr; ++q)
            if (acc[q] != 0) atomicAdd(&y[key + q], acc[q]);
        for (int q = 0; q < kMaxIntr; ++q) acc[q] = 0;
        key = ck[p];
      }
      for (int q = 0; p < nl; ++p, ++q)
        acc[q] -= Wk[3 * p] * v0 + Wk[3 * p + 1] * v1 + Wk[3 * p + 2] * v2;
    }
  }
  // Every thread of the warp is here (no early return above). Threads with nothing take
  // the warp's largest key (their sums are zero).
  int kmax = key;
  for (int off = 16; off > 0; off >>= 1) kmax = max(kmax, __shfl_xor_sync(0xffffffffu, kmax, off));
  if (kmax < 0) return;
  const int shared_key = key < 0 ? kmax : key;
  int same = 0;
  __match_all_sync(0xffffffffu, shared_key, &same);
  if (same) {
    for (int q = 0; q < kMaxIntr; ++q) {
      double v = acc[q];
      for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
      if ((threadIdx.x & 31) == 0 && v != 0) atomicAdd(&y[shared_key + q], v);
    }
  } else if (key >= 0) {
    for (int q = 0; q < kMaxIntr; ++q)
      if (acc[q] != 0) atomicAdd(&y[key + q], acc[q]);
  }
}

// z = P r, block by block (P: inverses of S's damped diagonal blocks).
__global__ void PreconditionKernel(int num_blocks, const int* __restrict__ start,
                                   const int* __restrict__ size,
                                   const int64_t* __restrict__ precond_offset,
                                   const double* __restrict__ P, const double* __restrict__ r,
                                   double* __restrict__ z) {
  const int a = blockIdx.x * blockDim.x + threadIdx.x;
  if (a >= num_blocks) return;
  const int s = size[a], o = start[a];
  const double* M = P + precond_offset[a];
  for (int i = 0; i < s; ++i) {
    double v = 0;
    for (int c = 0; c < s; ++c) v += M[i * s + c] * r[o + c];
    z[o + i] = v;
  }
}

// out[0] += sum a.b (and out[1] += sum c.d when c is given): a block's sum by warp
// shuffles, then one atomic add per block.
__global__ void DotKernel(int n, const double* __restrict__ a, const double* __restrict__ b,
                          const double* __restrict__ c, const double* __restrict__ d,
                          double* __restrict__ out) {
  __shared__ double part[2][kThreads / 32];
  double s0 = 0, s1 = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    s0 += a[i] * b[i];
    if (c) s1 += c[i] * d[i];
  }
  for (int off = 16; off > 0; off >>= 1) {
    s0 += __shfl_down_sync(0xffffffffu, s0, off);
    s1 += __shfl_down_sync(0xffffffffu, s1, off);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) { part[0][warp] = s0; part[1][warp] = s1; }
  __syncthreads();
  if (warp == 0) {
    s0 = lane < kThreads / 32 ? part[0][lane] : 0;
    s1 = lane < kThreads / 32 ? part[1][lane] : 0;
    for (int off = 16; off > 0; off >>= 1) {
      s0 += __shfl_down_sync(0xffffffffu, s0, off);
      s1 += __shfl_down_sync(0xffffffffu, s1, off);
    }
    if (lane == 0) {
      atomicAdd(&out[0], s0);
      if (c) atomicAdd(&out[1], s1);
    }
  }
}

// x += alpha p; r -= alpha q.
__global__ void StepKernel(int n, double alpha, const double* __restrict__ p,
                           const double* __restrict__ q, double* __restrict__ x,
                           double* __restrict__ r) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    x[i] += alpha * p[i];
    r[i] -= alpha * q[i];
  }
}

// p = z + beta p.
__global__ void DirectionKernel(int n, double beta, const double* __restrict__ z,
                                double* __restrict__ p) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = z[i] + beta * p[i];
}

class CudaReducedPcgImpl : public CudaReducedPcg {
 public:
  ~CudaReducedPcgImpl() override = default;

  Status Solve(const ReducedSystemView& sys, double tolerance, int max_iterations, double* x_out,
               bool* solved, int* iterations) override {
    const int n = sys.n, nb = sys.num_blocks;
    const int64_t num_stored = sys.row_ptr[nb];
    const int64_t nobs = sys.point_ptr[sys.num_points];
    int widest = 0;  // intrinsics block
    for (int a = 0; a < nb; ++a) {
      if (sys.block_start[a] < sys.intr_begin) continue;
      if (sys.block_size[a] > kCudaMaxIntrinsicsBlock)
        return Status::Internal("iterative-cuda: an intrinsics block of " + std::to_string(sys.block_size[a]) +
                                " columns (at most " + std::to_string(kCudaMaxIntrinsicsBlock) + ")");
      widest = std::max(widest, sys.block_size[a]);
    }
    if (!structure_uploaded_) {
      std::vector<int> block_row(num_stored);
      for (int a = 0; a < nb; ++a)
        for (int64_t k = sys.row_ptr[a]; k < sys.row_ptr[a + 1]; ++k) block_row[k] = a;
      precond_offset_host_.assign(nb + 1, 0);
      for (int a = 0; a < nb; ++a)
        precond_offset_host_[a + 1] = precond_offset_host_[a] + static_cast<int64_t>(sys.block_size[a]) * sys.block_size[a];
      TIEPOINT_RETURN_IF_ERROR(block_row_.Upload(block_row.data(), num_stored));
      TIEPOINT_RETURN_IF_ERROR(cols_.Upload(sys.cols, num_stored));
      TIEPOINT_RETURN_IF_ERROR(offset_.Upload(sys.offset, num_stored));
      TIEPOINT_RETURN_IF_ERROR(start_.Upload(sys.block_start, nb));
      TIEPOINT_RETURN_IF_ERROR(size_.Upload(sys.block_size, nb));
      TIEPOINT_RETURN_IF_ERROR(precond_offset_.Upload(precond_offset_host_.data(), nb + 1));
      TIEPOINT_RETURN_IF_ERROR(point_ptr_.Upload(sys.point_ptr, sys.num_points + 1));
      TIEPOINT_RETURN_IF_ERROR(point_free_.Upload(sys.point_free, sys.num_points));
      TIEPOINT_RETURN_IF_ERROR(local_cols_.Upload(sys.local_cols, nobs * sys.max_local));
      TIEPOINT_RETURN_IF_ERROR(num_local_.Upload(sys.num_local, nobs));
      for (DeviceBuffer<double>* v : {&x_, &r_, &z_, &p_, &q_}) TIEPOINT_RETURN_IF_ERROR(v->Reserve(n));
      TIEPOINT_RETURN_IF_ERROR(dots_.Reserve(2));
      structure_uploaded_ = true;
    }
    TIEPOINT_RETURN_IF_ERROR(U_.Upload(sys.U, sys.num_values));
    TIEPOINT_RETURN_IF_ERROR(diagU_.Upload(sys.diagU, n));
    TIEPOINT_RETURN_IF_ERROR(precond_.Upload(sys.precond, precond_offset_host_[nb]));
    TIEPOINT_RETURN_IF_ERROR(W_.Upload(sys.W, nobs * sys.max_local * 3));
    TIEPOINT_RETURN_IF_ERROR(Vinv_.Upload(sys.Vinv, 9 * static_cast<size_t>(sys.num_points)));
    TIEPOINT_RETURN_IF_ERROR(r_.Upload(sys.b, n));
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemset(x_.get(), 0, n * sizeof(double)));

    auto apply = [&](const double* in, double* out) {
      DampedDiagonalKernel<<<Blocks(n), kThreads>>>(n, sys.mu, diagU_.get(), in, out);
      if (num_stored > 0)
        UProductKernel<<<Blocks(num_stored), kThreads>>>(num_stored, block_row_.get(), cols_.get(),
                                                         offset_.get(), start_.get(), size_.get(),
                                                         U_.get(), in, out);
      if (sys.num_points > 0) {
        auto kernel = widest <= 8 ? PointProductKernel<8> : PointProductKernel<kCudaMaxIntrinsicsBlock>;
        kernel<<<Blocks(sys.num_points), kThreads>>>(sys.num_points, point_ptr_.get(), point_free_.get(),
                                                     sys.max_local, local_cols_.get(), num_local_.get(),
                                                     W_.get(), Vinv_.get(), sys.intr_begin, in, out);
      }
    };
    const int dot_blocks = std::min(Blocks(n), 1024);
    // Dot products a.b (and c.d), returned to the host.
    auto dot = [&](const double* a, const double* b, const double* c, const double* d,
                   double* out) -> Status {
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemset(dots_.get(), 0, 2 * sizeof(double)));
      DotKernel<<<dot_blocks, kThreads>>>(n, a, b, c, d, dots_.get());
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpy(out, dots_.get(), 2 * sizeof(double), cudaMemcpyDeviceToHost));
      return Status::Ok();
    };
    auto precondition = [&](const double* in, double* out) {
      PreconditionKernel<<<Blocks(nb), kThreads>>>(nb, start_.get(), size_.get(),
                                                   precond_offset_.get(), precond_.get(), in, out);
    };

    // The CPU's IterativeSchurSolver, step for step.
    double two[2];
    TIEPOINT_RETURN_IF_ERROR(dot(r_.get(), r_.get(), nullptr, nullptr, two));
    const double bnorm = std::sqrt(two[0]);
    int it = 0;
    if (bnorm > 0) {
      precondition(r_.get(), z_.get());
      TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpy(p_.get(), z_.get(), n * sizeof(double), cudaMemcpyDeviceToDevice));
      TIEPOINT_RETURN_IF_ERROR(dot(r_.get(), z_.get(), nullptr, nullptr, two));
      double rz = two[0];
      for (; it < max_iterations; ++it) {
        apply(p_.get(), q_.get());
        TIEPOINT_RETURN_IF_ERROR(dot(p_.get(), q_.get(), nullptr, nullptr, two));
        const double pq = two[0];
        if (!(pq > 0)) {
          if (it == 0) {
            *solved = false;
            return Status::Ok();
          }
          break;  // lost positive curvature to rounding: keep the iterate so far
        }
        const double alpha = rz / pq;
        StepKernel<<<Blocks(n), kThreads>>>(n, alpha, p_.get(), q_.get(), x_.get(), r_.get());
        precondition(r_.get(), z_.get());
        TIEPOINT_RETURN_IF_ERROR(dot(r_.get(), r_.get(), r_.get(), z_.get(), two));
        if (std::sqrt(two[0]) <= tolerance * bnorm) {
          ++it;
          break;
        }
        const double rz_new = two[1];
        DirectionKernel<<<Blocks(n), kThreads>>>(n, rz_new / rz, z_.get(), p_.get());
        rz = rz_new;
      }
    }
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaMemcpy(x_out, x_.get(), n * sizeof(double), cudaMemcpyDeviceToHost));
    *iterations += it;
    *solved = true;
    for (int i = 0; i < n; ++i)
      if (!std::isfinite(x_out[i])) *solved = false;
    return Status::Ok();
  }

 private:
  bool structure_uploaded_ = false;
  std::vector<int64_t> precond_offset_host_;
  DeviceBuffer<int> block_row_, cols_, start_, size_, local_cols_;
  DeviceBuffer<int64_t> offset_, precond_offset_, point_ptr_;
  DeviceBuffer<uint8_t> point_free_, num_local_;
  DeviceBuffer<double> U_, diagU_, precond_, W_, Vinv_, x_, r_, z_, p_, q_, dots_;
};

}  // namespace

Status CreateCudaReducedPcg(std::unique_ptr<CudaReducedPcg>* out) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0)
    return Status::Unavailable(std::string("--ba-solver iterative-cuda: no usable CUDA device (") +
                               (err != cudaSuccess ? cudaGetErrorString(err) : "none found") +
                               "); use --ba-solver iterative");
  *out = std::make_unique<CudaReducedPcgImpl>();
  return Status::Ok();
}

}  // namespace tiepoint
