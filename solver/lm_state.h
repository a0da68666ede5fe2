// The state of a Levenberg-Marquardt solve, wherever it lives (host memory for the CPU
// solvers, device memory for the CUDA solver): parameters x, gradient g = J^T r,
// diag(J^T J), the step dx and the trial point x + dx. The LM driver
// (solver/levenberg_marquardt.h) only exchanges scalars with it, so a GPU state never
// copies a parameter-sized vector to the host until the solve ends.
//
// Step(radius) solves (J^T J + D) dx = -g with D = clamp(diag(J^T J), 1e-6, 1e32) / radius
// (Ceres's LM diagonal) and D = 1 for constant parameters, whose Jacobian columns are zero.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "io/base/status.h"
#include "solver/ba_problem.h"
#include "solver/linear_solver.h"
#include "solver/loss.h"

namespace tiepoint {

struct LmStep {
  bool valid = false;            // the linear solve succeeded and dx is finite
  int linear_iterations = 0;
  double model_decrease = 0.0;   // -(g.dx + 1/2 |J dx|^2)
  double step_norm = 0.0;        // |dx|
  double x_norm = 0.0;           // |x|
  std::string message;
};

class LmState {
 public:
  virtual ~LmState() = default;
  // Cost at x (+inf if not finite); evaluates the Jacobian, gradient and diagonal there.
  virtual double Linearize() = 0;
  // max |g| at the last linearization.
  virtual double GradientMaxNorm() = 0;
  // Solves for dx at trust-region radius `radius`. A non-OK Status is a hard error.
  virtual Status Step(double radius, LmStep* step) = 0;
  // Cost at x + dx (+inf if not finite).
  virtual double TrialCost() = 0;
  // x <- x + dx.
  virtual void Accept() = 0;
  // Copies x out (9 per camera, 3 per point).
  virtual Status Parameters(double* cameras, double* points) = 0;
};

// Makes the state for a problem, starting at (cameras, points); `loss` is in the
// problem's (possibly normalized) units. The arrays outlive the state, which may keep x
// in them (updating them in place) instead of copying; Parameters() must still be called
// with them at the end.
using LmStateFactory = std::function<Status(const BAProblem& problem, const LossFunction& loss,
                                            double* cameras, double* points,
                                            std::unique_ptr<LmState>* state)>;

// The host-memory state over a Linearization and the LinearSolver reading it.
LmStateFactory HostLmStateFactory(LinearSystemFactory factory);

}  // namespace tiepoint
