// The Linearization of the matrix-free PCG solvers, and their operators, in precision T
// (float or double). After Wu, Agarwal, Curless, Seitz, "Multicore Bundle Adjustment"
// (CVPR 2011).
//
// Jacobian column scaling (part of the normalization that makes float safe): at the first
// Linearize(), s = 1 / sqrt(diag(J^T J)) (1 for empty columns) is fixed, and every
// operator works on J' = J diag(s). Blocks are stored point-major (the BAProblem order),
// 2x9 for the camera and 2x3 for the point of each observation, so every product streams
// them once in order; camera results are summed in per-thread accumulators (9 or 81
// doubles per camera), so no two threads write the same block and no camera-major index
// is needed. With `recompute`, nothing per observation is stored: each product
// re-evaluates the blocks of a point once from the parameters (memory for time).
//
// Memory, per observation: 96 bytes of float blocks (none with recompute); per point: the
// scale, the scaled gradient and one packed symmetric 3x3 block in T (the damped inverse
// V^-1 with stored blocks, the undamped V with recompute, inverted on the fly), plus the
// scaled point damping unless `schur_only` with stored blocks. The linearization point is
// the caller's arrays, not a copy: they must stay unchanged until the next Linearize().
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
//   ReducedRhs:    b_c - W V^-1 (k b_p);  BackSubstitute: V^-1 (k b_p - W^T x_c).
// Gradient, diagonal and |J x|^2 (the Linearization interface) are in unscaled units and
// accumulate in double. OpenMP with `num_threads`, no globals.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "solver/camera_model.h"
#include "solver/linearization.h"

namespace tiepoint {

// An allocator for the Jacobian blocks: elements are left uninitialized on resize (the
// first Linearize writes every entry, in parallel, so zeroing them first is wasted work),
// and large arrays are 2 MiB aligned, on transparent huge pages when the user asks for
// them (io/base/large_alloc.h AllocateLarge).
void* AllocateBlocks(size_t bytes);
void FreeBlocks(void* p) noexcept;

template <typename T>
struct DefaultInitAllocator : std::allocator<T> {
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(AllocateBlocks(n * sizeof(T))); }
  void deallocate(T* p, size_t) noexcept { FreeBlocks(p); }
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

template <typename T>
class PcgLinearization : public Linearization {
 public:
  PcgLinearization(const BAProblem& problem, const LossFunction& loss, int num_threads,
                   bool recompute, bool schur_only = false);

  double Cost(const double* cameras, const double* points) override;
  double Linearize(const double* cameras, const double* points) override;
  void Gradient(double* g_cameras, double* g_points) override;
  void JtJDiagonal(double* d_cameras, double* d_points) override;
  double JacobianNormSquared(const double* x_cameras, const double* x_points) override;

  // Sets D' = s D s and inverts the preconditioner blocks U_i, V_p.
  void PrepareDamping(const double* d_cameras, const double* d_points);
  // The same with Levenberg-Marquardt's D = clamp(diag(J^T J), 1e-6, 1e32) / radius, and
  // D = 1 for constant camera parameters (solver/lm_state.h), computed here.
  void PrepareLmDamping(double radius);

  void JTimes(const T* x_cameras, const T* x_points, T* y) const;
  void JtTimes(const T* y, T* g_cameras, T* g_points);
  void HessianTimes(const T* x_cameras, const T* x_points, T* y_cameras, T* y_points);
  void SchurTimes(const T* x_cameras, T* y_cameras);
  void CameraPrecondition(const T* in, T* out) const;
  void PointPrecondition(const T* in, T* out) const;
  void ReducedRhs(const T* b_cameras, const T* b_points, T* out, T k = T(1));
  void BackSubstitute(const T* b_points, const T* x_cameras, T* x_points, T k = T(1)) const;

  // In the scaled space: g' = s g (cameras in double, points in T), |J' x'|^2, and the
  // cost at x + s x' (x the linearization point), without materializing it.
  const std::vector<double>& camera_gradient() const { return gc_; }  // unscaled
  const std::vector<T>& scaled_point_gradient() const { return gp_; }
  double ScaledJacobianNormSquared(const T* x_cameras, const T* x_points);
  double StepCost(const T* dx_cameras, const T* dx_points);

  const std::vector<double>& camera_scale() const { return cam_scale_; }
  const std::vector<T>& point_scale() const { return pt_scale_; }
  int num_threads() const { return threads_; }
  bool recompute() const { return recompute_; }

 private:
  // Evaluates observation i at (cameras, points): double residual and Jacobian blocks,
  // loss-weighted, constant columns zeroed. Returns rho (cost contribution x2).
  // `frames` holds each camera's BalCameraFrame (MakeFrames).
  double EvaluateObservation(const BalCameraFrame* frames, const double* points, int64_t i,
                             double* r, double* jc, double* jp) const;
  // The frames of `cameras` into `out` (one per camera).
  void MakeFrames(const double* cameras, std::vector<BalCameraFrame>* out) const;
  // The scaled blocks of point j's observations: pointers into the store, or recomputed
  // into `buf` (24 per observation, resized as needed).
  void PointBlocks(int j, std::vector<T>* buf, const T** jc, const T** jp) const;
  // J'_p^T J'_p of point j (packed: 00 01 02 11 12 22), from the store or the V block.
  void PointGram(int j, double v[6]) const;
  // (V'_j + D'_j)^-1, packed.
  void PointInverse(int j, T inv[6]) const;
  void Damp(const double* d_cameras, const double* d_points, double radius);
  template <typename X>
  double NormSquared(const X* x_cameras, const X* x_points, bool unscale);
  // Per-thread camera accumulators: `width` doubles per camera per thread, zeroed.
  double* ThreadAccumulator(int thread, int width);
  // Sum over threads of entry k of camera c in accumulators of `width` per camera.
  double ThreadSum(int width, int c, int k) const;

  const BAProblem& p_;
  LossFunction loss_;
  int threads_;
  bool recompute_;
  bool keep_point_damping_;
  bool scaled_ = false;                // column scaling fixed (first Linearize done)
  const double* cameras_ = nullptr;    // the linearization point (caller's arrays)
  const double* points_ = nullptr;
  std::vector<double> cam_scale_;      // 9 per camera
  std::vector<T> pt_scale_;            // 3 per point
  std::vector<double> gc_, diag_c_;    // unscaled camera gradient and diag(J^T J)
  std::vector<T> gp_;                  // scaled point gradient s g_p
  std::vector<T, DefaultInitAllocator<T>> jc_, jp_;  // stored scaled blocks (none with recompute)
  std::vector<double> u0_;             // 81 per camera: J'_c^T J'_c
  std::vector<T> dc_, dp_;             // scaled damping (dp_ may be empty)
  std::vector<T> cam_precond_;         // 81 per camera: U_i^-1
  std::vector<T> pt_block_;            // 6 per point: V^-1 (stored) or V (recompute)
  std::vector<double> cam_acc_;        // per-thread camera accumulators
  std::vector<double> trial_c_;        // StepCost: the trial cameras (9 per camera)
  std::vector<BalCameraFrame> frames_;       // frames of the linearization point (cameras_)
  std::vector<BalCameraFrame> eval_frames_;  // Cost / StepCost: frames of the trial cameras
};

extern template class PcgLinearization<float>;
extern template class PcgLinearization<double>;

}  // namespace tiepoint
