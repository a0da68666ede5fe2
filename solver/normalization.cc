#include "solver/normalization.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "solver/ba_problem.h"
#include "solver/camera_model.h"
#include "solver/parallel.h"
#include "io/scene.h"

namespace tiepoint {
namespace {

double Median(std::vector<double>& v) {
  if (v.empty()) return 1.0;
  auto mid = v.begin() + v.size() / 2;
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// Scaling is memory-bound: threads only pay off for long arrays.
int ScaleThreads(int64_t m) { return m > (1 << 20) ? omp_get_max_threads() : 1; }

}  // namespace

Normalization ComputeNormalization(const BAProblem& problem, const double* cameras,
                                   const double* points) {
  Normalization n;
  // The median of an evenly strided sample of at most 100k observations is plenty.
  // Sampled on all threads (each sample reads a point at random; at 29M observations the
  // whole normalization took 9.8 ms with the sample on one thread of the H200 host, 7.8 ms
  // on 16), then kept in sample order: the same depths, the same median.
  const int64_t total = problem.num_observations;
  const int64_t stride = std::max<int64_t>(1, total / 100000);
  const int64_t samples = total > 0 ? (total - 1) / stride + 1 : 0;
  std::vector<double> sampled(static_cast<size_t>(samples));
  const std::vector<BalCameraFrame> frames = MakeBalCameraFrames(cameras, problem.num_cameras);
  ParallelRegion(samples > 4096 ? omp_get_max_threads() : 1, [&] {
#pragma omp for schedule(static)
    for (int64_t k = 0; k < samples; ++k) {
      const int64_t i = k * stride;
      const BalCameraFrame& f = frames[problem.obs_camera[i]];
      const double* X = points + 3 * problem.obs_point[i];
      sampled[k] = std::abs(f.R[6] * X[0] + f.R[7] * X[1] + f.R[8] * X[2] + f.t[2]);
    }
  });
  std::vector<double> depths;
  depths.reserve(sampled.size());
  for (double d : sampled)
    if (std::isfinite(d) && d > 0) depths.push_back(d);
  const double depth = Median(depths);
  std::vector<double> focals;
  for (int c = 0; c < problem.num_cameras; ++c) {
    const double f = std::abs(cameras[9 * c + 6]);
    if (std::isfinite(f) && f > 0) focals.push_back(f);
  }
  const double focal = Median(focals);
  // The power of two nearest v in log scale, 2^round(log2 v), from v's exponent and
  // mantissa bits (no libm call: a fresh process would fault in a page of libm for it).
  auto power_of_two = [](double v) {
    if (!(v > 0) || !std::isfinite(v)) return 1.0;
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    const int biased = static_cast<int>((bits >> 52) & 0x7ff);
    // v = m 2^e with m in [1, 2): log2 v rounds up when m >= sqrt(2). (Subnormal v lie
    // far below the clamp.)
    uint64_t mantissa_bits = (bits & ((uint64_t{1} << 52) - 1)) | (uint64_t{1023} << 52);
    double m;
    std::memcpy(&m, &mantissa_bits, sizeof m);
    const int e = biased == 0 ? -500
                              : std::clamp(biased - 1023 + (m >= 1.4142135623730951 ? 1 : 0), -500, 500);
    const uint64_t out_bits = static_cast<uint64_t>(e + 1023) << 52;
    double out;
    std::memcpy(&out, &out_bits, sizeof out);
    return out;
  };
  n.length_scale = power_of_two(depth);
  n.pixel_scale = power_of_two(focal);
  return n;
}

void NormalizeParameters(const Normalization& n, int num_cameras, int num_points,
                         double* cameras, double* points) {
  for (int c = 0; c < num_cameras; ++c) {
    double* cam = cameras + 9 * c;
    for (int k = 3; k < 6; ++k) cam[k] /= n.length_scale;
    cam[6] /= n.pixel_scale;
  }
  const int64_t m = 3LL * num_points;
  ParallelRegion(ScaleThreads(m), [&] {
#pragma omp for schedule(static)
    for (int64_t k = 0; k < m; ++k) points[k] /= n.length_scale;
  });
}

void DenormalizeParameters(const Normalization& n, int num_cameras, int num_points,
                           double* cameras, double* points) {
  for (int c = 0; c < num_cameras; ++c) {
    double* cam = cameras + 9 * c;
    for (int k = 3; k < 6; ++k) cam[k] *= n.length_scale;
    cam[6] *= n.pixel_scale;
  }
  const int64_t m = 3LL * num_points;
  ParallelRegion(ScaleThreads(m), [&] {
#pragma omp for schedule(static)
    for (int64_t k = 0; k < m; ++k) points[k] *= n.length_scale;
  });
}

void NormalizeObservations(const Normalization& n, Scene* scene) {
  double* v = scene->obs_xy.data();
  const int64_t m = static_cast<int64_t>(scene->obs_xy.size());
  ParallelRegion(ScaleThreads(m), [&] {
#pragma omp for schedule(static)
    for (int64_t k = 0; k < m; ++k) v[k] /= n.pixel_scale;
  });
}

void DenormalizeObservations(const Normalization& n, Scene* scene) {
  double* v = scene->obs_xy.data();
  const int64_t m = static_cast<int64_t>(scene->obs_xy.size());
  ParallelRegion(ScaleThreads(m), [&] {
#pragma omp for schedule(static)
    for (int64_t k = 0; k < m; ++k) v[k] *= n.pixel_scale;
  });
}

}  // namespace tiepoint
