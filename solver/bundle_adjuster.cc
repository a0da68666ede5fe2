#include "solver/bundle_adjuster.h"

#include <cmath>

#include "solver/ceres_bundle_adjuster.h"
#include "solver/cholmod_schur_solver.h"
#include "solver/levenberg_marquardt.h"
#include "solver/pcg_cuda.h"
#include "solver/pcg_solver.h"

namespace tiepoint {

const char* ToString(SolverType type) {
  switch (type) {
    case SolverType::kCholmod: return "cholmod";
    case SolverType::kCeresSparse: return "ceres-sparse";
    case SolverType::kCeresIterative: return "ceres-iterative";
    case SolverType::kPcgSchur: return "pcg-schur";
    case SolverType::kPcgHessian: return "pcg-hessian";
  }
  return "unknown";
}

Status SolverTypeFromString(const std::string& text, SolverType* type) {
  for (SolverType t : {SolverType::kCholmod, SolverType::kCeresSparse,
                       SolverType::kCeresIterative, SolverType::kPcgSchur,
                       SolverType::kPcgHessian}) {
    if (text == ToString(t)) {
      *type = t;
      return Status::Ok();
    }
  }
  return Status::InvalidOptions("--solver '" + text +
                                "': expected one of pcg-schur, pcg-hessian, cholmod, "
                                "ceres-sparse, ceres-iterative");
}

const char* ToString(TerminationType type) {
  switch (type) {
    case TerminationType::kConvergenceFunction: return "CONVERGENCE (function tolerance)";
    case TerminationType::kConvergenceGradient: return "CONVERGENCE (gradient tolerance)";
    case TerminationType::kConvergenceParameter: return "CONVERGENCE (parameter tolerance)";
    case TerminationType::kMaxIterations: return "NO_CONVERGENCE (maximum iterations)";
    case TerminationType::kTrustRegionCollapsed: return "CONVERGENCE (trust region collapsed)";
    case TerminationType::kFailure: return "FAILURE";
  }
  return "unknown";
}

Status BundleAdjusterOptions::Check(int num_cameras) const {
  auto bad = [](const std::string& m) { return Status::InvalidOptions(m); };
  if (max_iterations < 0) return bad("max_iterations must be >= 0, got " + std::to_string(max_iterations));
  if (num_threads < 0) return bad("num_threads must be >= 0 (0 = all), got " + std::to_string(num_threads));
  auto positive = [](double v) { return std::isfinite(v) && v >= 0.0; };
  if (!positive(function_tolerance)) return bad("function_tolerance must be a finite number >= 0");
  if (!positive(gradient_tolerance)) return bad("gradient_tolerance must be a finite number >= 0");
  if (!positive(parameter_tolerance)) return bad("parameter_tolerance must be a finite number >= 0");
  if (!(initial_trust_region_radius > 0) || !(max_trust_region_radius >= initial_trust_region_radius) ||
      !(min_trust_region_radius > 0) || !(min_trust_region_radius <= initial_trust_region_radius)) {
    return bad("trust region radii must satisfy 0 < min <= initial <= max");
  }
  if (!(min_relative_decrease > 0.0 && min_relative_decrease < 1.0)) {
    return bad("min_relative_decrease must lie in (0, 1)");
  }
  if (!(cg_eta > 0.0 && cg_eta < 1.0)) return bad("cg_eta must lie in (0, 1)");
  if (cg_min_iterations < 0 || cg_max_iterations < 1 || cg_min_iterations > cg_max_iterations) {
    return bad("CG iteration bounds must satisfy 0 <= min <= max, max >= 1 (got min " +
               std::to_string(cg_min_iterations) + ", max " + std::to_string(cg_max_iterations) + ")");
  }
  if (loss.type != LossType::kNone && !(loss.scale > 0.0 && std::isfinite(loss.scale))) {
    return bad("the robust loss scale must be a positive number of pixels");
  }
  for (int c : fixed_cameras) {
    if (c < 0 || c >= num_cameras) {
      return bad("fixed camera index " + std::to_string(c) + " is out of range: the scene has " +
                 std::to_string(num_cameras) + " cameras (indices 0.." +
                 std::to_string(num_cameras - 1) + ")");
    }
  }
  return Status::Ok();
}

double BundleAdjusterSummary::RmsReprojectionError(double cost) const {
  if (num_observations <= 0) return 0.0;
  return std::sqrt(2.0 * cost / static_cast<double>(num_observations));
}

Status BundleAdjuster::Create(const BundleAdjusterOptions& options,
                              std::unique_ptr<BundleAdjuster>* adjuster) {
  if (options.device == Device::kCuda && options.solver != SolverType::kPcgSchur &&
      options.solver != SolverType::kPcgHessian) {
    return Status::InvalidOptions(std::string("--device cuda runs --solver pcg-schur or pcg-hessian; ") +
                                  ToString(options.solver) + " runs on the CPU only");
  }
  switch (options.solver) {
    case SolverType::kCholmod:
    {
      const int threads = options.num_threads;
      *adjuster = CreateLevenbergMarquardtBundleAdjuster(
          options,
          HostLmStateFactory([threads](const BAProblem& problem, const LossFunction& loss,
                                       LinearSystem* system) {
            auto lin = std::make_unique<DoubleBlockLinearization>(problem, loss, threads);
            TIEPOINT_RETURN_IF_ERROR(CreateCholmodSchurSolver(*lin, threads, &system->solver));
            system->linearization = std::move(lin);
            return Status::Ok();
          }),
          /*normalize=*/false);
      return Status::Ok();
    }
    case SolverType::kCeresSparse:
    case SolverType::kCeresIterative:
      *adjuster = CreateCeresBundleAdjuster(options);
      return Status::Ok();
    case SolverType::kPcgSchur:
    case SolverType::kPcgHessian: {
      PcgOptions pcg;
      pcg.kind = options.solver == SolverType::kPcgSchur ? PcgKind::kSchur : PcgKind::kHessian;
      pcg.precision = options.single_precision ? Precision::kFloat : Precision::kDouble;
      pcg.eta = options.cg_eta;
      pcg.termination = options.cg_quadratic_termination ? CgTermination::kQuadratic
                                                         : CgTermination::kResidual;
      pcg.min_iterations = options.cg_min_iterations;
      pcg.max_iterations = options.cg_max_iterations;
      pcg.num_threads = options.num_threads;
      pcg.recompute_jacobian = options.recompute_jacobian;
      LmStateFactory factory;
      if (options.device == Device::kCuda) {
        factory = [pcg](const BAProblem& problem, const LossFunction& loss, double* cameras,
                        double* points, std::unique_ptr<LmState>* state) {
          return CreateCudaLmState(pcg, problem, loss, cameras, points, state);
        };
      } else {
        factory = [pcg](const BAProblem& problem, const LossFunction& loss, double* cameras,
                        double* points, std::unique_ptr<LmState>* state) {
          return CreatePcgLmState(pcg, problem, loss, cameras, points, state);
        };
      }
      // The CPU PCG solvers accumulate camera sums per thread (no camera-major index); the
      // GPU sorts the observations and builds its index itself.
      // The GPU state divides the observations by the pixel scale on the device.
      const bool cuda = options.device == Device::kCuda;
      *adjuster = CreateLevenbergMarquardtBundleAdjuster(
          options, std::move(factory), /*normalize=*/true,
          cuda ? BAProblemLayout::kUnsorted : BAProblemLayout::kByPoint,
          /*state_scales_observations=*/cuda);
      return Status::Ok();
    }
  }
  return Status::InvalidOptions("unknown solver type");
}

}  // namespace tiepoint

#include "solver/ba_problem.h"
#include "solver/camera_model.h"
#include "solver/parallel.h"

namespace tiepoint {

double ReprojectionRms(const Scene& scene, int num_threads) {
  const int64_t n = scene.num_observations();
  if (n == 0) return 0.0;
  const std::vector<BalCameraFrame> frames =
      MakeBalCameraFrames(scene.cameras.data(), scene.num_cameras());
  double sum = 0.0;
  ParallelRegion(ThreadsForObservations(num_threads, n), [&] {
#pragma omp for reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i) {
      double r[2];
      BalResidualAndJacobian(frames[scene.obs_camera[i]], scene.point(scene.obs_point[i]),
                             &scene.obs_xy[2 * i], r, nullptr, nullptr);
      sum += r[0] * r[0] + r[1] * r[1];
    }
  });
  return std::sqrt(sum / static_cast<double>(n));
}

}  // namespace tiepoint
