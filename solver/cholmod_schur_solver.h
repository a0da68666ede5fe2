// Exact linear solver: the Schur complement of the point blocks, factored by CHOLMOD.
//
// With U = J_c^T J_c + D_c (9x9 blocks), V = J_p^T J_p + D_p (3x3 blocks, one per point)
// and W = J_c^T J_p, the damped normal equations
//     [U  W ] [dc]   [b_c]
//     [W^T V] [dp] = [b_p]
// reduce to the reduced camera system  S dc = b_c - W V^-1 b_p,  S = U - W V^-1 W^T,
// followed by back-substitution  dp = V^-1 (b_p - W^T dc).
// S is assembled in parallel, one block row (camera) per thread task, stored as its lower
// triangle in CSC and factored by CHOLMOD's supernodal Cholesky (symbolic analysis once in
// Create, numeric factorization per solve). Double precision. CHOLMOD headers stay in the
// .cc file.
#pragma once

#include <memory>

#include "solver/evaluator.h"
#include "solver/linear_solver.h"

namespace tiepoint {

// The solver reads `linearization`'s Jacobian blocks; both must outlive it.
Status CreateCholmodSchurSolver(const DoubleBlockLinearization& linearization, int num_threads,
                                std::unique_ptr<LinearSolver>* solver);

}  // namespace tiepoint
