#include "solver/pcg_solver.h"

#include <omp.h>

#include <cmath>
#include <vector>

#include "solver/pcg_linearization.h"

namespace tiepoint {
namespace {

template <typename T>
double Dot(const std::vector<T>& a, const std::vector<T>& b, int threads) {
  double s = 0.0;
  const int64_t n = static_cast<int64_t>(a.size());
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return s;
}

// Preconditioned CG on A x = b from x = 0; returns the iteration count.
template <typename T, typename Apply, typename Precondition>
int ConjugateGradients(const PcgOptions& o, int threads, const std::vector<T>& b,
                       std::vector<T>& x, Apply apply, Precondition precondition) {
  const int64_t n = static_cast<int64_t>(b.size());
  std::vector<T> r = b, z(n), q(n), dir(n);
  std::fill(x.begin(), x.end(), T(0));
  const double r0 = std::sqrt(Dot(r, r, threads));
  if (r0 == 0.0) return 0;
  precondition(r, z);
  dir = z;
  double rz = Dot(r, z, threads);
  double q_prev = 0.0;
  int it = 0;
  while (it < o.max_iterations) {
    apply(dir, q);
    const double pq = Dot(dir, q, threads);
    if (!(pq > 0.0) || !std::isfinite(pq)) break;  // lost positive definiteness (rounding)
    const T alpha = static_cast<T>(rz / pq);
    double rr = 0.0, xb = 0.0, xr = 0.0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : rr, xb, xr)
    for (int64_t i = 0; i < n; ++i) {
      x[i] += alpha * dir[i];
      r[i] -= alpha * q[i];
      rr += static_cast<double>(r[i]) * r[i];
      xb += static_cast<double>(x[i]) * b[i];
      xr += static_cast<double>(x[i]) * r[i];
    }
    ++it;
    if (it >= o.min_iterations) {
      if (o.termination == CgTermination::kResidual) {
        if (std::sqrt(rr) <= o.eta * r0) break;
      } else {
        // Nash & Sofer (1990): the quadratic model Q(x) = 1/2 x'Ax - b'x = -1/2 (b'x + r'x)
        // has stopped decreasing: it (Q_it - Q_it-1) / Q_it < eta.
        const double q_now = -0.5 * (xb + xr);
        if (it > 1 && q_now < 0.0 && it * (q_now - q_prev) / q_now < o.eta) break;
        q_prev = q_now;
      }
    }
    precondition(r, z);
    const double rz_new = Dot(r, z, threads);
    const T beta = static_cast<T>(rz_new / rz);
    rz = rz_new;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) dir[i] = z[i] + beta * dir[i];
  }
  return it;
}

template <typename T>
class PcgSolver : public LinearSolver {
 public:
  PcgSolver(const PcgOptions& o, const BAProblem& problem, PcgLinearization<T>& lin)
      : options_(o), p_(problem), lin_(lin) {}

  Status Solve(const double* d_cameras, const double* d_points, const double* rhs_cameras,
               const double* rhs_points, double* dx_cameras, double* dx_points,
               LinearSolverSummary* summary) override {
    PcgLinearization<T>& ops = lin_;
    ops.PrepareDamping(d_cameras, d_points);
    const int nt = ops.num_threads();
    const int64_t nc9 = 9LL * p_.num_cameras, np3 = 3LL * p_.num_points;
    const std::vector<double>& cs = ops.camera_scale();
    const std::vector<double>& ps = ops.point_scale();
    // Scaled system: (S J^T J S + S D S) x' = S b, dx = S x'.
    std::vector<T> bc(nc9), bp(np3), xc(nc9), xp(np3);
    for (int64_t k = 0; k < nc9; ++k) bc[k] = static_cast<T>(rhs_cameras[k] * cs[k]);
    for (int64_t k = 0; k < np3; ++k) bp[k] = static_cast<T>(rhs_points[k] * ps[k]);

    if (options_.kind == PcgKind::kSchur) {
      std::vector<T> b(nc9);
      ops.ReducedRhs(bc.data(), bp.data(), b.data());
      summary->iterations = ConjugateGradients(
          options_, nt, b, xc,
          [&](const std::vector<T>& v, std::vector<T>& out) { ops.SchurTimes(v.data(), out.data()); },
          [&](const std::vector<T>& v, std::vector<T>& out) { ops.CameraPrecondition(v.data(), out.data()); });
      ops.BackSubstitute(bp.data(), xc.data(), xp.data());
    } else {
      std::vector<T> b(nc9 + np3), x(nc9 + np3);
      std::copy(bc.begin(), bc.end(), b.begin());
      std::copy(bp.begin(), bp.end(), b.begin() + nc9);
      summary->iterations = ConjugateGradients(
          options_, nt, b, x,
          [&](const std::vector<T>& v, std::vector<T>& out) {
            ops.HessianTimes(v.data(), v.data() + nc9, out.data(), out.data() + nc9);
          },
          [&](const std::vector<T>& v, std::vector<T>& out) {
            ops.CameraPrecondition(v.data(), out.data());
            ops.PointPrecondition(v.data() + nc9, out.data() + nc9);
          });
      std::copy(x.begin(), x.begin() + nc9, xc.begin());
      std::copy(x.begin() + nc9, x.end(), xp.begin());
    }
    bool finite = true;
    for (int64_t k = 0; k < nc9; ++k) {
      dx_cameras[k] = static_cast<double>(xc[k]) * cs[k];
      finite &= std::isfinite(dx_cameras[k]);
    }
    for (int64_t k = 0; k < np3; ++k) {
      dx_points[k] = static_cast<double>(xp[k]) * ps[k];
      finite &= std::isfinite(dx_points[k]);
    }
    summary->success = finite;
    if (!finite) summary->message = "PCG produced a non-finite step";
    return Status::Ok();
  }

 private:
  PcgOptions options_;
  const BAProblem& p_;
  PcgLinearization<T>& lin_;
};

template <typename T>
Status Create(const PcgOptions& options, const BAProblem& problem, const LossFunction& loss,
              LinearSystem* system) {
  auto lin = std::make_unique<PcgLinearization<T>>(problem, loss, options.num_threads,
                                                   options.recompute_jacobian);
  system->solver = std::make_unique<PcgSolver<T>>(options, problem, *lin);
  system->linearization = std::move(lin);
  return Status::Ok();
}

}  // namespace

Status CreatePcgLinearSystem(const PcgOptions& options, const BAProblem& problem,
                             const LossFunction& loss, LinearSystem* system) {
  try {
    if (options.precision == Precision::kFloat) return Create<float>(options, problem, loss, system);
    return Create<double>(options, problem, loss, system);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("not enough memory for the PCG solver's Jacobian blocks (" +
                               std::to_string(problem.num_observations) +
                               " observations); try --jacobian recompute");
  }
}

}  // namespace tiepoint
