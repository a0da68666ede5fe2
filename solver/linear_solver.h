// The one interface through which the LM driver reaches a linear solver.
//
// Each LM iteration solves the damped Gauss-Newton system
//     (J^T J + D) dx = -g,     g = J^T r,   D = diag(d) >= 0,
// with J = [J_c J_p] in block form (solver/evaluator.h). Exact solvers (CHOLMOD on the
// Schur complement) and iterative ones (PCG on J^T J or on the implicit Schur
// complement) implement it; the driver never branches on which one it holds.
#pragma once

#include <memory>
#include <string>

#include "io/base/status.h"
#include "solver/ba_problem.h"
#include "solver/evaluator.h"

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

  // Structure-only work done once per solve (symbolic analysis, pattern allocation).
  virtual Status Initialize(const BAProblem& problem) = 0;

  // Solves (J^T J + diag(d)) dx = rhs, with rhs = -g passed split into cameras/points.
  // A non-OK Status is a hard error (out of memory, library failure); an unsolvable
  // system is reported through summary->success.
  virtual Status Solve(const BAProblem& problem, const JacobianBlocks& jac,
                       const double* d_cameras, const double* d_points,
                       const double* rhs_cameras, const double* rhs_points, double* dx_cameras,
                       double* dx_points, LinearSolverSummary* summary) = 0;
};

}  // namespace tiepoint
