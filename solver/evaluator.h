// Residuals and Jacobian blocks of a BAProblem on the CPU, in double precision: the
// Linearization that the exact (CHOLMOD) solver consumes, and the reference the others
// are tested against.
//
// For observation i (in BAProblem order): r_i = sqrt(rho'(s_i)) (pi(c, X) - x_i), with
// s_i = |pi(c, X) - x_i|^2, J_c,i = d r_i / d c (2x9 row-major) and J_p,i = d r_i / d X
// (2x3). Columns of constant parameters are zero. Cost = 1/2 sum rho(s_i).
// Multithreaded over observations with OpenMP (`num_threads` per call, no globals).
#pragma once

#include <vector>

#include "solver/linearization.h"

namespace tiepoint {

struct JacobianBlocks {
  std::vector<double> residuals;  // 2 per observation (loss-weighted)
  std::vector<double> jc;         // 18 per observation
  std::vector<double> jp;         // 6 per observation
};

class Evaluator {
 public:
  Evaluator(const BAProblem& problem, const LossFunction& loss, int num_threads)
      : problem_(problem),
        loss_(loss),
        num_threads_(ThreadsForObservations(num_threads, problem.num_observations)) {}

  // Cost only. Returns +inf if any residual is not finite (e.g. a point on the camera plane).
  double Cost(const double* cameras, const double* points) const;

  // Cost, weighted residuals and Jacobians. Returns the cost (+inf if not finite).
  double Evaluate(const double* cameras, const double* points, JacobianBlocks* jac) const;

  // g = J^T r, split into camera (9 per camera) and point (3 per point) parts.
  void Gradient(const JacobianBlocks& jac, double* g_cameras, double* g_points) const;

  // Column squared norms of J (the diagonal of J^T J).
  void JtJDiagonal(const JacobianBlocks& jac, double* d_cameras, double* d_points) const;

  // y = J x (2 per observation).
  void JacobianTimes(const JacobianBlocks& jac, const double* x_cameras, const double* x_points,
                     double* y) const;

 private:
  const BAProblem& problem_;
  LossFunction loss_;
  int num_threads_;
};

// The Linearization over double Jacobian blocks (what CholmodSchurSolver reads).
class DoubleBlockLinearization : public Linearization {
 public:
  DoubleBlockLinearization(const BAProblem& problem, const LossFunction& loss, int num_threads)
      : evaluator_(problem, loss, num_threads), problem_(problem) {}

  double Cost(const double* cameras, const double* points) override {
    return evaluator_.Cost(cameras, points);
  }
  double Linearize(const double* cameras, const double* points) override {
    return evaluator_.Evaluate(cameras, points, &jac_);
  }
  void Gradient(double* g_cameras, double* g_points) override {
    evaluator_.Gradient(jac_, g_cameras, g_points);
  }
  void JtJDiagonal(double* d_cameras, double* d_points) override {
    evaluator_.JtJDiagonal(jac_, d_cameras, d_points);
  }
  double JacobianNormSquared(const double* x_cameras, const double* x_points) override;

  const JacobianBlocks& jacobian() const { return jac_; }
  const BAProblem& problem() const { return problem_; }

 private:
  Evaluator evaluator_;
  const BAProblem& problem_;
  JacobianBlocks jac_;
  std::vector<double> jx_;
};

}  // namespace tiepoint
