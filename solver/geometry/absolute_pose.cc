#include "solver/geometry/absolute_pose.h"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "solver/geometry/ransac.h"
#include "solver/geometry/ransac_utils.h"

namespace tiepoint {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Real roots of c3 x^3 + c2 x^2 + c1 x + c0, each polished by Newton's method. Falls back to
// the quadratic (or linear) equation when the leading coefficient is negligible.
int SolveCubic(double c3, double c2, double c1, double c0, double roots[3]) {
  const double scale = std::max({std::abs(c3), std::abs(c2), std::abs(c1), std::abs(c0)});
  if (!(scale > 0.0) || !std::isfinite(scale)) return 0;
  int n = 0;
  if (std::abs(c3) < 1e-12 * scale) {
    if (std::abs(c2) < 1e-12 * scale) {
      if (std::abs(c1) < 1e-12 * scale) return 0;
      roots[0] = -c0 / c1;
      return 1;
    }
    const double disc = c1 * c1 - 4.0 * c2 * c0;
    if (disc < 0.0) return 0;
    // Stable form: q = -(b + sign(b) sqrt(disc)) / 2, roots q / a and c / q.
    const double q = -0.5 * (c1 + std::copysign(std::sqrt(disc), c1));
    roots[n++] = q / c2;
    if (q != 0.0) roots[n++] = c0 / q;
    return n;
  }
  // Depressed cubic x = y - a / 3: y^3 + p y + q = 0.
  const double a = c2 / c3, b = c1 / c3, c = c0 / c3;
  const double p = b - a * a / 3.0;
  const double q = 2.0 * a * a * a / 27.0 - a * b / 3.0 + c;
  const double disc = q * q / 4.0 + p * p * p / 27.0;
  if (disc > 0.0) {
    const double s = std::sqrt(disc);
    roots[n++] = std::cbrt(-q / 2.0 + s) + std::cbrt(-q / 2.0 - s) - a / 3.0;
  } else {
    // Three real roots (trigonometric form); p <= 0 here.
    const double r = std::sqrt(std::max(-p / 3.0, 0.0));
    if (r == 0.0) {
      roots[n++] = -a / 3.0;
    } else {
      const double arg = std::clamp(-q / (2.0 * r * r * r), -1.0, 1.0);
      const double phi = std::acos(arg) / 3.0;
      for (int k = 0; k < 3; ++k) roots[n++] = 2.0 * r * std::cos(phi - 2.0 * M_PI * k / 3.0) - a / 3.0;
    }
  }
  for (int i = 0; i < n; ++i) {
    double x = roots[i];
    for (int it = 0; it < 3; ++it) {
      const double f = ((x + a) * x + b) * x + c;
      const double df = (3.0 * x + 2.0 * a) * x + b;
      if (df == 0.0) break;
      const double step = f / df;
      if (!std::isfinite(step)) break;
      x -= step;
    }
    roots[i] = x;
  }
  return n;
}

// det(A + g B) = d3 g^3 + d2 g^2 + d1 g + d0 for 3x3 A, B (multilinearity in the columns).
void DetPencil(const Eigen::Matrix3d& A, const Eigen::Matrix3d& B, double d[4]) {
  auto det = [](const Eigen::Vector3d& c0, const Eigen::Vector3d& c1, const Eigen::Vector3d& c2) {
    return c0.dot(c1.cross(c2));
  };
  const Eigen::Vector3d a0 = A.col(0), a1 = A.col(1), a2 = A.col(2);
  const Eigen::Vector3d b0 = B.col(0), b1 = B.col(1), b2 = B.col(2);
  d[0] = det(a0, a1, a2);
  d[1] = det(b0, a1, a2) + det(a0, b1, a2) + det(a0, a1, b2);
  d[2] = det(a0, b1, b2) + det(b0, a1, b2) + det(b0, b1, a2);
  d[3] = det(b0, b1, b2);
}

// M_ij of the distance constraint lambda^T M_ij lambda = |X_i - X_j|^2.
Eigen::Matrix3d DistanceQuadric(int i, int j, double b) {
  Eigen::Matrix3d M = Eigen::Matrix3d::Zero();
  M(i, i) = 1.0;
  M(j, j) = 1.0;
  M(i, j) = -b;
  M(j, i) = -b;
  return M;
}

// Gauss-Newton on f_ij(lambda) = lambda_i^2 + lambda_j^2 - 2 b_ij lambda_i lambda_j - a_ij.
void PolishDepths(const double b[3], const double a[3], Eigen::Vector3d* lambda) {
  // Pairs (0,1), (0,2), (1,2) with b, a in that order.
  static const int kPair[3][2] = {{0, 1}, {0, 2}, {1, 2}};
  Eigen::Vector3d l = *lambda;
  auto residual = [&](const Eigen::Vector3d& x, Eigen::Vector3d* r) {
    for (int k = 0; k < 3; ++k) {
      const int i = kPair[k][0], j = kPair[k][1];
      (*r)[k] = x[i] * x[i] + x[j] * x[j] - 2.0 * b[k] * x[i] * x[j] - a[k];
    }
  };
  Eigen::Vector3d r;
  residual(l, &r);
  for (int it = 0; it < 5; ++it) {
    Eigen::Matrix3d J = Eigen::Matrix3d::Zero();
    for (int k = 0; k < 3; ++k) {
      const int i = kPair[k][0], j = kPair[k][1];
      J(k, i) = 2.0 * l[i] - 2.0 * b[k] * l[j];
      J(k, j) = 2.0 * l[j] - 2.0 * b[k] * l[i];
    }
    const Eigen::Vector3d step = J.partialPivLu().solve(r);
    if (!step.allFinite()) break;
    const Eigen::Vector3d candidate = l - step;
    Eigen::Vector3d rc;
    residual(candidate, &rc);
    if (!(rc.squaredNorm() < r.squaredNorm())) break;
    l = candidate;
    r = rc;
  }
  *lambda = l;
}

// RANSAC estimator over 2D-3D correspondences (see solver/geometry/ransac.h).
struct PoseModel {
  Eigen::Matrix3d R = Eigen::Matrix3d::Identity();
  Eigen::Vector3d t = Eigen::Vector3d::Zero();
};

struct LeastSquaresPose {
  Eigen::Matrix<double, 6, 6> JtJ;
  Eigen::Matrix<double, 6, 1> g;
  double cost;
  int used;
};

// Normal equations of the (optionally Cauchy-weighted, by IRLS) reprojection error over
// `indices` at (R, t), for the update R <- exp([w]x) R, t <- t + dt.
LeastSquaresPose Linearize(const std::vector<Eigen::Vector2d>& x, const std::vector<Eigen::Vector3d>& X,
                           const std::vector<int>& indices, const Eigen::Matrix3d& R,
                           const Eigen::Vector3d& t, double loss_scale) {
  LeastSquaresPose ls;
  ls.JtJ.setZero();
  ls.g.setZero();
  ls.cost = 0.0;
  ls.used = 0;
  const double c2 = loss_scale * loss_scale;
  for (int i : indices) {
    const Eigen::Vector3d RX = R * X[i];
    const Eigen::Vector3d P = RX + t;
    if (!(P.z() > 0.0)) continue;
    const double iz = 1.0 / P.z();
    const Eigen::Vector2d r(P.x() * iz - x[i].x(), P.y() * iz - x[i].y());
    Eigen::Matrix<double, 2, 3> dr_dP;
    dr_dP << iz, 0.0, -P.x() * iz * iz, 0.0, iz, -P.y() * iz * iz;
    Eigen::Matrix<double, 2, 6> J;
    J.leftCols<3>() = -dr_dP * two_view::Skew(RX);  // d(exp([w]x) R X) / dw at 0 = -[R X]x
    J.rightCols<3>() = dr_dP;
    const double e2 = r.squaredNorm();
    double w = 1.0;
    if (loss_scale > 0.0) {
      ls.cost += c2 * std::log1p(e2 / c2);
      w = 1.0 / (1.0 + e2 / c2);
    } else {
      ls.cost += e2;
    }
    ls.JtJ.noalias() += w * J.transpose() * J;
    ls.g.noalias() += w * J.transpose() * r;
    ++ls.used;
  }
  return ls;
}

double PoseCost(const std::vector<Eigen::Vector2d>& x, const std::vector<Eigen::Vector3d>& X,
                const std::vector<int>& indices, const Eigen::Matrix3d& R, const Eigen::Vector3d& t,
                double loss_scale, int* used) {
  double cost = 0.0;
  int n = 0;
  const double c2 = loss_scale * loss_scale;
  for (int i : indices) {
    const double e2 = SquaredReprojectionError(R, t, X[i], x[i]);
    if (!std::isfinite(e2)) return kInf;  // a point crossed behind the camera: reject the step
    cost += loss_scale > 0.0 ? c2 * std::log1p(e2 / c2) : e2;
    ++n;
  }
  if (used) *used = n;
  return cost;
}

// Levenberg-Marquardt on the points of `indices` that lie in front of the start pose.
bool RefinePoseOnIndices(const std::vector<Eigen::Vector2d>& x, const std::vector<Eigen::Vector3d>& X,
                         std::vector<int> indices, Eigen::Matrix3d* R, Eigen::Vector3d* t,
                         const AbsolutePoseRefineOptions& options, AbsolutePoseRefineSummary* summary) {
  if (!R->allFinite() || !t->allFinite()) return false;
  indices.erase(std::remove_if(indices.begin(), indices.end(),
                               [&](int i) { return !std::isfinite(SquaredReprojectionError(*R, *t, X[i], x[i])); }),
                indices.end());
  if (indices.size() < 3) return false;
  const double n = static_cast<double>(indices.size());
  auto rms = [&](const Eigen::Matrix3d& Rm, const Eigen::Vector3d& tm) {
    return std::sqrt(PoseCost(x, X, indices, Rm, tm, 0.0, nullptr) / n);
  };
  AbsolutePoseRefineSummary s;
  s.initial_rms_error = rms(*R, *t);
  Eigen::Matrix3d Rc = *R;
  Eigen::Vector3d tc = *t;
  double lambda = 1e-4;
  int it = 0;
  for (; it < options.max_iterations; ++it) {
    const LeastSquaresPose ls = Linearize(x, X, indices, Rc, tc, options.loss_scale);
    if (!(ls.cost > 0.0)) break;
    bool improved = false;
    bool converged = false;
    while (lambda < 1e12) {
      Eigen::Matrix<double, 6, 6> A = ls.JtJ;
      A.diagonal() += lambda * (ls.JtJ.diagonal().array() + 1e-12).matrix();
      const Eigen::Matrix<double, 6, 1> delta = A.ldlt().solve(-ls.g);
      if (!delta.allFinite()) {
        lambda *= 10.0;
        continue;
      }
      const Eigen::Matrix3d Rn = two_view::ExpRotation(delta.head<3>()) * Rc;
      const Eigen::Vector3d tn = tc + delta.tail<3>();
      const double cost = PoseCost(x, X, indices, Rn, tn, options.loss_scale, nullptr);
      if (std::isfinite(cost) && cost < ls.cost) {
        converged = (ls.cost - cost) < 1e-12 * ls.cost || delta.norm() < 1e-14;
        Rc = Rn;
        tc = tn;
        lambda = std::max(lambda / 10.0, 1e-12);
        improved = true;
        break;
      }
      lambda *= 10.0;
    }
    if (!improved || converged) {
      if (improved) ++it;
      break;
    }
  }
  // Keep R orthonormal to machine precision after the products of small rotations.
  const Eigen::JacobiSVD<Eigen::Matrix3d> svd(Rc, Eigen::ComputeFullU | Eigen::ComputeFullV);
  Rc = svd.matrixU() * svd.matrixV().transpose();
  *R = Rc;
  *t = tc;
  s.final_rms_error = rms(Rc, tc);
  s.iterations = it;
  if (summary) *summary = s;
  return true;
}

class AbsolutePoseEstimator {
 public:
  using Model = PoseModel;
  static constexpr int kSampleSize = 3;

