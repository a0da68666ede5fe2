// The Ceres Solver 2.1 backends (kCeresSparse, kCeresIterative).
//
// The same problem as tiepoint's own solvers: one AutoDiffCostFunction per observation
// over the templated ProjectBal (solver/camera_model.h), robust loss as a Ceres loss,
// fixed cameras as constant blocks, fixed intrinsics as a SubsetManifold on f, k1, k2.
// Linear solver: SPARSE_SCHUR (SuiteSparse) or ITERATIVE_SCHUR with SCHUR_JACOBI.
// Ceres headers stay inside the .cc file.
#pragma once

#include <memory>

#include "solver/bundle_adjuster.h"

namespace tiepoint {

std::unique_ptr<BundleAdjuster> CreateCeresBundleAdjuster(const BundleAdjusterOptions& options);

}  // namespace tiepoint
