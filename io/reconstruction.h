// An image-based reconstruction: cameras (intrinsics shared by many images), images (a
// pose each), 3D points with their tracks. The in-memory form of COLMAP's sparse model
// (cameras.txt / images.txt / points3D.txt and their .bin twins, io/colmap_model.h).
//
// Conventions (COLMAP's, so that reading and writing a model changes nothing):
//  - Image coordinates in pixels, x right, y down, with (0, 0) the top-left CORNER of the
//    top-left pixel, so that pixel's centre is (0.5, 0.5). tiepoint's features use (0, 0)
//    for that centre: sfm/ adds 0.5 when it makes points2D from keypoints, and that is the
//    only place the conversion happens.
//  - Poses are cam_from_world: X_cam = R(q) X_world + t, q = (w, x, y, z) a unit
//    quaternion (Hamilton, as COLMAP's qvec), t in world units.
//  - Camera models and parameter order (COLMAP ids in brackets), for a point in the camera
//    frame with u = X/Z, v = Y/Z:
//      SIMPLE_PINHOLE [0]  f, cx, cy           x = f u + cx,        y = f v + cy
//      PINHOLE        [1]  fx, fy, cx, cy      x = fx u + cx,       y = fy v + cy
//      SIMPLE_RADIAL  [2]  f, cx, cy, k        d = k r2             (r2 = u^2 + v^2)
//      RADIAL         [3]  f, cx, cy, k1, k2   d = k1 r2 + k2 r2^2
//    radial models: x = f u (1 + d) + cx, y = f v (1 + d) + cy.
//      OPENCV         [4]  fx, fy, cx, cy, k1, k2, p1, p2
//    x = fx (u d' + 2 p1 u v + p2 (r2 + 2 u^2)) + cx,
//    y = fy (v d' + 2 p2 u v + p1 (r2 + 2 v^2)) + cy, with d' = 1 + k1 r2 + k2 r2^2
//    (OpenCV's and COLMAP's radial-tangential model, Brown-Conrady to second order).
//  - A point2D with no 3D point has point3D_id = kInvalidPoint3DId (COLMAP writes -1 in
//    text and 2^64 - 1 in binary).
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "io/base/status.h"

