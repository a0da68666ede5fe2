// Robust losses, as Ceres Solver defines them, on the squared residual norm s = |r|^2.
//   none  : rho(s) = s
//   huber : rho(s) = s                      for s <= a^2
//                    2 a sqrt(s) - a^2      otherwise
//   cauchy: rho(s) = b log(1 + s / b),  b = a^2
// The cost is 1/2 sum_i rho(|r_i|^2). For both robust losses rho'' <= 0, so the
// Gauss-Newton model uses residuals and Jacobians scaled by sqrt(rho'(s)) (Triggs et al.
// 2000; Ceres's Corrector does exactly this when rho'' <= 0).
#pragma once

#include <cmath>
#include <string>

#include "io/base/status.h"

namespace tiepoint {

enum class LossType { kNone, kHuber, kCauchy };

struct LossFunction {
  LossType type = LossType::kNone;
  double scale = 1.0;  // a, in pixels

  // rho(s) and rho'(s).
  void Evaluate(double s, double* rho, double* drho) const {
    *rho = s;
    *drho = 1.0;
    switch (type) {
      case LossType::kNone:
        *rho = s;
        *drho = 1.0;
        return;
      case LossType::kHuber: {
        const double b = scale * scale;
        if (s <= b) {
          *rho = s;
          *drho = 1.0;
        } else {
          const double r = std::sqrt(s);
          *rho = 2.0 * scale * r - b;
          *drho = scale / r;
        }
        return;
      }
      case LossType::kCauchy: {
        const double b = scale * scale;
        *rho = b * std::log1p(s / b);
        *drho = 1.0 / (1.0 + s / b);
        return;
      }
    }
  }

  // rho'(s) alone, the same value as Evaluate's, for a linearization that needs only the
  // weights (the cost comes from another pass): no log1p or sqrt for a rho left unused.
  double Derivative(double s) const {
    switch (type) {
      case LossType::kNone: return 1.0;
      case LossType::kHuber: {
        const double b = scale * scale;
        return s <= b ? 1.0 : scale / std::sqrt(s);
      }
      case LossType::kCauchy: {
        const double b = scale * scale;
        return 1.0 / (1.0 + s / b);
      }
    }
    return 1.0;
  }
};

// Parses "huber:S", "cauchy:S" or "none"; names the field on error.
Status ParseLoss(const std::string& text, LossFunction* loss);
std::string ToString(const LossFunction& loss);

}  // namespace tiepoint
