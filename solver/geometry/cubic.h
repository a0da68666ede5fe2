// Real roots of a cubic, shared by the CPU 7-point solver (fundamental.cc) and the GPU
// hypothesis search (fundamental_cuda.cu), so both solve det(a F1 + (1 - a) F2) = 0 alike.
#pragma once

#include <cmath>

#include "io/base/host_device.h"

namespace tiepoint {
namespace two_view {

// Coefficients c[k] of a^k of the cubic through (0, d0), (1, d1), (-1, dm1), (2, d2): how
// the 7-point solvers get det(a F1 + (1 - a) F2) from four determinants.
TIEPOINT_HOST_DEVICE inline void CubicThroughValues(double d0, double d1, double dm1, double d2, double c[4]) {
  c[0] = d0;
  c[2] = 0.5 * (d1 + dm1) - c[0];
  const double odd = 0.5 * (d1 - dm1);  // c3 + c1
  c[3] = (d2 - 4.0 * c[2] - c[0] - 2.0 * odd) / 6.0;
  c[1] = odd - c[3];
}

// Real roots of c3 a^3 + c2 a^2 + c1 a + c0 (lower degree when leading terms vanish), each
// polished by two Newton steps; returns how many (0-3).
TIEPOINT_HOST_DEVICE inline int SolveCubic(double c3, double c2, double c1, double c0, double roots[3]) {
  using std::acos;
  using std::cbrt;
  using std::cos;
  using std::fabs;
  using std::fmax;
  using std::sqrt;
  const double scale = fmax(fmax(fabs(c3), fabs(c2)), fmax(fabs(c1), fabs(c0)));
  if (!(scale > 0.0)) return 0;
  if (fabs(c3) < 1e-12 * scale) {
    if (fabs(c2) < 1e-12 * scale) {
      if (fabs(c1) < 1e-12 * scale) return 0;
      roots[0] = -c0 / c1;
      return 1;
    }
    const double disc = c1 * c1 - 4 * c2 * c0;
    if (disc < 0) return 0;
    const double s = sqrt(disc);
    const double q = -0.5 * (c1 + (c1 >= 0 ? s : -s));
    int n = 0;
    if (q != 0.0) roots[n++] = c0 / q;
    roots[n++] = q / c2;
    return n;
  }
  // Closed form (the eigenvalues of the companion matrix cost ~10x more): depressed
  // cubic t^3 + p t + q = 0 with a = t - b / 3, then Newton steps on the original.
  const double b = c2 / c3, c = c1 / c3, d = c0 / c3;
  const double p = c - b * b / 3.0;
  const double q = (2.0 * b * b * b - 9.0 * b * c) / 27.0 + d;
  const double disc = 0.25 * q * q + p * p * p / 27.0;
  int n = 0;
  if (disc > 0.0) {
    const double r = sqrt(disc);
    roots[n++] = cbrt(-0.5 * q + r) + cbrt(-0.5 * q - r) - b / 3.0;
  } else if (p < 0.0) {
    const double m = 2.0 * sqrt(-p / 3.0);
    const double x = 3.0 * q / (p * m);
    const double arg = x < -1.0 ? -1.0 : (x > 1.0 ? 1.0 : x);
    const double theta = acos(arg) / 3.0;
    const double two_pi_over_3 = 2.0943951023931954923;
    for (int k = 0; k < 3; ++k) roots[n++] = m * cos(theta - k * two_pi_over_3) - b / 3.0;
  } else {  // p = q = 0: a triple root
    roots[n++] = -b / 3.0;
  }
  for (int i = 0; i < n; ++i) {
    double a = roots[i];
    for (int step = 0; step < 2; ++step) {
      const double f = ((c3 * a + c2) * a + c1) * a + c0, df = (3 * c3 * a + 2 * c2) * a + c1;
      const double delta = f / df;
      if (df != 0.0 && delta - delta == 0.0) a -= delta;  // delta finite
    }
    roots[i] = a;
  }
  return n;
}

}  // namespace two_view
}  // namespace tiepoint