  AbsolutePoseEstimator(const std::vector<Eigen::Vector2d>& x, const std::vector<Eigen::Vector3d>& X)
      : x_(x), X_(X) {
    bearings_.reserve(x.size());
    for (const auto& p : x) bearings_.push_back(p.homogeneous().normalized());
  }
  int NumData() const { return static_cast<int>(x_.size()); }
  void MinimalSolve(const int* sample, std::vector<Model>* models) const {
    const Eigen::Vector3d y[3] = {bearings_[sample[0]], bearings_[sample[1]], bearings_[sample[2]]};
    const Eigen::Vector3d w[3] = {X_[sample[0]], X_[sample[1]], X_[sample[2]]};
    std::vector<Eigen::Matrix3d> Rs;
    std::vector<Eigen::Vector3d> ts;
    const int n = SolveP3P(y, w, &Rs, &ts);
    for (int k = 0; k < n; ++k) models->push_back({Rs[k], ts[k]});
  }
  bool FitNonMinimal(const std::vector<int>& indices, Model* model) const {
    AbsolutePoseRefineOptions options;
    options.max_iterations = 10;
    return RefinePoseOnIndices(x_, X_, indices, &model->R, &model->t, options, nullptr);
  }
  double SquaredError(const Model& m, int i) const { return SquaredReprojectionError(m.R, m.t, X_[i], x_[i]); }

