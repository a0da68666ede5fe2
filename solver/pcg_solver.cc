#include "solver/pcg_solver.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "solver/parallel.h"
#include "solver/pcg_linearization.h"

namespace tiepoint {
namespace {

template <typename T>
double Dot(const std::vector<T>& a, const std::vector<T>& b, int threads) {
  double s = 0.0;
  const int64_t n = static_cast<int64_t>(a.size());
  ParallelRegion(threads, [&] {
#pragma omp for schedule(static) reduction(+ : s)
    for (int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  });
  return s;
}

// Preconditioned CG on A x = b from x = 0; returns the iteration count. The vector work
// (dot products, updates) runs on all threads only for long vectors: the reduced camera
// system of a small problem has a few hundred entries, where a fork and join costs more
// than the work (the operator `apply` has its own threading).
template <typename T, typename Apply, typename Precondition>
int ConjugateGradients(const PcgOptions& o, int operator_threads, const std::vector<T>& b,
                       std::vector<T>& x, Apply apply, Precondition precondition) {
  const int threads = b.size() >= (1u << 16) ? operator_threads : 1;
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
    ParallelRegion(threads, [&] {
#pragma omp for schedule(static) reduction(+ : rr, xb, xr)
      for (int64_t i = 0; i < n; ++i) {
        x[i] += alpha * dir[i];
        r[i] -= alpha * q[i];
        rr += static_cast<double>(r[i]) * r[i];
        xb += static_cast<double>(x[i]) * b[i];
        xr += static_cast<double>(x[i]) * r[i];
      }
    });
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
    ParallelRegion(threads, [&] {
#pragma omp for schedule(static)
      for (int64_t i = 0; i < n; ++i) dir[i] = z[i] + beta * dir[i];
    });
  }
  return it;
}

// Solves the scaled system (J'^T J' + D') [xc; xp] = [bc; k bp] with the operators of
// `ops` (damping already prepared): pcg-schur by CG on the reduced camera system and
// back-substitution, pcg-hessian by CG on the whole system. Returns the CG iterations.
template <typename T>
int SolveScaled(const PcgOptions& o, PcgLinearization<T>& ops, int64_t nc9, int64_t np3,
                const T* bc, const T* bp, T k, std::vector<T>* xc, std::vector<T>* xp) {
  const int nt = ops.num_threads();
  int iterations = 0;
  if (o.kind == PcgKind::kSchur) {
    std::vector<T> b(nc9);
    ops.ReducedRhs(bc, bp, b.data(), k);
    iterations = ConjugateGradients(
        o, nt, b, *xc,
        [&](const std::vector<T>& v, std::vector<T>& out) { ops.SchurTimes(v.data(), out.data()); },
        [&](const std::vector<T>& v, std::vector<T>& out) { ops.CameraPrecondition(v.data(), out.data()); });
    ops.BackSubstitute(bp, xc->data(), xp->data(), k);
  } else {
    std::vector<T> b(nc9 + np3), x(nc9 + np3);
    std::copy(bc, bc + nc9, b.begin());
    for (int64_t i = 0; i < np3; ++i) b[nc9 + i] = k * bp[i];
    iterations = ConjugateGradients(
        o, nt, b, x,
        [&](const std::vector<T>& v, std::vector<T>& out) {
          ops.HessianTimes(v.data(), v.data() + nc9, out.data(), out.data() + nc9);
        },
        [&](const std::vector<T>& v, std::vector<T>& out) {
          ops.CameraPrecondition(v.data(), out.data());
          ops.PointPrecondition(v.data() + nc9, out.data() + nc9);
        });
    std::copy(x.begin(), x.begin() + nc9, xc->begin());
    std::copy(x.begin() + nc9, x.end(), xp->begin());
  }
  return iterations;
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
    const int64_t nc9 = 9LL * p_.num_cameras, np3 = 3LL * p_.num_points;
    const std::vector<double>& cs = ops.camera_scale();
    const std::vector<T>& ps = ops.point_scale();
    // Scaled system: (S J^T J S + S D S) x' = S b, dx = S x'.
    std::vector<T> bc(nc9), bp(np3), xc(nc9), xp(np3);
    for (int64_t k = 0; k < nc9; ++k) bc[k] = static_cast<T>(rhs_cameras[k] * cs[k]);
    for (int64_t k = 0; k < np3; ++k) bp[k] = static_cast<T>(rhs_points[k] * ps[k]);

    summary->iterations = SolveScaled(options_, ops, nc9, np3, bc.data(), bp.data(), T(1), &xc, &xp);
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

// The LM state over PcgLinearization<T>, in the scaled space: dx = s dx', g' = s g.
template <typename T>
class PcgLmState : public LmState {
 public:
  PcgLmState(const PcgOptions& o, const BAProblem& problem, const LossFunction& loss,
             double* cameras, double* points)
      : options_(o),
        p_(problem),
        lin_(problem, loss, o.num_threads, o.recompute_jacobian, o.kind == PcgKind::kSchur),
        xc_(cameras),
        xp_(points) {
    const size_t nc9 = 9 * static_cast<size_t>(p_.num_cameras), np3 = 3 * static_cast<size_t>(p_.num_points);
    dxc_.resize(nc9);
    dxp_.resize(np3);
    bc_.resize(nc9);
  }

  double Linearize() override { return lin_.Linearize(xc_, xp_); }

  double GradientMaxNorm() override {
    double m = 0.0;
    for (double v : lin_.camera_gradient()) m = std::max(m, std::abs(v));
    const std::vector<T>& gp = lin_.scaled_point_gradient();
    const std::vector<T>& ps = lin_.point_scale();
    for (size_t k = 0; k < gp.size(); ++k) m = std::max(m, std::abs(static_cast<double>(gp[k]) / ps[k]));
    return m;
  }

  Status Step(double radius, LmStep* step) override {
    lin_.PrepareLmDamping(radius);
    const int nt = lin_.num_threads();
    const int64_t nc9 = 9LL * p_.num_cameras, np3 = 3LL * p_.num_points;
    const std::vector<double>& cs = lin_.camera_scale();
    const std::vector<double>& gc = lin_.camera_gradient();
    const std::vector<T>& gp = lin_.scaled_point_gradient();  // b_p = -g'_p
    for (int64_t k = 0; k < nc9; ++k) bc_[k] = static_cast<T>(-gc[k] * cs[k]);
    const int iterations = SolveScaled(options_, lin_, nc9, np3, bc_.data(), gp.data(), T(-1), &dxc_, &dxp_);
    *step = LmStep();
    step->linear_iterations = iterations;
    // g.dx = g'.dx'; |J dx| = |J' dx'|; |dx| = |s dx'|.
    const std::vector<T>& ps = lin_.point_scale();
    double gdx = 0.0, dx2 = 0.0, x2 = 0.0;
    for (int64_t k = 0; k < nc9; ++k) {
      const double d = static_cast<double>(dxc_[k]);
      gdx += gc[k] * cs[k] * d;
      dx2 += (d * cs[k]) * (d * cs[k]);
      x2 += xc_[k] * xc_[k];
    }
    ParallelRegion(nt, [&] {
#pragma omp for schedule(static) reduction(+ : gdx, dx2, x2)
      for (int64_t k = 0; k < np3; ++k) {
        const double d = static_cast<double>(dxp_[k]);
        gdx += static_cast<double>(gp[k]) * d;
        const double e = d * ps[k];
        dx2 += e * e;
        x2 += xp_[k] * xp_[k];
      }
    });
    const double jdx = lin_.ScaledJacobianNormSquared(dxc_.data(), dxp_.data());
    step->model_decrease = -(gdx + 0.5 * jdx);
    step->step_norm = std::sqrt(dx2);
    step->x_norm = std::sqrt(x2);
    step->valid = std::isfinite(step->model_decrease) && std::isfinite(step->step_norm);
    if (!step->valid) step->message = "PCG produced a non-finite step";
    return Status::Ok();
  }

  double TrialCost() override { return lin_.StepCost(dxc_.data(), dxp_.data()); }

  void Accept() override {
    // The same arithmetic as StepCost, so x is exactly the point whose cost was accepted.
    const std::vector<double>& cs = lin_.camera_scale();
    const std::vector<T>& ps = lin_.point_scale();
    const int64_t nc9 = 9LL * p_.num_cameras, np3 = 3LL * p_.num_points;
    for (int64_t k = 0; k < nc9; ++k) xc_[k] = xc_[k] + static_cast<double>(dxc_[k]) * cs[k];
    ParallelRegion(lin_.num_threads(), [&] {
#pragma omp for schedule(static)
      for (int64_t k = 0; k < np3; ++k) xp_[k] = xp_[k] + static_cast<double>(dxp_[k]) * ps[k];
    });
  }

  Status Parameters(double* cameras, double* points) override {
    if (cameras != xc_) std::copy(xc_, xc_ + 9LL * p_.num_cameras, cameras);
    if (points != xp_) std::copy(xp_, xp_ + 3LL * p_.num_points, points);
    return Status::Ok();
  }

 private:
  PcgOptions options_;
  const BAProblem& p_;
  PcgLinearization<T> lin_;
  double* xc_;
  double* xp_;
  std::vector<T> dxc_, dxp_, bc_;
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

// The operators are built for AVX2 + FMA unless TIEPOINT_SIMD=sse (solver/CMakeLists.txt).
Status CheckSimd() {
#if defined(TIEPOINT_SIMD_AVX2) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    return Status::Unavailable(
        "this tiepoint was built with AVX2 + FMA PCG operators (TIEPOINT_SIMD=avx2) but this "
        "CPU lacks them; rebuild with cmake -DTIEPOINT_SIMD=sse");
  }
#endif
  return Status::Ok();
}

}  // namespace

Status CreatePcgLmState(const PcgOptions& options, const BAProblem& problem,
                        const LossFunction& loss, double* cameras, double* points,
                        std::unique_ptr<LmState>* state) {
  TIEPOINT_RETURN_IF_ERROR(CheckSimd());
  try {
    if (options.precision == Precision::kFloat) {
      *state = std::make_unique<PcgLmState<float>>(options, problem, loss, cameras, points);
    } else {
      *state = std::make_unique<PcgLmState<double>>(options, problem, loss, cameras, points);
    }
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    const double gib = static_cast<double>(problem.num_observations) *
                       (options.recompute_jacobian ? 0.0 : 96.0 * (options.precision == Precision::kFloat ? 1 : 2)) /
                       (1 << 30);
    return Status::OutOfMemory(
        "not enough memory for the PCG solver (" + std::to_string(problem.num_observations) +
        " observations" +
        (options.recompute_jacobian ? std::string(")")
                                    : ", ~" + std::to_string(gib).substr(0, 5) +
                                          " GiB of Jacobian blocks); try --jacobian recompute"));
  }
}

Status CreatePcgLinearSystem(const PcgOptions& options, const BAProblem& problem,
                             const LossFunction& loss, LinearSystem* system) {
  TIEPOINT_RETURN_IF_ERROR(CheckSimd());
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
