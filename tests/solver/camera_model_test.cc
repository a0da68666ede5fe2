// The analytic BAL Jacobians against two independent references: numeric differentiation
// (central differences with Richardson extrapolation) and Ceres's automatic
// differentiation of the templated model.
#include <ceres/ceres.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "solver/camera_model.h"

namespace tiepoint {
namespace {

struct Reprojection {
  explicit Reprojection(const double* observed) : x(observed[0]), y(observed[1]) {}
  template <typename T>
  bool operator()(const T* camera, const T* point, T* residual) const {
    T predicted[2];
    ProjectBal(camera, point, predicted);
    residual[0] = predicted[0] - T(x);
    residual[1] = predicted[1] - T(y);
    return true;
  }
  double x, y;
};

// Numeric Jacobian by central differences with two levels of Richardson extrapolation
// (Ridders' tableau at h, h/2, h/4), h = 1e-3 max(1, |x|). Truncation error O(h^6), and
// rounding ~eps/h: about 1e-10 relative here. (Ceres's RIDDERS option was tried first; its
// adaptive steps gave 1e-4 errors on some rotation columns, where these differences agree
// with automatic differentiation to 1e-10.)
void NumericJacobian(const double* camera, const double* point, const double* observed,
                     double* jc, double* jp) {
  double params[12];
  std::copy(camera, camera + 9, params);
  std::copy(point, point + 3, params + 9);
  auto residual = [&](const double* x, double* r) {
    double predicted[2];
    ProjectBal(x, x + 9, predicted);
    r[0] = predicted[0] - observed[0];
    r[1] = predicted[1] - observed[1];
  };
  for (int k = 0; k < 12; ++k) {
    const double h0 = 1e-3 * std::max(1.0, std::abs(params[k]));
    double d[3][2];
    for (int level = 0; level < 3; ++level) {
      const double h = h0 / (1 << level);
      double xp[12], xm[12], rp[2], rm[2];
      std::copy(params, params + 12, xp);
      std::copy(params, params + 12, xm);
      xp[k] += h;
      xm[k] -= h;
      residual(xp, rp);
      residual(xm, rm);
      for (int r = 0; r < 2; ++r) d[level][r] = (rp[r] - rm[r]) / (2 * h);
    }
    for (int r = 0; r < 2; ++r) {
      const double e1 = (4 * d[1][r] - d[0][r]) / 3, e2 = (4 * d[2][r] - d[1][r]) / 3;
      const double value = (16 * e2 - e1) / 15;
      if (k < 9) jc[9 * r + k] = value; else jp[3 * r + (k - 9)] = value;
    }
  }
}

// Worst column of a 2 x cols row-major block: |a_col - b_col| / |b_col|. A column below
// 1e-6 of the block's largest entry (d/dk1, d/dk2 near the optical axis, where r ~ 0) is
// compared absolutely at that level: finite differences cannot resolve it better than
// eps |r| / h, and the autodiff comparison still checks it to 1e-8.
double BlockRelativeError(const double* a, const double* b, int n) {
  const int cols = n / 2;
  double block_scale = 0.0;
  for (int k = 0; k < n; ++k) block_scale = std::max(block_scale, std::abs(b[k]));
  double worst = 0.0;
  for (int j = 0; j < cols; ++j) {
    const double d0 = a[j] - b[j], d1 = a[cols + j] - b[cols + j];
    const double diff = std::sqrt(d0 * d0 + d1 * d1);
    const double scale = std::sqrt(b[j] * b[j] + b[cols + j] * b[cols + j]);
    const double e = diff / std::max(scale, 1e-6 * block_scale + 1e-300);
    worst = std::max(worst, e);
  }
  return worst;
}

struct Sample {
  double camera[9];
  double point[3];
  double observed[2];
};

// A random camera looking at a random point in front of it; `axis_offset` scales how far
// from the optical axis the point lies (0 = on the axis), `angle` the rotation magnitude.
Sample RandomSample(std::mt19937_64& rng, double axis_offset, double angle) {
  std::normal_distribution<double> n01(0.0, 1.0);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  Sample s;
  double w[3] = {n01(rng), n01(rng), n01(rng)};
  const double norm = std::sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]);
  for (int i = 0; i < 3; ++i) s.camera[i] = w[i] / norm * angle;
  // Choose the point in camera coordinates, then map back to the world: X = R^T (P - t).
  const double depth = 2.0 + 20.0 * u01(rng);
  const double P[3] = {axis_offset * depth * n01(rng), axis_offset * depth * n01(rng), -depth};
  const double t[3] = {n01(rng), n01(rng), n01(rng)};
  for (int i = 0; i < 3; ++i) s.camera[3 + i] = t[i];
  s.camera[6] = 500.0 + 1000.0 * u01(rng);
  s.camera[7] = 0.1 * n01(rng);
  s.camera[8] = 0.01 * n01(rng);
  const double Pt[3] = {P[0] - t[0], P[1] - t[1], P[2] - t[2]};
  const double minus_w[3] = {-s.camera[0], -s.camera[1], -s.camera[2]};
  AngleAxisRotatePoint(minus_w, Pt, s.point);
  s.observed[0] = 100.0 * n01(rng);
  s.observed[1] = 100.0 * n01(rng);
  return s;
}

