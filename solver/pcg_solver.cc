#include "solver/pcg_solver.h"

#include <omp.h>

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <cmath>
#include <vector>

namespace tiepoint {
namespace {

template <typename T>
class PcgSolver : public LinearSolver {
 public:
  using Mat9 = Eigen::Matrix<T, 9, 9, Eigen::RowMajor>;
  using Mat3 = Eigen::Matrix<T, 3, 3, Eigen::RowMajor>;
  using MJc = Eigen::Matrix<T, 2, 9, Eigen::RowMajor>;
  using MJp = Eigen::Matrix<T, 2, 3, Eigen::RowMajor>;
  using Vec9 = Eigen::Matrix<T, 9, 1>;
  using Vec3 = Eigen::Matrix<T, 3, 1>;
  using Vec2 = Eigen::Matrix<T, 2, 1>;

  explicit PcgSolver(const PcgOptions& o) : options_(o) {}

  Status Initialize(const BAProblem& p) override {
    problem_ = &p;
    jc_.resize(18 * p.num_observations);
    jp_.resize(6 * p.num_observations);
    e_.resize(2 * p.num_observations);
    cam_scale_.resize(9 * static_cast<size_t>(p.num_cameras));
    pt_scale_.resize(3 * static_cast<size_t>(p.num_points));
    dc_.resize(9 * static_cast<size_t>(p.num_cameras));
    dp_.resize(3 * static_cast<size_t>(p.num_points));
    cam_precond_.resize(81 * static_cast<size_t>(p.num_cameras));
    pt_precond_.resize(9 * static_cast<size_t>(p.num_points));
    return Status::Ok();
  }

  Status Solve(const BAProblem& p, const JacobianBlocks& jac, const double* d_cameras,
               const double* d_points, const double* rhs_cameras, const double* rhs_points,
               double* dx_cameras, double* dx_points, LinearSolverSummary* summary) override;

 private:
  int threads() const { return options_.num_threads > 0 ? options_.num_threads : omp_get_max_threads(); }
  void Prepare(const JacobianBlocks& jac, const double* d_cameras, const double* d_points);
  // y = S x (Schur) over camera vectors.
  void SchurTimes(const T* x, T* y);
  // (yc, yp) = (J^T J + D)(xc, xp).
  void HessianTimes(const T* xc, const T* xp, T* yc, T* yp);
  double Dot(const std::vector<T>& a, const std::vector<T>& b) const;
  // Runs PCG on A x = b; `apply` computes A v, `precondition` M^-1 v.
  template <typename Apply, typename Precondition>
  int Cg(std::vector<T>& b, std::vector<T>& x, Apply apply, Precondition precondition);

