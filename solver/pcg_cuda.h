// pcg-schur on an NVIDIA GPU: the PCG Linearization and solver of solver/pcg_solver.h with
// every per-observation array, the Jacobian blocks, the preconditioner and the CG vectors
// resident in device memory (float, with the normalization and fixed column scaling of the
// CPU path). Per LM iteration the host exchanges only parameter-sized vectors (cameras and
// points, never observations) and the CG scalars.
//
// Kernels (solver/pcg_cuda.cu): per-observation residual/Jacobian evaluation, per-point
// (point-major blocks) and per-camera (a warp per camera over the camera-major index, warp
// shuffle reductions) gradient, diagonal, block-Jacobi blocks and Schur products; block
// reductions through CUB. Tested against the CPU PcgLinearization<float> on random problems
// (tests/solver/pcg_cuda_test.cc, which skips without a GPU).
#pragma once

#include "solver/linear_solver.h"
#include "solver/pcg_solver.h"

namespace tiepoint {

// kUnavailable when this build has no CUDA or no device is usable; kOutOfMemory naming the
// bytes needed when the problem does not fit; kInvalidOptions for pcg-hessian (CPU only).
Status CreateCudaPcgLinearSystem(const PcgOptions& options, const BAProblem& problem,
                                 const LossFunction& loss, LinearSystem* system);

}  // namespace tiepoint
