// Bundle adjustment of a Scene: options, summary, and the one interface every backend
// implements.
//
// Minimizes  cost(x) = 1/2 sum_i rho(|r_i(x)|^2)  over camera and point parameters, with
// r_i the BAL reprojection residual of observation i (solver/camera_model.h) and rho a
// robust loss (solver/loss.h). The cost is reported exactly as Ceres reports it.
//
// Backends, picked in one factory switch (BundleAdjuster::Create):
//   kCholmod        tiepoint's Levenberg-Marquardt driver with the exact Schur-complement
//                   linear solver factored by CHOLMOD (double precision).
//   kCeresSparse    the same problem handed to Ceres 2.1 (SPARSE_SCHUR).
//   kCeresIterative the same problem handed to Ceres 2.1 (ITERATIVE_SCHUR, SCHUR_JACOBI).
//   kPcgSchur       tiepoint's LM with matrix-free PCG on the implicit Schur complement
//                   (solver/pcg_solver.h), float (default) or double.
//   kPcgHessian     tiepoint's LM with matrix-free PCG on J^T J + D.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "io/base/device.h"
#include "io/base/status.h"
#include "io/scene.h"
#include "solver/loss.h"

namespace tiepoint {

enum class SolverType { kCholmod, kCeresSparse, kCeresIterative, kPcgSchur, kPcgHessian };
const char* ToString(SolverType type);
Status SolverTypeFromString(const std::string& text, SolverType* type);

enum class TerminationType {
  kConvergenceFunction,   // |cost change| / cost <= function_tolerance
  kConvergenceGradient,   // max |gradient| <= gradient_tolerance
  kConvergenceParameter,  // |step| <= parameter_tolerance (|x| + parameter_tolerance)
  kMaxIterations,         // max_iterations reached without convergence
  kTrustRegionCollapsed,  // the trust region shrank below its minimum: no better point
  kFailure,               // numerical failure (non-finite initial cost, solver error)
};
const char* ToString(TerminationType type);

// One row of the per-iteration trace. Iteration 0 is the initial state.
struct IterationSummary {
  int iteration = 0;
  double cost = 0.0;               // cost after this iteration (of the accepted point)
  double cost_change = 0.0;        // previous cost - new cost (0 when rejected)
  double relative_decrease = 0.0;  // actual / model-predicted decrease of the trial step
  double trust_region_radius = 0.0;
  double lambda = 0.0;             // LM damping used for this step = 1 / radius
  int linear_iterations = 0;       // CG iterations (1 for a direct factorization)
  double step_norm = 0.0;
  double gradient_max_norm = 0.0;
  bool step_accepted = false;
  double iteration_time_s = 0.0;
  double time_s = 0.0;             // cumulative wall time since Solve() began
};

struct BundleAdjusterOptions {
  // Which backend solves the problem.
  SolverType solver = SolverType::kPcgSchur;
  // Where the PCG solvers run: the CPU, or a CUDA GPU (pcg-schur, float, stored J).
  Device device = Device::kCpu;
  // PCG solvers: arithmetic precision (true: float with Jacobi scaling; false: double).
  bool single_precision = true;
  // PCG solvers: forcing term eta (CG stops when |r| <= eta |r0|) and iteration bounds.
  double cg_eta = 0.1;
  // PCG solvers: stop CG on the relative residual (false) or on the quadratic model's
  // relative decrease (true, Nash and Sofer's rule).
  bool cg_quadratic_termination = true;
  int cg_min_iterations = 1;
  int cg_max_iterations = 100;
  // PCG solvers: recompute Jacobian blocks in every product instead of storing them.
  bool recompute_jacobian = false;
  // Maximum number of LM iterations (Ceres's default).
  int max_iterations = 50;
  // Worker threads; 0 means all hardware threads.
  int num_threads = 0;
  // Convergence tests, as Ceres defines them.
  double function_tolerance = 1e-6;
  double gradient_tolerance = 1e-10;
  double parameter_tolerance = 1e-8;
  // Trust region (LM damping lambda = 1 / radius), Ceres's defaults.
  double initial_trust_region_radius = 1e4;
  double max_trust_region_radius = 1e16;
  double min_trust_region_radius = 1e-32;
  // A step is accepted when actual / predicted decrease exceeds this.
  double min_relative_decrease = 1e-3;
  // Robust loss on each observation's squared residual norm.
  LossFunction loss;
  // Cameras held constant (indices into the scene).
  std::vector<int> fixed_cameras;
  // Hold f, k1, k2 of every camera constant.
  bool fix_intrinsics = false;
  // Called after every iteration (progress display); may be empty.
  std::function<void(const IterationSummary&)> callback;

  // Explains bad options in words, naming the field. `num_cameras` bounds fixed_cameras.
  Status Check(int num_cameras) const;
};

struct BundleAdjusterSummary {
  std::string solver;
  int num_threads = 0;
  int num_cameras = 0;
  int num_points = 0;
  long long num_observations = 0;
  double initial_cost = 0.0;
  double final_cost = 0.0;
  int iterations = 0;             // LM iterations performed (trace rows after iteration 0)
  int successful_iterations = 0;
  TerminationType termination = TerminationType::kFailure;
  std::string message;            // a sentence on why it stopped
  double total_time_s = 0.0;
  double linear_solver_time_s = 0.0;
  double evaluation_time_s = 0.0;
  std::vector<IterationSummary> trace;

  // RMS reprojection error in pixels for a cost without robust loss: sqrt(2 cost / N).
  double RmsReprojectionError(double cost) const;
  bool IsSolutionUsable() const { return termination != TerminationType::kFailure; }
};

class BundleAdjuster {
 public:
  virtual ~BundleAdjuster() = default;

  // Creates the backend named in options.solver. A backend not built into this binary
  // is an kUnavailable error, never a silent fallback.
  static Status Create(const BundleAdjusterOptions& options,
                       std::unique_ptr<BundleAdjuster>* adjuster);

  // Optimizes the scene in place. The scene is left at the best point found even when
  // the returned summary reports a failure; a non-OK Status means nothing was solved
  // (bad options for this scene, backend error) and the scene is unchanged.
  virtual Status Solve(Scene* scene, BundleAdjusterSummary* summary) = 0;
};

}  // namespace tiepoint

namespace tiepoint {

// RMS of the plain (unweighted) reprojection error over all observations, in pixels:
// sqrt(sum |r_i|^2 / N). Independent of the robust loss. Multithreaded.
double ReprojectionRms(const Scene& scene, int num_threads);

}  // namespace tiepoint
