#include "solver/synthetic.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <new>
#include <string>
#include <utility>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "solver/camera_model.h"

namespace tiepoint {
namespace {

// ---------------------------------------------------------------------------------------
// Scene layout. World z is up. Points fill a ball of radius kSceneRadius flattened to a
// thick disk (z semi-axis kSceneRadius * kSceneFlattening). Cameras stand on a ring of
// radius ~kRingRadius around the world z axis, with jitter in radius and height, and
// look at a target near the scene centre with a small roll. With these numbers every
// point of the scene lies well inside every camera's field of view, so which cameras
// observe a point is decided by locality on the ring (as in real image collections),
// not by the visibility test, which is still applied to every observation.
constexpr double kPi = 3.14159265358979323846;
constexpr double kSceneRadius = 10.0;
constexpr double kSceneFlattening = 0.5;
constexpr double kRingRadius = 3.0 * kSceneRadius;
constexpr double kRingRadiusJitter = 0.15;          // relative, uniform +-
constexpr double kCameraHeight = 0.3 * kSceneRadius;  // uniform +-
constexpr double kAzimuthJitter = 0.8;              // of the spacing, uniform +-half
constexpr double kTargetJitter = 0.1 * kSceneRadius;  // per coordinate, uniform +-
constexpr double kRollStd = 0.05;                   // radians, clipped at 3 sigma
constexpr double kMinFocal = 500.0;
constexpr double kMaxFocal = 1500.0;
constexpr double kK1Std = 0.05;  // clipped to +-kK1Max
constexpr double kK1Max = 0.1;
constexpr double kK2Std = 0.01;  // clipped to +-kK2Max
constexpr double kK2Max = 0.02;
// Image: half-width f and half-height 0.75 f in pixels (4:3, 90 degrees horizontal FOV).
constexpr double kImageHalfWidth = 1.0;
constexpr double kImageHalfHeight = 0.75;
// Largest |p|^2 (normalized, undistorted) accepted: the radial model with |k1| <= 0.1,
// |k2| <= 0.02 is monotonic (1 + 3 k1 r^2 + 5 k2 r^4 > 0) well beyond it.
constexpr double kMaxNormalizedRadius2 = 1.6;
constexpr double kMinDepth = 0.05 * kSceneRadius;
// Point positions drawn before falling back to the scene centre.
constexpr int kMaxPointDraws = 64;

constexpr int kMaxCameras = 10000000;
constexpr double kMaxObservations = 2147483647.0;  // 2^31 - 1
// Bound on (ranges x cameras) counters of the parallel counting sort.
constexpr int64_t kMaxSortCounters = int64_t{1} << 24;

// Random streams: one per (purpose, index), so that every draw is a pure function of
// (seed, purpose, index) and the output does not depend on the thread schedule.
enum Stream : uint64_t {
  kCameraStream = 1,
  kPointStream = 2,
  kNoiseStream = 3,
  kCameraInitStream = 4,
  kPointInitStream = 5,
};

inline uint64_t Mix64(uint64_t z) {  // SplitMix64 finalizer
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// SplitMix64 generator with Box-Muller Gaussians.
class Rng {
 public:
  Rng(uint64_t seed, uint64_t stream, uint64_t index) {
    uint64_t h = Mix64(seed + 0x9E3779B97F4A7C15ull);
    h = Mix64(h ^ (stream * 0xD1B54A32D192ED03ull));
    state_ = Mix64(h + (index + 1) * 0x9E3779B97F4A7C15ull);
  }

  uint64_t Next() {
    state_ += 0x9E3779B97F4A7C15ull;
    return Mix64(state_);
  }
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform in [-1, 1).
  double Symmetric() { return 2.0 * Uniform() - 1.0; }
  // Uniform integer in [0, n), n >= 1.
  int Below(int n) { return std::min(n - 1, static_cast<int>(Uniform() * n)); }
  // Standard normal.
  double Gaussian() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = 1.0 - Uniform();  // (0, 1]
    const double u2 = Uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double a = 2.0 * kPi * u2;
    spare_ = r * std::sin(a);
    has_spare_ = true;
    return r * std::cos(a);
  }
  double ClippedGaussian(double sigma, double limit) {
    return std::clamp(sigma * Gaussian(), -limit, limit);
  }

 private:
  uint64_t state_ = 0;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

// --- small 3D helpers (row-major 3x3 matrices) -------------------------------------------

inline void Cross(const double* a, const double* b, double* out) {
  out[0] = a[1] * b[2] - a[2] * b[1];
  out[1] = a[2] * b[0] - a[0] * b[2];
  out[2] = a[0] * b[1] - a[1] * b[0];
}

inline void Normalize(double* v) {
  const double n = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
  for (int i = 0; i < 3; ++i) v[i] /= n;
}

inline void MatMul(const double* a, const double* b, double* out) {
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 3; ++c) {
      out[3 * r + c] = a[3 * r] * b[c] + a[3 * r + 1] * b[3 + c] + a[3 * r + 2] * b[6 + c];
    }
  }
}

// Exp map: R = cos(t) I + sin(t) [u]x + (1 - cos(t)) u u^T, the rotation that
// AngleAxisRotatePoint applies (first order I + [w]x for tiny angles, as it does).
void AngleAxisToRotation(const double* w, double* R) {
  const double theta2 = w[0] * w[0] + w[1] * w[1] + w[2] * w[2];
  if (theta2 > std::numeric_limits<double>::epsilon()) {
    const double theta = std::sqrt(theta2);
    const double c = std::cos(theta), s = std::sin(theta), v = 1.0 - c;
    const double u[3] = {w[0] / theta, w[1] / theta, w[2] / theta};
    R[0] = c + v * u[0] * u[0];
    R[1] = v * u[0] * u[1] - s * u[2];
    R[2] = v * u[0] * u[2] + s * u[1];
    R[3] = v * u[1] * u[0] + s * u[2];
    R[4] = c + v * u[1] * u[1];
    R[5] = v * u[1] * u[2] - s * u[0];
    R[6] = v * u[2] * u[0] - s * u[1];
    R[7] = v * u[2] * u[1] + s * u[0];
    R[8] = c + v * u[2] * u[2];
  } else {
    R[0] = 1.0;   R[1] = -w[2]; R[2] = w[1];
    R[3] = w[2];  R[4] = 1.0;   R[5] = -w[0];
    R[6] = -w[1]; R[7] = w[0];  R[8] = 1.0;
  }
}

// Log map, robust at every angle including pi: rotation matrix -> unit quaternion
// (Shepperd's method: divide by the largest of 1 + trace and the 1 + 2 R_ii - trace, so
// no cancellation) -> angle-axis with angle = 2 atan2(|v|, w) in [0, pi].
void RotationToAngleAxis(const double* R, double* w) {
  const double trace = R[0] + R[4] + R[8];
  double q[4];  // w, x, y, z
  if (trace >= R[0] && trace >= R[4] && trace >= R[8]) {
    const double s = 2.0 * std::sqrt(1.0 + trace);
    q[0] = 0.25 * s;
    q[1] = (R[7] - R[5]) / s;
    q[2] = (R[2] - R[6]) / s;
    q[3] = (R[3] - R[1]) / s;
  } else if (R[0] >= R[4] && R[0] >= R[8]) {
    const double s = 2.0 * std::sqrt(1.0 + R[0] - R[4] - R[8]);
    q[0] = (R[7] - R[5]) / s;
    q[1] = 0.25 * s;
    q[2] = (R[1] + R[3]) / s;
    q[3] = (R[2] + R[6]) / s;
  } else if (R[4] >= R[8]) {
    const double s = 2.0 * std::sqrt(1.0 + R[4] - R[0] - R[8]);
    q[0] = (R[2] - R[6]) / s;
    q[1] = (R[1] + R[3]) / s;
    q[2] = 0.25 * s;
    q[3] = (R[5] + R[7]) / s;
  } else {
    const double s = 2.0 * std::sqrt(1.0 + R[8] - R[0] - R[4]);
    q[0] = (R[3] - R[1]) / s;
    q[1] = (R[2] + R[6]) / s;
    q[2] = (R[5] + R[7]) / s;
    q[3] = 0.25 * s;
  }
  if (q[0] < 0.0) {
    for (double& x : q) x = -x;
  }
  const double qn = std::sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  for (double& x : q) x /= qn;
  const double vn = std::sqrt(q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  // angle / |v|, with its limit 2 / w for tiny |v| (relative error O(|v|^2)).
  const double scale = vn > 1e-8 ? 2.0 * std::atan2(vn, q[0]) / vn : 2.0 / q[0];
  for (int i = 0; i < 3; ++i) w[i] = scale * q[i + 1];
}

// --- generation --------------------------------------------------------------------------

// Truth camera i of n, BAL layout.
void MakeCamera(uint64_t seed, int i, int n, double* cam) {
  Rng rng(seed, kCameraStream, static_cast<uint64_t>(i));
  // Azimuths increase with the index, so cameras are sorted by azimuth.
  const double azimuth = 2.0 * kPi * (i + 0.5 + 0.5 * kAzimuthJitter * rng.Symmetric()) / n;
  const double radius = kRingRadius * (1.0 + kRingRadiusJitter * rng.Symmetric());
  const double height = kCameraHeight * rng.Symmetric();
  const double center[3] = {radius * std::cos(azimuth), radius * std::sin(azimuth), height};
  double target[3];
  for (double& x : target) x = kTargetJitter * rng.Symmetric();
  const double roll = rng.ClippedGaussian(kRollStd, 3.0 * kRollStd);

  double forward[3] = {target[0] - center[0], target[1] - center[1], target[2] - center[2]};
  Normalize(forward);
  const double world_up[3] = {0.0, 0.0, 1.0};
  double right[3], up[3];
  Cross(forward, world_up, right);
  Normalize(right);
  Cross(right, forward, up);
  // Rows of cam_from_world: camera x (right), y (up), z = -forward (BAL looks down -z).
  const double cr = std::cos(roll), sr = std::sin(roll);
  double R[9];
  for (int k = 0; k < 3; ++k) {
    R[k] = cr * right[k] + sr * up[k];
    R[3 + k] = -sr * right[k] + cr * up[k];
    R[6 + k] = -forward[k];
  }
  RotationToAngleAxis(R, cam);
  for (int r = 0; r < 3; ++r) {
    cam[3 + r] = -(R[3 * r] * center[0] + R[3 * r + 1] * center[1] + R[3 * r + 2] * center[2]);
  }
  cam[6] = kMinFocal + (kMaxFocal - kMinFocal) * rng.Uniform();
  cam[7] = rng.ClippedGaussian(kK1Std, kK1Max);
  cam[8] = rng.ClippedGaussian(kK2Std, kK2Max);
}

// Whether camera `cam` (rotation matrix R) sees X: in front, not too close, inside the
// image and inside the range where the distortion model is monotonic.
inline bool Sees(const double* cam, const double* R, const double* X) {
  const double pz = R[6] * X[0] + R[7] * X[1] + R[8] * X[2] + cam[5];
  if (!(pz < -kMinDepth)) return false;
  const double px = -(R[0] * X[0] + R[1] * X[1] + R[2] * X[2] + cam[3]) / pz;
  const double py = -(R[3] * X[0] + R[4] * X[1] + R[5] * X[2] + cam[4]) / pz;
  const double r2 = px * px + py * py;
  if (!(r2 <= kMaxNormalizedRadius2)) return false;
  const double d = 1.0 + r2 * (cam[7] + cam[8] * r2);
  return std::abs(d * px) < kImageHalfWidth && std::abs(d * py) < kImageHalfHeight;
}

void DrawPoint(Rng& rng, double* X) {
  double x, y, z;
  do {
    x = rng.Symmetric();
    y = rng.Symmetric();
    z = rng.Symmetric();
  } while (x * x + y * y + z * z > 1.0);
  X[0] = kSceneRadius * x;
  X[1] = kSceneRadius * y;
  X[2] = kSceneRadius * kSceneFlattening * z;
}

struct Problem {
  int num_cameras = 0;
  const double* cameras = nullptr;    // 9 per camera
  const double* rotations = nullptr;  // 9 per camera
};

// Chooses up to k distinct cameras seeing X among the w cameras nearest X's azimuth on the
// ring (sampling the window without replacement). O(w) = O(k). Returns how many.
int SelectCameras(const Problem& problem, Rng& rng, const double* X, int k, int* window,
                  int32_t* out) {
  const int n = problem.num_cameras;
  const int w = std::min(n, std::max(3 * k, k + 4));
  double turn = std::atan2(X[1], X[0]) / (2.0 * kPi);
  if (turn < 0.0) turn += 1.0;
  const int nearest = std::clamp(static_cast<int>(turn * n), 0, n - 1);
  int start = nearest - w / 2;
  if (start < 0) start += n;
  for (int a = 0; a < w; ++a) window[a] = a;
  int count = 0;
  for (int a = 0; a < w && count < k; ++a) {
    const int b = a + rng.Below(w - a);
    std::swap(window[a], window[b]);
    int c = start + window[a];
    if (c >= n) c -= n;
    if (Sees(problem.cameras + 9 * static_cast<size_t>(c),
             problem.rotations + 9 * static_cast<size_t>(c), X)) {
      out[count++] = c;
    }
  }
  return count;
}

std::string Num(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%g", v);
  return buffer;
}

Status Invalid(const std::string& field, const std::string& what) {
  return Status::InvalidOptions("SyntheticOptions." + field + " " + what);
}

Status CheckNonNegative(const char* field, double v) {
  if (!std::isfinite(v) || v < 0.0) {
    return Invalid(field, "must be a finite number >= 0 (got " + Num(v) + ")");
  }
  return Status::Ok();
}

Status Generate(const SyntheticOptions& options, Scene* initial, Scene* truth) {
  const int n = options.num_cameras;
  const int num_points = options.num_points;
  const uint64_t seed = options.seed;
#ifdef _OPENMP
  const int threads = options.num_threads > 0 ? options.num_threads : omp_get_max_threads();
#else
  const int threads = 1;
#endif
  (void)threads;  // unused without OpenMP

  // Track length k of a point: uniform around the mean with half-spread h, rounded
  // stochastically (so E[k] = mean), and kept in [2, num_cameras].
  const double mean = options.observations_per_point;
  const double spread = std::max(0.0, std::min({mean - 2.0, n - mean, 0.5 * mean}));
  const int kmax = std::clamp(static_cast<int>(std::ceil(mean + spread)), 2, n);
  const int max_window = std::min(n, std::max(3 * kmax, kmax + 4));

  // Truth cameras and their rotation matrices.
  std::vector<double> cameras(static_cast<size_t>(kCameraParams) * n);
  std::vector<double> rotations(static_cast<size_t>(9) * n);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int i = 0; i < n; ++i) {
    double* cam = cameras.data() + static_cast<size_t>(kCameraParams) * i;
    MakeCamera(seed, i, n, cam);
    AngleAxisToRotation(cam, rotations.data() + 9 * static_cast<size_t>(i));
  }
  if (options.shared_intrinsics)  // one physical camera: camera 0's f, k1, k2 for all
    for (int i = 1; i < n; ++i)
      std::copy_n(cameras.data() + 6, 3, cameras.data() + static_cast<size_t>(kCameraParams) * i + 6);
  const Problem problem{n, cameras.data(), rotations.data()};

  // Pass 1: per point, its position and its cameras (fixed capacity kmax per point).
  std::vector<double> points(static_cast<size_t>(kPointParams) * num_points);
  std::vector<int32_t> selected(static_cast<size_t>(kmax) * num_points);
  std::vector<int32_t> counts(num_points);
  std::vector<std::vector<int>> windows(threads, std::vector<int>(max_window));
  std::atomic<int> failed_point{-1};
#pragma omp parallel for schedule(dynamic, 1024) num_threads(threads)
  for (int j = 0; j < num_points; ++j) {
#ifdef _OPENMP
    int* window = windows[omp_get_thread_num()].data();
#else
    int* window = windows[0].data();
#endif
    Rng rng(seed, kPointStream, static_cast<uint64_t>(j));
    const double x = mean + spread * rng.Symmetric();
    const int k = std::clamp(static_cast<int>(std::floor(x + rng.Uniform())), 2, kmax);
    double* X = points.data() + static_cast<size_t>(kPointParams) * j;
    int32_t* out = selected.data() + static_cast<size_t>(kmax) * j;
    int count = 0;
    for (int draw = 0; draw <= kMaxPointDraws && count < 2; ++draw) {
      if (draw < kMaxPointDraws) {
        DrawPoint(rng, X);
      } else {
        X[0] = X[1] = X[2] = 0.0;  // every camera looks near the centre
      }
      count = SelectCameras(problem, rng, X, k, window, out);
    }
    counts[j] = count;
    if (count < 2) failed_point.store(j, std::memory_order_relaxed);
  }
  if (failed_point.load() >= 0) {
    return Status::Internal("MakeSyntheticProblem: point " + std::to_string(failed_point.load()) +
                            " is seen by fewer than 2 cameras after " +
                            std::to_string(kMaxPointDraws) + " draws");
  }

  // Pass 2: counting sort by camera (then point). Points are split into ranges; each
  // range counts its observations per camera, and offsets come from prefix sums in
  // (camera, range) order. The order (camera, point) is unique, so the result does not
  // depend on the number of ranges.
  const int64_t counter_budget = std::max<int64_t>(1, kMaxSortCounters / n);
  const int ranges = static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>({threads, counter_budget, num_points})));
  auto range_begin = [&](int r) {
    return static_cast<int>(static_cast<int64_t>(num_points) * r / ranges);
  };
  std::vector<int64_t> offsets(static_cast<size_t>(ranges) * n, 0);
