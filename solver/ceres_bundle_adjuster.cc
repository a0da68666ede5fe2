// The Ceres Solver 2.1 backends (kCeresSparse, kCeresIterative).
//
// One AutoDiffCostFunction<_, 2, 9, 3> per observation over the templated ProjectBal;
// the scene's own camera and point arrays are the parameter blocks, so the solution lands
// in place. Ceres is asked to write its state back after every iteration
// (update_state_every_iteration), so that even when the minimizer ends in FAILURE the
// scene holds the last accepted iterate, i.e. the best point found.
#include "solver/ceres_bundle_adjuster.h"

#include <ceres/ceres.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "io/base/timer.h"
#include "solver/camera_model.h"
#include "solver/parallel.h"

namespace tiepoint {
namespace {

// Reprojection residual of one observation: predicted - observed, in pixels.
class BalReprojectionResidual {
 public:
  BalReprojectionResidual(double observed_x, double observed_y)
      : observed_x_(observed_x), observed_y_(observed_y) {}

  template <typename T>
  bool operator()(const T* camera, const T* point, T* residual) const {
    T predicted[2];
    ProjectBal(camera, point, predicted);
    residual[0] = predicted[0] - T(observed_x_);
    residual[1] = predicted[1] - T(observed_y_);
    return true;
  }

 private:
  double observed_x_;
  double observed_y_;
};

ceres::LossFunction* MakeCeresLoss(const LossFunction& loss) {
  switch (loss.type) {
    case LossType::kNone: return nullptr;
    case LossType::kHuber: return new ceres::HuberLoss(loss.scale);
    case LossType::kCauchy: return new ceres::CauchyLoss(loss.scale);
  }
  return nullptr;
}

bool StartsWith(const std::string& text, const char* prefix) {
  return text.rfind(prefix, 0) == 0;
}

TerminationType MapTermination(const ceres::Solver::Summary& s) {
  switch (s.termination_type) {
    case ceres::CONVERGENCE:
    case ceres::USER_SUCCESS:  // never requested: our callback always continues
      // Ceres reports every convergence test as CONVERGENCE; its message names the test.
      if (StartsWith(s.message, "Gradient tolerance reached")) {
        return TerminationType::kConvergenceGradient;
      }
      if (StartsWith(s.message, "Parameter tolerance reached")) {
        return TerminationType::kConvergenceParameter;
      }
      if (StartsWith(s.message, "Minimum trust region radius reached")) {
        return TerminationType::kTrustRegionCollapsed;
      }
      // "Function tolerance reached", including Ceres's "No non-constant parameter
      // blocks found" (nothing to optimize: the cost cannot change).
      return TerminationType::kConvergenceFunction;
    case ceres::NO_CONVERGENCE:
      return TerminationType::kMaxIterations;
    case ceres::FAILURE:
    case ceres::USER_FAILURE:
      return TerminationType::kFailure;
  }
  return TerminationType::kFailure;
}

// Records Ceres's per-iteration summaries as tiepoint IterationSummary rows.
class TraceCallback : public ceres::IterationCallback {
 public:
  TraceCallback(std::vector<IterationSummary>* trace,
                const std::function<void(const IterationSummary&)>* user_callback,
                double time_offset_s)
      : trace_(trace), user_callback_(user_callback), time_offset_s_(time_offset_s) {}

  ceres::CallbackReturnType operator()(const ceres::IterationSummary& c) override {
    // Ceres 2.1 reports the trial point's cost for a rejected step; the trace reports
    // the cost of the point the minimizer stands on, which a rejection leaves as it was.
    const bool accepted = c.iteration > 0 && c.step_is_successful;
    if (c.iteration == 0 || accepted) current_cost_ = c.cost;
    IterationSummary row;
    row.iteration = c.iteration;
    row.cost = current_cost_;
    row.cost_change = accepted ? c.cost_change : 0.0;
    row.relative_decrease = c.relative_decrease;
    row.trust_region_radius = c.trust_region_radius;
    row.lambda = c.trust_region_radius > 0.0 ? 1.0 / c.trust_region_radius : 0.0;
    row.linear_iterations = c.linear_solver_iterations;
    row.step_norm = c.step_norm;
    row.gradient_max_norm = c.gradient_max_norm;
    // Ceres marks iteration 0 as a successful step; it is the initial state, not a step.
    row.step_accepted = accepted;
    row.iteration_time_s = c.iteration_time_in_seconds;
    row.time_s = time_offset_s_ + c.cumulative_time_in_seconds;
    trace_->push_back(row);
    if (*user_callback_) (*user_callback_)(row);
    return ceres::SOLVER_CONTINUE;
  }

