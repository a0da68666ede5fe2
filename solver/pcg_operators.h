// The matrix-free operators of the PCG solvers, in precision T (float or double).
//
// Prepare() copies the Jacobian blocks from the evaluator into T, scaled column-wise by
// s = 1 / sqrt(diag(J^T J + D)) (Jacobi scaling: the scaled system J' = J diag(s),
// D' = D s^2 has a unit diagonal), and inverts the block-Jacobi preconditioner blocks:
//   U_i = J'_ci^T J'_ci + D'_i (9x9 per camera), V_p = J'_p^T J'_p + D'_p (3x3 per point).
// All products below are in the scaled space:
//   JTimes:        y = J' x                      (2 per observation)
//   JtTimes:       (g_c, g_p) = J'^T y
//   HessianTimes:  (J'^T J' + D') x
//   SchurTimes:    S x = U x - W V^-1 W^T x  (cameras only), W = J'_c^T J'_p
//   Camera/PointPrecondition: U_i^-1 v, V_p^-1 v.
// Work is split per point (point-major observation blocks) and per camera (camera-major
// index), so no two threads write the same output block. Dot products accumulate in
// double. Exposed for the operator tests against dense references.
#pragma once

#include <cstdint>
#include <vector>

#include "solver/ba_problem.h"
#include "solver/evaluator.h"

namespace tiepoint {

template <typename T>
class BlockOperators {
 public:
  BlockOperators(const BAProblem& problem, int num_threads);

  void Prepare(const JacobianBlocks& jac, const double* d_cameras, const double* d_points);

  void JTimes(const T* x_cameras, const T* x_points, T* y) const;
  void JtTimes(const T* y, T* g_cameras, T* g_points) const;
  void HessianTimes(const T* x_cameras, const T* x_points, T* y_cameras, T* y_points);
  void SchurTimes(const T* x_cameras, T* y_cameras);
  void CameraPrecondition(const T* in, T* out) const;
  void PointPrecondition(const T* in, T* out) const;
  // Reduced right-hand side b_c - W V^-1 b_p, and back-substitution V^-1 (b_p - W^T x_c).
  void ReducedRhs(const T* b_cameras, const T* b_points, T* out);
  void BackSubstitute(const T* b_points, const T* x_cameras, T* x_points) const;

  const std::vector<T>& camera_scale() const { return cam_scale_; }
  const std::vector<T>& point_scale() const { return pt_scale_; }
  int num_threads() const { return threads_; }

 private:
  const BAProblem& p_;
  int threads_;
  std::vector<T> jc_, jp_, e_;
  std::vector<T> cam_scale_, pt_scale_;
  std::vector<T> dc_, dp_;
  std::vector<T> cam_precond_;  // 81 per camera: U_i^-1
  std::vector<T> pt_precond_;   // 9 per point: V_p^-1
};

extern template class BlockOperators<float>;
extern template class BlockOperators<double>;

}  // namespace tiepoint
