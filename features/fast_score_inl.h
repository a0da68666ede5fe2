// Internal: the per-pixel FAST test and scores of features/fast.h, compiled for the host
// (fast.cc) and the device (fast_cuda.cu) from this one source so that both give the same
// bits. Not a public header: include only from those two files.
#pragma once

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define TIEPOINT_HD __host__ __device__ __forceinline__
#define TIEPOINT_UNROLL _Pragma("unroll")
#else
#define TIEPOINT_HD inline
#define TIEPOINT_UNROLL
#endif

namespace tiepoint::fast_internal {

// Circle offsets, p_0 above the centre, clockwise (x right, y down).
#define TIEPOINT_FAST_CIRCLE_X {0, 1, 2, 3, 3, 3, 2, 1, 0, -1, -2, -3, -3, -3, -2, -1}
#define TIEPOINT_FAST_CIRCLE_Y {-3, -3, -2, -1, 0, 1, 2, 3, 3, 3, 2, 1, 0, -1, -2, -3}

// Score kinds, in FastScore's order.
constexpr int kScoreMaxThreshold = 0;
constexpr int kScoreSad = 1;
constexpr int kScoreHarris = 2;
constexpr int kScoreShiTomasi = 3;

// True when the 16-bit circular mask holds `n` contiguous ones (builds the table).
TIEPOINT_HD bool HasArc(uint32_t mask, int n) {
  const uint32_t doubled = mask | (mask << 16);
  uint32_t run = doubled;
  for (int k = 1; k < n; ++k) run &= doubled >> k;
  return run != 0;
}

TIEPOINT_HD bool TableBit(const uint32_t* table, uint32_t mask) {
  return (table[mask >> 5] >> (mask & 31)) & 1u;
}

// Smallest of the `n` (9..12) circularly contiguous values v[i..i+n-1] (indices mod 16),
// largest over the 16 starts i: windows of 2, 4 and 8 by doubling, then the rest.
TIEPOINT_HD int MaxArcMin(const int* v, int n) {
  int m2[16], m4[16], m8[16];
TIEPOINT_UNROLL
  for (int i = 0; i < 16; ++i) m2[i] = v[i] < v[(i + 1) & 15] ? v[i] : v[(i + 1) & 15];
TIEPOINT_UNROLL
  for (int i = 0; i < 16; ++i) m4[i] = m2[i] < m2[(i + 2) & 15] ? m2[i] : m2[(i + 2) & 15];
TIEPOINT_UNROLL
  for (int i = 0; i < 16; ++i) m8[i] = m4[i] < m4[(i + 4) & 15] ? m4[i] : m4[(i + 4) & 15];
  int best = -1024;
TIEPOINT_UNROLL
  for (int i = 0; i < 16; ++i) {
    int rest = v[(i + 8) & 15];                              // n = 9
    if (n == 10) rest = m2[(i + 8) & 15];
    if (n == 11) rest = m2[(i + 8) & 15] < v[(i + 10) & 15] ? m2[(i + 8) & 15] : v[(i + 10) & 15];
    if (n == 12) rest = m4[(i + 8) & 15];
    const int m = m8[i] < rest ? m8[i] : rest;
    best = m > best ? m : best;
  }
  return best;
}

// `img` points at the centre pixel, `stride` is the row pitch in bytes; `table` is
// FastLookupTable(arc_length). Returns the score,
// or -infinity when the pixel is no corner. The caller keeps kFastBorder pixels of margin.
TIEPOINT_HD float PixelScore(const uint8_t* img, int stride, int threshold, int arc_length,
                             int score_kind, const uint32_t* table) {
  const int cx[16] = TIEPOINT_FAST_CIRCLE_X;
  const int cy[16] = TIEPOINT_FAST_CIRCLE_Y;
  const int c = img[0];
  int d[16];
  uint32_t bright = 0, dark = 0;
TIEPOINT_UNROLL
  for (int i = 0; i < 16; ++i) {
    d[i] = static_cast<int>(img[cy[i] * stride + cx[i]]) - c;
    bright |= static_cast<uint32_t>(d[i] > threshold) << i;
    dark |= static_cast<uint32_t>(d[i] < -threshold) << i;
  }
  const bool is_bright = TableBit(table, bright);
  const bool is_dark = TableBit(table, dark);
  if (!is_bright && !is_dark) return -INFINITY;

  if (score_kind == kScoreMaxThreshold) {
    // The largest t' that still passes. "All n pixels of an arc brighter than c + t'" holds
    // exactly for t' < the arc's smallest d, so t' = (max over arcs of the arc's smallest d)
    // - 1, and likewise for -d (darker); the larger of the two. (The sign that fails at t
    // gives less than t, the passing one at least t; |d| <= 255 keeps t' <= 254.) Direct,
    // without branching on the pixel values: a bisection with the table test gave the same
    // numbers but diverged within warps on the GPU (5x slower kernel on the H100).
    // Only one sign passes: two arcs of >= 9 of the 16 pixels share a pixel, which cannot
    // be both brighter and darker, so the larger of the two is the passing sign's and one
    // scan over the arcs suffices (half the work of scanning both).
    int v[16];
TIEPOINT_UNROLL
    for (int i = 0; i < 16; ++i) v[i] = is_bright ? d[i] : -d[i];
    return static_cast<float>(MaxArcMin(v, arc_length) - 1);
  }
  if (score_kind == kScoreSad) {
    int sum_b = 0, sum_d = 0;
TIEPOINT_UNROLL
    for (int i = 0; i < 16; ++i) {
      const int b = d[i] - threshold, k = -d[i] - threshold;
      sum_b += b > 0 ? b : 0;
      sum_d += k > 0 ? k : 0;
    }
    int best = 0;
    if (is_bright) best = sum_b;
    if (is_dark && sum_d > best) best = sum_d;
    return static_cast<float>(best);
  }
  // Harris / Shi-Tomasi: Sobel gradients over the 5x5 window, exact integer sums.
  long long sxx = 0, syy = 0, sxy = 0;
  for (int wy = -2; wy <= 2; ++wy) {
    for (int wx = -2; wx <= 2; ++wx) {
      const uint8_t* p = img + wy * stride + wx;
      const int gx = (p[-stride + 1] + 2 * p[1] + p[stride + 1]) -
                     (p[-stride - 1] + 2 * p[-1] + p[stride - 1]);
      const int gy = (p[stride - 1] + 2 * p[stride] + p[stride + 1]) -
                     (p[-stride - 1] + 2 * p[-stride] + p[-stride + 1]);
      sxx += gx * gx;
      syy += gy * gy;
      sxy += gx * gy;
    }
  }
  const long long det = sxx * syy - sxy * sxy;
  const long long tr = sxx + syy;
  if (score_kind == kScoreHarris) {
    // Scaled by 2^-20 to keep the float in a readable range; the products are exact in
    // int64 and each double operation is rounded once on both host and device.
    const double tr2 = static_cast<double>(tr) * static_cast<double>(tr);
    const double k_tr2 = 0.04 * tr2;
    const double r = static_cast<double>(det) - k_tr2;
    return static_cast<float>(r * (1.0 / 1048576.0));
  }
  const long long diff = sxx - syy;
  const double disc = static_cast<double>(diff * diff + 4 * sxy * sxy);
  const double root = sqrt(disc);
  const double lambda_min = (static_cast<double>(tr) - root) * 0.5;
  return static_cast<float>(lambda_min);
}

}  // namespace tiepoint::fast_internal
