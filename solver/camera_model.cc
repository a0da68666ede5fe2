#include "solver/camera_model.h"

#include <Eigen/Core>

namespace tiepoint {
namespace {

using Mat3 = Eigen::Matrix3d;
using Vec3 = Eigen::Vector3d;

Mat3 Skew(const Vec3& v) {
  Mat3 m;
  m << 0, -v.z(), v.y(), v.z(), 0, -v.x(), -v.y(), v.x(), 0;
  return m;
}

}  // namespace

// The derivative of R(w) X with respect to w is -R [X]x J_r(w), with the right Jacobian of
// SO(3)  J_r(w) = I - a [w]x + b [w]x^2,  a = (1 - cos t) / t^2,  b = (t - sin t) / t^3,
// t = |w|. a and b come from their Taylor series for small t, so there is no
// cancellation (the equivalent form with (R^T - I)/t^2 loses ~eps/t^2 of accuracy).
// Below the small-angle threshold the model is X + w x X (as in AngleAxisRotatePoint),
// whose derivative is -[X]x, so the Jacobian matches the function it differentiates.
void BalResidualAndJacobian(const double* camera, const double* point, const double* observed,
                            double* residual, double* jc, double* jp) {
  const Vec3 w(camera[0], camera[1], camera[2]);
  const Vec3 X(point[0], point[1], point[2]);
  const double theta2 = w.squaredNorm();
  Mat3 R;
  Mat3 dRX_dw;
  if (theta2 > std::numeric_limits<double>::epsilon()) {
    const double theta = std::sqrt(theta2);
    const Vec3 u = w / theta;
    const double c = std::cos(theta), s = std::sin(theta);
    R = c * Mat3::Identity() + s * Skew(u) + (1.0 - c) * u * u.transpose();
    double a, b;
    if (theta2 < 1e-4) {
      a = 0.5 - theta2 / 24.0 + theta2 * theta2 / 720.0;
      b = 1.0 / 6.0 - theta2 / 120.0 + theta2 * theta2 / 5040.0;
    } else {
      a = (1.0 - c) / theta2;
      b = (theta - s) / (theta2 * theta);
    }
    // Evaluated step by step: one fused expression made Eigen build a slow temporary
    // chain (measured 7% of a pcg-schur solve).
    const Mat3 W = Skew(w);
    Mat3 Jr = b * (W * W);
    Jr -= a * W;
    Jr.diagonal().array() += 1.0;
    const Mat3 XJr = Skew(X) * Jr;
    dRX_dw.noalias() = -(R * XJr);
  } else {
    R = Mat3::Identity() + Skew(w);
    dRX_dw = -Skew(X);
  }
  const Vec3 P = R * X + Vec3(camera[3], camera[4], camera[5]);
  const double iz = 1.0 / P.z();
  const double px = -P.x() * iz, py = -P.y() * iz;
  const double f = camera[6], k1 = camera[7], k2 = camera[8];
  const double r2 = px * px + py * py;
  const double d = 1.0 + r2 * (k1 + k2 * r2);
  residual[0] = f * d * px - observed[0];
  residual[1] = f * d * py - observed[1];
  if (!jc && !jp) return;

  // d predicted / d p = f (d I + p (dd/dp)^T), dd/dp = 2 (k1 + 2 k2 r2) p.
  const double dd = 2.0 * (k1 + 2.0 * k2 * r2);
  Eigen::Matrix2d dpred_dp;
  dpred_dp << f * (d + dd * px * px), f * dd * px * py, f * dd * px * py, f * (d + dd * py * py);
  // d p / d P.
  Eigen::Matrix<double, 2, 3> dp_dP;
  dp_dP << -iz, 0.0, P.x() * iz * iz, 0.0, -iz, P.y() * iz * iz;
  const Eigen::Matrix<double, 2, 3> dpred_dP = dpred_dp * dp_dP;

  if (jc) {
    Eigen::Map<Eigen::Matrix<double, 2, 9, Eigen::RowMajor>> J(jc);
    J.block<2, 3>(0, 0) = dpred_dP * dRX_dw;
    J.block<2, 3>(0, 3) = dpred_dP;
    J(0, 6) = d * px;
    J(1, 6) = d * py;
    J(0, 7) = f * r2 * px;
    J(1, 7) = f * r2 * py;
    J(0, 8) = f * r2 * r2 * px;
    J(1, 8) = f * r2 * r2 * py;
  }
  if (jp) {
    Eigen::Map<Eigen::Matrix<double, 2, 3, Eigen::RowMajor>> J(jp);
    J = dpred_dP * R;
  }
}

}  // namespace tiepoint
