#include "solver/geometry/fundamental.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>

#include "solver/geometry/cubic.h"
#include "solver/geometry/ransac_utils.h"

namespace tiepoint {
namespace two_view {
namespace {

void EpipolarRow(const Eigen::Vector2d& p, const Eigen::Vector2d& q, double* row) {
  const double x = p.x(), y = p.y(), u = q.x(), v = q.y();
  const double r[9] = {u * x, u * y, u, v * x, v * y, v, x, y, 1};
  for (int k = 0; k < 9; ++k) row[k] = r[k];
}

Eigen::Matrix3d FromRowMajor(const double* f) {
  Eigen::Matrix3d F;
  F << f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8];
  return F;
}

}  // namespace

Eigen::Matrix3d EnforceRankTwo(const Eigen::Matrix3d& M) {
  Eigen::JacobiSVD<Eigen::Matrix3d> svd(M, Eigen::ComputeFullU | Eigen::ComputeFullV);
  Eigen::Vector3d s = svd.singularValues();
  s[2] = 0.0;
  return svd.matrixU() * s.asDiagonal() * svd.matrixV().transpose();
}

int FundamentalFromSevenPoints(const Eigen::Vector2d x1[7], const Eigen::Vector2d x2[7],
                               Eigen::Matrix3d F[3]) {
  double A[7][9], null[2][9];
  for (int i = 0; i < 7; ++i) EpipolarRow(x1[i], x2[i], A[i]);
  if (!NullSpaceGauss<7>(A, null)) return 0;
  const Eigen::Matrix3d F1 = FromRowMajor(null[0]);
  const Eigen::Matrix3d F2 = FromRowMajor(null[1]);
  // det(a F1 + (1 - a) F2) is a cubic in a: recover its coefficients from 4 values.
  auto det = [&](double a) { return (a * F1 + (1.0 - a) * F2).determinant(); };
  double c[4];
  CubicThroughValues(det(0.0), det(1.0), det(-1.0), det(2.0), c);
  double roots[3];
  const int num_roots = SolveCubic(c[3], c[2], c[1], c[0], roots);
  int n = 0;
  for (int i = 0; i < num_roots; ++i) {
    Eigen::Matrix3d M = roots[i] * F1 + (1.0 - roots[i]) * F2;
    const double norm = M.norm();
    if (!(norm > 0.0) || !M.allFinite()) continue;
    F[n++] = M / norm;
  }
  return n;
}

bool FundamentalLeastSquares(const std::vector<Eigen::Vector2d>& x1,
                             const std::vector<Eigen::Vector2d>& x2,
                             const std::vector<int>& indices, Eigen::Matrix3d* F) {
  if (indices.size() < 8) return false;
  Eigen::Matrix<double, 9, 9> AtA = Eigen::Matrix<double, 9, 9>::Zero();
  Eigen::Matrix<double, 9, 1> row;
  for (int i : indices) {
    EpipolarRow(x1[i], x2[i], row.data());
    AtA.noalias() += row * row.transpose();
  }
  Eigen::SelfAdjointEigenSolver<Eigen::Matrix<double, 9, 9>> eig(AtA);
  if (eig.info() != Eigen::Success) return false;
  if (!(eig.eigenvalues()[1] > 1e-12 * eig.eigenvalues()[8])) return false;
  const Eigen::Matrix<double, 9, 1> f = eig.eigenvectors().col(0);
  Eigen::Matrix3d M = EnforceRankTwo(FromRowMajor(f.data()));
  if (!(M.norm() > 0.0)) return false;
  *F = M / M.norm();
  return true;
}

double SampsonSquaredError(const Eigen::Matrix3d& F, const Eigen::Vector2d& x1,
                           const Eigen::Vector2d& x2) {
  const Eigen::Vector3d p = x1.homogeneous(), q = x2.homogeneous();
  const Eigen::Vector3d Fp = F * p, Ftq = F.transpose() * q;
  const double e = q.dot(Fp);
  const double denom = Fp.x() * Fp.x() + Fp.y() * Fp.y() + Ftq.x() * Ftq.x() + Ftq.y() * Ftq.y();
  if (!(denom > 0.0)) return e == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return e * e / denom;
}

Eigen::Matrix3d RefineFundamental(const Eigen::Matrix3d& F, const std::vector<Eigen::Vector2d>& x1,
                                  const std::vector<Eigen::Vector2d>& x2,
                                  const std::vector<int>& indices, double robust_scale_px) {
  if (indices.size() < 8) return F;
  std::vector<Eigen::Vector2d> p1, p2;
  for (int i : indices) {
    p1.push_back(x1[i]);
    p2.push_back(x2[i]);
  }
  const Eigen::Matrix3d T1 = NormalizingTransform(p1), T2 = NormalizingTransform(p2);
  // Pixel F = T2^T Fn T1, so Fn = T2^-T F T1^-1.
  const Eigen::Matrix3d Fn = T2.inverse().transpose() * F * T1.inverse();
  Eigen::JacobiSVD<Eigen::Matrix3d> svd(Fn, Eigen::ComputeFullU | Eigen::ComputeFullV);
  struct Params {
    Eigen::Matrix3d U, V;
    double s;
  };
  Params start{svd.matrixU(), svd.matrixV(), 0.0};
  const Eigen::Vector3d sv = svd.singularValues();
  if (!(sv[0] > 0.0)) return F;
  start.s = sv[1] / sv[0];
  if (start.U.determinant() < 0) start.U = -start.U;
  if (start.V.determinant() < 0) start.V = -start.V;  // F changes sign only: same F up to scale
  auto compose = [&](const Params& p) {
    return Eigen::Matrix3d(T2.transpose() * p.U * Eigen::Vector3d(1.0, p.s, 0.0).asDiagonal() *
                           p.V.transpose() * T1);
  };
  auto plus = [](const Params& p, const Eigen::VectorXd& d) {
    Params q = p;
    q.U = p.U * ExpRotation(d.segment<3>(0));
    q.V = p.V * ExpRotation(d.segment<3>(3));
    q.s = p.s + d[6];
    return q;
  };
  auto residuals = [&](const Params& p, Eigen::VectorXd* r) {
    const Eigen::Matrix3d Fp = compose(p);
    r->resize(static_cast<int>(p1.size()));
    for (size_t i = 0; i < p1.size(); ++i) {
      const Eigen::Vector3d a = p1[i].homogeneous(), b = p2[i].homogeneous();
      const Eigen::Vector3d Fa = Fp * a, Ftb = Fp.transpose() * b;
      const double denom = Fa.x() * Fa.x() + Fa.y() * Fa.y() + Ftb.x() * Ftb.x() + Ftb.y() * Ftb.y();
      (*r)[i] = CauchyResidual(denom > 0.0 ? b.dot(Fa) / std::sqrt(denom) : 0.0, robust_scale_px);
    }
  };
  const Params refined = LevenbergMarquardt(start, 7, plus, residuals);
  Eigen::Matrix3d out = compose(refined);
  return out / out.norm();
}

}  // namespace two_view
}  // namespace tiepoint