 private:
  std::vector<IterationSummary>* trace_;
  const std::function<void(const IterationSummary&)>* user_callback_;
  double time_offset_s_;
  double current_cost_ = 0.0;
};

// 1/2 sum_i rho(|r_i|^2) at the scene's current parameters.
double SceneCost(const Scene& scene, const LossFunction& loss) {
  double sum = 0.0;
  for (int64_t i = 0; i < scene.num_observations(); ++i) {
    double predicted[2];
    ProjectBal(scene.camera(scene.obs_camera[i]), scene.point(scene.obs_point[i]), predicted);
    const double rx = predicted[0] - scene.obs_xy[2 * i];
    const double ry = predicted[1] - scene.obs_xy[2 * i + 1];
    double rho = 0.0, drho = 0.0;
    loss.Evaluate(rx * rx + ry * ry, &rho, &drho);
    sum += rho;
  }
  return 0.5 * sum;
}

// Structural consistency of the scene, so that building the problem cannot index out
// of bounds.
Status CheckScene(const Scene& scene) {
  if (scene.cameras.size() % kCameraParams != 0) {
    return Status::InvalidInput("scene: camera array holds " +
                                std::to_string(scene.cameras.size()) +
                                " values, not a multiple of 9");
  }
  if (scene.points.size() % kPointParams != 0) {
    return Status::InvalidInput("scene: point array holds " +
                                std::to_string(scene.points.size()) +
                                " values, not a multiple of 3");
  }
  const size_t n = scene.obs_camera.size();
  if (scene.obs_point.size() != n || scene.obs_xy.size() != 2 * n) {
    return Status::InvalidInput(
        "scene: observation arrays disagree: " + std::to_string(n) + " camera indices, " +
        std::to_string(scene.obs_point.size()) + " point indices, " +
        std::to_string(scene.obs_xy.size()) + " coordinates (expected twice the count)");
  }
  const int num_cameras = scene.num_cameras();
  const int num_points = scene.num_points();
  for (size_t i = 0; i < n; ++i) {
    if (scene.obs_camera[i] < 0 || scene.obs_camera[i] >= num_cameras) {
      return Status::InvalidInput("scene: observation " + std::to_string(i) +
                                  " names camera " + std::to_string(scene.obs_camera[i]) +
                                  "; expected 0.." + std::to_string(num_cameras - 1));
    }
    if (scene.obs_point[i] < 0 || scene.obs_point[i] >= num_points) {
      return Status::InvalidInput("scene: observation " + std::to_string(i) +
                                  " names point " + std::to_string(scene.obs_point[i]) +
                                  "; expected 0.." + std::to_string(num_points - 1));
    }
  }
  return Status::Ok();
}

class CeresBundleAdjuster : public BundleAdjuster {
 public:
  explicit CeresBundleAdjuster(const BundleAdjusterOptions& options) : options_(options) {}

