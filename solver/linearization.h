// The evaluator seam of the LM driver: residuals and Jacobian of a BAProblem at a point,
// held in whatever storage the linear solver paired with it needs (double blocks for
// CHOLMOD; scaled float or double blocks, or nothing at all when J is recomputed, for the
// PCG solvers). The driver sees only double parameter vectors and the scalars below.
//
// Cost = 1/2 sum rho(|r_i|^2) with r_i the reprojection residual (solver/camera_model.h)
// and rho the robust loss; the Gauss-Newton model uses residuals and Jacobian rows scaled
// by sqrt(rho'(|r_i|^2)) (solver/loss.h). Columns of constant parameters are zero.
#pragma once

#include <memory>

#include "solver/ba_problem.h"
#include "solver/loss.h"

namespace tiepoint {

class Linearization {
 public:
  virtual ~Linearization() = default;

  // Cost at a point, without Jacobians. +inf if any residual is not finite.
  virtual double Cost(const double* cameras, const double* points) = 0;

  // Cost, residuals and Jacobians at a point, kept for the calls below and for the
  // paired linear solver until the next Linearize(). +inf if not finite.
  virtual double Linearize(const double* cameras, const double* points) = 0;

  // g = J^T r (9 per camera, 3 per point).
  virtual void Gradient(double* g_cameras, double* g_points) = 0;

  // diag(J^T J).
  virtual void JtJDiagonal(double* d_cameras, double* d_points) = 0;

  // |J x|^2, for the model decrease of a step.
  virtual double JacobianNormSquared(const double* x_cameras, const double* x_points) = 0;
};

}  // namespace tiepoint
