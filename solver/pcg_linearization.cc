#include "solver/pcg_linearization.h"

#include <omp.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include <cstdlib>
#include <new>

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>

#include "io/base/large_alloc.h"
#include "solver/camera_model.h"
#include "solver/parallel.h"

namespace tiepoint {

void* AllocateBlocks(size_t bytes) { return AllocateLarge(bytes); }

void FreeBlocks(void* p) noexcept { std::free(p); }

namespace {

template <typename T>
struct Types {
  using Mat9 = Eigen::Matrix<T, 9, 9, Eigen::RowMajor>;
  using MJc = Eigen::Matrix<T, 2, 9, Eigen::RowMajor>;
  using MJp = Eigen::Matrix<T, 2, 3, Eigen::RowMajor>;
  using Vec9 = Eigen::Matrix<T, 9, 1>;
  using Vec3 = Eigen::Matrix<T, 3, 1>;
  using Vec2 = Eigen::Matrix<T, 2, 1>;
};

// Ceres's LM diagonal bounds (as solver/lm_state.cc).
constexpr double kMinDiagonal = 1e-6;
constexpr double kMaxDiagonal = 1e32;

// Packed symmetric 3x3: 00 01 02 11 12 22.
template <typename A, typename B>
inline void SymTimes(const A* m, const B* x, double* y) {
  y[0] = m[0] * x[0] + m[1] * x[1] + m[2] * x[2];
  y[1] = m[1] * x[0] + m[3] * x[1] + m[4] * x[2];
  y[2] = m[2] * x[0] + m[4] * x[1] + m[5] * x[2];
}

// Inverse of a packed symmetric 3x3 by cofactors, in double; zero if singular.
inline void SymInverse(const double* m, double* inv) {
  const double c00 = m[3] * m[5] - m[4] * m[4];
  const double c01 = m[2] * m[4] - m[1] * m[5];
  const double c02 = m[1] * m[4] - m[2] * m[3];
  const double det = m[0] * c00 + m[1] * c01 + m[2] * c02;
  if (!(det > 0.0) || !std::isfinite(det)) {
    // Not positive definite (cannot happen with damping > 0 unless values overflowed):
    // fall back to the inverse diagonal, which keeps CG's products finite.
    inv[0] = m[0] > 0 ? 1.0 / m[0] : 0.0;
    inv[3] = m[3] > 0 ? 1.0 / m[3] : 0.0;
    inv[5] = m[5] > 0 ? 1.0 / m[5] : 0.0;
    inv[1] = inv[2] = inv[4] = 0.0;
    return;
  }
  const double k = 1.0 / det;
  inv[0] = c00 * k;
  inv[1] = c01 * k;
  inv[2] = c02 * k;
  inv[3] = (m[0] * m[5] - m[2] * m[2]) * k;
  inv[4] = (m[1] * m[2] - m[0] * m[4]) * k;
  inv[5] = (m[0] * m[3] - m[1] * m[1]) * k;
}

// Inverts a symmetric positive definite 9x9 (row-major) in place by Gauss-Jordan
// elimination without pivoting: for an SPD matrix every pivot is a diagonal entry of a
// Schur complement, positive, and elimination without pivoting is stable. Returns false,
// with `a` clobbered, if a pivot is not positive and finite. A damped camera block always
// is SPD in exact arithmetic; the caller falls back to a pivoted LDLT for blocks that
// rounding makes indefinite. Fixed-length row operations that vectorise, no scratch: about
// 0.2 us, against 0.5 us for Eigen's LDLT of a 9x9, which goes through its blocked
// dynamic-size triangular solves and matrix-vector kernels (also the largest stretch of
// cold code in a small problem's first step).
inline bool SpdInverse9InPlace(double* a) {
  for (int k = 0; k < 9; ++k) {
    const double pivot = a[9 * k + k];
    if (!(pivot > 0.0) || !std::isfinite(pivot)) return false;
    const double p = 1.0 / pivot;
    double* rk = a + 9 * k;
    rk[k] = 1.0;
    for (int j = 0; j < 9; ++j) rk[j] *= p;
    for (int i = 0; i < 9; ++i) {
      if (i == k) continue;
      double* ri = a + 9 * i;
      const double f = ri[k];
      ri[k] = 0.0;
      for (int j = 0; j < 9; ++j) ri[j] -= f * rk[j];
    }
  }
  return true;
}

// v += J^T J for a 2x3 row-major block J, packed.
template <typename A>
inline void AddGram(const A* J, double* v) {
  for (int r = 0; r < 2; ++r) {
    const double a = J[3 * r], b = J[3 * r + 1], c = J[3 * r + 2];
    v[0] += a * a;
    v[1] += a * b;
    v[2] += a * c;
    v[3] += b * b;
    v[4] += b * c;
    v[5] += c * c;
  }
}

// u += J^T J for a 2x9 row-major camera block J, all 81 entries, 4-wide where AVX2 is
// on (GCC left the triangular loop it replaces scalar).
inline void AddCameraGram(const double* __restrict J, double* __restrict u) {
#if defined(__AVX2__) && defined(__FMA__)
  const __m256d a0 = _mm256_loadu_pd(J), a1 = _mm256_loadu_pd(J + 4);
  const __m256d b0 = _mm256_loadu_pd(J + 9), b1 = _mm256_loadu_pd(J + 13);
  for (int a = 0; a < 9; ++a) {
    const __m256d x0 = _mm256_set1_pd(J[a]), x1 = _mm256_set1_pd(J[9 + a]);
    double* row = u + 9 * a;
    _mm256_storeu_pd(row, _mm256_fmadd_pd(x1, b0, _mm256_fmadd_pd(x0, a0, _mm256_loadu_pd(row))));
    _mm256_storeu_pd(row + 4,
                     _mm256_fmadd_pd(x1, b1, _mm256_fmadd_pd(x0, a1, _mm256_loadu_pd(row + 4))));
    row[8] += J[a] * J[8] + J[9 + a] * J[17];
  }
#else
  for (int a = 0; a < 9; ++a) {
    const double x0 = J[a], x1 = J[9 + a];
    for (int b = 0; b < 9; ++b) u[9 * a + b] += x0 * J[b] + x1 * J[9 + b];
  }
#endif
}

double ScaleOf(double d) { return d > 0.0 && std::isfinite(d) ? 1.0 / std::sqrt(d) : 1.0; }

}  // namespace

// Each member function uses a subset of these aliases.
#pragma GCC diagnostic ignored "-Wunused-local-typedefs"
#define TP_TYPES                        \
  using Mat9 = typename Types<T>::Mat9; \
  using MJc = typename Types<T>::MJc;   \
  using MJp = typename Types<T>::MJp;   \
  using Vec9 = typename Types<T>::Vec9; \
  using Vec3 = typename Types<T>::Vec3; \
  using Vec2 = typename Types<T>::Vec2

template <typename T>
PcgLinearization<T>::PcgLinearization(const BAProblem& problem, const LossFunction& loss,
                                      int num_threads, bool recompute, bool schur_only)
    : p_(problem),
      loss_(loss),
      threads_(ThreadsForObservations(num_threads, problem.num_observations)),
      recompute_(recompute),
      keep_point_damping_(recompute || !schur_only) {
  const size_t n = static_cast<size_t>(p_.num_observations);
  const size_t nc = static_cast<size_t>(p_.num_cameras), np = static_cast<size_t>(p_.num_points);
  if (!recompute_) {
    jc_.resize(18 * n);
    jp_.resize(6 * n);
  }
  cam_scale_.assign(9 * nc, 1.0);
  pt_scale_.assign(3 * np, T(1));
  gc_.resize(9 * nc);
  diag_c_.resize(9 * nc);
  gp_.resize(3 * np);
  u0_.resize(81 * nc);
  dc_.resize(9 * nc);
  if (keep_point_damping_) dp_.resize(3 * np);
  cam_precond_.resize(81 * nc);
  pt_block_.resize(6 * np);
  cam_acc_.resize(static_cast<size_t>(threads_) * 18 * nc);  // widest use: 18 per camera
}

template <typename T>
void PcgLinearization<T>::MakeFrames(const double* cameras,
                                     std::vector<BalCameraFrame>* out) const {
  out->resize(p_.num_cameras);
  for (int c = 0; c < p_.num_cameras; ++c) MakeBalCameraFrame(cameras + 9 * c, &(*out)[c]);
}

template <typename T>
double PcgLinearization<T>::EvaluateObservation(const BalCameraFrame* frames,
                                                const double* points, int64_t i, double* r,
                                                double* jc, double* jp) const {
  const int c = p_.obs_camera[i];
  BalResidualAndJacobian(frames[c], points + 3 * p_.obs_point[i], &p_.obs_xy[2 * i], r, jc, jp);
  double rho, drho;
  loss_.Evaluate(r[0] * r[0] + r[1] * r[1], &rho, &drho);
  if (loss_.type != LossType::kNone) {
    const double w = std::sqrt(drho);
    r[0] *= w;
    r[1] *= w;
    if (jc) {
      for (int k = 0; k < 18; ++k) jc[k] *= w;
      for (int k = 0; k < 6; ++k) jp[k] *= w;
    }
  }
  if (jc && p_.has_fixed_parameters) {
    const uint8_t* f = &p_.camera_param_fixed[9 * c];
    for (int k = 0; k < 9; ++k) {
      if (f[k]) jc[k] = jc[9 + k] = 0.0;
    }
  }
  return rho;
}

template <typename T>
double* PcgLinearization<T>::ThreadAccumulator(int thread, int width) {
  const size_t per = static_cast<size_t>(width) * p_.num_cameras;
  double* a = &cam_acc_[static_cast<size_t>(thread) * per];
  std::fill(a, a + per, 0.0);
  return a;
}

template <typename T>
double PcgLinearization<T>::ThreadSum(int width, int c, int k) const {
  const size_t nc = static_cast<size_t>(p_.num_cameras);
  double v = 0.0;
  for (int t = 0; t < threads_; ++t) v += cam_acc_[(static_cast<size_t>(t) * nc + c) * width + k];
  return v;
}

template <typename T>
double PcgLinearization<T>::Cost(const double* cameras, const double* points) {
  MakeFrames(cameras, &eval_frames_);
  const BalCameraFrame* frames = eval_frames_.data();
  double cost = 0.0;
  ParallelRegion(threads_, [&] {
#pragma omp for schedule(static) reduction(+ : cost)
    for (int64_t i = 0; i < p_.num_observations; ++i) {
      double r[2];
      cost += 0.5 * EvaluateObservation(frames, points, i, r, nullptr, nullptr);
    }
  });
  return std::isfinite(cost) ? cost : std::numeric_limits<double>::infinity();
}

template <typename T>
double PcgLinearization<T>::StepCost(const T* dxc, const T* dxp) {
  const int nc = p_.num_cameras;
  trial_c_.resize(9LL * nc);
  for (int64_t k = 0; k < 9LL * nc; ++k) trial_c_[k] = cameras_[k] + static_cast<double>(dxc[k]) * cam_scale_[k];
  MakeFrames(trial_c_.data(), &eval_frames_);
  const BalCameraFrame* frames = eval_frames_.data();
  double cost = 0.0;
  ParallelRegion(threads_, [&] {
#pragma omp for schedule(static) reduction(+ : cost)
    for (int j = 0; j < p_.num_points; ++j) {
      // The trial point, placed where EvaluateObservation looks for point j.
      double x[3];
      for (int a = 0; a < 3; ++a) x[a] = points_[3 * j + a] + static_cast<double>(dxp[3 * j + a]) * pt_scale_[3 * j + a];
      const double* base = x - 3LL * j;
      for (int64_t i = p_.point_ptr[j]; i < p_.point_ptr[j + 1]; ++i) {
        double r[2];
        cost += 0.5 * EvaluateObservation(frames, base, i, r, nullptr, nullptr);
      }
    }
  });
  return std::isfinite(cost) ? cost : std::numeric_limits<double>::infinity();
}

template <typename T>
double PcgLinearization<T>::Linearize(const double* cameras, const double* points) {
  const int nc = p_.num_cameras, np = p_.num_points;
  cameras_ = cameras;
  points_ = points;
  MakeFrames(cameras, &frames_);
  const BalCameraFrame* frames = frames_.data();
  const bool first = !scaled_;
  const bool store = !recompute_;
  std::vector<double> u_acc(static_cast<size_t>(threads_) * 81 * nc);
  double cost = 0.0;
  // One evaluation pass: cost, gradient, diag(J^T J), J^T J blocks of cameras (per thread)
  // and points, and the stored blocks. A point's scale is known at the end of its own
  // loop; camera scales only after the pass, so the first call rescales camera blocks then.
  ParallelRegion(threads_, [&] {
    const int t = omp_get_thread_num();
    double* gd = ThreadAccumulator(t, 18);  // 9 gradient, 9 diagonal per camera
    double* u = &u_acc[static_cast<size_t>(t) * 81 * nc];
#pragma omp for schedule(static) reduction(+ : cost)
    for (int j = 0; j < np; ++j) {
      double g[3] = {0, 0, 0}, v[6] = {0, 0, 0, 0, 0, 0};
      for (int64_t i = p_.point_ptr[j]; i < p_.point_ptr[j + 1]; ++i) {
        double r[2], jc[18], jp[6];
        cost += 0.5 * EvaluateObservation(frames, points, i, r, jc, jp);
        const int c = p_.obs_camera[i];
        for (int a = 0; a < 3; ++a) g[a] += jp[a] * r[0] + jp[3 + a] * r[1];
        AddGram(jp, v);
        double* gcc = gd + 18 * c;
        double* uc = u + 81 * c;
        for (int a = 0; a < 9; ++a) {
          gcc[a] += jc[a] * r[0] + jc[9 + a] * r[1];
          gcc[9 + a] += jc[a] * jc[a] + jc[9 + a] * jc[9 + a];
        }
        AddCameraGram(jc, uc);
        if (store) {
          const double* cs = &cam_scale_[9 * c];
          for (int row = 0; row < 2; ++row) {
            for (int a = 0; a < 9; ++a) jc_[18 * i + 9 * row + a] = static_cast<T>(jc[9 * row + a] * cs[a]);
            for (int a = 0; a < 3; ++a) jp_[6 * i + 3 * row + a] = static_cast<T>(jp[3 * row + a]);
          }
        }
      }
      T* ps = &pt_scale_[3 * j];
      if (first) {
        ps[0] = static_cast<T>(ScaleOf(v[0]));
        ps[1] = static_cast<T>(ScaleOf(v[3]));
        ps[2] = static_cast<T>(ScaleOf(v[5]));
      }
      const double s[3] = {ps[0], ps[1], ps[2]};
      for (int a = 0; a < 3; ++a) gp_[3 * j + a] = static_cast<T>(g[a] * s[a]);
      if (store) {
        for (int64_t i = p_.point_ptr[j]; i < p_.point_ptr[j + 1]; ++i) {
          for (int k = 0; k < 6; ++k) jp_[6 * i + k] = static_cast<T>(jp_[6 * i + k] * s[k % 3]);
        }
      } else {
        T* b = &pt_block_[6 * j];
        b[0] = static_cast<T>(v[0] * s[0] * s[0]);
        b[1] = static_cast<T>(v[1] * s[0] * s[1]);
        b[2] = static_cast<T>(v[2] * s[0] * s[2]);
        b[3] = static_cast<T>(v[3] * s[1] * s[1]);
        b[4] = static_cast<T>(v[4] * s[1] * s[2]);
        b[5] = static_cast<T>(v[5] * s[2] * s[2]);
      }
    }
    // (implicit barrier) Sum the per-thread camera sums.
#pragma omp for schedule(static)
    for (int c = 0; c < nc; ++c) {
      for (int a = 0; a < 9; ++a) {
        gc_[9 * c + a] = ThreadSum(18, c, a);
        diag_c_[9 * c + a] = ThreadSum(18, c, 9 + a);
      }
      for (int a = 0; a < 9; ++a) {
        for (int b = a; b < 9; ++b) {
          double us = 0.0;
          for (int th = 0; th < threads_; ++th) us += u_acc[(static_cast<size_t>(th) * nc + c) * 81 + 9 * a + b];
          u0_[81 * c + 9 * a + b] = us;
        }
      }
    }
  });
  if (first) {
    for (size_t k = 0; k < cam_scale_.size(); ++k) cam_scale_[k] = ScaleOf(diag_c_[k]);
    scaled_ = true;
    if (store) {
      ParallelRegion(threads_, [&] {
#pragma omp for schedule(static)
        for (int64_t i = 0; i < p_.num_observations; ++i) {
          const double* cs = &cam_scale_[9 * p_.obs_camera[i]];
          for (int k = 0; k < 18; ++k) jc_[18 * i + k] = static_cast<T>(jc_[18 * i + k] * cs[k % 9]);
        }
      });
    }
  }
  // U' = S U S, symmetric.
  for (int c = 0; c < nc; ++c) {
    double* uc = &u0_[81 * c];
    const double* cs = &cam_scale_[9 * c];
    for (int a = 0; a < 9; ++a) {
      for (int b = a; b < 9; ++b) {
        uc[9 * a + b] *= cs[a] * cs[b];
        uc[9 * b + a] = uc[9 * a + b];
      }
    }
  }
  return std::isfinite(cost) ? cost : std::numeric_limits<double>::infinity();
}

template <typename T>
void PcgLinearization<T>::Gradient(double* g_cameras, double* g_points) {
  std::copy(gc_.begin(), gc_.end(), g_cameras);
  for (size_t k = 0; k < gp_.size(); ++k) g_points[k] = static_cast<double>(gp_[k]) / pt_scale_[k];
}

template <typename T>
void PcgLinearization<T>::PointGram(int j, double v[6]) const {
  if (recompute_) {
    for (int k = 0; k < 6; ++k) v[k] = pt_block_[6 * j + k];
    return;
  }
  for (int k = 0; k < 6; ++k) v[k] = 0.0;
  for (int64_t i = p_.point_ptr[j]; i < p_.point_ptr[j + 1]; ++i) AddGram(&jp_[6 * i], v);
}

template <typename T>
void PcgLinearization<T>::JtJDiagonal(double* d_cameras, double* d_points) {
  std::copy(diag_c_.begin(), diag_c_.end(), d_cameras);
  ParallelRegion(threads_, [&] {
#pragma omp for schedule(static)
    for (int j = 0; j < p_.num_points; ++j) {
      double v[6];
      PointGram(j, v);
      const T* s = &pt_scale_[3 * j];
      d_points[3 * j] = v[0] / (static_cast<double>(s[0]) * s[0]);
      d_points[3 * j + 1] = v[3] / (static_cast<double>(s[1]) * s[1]);
      d_points[3 * j + 2] = v[5] / (static_cast<double>(s[2]) * s[2]);
    }
  });
}

template <typename T>
void PcgLinearization<T>::PointBlocks(int j, std::vector<T>* buf, const T** jc,
                                      const T** jp) const {
  const int64_t begin = p_.point_ptr[j], end = p_.point_ptr[j + 1];
  if (!recompute_) {
    *jc = &jc_[18 * begin];
    *jp = &jp_[6 * begin];
    return;
  }
  const int64_t m = end - begin;
  if (static_cast<int64_t>(buf->size()) < 24 * m) buf->resize(24 * m);
  T* bc = buf->data();
  T* bp = bc + 18 * m;
  const T* ps = &pt_scale_[3 * j];
  for (int64_t i = begin; i < end; ++i) {
    double r[2], Jc[18], Jp[6];
    EvaluateObservation(frames_.data(), points_, i, r, Jc, Jp);
    const double* cs = &cam_scale_[9 * p_.obs_camera[i]];
    T* oc = bc + 18 * (i - begin);
    T* op = bp + 6 * (i - begin);
    for (int k = 0; k < 18; ++k) oc[k] = static_cast<T>(Jc[k] * cs[k % 9]);
    for (int k = 0; k < 6; ++k) op[k] = static_cast<T>(Jp[k] * ps[k % 3]);
  }
  *jc = bc;
  *jp = bp;
}

// sum over observations of |J' u|^2 with u = x (scaled space) or u = x / s (`unscale`: J x
// for an unscaled x), accumulated in double.
template <typename T>
template <typename X>
double PcgLinearization<T>::NormSquared(const X* xc, const X* xp, bool unscale) {
  double s = 0.0;
  ParallelRegion(threads_, [&] {
    std::vector<T> buf;
#pragma omp for schedule(static) reduction(+ : s)
    for (int j = 0; j < p_.num_points; ++j) {
      const T *jc, *jp;
      PointBlocks(j, &buf, &jc, &jp);
      double y[3];
      for (int a = 0; a < 3; ++a) {
        y[a] = static_cast<double>(xp[3 * j + a]);
        if (unscale) y[a] /= pt_scale_[3 * j + a];
      }
      for (int64_t i = p_.point_ptr[j], o = 0; i < p_.point_ptr[j + 1]; ++i, ++o) {
        const int c = p_.obs_camera[i];
        double x[9];
        for (int k = 0; k < 9; ++k) {
          x[k] = static_cast<double>(xc[9 * c + k]);
          if (unscale) x[k] /= cam_scale_[9 * c + k];
        }
        for (int row = 0; row < 2; ++row) {
          double v = 0.0;
          const T* a = jc + 18 * o + 9 * row;
          const T* b = jp + 6 * o + 3 * row;
          for (int k = 0; k < 9; ++k) v += static_cast<double>(a[k]) * x[k];
          for (int k = 0; k < 3; ++k) v += static_cast<double>(b[k]) * y[k];
          s += v * v;
        }
      }
    }
  });
  return s;
}

template <typename T>
double PcgLinearization<T>::ScaledJacobianNormSquared(const T* xc, const T* xp) {
  return NormSquared(xc, xp, /*unscale=*/false);
}

template <typename T>
double PcgLinearization<T>::JacobianNormSquared(const double* xc, const double* xp) {
  return NormSquared(xc, xp, /*unscale=*/true);  // J x = J' (x / s)
}

template <typename T>
void PcgLinearization<T>::Damp(const double* d_cameras, const double* d_points, double radius) {
  using Mat9d = Eigen::Matrix<double, 9, 9, Eigen::RowMajor>;
  TP_TYPES;
  // Block inverses in double (the 9x9 camera blocks may be ill-conditioned), stored in T.
  ParallelRegion(threads_, [&] {
#pragma omp for schedule(static)
    for (int c = 0; c < p_.num_cameras; ++c) {
      double U[81], dd[9];
      std::copy(&u0_[81 * c], &u0_[81 * c] + 81, U);
      for (int a = 0; a < 9; ++a) {
        const int k = 9 * c + a;
        const double s = cam_scale_[k];
        double d;
        if (d_cameras) {
          d = d_cameras[k];
        } else {
          d = p_.camera_param_fixed[k] ? 1.0 : std::clamp(diag_c_[k], kMinDiagonal, kMaxDiagonal) / radius;
        }
        d *= s * s;
        dc_[k] = static_cast<T>(d);
        dd[a] = d;
        U[9 * a + a] += d;
      }
      T* out = &cam_precond_[81 * c];
      if (SpdInverse9InPlace(U)) {
        for (int k = 0; k < 81; ++k) out[k] = static_cast<T>(U[k]);
      } else {
        Mat9d damped = Eigen::Map<const Mat9d>(&u0_[81 * c]);
        for (int a = 0; a < 9; ++a) damped(a, a) += dd[a];
        Eigen::Map<Mat9> block(out);
        block = damped.ldlt().solve(Mat9d::Identity()).template cast<T>();
      }
    }
#pragma omp for schedule(static)
    for (int j = 0; j < p_.num_points; ++j) {
      double v[6];
      PointGram(j, v);
      const int diag[3] = {0, 3, 5};
      for (int a = 0; a < 3; ++a) {
        const double s = pt_scale_[3 * j + a];
        double d;
        if (d_points) {
          d = d_points[3 * j + a] * s * s;
        } else {
          // diag(J^T J) = V'_aa / s^2.
          d = s * s * std::clamp(v[diag[a]] / (s * s), kMinDiagonal, kMaxDiagonal) / radius;
        }
        if (keep_point_damping_) dp_[3 * j + a] = static_cast<T>(d);
        v[diag[a]] += d;
      }
      if (!recompute_) {
        double inv[6];
        SymInverse(v, inv);
        for (int k = 0; k < 6; ++k) pt_block_[6 * j + k] = static_cast<T>(inv[k]);
      }
    }
  });
}

template <typename T>
void PcgLinearization<T>::PrepareDamping(const double* d_cameras, const double* d_points) {
  Damp(d_cameras, d_points, 1.0);
}

template <typename T>
void PcgLinearization<T>::PrepareLmDamping(double radius) {
  Damp(nullptr, nullptr, radius);
}

template <typename T>
void PcgLinearization<T>::PointInverse(int j, T inv[6]) const {
  if (!recompute_) {
    for (int k = 0; k < 6; ++k) inv[k] = pt_block_[6 * j + k];
    return;
  }
  double v[6], w[6];
  for (int k = 0; k < 6; ++k) v[k] = pt_block_[6 * j + k];
  v[0] += dp_[3 * j];
  v[3] += dp_[3 * j + 1];
  v[5] += dp_[3 * j + 2];
  SymInverse(v, w);
  for (int k = 0; k < 6; ++k) inv[k] = static_cast<T>(w[k]);
}

template <typename T>
void PcgLinearization<T>::JTimes(const T* xc, const T* xp, T* y) const {
  TP_TYPES;
  ParallelRegion(threads_, [&] {
    std::vector<T> buf;
#pragma omp for schedule(static)
    for (int j = 0; j < p_.num_points; ++j) {
      const T *jc, *jp;
      PointBlocks(j, &buf, &jc, &jp);
      const Eigen::Map<const Vec3> xj(xp + 3 * j);
      for (int64_t i = p_.point_ptr[j], o = 0; i < p_.point_ptr[j + 1]; ++i, ++o) {
        Eigen::Map<Vec2> out(y + 2 * i);
        out = Eigen::Map<const MJc>(jc + 18 * o) * Eigen::Map<const Vec9>(xc + 9 * p_.obs_camera[i]) +
              Eigen::Map<const MJp>(jp + 6 * o) * xj;
      }
    }
  });
}

template <typename T>
void PcgLinearization<T>::JtTimes(const T* y, T* gc, T* gp) {
  TP_TYPES;
  using Vec9d = Eigen::Matrix<double, 9, 1>;
  const int nc = p_.num_cameras;
  ParallelRegion(threads_, [&] {
    double* acc_c = ThreadAccumulator(omp_get_thread_num(), 9);
    std::vector<T> buf;
#pragma omp for schedule(static)
    for (int j = 0; j < p_.num_points; ++j) {
      const T *jc, *jp;
      PointBlocks(j, &buf, &jc, &jp);
      Vec3 acc = Vec3::Zero();
      for (int64_t i = p_.point_ptr[j], o = 0; i < p_.point_ptr[j + 1]; ++i, ++o) {
        const Eigen::Map<const Vec2> yi(y + 2 * i);
        acc.noalias() += Eigen::Map<const MJp>(jp + 6 * o).transpose() * yi;
        Eigen::Map<Vec9d> out(acc_c + 9 * p_.obs_camera[i]);
        out += (Eigen::Map<const MJc>(jc + 18 * o).transpose() * yi).template cast<double>();
      }
      Eigen::Map<Vec3> out(gp + 3 * j);
      out = acc;
    }
#pragma omp for schedule(static)
    for (int c = 0; c < nc; ++c) {
      for (int a = 0; a < 9; ++a) {
        gc[9 * c + a] = static_cast<T>(ThreadSum(9, c, a));
      }
    }
  });
}

template <typename T>
void PcgLinearization<T>::HessianTimes(const T* xc, const T* xp, T* yc, T* yp) {
  TP_TYPES;
  using Vec9d = Eigen::Matrix<double, 9, 1>;
  const int nc = p_.num_cameras;
  ParallelRegion(threads_, [&] {
    double* acc_c = ThreadAccumulator(omp_get_thread_num(), 9);
    std::vector<T> buf;
    // Per point: e_o = J'_c xc + J'_p xp, y_p = D' xp + sum J'_p^T e_o, and J'_c^T e_o
    // into this thread's camera accumulator.
#pragma omp for schedule(static)
    for (int j = 0; j < p_.num_points; ++j) {
      const T *jc, *jp;
      PointBlocks(j, &buf, &jc, &jp);
      const Eigen::Map<const Vec3> xj(xp + 3 * j);
      Vec3 acc = Eigen::Map<const Vec3>(&dp_[3 * j]).cwiseProduct(xj);
      for (int64_t i = p_.point_ptr[j], o = 0; i < p_.point_ptr[j + 1]; ++i, ++o) {
        const int c = p_.obs_camera[i];
        const Eigen::Map<const MJp> Jp(jp + 6 * o);
        const Eigen::Map<const MJc> Jc(jc + 18 * o);
        const Vec2 eo = Jc * Eigen::Map<const Vec9>(xc + 9 * c) + Jp * xj;
        acc.noalias() += Jp.transpose() * eo;
        Eigen::Map<Vec9d> out(acc_c + 9 * c);
        out += (Jc.transpose() * eo).template cast<double>();
      }
      Eigen::Map<Vec3> out(yp + 3 * j);
      out = acc;
    }
#pragma omp for schedule(static)
    for (int c = 0; c < nc; ++c) {
      for (int a = 0; a < 9; ++a) {
        yc[9 * c + a] = static_cast<T>(static_cast<double>(dc_[9 * c + a]) * xc[9 * c + a] + ThreadSum(9, c, a));
      }
    }
  });
}

template <typename T>
void PcgLinearization<T>::SchurTimes(const T* x, T* y) {
  TP_TYPES;
  using Vec9d = Eigen::Matrix<double, 9, 1>;
  const int nc = p_.num_cameras;
  // One streaming pass over the point-major blocks: per point, y_o = J'_c x_c,
  // z = V^-1 sum J'_p^T y_o, then e_o = y_o - J'_p z and J'_c^T e_o go into this
  // thread's camera accumulator (the point's blocks are still in cache for the second
  // loop; recomputed blocks are evaluated once per point). The per-thread accumulators
  // are summed per camera afterwards.
  ParallelRegion(threads_, [&] {
    double* acc_c = ThreadAccumulator(omp_get_thread_num(), 9);
    std::vector<T> buf, ys;
#pragma omp for schedule(static)
    for (int j = 0; j < p_.num_points; ++j) {
      const int64_t begin = p_.point_ptr[j], m = p_.point_ptr[j + 1] - begin;
      const T *jc, *jp;
      PointBlocks(j, &buf, &jc, &jp);
      if (static_cast<int64_t>(ys.size()) < 2 * m) ys.resize(2 * m);
      Vec3 acc = Vec3::Zero();
      for (int64_t o = 0; o < m; ++o) {
        const Vec2 yo = Eigen::Map<const MJc>(jc + 18 * o) * Eigen::Map<const Vec9>(x + 9 * p_.obs_camera[begin + o]);
        Eigen::Map<Vec2> yv(&ys[2 * o]);
        yv = yo;
        acc.noalias() += Eigen::Map<const MJp>(jp + 6 * o).transpose() * yo;
      }
      T inv[6];
      PointInverse(j, inv);
      double zd[3];
      SymTimes(inv, acc.data(), zd);
      const Vec3 z(static_cast<T>(zd[0]), static_cast<T>(zd[1]), static_cast<T>(zd[2]));
      for (int64_t o = 0; o < m; ++o) {
        const Vec2 eo = Eigen::Map<const Vec2>(&ys[2 * o]) - Eigen::Map<const MJp>(jp + 6 * o) * z;
        Eigen::Map<Vec9d> out(acc_c + 9 * p_.obs_camera[begin + o]);
        out += (Eigen::Map<const MJc>(jc + 18 * o).transpose() * eo).template cast<double>();
      }
    }
    // (implicit barrier) (S x)_c = D'_c x_c + sum over threads.
#pragma omp for schedule(static)
    for (int c = 0; c < nc; ++c) {
      for (int a = 0; a < 9; ++a) {
        y[9 * c + a] = static_cast<T>(static_cast<double>(dc_[9 * c + a]) * x[9 * c + a] + ThreadSum(9, c, a));
      }
    }
  });
}

template <typename T>
void PcgLinearization<T>::CameraPrecondition(const T* in, T* out) const {
  TP_TYPES;
  ParallelRegion(p_.num_cameras >= 1024 ? threads_ : 1, [&] {
#pragma omp for schedule(static)
    for (int c = 0; c < p_.num_cameras; ++c) {
      // Plain loops: Eigen sends a mapped 9x9 times a vector to its dynamic-size kernel.
      const T* m = &cam_precond_[81 * c];
      const T* x = in + 9 * c;
      T* o = out + 9 * c;
      for (int a = 0; a < 9; ++a) {
        T v = 0;
        for (int b = 0; b < 9; ++b) v += m[9 * a + b] * x[b];
        o[a] = v;
      }
    }
  });
}

template <typename T>
void PcgLinearization<T>::PointPrecondition(const T* in, T* out) const {
  ParallelRegion(threads_, [&] {
#pragma omp for schedule(static)
    for (int j = 0; j < p_.num_points; ++j) {
      T inv[6];
      PointInverse(j, inv);
      double o[3];
      SymTimes(inv, in + 3 * j, o);
      for (int a = 0; a < 3; ++a) out[3 * j + a] = static_cast<T>(o[a]);
    }
  });
}

template <typename T>
void PcgLinearization<T>::ReducedRhs(const T* bc, const T* bp, T* out, T k) {
  TP_TYPES;
  using Vec9d = Eigen::Matrix<double, 9, 1>;
  const int nc = p_.num_cameras;
  ParallelRegion(threads_, [&] {
    double* acc_c = ThreadAccumulator(omp_get_thread_num(), 9);
    std::vector<T> buf;
#pragma omp for schedule(static)
    for (int j = 0; j < p_.num_points; ++j) {
      const T *jc, *jp;
      PointBlocks(j, &buf, &jc, &jp);
      T inv[6];
      PointInverse(j, inv);
      const T b[3] = {k * bp[3 * j], k * bp[3 * j + 1], k * bp[3 * j + 2]};
      double td[3];
      SymTimes(inv, b, td);
      const Vec3 t(static_cast<T>(td[0]), static_cast<T>(td[1]), static_cast<T>(td[2]));
      for (int64_t i = p_.point_ptr[j], o = 0; i < p_.point_ptr[j + 1]; ++i, ++o) {
        const Vec2 e = Eigen::Map<const MJp>(jp + 6 * o) * t;
        Eigen::Map<Vec9d> acc(acc_c + 9 * p_.obs_camera[i]);
        acc += (Eigen::Map<const MJc>(jc + 18 * o).transpose() * e).template cast<double>();
      }
    }
#pragma omp for schedule(static)
    for (int c = 0; c < nc; ++c) {
      for (int a = 0; a < 9; ++a) {
        out[9 * c + a] = static_cast<T>(static_cast<double>(bc[9 * c + a]) - ThreadSum(9, c, a));
      }
    }
  });
}

template <typename T>
void PcgLinearization<T>::BackSubstitute(const T* bp, const T* xc, T* xp, T k) const {
  TP_TYPES;
  ParallelRegion(threads_, [&] {
    std::vector<T> buf;
#pragma omp for schedule(static)
    for (int j = 0; j < p_.num_points; ++j) {
      const T *jc, *jp;
      PointBlocks(j, &buf, &jc, &jp);
      Vec3 r = k * Eigen::Map<const Vec3>(bp + 3 * j);
      for (int64_t i = p_.point_ptr[j], o = 0; i < p_.point_ptr[j + 1]; ++i, ++o) {
        const Vec2 y = Eigen::Map<const MJc>(jc + 18 * o) * Eigen::Map<const Vec9>(xc + 9 * p_.obs_camera[i]);
        r.noalias() -= Eigen::Map<const MJp>(jp + 6 * o).transpose() * y;
      }
      T inv[6];
      PointInverse(j, inv);
      double o3[3];
      SymTimes(inv, r.data(), o3);
      for (int a = 0; a < 3; ++a) xp[3 * j + a] = static_cast<T>(o3[a]);
    }
  });
}

template class PcgLinearization<float>;
template class PcgLinearization<double>;

}  // namespace tiepoint
