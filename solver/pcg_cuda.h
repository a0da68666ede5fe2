// pcg-schur and pcg-hessian on an NVIDIA GPU: the PCG Linearization and solver of solver/pcg_solver.h with
// every per-observation array, the Jacobian blocks (or, where they do not fit, their
// recomputation in every product), the preconditioner and the CG vectors
// resident in device memory (float, with the normalization and fixed column scaling of the
// CPU path). Through CreateCudaLmState the LM state (parameters, gradient, step) stays on
// the device too and the driver receives scalars only; CreateCudaPcgLinearSystem offers
// the same kernels behind the host-memory Linearization/LinearSolver interfaces (tests).
//
// Kernels (solver/pcg_cuda.cu): per-observation residual/Jacobian evaluation into
// structure-of-arrays planes (coalesced); per-point gradient, diagonal and 3x3 blocks;
// per-camera gradient and 9x9 Gram blocks (a block per camera over the camera-major
// index, warp-shuffle and shared-memory reductions); the Schur product as three streaming
// passes (per-point sums by segmented warp scans, per-camera sums in shared memory) when
// the camera sums fit in shared memory, else with a camera pass over a second copy of the
// blocks in (camera group, point) order, each group's sums in shared memory (else, where
// that copy does not fit, fused into one pass over the point-major blocks); the structure (row pointers, camera-major index) built on the device by CUB
// radix sorts; dot products with block reductions; CUB device reductions. Tested against the CPU PcgLinearization<float> on random problems
// (tests/solver/pcg_cuda_test.cc, which skips without a GPU).
#pragma once

#include <vector>

#include "solver/linear_solver.h"
#include "solver/lm_state.h"
#include "solver/pcg_solver.h"

namespace tiepoint {

// kUnavailable when this build has no CUDA or no device is usable; kOutOfMemory naming the
// bytes needed when the problem does not fit even with recomputed blocks (when only the
// stored blocks do not fit, it recomputes them and says so on stderr); kInvalidOptions for
// --precision double. pcg-schur and pcg-hessian (options.kind) both run on the device.
// `force_global_camera_sums` (tests): the fused Schur kernel's global-memory path, which
// problems with too many cameras for shared memory take where the grouped copy of the
// blocks does not fit (else they take camera groups: a second copy of the blocks in
// (camera group, point) order, so each group's camera sums fit in shared memory).
// TIEPOINT_CUDA_CAMERA_GROUP_SIZE=N forces groups of N cameras, =0 none (tests, benchmarks).
Status CreateCudaPcgLinearSystem(const PcgOptions& options, const BAProblem& problem,
                                 const LossFunction& loss, LinearSystem* system,
                                 bool force_global_camera_sums = false);

// Tests: at the first linearization of (cameras, points) and damping d (unscaled, cameras
// then points), the scaled Schur product S x and reduced right-hand side bc - W V^-1 bp.
Status CudaSchurOperatorsForTest(const BAProblem& problem, const LossFunction& loss,
                                 const double* cameras, const double* points, const double* d,
                                 const std::vector<float>& x, const std::vector<float>& bc,
                                 const std::vector<float>& bp, bool global_camera_sums,
                                 std::vector<float>* sx, std::vector<float>* reduced);

// Memory-bandwidth figures of a whole CG iteration (fused Schur product, dot products with
// their transfers to the host, vector updates, camera preconditioner), timed with CUDA
// events over `repetitions` iterations at the problem's initial linearization, against a
// device-to-device copy measured in the same call. Bytes are those the iteration must
// move to or from device memory, each counted once (reads + writes); the copy as read +
// write.
struct CudaBandwidthReport {
  double copy_gb_per_s = 0.0;           // cudaMemcpy device-to-device, read + write
  double cg_iteration_ms = 0.0;         // one CG iteration, end to end
  double schur_ms = 0.0;                // the Schur product alone
  bool shared_camera_sums = false;      // camera sums in shared memory (else global)
  int blocks = 0;                       // persistent blocks of the camera-sum kernel
  bool streaming = false;               // the three-pass streaming product (else fused)
  int camera_groups = 0;                // camera pass by groups of cameras (0: none)
  int cameras_per_group = 0;
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
