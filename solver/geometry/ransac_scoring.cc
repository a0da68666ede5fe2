#include "solver/geometry/ransac_scoring.h"

#include <algorithm>
#include <limits>

// GCC builds an AVX2 and a baseline copy of each kernel and picks one when the program
// loads (ifunc). "avx2" does not include FMA, so both copies round alike.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__)
#define TIEPOINT_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TIEPOINT_SIMD_CLONES
#endif

namespace tiepoint {
namespace two_view {

TIEPOINT_SIMD_CLONES
void SampsonSquaredErrors(const float Fc[9], const float* __restrict ax, const float* __restrict ay,
                          const float* __restrict bx, const float* __restrict by, int n,
                          float* __restrict e2) {
  const float f0 = Fc[0], f1 = Fc[1], f2 = Fc[2], f3 = Fc[3], f4 = Fc[4], f5 = Fc[5], f6 = Fc[6],
              f7 = Fc[7], f8 = Fc[8];
  const float inf = std::numeric_limits<float>::infinity();
  for (int i = 0; i < n; ++i) {
    const float x = ax[i], y = ay[i], u = bx[i], v = by[i];
    const float p0 = f0 * x + f1 * y + f2;  // F a
    const float p1 = f3 * x + f4 * y + f5;
    const float p2 = f6 * x + f7 * y + f8;
    const float q0 = f0 * u + f3 * v + f6;  // F^T b
    const float q1 = f1 * u + f4 * v + f7;
    const float e = u * p0 + v * p1 + p2;
    const float denom = p0 * p0 + p1 * p1 + q0 * q0 + q1 * q1;
    // Selects, not branches, so that the loop vectorises: the division always runs
    // (on a harmless denominator where the real one is not positive).
    const float ratio = (e * e) / std::max(denom, std::numeric_limits<float>::min());
    const float fallback = e == 0.0f ? 0.0f : inf;
    e2[i] = denom > 0.0f ? ratio : fallback;
  }
}

TIEPOINT_SIMD_CLONES
void TransferSquaredErrors(const float Hc[9], const float* __restrict ax, const float* __restrict ay,
                           const float* __restrict bx, const float* __restrict by, int n,
                           float* __restrict e2) {
  const float h0 = Hc[0], h1 = Hc[1], h2 = Hc[2], h3 = Hc[3], h4 = Hc[4], h5 = Hc[5], h6 = Hc[6],
              h7 = Hc[7], h8 = Hc[8];
  const float inf = std::numeric_limits<float>::infinity();
  for (int i = 0; i < n; ++i) {
    const float x = ax[i], y = ay[i];
    const float w = h6 * x + h7 * y + h8;
    const float dx = (h0 * x + h1 * y + h2) / w - bx[i];
    const float dy = (h3 * x + h4 * y + h5) / w - by[i];
    const float d2 = dx * dx + dy * dy;
    e2[i] = w == 0.0f ? inf : d2;
  }
}

TIEPOINT_SIMD_CLONES
void MarkBehindCameras(const float R[9], const float t[3], const float* __restrict u1x,
                       const float* __restrict u1y, const float* __restrict u2x,
                       const float* __restrict u2y, int n, float* __restrict e2) {
  const float inf = std::numeric_limits<float>::infinity();
  for (int i = 0; i < n; ++i) {
    // d2 u2 = d1 (R u1) + t, least squares in (d1, d2): the normal equations of
    // A = [R u1, -u2] are [p q; q r] d = g.
    const float x = u1x[i], y = u1y[i], u = u2x[i], v = u2y[i];
    const float a0 = R[0] * x + R[1] * y + R[2];
    const float a1 = R[3] * x + R[4] * y + R[5];
    const float a2 = R[6] * x + R[7] * y + R[8];
    const float p = a0 * a0 + a1 * a1 + a2 * a2;
    const float q = -(a0 * u + a1 * v + a2);
    const float r = u * u + v * v + 1.0f;
    const float g0 = -(a0 * t[0] + a1 * t[1] + a2 * t[2]);
    const float g1 = u * t[0] + v * t[1] + t[2];
    // The Gram determinant p r - q^2 as |R u1 x u2|^2: no cancellation for near-parallel rays.
    const float c0 = a1 - a2 * v, c1 = a2 * u - a0, c2 = a0 * v - a1 * u;
    const float det = c0 * c0 + c1 * c1 + c2 * c2;
    const bool separate = det > 1e-14f * (p * p + 2.0f * q * q + r * r);
    // With det > 0 the signs of d1 and d2 are those of the numerators of Cramer's rule.
    const bool in_front = (r * g0 - q * g1 > 0.0f) & (p * g1 - q * g0 > 0.0f);
    const float e = e2[i];
    e2[i] = (separate & in_front) ? e : inf;
  }
}

TIEPOINT_SIMD_CLONES
float TruncatedSum(const float* __restrict e2, int n, float t2, int* count) {
  constexpr int kLanes = 8;
  float sum[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  int inliers[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const float e = e2[i + l];
      const bool in = e <= t2;  // false for NaN
      sum[l] += in ? e : t2;
      inliers[l] += in ? 1 : 0;
    }
  }
  for (int l = 0; i < n; ++i, ++l) {
    const float e = e2[i];
    const bool in = e <= t2;
    sum[l] += in ? e : t2;
    inliers[l] += in ? 1 : 0;
  }
  *count = inliers[0] + inliers[1] + inliers[2] + inliers[3] + inliers[4] + inliers[5] +
           inliers[6] + inliers[7];
  return ((sum[0] + sum[1]) + (sum[2] + sum[3])) + ((sum[4] + sum[5]) + (sum[6] + sum[7]));
}

}  // namespace two_view
}  // namespace tiepoint