 private:
  const std::vector<Eigen::Vector2d>& x_;
  const std::vector<Eigen::Vector3d>& X_;
  std::vector<Eigen::Vector3d> bearings_;
};

}  // namespace

double SquaredReprojectionError(const Eigen::Matrix3d& R, const Eigen::Vector3d& t,
                                const Eigen::Vector3d& X, const Eigen::Vector2d& normalized) {
  const Eigen::Vector3d P = R * X + t;
  if (!(P.z() > 0.0)) return kInf;
  const double dx = P.x() / P.z() - normalized.x();
  const double dy = P.y() / P.z() - normalized.y();
  return dx * dx + dy * dy;
}

int SolveP3P(const Eigen::Vector3d bearing[3], const Eigen::Vector3d world[3],
             std::vector<Eigen::Matrix3d>* R, std::vector<Eigen::Vector3d>* t) {
  Eigen::Vector3d y[3];
  for (int i = 0; i < 3; ++i) {
    const double norm = bearing[i].norm();
    if (!(norm > 0.0) || !std::isfinite(norm)) return 0;
    y[i] = bearing[i] / norm;
  }
  // Pairs in the order (0,1), (0,2), (1,2).
  const double b[3] = {y[0].dot(y[1]), y[0].dot(y[2]), y[1].dot(y[2])};
  const double a[3] = {(world[0] - world[1]).squaredNorm(), (world[0] - world[2]).squaredNorm(),
                       (world[1] - world[2]).squaredNorm()};
  // Degenerate triangles: coincident or collinear world points (zero area relative to the
  // sides), or two parallel bearings.
  const Eigen::Vector3d e01 = world[1] - world[0], e02 = world[2] - world[0];
  const double max_side2 = std::max({a[0], a[1], a[2]});
  if (!(max_side2 > 0.0) || e01.cross(e02).squaredNorm() < 1e-20 * max_side2 * max_side2) return 0;
  for (int k = 0; k < 3; ++k) {
    if (!(std::abs(b[k]) < 1.0 - 1e-15)) return 0;
  }
  const Eigen::Matrix3d M01 = DistanceQuadric(0, 1, b[0]);
  const Eigen::Matrix3d M02 = DistanceQuadric(0, 2, b[1]);
  const Eigen::Matrix3d M12 = DistanceQuadric(1, 2, b[2]);
  // lambda^T D lambda = 0 for both (each is a_12 times one constraint minus a_ij times
  // the (1,2) one).
  const Eigen::Matrix3d D1 = a[2] * M01 - a[0] * M12;
  const Eigen::Matrix3d D2 = a[2] * M02 - a[1] * M12;
  double d[4];
  DetPencil(D1, D2, d);
  double gammas[3];
  const int num_gammas = SolveCubic(d[3], d[2], d[1], d[0], gammas);
  // Of the real roots, the one whose D0 is best conditioned as a pair of planes: two
  // non-zero eigenvalues of opposite sign, the smaller of them largest relative to the
  // largest (a root where D0 is near rank 1 gives unstable planes).
  int best = -1;
  double best_quality = 0.0;
  Eigen::Matrix3d best_vectors;
  Eigen::Vector3d best_values;
  for (int k = 0; k < num_gammas; ++k) {
    if (!std::isfinite(gammas[k])) continue;
    const Eigen::Matrix3d D0 = D1 + gammas[k] * D2;
    const Eigen::SelfAdjointEigenSolver<Eigen::Matrix3d> eig(D0);
    const Eigen::Vector3d ev = eig.eigenvalues();  // ascending
    // The eigenvalue nearest zero is the null direction; the other two must differ in sign.
    int zero = 0;
    for (int i = 1; i < 3; ++i) {
      if (std::abs(ev[i]) < std::abs(ev[zero])) zero = i;
    }
    const int i1 = zero == 0 ? 1 : 0, i2 = zero == 2 ? 1 : 2;
    if (!(ev[i1] * ev[i2] < 0.0)) continue;
    const double quality = std::min(std::abs(ev[i1]), std::abs(ev[i2])) /
                           std::max(std::abs(ev[i1]), std::abs(ev[i2]));
    if (quality > best_quality) {
      best_quality = quality;
      best = k;
      Eigen::Matrix3d V;
      V.col(0) = eig.eigenvectors().col(i1);
      V.col(1) = eig.eigenvectors().col(i2);
      V.col(2) = eig.eigenvectors().col(zero);
      best_vectors = V;
      best_values = Eigen::Vector3d(ev[i1], ev[i2], ev[zero]);
    }
  }
  if (best < 0) return 0;
  // sigma1 (e1.l)^2 + sigma2 (e2.l)^2 = 0  ->  (e1 -+ s e2).l = 0, s = sqrt(-sigma2 / sigma1).
  const double s = std::sqrt(-best_values[1] / best_values[0]);
  const Eigen::Vector3d e1 = best_vectors.col(0), e2 = best_vectors.col(1);
  const Eigen::Matrix3d Msum = M01 + M02 + M12;
  const double asum = a[0] + a[1] + a[2];
  const Eigen::Vector3d w01 = world[1] - world[0], w02 = world[2] - world[0];
  Eigen::Matrix3d Xw;
  Xw << w01, w02, w01.cross(w02);
  const Eigen::Matrix3d Xw_inv = Xw.inverse();
  int found = 0;
  Eigen::Vector3d lambdas[4];
  for (int sign = -1; sign <= 1; sign += 2) {
    const Eigen::Vector3d normal = (e1 + sign * s * e2).normalized();
    // Orthonormal basis (u, v) of the plane normal . lambda = 0.
    const Eigen::Matrix<double, 3, 2> B = two_view::TangentBasis(normal);
    // On the plane lambda^T D0 lambda = 0 identically, and D1, D2 agree there up to the
    // factor -gamma: use whichever restricted quadratic is larger.
    Eigen::Matrix2d Q1 = B.transpose() * D1 * B;
    Eigen::Matrix2d Q2 = B.transpose() * D2 * B;
    const Eigen::Matrix2d Q = Q1.norm() >= Q2.norm() ? Q1 : Q2;
    const Eigen::SelfAdjointEigenSolver<Eigen::Matrix2d> q(Q);
    const double q0 = q.eigenvalues()[0], q1 = q.eigenvalues()[1];
    if (!(q0 * q1 <= 0.0) || q0 == q1) continue;
    // q0 c^2 + q1 s^2 = 0 along f0 c + f1 s.
    const double ratio = std::sqrt(std::max(-q0 / q1, 0.0));
    for (int root = -1; root <= 1; root += 2) {
      Eigen::Vector2d coeff = q.eigenvectors().col(0) + root * ratio * q.eigenvectors().col(1);
      Eigen::Vector3d dir = B * coeff;
      const double norm2 = dir.dot(Msum * dir);
      if (!(norm2 > 0.0)) continue;
      dir *= std::sqrt(asum / norm2);
      if (dir.sum() < 0.0) dir = -dir;
      if (!(dir.minCoeff() > 0.0)) continue;
      PolishDepths(b, a, &dir);
      if (!(dir.minCoeff() > 0.0) || !dir.allFinite()) continue;
      // The distance equations must hold (a spurious ray of the degenerate conic fails them).
      double residual = 0.0;
      const double fit[3] = {dir[0] * dir[0] + dir[1] * dir[1] - 2.0 * b[0] * dir[0] * dir[1],
                             dir[0] * dir[0] + dir[2] * dir[2] - 2.0 * b[1] * dir[0] * dir[2],
                             dir[1] * dir[1] + dir[2] * dir[2] - 2.0 * b[2] * dir[1] * dir[2]};
      for (int k = 0; k < 3; ++k) residual = std::max(residual, std::abs(fit[k] - a[k]) / max_side2);
      if (!(residual < 1e-6)) continue;
      bool duplicate = false;
      for (int k = 0; k < found; ++k) duplicate = duplicate || (lambdas[k] - dir).norm() < 1e-10 * dir.norm();
      if (duplicate) continue;
      lambdas[found++] = dir;
    }
  }
  int out = 0;
  for (int k = 0; k < found; ++k) {
    const Eigen::Vector3d P0 = lambdas[k][0] * y[0], P1 = lambdas[k][1] * y[1], P2 = lambdas[k][2] * y[2];
    const Eigen::Vector3d c01 = P1 - P0, c02 = P2 - P0;
    Eigen::Matrix3d Yc;
    Yc << c01, c02, c01.cross(c02);
    // R maps the world triangle's frame onto the camera's; the SVD keeps it a rotation.
    const Eigen::Matrix3d Rk = Yc * Xw_inv;
    const Eigen::JacobiSVD<Eigen::Matrix3d> svd(Rk, Eigen::ComputeFullU | Eigen::ComputeFullV);
    Eigen::Matrix3d Rr = svd.matrixU() * svd.matrixV().transpose();
    if (Rr.determinant() < 0.0) continue;
    const Eigen::Vector3d tk = P0 - Rr * world[0];
    if (!Rr.allFinite() || !tk.allFinite()) continue;
    R->push_back(Rr);
    t->push_back(tk);
    ++out;
  }
  return out;
}

