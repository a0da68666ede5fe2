// The reduced camera system of solver/reconstruction_ba.cc solved by preconditioned CG on an
// NVIDIA GPU (ReconstructionLinearSolver::kIterativeSchurCuda, `reconstruct --ba-solver
// iterative-cuda`). The LM driver, the linearization and the Schur complement's diagonal
// blocks stay on the CPU (solver/reconstruction_ba.cc); each LM step uploads the step's
// values (W_k = J_c^T J_p per observation, V_j^-1 per point, U's blocks, the damping, the
// block-Jacobi preconditioner, b) and runs every CG iteration on the device in double
// precision: the same matrix-free product as the CPU's IterativeSchurSolver,
//   S x = (U + mu D_U) x - sum_j W_j V_j^-1 W_j^T x,
// with one thread per point (its W_j^T x gathered, its contribution scattered by atomic
// adds), one thread per stored block of U (both triangles), and the same CG recurrences
// and stopping rule, so a step differs from the CPU's only in the order of sums.
#pragma once

#include <cstdint>
#include <memory>

#include "io/base/status.h"

namespace tiepoint {

// One LM step's reduced system as flat host arrays. Blocks: a pose's 6 columns or a
// camera's free intrinsics; U's blocks are stored for A <= B, row-major size[A] x size[B].
struct ReducedSystemView {
  int n = 0;                       // columns of the reduced system
  int num_blocks = 0;
  const int* block_start = nullptr;  // per block: first column
  const int* block_size = nullptr;   // per block: width
  const int64_t* row_ptr = nullptr;  // per block row, into cols / offset (num_blocks + 1)
  const int* cols = nullptr;         // column block of each stored block
  const int64_t* offset = nullptr;   // value offset of each stored block
  int64_t num_values = 0;
  const double* U = nullptr;         // U's blocks (undamped)
  const double* diagU = nullptr;     // D_U (n)
  double mu = 0;
  const double* precond = nullptr;   // per block, the inverse of S's damped diagonal block,
                                     // row-major size^2, blocks one after another
  int num_points = 0;
  const int64_t* point_ptr = nullptr;  // per point, its observations (num_points + 1)
  const uint8_t* point_free = nullptr;
  int max_local = 0;                   // camera-side columns stored per observation
  const int* local_cols = nullptr;     // max_local per observation
  const uint8_t* num_local = nullptr;  // per observation
  const double* W = nullptr;           // max_local x 3 per observation, row-major
  const double* Vinv = nullptr;        // per point, (V_j + mu D_Vj)^-1, 9 values column-major
  const double* b = nullptr;           // right-hand side (n)
  int intr_begin = 0;  // first intrinsics column: pose blocks (columns below) come first; an
                       // intrinsics block's columns are consecutive, at most
                       // kCudaMaxIntrinsicsBlock
};

// The widest intrinsics block the GPU's product takes (FULL_OPENCV's and
// THIN_PRISM_FISHEYE's 12 parameters); wider ones are refused (kInternal) before any work.
inline constexpr int kCudaMaxIntrinsicsBlock = 12;

class CudaReducedPcg {
 public:
  virtual ~CudaReducedPcg() = default;
  // x (n values) <- the CG solution from x = 0. The structure (row_ptr, cols, point_ptr,
  // local_cols, num_local, point_free) must be the same on every call of one object.
  // *solved = false when S showed no positive curvature at the first iteration.
  virtual Status Solve(const ReducedSystemView& sys, double relative_tolerance,
                       int max_iterations, double* x, bool* solved, int* iterations) = 0;
};

// kUnavailable (naming --ba-solver iterative) without CUDA in this build or without a GPU.
Status CreateCudaReducedPcg(std::unique_ptr<CudaReducedPcg>* out);

}  // namespace tiepoint
