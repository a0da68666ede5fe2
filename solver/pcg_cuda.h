// pcg-schur on an NVIDIA GPU: the PCG Linearization and solver of solver/pcg_solver.h with
// every per-observation array, the Jacobian blocks, the preconditioner and the CG vectors
// resident in device memory (float, with the normalization and fixed column scaling of the
// CPU path). Through CreateCudaLmState the LM state (parameters, gradient, step) stays on
// the device too and the driver receives scalars only; CreateCudaPcgLinearSystem offers
// the same kernels behind the host-memory Linearization/LinearSolver interfaces (tests).
//
// Kernels (solver/pcg_cuda.cu): per-observation residual/Jacobian evaluation, per-point
// (point-major blocks) and per-camera (a warp per camera over the camera-major index, warp
// shuffle reductions) gradient, diagonal, block-Jacobi blocks and Schur products; block
// reductions through CUB. Tested against the CPU PcgLinearization<float> on random problems
// (tests/solver/pcg_cuda_test.cc, which skips without a GPU).
#pragma once

#include "solver/linear_solver.h"
#include "solver/lm_state.h"
#include "solver/pcg_solver.h"

namespace tiepoint {

// kUnavailable when this build has no CUDA or no device is usable; kOutOfMemory naming the
// bytes needed when the problem does not fit; kInvalidOptions for pcg-hessian (CPU only).
Status CreateCudaPcgLinearSystem(const PcgOptions& options, const BAProblem& problem,
                                 const LossFunction& loss, LinearSystem* system);

// Memory-bandwidth figures of the CG iteration's kernels (Schur product in two kernels,
// camera preconditioner, the CG vector update), timed with CUDA events over `repetitions`
// iterations at the problem's initial linearization, against a device-to-device copy
// measured in the same call. Bytes are counted from the kernels' loads and stores
// (reads + writes), the copy as read + write.
struct CudaBandwidthReport {
  double copy_gb_per_s = 0.0;           // cudaMemcpy device-to-device, read + write
  double cg_iteration_ms = 0.0;         // one CG iteration's kernels
  double bytes_per_observation = 0.0;   // per CG iteration, observation-sized traffic
  double bytes_per_iteration = 0.0;     // all traffic of one CG iteration
  double achieved_gb_per_s = 0.0;
  double fraction_of_copy = 0.0;
};
Status MeasureCudaCgBandwidth(const BAProblem& problem, const double* cameras,
                              const double* points, int repetitions, CudaBandwidthReport* report);

// The LM state resident on the device (what `tiepoint ba --device cuda` uses): per LM
// iteration the host receives only scalars. Same errors as above.
Status CreateCudaLmState(const PcgOptions& options, const BAProblem& problem,
                         const LossFunction& loss, const double* cameras, const double* points,
                         std::unique_ptr<LmState>* state);

}  // namespace tiepoint