Status AbsolutePoseOptions::Check() const {
  auto bad = [](const std::string& m) { return Status::InvalidOptions("absolute pose: " + m); };
  if (!(max_error > 0.0 && std::isfinite(max_error))) {
    return bad("max_error must be a positive number in normalized units (pixels / focal length), got " +
               std::to_string(max_error));
  }
  if (!(confidence > 0.0 && confidence < 1.0)) {
    return bad("confidence must lie in (0, 1), got " + std::to_string(confidence));
  }
  if (min_iterations < 1 || max_iterations < min_iterations) {
    return bad("RANSAC iteration bounds must satisfy 1 <= min_iterations <= max_iterations (got min " +
               std::to_string(min_iterations) + ", max " + std::to_string(max_iterations) + ")");
  }
  if (min_inliers < 3) {
    return bad("min_inliers must be >= 3 (the P3P sample), got " + std::to_string(min_inliers));
  }
  return Status::Ok();
}

bool RefineAbsolutePose(const std::vector<Eigen::Vector2d>& normalized,
                        const std::vector<Eigen::Vector3d>& world,
                        const std::vector<uint8_t>& inlier_mask, Eigen::Matrix3d* R,
                        Eigen::Vector3d* t, const AbsolutePoseRefineOptions& options,
                        AbsolutePoseRefineSummary* summary) {
  if (R == nullptr || t == nullptr || normalized.size() != world.size()) return false;
  if (!inlier_mask.empty() && inlier_mask.size() != normalized.size()) return false;
  std::vector<int> indices;
  for (size_t i = 0; i < normalized.size(); ++i) {
    if (!inlier_mask.empty() && !inlier_mask[i]) continue;
    if (!normalized[i].allFinite() || !world[i].allFinite()) continue;
    indices.push_back(static_cast<int>(i));
  }
  return RefinePoseOnIndices(normalized, world, std::move(indices), R, t, options, summary);
}