#pragma omp parallel for schedule(static, 1) num_threads(threads)
  for (int r = 0; r < ranges; ++r) {
    int64_t* hist = offsets.data() + static_cast<size_t>(r) * n;
    for (int j = range_begin(r); j < range_begin(r + 1); ++j) {
      const int32_t* sel = selected.data() + static_cast<size_t>(kmax) * j;
      for (int s = 0; s < counts[j]; ++s) ++hist[sel[s]];
    }
  }
  int64_t total = 0;
  for (int c = 0; c < n; ++c) {
    for (int r = 0; r < ranges; ++r) {
      int64_t& slot = offsets[static_cast<size_t>(r) * n + c];
      const int64_t count = slot;
      slot = total;
      total += count;
    }
  }
  if (static_cast<double>(total) > kMaxObservations) {
    return Status::InvalidOptions("MakeSyntheticProblem: " + std::to_string(total) +
                                  " observations exceed 2^31 - 1; lower "
                                  "SyntheticOptions.num_points or observations_per_point");
  }

  Scene out;
  out.obs_camera.resize(total);
  out.obs_point.resize(total);
  out.obs_xy.resize(2 * static_cast<size_t>(total));
  const double noise = options.noise_px;
#pragma omp parallel for schedule(static, 1) num_threads(threads)
  for (int r = 0; r < ranges; ++r) {
    int64_t* cursor = offsets.data() + static_cast<size_t>(r) * n;
    for (int j = range_begin(r); j < range_begin(r + 1); ++j) {
      const int32_t* sel = selected.data() + static_cast<size_t>(kmax) * j;
      const double* X = points.data() + static_cast<size_t>(kPointParams) * j;
      Rng rng(seed, kNoiseStream, static_cast<uint64_t>(j));
      for (int s = 0; s < counts[j]; ++s) {
        const int c = sel[s];
        double predicted[2];
        ProjectBal(cameras.data() + static_cast<size_t>(kCameraParams) * c, X, predicted);
        const double ex = rng.Gaussian(), ey = rng.Gaussian();
        const int64_t pos = cursor[c]++;
        out.obs_camera[pos] = c;
        out.obs_point[pos] = j;
        out.obs_xy[2 * pos] = predicted[0] + noise * ex;
        out.obs_xy[2 * pos + 1] = predicted[1] + noise * ey;
      }
    }
  }
  std::vector<int32_t>().swap(selected);
  std::vector<int64_t>().swap(offsets);

  // Initial values: the truth perturbed.
  std::vector<double> init_cameras(cameras.size());
  const double rotation_noise = options.rotation_noise;
  const double translation_noise = options.translation_noise * kSceneRadius;
  const double focal_noise = options.focal_noise;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int i = 0; i < n; ++i) {
    const double* cam = cameras.data() + static_cast<size_t>(kCameraParams) * i;
    double* init = init_cameras.data() + static_cast<size_t>(kCameraParams) * i;
    Rng rng(seed, kCameraInitStream, static_cast<uint64_t>(i));
    double delta[3], D[9], R[9];
    for (double& d : delta) d = rotation_noise * rng.Gaussian();
    AngleAxisToRotation(delta, D);
    MatMul(D, rotations.data() + 9 * static_cast<size_t>(i), R);
    RotationToAngleAxis(R, init);
    for (int k = 3; k < 6; ++k) init[k] = cam[k] + translation_noise * rng.Gaussian();
    init[6] = cam[6] * (1.0 + focal_noise * rng.Gaussian());
    if (options.shared_intrinsics) {  // one focal error for the one camera (camera 0's draw)
      Rng first(seed, kCameraInitStream, 0);
      for (int k = 0; k < 6; ++k) first.Gaussian();
      init[6] = cam[6] * (1.0 + focal_noise * first.Gaussian());
    }
    init[7] = cam[7];
    init[8] = cam[8];
  }
  std::vector<double> init_points(points.size());
  const double point_noise = options.point_noise * kSceneRadius;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int j = 0; j < num_points; ++j) {
    Rng rng(seed, kPointInitStream, static_cast<uint64_t>(j));
    for (int k = 0; k < 3; ++k) {
      const size_t a = static_cast<size_t>(kPointParams) * j + k;
      init_points[a] = points[a] + point_noise * rng.Gaussian();
    }
  }

  if (truth != nullptr) {
    initial->obs_camera = out.obs_camera;
    initial->obs_point = out.obs_point;
    initial->obs_xy = out.obs_xy;
    out.cameras = std::move(cameras);
    out.points = std::move(points);
    *truth = std::move(out);
  } else {
    initial->obs_camera = std::move(out.obs_camera);
    initial->obs_point = std::move(out.obs_point);
    initial->obs_xy = std::move(out.obs_xy);
  }
  initial->cameras = std::move(init_cameras);
  initial->points = std::move(init_points);
  return Status::Ok();
}

}  // namespace

