// The BAL camera model, exactly as Ceres Solver's SnavelyReprojectionError.
//
//   camera c = [w (angle-axis, 3), t (3), f, k1, k2];   X a world point.
//   P = R(w) X + t                      (point_in_cam)
//   p = -P.xy / P.z                     (BAL cameras look down -z)
//   r(p) = 1 + k1 |p|^2 + k2 |p|^4
//   predicted = f r(p) p ;  residual = predicted - observation   (pixels)
//
// R(w) X is evaluated with Rodrigues' formula, and with its first-order form
// X + w x X when |w|^2 is below machine epsilon (as Ceres's AngleAxisRotatePoint).
// The templated form serves automatic differentiation (the Ceres backend) and the
// float/double solvers; the analytic Jacobian below is what tiepoint's own solvers use.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

namespace tiepoint {

template <typename T>
inline void AngleAxisRotatePoint(const T* w, const T* x, T* out) {
  using std::cos;
  using std::sin;
  using std::sqrt;
  const T theta2 = w[0] * w[0] + w[1] * w[1] + w[2] * w[2];
  if (theta2 > T(std::numeric_limits<double>::epsilon())) {
    const T theta = sqrt(theta2);
    const T c = cos(theta), s = sin(theta);
    const T u[3] = {w[0] / theta, w[1] / theta, w[2] / theta};
    const T uxx[3] = {u[1] * x[2] - u[2] * x[1], u[2] * x[0] - u[0] * x[2],
                      u[0] * x[1] - u[1] * x[0]};
    const T ud = (u[0] * x[0] + u[1] * x[1] + u[2] * x[2]) * (T(1) - c);
    for (int i = 0; i < 3; ++i) out[i] = x[i] * c + uxx[i] * s + u[i] * ud;
  } else {
    const T wxx[3] = {w[1] * x[2] - w[2] * x[1], w[2] * x[0] - w[0] * x[2],
                      w[0] * x[1] - w[1] * x[0]};
    for (int i = 0; i < 3; ++i) out[i] = x[i] + wxx[i];
  }
}

// Predicted pixel (before subtracting the observation). Returns P.z through `depth`
// when non-null (negative in front of a BAL camera).
template <typename T>
inline void ProjectBal(const T* camera, const T* point, T* predicted, T* depth = nullptr) {
  T P[3];
  AngleAxisRotatePoint(camera, point, P);
  P[0] += camera[3];
  P[1] += camera[4];
  P[2] += camera[5];
  const T px = -P[0] / P[2];
  const T py = -P[1] / P[2];
  const T r2 = px * px + py * py;
  const T distortion = T(1) + r2 * (camera[7] + camera[8] * r2);
  predicted[0] = camera[6] * distortion * px;
  predicted[1] = camera[6] * distortion * py;
  if (depth) *depth = P[2];
}

// Residual and analytic Jacobians of one observation, in double precision.
//   jc: 2x9 row-major d residual / d camera ; jp: 2x3 row-major d residual / d point.
// Either Jacobian pointer may be null.
void BalResidualAndJacobian(const double* camera, const double* point, const double* observed,
                            double* residual, double* jc, double* jp);

// What every observation of one camera shares: R(w) and R J_r(w) (J_r the right Jacobian
// of SO(3)), so that d(R X)/dw = -R [X]x J_r = -[R X]x (R J_r). Computing them once per
// camera and evaluation pass, instead of once per observation, takes the trigonometry
// and two 3x3 products out of the per-observation work (measured: the evaluation was 28%
// of a pcg-schur solve's instructions on problem-49-7776, most of it this).
struct BalCameraFrame {
  double R[9];      // row-major rotation R(w)
  double M[9];      // row-major R J_r(w); unused when small_angle
  double t[3];
  double f, k1, k2;
  bool small_angle;  // |w|^2 <= machine epsilon: R = I + [w]x, d(R X)/dw = -[X]x
};
void MakeBalCameraFrame(const double* camera, BalCameraFrame* frame);
// Frames of `num_cameras` cameras stored 9 doubles apart.
std::vector<BalCameraFrame> MakeBalCameraFrames(const double* cameras, int num_cameras);
// The same residual and Jacobians as above (to rounding), from the camera's frame.
void BalResidualAndJacobian(const BalCameraFrame& frame, const double* point,
                            const double* observed, double* residual, double* jc, double* jp);

}  // namespace tiepoint