  PcgOptions options_;
  const BAProblem* problem_ = nullptr;
  std::vector<T> jc_, jp_, e_;           // scaled Jacobian blocks, per-observation workspace
  std::vector<T> cam_scale_, pt_scale_;  // Jacobi column scaling
  std::vector<T> dc_, dp_;               // scaled damping
  std::vector<T> cam_precond_;           // 81 per camera: inverse camera blocks
  std::vector<T> pt_precond_;            // 9 per point: V_p^-1
  std::vector<T> z_;                     // per-point workspace
};

template <typename T>
void PcgSolver<T>::Prepare(const JacobianBlocks& jac, const double* d_cameras,
                           const double* d_points) {
  const BAProblem& p = *problem_;
  const int nt = threads();
  // Column scaling s = 1 / sqrt(diag(J^T J + D)): the scaled system has a unit diagonal.
#pragma omp parallel num_threads(nt)
  {
#pragma omp for schedule(dynamic, 16)
    for (int c = 0; c < p.num_cameras; ++c) {
      double d[9];
      for (int a = 0; a < 9; ++a) d[a] = d_cameras[9 * c + a];
      for (int64_t k = p.camera_ptr[c]; k < p.camera_ptr[c + 1]; ++k) {
        const double* J = &jac.jc[18 * p.camera_obs[k]];
        for (int a = 0; a < 9; ++a) d[a] += J[a] * J[a] + J[9 + a] * J[9 + a];
      }
      for (int a = 0; a < 9; ++a) {
        const double s = 1.0 / std::sqrt(d[a]);
        cam_scale_[9 * c + a] = static_cast<T>(s);
        dc_[9 * c + a] = static_cast<T>(d_cameras[9 * c + a] * s * s);
      }
    }
#pragma omp for schedule(static)
    for (int j = 0; j < p.num_points; ++j) {
      double d[3] = {d_points[3 * j], d_points[3 * j + 1], d_points[3 * j + 2]};
      for (int64_t i = p.point_ptr[j]; i < p.point_ptr[j + 1]; ++i) {
        const double* J = &jac.jp[6 * i];
        for (int a = 0; a < 3; ++a) d[a] += J[a] * J[a] + J[3 + a] * J[3 + a];
      }
      for (int a = 0; a < 3; ++a) {
        const double s = 1.0 / std::sqrt(d[a]);
        pt_scale_[3 * j + a] = static_cast<T>(s);
        dp_[3 * j + a] = static_cast<T>(d_points[3 * j + a] * s * s);
      }
    }
    // Scaled blocks and point preconditioner V_p^-1 (point-major, contiguous).
#pragma omp for schedule(static)
    for (int j = 0; j < p.num_points; ++j) {
      Mat3 V = Mat3::Zero();
      for (int64_t i = p.point_ptr[j]; i < p.point_ptr[j + 1]; ++i) {
        const double* sc = nullptr;
        (void)sc;
        const T* cs = &cam_scale_[9 * p.obs_camera[i]];
        for (int r = 0; r < 2; ++r) {
          for (int a = 0; a < 9; ++a) jc_[18 * i + 9 * r + a] = static_cast<T>(jac.jc[18 * i + 9 * r + a]) * cs[a];
          for (int a = 0; a < 3; ++a) jp_[6 * i + 3 * r + a] = static_cast<T>(jac.jp[6 * i + 3 * r + a] * pt_scale_[3 * j + a]);
        }
        const Eigen::Map<const MJp> J(&jp_[6 * i]);
        V.noalias() += J.transpose() * J;
      }
      V.diagonal() += Eigen::Map<const Vec3>(&dp_[3 * j]);
      Eigen::Map<Mat3> Vinv(&pt_precond_[9 * j]);
      Vinv = V.ldlt().solve(Mat3::Identity());
    }
    // Camera preconditioner: inverse of U_i = J_c^T J_c + D (camera-major).
#pragma omp for schedule(dynamic, 16)
    for (int c = 0; c < p.num_cameras; ++c) {
      Mat9 U = Mat9::Zero();
      for (int64_t k = p.camera_ptr[c]; k < p.camera_ptr[c + 1]; ++k) {
        const Eigen::Map<const MJc> J(&jc_[18 * p.camera_obs[k]]);
        U.noalias() += J.transpose() * J;
      }
      U.diagonal() += Eigen::Map<const Vec9>(&dc_[9 * c]);
      Eigen::Map<Mat9> Uinv(&cam_precond_[81 * c]);
      Uinv = U.ldlt().solve(Mat9::Identity());
    }
  }
}

template <typename T>
void PcgSolver<T>::SchurTimes(const T* x, T* y) {
  const BAProblem& p = *problem_;
#pragma omp parallel num_threads(threads())
  {
    // Per point: y_o = Jc x_c, z = V^-1 sum Jp^T y_o, e_o = y_o - Jp z.
#pragma omp for schedule(static)
    for (int j = 0; j < p.num_points; ++j) {
      Vec3 acc = Vec3::Zero();
      for (int64_t i = p.point_ptr[j]; i < p.point_ptr[j + 1]; ++i) {
        const Vec2 yo = Eigen::Map<const MJc>(&jc_[18 * i]) *
                        Eigen::Map<const Vec9>(x + 9 * p.obs_camera[i]);
        Eigen::Map<Vec2>{&e_[2 * i]} = yo;
        acc.noalias() += Eigen::Map<const MJp>(&jp_[6 * i]).transpose() * yo;
      }
      const Vec3 z = Eigen::Map<const Mat3>(&pt_precond_[9 * j]) * acc;
      for (int64_t i = p.point_ptr[j]; i < p.point_ptr[j + 1]; ++i) {
        Eigen::Map<Vec2> eo(&e_[2 * i]);
        eo.noalias() -= Eigen::Map<const MJp>(&jp_[6 * i]) * z;
      }
    }
    // Per camera: (S x)_c = D_c x_c + sum Jc^T e_o.
#pragma omp for schedule(dynamic, 16)
    for (int c = 0; c < p.num_cameras; ++c) {
      Vec9 acc = Eigen::Map<const Vec9>(&dc_[9 * c]).cwiseProduct(Eigen::Map<const Vec9>(x + 9 * c));
      for (int64_t k = p.camera_ptr[c]; k < p.camera_ptr[c + 1]; ++k) {
        const int64_t i = p.camera_obs[k];
        acc.noalias() += Eigen::Map<const MJc>(&jc_[18 * i]).transpose() * Eigen::Map<const Vec2>(&e_[2 * i]);
      }
      Eigen::Map<Vec9>{y + 9 * c} = acc;
    }
  }
}

template <typename T>
void PcgSolver<T>::HessianTimes(const T* xc, const T* xp, T* yc, T* yp) {
  const BAProblem& p = *problem_;
#pragma omp parallel num_threads(threads())
  {
    // Per point: e_o = Jc xc + Jp xp; (y_p) = D xp + sum Jp^T e_o.
#pragma omp for schedule(static)
    for (int j = 0; j < p.num_points; ++j) {
      const Eigen::Map<const Vec3> xj(xp + 3 * j);
      Vec3 acc = Eigen::Map<const Vec3>(&dp_[3 * j]).cwiseProduct(xj);
      for (int64_t i = p.point_ptr[j]; i < p.point_ptr[j + 1]; ++i) {
        const Eigen::Map<const MJp> Jp(&jp_[6 * i]);
        const Vec2 eo = Eigen::Map<const MJc>(&jc_[18 * i]) *
                            Eigen::Map<const Vec9>(xc + 9 * p.obs_camera[i]) + Jp * xj;
        Eigen::Map<Vec2>{&e_[2 * i]} = eo;
        acc.noalias() += Jp.transpose() * eo;
      }
      Eigen::Map<Vec3>{yp + 3 * j} = acc;
    }
#pragma omp for schedule(dynamic, 16)
    for (int c = 0; c < p.num_cameras; ++c) {
      Vec9 acc = Eigen::Map<const Vec9>(&dc_[9 * c]).cwiseProduct(Eigen::Map<const Vec9>(xc + 9 * c));
      for (int64_t k = p.camera_ptr[c]; k < p.camera_ptr[c + 1]; ++k) {
        const int64_t i = p.camera_obs[k];
        acc.noalias() += Eigen::Map<const MJc>(&jc_[18 * i]).transpose() * Eigen::Map<const Vec2>(&e_[2 * i]);
      }
      Eigen::Map<Vec9>{yc + 9 * c} = acc;
    }
  }
}

template <typename T>
double PcgSolver<T>::Dot(const std::vector<T>& a, const std::vector<T>& b) const {
  double s = 0.0;
  const int64_t n = static_cast<int64_t>(a.size());
#pragma omp parallel for num_threads(threads()) schedule(static) reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return s;
}

template <typename T>
template <typename Apply, typename Precondition>
int PcgSolver<T>::Cg(std::vector<T>& b, std::vector<T>& x, Apply apply, Precondition precondition) {
  const size_t n = b.size();
  const int nt = threads();
  std::vector<T> r = b, z(n), q(n), dir(n);
  std::fill(x.begin(), x.end(), T(0));
  const double r0 = std::sqrt(Dot(r, r));
  if (r0 == 0.0) return 0;
  precondition(r, z);
  dir = z;
  double rz = Dot(r, z);
  int it = 0;
  while (it < options_.max_iterations) {
    apply(dir, q);
    const double pq = Dot(dir, q);
    if (!(pq > 0.0) || !std::isfinite(pq)) break;
    const T alpha = static_cast<T>(rz / pq);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) {
      x[i] += alpha * dir[i];
      r[i] -= alpha * q[i];
    }
    ++it;
    const double rn = std::sqrt(Dot(r, r));
    if (it >= options_.min_iterations && rn <= options_.eta * r0) break;
    precondition(r, z);
    const double rz_new = Dot(r, z);
    const T beta = static_cast<T>(rz_new / rz);
    rz = rz_new;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) dir[i] = z[i] + beta * dir[i];
  }
  return it;
}

