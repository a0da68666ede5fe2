// Small helpers shared by the two-view estimators (internal to solver/): Hartley point
// normalisation, null spaces of small constraint matrices, rotations, and a dense
// Levenberg-Marquardt for refining a model over a local parametrisation.
#pragma once

#include <Eigen/Core>
#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <vector>

#include "solver/geometry/hartley.h"

namespace tiepoint {
namespace two_view {

// Similarity T that moves the centroid of `points` to the origin and scales them so that
// their mean distance from it is sqrt(2): ComputeHartleySimilarity (hartley.h) as a matrix.
template <class Point>
Eigen::Matrix3d NormalizingTransform(const std::vector<Point>& points) {
  const HartleySimilarity h = ComputeHartleySimilarity(points);
  Eigen::Matrix3d T;
  T << h.scale, 0, h.tx, 0, h.scale, h.ty, 0, 0, 1;
  return T;
}

inline Eigen::Vector2d Apply(const Eigen::Matrix3d& T, const Eigen::Vector2d& p) {
  const Eigen::Vector3d q = T * p.homogeneous();
  return q.hnormalized();
}

// Orthonormal basis of the null space of A (rows x 9, rows <= 9) as the last 9 - rank
// columns of Q in a column-pivoted QR of A^T; `dim` columns are returned. False when
// A has rank below rows (a degenerate sample: e.g. collinear points), judged by the
// smallest pivot relative to the largest.
template <int Rows>
bool NullSpace9(const Eigen::Matrix<double, Rows, 9>& A, Eigen::Matrix<double, 9, 9 - Rows>* basis) {
  Eigen::ColPivHouseholderQR<Eigen::Matrix<double, 9, Rows>> qr(A.transpose());
  const auto& R = qr.matrixQR();
  const double largest = std::abs(R(0, 0));
  if (!(largest > 0.0) || std::abs(R(Rows - 1, Rows - 1)) < 1e-9 * largest) return false;
  const Eigen::Matrix<double, 9, 9> Q = qr.householderQ();
  *basis = Q.template rightCols<9 - Rows>();
  return true;
}

// Null space of the Rows x 9 matrix A (row-major, overwritten) by Gaussian elimination
// with partial pivoting, columns left to right; a column whose largest remaining entry is
// below 1e-9 of A's largest entry becomes free instead of pivotal. basis[k] (k < 9 -
// Rows) solves A x = 0 with the k-th free unknown 1 and the other free ones 0, scaled to
// unit norm. False when fewer than Rows pivots are found (rank below Rows: a degenerate
// sample). On the Hartley-normalised 7x9 and 8x9 systems of the minimal solvers it costs
// ~130 multiply-adds, a tenth of NullSpace9's Householder QR; the basis spans the same
// space but is not orthonormal.
template <int Rows>
bool NullSpaceGauss(double A[Rows][9], double basis[9 - Rows][9]) {
  double scale = 0.0;
  for (int i = 0; i < Rows; ++i)
    for (int j = 0; j < 9; ++j) scale = std::max(scale, std::abs(A[i][j]));
  if (!(scale > 0.0) || !std::isfinite(scale)) return false;
  const double tiny = 1e-9 * scale;
  int pivot_col[Rows], free_col[9];
  int row = 0, num_free = 0;
  for (int j = 0; j < 9; ++j) {
    if (row == Rows) {
      free_col[num_free++] = j;
      continue;
    }
    int pi = row;
    double best = std::abs(A[row][j]);
    for (int i = row + 1; i < Rows; ++i) {
      const double v = std::abs(A[i][j]);
      if (v > best) best = v, pi = i;
    }
    if (!(best > tiny)) {
      free_col[num_free++] = j;
      continue;
    }
    if (pi != row)
      for (int c = j; c < 9; ++c) std::swap(A[row][c], A[pi][c]);
    const double inv = 1.0 / A[row][j];
    for (int i = row + 1; i < Rows; ++i) {
      const double f = A[i][j] * inv;
      for (int c = j + 1; c < 9; ++c) A[i][c] -= f * A[row][c];
      A[i][j] = 0.0;
    }
    pivot_col[row++] = j;
  }
  if (row < Rows) return false;
  bool leading = true;  // the usual case: pivots in columns 0..Rows-1, the last ones free
  for (int i = 0; i < Rows; ++i) leading = leading && pivot_col[i] == i;
  if (leading) {
    // The same operations in the same order as the general loop below (so the same
    // bits), with fixed indices so that x stays in registers and the 9 - Rows
    // back-substitutions, each a chain of divisions, overlap.
    constexpr int F = 9 - Rows;
    double x[F][9];
    for (int f = 0; f < F; ++f)
      for (int c = 0; c < 9; ++c) x[f][c] = c == Rows + f ? 1.0 : 0.0;
#pragma GCC unroll 9
    for (int i = Rows - 1; i >= 0; --i) {
      double sum[F];
      for (int f = 0; f < F; ++f) sum[f] = 0.0;
#pragma GCC unroll 9
      for (int c = i + 1; c < 9; ++c)
        for (int f = 0; f < F; ++f) sum[f] += A[i][c] * x[f][c];
      for (int f = 0; f < F; ++f) x[f][i] = -sum[f] / A[i][i];
    }
    for (int f = 0; f < F; ++f) {
      double norm2 = 0.0;
      for (int c = 0; c < 9; ++c) norm2 += x[f][c] * x[f][c];
      const double inv_norm = 1.0 / std::sqrt(norm2);
      for (int c = 0; c < 9; ++c) basis[f][c] = x[f][c] * inv_norm;
    }
    return true;
  }
  for (int f = 0; f < 9 - Rows; ++f) {
    double x[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    x[free_col[f]] = 1.0;
    for (int i = Rows - 1; i >= 0; --i) {
      const int pc = pivot_col[i];
      double sum = 0.0;
      for (int c = pc + 1; c < 9; ++c) sum += A[i][c] * x[c];
      x[pc] = -sum / A[i][pc];
    }
    double norm2 = 0.0;
    for (int c = 0; c < 9; ++c) norm2 += x[c] * x[c];
    const double inv_norm = 1.0 / std::sqrt(norm2);
    for (int c = 0; c < 9; ++c) basis[f][c] = x[c] * inv_norm;
  }
  return true;
}

inline Eigen::Matrix3d Skew(const Eigen::Vector3d& v) {
  Eigen::Matrix3d S;
  S << 0, -v.z(), v.y(), v.z(), 0, -v.x(), -v.y(), v.x(), 0;
  return S;
}

// Rotation exp([w]x) (Rodrigues).
inline Eigen::Matrix3d ExpRotation(const Eigen::Vector3d& w) {
  const double angle = w.norm();
  if (angle < 1e-12) return Eigen::Matrix3d::Identity() + Skew(w);
  return Eigen::AngleAxisd(angle, w / angle).toRotationMatrix();
}

// Two unit vectors spanning the plane orthogonal to unit vector t.
inline Eigen::Matrix<double, 3, 2> TangentBasis(const Eigen::Vector3d& t) {
  const Eigen::Vector3d a = std::abs(t.x()) < 0.9 ? Eigen::Vector3d::UnitX() : Eigen::Vector3d::UnitY();
  const Eigen::Vector3d b1 = t.cross(a).normalized();
  const Eigen::Vector3d b2 = t.cross(b1).normalized();
  Eigen::Matrix<double, 3, 2> B;
  B << b1, b2;
  return B;
}

// A residual e under the Cauchy loss of scale c, as a residual: its square is
// c^2 log(1 + e^2 / c^2). c <= 0 leaves e as it is (least squares).
inline double CauchyResidual(double e, double c) {
  if (!(c > 0.0)) return e;
  return std::copysign(c * std::sqrt(std::log1p(e * e / (c * c))), e);
}

// Levenberg-Marquardt on a model with `dof` local parameters: minimises |r(model)|^2 where
// `residuals(model, &r)` fills r and `plus(model, delta)` returns the model moved by the
// local step delta (dof-vector; plus(m, 0) == m). The Jacobian is taken by central
// differences of step 1e-6 in the local parameters, which the callers scale to O(1)
// (normalised coordinates, radians). Returns the model of lowest cost found; *final_cost
// (optional) receives that cost.
template <class Model, class Plus, class Residuals>
Model LevenbergMarquardt(const Model& start, int dof, const Plus& plus, const Residuals& residuals,
                         int max_iterations = 30, double* final_cost = nullptr) {
  Model model = start;
  Eigen::VectorXd r;
  residuals(model, &r);
  double cost = r.squaredNorm();
  const int m = static_cast<int>(r.size());
  double lambda = 1e-4;
  Eigen::MatrixXd J(m, dof);
  Eigen::VectorXd rp, rm;
  constexpr double kStep = 1e-6;
  for (int it = 0; it < max_iterations && m >= dof && cost > 0.0; ++it) {
    for (int k = 0; k < dof; ++k) {
      Eigen::VectorXd d = Eigen::VectorXd::Zero(dof);
      d[k] = kStep;
      residuals(plus(model, d), &rp);
      d[k] = -kStep;
      residuals(plus(model, d), &rm);
      J.col(k) = (rp - rm) / (2.0 * kStep);
    }
    const Eigen::MatrixXd JtJ = J.transpose() * J;
    const Eigen::VectorXd g = J.transpose() * r;
    bool improved = false;
    while (lambda < 1e10) {
      Eigen::MatrixXd A = JtJ;
      A.diagonal() += lambda * (JtJ.diagonal().array() + 1e-12).matrix();
      const Eigen::VectorXd delta = A.ldlt().solve(-g);
      if (!delta.allFinite()) {
        lambda *= 10.0;
        continue;
      }
      const Model candidate = plus(model, delta);
      Eigen::VectorXd rc;
      residuals(candidate, &rc);
      const double c = rc.squaredNorm();
      if (std::isfinite(c) && c < cost) {
        const double decrease = (cost - c) / cost;
        model = candidate;
        r = rc;
        cost = c;
        lambda = std::max(lambda / 10.0, 1e-12);
        improved = decrease > 1e-12;
        break;
      }
      lambda *= 10.0;
    }
    if (!improved) break;
  }
  if (final_cost) *final_cost = cost;
  return model;
}

}  // namespace two_view
}  // namespace tiepoint
