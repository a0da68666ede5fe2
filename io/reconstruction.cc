#include "io/reconstruction.h"

#include <algorithm>
#include <cctype>
#include <limits>

namespace tiepoint {
namespace {

struct ModelInfo {
  CameraModelId id;
  const char* name;
  int num_params;
  const char* param_names;  // COLMAP's order
};

constexpr ModelInfo kModels[] = {
    {CameraModelId::kSimplePinhole, "SIMPLE_PINHOLE", 3, "f,cx,cy"},
    {CameraModelId::kPinhole, "PINHOLE", 4, "fx,fy,cx,cy"},
    {CameraModelId::kSimpleRadial, "SIMPLE_RADIAL", 4, "f,cx,cy,k"},
    {CameraModelId::kRadial, "RADIAL", 5, "f,cx,cy,k1,k2"},
    {CameraModelId::kOpenCV, "OPENCV", 8, "fx,fy,cx,cy,k1,k2,p1,p2"},
    {CameraModelId::kOpenCVFisheye, "OPENCV_FISHEYE", 8, "fx,fy,cx,cy,k1,k2,k3,k4"},
    {CameraModelId::kFullOpenCV, "FULL_OPENCV", 12, "fx,fy,cx,cy,k1,k2,p1,p2,k3,k4,k5,k6"},
    {CameraModelId::kFov, "FOV", 5, "fx,fy,cx,cy,omega"},
    {CameraModelId::kSimpleRadialFisheye, "SIMPLE_RADIAL_FISHEYE", 4, "f,cx,cy,k"},
    {CameraModelId::kRadialFisheye, "RADIAL_FISHEYE", 5, "f,cx,cy,k1,k2"},
    {CameraModelId::kThinPrismFisheye, "THIN_PRISM_FISHEYE", 12, "fx,fy,cx,cy,k1,k2,p1,p2,k3,k4,sx1,sy1"},
};

// The largest angle from the axis (radians) that the lens maps' inverses return: just short
// of 90 degrees, where the tangent back to the image plane is still finite.
constexpr double kJustShortOf90Degrees = 1.5707963267948966 * (1 - 1e-9);

const ModelInfo* FindModel(CameraModelId model) {
  for (const ModelInfo& m : kModels) {
    if (m.id == model) return &m;
  }
  return nullptr;
}

// The x in [lo, hi] with g(x) = target, where g grows on [lo, hi] and g(lo) <= target <=
// g(hi): Newton's method from min(target, hi) (g(x) ~ x near 0 for the lens maps below),
// kept inside the bracket by bisection, at most 100 steps.
template <typename G, typename DG>
double GrowingRoot(const G& g, const DG& dg, double target, double lo, double hi) {
  double x = std::min(target, hi);
  for (int iter = 0; iter < 100; ++iter) {
    const double f = g(x) - target;
    if (f == 0) return x;
    if (f < 0)
      lo = x;
    else
      hi = x;
    const double d = dg(x);
    double next = d > 0 ? x - f / d : lo - 1;
    if (!(next > lo && next < hi)) next = 0.5 * (lo + hi);
    if (std::abs(next - x) <= 1e-16 * std::max(x, 1e-300) || next == lo || next == hi) return next;
    x = next;
  }
  return x;
}

// Solves g(r) = r (1 + k1 r^2 + k2 r^4) = rd for the smallest r >= 0, on the branch where g
// still grows (g'(0) = 1). Beyond the radius where g' vanishes the lens folds the image back
// and the inverse is not unique; a target past g's maximum returns the radius of the maximum.
double UndistortRadius(double k1, double k2, double rd) {
  auto g = [&](double r) {
    const double r2 = r * r;
    return r * (1 + r2 * (k1 + k2 * r2));
  };
  auto dg = [&](double r) {
    const double r2 = r * r;
    return 1 + r2 * (3 * k1 + 5 * k2 * r2);
  };
  // r_max: the first positive root of g'(r) = 5 k2 s^2 + 3 k1 s + 1 with s = r^2.
  double s_max = std::numeric_limits<double>::infinity();
  if (k2 == 0) {
    if (k1 < 0) s_max = -1 / (3 * k1);
  } else {
    const double a = 5 * k2, b = 3 * k1, disc = b * b - 4 * a;
    if (disc >= 0) {
      const double sq = std::sqrt(disc);
      // The roots (-b -+ sq) / 2a; keep the smallest positive one.
      for (double s : {(-b - sq) / (2 * a), (-b + sq) / (2 * a)}) {
        if (s > 0 && s < s_max) s_max = s;
      }
    }
  }
  double lo = 0, hi;
  if (std::isfinite(s_max)) {
    hi = std::sqrt(s_max);
    if (g(hi) <= rd) return hi;
  } else {
    // g grows without bound: double until the root is bracketed.
    hi = std::max(rd, 1e-300);
    for (int i = 0; i < 2100 && g(hi) < rd; ++i) hi *= 2;
    if (!(g(hi) >= rd)) return hi;
  }
  return GrowingRoot(g, dg, rd, lo, hi);
}

// Solves theta (1 + k1 theta^2 + ...) = theta_d for theta in [0, 90 degrees), on the branch
// where the left side still grows (its slope is 1 at 0): past the angle where the slope
// vanishes (or 90 degrees) the lens folds the image back, and a theta_d beyond the value
// there returns that angle (as UndistortRadius does for the radius).
double UndistortFisheyeAngle(const double* k, int num_k, double theta_d) {
  auto g = [&](double t) {
    double td, slope;
    FisheyeAngleMap(k, num_k, t, &td, &slope);
    return td;
  };
  auto dg = [&](double t) {
    double td, slope;
    FisheyeAngleMap(k, num_k, t, &td, &slope);
    return slope;
  };
  const double hi = FisheyeGrowingBranchEnd(k, num_k);
  if (g(hi) <= theta_d) return hi;
  return GrowingRoot(g, dg, theta_d, 0.0, hi);
}

// Solves distort(u, v) = (ud, vd) by damped Newton steps from (ud, vd); distort(x, y, &dx,
// &dy, J) gives the distorted point and its 2x2 Jacobian (row-major).
template <typename Distort>
void IterativeUndistort(const Distort& distort, double ud, double vd, double* u, double* v) {
  double x = ud, y = vd, fx, fy, J[4];
  distort(x, y, &fx, &fy, J);
  double ex = fx - ud, ey = fy - vd, err = ex * ex + ey * ey;
  const double scale2 = std::max(1.0, ud * ud + vd * vd);
  for (int iter = 0; iter < 100 && err > 1e-32 * scale2 && std::isfinite(err); ++iter) {
    const double det = J[0] * J[3] - J[1] * J[2];
    if (!(std::abs(det) > 1e-300)) break;
    double sx = (J[3] * ex - J[1] * ey) / det, sy = (J[0] * ey - J[2] * ex) / det;
    bool improved = false;
    for (int h = 0; h < 30; ++h, sx *= 0.5, sy *= 0.5) {
      double nx, ny, nJ[4];
      distort(x - sx, y - sy, &nx, &ny, nJ);
      const double nex = nx - ud, ney = ny - vd, nerr = nex * nex + ney * ney;
      if (nerr < err) {
        x -= sx;
        y -= sy;
        ex = nex;
        ey = ney;
        err = nerr;
        std::copy(nJ, nJ + 4, J);
        improved = true;
        break;
      }
    }
    if (!improved) break;
  }
  *u = x;
  *v = y;
}

// THIN_PRISM_FISHEYE's polynomial part in the equidistant point (a, b): its value, its
// Jacobian in (a, b) and, where dk is given, in the 8 k's (as ThinPrismFisheyeDistortion).
void ThinPrismPolynomial(const double* k, double a, double b, double* du, double* dv, double* J, double* dk) {
  const double k1 = k[0], k2 = k[1], p1 = k[2], p2 = k[3], k3 = k[4], k4 = k[5], sx = k[6], sy = k[7];
  const double aa = a * a, ab = a * b, bb = b * b, r2 = aa + bb;
  const double radial = 1 + r2 * (k1 + r2 * (k2 + r2 * (k3 + r2 * k4)));
  const double dradial = k1 + r2 * (2 * k2 + r2 * (3 * k3 + r2 * 4 * k4));  // d / d rho^2
  *du = a * radial + 2 * p1 * ab + p2 * (r2 + 2 * aa) + sx * r2;
  *dv = b * radial + 2 * p2 * ab + p1 * (r2 + 2 * bb) + sy * r2;
  J[0] = radial + 2 * aa * dradial + 2 * p1 * b + 6 * p2 * a + 2 * sx * a;
  J[1] = 2 * ab * dradial + 2 * p1 * a + 2 * p2 * b + 2 * sx * b;
  J[2] = 2 * ab * dradial + 2 * p2 * b + 2 * p1 * a + 2 * sy * a;
  J[3] = radial + 2 * bb * dradial + 2 * p2 * a + 6 * p1 * b + 2 * sy * b;
  if (dk != nullptr) {
    const double r4 = r2 * r2, r6 = r4 * r2, r8 = r4 * r4;
    const double dx[8] = {a * r2, a * r4, 2 * ab, r2 + 2 * aa, a * r6, a * r8, r2, 0};
    const double dy[8] = {b * r2, b * r4, r2 + 2 * bb, 2 * ab, b * r6, b * r8, 0, r2};
    std::copy(dx, dx + 8, dk);
    std::copy(dy, dy + 8, dk + 8);
  }
}

// FOV: B(y) = atan(sqrt(y)) / sqrt(y) and dB / dy, y = (2 r tan(omega / 2))^2; from the
// series below y = 1e-4 (the quotient's derivative would cancel there).
void FovQuotient(double y, double* B, double* dB) {
  if (y < 1e-4) {
    *B = 1 + y * (-1.0 / 3 + y * (1.0 / 5 + y * (-1.0 / 7)));
    *dB = -1.0 / 3 + y * (2.0 / 5 + y * (-3.0 / 7 + y * (4.0 / 9)));
    return;
  }
  const double x = std::sqrt(y);
  *B = std::atan(x) / x;
  *dB = (1 / (1 + y) - *B) / (2 * y);
}

}  // namespace

void FullOpenCVDistortion(const double* k, double u, double v, double* du, double* dv, double* J, double* dk) {
  const double k1 = k[0], k2 = k[1], p1 = k[2], p2 = k[3], k3 = k[4], k4 = k[5], k5 = k[6], k6 = k[7];
  const double uu = u * u, uv = u * v, vv = v * v, r2 = uu + vv;
  const double num = 1 + r2 * (k1 + r2 * (k2 + r2 * k3)), den = 1 + r2 * (k4 + r2 * (k5 + r2 * k6));
  const double radial = num / den;
  // d radial / d r^2
  const double dradial = ((k1 + r2 * (2 * k2 + r2 * 3 * k3)) - radial * (k4 + r2 * (2 * k5 + r2 * 3 * k6))) / den;
  *du = u * radial + 2 * p1 * uv + p2 * (r2 + 2 * uu);
  *dv = v * radial + 2 * p2 * uv + p1 * (r2 + 2 * vv);
  J[0] = radial + 2 * uu * dradial + 2 * p1 * v + 6 * p2 * u;
  J[1] = 2 * uv * dradial + 2 * p1 * u + 2 * p2 * v;
  J[2] = J[1];
  J[3] = radial + 2 * vv * dradial + 2 * p2 * u + 6 * p1 * v;
  if (dk != nullptr) {
    const double r4 = r2 * r2, r6 = r4 * r2;
    const double n[3] = {r2 / den, r4 / den, r6 / den};  // d radial / d k1, k2, k3
    const double dx[8] = {u * n[0], u * n[1], 2 * uv, r2 + 2 * uu, u * n[2],
                          -u * radial * n[0], -u * radial * n[1], -u * radial * n[2]};
    const double dy[8] = {v * n[0], v * n[1], r2 + 2 * vv, 2 * uv, v * n[2],
                          -v * radial * n[0], -v * radial * n[1], -v * radial * n[2]};
    std::copy(dx, dx + 8, dk);
    std::copy(dy, dy + 8, dk + 8);
  }
}

void ThinPrismFisheyeDistortion(const double* k, double u, double v, double* du, double* dv, double* J,
                                double* dk) {
  double a, b, J1[4], J2[4];
  FisheyeDistortion(nullptr, 0, u, v, &a, &b, J1, nullptr);
  ThinPrismPolynomial(k, a, b, du, dv, J2, dk);
  J[0] = J2[0] * J1[0] + J2[1] * J1[2];
  J[1] = J2[0] * J1[1] + J2[1] * J1[3];
  J[2] = J2[2] * J1[0] + J2[3] * J1[2];
  J[3] = J2[2] * J1[1] + J2[3] * J1[3];
}

void FovDistortion(double omega, double u, double v, double* du, double* dv, double* J, double* dk) {
  const double r2 = u * u + v * v, w2 = omega * omega;
  double s, ds_dr2, ds_dw;
  if (w2 < 1e-8) {  // FovScale's series
    s = 1 + w2 / 12 - w2 * r2 / 3;
    ds_dr2 = -w2 / 3;
    ds_dw = omega / 6 - 2 * omega * r2 / 3;
  } else {
    // s = A B(y): A = 2 t / omega, t = tan(omega / 2), y = 4 r^2 t^2.
    const double t = std::tan(omega / 2), A = 2 * t / omega, y = 4 * r2 * t * t;
    double B, dB;
    FovQuotient(y, &B, &dB);
    s = A * B;
    ds_dr2 = A * dB * 4 * t * t;
    const double dA = ((1 + t * t) * omega - 2 * t) / w2;
    ds_dw = dA * B + A * dB * 4 * r2 * t * (1 + t * t);
  }
  *du = u * s;
  *dv = v * s;
  const double c = 2 * ds_dr2;  // d s / d u = c u
  J[0] = s + c * u * u;
  J[1] = c * u * v;
  J[2] = J[1];
  J[3] = s + c * v * v;
  if (dk != nullptr) {
    dk[0] = u * ds_dw;
    dk[1] = v * ds_dw;
  }
}

const char* CameraModelName(CameraModelId model) {
  const ModelInfo* m = FindModel(model);
  return m != nullptr ? m->name : "UNKNOWN";
}

Status CameraModelFromName(const std::string& name, CameraModelId* model) {
  std::string upper = name;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  // COLMAP's names, or all lower case; a mixed spelling is not one of them.
  bool lower = true;
  for (char c : name) lower = lower && !std::isupper(static_cast<unsigned char>(c));
  if (upper == name || lower) {
    for (const ModelInfo& m : kModels) {
      if (upper == m.name) {
        *model = m.id;
        return Status::Ok();
      }
    }
  }
  return Status::InvalidOptions("unknown camera model '" + name +
                                "': expected simple_pinhole, pinhole, simple_radial, radial, opencv, "
                                "opencv_fisheye, full_opencv, fov, simple_radial_fisheye, radial_fisheye or "
                                "thin_prism_fisheye (or COLMAP's upper-case names)");
}

bool CameraModelFromId(int id, CameraModelId* model) {
  for (const ModelInfo& m : kModels) {
    if (static_cast<int>(m.id) == id) {
      *model = m.id;
      return true;
    }
  }
  return false;
}

int CameraModelNumParams(CameraModelId model) {
  const ModelInfo* m = FindModel(model);
  return m != nullptr ? m->num_params : 0;
}

std::string CameraModelParamNames(CameraModelId model) {
  const ModelInfo* m = FindModel(model);
  return m != nullptr ? m->param_names : "";
}

void OpenCVDistortion(const double* k, double u, double v, double* du, double* dv, double* J) {
  const double k1 = k[0], k2 = k[1], p1 = k[2], p2 = k[3];
  const double uu = u * u, uv = u * v, vv = v * v, r2 = uu + vv;
  const double d = 1 + r2 * (k1 + k2 * r2);
  const double dd = k1 + 2 * k2 * r2;  // d d / d r2
  *du = u * d + 2 * p1 * uv + p2 * (r2 + 2 * uu);
  *dv = v * d + 2 * p2 * uv + p1 * (r2 + 2 * vv);
  J[0] = d + 2 * uu * dd + 2 * p1 * v + 6 * p2 * u;
  J[1] = 2 * uv * dd + 2 * p1 * u + 2 * p2 * v;
  J[2] = J[1];
  J[3] = d + 2 * vv * dd + 2 * p2 * u + 6 * p1 * v;
}

double FisheyeGrowingBranchEnd(const double* k, int num_k) {
  auto slope = [&](double t) {
    double td, s;
    FisheyeAngleMap(k, num_k, t, &td, &s);
    return s;
  };
  // The first zero of the slope by a scan and bisection.
  constexpr int kScan = 256;
  for (int i = 1; i <= kScan; ++i) {
    const double t = kJustShortOf90Degrees * i / kScan;
    if (!(slope(t) > 0)) {
      double a = kJustShortOf90Degrees * (i - 1) / kScan, b = t;
      for (int it = 0; it < 60; ++it) {
        const double m = 0.5 * (a + b);
        (slope(m) > 0 ? a : b) = m;
      }
      return a;
    }
  }
  return kJustShortOf90Degrees;
}

void FisheyeDistortion(const double* k, int num_k, double u, double v, double* du, double* dv, double* J,
                       double* dk) {
  const double r2 = u * u + v * v;
  if (!(r2 > 1e-30)) {  // on the axis: the identity to first order, the k's act at theta^3
    *du = u;
    *dv = v;
    J[0] = J[3] = 1;
    J[1] = J[2] = 0;
    if (dk != nullptr) std::fill(dk, dk + 2 * num_k, 0.0);
    return;
  }
  const double r = std::sqrt(r2), theta = std::atan(r), t2 = theta * theta;
  double theta_d, slope;
  FisheyeAngleMap(k, num_k, theta, &theta_d, &slope);
  const double s = theta_d / r;
  // ds/dr = (theta_d'(theta) theta'(r) r - theta_d) / r^2, theta'(r) = 1 / (1 + r^2).
  const double ds_dr = (slope / (1 + r2) * r - theta_d) / r2;
  const double c = ds_dr / r;  // d s / d u = c u, d s / d v = c v
  *du = u * s;
  *dv = v * s;
  J[0] = s + c * u * u;
  J[1] = c * u * v;
  J[2] = J[1];
  J[3] = s + c * v * v;
  if (dk != nullptr) {
    double tp = theta * t2 / r;  // theta^(2i+3) / r
    for (int i = 0; i < num_k; ++i, tp *= t2) {
      dk[i] = u * tp;
      dk[num_k + i] = v * tp;
    }
  }
}

int CameraModelDistortionBegin(CameraModelId model) {
  switch (model) {
    case CameraModelId::kSimpleRadial:
    case CameraModelId::kRadial:
    case CameraModelId::kSimpleRadialFisheye:
    case CameraModelId::kRadialFisheye: return 3;
    case CameraModelId::kOpenCV:
    case CameraModelId::kOpenCVFisheye:
    case CameraModelId::kFullOpenCV:
    case CameraModelId::kFov:
    case CameraModelId::kThinPrismFisheye: return 4;
    default: return CameraModelNumParams(model);
  }
}

double Camera::MeanFocal() const {
  return CameraModelHasTwoFocals(model) ? 0.5 * (params[0] + params[1]) : params[0];
}

int64_t Reconstruction::NumObservations() const {
  // As COLMAP counts them: the points2D of registered images that have a 3D point.
  int64_t n = 0;
  for (const auto& [id, image] : images) {
    for (const Point2D& p : image.points2D) n += p.point3D_id != kInvalidPoint3DId;
  }
  return n;
}

double Reconstruction::MeanTrackLength() const {
  if (points3D.empty()) return 0;
  return static_cast<double>(NumObservations()) / static_cast<double>(points3D.size());
}

double Reconstruction::MeanReprojectionError() const {
  double sum = 0;
  int64_t n = 0;
  for (const auto& [point_id, point] : points3D) {
    for (const TrackElement& el : point.track) {
      const auto image_it = images.find(el.image_id);
      if (image_it == images.end()) continue;
      const Image& image = image_it->second;
      const auto camera_it = cameras.find(image.camera_id);
      if (camera_it == cameras.end() || el.point2D_idx >= image.points2D.size()) continue;
      double x, y;
      if (!ProjectToImage(camera_it->second, image, point.xyz, &x, &y)) continue;
      const Point2D& p = image.points2D[el.point2D_idx];
      sum += std::hypot(x - p.x, y - p.y);
      ++n;
    }
  }
  return n > 0 ? sum / static_cast<double>(n) : 0;
}

double Reconstruction::MeanPointError() const {
  double sum = 0;
  int64_t n = 0;
  for (const auto& [id, point] : points3D) {
    if (point.error != -1) {
      sum += point.error;
      ++n;
    }
  }
  return n > 0 ? sum / static_cast<double>(n) : 0;
}

std::vector<uint64_t> Reconstruction::PointsSeenBy(const std::set<uint32_t>& image_ids) const {
  std::vector<uint64_t> ids;
  for (uint32_t id : image_ids) {
    const auto it = images.find(id);
    if (it == images.end()) continue;
    for (const Point2D& p2 : it->second.points2D)
      if (p2.point3D_id != kInvalidPoint3DId && points3D.count(p2.point3D_id)) ids.push_back(p2.point3D_id);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

void Reconstruction::UpdatePointErrors() {
  for (auto& [point_id, point] : points3D) {
    double sum = 0;
    int n = 0;
    for (const TrackElement& el : point.track) {
      const auto image_it = images.find(el.image_id);
      if (image_it == images.end() || el.point2D_idx >= image_it->second.points2D.size()) continue;
      const auto camera_it = cameras.find(image_it->second.camera_id);
      if (camera_it == cameras.end()) continue;
      double x, y;
      if (!ProjectToImage(camera_it->second, image_it->second, point.xyz, &x, &y)) continue;
      const Point2D& p = image_it->second.points2D[el.point2D_idx];
      sum += std::hypot(x - p.x, y - p.y);
      ++n;
    }
    point.error = n > 0 ? sum / n : -1;
  }
}

void CameraPixelToNormalized(CameraModelId model, const double* params, double x, double y,
                             double* u, double* v) {
  switch (model) {
    case CameraModelId::kSimplePinhole:
      *u = (x - params[1]) / params[0];
      *v = (y - params[2]) / params[0];
      return;
    case CameraModelId::kPinhole:
      *u = (x - params[2]) / params[0];
      *v = (y - params[3]) / params[1];
      return;
    case CameraModelId::kSimpleRadial:
    case CameraModelId::kRadial: {
      const double ud = (x - params[1]) / params[0];
      const double vd = (y - params[2]) / params[0];
      const double k1 = params[3];
      const double k2 = model == CameraModelId::kRadial ? params[4] : 0.0;
      const double rd = std::hypot(ud, vd);
      if (rd == 0 || !std::isfinite(rd) || (k1 == 0 && k2 == 0)) {
        *u = ud;
        *v = vd;
        return;
      }
      // The distortion is radial, so the undistorted point lies on the same ray: only its
      // radius is unknown, a scalar equation.
      const double scale = UndistortRadius(k1, k2, rd) / rd;
      *u = ud * scale;
      *v = vd * scale;
      return;
    }
    case CameraModelId::kOpenCV:
    case CameraModelId::kFullOpenCV: {
      const double ud = (x - params[2]) / params[0];
      const double vd = (y - params[3]) / params[1];
      if (std::all_of(params + 4, params + CameraModelNumParams(model), [](double k) { return k == 0; })) {
        *u = ud;
        *v = vd;
        return;
      }
      IterativeUndistort([&](double a, double b, double* da, double* db, double* J) {
        if (model == CameraModelId::kOpenCV)
          OpenCVDistortion(params + 4, a, b, da, db, J);
        else
          FullOpenCVDistortion(params + 4, a, b, da, db, J, nullptr);
      }, ud, vd, u, v);
      return;
    }
    case CameraModelId::kThinPrismFisheye: {
      // The polynomial part is undone in the equidistant plane, as COLMAP does, then the
      // equidistant point (a, b), at angle rho = |(a, b)| from the axis, goes back to the
      // plane at tan(rho) (angles at or past 90 degrees: just short of it).
      const double ud = (x - params[2]) / params[0];
      const double vd = (y - params[3]) / params[1];
      double a = ud, b = vd;
      if (!std::all_of(params + 4, params + 12, [](double k) { return k == 0; }))
        IterativeUndistort([&](double p, double q, double* dp, double* dq, double* J) {
          ThinPrismPolynomial(params + 4, p, q, dp, dq, J, nullptr);
        }, ud, vd, &a, &b);
      const double rho = std::hypot(a, b);
      if (rho == 0 || !std::isfinite(rho)) {
        *u = a;
        *v = b;
        return;
      }
      const double scale = std::tan(std::min(rho, kJustShortOf90Degrees)) / rho;
      *u = a * scale;
      *v = b * scale;
      return;
    }
    case CameraModelId::kFov: {
      const double ud = (x - params[2]) / params[0];
      const double vd = (y - params[3]) / params[1];
      const double omega = std::abs(params[4]), rd2 = ud * ud + vd * vd;
      double scale;  // r / r_d
      if (omega * omega < 1e-8) {
        scale = 1 - omega * omega / 12 + omega * omega * rd2 / 3;  // the inverse of FovScale's series
      } else {
        // r = tan(omega r_d) / (2 tan(omega / 2)); omega r_d at most just short of 90 degrees.
        const double rd = std::sqrt(rd2), t2 = 2 * std::tan(omega / 2);
        const double angle = std::min(omega * rd, kJustShortOf90Degrees);
        scale = rd > 0 && std::isfinite(rd) ? std::tan(angle) / (t2 * rd) : omega / t2;
      }
      *u = ud * scale;
      *v = vd * scale;
      return;
    }
    case CameraModelId::kOpenCVFisheye:
    case CameraModelId::kSimpleRadialFisheye:
    case CameraModelId::kRadialFisheye: {
      const bool two = model == CameraModelId::kOpenCVFisheye;
      const int c = two ? 2 : 1;  // cx's index
      const double ud = (x - params[c]) / params[0];
      const double vd = (y - params[c + 1]) / params[two ? 1 : 0];
      const double theta_d = std::hypot(ud, vd);
      if (theta_d == 0 || !std::isfinite(theta_d)) {
        *u = ud;
        *v = vd;
        return;
      }
      // The same ray, at the tangent of the undistorted angle.
      const double theta =
          UndistortFisheyeAngle(params + CameraModelDistortionBegin(model), CameraModelFisheyeTerms(model), theta_d);
      const double scale = std::tan(theta) / theta_d;
      *u = ud * scale;
      *v = vd * scale;
      return;
    }
  }
  *u = *v = std::numeric_limits<double>::quiet_NaN();
}

void QuaternionToRotation(const double* q, double* R) {
  const double n2 = q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3];
  // s = 2 / |q|^2 makes the formula exact for a quaternion that is not quite unit.
  const double s = n2 > 0 ? 2 / n2 : 0;
  const double w = q[0], x = q[1], y = q[2], z = q[3];
  R[0] = 1 - s * (y * y + z * z);
  R[1] = s * (x * y - w * z);
  R[2] = s * (x * z + w * y);
  R[3] = s * (x * y + w * z);
  R[4] = 1 - s * (x * x + z * z);
  R[5] = s * (y * z - w * x);
  R[6] = s * (x * z - w * y);
  R[7] = s * (y * z + w * x);
  R[8] = 1 - s * (x * x + y * y);
}

void RotationToQuaternion(const double* R, double* q) {
  // Shepperd's method: divide by the largest of 4w^2, 4x^2, 4y^2, 4z^2 so the square root
  // is never of a small, cancelled number.
  const double trace = R[0] + R[4] + R[8];
  double w, x, y, z;
  if (trace >= R[0] && trace >= R[4] && trace >= R[8]) {
    const double s = 2 * std::sqrt(std::max(0.0, 1 + trace));  // 4w
    w = 0.25 * s;
    x = (R[7] - R[5]) / s;
    y = (R[2] - R[6]) / s;
    z = (R[3] - R[1]) / s;
  } else if (R[0] >= R[4] && R[0] >= R[8]) {
    const double s = 2 * std::sqrt(std::max(0.0, 1 + R[0] - R[4] - R[8]));  // 4x
    w = (R[7] - R[5]) / s;
    x = 0.25 * s;
    y = (R[1] + R[3]) / s;
    z = (R[2] + R[6]) / s;
  } else if (R[4] >= R[8]) {
    const double s = 2 * std::sqrt(std::max(0.0, 1 - R[0] + R[4] - R[8]));  // 4y
    w = (R[2] - R[6]) / s;
    x = (R[1] + R[3]) / s;
    y = 0.25 * s;
    z = (R[5] + R[7]) / s;
  } else {
    const double s = 2 * std::sqrt(std::max(0.0, 1 - R[0] - R[4] + R[8]));  // 4z
    w = (R[3] - R[1]) / s;
    x = (R[2] + R[6]) / s;
    y = (R[5] + R[7]) / s;
    z = 0.25 * s;
  }
  // One sign for the two quaternions of a rotation (w >= 0), unit length.
  const double sign = w < 0 ? -1.0 : 1.0;
  const double n = std::sqrt(w * w + x * x + y * y + z * z);
  if (!(n > 0) || !std::isfinite(n)) {  // not a rotation (NaN or zero): the identity
    q[0] = 1;
    q[1] = q[2] = q[3] = 0;
    return;
  }
  q[0] = sign * w / n;
  q[1] = sign * x / n;
  q[2] = sign * y / n;
  q[3] = sign * z / n;
}

bool ProjectToImage(const Camera& camera, const Image& image, const double* xyz, double* x,
                    double* y) {
  double R[9];
  QuaternionToRotation(image.qvec, R);
  double p[3];
  for (int r = 0; r < 3; ++r) {
    p[r] = R[3 * r] * xyz[0] + R[3 * r + 1] * xyz[1] + R[3 * r + 2] * xyz[2] + image.tvec[r];
  }
  if (!(p[2] > 0)) return false;
  CameraNormalizedToPixel(camera.model, camera.params.data(), p[0] / p[2], p[1] / p[2], x, y);
  return true;
}

}  // namespace tiepoint