template <typename T>
Status PcgSolver<T>::Solve(const BAProblem& p, const JacobianBlocks& jac, const double* d_cameras,
                           const double* d_points, const double* rhs_cameras,
                           const double* rhs_points, double* dx_cameras, double* dx_points,
                           LinearSolverSummary* summary) {
  Prepare(jac, d_cameras, d_points);
  const int nt = threads();
  const int64_t nc9 = 9LL * p.num_cameras, np3 = 3LL * p.num_points;
  // Scaled right-hand side: b' = S b.
  std::vector<T> bc(nc9), bp(np3);
  for (int64_t k = 0; k < nc9; ++k) bc[k] = static_cast<T>(rhs_cameras[k]) * cam_scale_[k];
  for (int64_t k = 0; k < np3; ++k) bp[k] = static_cast<T>(rhs_points[k]) * pt_scale_[k];
  auto precondition_cameras = [&](const std::vector<T>& in, std::vector<T>& out, int64_t offset) {
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int c = 0; c < p.num_cameras; ++c) {
      Eigen::Map<Vec9>{&out[offset + 9 * c]} =
          Eigen::Map<const Mat9>(&cam_precond_[81 * c]) * Eigen::Map<const Vec9>(&in[offset + 9 * c]);
    }
  };

  std::vector<T> xc(nc9), xp(np3);
  if (options_.kind == PcgKind::kSchur) {
    // Reduced right-hand side: b_c - W V^-1 b_p, matrix-free.
    std::vector<T> tp(np3);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int j = 0; j < p.num_points; ++j) {
      Eigen::Map<Vec3>{&tp[3 * j]} = Eigen::Map<const Mat3>(&pt_precond_[9 * j]) * Eigen::Map<const Vec3>(&bp[3 * j]);
      for (int64_t i = p.point_ptr[j]; i < p.point_ptr[j + 1]; ++i) {
        Eigen::Map<Vec2>{&e_[2 * i]} = Eigen::Map<const MJp>(&jp_[6 * i]) * Eigen::Map<const Vec3>(&tp[3 * j]);
      }
    }
    std::vector<T> b = bc;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 16)
    for (int c = 0; c < p.num_cameras; ++c) {
      Vec9 acc = Vec9::Zero();
      for (int64_t k = p.camera_ptr[c]; k < p.camera_ptr[c + 1]; ++k) {
        const int64_t i = p.camera_obs[k];
        acc.noalias() += Eigen::Map<const MJc>(&jc_[18 * i]).transpose() * Eigen::Map<const Vec2>(&e_[2 * i]);
      }
      Eigen::Map<Vec9>{&b[9 * c]} -= acc;
    }
    summary->iterations = Cg(
        b, xc, [&](const std::vector<T>& v, std::vector<T>& out) { SchurTimes(v.data(), out.data()); },
        [&](const std::vector<T>& in, std::vector<T>& out) { precondition_cameras(in, out, 0); });
    // Back-substitution: dp = V^-1 (b_p - W^T dc).
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int j = 0; j < p.num_points; ++j) {
      Vec3 r = Eigen::Map<const Vec3>(&bp[3 * j]);
      for (int64_t i = p.point_ptr[j]; i < p.point_ptr[j + 1]; ++i) {
        const Vec2 y = Eigen::Map<const MJc>(&jc_[18 * i]) * Eigen::Map<const Vec9>(&xc[9 * p.obs_camera[i]]);
        r.noalias() -= Eigen::Map<const MJp>(&jp_[6 * i]).transpose() * y;
      }
      Eigen::Map<Vec3>{&xp[3 * j]} = Eigen::Map<const Mat3>(&pt_precond_[9 * j]) * r;
    }
  } else {
    // Full system over [cameras; points] in one vector.
    std::vector<T> b(nc9 + np3), x(nc9 + np3);
    std::copy(bc.begin(), bc.end(), b.begin());
    std::copy(bp.begin(), bp.end(), b.begin() + nc9);
    summary->iterations = Cg(
        b, x,
        [&](const std::vector<T>& v, std::vector<T>& out) {
          HessianTimes(v.data(), v.data() + nc9, out.data(), out.data() + nc9);
        },
        [&](const std::vector<T>& in, std::vector<T>& out) {
          precondition_cameras(in, out, 0);
#pragma omp parallel for num_threads(nt) schedule(static)
          for (int j = 0; j < p.num_points; ++j) {
            Eigen::Map<Vec3>{&out[nc9 + 3 * j]} =
                Eigen::Map<const Mat3>(&pt_precond_[9 * j]) * Eigen::Map<const Vec3>(&in[nc9 + 3 * j]);
          }
        });
    std::copy(x.begin(), x.begin() + nc9, xc.begin());
    std::copy(x.begin() + nc9, x.end(), xp.begin());
  }
  // Undo the column scaling: dx = S x'.
  bool finite = true;
  for (int64_t k = 0; k < nc9; ++k) {
    dx_cameras[k] = static_cast<double>(xc[k]) * static_cast<double>(cam_scale_[k]);
    finite &= std::isfinite(dx_cameras[k]);
  }
  for (int64_t k = 0; k < np3; ++k) {
    dx_points[k] = static_cast<double>(xp[k]) * static_cast<double>(pt_scale_[k]);
    finite &= std::isfinite(dx_points[k]);
  }
  summary->success = finite;
  if (!finite) summary->message = "PCG produced a non-finite step";
  return Status::Ok();
}

}  // namespace

std::unique_ptr<LinearSolver> CreatePcgSolver(const PcgOptions& options) {
  if (options.precision == Precision::kFloat) return std::make_unique<PcgSolver<float>>(options);
  return std::make_unique<PcgSolver<double>>(options);
}

}  // namespace tiepoint
