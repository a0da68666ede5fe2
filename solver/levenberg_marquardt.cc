#include "solver/levenberg_marquardt.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include "io/base/timer.h"
#include "solver/ba_problem.h"
#include "solver/camera_model.h"
#include "solver/lm_state.h"
#include "solver/normalization.h"

namespace tiepoint {
namespace {

// With TIEPOINT_TIMING set: milliseconds of each set-up phase on stderr.
void HostMark(const Timer& t, const char* what) {
  static const bool on = std::getenv("TIEPOINT_TIMING") != nullptr;
  if (on) std::fprintf(stderr, "[timing] host %-28s %8.2f ms (since solve start)\n", what, 1e3 * t.Seconds());
}

// Names the first observation whose residual is not finite, for the failure message.
std::string DescribeNonFinite(const BAProblem& p, const double* cameras, const double* points) {
  for (int64_t i = 0; i < p.num_observations; ++i) {
    const int c = p.obs_camera[i], j = p.obs_point[i];
    double r[2];
    BalResidualAndJacobian(cameras + 9 * c, points + 3 * j, &p.obs_xy[2 * i], r, nullptr,
                           nullptr);
    if (!std::isfinite(r[0]) || !std::isfinite(r[1])) {
      std::ostringstream s;
      s << "the residual of camera " << c << " observing point " << j
        << " is not finite (a parameter is NaN/Inf, or the point lies on the camera's "
           "image plane)";
      return s.str();
    }
  }
  return "the cost is not finite";
}

class LevenbergMarquardtBundleAdjuster : public BundleAdjuster {
 public:
  LevenbergMarquardtBundleAdjuster(const BundleAdjusterOptions& options, LmStateFactory factory,
                                   bool normalize, BAProblemLayout layout,
                                   bool state_scales_observations)
      : options_(options),
        factory_(std::move(factory)),
        normalize_(normalize),
        layout_(layout),
        state_scales_observations_(state_scales_observations) {}

  Status Solve(Scene* scene, BundleAdjusterSummary* summary) override;

 private:
  BundleAdjusterOptions options_;
  LmStateFactory factory_;
  bool normalize_;
  BAProblemLayout layout_;
  bool state_scales_observations_;
};

// Undoes the in-place normalization of a scene on every way out of Solve (exact: the
// scales are powers of two).
class NormalizedScene {
 public:
  // `observations` false: the observations stay as they are (the state scales them).
  NormalizedScene(Scene* scene, const Normalization& n, bool active, bool observations)
      : scene_(scene), n_(n), active_(active), observations_(observations) {
    if (!active_) return;
    NormalizeParameters(n_, scene_->num_cameras(), scene_->num_points(), scene_->cameras.data(),
                        scene_->points.data());
    if (observations_) NormalizeObservations(n_, scene_);
  }
  ~NormalizedScene() {
    if (!active_) return;
    DenormalizeParameters(n_, scene_->num_cameras(), scene_->num_points(), scene_->cameras.data(),
                          scene_->points.data());
    if (observations_) DenormalizeObservations(n_, scene_);
  }
  NormalizedScene(const NormalizedScene&) = delete;
  NormalizedScene& operator=(const NormalizedScene&) = delete;