namespace tiepoint {

enum class CameraModelId : int {
  kSimplePinhole = 0,
  kPinhole = 1,
  kSimpleRadial = 2,
  kRadial = 3,
  kOpenCV = 4,
  kOpenCVFisheye = 5,
  kFullOpenCV = 6,
  kFov = 7,
  kSimpleRadialFisheye = 8,
  kRadialFisheye = 9,
  kThinPrismFisheye = 10,
};

// "SIMPLE_PINHOLE", "PINHOLE", "SIMPLE_RADIAL", "RADIAL", "OPENCV", "OPENCV_FISHEYE",
// "FULL_OPENCV", "FOV", "SIMPLE_RADIAL_FISHEYE", "RADIAL_FISHEYE", "THIN_PRISM_FISHEYE"
// (COLMAP's names: every model of COLMAP 3.8).
const char* CameraModelName(CameraModelId model);
// Accepts COLMAP's names and the lower-case forms ("simple_radial"); else kInvalidOptions
// naming the choices.
Status CameraModelFromName(const std::string& name, CameraModelId* model);
// Accepts the COLMAP ids 0..10; false otherwise.
bool CameraModelFromId(int id, CameraModelId* model);
// Parameters per model, in the order above: 3, 4, 4, 5, 8, 8, 12, 5, 4, 5, 12.
int CameraModelNumParams(CameraModelId model);
// Their names in order, as COLMAP lists them: "f,cx,cy", "fx,fy,cx,cy", "f,cx,cy,k",
// "f,cx,cy,k1,k2", "fx,fy,cx,cy,k1,k2,p1,p2", "fx,fy,cx,cy,k1,k2,k3,k4",
// "fx,fy,cx,cy,k1,k2,p1,p2,k3,k4,k5,k6", "fx,fy,cx,cy,omega", "f,cx,cy,k", "f,cx,cy,k1,k2",
// "fx,fy,cx,cy,k1,k2,p1,p2,k3,k4,sx1,sy1".
std::string CameraModelParamNames(CameraModelId model);
// Whether the model has a focal length per axis (PINHOLE, OPENCV, OPENCV_FISHEYE,
// FULL_OPENCV, FOV, THIN_PRISM_FISHEYE): then fx, fy, cx, cy are parameters 0-3, else f,
// cx, cy are 0-2.
inline bool CameraModelHasTwoFocals(CameraModelId model) {
  return model == CameraModelId::kPinhole || model == CameraModelId::kOpenCV ||
         model == CameraModelId::kOpenCVFisheye || model == CameraModelId::kFullOpenCV ||
         model == CameraModelId::kFov || model == CameraModelId::kThinPrismFisheye;
}
// Index of the first distortion parameter (the rest are distortion too): 3 for the radial
// models and the one-focal fisheye models, 4 for the two-focal models with distortion, the
// parameter count for the pinhole models (none).
int CameraModelDistortionBegin(CameraModelId model);
// The fisheye models (COLMAP's equidistant projection with a polynomial in the angle, its
// k's consecutive): OPENCV_FISHEYE, SIMPLE_RADIAL_FISHEYE, RADIAL_FISHEYE. THIN_PRISM_FISHEYE
// is equidistant too, but its k's are apart and it has tangential and prism terms: it has
// its own cases (ThinPrismFisheyeDistortion).
inline bool CameraModelIsFisheye(CameraModelId model) {
  return model == CameraModelId::kOpenCVFisheye || model == CameraModelId::kSimpleRadialFisheye ||
         model == CameraModelId::kRadialFisheye;
}
// A fisheye model's polynomial terms k1.. (4, 1 or 2; 0 for the others): its parameters from
// CameraModelDistortionBegin on.
inline int CameraModelFisheyeTerms(CameraModelId model) {
  return model == CameraModelId::kOpenCVFisheye ? 4
         : model == CameraModelId::kRadialFisheye ? 2
         : model == CameraModelId::kSimpleRadialFisheye ? 1 : 0;
}
// Whether the model has distortion terms past its first two, which the mapper frees only
// once those are kept (ReconstructionBAOptions::refine_tangential): OPENCV's p1, p2,
// OPENCV_FISHEYE's k3, k4, FULL_OPENCV's p1, p2, k3..k6 and THIN_PRISM_FISHEYE's p1, p2, k3,
// k4, sx1, sy1 (for all of them, the parameters after k1, k2).
inline bool CameraModelHasLaterDistortionTerms(CameraModelId model) {
  return model == CameraModelId::kOpenCV || model == CameraModelId::kOpenCVFisheye ||
         model == CameraModelId::kFullOpenCV || model == CameraModelId::kThinPrismFisheye;
}

inline constexpr uint64_t kInvalidPoint3DId = ~uint64_t{0};

struct Camera {
  uint32_t camera_id = 0;
  CameraModelId model = CameraModelId::kSimpleRadial;
  int width = 0, height = 0;
  std::vector<double> params;  // CameraModelNumParams(model) values, order above

  // Focal length(s) and principal point, whatever the model.
  double MeanFocal() const;
  double fx() const { return params[0]; }
  double fy() const { return CameraModelHasTwoFocals(model) ? params[1] : params[0]; }
  double cx() const { return CameraModelHasTwoFocals(model) ? params[2] : params[1]; }
  double cy() const { return CameraModelHasTwoFocals(model) ? params[3] : params[2]; }
  void SetFocal(double f) {  // every focal parameter
    params[0] = f;
    if (CameraModelHasTwoFocals(model)) params[1] = f;
  }
  void SetPrincipalPoint(double x, double y) {
    const int k = CameraModelHasTwoFocals(model) ? 2 : 1;
    params[k] = x;
    params[k + 1] = y;
  }
  bool HasDistortion() const {
    return CameraModelDistortionBegin(model) < static_cast<int>(params.size());
  }
};

struct Point2D {
  double x = 0, y = 0;
  uint64_t point3D_id = kInvalidPoint3DId;
};

struct Image {
  uint32_t image_id = 0;
  uint32_t camera_id = 0;
  std::string name;           // file name relative to the image folder
  double qvec[4] = {1, 0, 0, 0};  // cam_from_world rotation (w, x, y, z)
  double tvec[3] = {0, 0, 0};     // cam_from_world translation
  std::vector<Point2D> points2D;
};

struct TrackElement {
  uint32_t image_id = 0;
  uint32_t point2D_idx = 0;
};

struct Point3D {
  double xyz[3] = {0, 0, 0};
  uint8_t rgb[3] = {0, 0, 0};
  double error = -1;  // mean reprojection error in pixels (COLMAP: -1 when unknown)
  std::vector<TrackElement> track;
};

struct Reconstruction {
  std::map<uint32_t, Camera> cameras;    // by camera_id
  std::map<uint32_t, Image> images;      // by image_id (registered images)
  std::map<uint64_t, Point3D> points3D;  // by point3D_id

