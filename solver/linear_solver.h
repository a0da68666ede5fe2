// The one interface through which the LM driver reaches a linear solver.
//
// Each LM iteration solves the damped Gauss-Newton system
//     (J^T J + D) dx = rhs,     rhs = -g = -J^T r,   D = diag(d) >= 0,
// where J is held by the Linearization the solver was created with (the factory pairs
// them: CHOLMOD with double blocks, PCG with its own scaled blocks). Exact and iterative,
// CPU and (later) CUDA solvers implement it; the driver never branches on which it holds.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "io/base/status.h"
#include "solver/ba_problem.h"
#include "solver/linearization.h"

namespace tiepoint {

struct LinearSolverSummary {
  bool success = false;     // false: the system could not be solved (e.g. not positive
                            // definite); the driver rejects the step and damps more.
  int iterations = 0;       // CG iterations, or 1 for a factorization
  std::string message;
};

class LinearSolver {
 public:
  virtual ~LinearSolver() = default;

  // Solves (J^T J + diag(d)) dx = rhs at the linearization's current point, rhs split
  // into cameras (9 each) and points (3 each). A non-OK Status is a hard error (out of
  // memory, library failure); an unsolvable system is reported through summary->success.
  virtual Status Solve(const double* d_cameras, const double* d_points,
                       const double* rhs_cameras, const double* rhs_points, double* dx_cameras,
                       double* dx_points, LinearSolverSummary* summary) = 0;
};

// A Linearization and the LinearSolver that reads it, made for one problem.
struct LinearSystem {
  std::unique_ptr<Linearization> linearization;
  std::unique_ptr<LinearSolver> solver;
};

// Builds the pair for a problem (structure-only work such as symbolic analysis happens
// here, once per solve). `loss` is in the problem's (possibly normalized) units.
using LinearSystemFactory =
    std::function<Status(const BAProblem& problem, const LossFunction& loss, LinearSystem* out)>;

}  // namespace tiepoint
