// Bundle adjustment of an image-based reconstruction (io/reconstruction.h): a pose block
// per image plus an index into intrinsics blocks shared by every image of one camera (one
// physical camera, many images: COLMAP's --single-camera case), and the 3D points.
// tiepoint's own Levenberg-Marquardt; no Ceres (tests compare against Ceres with a shared
// parameter block).
//
// Residual of observation (image i, point X), in pixels (COLMAP's image convention):
//   X_cam = R_i X + t_i,  (u, v) = X_cam.xy / X_cam.z,
//   r = CameraNormalizedToPixel(model_c, params_c, u, v) - observed.
// Cost = 1/2 sum rho(|r|^2) (solver/loss.h; Ceres's convention).
//
// Parametrisation of the step: the rotation is updated on the left, R <- exp([dw]x) R,
// t <- t + dt, X <- X + dX, params <- params + dparams; so d X_cam / d dw = -[R X]x.
// Which parameters move: images in `variable_images` (others and those in
// `fixed_pose_images` keep their pose), cameras' intrinsics unless fix_intrinsics (the
// principal point only with refine_principal_point, the focal length(s) and radial terms
// otherwise), points unless listed in `fixed_points`. Observations of points seen by
// variable images in other images count as constraints (COLMAP's local BA).
//
// Linear solver: each LM step eliminates the points (Schur complement) and solves the
// reduced system over poses and intrinsics, S dx_c = b, then back-substitutes the points.
// S is assembled once per step as a block-sparse matrix (a 6x6 block per pose, a block per
// camera's free intrinsics; off-diagonal blocks only where two blocks share a point) and
// solved by the option's linear_solver: kDenseSchur (dense Eigen LLT; the mapper's local
// problems), kSparseSchur (CHOLMOD supernodal Cholesky of the same matrix: exact, scales to
// thousands of images) or kIterativeSchur (matrix-free PCG: S x = U x - sum_j W_j V_j^-1
// W_j^T x point by point, block-Jacobi preconditioner from S's diagonal blocks; only the
// diagonal blocks of S are formed). Damping, predicted decrease and step control are the
// same for all three.
// D = mu diag(J^T J) (Marquardt), mu adapted by the gain ratio (Nielsen's rule).
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "io/base/status.h"
#include "io/reconstruction.h"
#include "solver/loss.h"

