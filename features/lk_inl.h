// Internal: pieces of the LK tracker of features/lk.h shared by the CPU reference (lk.cc)
// and the CUDA kernel (lk_cuda.cu). Not a public header.
#pragma once

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define TIEPOINT_LK_HD __host__ __device__ __forceinline__
#define TIEPOINT_LK_UNROLL _Pragma("unroll")
#else
#define TIEPOINT_LK_HD inline
#define TIEPOINT_LK_UNROLL
#endif
// Image reads through the read-only cache on the device.
#ifdef __CUDA_ARCH__
#define TIEPOINT_LK_LOAD(p) __ldg(p)
#else
#define TIEPOINT_LK_LOAD(p) (*(p))
#endif

namespace tiepoint::lk_internal {

// Gain 1 + alpha is kept in [kLkMinGain, kLkMaxGain]: outside it the patch is being matched
// by a near-constant (gain collapsing to 0), a degenerate fit seen on KITTI, not a change
// of exposure.
constexpr float kLkMinGain = 0.5f;
constexpr float kLkMaxGain = 2.0f;
// A feature that moves further than this (level pixels) from where a level's iterations
// started (the prediction doubled from the level above) has diverged. Measured from the
// start, not from the feature: with a prediction (constant velocity, a homography) the
// true shift itself can exceed it: on KITTI 00 frames 3-4 features near the right border
// move 60-70 px per frame, and a cap on the shift itself lost them as kOutside (36 of
// 130 lost tracks; 16 with this rule).
constexpr float kLkMaxLevelShift = 64.0f;

// Unknowns on `level`: (dx, dy) always, the bias beta with gain_bias, and the gain alpha
// only on fine levels (8x8 coarse patches estimate it badly).
TIEPOINT_LK_HD int LkUnknowns(bool gain_bias, int coarse_level, int level) {
  return !gain_bias ? 2 : (level >= coarse_level ? 3 : 4);
}

// True while the patch centre stays within half a patch of the level.
TIEPOINT_LK_HD bool InsideLevel(float x, float y, int w, int h, float half) {
  return x >= -half && y >= -half && x <= w - 1 + half && y <= h - 1 + half;
}

// Bilinear sample of an 8-bit level at (x, y), clamped to the border.
TIEPOINT_LK_HD float Bilinear(const uint8_t* img, int w, int h, float x, float y) {
  x = fminf(fmaxf(x, -1.0f), static_cast<float>(w));
  y = fminf(fmaxf(y, -1.0f), static_cast<float>(h));
  const float xf = floorf(x), yf = floorf(y);
  const float fx = x - xf, fy = y - yf;
  const int x0 = static_cast<int>(xf), y0 = static_cast<int>(yf);
  const int xa = x0 < 0 ? 0 : (x0 > w - 1 ? w - 1 : x0);
  const int xb = x0 + 1 < 0 ? 0 : (x0 + 1 > w - 1 ? w - 1 : x0 + 1);
  const int ya = y0 < 0 ? 0 : (y0 > h - 1 ? h - 1 : y0);
  const int yb = y0 + 1 < 0 ? 0 : (y0 + 1 > h - 1 ? h - 1 : y0 + 1);
  const float a = TIEPOINT_LK_LOAD(img + ya * w + xa), b = TIEPOINT_LK_LOAD(img + ya * w + xb);
  const float c = TIEPOINT_LK_LOAD(img + yb * w + xa), d = TIEPOINT_LK_LOAD(img + yb * w + xb);
  return (1.0f - fy) * ((1.0f - fx) * a + fx * b) + fy * ((1.0f - fx) * c + fx * d);
}

// Template value and central-difference gradient at (x, y).
TIEPOINT_LK_HD void TemplateSample(const uint8_t* img, int w, int h, float x, float y, float* t,
                                   float* gx, float* gy) {
  *t = Bilinear(img, w, h, x, y);
  *gx = 0.5f * (Bilinear(img, w, h, x + 1.0f, y) - Bilinear(img, w, h, x - 1.0f, y));
  *gy = 0.5f * (Bilinear(img, w, h, x, y + 1.0f) - Bilinear(img, w, h, x, y - 1.0f));
}

// Index of G(r, c), r <= c, in the packed upper triangle of a 4x4 symmetric matrix:
// (0,0) (0,1) (0,2) (0,3) (1,1) (1,2) (1,3) (2,2) (2,3) (3,3).
TIEPOINT_LK_HD int Packed(int r, int c) { return r * 4 - (r * (r - 1)) / 2 + (c - r); }

// Cholesky factor L (row-major 4x4, lower) of the leading n x n block (n = 2, 3 or 4) of a
// packed symmetric matrix, padded to 4x4 with the identity so that every loop has a fixed
// trip count (registers only on the device). The diagonal holds 1 / L_jj: the solve, run
// every iteration, then multiplies instead of dividing (a double division is a long
// dependent instruction sequence on the GPU). False when a pivot is not clearly positive.
TIEPOINT_LK_HD bool Cholesky(const double* g, int n, double* l) {
  double a[4][4];
TIEPOINT_LK_UNROLL
  for (int i = 0; i < 4; ++i) {
TIEPOINT_LK_UNROLL
    for (int j = 0; j < 4; ++j) {
      const int r = i < j ? i : j, c = i < j ? j : i;
      a[i][j] = (i < n && j < n) ? g[Packed(r, c)] : (i == j ? 1.0 : 0.0);
      l[i * 4 + j] = 0.0;
    }
  }
  bool ok = true;
TIEPOINT_LK_UNROLL
  for (int j = 0; j < 4; ++j) {
    double d = a[j][j];
TIEPOINT_LK_UNROLL
    for (int k = 0; k < j; ++k) d -= l[j * 4 + k] * l[j * 4 + k];
    ok = ok && d > 1e-9 * a[j][j] && d > 0.0;
#ifdef __CUDA_ARCH__
    const double inv = rsqrt(d > 0.0 ? d : 1.0);  // far shorter than 1 / sqrt on the GPU
#else
    const double inv = 1.0 / sqrt(d > 0.0 ? d : 1.0);
#endif
    l[j * 4 + j] = inv;
TIEPOINT_LK_UNROLL
    for (int i = j + 1; i < 4; ++i) {
      double v = a[i][j];
TIEPOINT_LK_UNROLL
      for (int k = 0; k < j; ++k) v -= l[i * 4 + k] * l[j * 4 + k];
      l[i * 4 + j] = v * inv;
    }
  }
  return ok;
}

// Solves L L^T z = b for the leading n entries (z beyond n is 0), L from Cholesky().
TIEPOINT_LK_HD void CholeskySolve(const double* l, int n, const double* b, double* z) {
  double y[4];
TIEPOINT_LK_UNROLL
  for (int i = 0; i < 4; ++i) {
    double v = i < n ? b[i] : 0.0;
TIEPOINT_LK_UNROLL
    for (int k = 0; k < i; ++k) v -= l[i * 4 + k] * y[k];
    y[i] = v * l[i * 4 + i];
  }
TIEPOINT_LK_UNROLL
  for (int i = 3; i >= 0; --i) {
    double v = y[i];
TIEPOINT_LK_UNROLL
    for (int k = i + 1; k < 4; ++k) v -= l[k * 4 + i] * z[k];
    z[i] = v * l[i * 4 + i];
  }
}

// Smallest eigenvalue of [[a, b], [b, c]].
TIEPOINT_LK_HD double MinEigen2(double a, double b, double c) {
  const double h = 0.5 * (a - c);
  return 0.5 * (a + c) - sqrt(h * h + b * b);
}

}  // namespace tiepoint::lk_internal