  Status Solve(Scene* scene, BundleAdjusterSummary* summary) override {
    if (scene == nullptr || summary == nullptr) {
      return Status::Internal("CeresBundleAdjuster::Solve: null scene or summary");
    }
    // Ceres's thread pool inherits the calling thread's CPU mask, which libgomp narrowed to
    // one place when OMP_PROC_BIND is set: widen it for the solve (threads made during it
    // keep the wide mask), as an OpenMP team would spread over the places.
    const WideAffinity wide_affinity;
    Timer timer;
    if (options_.solver != SolverType::kCeresSparse &&
        options_.solver != SolverType::kCeresIterative) {
      return Status::InvalidOptions(std::string("solver: the Ceres backend solves only "
                                                "ceres-sparse and ceres-iterative, not ") +
                                    ToString(options_.solver));
    }
    TIEPOINT_RETURN_IF_ERROR(options_.Check(scene->num_cameras()));
    TIEPOINT_RETURN_IF_ERROR(CheckScene(*scene));
    // Check() bounds fixed_cameras; re-checked here because an index out of range would
    // be an out-of-bounds pointer handed to Ceres.
    for (int c : options_.fixed_cameras) {
      if (c < 0 || c >= scene->num_cameras()) {
        return Status::InvalidOptions("fixed_cameras: camera " + std::to_string(c) +
                                      " does not exist; the scene has " +
                                      std::to_string(scene->num_cameras()) + " cameras");
      }
    }
    if (options_.solver == SolverType::kCeresSparse &&
        !ceres::IsSparseLinearAlgebraLibraryTypeAvailable(ceres::SUITE_SPARSE)) {
      return Status::Unavailable(
          "solver ceres-sparse: this Ceres library was built without SuiteSparse, which "
          "SPARSE_SCHUR needs; use ceres-iterative or cholmod");
    }

    int num_threads = options_.num_threads;
    if (num_threads <= 0) num_threads = static_cast<int>(std::thread::hardware_concurrency());
    if (num_threads <= 0) num_threads = 1;

    ceres::Solver::Options solver_options;
    solver_options.minimizer_type = ceres::TRUST_REGION;
    solver_options.trust_region_strategy_type = ceres::LEVENBERG_MARQUARDT;
    if (options_.solver == SolverType::kCeresSparse) {
      solver_options.linear_solver_type = ceres::SPARSE_SCHUR;
      solver_options.sparse_linear_algebra_library_type = ceres::SUITE_SPARSE;
    } else {
      solver_options.linear_solver_type = ceres::ITERATIVE_SCHUR;
      solver_options.preconditioner_type = ceres::SCHUR_JACOBI;
    }
    solver_options.max_num_iterations = options_.max_iterations;
    solver_options.num_threads = num_threads;
    solver_options.function_tolerance = options_.function_tolerance;
    solver_options.gradient_tolerance = options_.gradient_tolerance;
    solver_options.parameter_tolerance = options_.parameter_tolerance;
    solver_options.initial_trust_region_radius = options_.initial_trust_region_radius;
    solver_options.max_trust_region_radius = options_.max_trust_region_radius;
    solver_options.min_trust_region_radius = options_.min_trust_region_radius;
    solver_options.min_relative_decrease = options_.min_relative_decrease;
    solver_options.minimizer_progress_to_stdout = false;
    solver_options.logging_type = ceres::SILENT;
    solver_options.update_state_every_iteration = true;
    {
      std::string error;
      if (!solver_options.IsValid(&error)) {
        return Status::InvalidOptions("Ceres rejects the options: " + error);
      }
    }

    // From here on the scene's arrays are Ceres's parameter blocks: keep a copy so that
    // a non-OK return leaves the scene as it was.
    const std::vector<double> saved_cameras = scene->cameras;
    const std::vector<double> saved_points = scene->points;
    auto fail = [&](Status status) {
      scene->cameras = saved_cameras;
      scene->points = saved_points;
      return status;
    };

    BundleAdjusterSummary result;
    result.solver = ToString(options_.solver);
    result.num_threads = num_threads;
    result.num_cameras = scene->num_cameras();
    result.num_points = scene->num_points();
    result.num_observations = scene->num_observations();

    ceres::Solver::Summary ceres_summary;
    try {
      ceres::Problem problem;
      const int64_t num_obs = scene->num_observations();
      for (int64_t i = 0; i < num_obs; ++i) {
        auto* cost = new ceres::AutoDiffCostFunction<BalReprojectionResidual, 2, 9, 3>(
            new BalReprojectionResidual(scene->obs_xy[2 * i], scene->obs_xy[2 * i + 1]));
        problem.AddResidualBlock(cost, MakeCeresLoss(options_.loss),
                                 scene->camera(scene->obs_camera[i]),
                                 scene->point(scene->obs_point[i]));
      }
      // Cameras and points without observations are not in the problem and stay as
      // they are.
      for (int c : options_.fixed_cameras) {
        double* block = scene->camera(c);
        if (problem.HasParameterBlock(block)) problem.SetParameterBlockConstant(block);
      }
      if (options_.fix_intrinsics) {
        for (int c = 0; c < scene->num_cameras(); ++c) {
          double* block = scene->camera(c);
          if (!problem.HasParameterBlock(block) || problem.IsParameterBlockConstant(block)) {
            continue;
          }
          problem.SetManifold(block, new ceres::SubsetManifold(kCameraParams, {6, 7, 8}));
        }
      }

      // Schur elimination ordering: points first (group 0), then cameras (group 1).
      auto ordering = std::make_shared<ceres::ParameterBlockOrdering>();
      for (int j = 0; j < scene->num_points(); ++j) {
        double* block = scene->point(j);
        if (problem.HasParameterBlock(block)) ordering->AddElementToGroup(block, 0);
      }
      for (int c = 0; c < scene->num_cameras(); ++c) {
        double* block = scene->camera(c);
        if (problem.HasParameterBlock(block)) ordering->AddElementToGroup(block, 1);
      }
      solver_options.linear_solver_ordering = ordering;

      TraceCallback trace_callback(&result.trace, &options_.callback, timer.Seconds());
      solver_options.callbacks.push_back(&trace_callback);

      ceres::Solve(solver_options, &problem, &ceres_summary);
    } catch (const std::bad_alloc&) {
      return fail(Status::OutOfMemory("Ceres backend: out of memory while solving a scene "
                                      "of " + std::to_string(result.num_cameras) +
                                      " cameras, " + std::to_string(result.num_points) +
                                      " points, " +
                                      std::to_string(result.num_observations) +
                                      " observations"));
    } catch (const std::exception& e) {
      return fail(Status::Internal(std::string("Ceres backend: ") + e.what()));
    }

    result.initial_cost = ceres_summary.initial_cost;
    result.final_cost = ceres_summary.final_cost;
    result.termination = MapTermination(ceres_summary);
    result.message = ceres_summary.message;
    if (ceres_summary.num_threads_used > 0) result.num_threads = ceres_summary.num_threads_used;
    // Ceres leaves the costs at -1 when it stops before evaluating (e.g. a non-finite
    // parameter); the scene is then untouched, so evaluate it here.
    if (result.initial_cost < 0.0) result.initial_cost = SceneCost(*scene, options_.loss);
    if (result.final_cost < 0.0) result.final_cost = SceneCost(*scene, options_.loss);
    if (result.trace.empty() && result.termination != TerminationType::kFailure) {
      // Ceres ran no minimizer (nothing to optimize): still report iteration 0.
      IterationSummary row;
      row.cost = result.initial_cost;
      row.time_s = timer.Seconds();
      result.trace.push_back(row);
    }
    // Ceres counts iteration 0 as a successful step; report LM iterations only, so that
    // iterations == trace rows after iteration 0.
    int successful = 0;
    for (const IterationSummary& row : result.trace) successful += row.step_accepted ? 1 : 0;
    result.iterations = result.trace.empty() ? 0 : static_cast<int>(result.trace.size()) - 1;
    result.successful_iterations = successful;
    result.linear_solver_time_s = std::max(0.0, ceres_summary.linear_solver_time_in_seconds);
    result.evaluation_time_s =
        std::max(0.0, ceres_summary.residual_evaluation_time_in_seconds) +
        std::max(0.0, ceres_summary.jacobian_evaluation_time_in_seconds);
    result.total_time_s = timer.Seconds();
    *summary = std::move(result);
    return Status::Ok();
  }

 private:
  BundleAdjusterOptions options_;
};

}  // namespace

std::unique_ptr<BundleAdjuster> CreateCeresBundleAdjuster(const BundleAdjusterOptions& options) {
  return std::make_unique<CeresBundleAdjuster>(options);
}

}  // namespace tiepoint
