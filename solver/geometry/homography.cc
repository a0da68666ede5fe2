#include "solver/geometry/homography.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <limits>

#include "solver/geometry/ransac_utils.h"

namespace tiepoint {
namespace two_view {
namespace {

void DltRows(const Eigen::Vector2d& p, const Eigen::Vector2d& q, double* r0, double* r1) {
  const double x = p.x(), y = p.y(), u = q.x(), v = q.y();
  const double a[9] = {0, 0, 0, -x, -y, -1, v * x, v * y, v};
  const double b[9] = {x, y, 1, 0, 0, 0, -u * x, -u * y, -u};
  for (int k = 0; k < 9; ++k) {
    r0[k] = a[k];
    r1[k] = b[k];
  }
}

// Twice the signed area of the triangle (a, b, c), relative to the squared longest side.
double RelativeArea(const Eigen::Vector2d& a, const Eigen::Vector2d& b, const Eigen::Vector2d& c) {
  const Eigen::Vector2d u = b - a, v = c - a;
  const double cross = u.x() * v.y() - u.y() * v.x();
  const double scale = std::max({u.squaredNorm(), v.squaredNorm(), (c - b).squaredNorm()});
  return scale > 0.0 ? cross / scale : 0.0;
}

bool HasCollinearTriple(const Eigen::Vector2d p[4]) {
  constexpr double kMinRelativeArea = 1e-6;
  for (int skip = 0; skip < 4; ++skip) {
    int idx[3], k = 0;
    for (int i = 0; i < 4; ++i) {
      if (i != skip) idx[k++] = i;
    }
    if (std::abs(RelativeArea(p[idx[0]], p[idx[1]], p[idx[2]])) < kMinRelativeArea) return true;
  }
  return false;
}

}  // namespace

Eigen::Matrix3d NormalizeHomographyScale(const Eigen::Matrix3d& H) {
  const double norm = H.norm();
  if (!(norm > 0.0)) return H;
  if (std::abs(H(2, 2)) > 1e-8 * norm) return H / H(2, 2);
  return H / norm;
}

bool HomographyFromFourPoints(const Eigen::Vector2d x1[4], const Eigen::Vector2d x2[4],
                              Eigen::Matrix3d* H) {
  if (HasCollinearTriple(x1) || HasCollinearTriple(x2)) return false;
  double A[8][9], null[1][9];
  for (int i = 0; i < 4; ++i) DltRows(x1[i], x2[i], A[2 * i], A[2 * i + 1]);
  if (!NullSpaceGauss<8>(A, null)) return false;
  const double* h = null[0];
  Eigen::Matrix3d M;
  M << h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8];
  // Three collinear-free points on each side make H invertible unless the data are
  // inconsistent (a sample mixing outliers can flip orientation: H still valid).
  if (!(std::abs(M.determinant()) > 1e-12 * std::pow(M.norm(), 3))) return false;
  *H = M;
  return true;
}

bool HomographyLeastSquares(const std::vector<Eigen::Vector2d>& x1,
                            const std::vector<Eigen::Vector2d>& x2,
                            const std::vector<int>& indices, Eigen::Matrix3d* H) {
  if (indices.size() < 4) return false;
  Eigen::Matrix<double, 9, 9> AtA = Eigen::Matrix<double, 9, 9>::Zero();
  Eigen::Matrix<double, 9, 1> r0, r1;
  for (int i : indices) {
    DltRows(x1[i], x2[i], r0.data(), r1.data());
    AtA.noalias() += r0 * r0.transpose() + r1 * r1.transpose();
  }
  Eigen::SelfAdjointEigenSolver<Eigen::Matrix<double, 9, 9>> eig(AtA);
  if (eig.info() != Eigen::Success) return false;
  // Rank check: the second-smallest eigenvalue must stand clear of zero.
  if (!(eig.eigenvalues()[1] > 1e-12 * eig.eigenvalues()[8])) return false;
  const Eigen::Matrix<double, 9, 1> h = eig.eigenvectors().col(0);
  Eigen::Matrix3d M;
  M << h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8];
  if (!(std::abs(M.determinant()) > 1e-12 * std::pow(M.norm(), 3))) return false;
  *H = M;
  return true;
}

double HomographySquaredError(const Eigen::Matrix3d& H, const Eigen::Vector2d& x1, const Eigen::Vector2d& x2) {
  const Eigen::Vector3d f = H * x1.homogeneous();
  if (f.z() == 0.0) return std::numeric_limits<double>::infinity();
  return (f.hnormalized() - x2).squaredNorm();
}

Eigen::Matrix3d RefineHomography(const Eigen::Matrix3d& H, const std::vector<Eigen::Vector2d>& x1,
                                 const std::vector<Eigen::Vector2d>& x2,
                                 const std::vector<int>& indices, double robust_scale_px) {
  if (indices.size() < 5) return H;
  std::vector<Eigen::Vector2d> p1, p2;
  for (int i : indices) {
    p1.push_back(x1[i]);
    p2.push_back(x2[i]);
  }
  const Eigen::Matrix3d T1 = NormalizingTransform(p1), T2 = NormalizingTransform(p2);
  const Eigen::Matrix3d T1inv = T1.inverse(), T2inv = T2.inverse();
  Eigen::Matrix3d Hn = T2 * H * T1inv;
  Hn /= Hn.norm();
  // Local parameters: 8 directions orthogonal to vec(Hn) (the scale is no parameter).
  const Eigen::Map<const Eigen::Matrix<double, 9, 1>> h0(Hn.data());
  Eigen::HouseholderQR<Eigen::Matrix<double, 9, 1>> qr(h0);
  const Eigen::Matrix<double, 9, 9> Q = qr.householderQ();
  const Eigen::Matrix<double, 9, 8> basis = Q.rightCols<8>();
  auto plus = [&](const Eigen::Matrix3d& M, const Eigen::VectorXd& d) {
    Eigen::Matrix<double, 9, 1> v = Eigen::Map<const Eigen::Matrix<double, 9, 1>>(M.data()) + basis * d;
    v.normalize();
    return Eigen::Matrix3d(Eigen::Map<const Eigen::Matrix3d>(v.data()));
  };
  auto residuals = [&](const Eigen::Matrix3d& M, Eigen::VectorXd* r) {
    const Eigen::Matrix3d Hp = T2inv * M * T1;
    r->resize(2 * static_cast<int>(p1.size()));
    for (size_t i = 0; i < p1.size(); ++i) {
      const Eigen::Vector2d f = (Hp * p1[i].homogeneous()).hnormalized() - p2[i];
      r->segment<2>(2 * i) << CauchyResidual(f.x(), robust_scale_px), CauchyResidual(f.y(), robust_scale_px);
    }
  };
  const Eigen::Matrix3d refined = LevenbergMarquardt(Hn, 8, plus, residuals);
  return NormalizeHomographyScale(T2inv * refined * T1);
}

}  // namespace two_view
}  // namespace tiepoint