 private:
  Scene* scene_;
  Normalization n_;
  bool active_;
  bool observations_;
};

Status LevenbergMarquardtBundleAdjuster::Solve(Scene* scene, BundleAdjusterSummary* summary) {
  const Timer total;
  TIEPOINT_RETURN_IF_ERROR(options_.Check(scene->num_cameras()));
  const BundleAdjusterOptions& o = options_;
  const int threads = o.num_threads > 0 ? o.num_threads : omp_get_max_threads();
  const int work_threads = ThreadsForObservations(threads, scene->num_observations());

  BundleAdjusterSummary& s = *summary;
  s = BundleAdjusterSummary();
  s.solver = ToString(o.solver);
  s.num_threads = threads;
  s.num_cameras = scene->num_cameras();
  s.num_points = scene->num_points();
  s.num_observations = scene->num_observations();

  // The problem views the scene's observations (sorted by point in place unless the
  // state builds its own structure, as the GPU does; BAL files already are sorted), and the solve works in the scene's own parameter arrays, normalized in
  // place when asked (median depth and focal length ~1) and restored on the way out; the
  // LM state may keep x in them, so nothing per observation or per point is copied here.
  BAProblem problem;
  TIEPOINT_RETURN_IF_ERROR(BAProblem::BuildInPlace(scene, o.fixed_cameras, o.fix_intrinsics,
                                                   layout_, work_threads, &problem));
  HostMark(total, "problem built");
  Normalization normalization;
  LossFunction loss = o.loss;
  if (normalize_) {
    normalization = ComputeNormalization(problem, scene->cameras.data(), scene->points.data());
    loss.scale /= normalization.pixel_scale;
  }
  const bool host_observations = !(normalize_ && state_scales_observations_);
  if (!host_observations) problem.obs_scale = normalization.pixel_scale;
  const NormalizedScene normalized(scene, normalization, normalize_, host_observations);
  HostMark(total, "normalized");
  double* xc = scene->cameras.data();
  double* xp = scene->points.data();
  const double cost_scale = normalization.CostScale();
  std::unique_ptr<LmState> state;
  TIEPOINT_RETURN_IF_ERROR(factory_(problem, loss, xc, xp, &state));
  HostMark(total, "state created");

  Timer eval_timer;
  double cost = state->Linearize();
  s.evaluation_time_s += eval_timer.Seconds();
  HostMark(total, "first linearization");
  s.initial_cost = s.final_cost = cost * cost_scale;
  if (!std::isfinite(cost)) {
    s.termination = TerminationType::kFailure;
    s.message = "initial cost is not finite: " + DescribeNonFinite(problem, xc, xp);
    s.total_time_s = total.Seconds();
    return Status::Ok();
  }
  double gradient_max_norm = state->GradientMaxNorm();

  double radius = o.initial_trust_region_radius;
  double decrease_factor = 2.0;
  auto record = [&](IterationSummary it) {
    it.cost *= cost_scale;
    it.cost_change *= cost_scale;
    s.trace.push_back(it);
    if (o.callback) o.callback(it);
  };
  {
    IterationSummary it;
    it.iteration = 0;
    it.cost = cost;
    it.trust_region_radius = radius;
    it.gradient_max_norm = gradient_max_norm;
    it.step_accepted = true;
    it.time_s = total.Seconds();
    record(it);
  }

  auto finish = [&](TerminationType t, const std::string& message) {
    s.termination = t;
    s.message = message;
    s.final_cost = cost * cost_scale;
    TIEPOINT_RETURN_IF_ERROR(state->Parameters(xc, xp));
    s.total_time_s = total.Seconds();
    return Status::Ok();
  };

  if (gradient_max_norm <= o.gradient_tolerance) {
    return finish(TerminationType::kConvergenceGradient, "Gradient tolerance reached at the start.");
  }

  for (int iteration = 1; iteration <= o.max_iterations; ++iteration) {
    const Timer iteration_timer;
    IterationSummary it;
    it.iteration = iteration;
    it.trust_region_radius = radius;
    it.lambda = 1.0 / radius;

    const Timer linear_timer;
    LmStep step;
    TIEPOINT_RETURN_IF_ERROR(state->Step(radius, &step));
    s.linear_solver_time_s += linear_timer.Seconds();
    it.linear_iterations = step.linear_iterations;
    const bool valid = step.valid && step.model_decrease > 0.0;

    double new_cost = std::numeric_limits<double>::infinity();
    if (valid) {
      it.step_norm = step.step_norm;
      if (step.step_norm <= o.parameter_tolerance * (step.x_norm + o.parameter_tolerance)) {
        it.cost = cost;
        it.iteration_time_s = iteration_timer.Seconds();
        it.time_s = total.Seconds();
        record(it);
        ++s.iterations;
        return finish(TerminationType::kConvergenceParameter, "Parameter tolerance reached.");
      }
      eval_timer.Reset();
      new_cost = state->TrialCost();
      s.evaluation_time_s += eval_timer.Seconds();
    }

    const double relative_decrease = valid ? (cost - new_cost) / step.model_decrease : 0.0;
    it.relative_decrease = std::isfinite(relative_decrease) ? relative_decrease : 0.0;
    const bool accept = valid && std::isfinite(new_cost) && relative_decrease > o.min_relative_decrease;
    ++s.iterations;

    if (accept) {
      const double cost_change = cost - new_cost;
      state->Accept();
      eval_timer.Reset();
      cost = state->Linearize();
      s.evaluation_time_s += eval_timer.Seconds();
      gradient_max_norm = state->GradientMaxNorm();
      ++s.successful_iterations;
      radius = std::min(o.max_trust_region_radius,
                        radius / std::max(1.0 / 3.0, 1.0 - std::pow(2.0 * relative_decrease - 1.0, 3)));
      decrease_factor = 2.0;

      it.cost = cost;
      it.cost_change = cost_change;
      it.step_accepted = true;
      it.gradient_max_norm = gradient_max_norm;
      it.iteration_time_s = iteration_timer.Seconds();
      it.time_s = total.Seconds();
      record(it);
      if (std::abs(cost_change) <= o.function_tolerance * (cost + cost_change)) {
        return finish(TerminationType::kConvergenceFunction, "Function tolerance reached.");
      }
      if (gradient_max_norm <= o.gradient_tolerance) {
        return finish(TerminationType::kConvergenceGradient, "Gradient tolerance reached.");
      }
    } else {
      radius /= decrease_factor;
      decrease_factor *= 2.0;
      it.cost = cost;
      it.step_accepted = false;
      it.gradient_max_norm = gradient_max_norm;
      it.iteration_time_s = iteration_timer.Seconds();
      it.time_s = total.Seconds();
      record(it);
      // Ceres declares function convergence on a candidate whose cost barely differs.
      if (valid && std::isfinite(new_cost) &&
          std::abs(cost - new_cost) <= o.function_tolerance * cost) {
        return finish(TerminationType::kConvergenceFunction, "Function tolerance reached.");
      }
      if (radius < o.min_trust_region_radius) {
        return finish(TerminationType::kTrustRegionCollapsed,
                      "Trust region radius fell below its minimum: no step decreases the cost.");
      }
    }
  }
  return finish(TerminationType::kMaxIterations,
                "Maximum number of iterations reached (" + std::to_string(o.max_iterations) + ").");
}

}  // namespace

std::unique_ptr<BundleAdjuster> CreateLevenbergMarquardtBundleAdjuster(
    const BundleAdjusterOptions& options, LmStateFactory factory, bool normalize,
    BAProblemLayout layout, bool state_scales_observations) {
  return std::make_unique<LevenbergMarquardtBundleAdjuster>(options, std::move(factory),
                                                            normalize, layout,
                                                            state_scales_observations);
}

}  // namespace tiepoint