Status EstimateAbsolutePose(const std::vector<Eigen::Vector2d>& normalized,
                            const std::vector<Eigen::Vector3d>& world,
                            const AbsolutePoseOptions& options, AbsolutePose* result) {
  TIEPOINT_RETURN_IF_ERROR(options.Check());
  if (normalized.size() != world.size()) {
    return Status::InvalidInput("absolute pose: " + std::to_string(normalized.size()) +
                                " image points but " + std::to_string(world.size()) +
                                " world points (one per correspondence expected in both)");
  }
  const int n = static_cast<int>(normalized.size());
  for (int i = 0; i < n; ++i) {
    if (!normalized[i].allFinite()) {
      return Status::InvalidInput("absolute pose: image point " + std::to_string(i) + " is not finite");
    }
    if (!world[i].allFinite()) {
      return Status::InvalidInput("absolute pose: world point " + std::to_string(i) + " is not finite");
    }
  }
  *result = AbsolutePose();
  result->inlier_mask.assign(n, 0);
  if (n < std::max(3, options.min_inliers)) return Status::Ok();

  const AbsolutePoseEstimator estimator(normalized, world);
  const auto ransac = two_view::RunRansac(estimator, options.max_error, options.confidence,
                                          options.min_iterations, options.max_iterations, options.seed);
  result->ransac_iterations = ransac.iterations;
  if (!ransac.found) return Status::Ok();

  const double t2 = options.max_error * options.max_error;
  PoseModel model = ransac.model;
  double cost;
  std::vector<int> inliers;
  int count = two_view::ScoreModel(estimator, model, t2, &cost, &inliers);
  if (options.refine) {
    for (int round = 0; round < 3 && count >= 3; ++round) {
      PoseModel refined = model;
      if (!RefinePoseOnIndices(normalized, world, inliers, &refined.R, &refined.t, {}, nullptr)) break;
      double refined_cost;
      std::vector<int> refined_inliers;
      const int refined_count = two_view::ScoreModel(estimator, refined, t2, &refined_cost, &refined_inliers);
      if (!(refined_cost < cost)) break;
      model = refined;
      cost = refined_cost;
      count = refined_count;
      inliers.swap(refined_inliers);
    }
  }
  result->rotation = model.R;
  result->translation = model.t;
  result->num_inliers = count;
  double sum = 0.0;
  for (int i : inliers) {
    result->inlier_mask[i] = 1;
    sum += estimator.SquaredError(model, i);
  }
  result->inlier_rms_error = count > 0 ? std::sqrt(sum / count) : 0.0;
  result->found = count >= options.min_inliers;
  return Status::Ok();
}

}  // namespace tiepoint
