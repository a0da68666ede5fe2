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
// Since R [X]x = [R X]x R, the per-camera part is M = R J_r.
void MakeBalCameraFrame(const double* camera, BalCameraFrame* frame) {
  const Vec3 w(camera[0], camera[1], camera[2]);
  const double theta2 = w.squaredNorm();
  Eigen::Map<Eigen::Matrix<double, 3, 3, Eigen::RowMajor>> R(frame->R), M(frame->M);
  frame->small_angle = !(theta2 > std::numeric_limits<double>::epsilon());
  if (!frame->small_angle) {
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
    const Mat3 W = Skew(w);
    Mat3 Jr = b * (W * W);
    Jr -= a * W;
    Jr.diagonal().array() += 1.0;
    M = R * Jr;
  } else {
    R = Mat3::Identity() + Skew(w);
    M.setIdentity();
  }
  for (int k = 0; k < 3; ++k) frame->t[k] = camera[3 + k];
  frame->f = camera[6];
  frame->k1 = camera[7];
  frame->k2 = camera[8];
}

void BalResidualAndJacobian(const BalCameraFrame& fr, const double* X, const double* observed,
                            double* residual, double* jc, double* jp) {
  const double* R = fr.R;
  // RX = R X; P = RX + t.
  const double RX[3] = {R[0] * X[0] + R[1] * X[1] + R[2] * X[2],
                        R[3] * X[0] + R[4] * X[1] + R[5] * X[2],
                        R[6] * X[0] + R[7] * X[1] + R[8] * X[2]};
  const double P[3] = {RX[0] + fr.t[0], RX[1] + fr.t[1], RX[2] + fr.t[2]};
  const double iz = 1.0 / P[2];
  const double px = -P[0] * iz, py = -P[1] * iz;
  const double f = fr.f, k1 = fr.k1, k2 = fr.k2;
  const double r2 = px * px + py * py;
  const double d = 1.0 + r2 * (k1 + k2 * r2);
  residual[0] = f * d * px - observed[0];
  residual[1] = f * d * py - observed[1];
  if (!jc && !jp) return;

  // d predicted / d p = f (d I + p (dd/dp)^T), dd/dp = 2 (k1 + 2 k2 r2) p; times
  // d p / d P = [[-iz, 0, P.x iz^2], [0, -iz, P.y iz^2]].
  const double dd = 2.0 * (k1 + 2.0 * k2 * r2);
  const double a00 = f * (d + dd * px * px), a01 = f * dd * px * py, a11 = f * (d + dd * py * py);
  const double qx = P[0] * iz * iz, qy = P[1] * iz * iz;
  const double A[2][3] = {{-a00 * iz, -a01 * iz, a00 * qx + a01 * qy},
                          {-a01 * iz, -a11 * iz, a01 * qx + a11 * qy}};
  if (jc) {
    // Row r of d/dw: -(A_r [V]x) M with V = R X (or -A_r [X]x for the small-angle model);
    // a row vector times [V]x is (A_r x V)^T.
    const double* V = fr.small_angle ? X : RX;
    for (int r = 0; r < 2; ++r) {
      const double* a = A[r];
      const double c0 = a[1] * V[2] - a[2] * V[1];
      const double c1 = a[2] * V[0] - a[0] * V[2];
      const double c2 = a[0] * V[1] - a[1] * V[0];
      double* J = jc + 9 * r;
      if (fr.small_angle) {
        J[0] = -c0;
        J[1] = -c1;
        J[2] = -c2;
      } else {
        const double* M = fr.M;
        J[0] = -(c0 * M[0] + c1 * M[3] + c2 * M[6]);
        J[1] = -(c0 * M[1] + c1 * M[4] + c2 * M[7]);
        J[2] = -(c0 * M[2] + c1 * M[5] + c2 * M[8]);
      }
      J[3] = a[0];
      J[4] = a[1];
      J[5] = a[2];
    }
    jc[6] = d * px;
    jc[15] = d * py;
    jc[7] = f * r2 * px;
    jc[16] = f * r2 * py;
    jc[8] = f * r2 * r2 * px;
    jc[17] = f * r2 * r2 * py;
  }
  if (jp) {
    for (int r = 0; r < 2; ++r) {
      const double* a = A[r];
      for (int k = 0; k < 3; ++k) jp[3 * r + k] = a[0] * R[k] + a[1] * R[3 + k] + a[2] * R[6 + k];
    }
  }
}

std::vector<BalCameraFrame> MakeBalCameraFrames(const double* cameras, int num_cameras) {
  std::vector<BalCameraFrame> frames(num_cameras > 0 ? num_cameras : 0);
  for (int c = 0; c < num_cameras; ++c) MakeBalCameraFrame(cameras + 9 * c, &frames[c]);
  return frames;
}

void BalResidualAndJacobian(const double* camera, const double* point, const double* observed,
                            double* residual, double* jc, double* jp) {
  BalCameraFrame frame;
  MakeBalCameraFrame(camera, &frame);
  BalResidualAndJacobian(frame, point, observed, residual, jc, jp);
}

}  // namespace tiepoint
