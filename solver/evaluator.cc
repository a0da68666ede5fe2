#include "solver/evaluator.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "solver/camera_model.h"
#include "solver/parallel.h"

namespace tiepoint {

double Evaluator::Cost(const double* cameras, const double* points) const {
  const int64_t n = problem_.num_observations;
  const std::vector<BalCameraFrame> frames = MakeBalCameraFrames(cameras, problem_.num_cameras);
  double cost = 0.0;
  ParallelRegion(num_threads_, [&] {
#pragma omp for schedule(static) reduction(+ : cost)
    for (int64_t i = 0; i < n; ++i) {
      double r[2];
      BalResidualAndJacobian(frames[problem_.obs_camera[i]],
                             points + kPointParams * problem_.obs_point[i], &problem_.obs_xy[2 * i],
                             r, nullptr, nullptr);
      double rho, drho;
      loss_.Evaluate(r[0] * r[0] + r[1] * r[1], &rho, &drho);
      cost += 0.5 * rho;
    }
  });
  return std::isfinite(cost) ? cost : std::numeric_limits<double>::infinity();
}

double Evaluator::Evaluate(const double* cameras, const double* points,
                           JacobianBlocks* jac) const {
  const int64_t n = problem_.num_observations;
  jac->residuals.resize(2 * n);
  jac->jc.resize(18 * n);
  jac->jp.resize(6 * n);
  const uint8_t* fixed = problem_.camera_param_fixed.data();
  const bool any_fixed = problem_.has_fixed_parameters;
  const std::vector<BalCameraFrame> frames = MakeBalCameraFrames(cameras, problem_.num_cameras);
  double cost = 0.0;
  ParallelRegion(num_threads_, [&] {
#pragma omp for schedule(static) reduction(+ : cost)
    for (int64_t i = 0; i < n; ++i) {
      const int c = problem_.obs_camera[i];
      double* r = &jac->residuals[2 * i];
      double* jc = &jac->jc[18 * i];
      double* jp = &jac->jp[6 * i];
      BalResidualAndJacobian(frames[c], points + kPointParams * problem_.obs_point[i],
                             &problem_.obs_xy[2 * i], r, jc, jp);
      double rho, drho;
      loss_.Evaluate(r[0] * r[0] + r[1] * r[1], &rho, &drho);
      cost += 0.5 * rho;
      if (loss_.type != LossType::kNone) {
        const double w = std::sqrt(drho);
        r[0] *= w;
        r[1] *= w;
        for (int k = 0; k < 18; ++k) jc[k] *= w;
        for (int k = 0; k < 6; ++k) jp[k] *= w;
      }
      if (any_fixed) {
        const uint8_t* f = fixed + kCameraParams * c;
        for (int k = 0; k < 9; ++k) {
          if (f[k]) jc[k] = jc[9 + k] = 0.0;
        }
      }
    }
  });
  return std::isfinite(cost) ? cost : std::numeric_limits<double>::infinity();
}

void Evaluator::Gradient(const JacobianBlocks& jac, double* g_cameras, double* g_points) const {
  const BAProblem& p = problem_;
  ParallelRegion(num_threads_, [&] {
#pragma omp for schedule(dynamic, 16)
    for (int c = 0; c < p.num_cameras; ++c) {
      double g[9] = {0};
      for (int64_t k = p.camera_ptr[c]; k < p.camera_ptr[c + 1]; ++k) {
        const int64_t i = p.camera_obs[k];
        const double* J = &jac.jc[18 * i];
        const double* r = &jac.residuals[2 * i];
        for (int a = 0; a < 9; ++a) g[a] += J[a] * r[0] + J[9 + a] * r[1];
      }
      std::memcpy(g_cameras + 9 * c, g, sizeof(g));
    }
#pragma omp for schedule(static)
    for (int j = 0; j < p.num_points; ++j) {
      double g[3] = {0};
      for (int64_t i = p.point_ptr[j]; i < p.point_ptr[j + 1]; ++i) {
        const double* J = &jac.jp[6 * i];
        const double* r = &jac.residuals[2 * i];
        for (int a = 0; a < 3; ++a) g[a] += J[a] * r[0] + J[3 + a] * r[1];
      }
      std::memcpy(g_points + 3 * j, g, sizeof(g));
    }
  });
}

void Evaluator::JtJDiagonal(const JacobianBlocks& jac, double* d_cameras, double* d_points) const {
  const BAProblem& p = problem_;
  ParallelRegion(num_threads_, [&] {
#pragma omp for schedule(dynamic, 16)
    for (int c = 0; c < p.num_cameras; ++c) {
      double d[9] = {0};
      for (int64_t k = p.camera_ptr[c]; k < p.camera_ptr[c + 1]; ++k) {
        const double* J = &jac.jc[18 * p.camera_obs[k]];
        for (int a = 0; a < 9; ++a) d[a] += J[a] * J[a] + J[9 + a] * J[9 + a];
      }
      std::memcpy(d_cameras + 9 * c, d, sizeof(d));
    }
#pragma omp for schedule(static)
    for (int j = 0; j < p.num_points; ++j) {
      double d[3] = {0};
      for (int64_t i = p.point_ptr[j]; i < p.point_ptr[j + 1]; ++i) {
        const double* J = &jac.jp[6 * i];
        for (int a = 0; a < 3; ++a) d[a] += J[a] * J[a] + J[3 + a] * J[3 + a];
      }
      std::memcpy(d_points + 3 * j, d, sizeof(d));
    }
  });
}

void Evaluator::JacobianTimes(const JacobianBlocks& jac, const double* x_cameras,
                              const double* x_points, double* y) const {
  const int64_t n = problem_.num_observations;
  ParallelRegion(num_threads_, [&] {
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const double* xc = x_cameras + 9 * problem_.obs_camera[i];
      const double* xp = x_points + 3 * problem_.obs_point[i];
      const double* Jc = &jac.jc[18 * i];
      const double* Jp = &jac.jp[6 * i];
      for (int row = 0; row < 2; ++row) {
        double s = 0.0;
        for (int a = 0; a < 9; ++a) s += Jc[9 * row + a] * xc[a];
        for (int a = 0; a < 3; ++a) s += Jp[3 * row + a] * xp[a];
        y[2 * i + row] = s;
      }
    }
  });
}

}  // namespace tiepoint

namespace tiepoint {

double DoubleBlockLinearization::JacobianNormSquared(const double* x_cameras,
                                                     const double* x_points) {
  jx_.resize(2 * problem_.num_observations);
  evaluator_.JacobianTimes(jac_, x_cameras, x_points, jx_.data());
  double s = 0.0;
  for (double v : jx_) s += v * v;
  return s;
}

}  // namespace tiepoint
