#include "solver/pcg_operators.h"

#include <omp.h>

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <cmath>

namespace tiepoint {
namespace {

template <typename T>
struct Types {
  using Mat9 = Eigen::Matrix<T, 9, 9, Eigen::RowMajor>;
  using Mat3 = Eigen::Matrix<T, 3, 3, Eigen::RowMajor>;
  using MJc = Eigen::Matrix<T, 2, 9, Eigen::RowMajor>;
  using MJp = Eigen::Matrix<T, 2, 3, Eigen::RowMajor>;
  using Vec9 = Eigen::Matrix<T, 9, 1>;
  using Vec3 = Eigen::Matrix<T, 3, 1>;
  using Vec2 = Eigen::Matrix<T, 2, 1>;
};

}  // namespace

// Each member function uses a subset of these aliases.
#pragma GCC diagnostic ignored "-Wunused-local-typedefs"
#define TP_TYPES                              \
  using Mat9 = typename Types<T>::Mat9;       \
  using Mat3 = typename Types<T>::Mat3;       \
  using MJc = typename Types<T>::MJc;         \
  using MJp = typename Types<T>::MJp;         \
  using Vec9 = typename Types<T>::Vec9;       \
  using Vec3 = typename Types<T>::Vec3;       \
  using Vec2 = typename Types<T>::Vec2

template <typename T>
BlockOperators<T>::BlockOperators(const BAProblem& problem, int num_threads)
    : p_(problem), threads_(num_threads > 0 ? num_threads : omp_get_max_threads()) {
  const size_t n = static_cast<size_t>(p_.num_observations);
  jc_.resize(18 * n);
  jp_.resize(6 * n);
  e_.resize(2 * n);
  cam_scale_.resize(9 * static_cast<size_t>(p_.num_cameras));
  dc_.resize(cam_scale_.size());
  pt_scale_.resize(3 * static_cast<size_t>(p_.num_points));
  dp_.resize(pt_scale_.size());
  cam_precond_.resize(81 * static_cast<size_t>(p_.num_cameras));
  pt_precond_.resize(9 * static_cast<size_t>(p_.num_points));
}

template <typename T>
void BlockOperators<T>::Prepare(const JacobianBlocks& jac, const double* d_cameras,
                                const double* d_points) {
  TP_TYPES;
  const BAProblem& p = p_;
#pragma omp parallel num_threads(threads_)
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
    // (implicit barrier: camera scales are complete before the blocks are scaled)
#pragma omp for schedule(static)
    for (int j = 0; j < p.num_points; ++j) {
      Mat3 V = Mat3::Zero();
      for (int64_t i = p.point_ptr[j]; i < p.point_ptr[j + 1]; ++i) {
        const T* cs = &cam_scale_[9 * p.obs_camera[i]];
        for (int r = 0; r < 2; ++r) {
          for (int a = 0; a < 9; ++a) {
            jc_[18 * i + 9 * r + a] = static_cast<T>(jac.jc[18 * i + 9 * r + a] * cs[a]);
          }
          for (int a = 0; a < 3; ++a) {
            jp_[6 * i + 3 * r + a] = static_cast<T>(jac.jp[6 * i + 3 * r + a] * pt_scale_[3 * j + a]);
          }
        }
        const Eigen::Map<const MJp> J(&jp_[6 * i]);
        V.noalias() += J.transpose() * J;
      }
      V.diagonal() += Eigen::Map<const Vec3>(&dp_[3 * j]);
      Eigen::Map<Mat3> Vinv(&pt_precond_[9 * j]);
      Vinv = V.ldlt().solve(Mat3::Identity());
    }
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
void BlockOperators<T>::JTimes(const T* xc, const T* xp, T* y) const {
  TP_TYPES;
  const BAProblem& p = p_;
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (int64_t i = 0; i < p.num_observations; ++i) {
    Eigen::Map<Vec2> out(y + 2 * i);
    out = Eigen::Map<const MJc>(&jc_[18 * i]) * Eigen::Map<const Vec9>(xc + 9 * p.obs_camera[i]) +
          Eigen::Map<const MJp>(&jp_[6 * i]) * Eigen::Map<const Vec3>(xp + 3 * p.obs_point[i]);
  }
}

template <typename T>
void BlockOperators<T>::JtTimes(const T* y, T* gc, T* gp) const {
  TP_TYPES;
  const BAProblem& p = p_;
#pragma omp parallel num_threads(threads_)
  {
#pragma omp for schedule(static)
    for (int j = 0; j < p.num_points; ++j) {
      Vec3 acc = Vec3::Zero();
      for (int64_t i = p.point_ptr[j]; i < p.point_ptr[j + 1]; ++i) {
        acc.noalias() += Eigen::Map<const MJp>(&jp_[6 * i]).transpose() * Eigen::Map<const Vec2>(y + 2 * i);
      }
      Eigen::Map<Vec3> out(gp + 3 * j);
      out = acc;
    }
#pragma omp for schedule(dynamic, 16)
    for (int c = 0; c < p.num_cameras; ++c) {
      Vec9 acc = Vec9::Zero();
      for (int64_t k = p.camera_ptr[c]; k < p.camera_ptr[c + 1]; ++k) {
        const int64_t i = p.camera_obs[k];
        acc.noalias() += Eigen::Map<const MJc>(&jc_[18 * i]).transpose() * Eigen::Map<const Vec2>(y + 2 * i);
      }
      Eigen::Map<Vec9> out(gc + 9 * c);
      out = acc;
    }
  }
}

template <typename T>
void BlockOperators<T>::HessianTimes(const T* xc, const T* xp, T* yc, T* yp) {
  TP_TYPES;
  const BAProblem& p = p_;
#pragma omp parallel num_threads(threads_)
  {
    // Per point: e_o = Jc xc + Jp xp and y_p = D xp + sum Jp^T e_o (one pass over J_p).
#pragma omp for schedule(static)
    for (int j = 0; j < p.num_points; ++j) {
      const Eigen::Map<const Vec3> xj(xp + 3 * j);
      Vec3 acc = Eigen::Map<const Vec3>(&dp_[3 * j]).cwiseProduct(xj);
      for (int64_t i = p.point_ptr[j]; i < p.point_ptr[j + 1]; ++i) {
        const Eigen::Map<const MJp> Jp(&jp_[6 * i]);
        const Vec2 eo = Eigen::Map<const MJc>(&jc_[18 * i]) * Eigen::Map<const Vec9>(xc + 9 * p.obs_camera[i]) +
                        Jp * xj;
        Eigen::Map<Vec2> e(const_cast<T*>(&e_[2 * i]));
        e = eo;
        acc.noalias() += Jp.transpose() * eo;
      }
      Eigen::Map<Vec3> out(yp + 3 * j);
      out = acc;
    }
#pragma omp for schedule(dynamic, 16)
    for (int c = 0; c < p.num_cameras; ++c) {
      Vec9 acc = Eigen::Map<const Vec9>(&dc_[9 * c]).cwiseProduct(Eigen::Map<const Vec9>(xc + 9 * c));
      for (int64_t k = p.camera_ptr[c]; k < p.camera_ptr[c + 1]; ++k) {
        const int64_t i = p.camera_obs[k];
        acc.noalias() += Eigen::Map<const MJc>(&jc_[18 * i]).transpose() * Eigen::Map<const Vec2>(&e_[2 * i]);
      }
      Eigen::Map<Vec9> out(yc + 9 * c);
      out = acc;
    }
  }
}

template <typename T>
void BlockOperators<T>::SchurTimes(const T* x, T* y) {
  TP_TYPES;
  const BAProblem& p = p_;
#pragma omp parallel num_threads(threads_)
  {
    // Per point: y_o = Jc x_c, z = V^-1 sum Jp^T y_o, e_o = y_o - Jp z.
#pragma omp for schedule(static)
    for (int j = 0; j < p.num_points; ++j) {
      Vec3 acc = Vec3::Zero();
      for (int64_t i = p.point_ptr[j]; i < p.point_ptr[j + 1]; ++i) {
        const Vec2 yo = Eigen::Map<const MJc>(&jc_[18 * i]) * Eigen::Map<const Vec9>(x + 9 * p.obs_camera[i]);
        Eigen::Map<Vec2> e(&e_[2 * i]);
        e = yo;
        acc.noalias() += Eigen::Map<const MJp>(&jp_[6 * i]).transpose() * yo;
      }
      const Vec3 z = Eigen::Map<const Mat3>(&pt_precond_[9 * j]) * acc;
      for (int64_t i = p.point_ptr[j]; i < p.point_ptr[j + 1]; ++i) {
        Eigen::Map<Vec2> e(&e_[2 * i]);
        e.noalias() -= Eigen::Map<const MJp>(&jp_[6 * i]) * z;
      }
    }
    // Per camera: (S x)_c = D_c x_c + sum Jc^T e_o  (= U x - W V^-1 W^T x).
#pragma omp for schedule(dynamic, 16)
    for (int c = 0; c < p.num_cameras; ++c) {
      Vec9 acc = Eigen::Map<const Vec9>(&dc_[9 * c]).cwiseProduct(Eigen::Map<const Vec9>(x + 9 * c));
      for (int64_t k = p.camera_ptr[c]; k < p.camera_ptr[c + 1]; ++k) {
        const int64_t i = p.camera_obs[k];
        acc.noalias() += Eigen::Map<const MJc>(&jc_[18 * i]).transpose() * Eigen::Map<const Vec2>(&e_[2 * i]);
      }
      Eigen::Map<Vec9> out(y + 9 * c);
      out = acc;
    }
  }
}

template <typename T>
void BlockOperators<T>::CameraPrecondition(const T* in, T* out) const {
  TP_TYPES;
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (int c = 0; c < p_.num_cameras; ++c) {
    Eigen::Map<Vec9> o(out + 9 * c);
    o = Eigen::Map<const Mat9>(&cam_precond_[81 * c]) * Eigen::Map<const Vec9>(in + 9 * c);
  }
}

template <typename T>
void BlockOperators<T>::PointPrecondition(const T* in, T* out) const {
  TP_TYPES;
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (int j = 0; j < p_.num_points; ++j) {
    Eigen::Map<Vec3> o(out + 3 * j);
    o = Eigen::Map<const Mat3>(&pt_precond_[9 * j]) * Eigen::Map<const Vec3>(in + 3 * j);
  }
}

template <typename T>
void BlockOperators<T>::ReducedRhs(const T* bc, const T* bp, T* out) {
  TP_TYPES;
  const BAProblem& p = p_;
#pragma omp parallel num_threads(threads_)
  {
#pragma omp for schedule(static)
    for (int j = 0; j < p.num_points; ++j) {
      const Vec3 t = Eigen::Map<const Mat3>(&pt_precond_[9 * j]) * Eigen::Map<const Vec3>(bp + 3 * j);
      for (int64_t i = p.point_ptr[j]; i < p.point_ptr[j + 1]; ++i) {
        Eigen::Map<Vec2> e(&e_[2 * i]);
        e = Eigen::Map<const MJp>(&jp_[6 * i]) * t;
      }
    }
#pragma omp for schedule(dynamic, 16)
    for (int c = 0; c < p.num_cameras; ++c) {
      Vec9 acc = Eigen::Map<const Vec9>(bc + 9 * c);
      for (int64_t k = p.camera_ptr[c]; k < p.camera_ptr[c + 1]; ++k) {
        const int64_t i = p.camera_obs[k];
        acc.noalias() -= Eigen::Map<const MJc>(&jc_[18 * i]).transpose() * Eigen::Map<const Vec2>(&e_[2 * i]);
      }
      Eigen::Map<Vec9> o(out + 9 * c);
      o = acc;
    }
  }
}

template <typename T>
void BlockOperators<T>::BackSubstitute(const T* bp, const T* xc, T* xp) const {
  TP_TYPES;
  const BAProblem& p = p_;
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (int j = 0; j < p.num_points; ++j) {
    Vec3 r = Eigen::Map<const Vec3>(bp + 3 * j);
    for (int64_t i = p.point_ptr[j]; i < p.point_ptr[j + 1]; ++i) {
      const Vec2 y = Eigen::Map<const MJc>(&jc_[18 * i]) * Eigen::Map<const Vec9>(xc + 9 * p.obs_camera[i]);
      r.noalias() -= Eigen::Map<const MJp>(&jp_[6 * i]).transpose() * y;
    }
    Eigen::Map<Vec3> o(xp + 3 * j);
    o = Eigen::Map<const Mat3>(&pt_precond_[9 * j]) * r;
  }
}

template class BlockOperators<float>;
template class BlockOperators<double>;

}  // namespace tiepoint