void CheckAgainstReferences(const Sample& s, double numeric_tolerance) {
  double r[2], jc[18], jp[6];
  BalResidualAndJacobian(s.camera, s.point, s.observed, r, jc, jp);

  double jcn[18], jpn[6];
  NumericJacobian(s.camera, s.point, s.observed, jcn, jpn);
  ceres::AutoDiffCostFunction<Reprojection, 2, 9, 3> automatic(new Reprojection(s.observed));
  const double* params[2] = {s.camera, s.point};
  double ra[2], jca[18], jpa[6];
  double* ja[2] = {jca, jpa};
  ASSERT_TRUE(automatic.Evaluate(params, ra, ja));

  EXPECT_NEAR(r[0], ra[0], 1e-9 * (1 + std::abs(ra[0])));
  EXPECT_NEAR(r[1], ra[1], 1e-9 * (1 + std::abs(ra[1])));
  EXPECT_LT(BlockRelativeError(jc, jcn, 18), numeric_tolerance) << "camera block vs numeric";
  EXPECT_LT(BlockRelativeError(jp, jpn, 6), numeric_tolerance) << "point block vs numeric";
  EXPECT_LT(BlockRelativeError(jc, jca, 18), 1e-8) << "camera block vs autodiff";
  EXPECT_LT(BlockRelativeError(jp, jpa, 6), 1e-8) << "point block vs autodiff";
}

TEST(CameraModel, AnalyticJacobianMatchesNumericOnRandomCameras) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 3000; ++i) {
    const Sample s = RandomSample(rng, /*axis_offset=*/0.3, /*angle=*/3.0 * (i % 100) / 100.0 + 0.01);
    CheckAgainstReferences(s, 1e-6);
    if (HasFailure()) FAIL() << "sample " << i;
  }
}

TEST(CameraModel, AnalyticJacobianMatchesNumericNearOpticalAxis) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 1000; ++i) {
    const Sample s = RandomSample(rng, /*axis_offset=*/1e-4 * (i % 10), /*angle=*/0.5);
    CheckAgainstReferences(s, 1e-6);
    if (HasFailure()) FAIL() << "sample " << i;
  }
}

TEST(CameraModel, AnalyticJacobianMatchesNumericForTinyRotations) {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 500; ++i) {
    // Includes |w|^2 below machine epsilon, where the first-order rotation is used.
    const Sample s = RandomSample(rng, 0.2, std::pow(10.0, -1.0 - 9.0 * (i % 10) / 9.0));
    CheckAgainstReferences(s, 1e-6);
    if (HasFailure()) FAIL() << "sample " << i;
  }
}

TEST(CameraModel, ProjectionFollowsBalConvention) {
  // Identity pose, point straight ahead at depth 2 (P.z = -2): p = -P.xy / P.z.
  const double camera[9] = {0, 0, 0, 0, 0, 0, 1000.0, 0.0, 0.0};
  const double point[3] = {0.2, -0.4, -2.0};
  double predicted[2];
  ProjectBal(camera, point, predicted);
  EXPECT_DOUBLE_EQ(predicted[0], 1000.0 * 0.1);
  EXPECT_DOUBLE_EQ(predicted[1], 1000.0 * -0.2);
  // Radial distortion scales by 1 + k1 r^2 + k2 r^4.
  const double distorted[9] = {0, 0, 0, 0, 0, 0, 1000.0, 0.1, 0.01};
  ProjectBal(distorted, point, predicted);
  const double r2 = 0.1 * 0.1 + 0.2 * 0.2;
  EXPECT_DOUBLE_EQ(predicted[0], 1000.0 * (1 + 0.1 * r2 + 0.01 * r2 * r2) * 0.1);
}

}  // namespace
}  // namespace tiepoint