namespace tiepoint {

// kIterativeSchurCuda: kIterativeSchur's CG iterations on the GPU
// (solver/reconstruction_ba_cuda.h); the linearization stays on the CPU.
enum class ReconstructionLinearSolver { kDenseSchur, kSparseSchur, kIterativeSchur, kIterativeSchurCuda };

// "dense" | "sparse" | "iterative" | "iterative-cuda" (the CLI's --ba-solver names).
Status ReconstructionLinearSolverFromName(const std::string& name, ReconstructionLinearSolver* out);
const char* ReconstructionLinearSolverName(ReconstructionLinearSolver solver);

struct ReconstructionBAOptions {
  int max_iterations = 50;
  // Stop when the relative cost decrease of an accepted step is below this.
  double function_tolerance = 1e-6;
  // Stop when |dx| <= parameter_tolerance (|x| + parameter_tolerance).
  double parameter_tolerance = 1e-8;
  double initial_mu = 1e-4;
  // Step extension (0: off, plain LM). When a step lowers the cost by more than this many
  // times the decrease its linear model predicted, the model's curvature was too high
  // along it (with a robust loss, Gauss-Newton's rho' J^T J leaves out the loss's negative
  // second derivative, so the steps come out short and LM crawls at the same small mu for
  // tens of iterations): the step is tried again at 2, 4, 8 and 16 times its length, and
  // the longest that kept lowering the cost is taken. Each try costs one evaluation of the
  // cost, a fraction of a step's linearization and Schur complement. The mapper sets 1.5:
  // on the dino ring (self-calibrated) its 64 adjustments took 576 steps instead of 710,
  // 0.37 s instead of 0.47 with 2 threads (sfm/incremental_mapper.h).
  double step_extension = 0.0;
  LossFunction loss;  // default: none (least squares)
  bool fix_intrinsics = false;
  bool refine_principal_point = false;
  bool refine_focal = true;
  bool refine_extra = true;  // distortion terms
  // The models with fx and fy (PINHOLE, OPENCV, OPENCV_FISHEYE, FULL_OPENCV, FOV,
  // THIN_PRISM_FISHEYE): with refine_focal, both focal lengths move together, keeping the
  // ratio fy / fx each camera starts with (one column, fx = s, fy = (fy / fx) s).
  bool hold_aspect_ratio = false;
  // The distortion terms after k1, k2 (with refine_extra; otherwise held where they are):
  // OPENCV's tangential p1, p2, OPENCV_FISHEYE's k3, k4, FULL_OPENCV's p1, p2, k3..k6 and
  // THIN_PRISM_FISHEYE's p1, p2, k3, k4, sx1, sy1.
  bool refine_tangential = true;
  // OpenMP threads for linearization, the Schur complement and the cost (1: none). The
  // result depends on the thread count only through the order of floating-point sums.
  int num_threads = 1;
  ReconstructionLinearSolver linear_solver = ReconstructionLinearSolver::kDenseSchur;
  // kIterativeSchur: CG stops at |b - S x| <= pcg_relative_tolerance |b| or after
  // pcg_max_iterations iterations (the step is then taken as it is; the gain ratio judges it).
  // 0.1 is the inexact-Newton forcing term Ceres uses by default: on BAL problem-49 it takes
  // 1,695 CG iterations where 1e-4 took 14,979, for 36 LM steps instead of 32 and a final
  // cost within 1e-7 of CHOLMOD's (bench/reconstruction_ba_bench --pcg-tolerance).
  double pcg_relative_tolerance = 1e-1;
  int pcg_max_iterations = 500;
  // kIterativeSchurCuda: problems with fewer observations than this run kIterativeSchur on
  // the CPU instead (the same CG), where the GPU's per-step upload and launch latency cost
  // more than the iterations save: on an H200 host the GPU lost at 32k observations and
  // won from 200k (bench/results/reconstruction-ba-h200-20261125.json). 0: always the GPU.
  int64_t cuda_min_observations = 100000;
  // Called after every LM step: its number (from 1), the cost after it, whether it was
  // taken, and mu (the damping it was tried with). For progress lines; changes nothing.
  std::function<void(int iteration, double cost, bool accepted, double mu)> progress;

  Status Check() const;
};

// Which parts of the reconstruction move.
struct ReconstructionBAConfig {
  std::set<uint32_t> variable_images;     // image ids whose pose is optimised (and whose
                                          // points are optimised)
  std::set<uint32_t> fixed_pose_images;   // subset of variable_images held fixed (gauge)
  std::set<uint64_t> fixed_points;        // points held fixed
  // When true, only the points observed by a variable image are in the problem (local BA),
  // found through those images' points2D (their point3D_id, which must agree with the
  // points' tracks, as the COLMAP readers check and the mapper keeps them); otherwise every
  // point of the reconstruction is.
  bool only_points_of_variable_images = true;
  // Cameras whose intrinsics are held fixed even when options allow refining.
  std::set<uint32_t> fixed_cameras;
};

struct ReconstructionBASummary {
  int iterations = 0;
  int num_residuals = 0;       // 2 per observation
  int num_variable_images = 0;
  int num_variable_points = 0;
  double initial_cost = 0, final_cost = 0;
  double seconds = 0;
  int linear_iterations = 0;   // kIterativeSchur: CG iterations over all steps
  bool converged = false;
  std::string termination;
};

Status BundleAdjustReconstruction(const ReconstructionBAOptions& options,
                                  const ReconstructionBAConfig& config, Reconstruction* rec,
                                  ReconstructionBASummary* summary);

// Residual (pixels) and Jacobians of one observation, for tests and for the solver:
//   jpose: 2x6 row-major over (dw, dt); jpoint: 2x3; jparams: 2 x NumParams(model).
// Any Jacobian pointer may be null. Returns false when the point is behind the camera
// (Z <= 0); the residual is then still computed.
bool ReconstructionResidual(CameraModelId model, const double* params, const double* R,
                            const double* t, const double* X, const double* observed,
                            double* residual, double* jpose, double* jpoint, double* jparams);

}  // namespace tiepoint
