// Matrix-free preconditioned conjugate gradients for the LM step (Wu, Agarwal, Curless,
// Seitz, "Multicore Bundle Adjustment", CVPR 2011).
//
//   kHessian: CG on (J^T J + D) dx = -g, applied as J^T (J p) + D p without forming
//             J^T J; preconditioner: block Jacobi with the 9x9 camera blocks
//             U_i = J_ci^T J_ci + D_i and the 3x3 point blocks V_p = J_p^T J_p + D_p.
//   kSchur:   CG on the reduced camera system S dc = b_c - W V^-1 b_p with
//             S p = U p - W (V^-1 (W^T p)) applied implicitly: per observation
//             y = J_c p, per point z = V^-1 sum J_p^T y, per observation e = y - J_p z,
//             per camera (S p)_i = D_i p_i + sum J_c^T e. Preconditioner: the camera blocks
//             U_i inverted. Then dp = V^-1 (b_p - W^T dc).
// Inexact Newton: CG stops by the quadratic-model rule (default; measured on the shared
// BAL files it reaches the cost tolerances in fewer LM iterations) or when
// |r| <= eta |r_0|, after at least min_iterations and at most max_iterations. Arithmetic in T (float or double) on the scaled Jacobian blocks of
// PcgLinearization<T> (solver/pcg_linearization.h), stored or recomputed per product;
// dot products accumulate in double. OpenMP with `num_threads`, no globals.
#pragma once

#include <memory>

#include "solver/linear_solver.h"
#include "solver/lm_state.h"

namespace tiepoint {

enum class PcgKind { kHessian, kSchur };
// When CG stops: kResidual: |r| <= eta |r_0| (a forcing term on the relative residual);
// kQuadratic: the quadratic model's relative decrease per iteration falls below eta/it
// (Nash and Sofer 1990, as Ceres's ITERATIVE_SCHUR does).
enum class CgTermination { kResidual, kQuadratic };
enum class Precision { kFloat, kDouble };

struct PcgOptions {
  PcgKind kind = PcgKind::kSchur;
  Precision precision = Precision::kFloat;
  // Forcing term: stop when |r| <= eta |r_0|.
  double eta = 0.1;
  CgTermination termination = CgTermination::kQuadratic;
  int min_iterations = 1;
  int max_iterations = 100;
  int num_threads = 0;
  // Recompute Jacobian blocks in every product instead of storing them (memory for time).
  bool recompute_jacobian = false;
};

// The PcgLinearization<T> and the PCG solver reading it, for one problem (the
// LinearSystem seam, as the tests and the exact solvers use it).
Status CreatePcgLinearSystem(const PcgOptions& options, const BAProblem& problem,
                             const LossFunction& loss, LinearSystem* system);

// The host LM state of the PCG solvers (what `tiepoint ba --solver pcg-*` runs): x lives
// in the caller's arrays, updated in place; the step, gradient and everything per point
// are kept in the scaled space in T, and the trial point is never materialized, so the
// solve adds to the Jacobian blocks only ~70 bytes per point (solver/pcg_linearization.h).
Status CreatePcgLmState(const PcgOptions& options, const BAProblem& problem,
                        const LossFunction& loss, double* cameras, double* points,
                        std::unique_ptr<LmState>* state);

}  // namespace tiepoint
