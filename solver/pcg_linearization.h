// The Linearization of the matrix-free PCG solvers, and their operators, in precision T
// (float or double). After Wu, Agarwal, Curless, Seitz, "Multicore Bundle Adjustment"
// (CVPR 2011).
//
// Jacobian column scaling (part of the normalization that makes float safe): at the first
// Linearize(), s = 1 / sqrt(diag(J^T J)) (1 for empty columns) is fixed, and every
// operator works on J' = J diag(s). Blocks are stored point-major (the BAProblem order),
// 2x9 for the camera and 2x3 for the point of each observation, so J' x and J'^T y read
// contiguous memory; J'^T y for cameras gathers through the camera-major index, so no two
// threads write the same block, except in SchurTimes (the CG hot loop), which streams the
// point-major blocks once and sums camera results in per-thread accumulators. With `recompute`, nothing per observation is stored: each
// product re-evaluates the blocks from the parameters (memory for time).
//
// Operators, in the scaled space, with D' = diag(s) D diag(s) set by PrepareDamping():
//   JTimes:        y = J' x                      (2 per observation)
//   JtTimes:       (g_c, g_p) = J'^T y
//   HessianTimes:  (J'^T J' + D') x
//   SchurTimes:    S x = U x - W V^-1 W^T x over cameras, U = J'_c^T J'_c + D'_c,
//                  V = J'_p^T J'_p + D'_p, W = J'_c^T J'_p: per point y_o = J'_c x_c,
//                  z = V^-1 sum J'_p^T y_o, e_o = y_o - J'_p z; per camera
//                  (S x)_c = D'_c x_c + sum J'_c^T e_o.
//   Camera/PointPrecondition: U_i^-1 v (9x9 blocks), V_p^-1 v (3x3 blocks).
//   ReducedRhs:    b_c - W V^-1 b_p;  BackSubstitute: V^-1 (b_p - W^T x_c).
// Gradient, diagonal and |J x|^2 (the Linearization interface) are in unscaled units and
// accumulate in double. OpenMP with `num_threads`, no globals.
#pragma once

#include <cstdint>
#include <vector>

#include "solver/linearization.h"

namespace tiepoint {

template <typename T>
class PcgLinearization : public Linearization {
 public:
  PcgLinearization(const BAProblem& problem, const LossFunction& loss, int num_threads,
                   bool recompute);

  double Cost(const double* cameras, const double* points) override;
  double Linearize(const double* cameras, const double* points) override;
  void Gradient(double* g_cameras, double* g_points) override;
  void JtJDiagonal(double* d_cameras, double* d_points) override;
  double JacobianNormSquared(const double* x_cameras, const double* x_points) override;

  // Sets D' = s D s and inverts the preconditioner blocks U_i, V_p.
  void PrepareDamping(const double* d_cameras, const double* d_points);

  void JTimes(const T* x_cameras, const T* x_points, T* y) const;
  void JtTimes(const T* y, T* g_cameras, T* g_points) const;
  void HessianTimes(const T* x_cameras, const T* x_points, T* y_cameras, T* y_points);
  void SchurTimes(const T* x_cameras, T* y_cameras);
  void CameraPrecondition(const T* in, T* out) const;
  void PointPrecondition(const T* in, T* out) const;
  void ReducedRhs(const T* b_cameras, const T* b_points, T* out);
  void BackSubstitute(const T* b_points, const T* x_cameras, T* x_points) const;

  const std::vector<double>& camera_scale() const { return cam_scale_; }
  const std::vector<double>& point_scale() const { return pt_scale_; }
  int num_threads() const { return threads_; }
  bool recompute() const { return recompute_; }

 private:
  // Evaluates observation i at the stored parameters: double residual and Jacobian
  // blocks, loss-weighted, constant columns zeroed. Returns rho (cost contribution x2).
  double EvaluateObservation(const double* cameras, const double* points, int64_t i,
                             double* r, double* jc, double* jp) const;
  // The scaled blocks J'_c,i and J'_p,i: stored, or recomputed into `jc`, `jp`.
  inline void Blocks(int64_t i, const T** jc, const T** jp, T* jc_buf, T* jp_buf) const;
  void ComputeBlocks();  // J'^T J' blocks of cameras and points (once per Linearize)

  const BAProblem& p_;
  LossFunction loss_;
  int threads_;
  bool recompute_;
  bool scaled_ = false;         // column scaling fixed (first Linearize done)
  bool blocks_valid_ = false;   // U0, V0 computed for the current linearization
  std::vector<double> cameras_, points_;    // the linearization point
  std::vector<double> cam_scale_, pt_scale_;
  std::vector<double> gc_, gp_, diag_c_, diag_p_;  // unscaled gradient and diag(J^T J)
  std::vector<T> jc_, jp_;      // stored scaled blocks (empty with recompute)
  std::vector<T> e_;            // per-observation workspace (2 each)
  std::vector<double> u0_;      // 81 per camera: J'_c^T J'_c
  std::vector<T> v0_;           // 9 per point:   J'_p^T J'_p
  std::vector<T> dc_, dp_;      // scaled damping
  std::vector<T> cam_precond_;  // 81 per camera: U_i^-1
  std::vector<T> pt_precond_;   // 9 per point: V_p^-1
  std::vector<double> scaled_x_;  // JacobianNormSquared workspace: x / s
  std::vector<double> cam_acc_;   // SchurTimes: 9 per camera per thread
};

extern template class PcgLinearization<float>;
extern template class PcgLinearization<double>;

}  // namespace tiepoint
