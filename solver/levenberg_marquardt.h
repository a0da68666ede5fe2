// tiepoint's Levenberg-Marquardt (trust-region) driver.
//
// Follows Ceres Solver's TrustRegionMinimizer with the LEVENBERG_MARQUARDT strategy, so
// that its traces and tolerances read the same:
//   D = clamp(diag(J^T J), 1e-6, 1e32) / radius       (lambda = 1 / radius)
//   solve (J^T J + D) dx = -g through the LinearSolver interface
//   rho = (cost(x) - cost(x + dx)) / (model decrease -(g.dx + 1/2 |J dx|^2))
//   accept if rho > min_relative_decrease: radius /= max(1/3, 1 - (2 rho - 1)^3)
//   reject: radius /= v, v *= 2   (v reset to 2 on acceptance)
// Convergence: |cost change| <= function_tolerance * cost, max|g| <= gradient_tolerance,
// |dx| <= parameter_tolerance (|x| + parameter_tolerance). Parameters held constant get
// D = 1 and zero Jacobian columns, so every linear solver returns a zero step for them.
// A step with a non-finite cost is rejected, so NaN never reaches the output. The driver
// exchanges only scalars with its LmState (solver/lm_state.h).
#pragma once

#include <memory>

#include "solver/ba_problem.h"
#include "solver/bundle_adjuster.h"
#include "solver/lm_state.h"

namespace tiepoint {

// The LM BundleAdjuster over the state `factory` makes for each problem (host memory
// with a LinearSystem, or device memory). `normalize`: solve in normalized units
// (solver/normalization.h), as the single-precision solvers need; results and costs come
// back in the original units. `layout`: what the state needs of the BAProblem; unless it
// is kUnsorted, the solve sorts the scene's observations by (point, camera) in place
// (BAL's own order). `state_scales_observations` (with `normalize`): the state divides the
// observations by BAProblem::obs_scale itself, so the scene's observations are neither
// scaled nor restored on the host (the GPU state does it on the device, which saves two
// passes over 16 bytes per observation).
std::unique_ptr<BundleAdjuster> CreateLevenbergMarquardtBundleAdjuster(
    const BundleAdjusterOptions& options, LmStateFactory factory, bool normalize,
    BAProblemLayout layout = BAProblemLayout::kByPointWithCameraIndex,
    bool state_scales_observations = false);

}  // namespace tiepoint