  int64_t NumObservations() const;
  double MeanTrackLength() const;
  // Mean over all observations of |projection - point2D| in pixels (0 when empty).
  double MeanReprojectionError() const;
  // Mean of the points' stored Point3D::error over the points that have one (!= -1), 0
  // when none: the "mean reprojection error" that COLMAP's model_analyzer prints.
  double MeanPointError() const;
  // Sets every point's error to the mean over its track of |projection - point2D| in
  // pixels (observations behind their camera left out; -1 when none is left).
  void UpdatePointErrors();
  // The ids, ascending, of the points that the given images' points2D name (ids not in
  // images or points3D are passed over): the points a local adjustment or filter takes,
  // found without a pass over the whole model. Relies on points2D agreeing with the
  // tracks, as the COLMAP readers check.
  std::vector<uint64_t> PointsSeenBy(const std::set<uint32_t>& image_ids) const;
};

// --- camera model arithmetic (templated for automatic differentiation in tests) ---

// The fisheye models' distortion, as COLMAP's: the ray at angle theta = atan(r) from the
// axis, r = |(u, v)|, lands at the normalized radius theta_d = theta (1 + k1 theta^2 + k2
// theta^4 + k3 theta^6 + k4 theta^8) (num_k of the k's, the others 0), so the distorted
// point is (u, v) theta_d / r; this returns theta_d / r (1 on the axis). With every k zero
// it is the equidistant projection.
template <typename T>
inline T FisheyeScale(const T* k, int num_k, T u, T v) {
  using std::atan;
  using std::sqrt;
  const T r2 = u * u + v * v;
  if (!(r2 > T(1e-30))) return T(1);  // on the axis: theta_d / r -> 1
  const T r = sqrt(r2);
  const T theta = atan(r), t2 = theta * theta;
  T poly = T(0);
  for (int i = num_k - 1; i >= 0; --i) poly = (poly + k[i]) * t2;
  return theta * (T(1) + poly) / r;
}

// FULL_OPENCV's distortion of the normalized point (u, v), k = (k1, k2, p1, p2, k3, k4, k5,
// k6): (u, v) (1 + k1 r^2 + k2 r^4 + k3 r^6) / (1 + k4 r^2 + k5 r^4 + k6 r^6) plus OPENCV's
// tangential terms.
template <typename T>
inline void FullOpenCVDistort(const T* k, T u, T v, T* du, T* dv) {
  const T uu = u * u, uv = u * v, vv = v * v, r2 = uu + vv;
  const T radial = (T(1) + r2 * (k[0] + r2 * (k[1] + r2 * k[4]))) / (T(1) + r2 * (k[5] + r2 * (k[6] + r2 * k[7])));
  *du = u * radial + T(2) * k[2] * uv + k[3] * (r2 + T(2) * uu);
  *dv = v * radial + T(2) * k[3] * uv + k[2] * (r2 + T(2) * vv);
}

// THIN_PRISM_FISHEYE's distortion, k = (k1, k2, p1, p2, k3, k4, sx1, sy1): the equidistant
// point (a, b) = (u, v) theta / r (theta = atan(r)), then with rho^2 = a^2 + b^2 = theta^2:
// (a, b) (1 + k1 rho^2 + k2 rho^4 + k3 rho^6 + k4 rho^8), OPENCV's tangential terms in (a,
// b), and the thin prism's (sx1 rho^2, sy1 rho^2).
template <typename T>
inline void ThinPrismFisheyeDistort(const T* k, T u, T v, T* du, T* dv) {
  const T s = FisheyeScale<T>(nullptr, 0, u, v);
  const T a = u * s, b = v * s;
  const T aa = a * a, ab = a * b, bb = b * b, r2 = aa + bb;
  const T radial = T(1) + r2 * (k[0] + r2 * (k[1] + r2 * (k[4] + r2 * k[5])));
  *du = a * radial + T(2) * k[2] * ab + k[3] * (r2 + T(2) * aa) + k[6] * r2;
  *dv = b * radial + T(2) * k[3] * ab + k[2] * (r2 + T(2) * bb) + k[7] * r2;
}

// FOV's (Devernay and Faugeras's field-of-view model) radial factor: the point (u, v) at
// radius r lands at radius atan(2 r tan(omega / 2)) / omega, so the distorted point is (u,
// v) times that over r (1 on the axis; 1 as omega -> 0, the pinhole). Where omega^2 or r^2
// is below 1e-8 the quotient is taken from its series to second order (exact to rounding
// there; the formula's derivatives would cancel). COLMAP takes a series below omega^2 =
// 1e-4, with the signs of its undistortion's (1 - omega^2 / 12 + omega^2 r^2 / 3): below
// omega = 0.01 its projection differs from the formula's by 2 omega^2 (1/12 - r^2 / 3), at
// most 1.7e-5 of the radius near the axis; elsewhere the two are the same.
template <typename T>
inline T FovScale(T omega, T u, T v) {
  using std::atan;
  using std::sqrt;
  using std::tan;
  const T r2 = u * u + v * v, w2 = omega * omega;
  if (w2 < T(1e-8)) return T(1) + w2 / T(12) - w2 * r2 / T(3);
  const T t = tan(omega / T(2));
  if (r2 < T(1e-8)) return T(2) * t / omega * (T(1) - T(4) * r2 * t * t / T(3));
  const T r = sqrt(r2);
  return atan(T(2) * r * t) / (r * omega);
}

// Pixel of the normalized image point (u, v) = (X/Z, Y/Z).
template <typename T>
inline void CameraNormalizedToPixel(CameraModelId model, const T* params, T u, T v, T* x,
                                    T* y) {
  switch (model) {
    case CameraModelId::kSimplePinhole:
      *x = params[0] * u + params[1];
      *y = params[0] * v + params[2];
      return;
    case CameraModelId::kPinhole:
      *x = params[0] * u + params[2];
      *y = params[1] * v + params[3];
      return;
    case CameraModelId::kSimpleRadial: {
      const T d = T(1) + params[3] * (u * u + v * v);
      *x = params[0] * u * d + params[1];
      *y = params[0] * v * d + params[2];
      return;
    }
    case CameraModelId::kRadial: {
      const T r2 = u * u + v * v;
      const T d = T(1) + r2 * (params[3] + params[4] * r2);
      *x = params[0] * u * d + params[1];
      *y = params[0] * v * d + params[2];
      return;
    }
    case CameraModelId::kOpenCV: {
      const T uu = u * u, uv = u * v, vv = v * v, r2 = uu + vv;
      const T d = T(1) + r2 * (params[4] + params[5] * r2);
      const T p1 = params[6], p2 = params[7];
      *x = params[0] * (u * d + T(2) * p1 * uv + p2 * (r2 + T(2) * uu)) + params[2];
      *y = params[1] * (v * d + T(2) * p2 * uv + p1 * (r2 + T(2) * vv)) + params[3];
      return;
    }
    case CameraModelId::kOpenCVFisheye: {
      const T s = FisheyeScale(params + 4, CameraModelFisheyeTerms(model), u, v);
      *x = params[0] * u * s + params[2];
      *y = params[1] * v * s + params[3];
      return;
    }
    case CameraModelId::kSimpleRadialFisheye:
    case CameraModelId::kRadialFisheye: {
      const T s = FisheyeScale(params + 3, CameraModelFisheyeTerms(model), u, v);
      *x = params[0] * u * s + params[1];
      *y = params[0] * v * s + params[2];
      return;
    }
    case CameraModelId::kFullOpenCV:
    case CameraModelId::kThinPrismFisheye: {
      T du, dv;
      if (model == CameraModelId::kFullOpenCV)
        FullOpenCVDistort(params + 4, u, v, &du, &dv);
      else
        ThinPrismFisheyeDistort(params + 4, u, v, &du, &dv);
      *x = params[0] * du + params[2];
      *y = params[1] * dv + params[3];
      return;
    }
    case CameraModelId::kFov: {
      const T s = FovScale(params[4], u, v);
      *x = params[0] * u * s + params[2];
      *y = params[1] * v * s + params[3];
      return;
    }
  }
}

// Inverse of CameraNormalizedToPixel: removes the principal point and focal length, then
// the radial distortion by solving for the undistorted radius (Newton's method kept in a
// bracket by bisection, at most 100 steps). Exact to rounding where the distortion is
// monotone in the radius; past the radius where it folds back (strong barrel distortion),
// the point maps to that radius (the fisheye models: for the angle theta, below 90
// degrees; FOV: in closed form, r = tan(omega r_d) / (2 tan(omega / 2)), radii at or past
// omega r_d = 90 degrees going to the largest finite one). The tangential terms of OPENCV,
// FULL_OPENCV and THIN_PRISM_FISHEYE leave no scalar equation: there Newton's method runs on
// both coordinates (steps halved while they do not lower the error, at most 100 steps, from
// the distorted point), as COLMAP's iterative undistortion does; where it cannot converge
// (past a fold) the best point found is returned.
void CameraPixelToNormalized(CameraModelId model, const double* params, double x, double y,
                             double* u, double* v);

// OPENCV's distortion of the normalized point (u, v), k = (k1, k2, p1, p2): the distorted
// normalized point (*du, *dv) (the pixel is (fx du + cx, fy dv + cy)) and its Jacobian in
// (u, v), 2x2 row-major (the bundle adjuster's derivatives and the undistortion's steps).
void OpenCVDistortion(const double* k, double u, double v, double* du, double* dv, double* J);

// FULL_OPENCV's and THIN_PRISM_FISHEYE's distortions (FullOpenCVDistort,
// ThinPrismFisheyeDistort; k: their 8 parameters after cx, cy) with their Jacobians in (u,
// v) (J, 2x2 row-major) and, where dk is given, in the 8 k's (2 x 8 row-major: d du / d k_i,
// then d dv / d k_i). FOV's (FovScale), with d / d omega in dk[0], dk[1].
void FullOpenCVDistortion(const double* k, double u, double v, double* du, double* dv, double* J, double* dk);
void ThinPrismFisheyeDistortion(const double* k, double u, double v, double* du, double* dv, double* J,
                                double* dk);
void FovDistortion(double omega, double u, double v, double* du, double* dv, double* J, double* dk);

// theta_d = theta (1 + k1 theta^2 + ...) (num_k of the k's) and its slope d theta_d / d theta:
// the fisheye models' radial map, for their Jacobians, their undistortion and the check
// that given k's do not fold the image.
inline void FisheyeAngleMap(const double* k, int num_k, double theta, double* theta_d, double* slope) {
  const double t2 = theta * theta;
  double poly = 0, dpoly = 0;  // sum k_i t^(2i+2), sum (2i + 3) k_i t^(2i+2)
  for (int i = num_k - 1; i >= 0; --i) {
    poly = (poly + k[i]) * t2;
    dpoly = dpoly * t2 + (2 * i + 3) * k[i] * t2;
  }
  *theta_d = theta * (1 + poly);
  *slope = 1 + dpoly;
}

// The end of FisheyeAngleMap's growing branch: the first angle below 90 degrees where its
// slope vanishes, else just short of 90 degrees (where the tangent ends). Past it the lens
// folds the image back: CameraPixelToNormalized maps farther pixels to it, and reconstruct
// refuses --camera-params whose image corner lies beyond it.
double FisheyeGrowingBranchEnd(const double* k, int num_k);

// The fisheye distortion of FisheyeScale (num_k of k1..k4): the distorted normalized point,
// its Jacobian in (u, v) (2x2 row-major), and, where dk is given, its derivatives in the k's
// (2 x num_k row-major: d du / d k_i, then d dv / d k_i). For the bundle adjuster.
void FisheyeDistortion(const double* k, int num_k, double u, double v, double* du, double* dv, double* J,
                       double* dk);

// Rotation matrix (row-major) of a unit quaternion (w, x, y, z), and back.
void QuaternionToRotation(const double* q, double* R);
void RotationToQuaternion(const double* R, double* q);

// Projects a world point through an image's pose and its camera; returns false when the
// point is not in front of the camera (Z <= 0).
bool ProjectToImage(const Camera& camera, const Image& image, const double* xyz, double* x,
                    double* y);

}  // namespace tiepoint
