#include "solver/lm_state.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace tiepoint {
namespace {

// Ceres's LM diagonal bounds (TrustRegionMinimizer / LevenbergMarquardtStrategy).
constexpr double kMinDiagonal = 1e-6;
constexpr double kMaxDiagonal = 1e32;

double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

class HostLmState : public LmState {
 public:
  HostLmState(const BAProblem& problem, LinearSystem system, const double* cameras,
              const double* points)
      : p_(problem), system_(std::move(system)) {
    const size_t nc = 9 * static_cast<size_t>(p_.num_cameras), np = 3 * static_cast<size_t>(p_.num_points);
    xc_.assign(cameras, cameras + nc);
    xp_.assign(points, points + np);
    for (auto* v : {&trial_c_, &gc_, &dc_, &rhs_c_, &dxc_}) v->resize(nc);
    for (auto* v : {&trial_p_, &gp_, &dp_, &rhs_p_, &dxp_}) v->resize(np);
  }

  double Linearize() override {
    const double cost = system_.linearization->Linearize(xc_.data(), xp_.data());
    system_.linearization->Gradient(gc_.data(), gp_.data());
    return cost;
  }

  double GradientMaxNorm() override {
    double m = 0.0;
    for (double v : gc_) m = std::max(m, std::abs(v));
    for (double v : gp_) m = std::max(m, std::abs(v));
    return m;
  }

  Status Step(double radius, LmStep* step) override {
    Linearization& lin = *system_.linearization;
    lin.JtJDiagonal(dc_.data(), dp_.data());
    for (size_t k = 0; k < dc_.size(); ++k) {
      dc_[k] = p_.camera_param_fixed[k] ? 1.0 : std::clamp(dc_[k], kMinDiagonal, kMaxDiagonal) / radius;
      rhs_c_[k] = -gc_[k];
    }
    for (size_t k = 0; k < dp_.size(); ++k) {
      dp_[k] = std::clamp(dp_[k], kMinDiagonal, kMaxDiagonal) / radius;
      rhs_p_[k] = -gp_[k];
    }
    LinearSolverSummary ls;
    TIEPOINT_RETURN_IF_ERROR(system_.solver->Solve(dc_.data(), dp_.data(), rhs_c_.data(),
                                                   rhs_p_.data(), dxc_.data(), dxp_.data(), &ls));
    *step = LmStep();
    step->linear_iterations = ls.iterations;
    step->message = ls.message;
    if (!ls.success) return Status::Ok();
    step->model_decrease = -(Dot(gc_, dxc_) + Dot(gp_, dxp_) +
                             0.5 * lin.JacobianNormSquared(dxc_.data(), dxp_.data()));
    step->step_norm = std::sqrt(Dot(dxc_, dxc_) + Dot(dxp_, dxp_));
    step->x_norm = std::sqrt(Dot(xc_, xc_) + Dot(xp_, xp_));
    step->valid = std::isfinite(step->model_decrease) && std::isfinite(step->step_norm);
    return Status::Ok();
  }

  double TrialCost() override {
    for (size_t k = 0; k < xc_.size(); ++k) trial_c_[k] = xc_[k] + dxc_[k];
    for (size_t k = 0; k < xp_.size(); ++k) trial_p_[k] = xp_[k] + dxp_[k];
    return system_.linearization->Cost(trial_c_.data(), trial_p_.data());
  }

  void Accept() override {
    xc_.swap(trial_c_);
    xp_.swap(trial_p_);
  }

  Status Parameters(double* cameras, double* points) override {
    std::copy(xc_.begin(), xc_.end(), cameras);
    std::copy(xp_.begin(), xp_.end(), points);
    return Status::Ok();
  }

 private:
  const BAProblem& p_;
  LinearSystem system_;
  std::vector<double> xc_, xp_, trial_c_, trial_p_, gc_, gp_, dc_, dp_, rhs_c_, rhs_p_, dxc_, dxp_;
};

}  // namespace

LmStateFactory HostLmStateFactory(LinearSystemFactory factory) {
  return [factory](const BAProblem& problem, const LossFunction& loss, double* cameras,
                   double* points, std::unique_ptr<LmState>* state) {
    LinearSystem system;
    TIEPOINT_RETURN_IF_ERROR(factory(problem, loss, &system));
    *state = std::make_unique<HostLmState>(problem, std::move(system), cameras, points);
    return Status::Ok();
  };
}

}  // namespace tiepoint