Status SyntheticOptions::Check() const {
  if (num_cameras < 2) {
    return Invalid("num_cameras", "must be at least 2 (got " + std::to_string(num_cameras) + ")");
  }
  if (num_cameras > kMaxCameras) {
    return Invalid("num_cameras", "must be at most " + std::to_string(kMaxCameras) + " (got " +
                                      std::to_string(num_cameras) + ")");
  }
  if (num_points < 1) {
    return Invalid("num_points", "must be at least 1 (got " + std::to_string(num_points) + ")");
  }
  if (!std::isfinite(observations_per_point) || observations_per_point < 2.0 ||
      observations_per_point > num_cameras) {
    return Invalid("observations_per_point",
                   "must be between 2 and num_cameras = " + std::to_string(num_cameras) +
                       " (got " + Num(observations_per_point) + ")");
  }
  if (static_cast<double>(num_points) * observations_per_point > kMaxObservations) {
    return Invalid("num_points",
                   "times observations_per_point must be at most 2^31 - 1 observations (got " +
                       std::to_string(num_points) + " x " + Num(observations_per_point) + ")");
  }
  TIEPOINT_RETURN_IF_ERROR(CheckNonNegative("noise_px", noise_px));
  TIEPOINT_RETURN_IF_ERROR(CheckNonNegative("rotation_noise", rotation_noise));
  TIEPOINT_RETURN_IF_ERROR(CheckNonNegative("translation_noise", translation_noise));
  TIEPOINT_RETURN_IF_ERROR(CheckNonNegative("point_noise", point_noise));
  TIEPOINT_RETURN_IF_ERROR(CheckNonNegative("focal_noise", focal_noise));
  if (num_threads < 0) {
    return Invalid("num_threads",
                   "must be >= 0, 0 meaning all hardware threads (got " +
                       std::to_string(num_threads) + ")");
  }
  return Status::Ok();
}

Status MakeSyntheticProblem(const SyntheticOptions& options, Scene* initial, Scene* truth) {
  TIEPOINT_RETURN_IF_ERROR(options.Check());
  if (initial == nullptr) {
    return Status::InvalidOptions("MakeSyntheticProblem: `initial` must not be null");
  }
  if (initial == truth) {
    return Status::InvalidOptions("MakeSyntheticProblem: `initial` and `truth` must differ");
  }
  try {
    return Generate(options, initial, truth);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory(
        "MakeSyntheticProblem: not enough memory for " + std::to_string(options.num_cameras) +
        " cameras, " + std::to_string(options.num_points) + " points and about " +
        Num(options.num_points * options.observations_per_point) + " observations");
  }
}

}  // namespace tiepoint
