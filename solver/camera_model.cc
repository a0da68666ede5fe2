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

// The derivative of R(w) X with respect to w uses the closed form of Gallego and Yezzi,
// "A compact formula for the derivative of a 3-D rotation in exponential coordinates"
// (JMIV 2015):  d(R X)/dw = -R [X]x (w w^T + (R^T - I) [w]x) / |w|^2.
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
    dRX_dw = -R * Skew(X) * (w * w.transpose() + (R.transpose() - Mat3::Identity()) * Skew(w)) /
             theta2;
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
