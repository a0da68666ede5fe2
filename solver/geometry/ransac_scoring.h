// Vectorised residuals for scoring RANSAC hypotheses (internal to solver/; used by
// solver/geometry/two_view_geometry.cc through ransac.h's bounded scoring).
//
// The correspondences are held as a structure of arrays of float (one array per
// coordinate), so that the loops below compile to SIMD code: 8 lanes with AVX2, chosen at
// run time by GCC's function multiversioning (target_clones "avx2" / "default"), 4 with
// the x86-64 baseline SSE2 otherwise. Neither clone contracts to FMA and no sum is
// reordered (TruncatedSum keeps 8 explicit lanes), so both give the same bits: results do
// not depend on the CPU.
//
// Precision: pixel coordinates are stored relative to an origin per image (the mean of
// that image's points), so their magnitude stays at the image size and float's 24 bits
// resolve ~1e-4 px; the model coefficients are formed in double and then rounded once.
// A squared error near the threshold may land on the other side of it than the double
// computation (two_view::SampsonSquaredError etc.) would put it: that changes a
// hypothesis's score by at most one such point, never the final inliers, which are
// counted in double precision.
#pragma once

#include <vector>

namespace tiepoint {
namespace two_view {

// Correspondences i = 0..n-1 as float arrays: a = point in image 1, b = point in image 2,
// each minus its image's origin (pixels). For the essential matrix, also the normalised
// rays K^-1 (x, y, 1) of both points (ux, uy; z = 1), without an origin.
struct FloatCorrespondences {
  std::vector<float> ax, ay, bx, by;
  std::vector<float> u1x, u1y, u2x, u2y;  // empty unless filled for the essential matrix
  double origin1[2] = {0, 0}, origin2[2] = {0, 0};
  int size() const { return static_cast<int>(ax.size()); }
};

// Squared Sampson distances (pixels^2) of points [0, n) for the fundamental matrix Fc
// (row-major) in origin-relative coordinates, Fc = T2^T F T1 with T = translation by
// +origin. A zero denominator gives 0 when the algebraic error is 0, else +inf (as
// two_view::SampsonSquaredError).
void SampsonSquaredErrors(const float Fc[9], const float* ax, const float* ay, const float* bx,
                          const float* by, int n, float* e2);

// Squared transfer distances |b - Hc a|^2 (pixels^2) for Hc = T2^-1 H T1 (origin-relative
// coordinates); +inf where the third coordinate of Hc a is 0.
void TransferSquaredErrors(const float Hc[9], const float* ax, const float* ay, const float* bx,
                           const float* by, int n, float* e2);

// Sets e2[i] = +inf for every ray pair (u1, u2) that does not triangulate in front of
// both cameras of the pose (R row-major, t) = cam2_from_cam1 (as two_view::InFrontOfBoth,
// parallel rays included).
void MarkBehindCameras(const float R[9], const float t[3], const float* u1x, const float* u1y,
                       const float* u2x, const float* u2y, int n, float* e2);

// Sum over i of min(e2[i], t2) (NaN counts as t2), and *count = #{i : e2[i] <= t2}.
// Summed in 8 fixed lanes, then the lanes in order: the same bits on every CPU.
float TruncatedSum(const float* e2, int n, float t2, int* count);

}  // namespace two_view
}  // namespace tiepoint
