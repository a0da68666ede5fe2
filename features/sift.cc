// SIFT on the CPU: the reference implementation (the algorithm is described in sift.h).
//
// Work is split so that every result lands in a slot fixed before the parallel loop
// (a row, a detection, a keypoint): the output never depends on the thread count.
#include "features/sift.h"

#include "features/sift_cuda.h"
#include "io/base/large_alloc.h"

#include <omp.h>

#ifdef __SSE2__
#include <immintrin.h>
#endif

#include <Eigen/Dense>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <numeric>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace tiepoint {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kTwoPi = 2.0 * kPi;

// Blur assumed already present in the input image (Lowe 2004, section 3.3).
constexpr double kInputBlur = 0.5;
// At most this many moves of the sample point during refinement (Lowe 2004, 4).
constexpr int kMaxRefineMoves = 5;
// Orientation histogram (Lowe 2004, 5).
constexpr int kOrientationBins = 36;
constexpr double kOrientationSigmaFactor = 1.5;
constexpr double kOrientationRadiusFactor = 3.0;
constexpr double kOrientationPeakRatio = 0.8;
// Descriptor (Lowe 2004, 6.1): 4 x 4 x 8 bins, each spatial bin 3 sigma wide.
constexpr int kDescriptorWidth = 4;
constexpr int kDescriptorBins = 8;
constexpr double kDescriptorBinFactor = 3.0;
constexpr double kDescriptorClip = 0.2;
constexpr double kDescriptorQuantScale = 512.0;
// The histogram's spatial bins with a ring around them (Descriptor's `padded`).
constexpr int kDescriptorPaddedWidth = kDescriptorWidth + 2;
static_assert(kDescriptorWidth * kDescriptorWidth * kDescriptorBins == kSiftDescriptorDim,
              "descriptor layout must match kSiftDescriptorDim");

int ResolveThreads(int n) { return n > 0 ? n : omp_get_max_threads(); }

// Below this many pixels (or keypoints x kPixelsPerKeypoint) a loop runs on one thread:
// every parallel region is a fork and a barrier, and the small upper octaves run dozens
// of them. Measured: on a 2-core machine shared with a build, a 96 x 80 image took
// 0.125 s with every region parallel (2 threads) and 0.006 s with this threshold; on a
// dedicated 16-core Xeon the threshold changes nothing measurable (850 x 680: 0.04 s
// either way at 16 threads, best of 5).
constexpr size_t kMinParallelWork = 1 << 15;
constexpr size_t kPixelsPerKeypoint = 1000;

int ThreadsFor(size_t work, int threads) { return work < kMinParallelWork ? 1 : threads; }

// ExtractBatch runs several images at once (one worker each) while their workspaces stay
// below this many bytes together (about 100 MB per worker for a 640 x 480 image with
// upsampling); with fewer workers than threads, each worker parallelises over rows.
constexpr double kBatchWorkspaceBudget = 4.0 * (1 << 30);

// Mirror without repeating the edge pixel: -1 -> 1, n -> n - 2.
int Reflect101(int i, int n) {
  if (n == 1) return 0;
  while (i < 0 || i >= n) {
    if (i < 0) i = -i;
    if (i >= n) i = 2 * n - 2 - i;
  }
  return i;
}

// floor(v) as an int, for |v| < 2^31 (std::floor is a library call without SSE4.1).
inline int FloorToInt(double v) {
  const int i = static_cast<int>(v);
  return i - (v < i ? 1 : 0);
}

// A w x h float image in storage owned by the extractor's workspace, row-major: pixel
// (x, y) is data[y * width + x].
struct Plane {
  int width = 0;
  int height = 0;
  float* data = nullptr;

  size_t size() const { return static_cast<size_t>(width) * height; }
  float* row(int y) const { return data + static_cast<size_t>(y) * width; }
  float at(int x, int y) const { return data[static_cast<size_t>(y) * width + x]; }
};

// Float storage that only grows and is never initialised: from the second image of a size
// on, nothing is allocated, zeroed or faulted in (that took a third of the time before),
// and pages nobody writes (gradients away from keypoints) are never touched at all. Large
// arrays are 2 MiB aligned, on transparent huge pages only when the user asks
// (io/base/large_alloc.h says what they cost on this project's VM).
class Buffer {
 public:
  // Grows to at least n floats; the contents are then undefined.
  void Grow(size_t n) {
    if (n <= size_) return;
    data_.reset(static_cast<float*>(AllocateLarge(n * sizeof(float))));
    size_ = n;
  }
  float* data() const { return data_.get(); }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float[], Free> data_;
  size_t size_ = 0;
};

Plane View(Buffer* storage, int w, int h) {
  storage->Grow(static_cast<size_t>(w) * h);
  return {w, h, storage->data()};
}

// Everything Extract writes besides its output, kept between images.
struct Workspace {
  Buffer input;                   // the (upsampled) input image
  std::vector<Buffer> gauss;      // S + 3 Gaussian images of the octave
  std::vector<Buffer> dog;        // S + 2 DoG images of the octave
  Buffer blur_scratch;            // GaussianBlur's rows, per thread
  std::vector<Buffer> magnitude;  // [octave * S + layer - 1]
  std::vector<Buffer> angle;
  std::vector<int> row_lo, row_hi;            // columns of each row the gradients cover
};

// Normalised half of a Gaussian kernel of radius ceil(4 sigma) (at least 1): k[0] is the
// centre tap, k[j] the weight of the taps j pixels away.
std::vector<float> GaussianKernel(double sigma) {
  const int r = std::max(1, static_cast<int>(std::ceil(4.0 * sigma)));
  std::vector<float> k(r + 1);
  double sum = 0;
  for (int i = 0; i <= r; ++i) {
    const double v = std::exp(-0.5 * i * i / (sigma * sigma));
    k[i] = static_cast<float>(v);
    sum += i == 0 ? v : 2 * v;
  }
  for (float& v : k) v = static_cast<float>(v / sum);
  return k;
}

// x86-64: an AVX2 copy of the vectorised loops besides the baseline (SSE2) one, chosen when
// the program starts. AVX2 without FMA: every operation rounds as in the baseline copy.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TIEPOINT_SIFT_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TIEPOINT_SIFT_CLONES
#endif

// Eight floats (GCC/Clang vector extension): one AVX register in the AVX2 copy, two SSE
// registers in the baseline one; every lane rounds as scalar float arithmetic does.
// Float8u is the same at any float's address (unaligned loads and stores through it). No
// function takes or returns these (the ABI for 32-byte vectors differs without AVX).
typedef float Float8 __attribute__((vector_size(32)));
typedef float Float8u __attribute__((vector_size(32), aligned(4), may_alias));
#define TIEPOINT_AT8(p) (*reinterpret_cast<Float8u*>(p))
#define TIEPOINT_AT8C(p) (*reinterpret_cast<const Float8u*>(p))

// Horizontal pass of one row: out[x] = k0 src[x] + sum_j kj (src[x - j] + src[x + j]),
// accumulated in that order (j = 1..r) in float, mirrored borders. `padded` holds w + 2r
// floats. The loops run over x innermost, so the compiler vectorises them.
TIEPOINT_SIFT_CLONES
void BlurRow(const float* __restrict src, int w, const float* k, int r, float* __restrict padded,
             float* __restrict out) {
  if (w > 2 * r) {
    std::copy(src, src + w, padded + r);
    for (int i = 0; i < r; ++i) {
      padded[i] = src[Reflect101(i - r, w)];
      padded[w + r + i] = src[Reflect101(w + i, w)];
    }
  } else {
    for (int i = 0; i < w + 2 * r; ++i) padded[i] = src[Reflect101(i - r, w)];
  }
  const float* p = padded + r;
  const float k0 = k[0];
  // Blocks of 32 columns summed in registers over all taps.
  int x0 = 0;
  for (; x0 + 32 <= w; x0 += 32) {
    const Float8 k0v = Float8{} + k0;
    Float8 acc[4];
    for (int v = 0; v < 4; ++v) acc[v] = k0v * TIEPOINT_AT8C(p + x0 + 8 * v);
    for (int j = 1; j <= r; ++j) {
      const Float8 kj = Float8{} + k[j];
      const float* a = p + x0 - j;
      const float* b = p + x0 + j;
      for (int v = 0; v < 4; ++v) acc[v] += kj * (TIEPOINT_AT8C(a + 8 * v) + TIEPOINT_AT8C(b + 8 * v));
    }
    for (int v = 0; v < 4; ++v) TIEPOINT_AT8(out + x0 + 8 * v) = acc[v];
  }
  for (int x = x0; x < w; ++x) out[x] = k0 * p[x];
  for (int j = 1; j <= r; ++j) {
    const float kj = k[j];
    const float* a = p - j;
    const float* b = p + j;
    for (int x = x0; x < w; ++x) out[x] += kj * (a[x] + b[x]);
  }
}

// Vertical pass of one row: dst[x] = k0 c[x] + sum_j kj (rows[-j][x] + rows[j][x]), j = 1..r,
// in that order; rows[j] is the horizontally filtered row j rows below (above for j < 0).
TIEPOINT_SIFT_CLONES
void BlurColumn(const float* const* rows, int w, const float* k, int r, float* __restrict dst) {
  const float* __restrict c = rows[0];
  const float k0 = k[0];
  // Blocks of 32 columns summed in registers over all taps (one load of each input row
  // per tap instead of a load and a store of dst as well), then the remaining columns.
  int x0 = 0;
  for (; x0 + 32 <= w; x0 += 32) {
    const Float8 k0v = Float8{} + k0;
    Float8 acc[4];
    for (int v = 0; v < 4; ++v) acc[v] = k0v * TIEPOINT_AT8C(c + x0 + 8 * v);
    for (int j = 1; j <= r; ++j) {
      const float* a = rows[-j] + x0;
      const float* b = rows[j] + x0;
      const Float8 kj = Float8{} + k[j];
      for (int v = 0; v < 4; ++v) acc[v] += kj * (TIEPOINT_AT8C(a + 8 * v) + TIEPOINT_AT8C(b + 8 * v));
    }
    for (int v = 0; v < 4; ++v) TIEPOINT_AT8(dst + x0 + 8 * v) = acc[v];
  }
  for (int x = x0; x < w; ++x) dst[x] = k0 * c[x];
  for (int j = 1; j <= r; ++j) {
    const float* __restrict a = rows[-j];
    const float* __restrict b = rows[j];
    const float kj = k[j];
    for (int x = x0; x < w; ++x) dst[x] += kj * (a[x] + b[x]);
  }
}

// Separable Gaussian blur, kernel radius ceil(4 sigma), mirrored borders: the horizontal
// pass, then the vertical one (dst = k0 c + sum_j kj (a_j + b_j), j = 1..r, in float), so
// every output pixel is the same float expression as in the CUDA blur (sift_cuda.cu).
// Each thread takes a band of output rows and keeps the 2r + 1 horizontally filtered rows
// around the current one in a ring, so the intermediate image never leaves the cache.
// With `dog`, also writes out - in there (the DoG, while both rows are in the cache).
// `in` and `out` must not overlap.
void GaussianBlur(const Plane& in, double sigma, int threads, Buffer* scratch,
                  const Plane& out, const Plane* dog = nullptr) {
  const int w = in.width, h = in.height;
  const std::vector<float> k = GaussianKernel(sigma);
  const int r = static_cast<int>(k.size()) - 1;
  const int ring_rows = 2 * r + 1;
  const size_t per_thread = static_cast<size_t>(ring_rows) * w + w + 2 * r;
  const int nt = std::min(ThreadsFor(in.size(), threads), std::max(1, h / (2 * r + 1)));
  scratch->Grow(per_thread * nt);
  float* const scratch_base = scratch->data();
  const float* const kp = k.data();
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    const int y0 = static_cast<int>(static_cast<int64_t>(h) * t / n);
    const int y1 = static_cast<int>(static_cast<int64_t>(h) * (t + 1) / n);
    float* const ring = scratch_base + per_thread * t;
    float* const padded = ring + static_cast<size_t>(ring_rows) * w;
    // Ring slot of virtual row v (v may lie outside [0, h): the mirrored row's filter).
    auto slot = [&](int v) {
      return ring + static_cast<size_t>(((v % ring_rows) + ring_rows) % ring_rows) * w;
    };
    int next = y0 - r;  // next virtual row to filter horizontally
    std::vector<const float*> rows(2 * r + 1);
    for (int y = y0; y < y1; ++y) {
      for (; next <= y + r; ++next) BlurRow(in.row(Reflect101(next, h)), w, kp, r, padded, slot(next));
      for (int j = -r; j <= r; ++j) rows[j + r] = slot(y + j);
      BlurColumn(rows.data() + r, w, kp, r, out.row(y));
      if (dog) {
        const float* __restrict a = out.row(y);
        const float* __restrict b = in.row(y);
        float* __restrict d = dog->row(y);
        for (int x = 0; x < w; ++x) d[x] = a[x] - b[x];
      }
    }
  }
}

// Bilinear 2x upsampling onto (2w-1) x (2h-1): output pixel (2i, 2j) is input (i, j),
// odd pixels are midpoints, so no pixel is extrapolated.
void Upsample2x(const GrayImage& in, int threads, const Plane& out) {
  const int w = in.width;
  const int ow = out.width;
#pragma omp parallel for num_threads(ThreadsFor(out.size(), threads)) schedule(static)
  for (int oy = 0; oy < out.height; ++oy) {
    const int y0 = oy / 2, y1 = (oy % 2) ? y0 + 1 : y0;
    const float* a = &in.pixels[static_cast<size_t>(y0) * w];
    const float* b = &in.pixels[static_cast<size_t>(y1) * w];
    float* dst = out.row(oy);
    for (int ox = 0; ox < ow; ++ox) {
      const int x0 = ox / 2, x1 = (ox % 2) ? x0 + 1 : x0;
      dst[ox] = 0.25f * ((a[x0] + a[x1]) + (b[x0] + b[x1]));
    }
  }
}

// Keeps the even pixels: output (i, j) is input (2i, 2j).
void Downsample2x(const Plane& in, const Plane& out) {
  for (int y = 0; y < out.height; ++y) {
    const float* src = in.row(2 * y);
    float* dst = out.row(y);
    for (int x = 0; x < out.width; ++x) dst[x] = src[2 * x];
  }
}

// atan2(y, x) in [-pi, pi] within 4e-7 rad of the exact value (std::atan2f: within one
// float ulp, 2.4e-7 at pi): an odd degree-13 polynomial in min/max(|x|, |y|) on [0, 1]
// (fitted by iteratively reweighted least squares, max error 3.2e-7 evaluated in float),
// mapped to the octant. Branch-free, so loops over it vectorise. atan2(0, 0) = 0.
constexpr float kAtanC0 = 9.9999611155e-01f, kAtanC1 = -3.3317368061e-01f,
                kAtanC2 = 1.9807815586e-01f, kAtanC3 = -1.3233342098e-01f,
                kAtanC4 = 7.9623671590e-02f, kAtanC5 = -3.3604219449e-02f,
                kAtanC6 = 6.8117928273e-03f;
constexpr float kPiF = 3.14159265358979f, kHalfPiF = 1.57079632679490f;

inline float FastAtan2(float y, float x) {
  const float ax = std::fabs(x), ay = std::fabs(y);
  const float mx = ax > ay ? ax : ay;
  const float mn = ax > ay ? ay : ax;
  const float a = mn / (mx > 1e-30f ? mx : 1e-30f);
  const float s = a * a;
  float r = ((((((kAtanC6 * s + kAtanC5) * s + kAtanC4) * s + kAtanC3) * s + kAtanC2) * s + kAtanC1) * s +
             kAtanC0) *
            a;
  r = ay > ax ? kHalfPiF - r : r;
  r = x < 0.0f ? kPiF - r : r;
  return y < 0.0f ? -r : r;
}

#ifdef __SSE2__
// FastAtan2 on four lanes, operation for operation (so bit for bit) the scalar one.
inline __m128 FastAtan2x4(__m128 y, __m128 x) {
  auto select = [](__m128 mask, __m128 a, __m128 b) {  // mask ? a : b
    return _mm_or_ps(_mm_and_ps(mask, a), _mm_andnot_ps(mask, b));
  };
  const __m128 sign = _mm_set1_ps(-0.0f), zero = _mm_setzero_ps(), tiny = _mm_set1_ps(1e-30f);
  const __m128 ax = _mm_andnot_ps(sign, x), ay = _mm_andnot_ps(sign, y);
  const __m128 x_wins = _mm_cmpgt_ps(ax, ay);
  const __m128 mx = select(x_wins, ax, ay);
  const __m128 mn = select(x_wins, ay, ax);
  const __m128 a = _mm_div_ps(mn, select(_mm_cmpgt_ps(mx, tiny), mx, tiny));
  const __m128 s = _mm_mul_ps(a, a);
  __m128 r = _mm_add_ps(_mm_mul_ps(_mm_set1_ps(kAtanC6), s), _mm_set1_ps(kAtanC5));
  r = _mm_add_ps(_mm_mul_ps(r, s), _mm_set1_ps(kAtanC4));
  r = _mm_add_ps(_mm_mul_ps(r, s), _mm_set1_ps(kAtanC3));
  r = _mm_add_ps(_mm_mul_ps(r, s), _mm_set1_ps(kAtanC2));
  r = _mm_add_ps(_mm_mul_ps(r, s), _mm_set1_ps(kAtanC1));
  r = _mm_add_ps(_mm_mul_ps(r, s), _mm_set1_ps(kAtanC0));
  r = _mm_mul_ps(r, a);
  r = select(_mm_cmpgt_ps(ay, ax), _mm_sub_ps(_mm_set1_ps(kHalfPiF), r), r);
  r = select(_mm_cmplt_ps(x, zero), _mm_sub_ps(_mm_set1_ps(kPiF), r), r);
  return select(_mm_cmplt_ps(y, zero), _mm_xor_ps(sign, r), r);
}
#endif

// Gradient of the Gaussian image L at columns [x0, x1] of row y (1 <= y <= h - 2,
// 1 <= x0, x1 <= w - 2), central differences: magnitude sqrt(dx^2 + dy^2) (exactly as
// std::sqrt) and FastAtan2(dy, dx).
void GradientRow(const Plane& L, int y, int x0, int x1, float* __restrict magnitude,
                 float* __restrict angle) {
  const float* __restrict up = L.row(y - 1);
  const float* __restrict mid = L.row(y);
  const float* __restrict down = L.row(y + 1);
  int x = x0;
#ifdef __SSE2__
  for (; x + 4 <= x1 + 1; x += 4) {
    const __m128 dx = _mm_sub_ps(_mm_loadu_ps(mid + x + 1), _mm_loadu_ps(mid + x - 1));
    const __m128 dy = _mm_sub_ps(_mm_loadu_ps(down + x), _mm_loadu_ps(up + x));
    _mm_storeu_ps(magnitude + x, _mm_sqrt_ps(_mm_add_ps(_mm_mul_ps(dx, dx), _mm_mul_ps(dy, dy))));
    _mm_storeu_ps(angle + x, FastAtan2x4(dy, dx));
  }
#endif
  for (; x <= x1; ++x) {
    const float dx = mid[x + 1] - mid[x - 1];
    const float dy = down[x] - up[x];
    magnitude[x] = std::sqrt(dx * dx + dy * dy);
    angle[x] = FastAtan2(dy, dx);
  }
}

// What orientation assignment and descriptors need of an octave: the gradient (magnitude
// and angle) of the Gaussian images L_1..L_S, on the pixels the keypoints' windows cover
// (never on the outermost pixels, where central differences are undefined: those never
// vote). A layer without keypoints has none (nullptr).
struct OctaveGradients {
  int width = 0;
  int height = 0;
  std::vector<const float*> magnitude;  // [layer - 1][y * width + x]
  std::vector<const float*> angle;
};

struct Detection {
  int octave = 0;
  int layer = 0;  // refined DoG layer, 1..S
  int xi = 0;     // refined integer sample, octave pixels
  int yi = 0;
  double x = 0;  // sub-pixel position, octave pixels
  double y = 0;
  double layer_offset = 0;  // sub-layer offset, [-0.5, 0.5] (up to +-1 at layers 1 and S)
  double response = 0;      // interpolated |D|
  float candidate = 0;      // |D| at the sample the refinement started from (prefilter)
};

struct OrientedKeypoint {
  int detection = 0;  // index into the detections
  double angle = 0;   // radians, [0, 2 pi)
};

class SiftCpu : public FeatureExtractor {
 public:
  explicit SiftCpu(const SiftOptions& options) : options_(options) {}
  Status Extract(const GrayImage& image, Features* features) override;
  void ExtractBatch(const std::vector<const GrayImage*>& images, std::vector<Features>* features,
                    std::vector<Status>* statuses) override;
  Status SetContrastThreshold(double contrast_threshold) override {
    SiftOptions changed = options_;
    changed.contrast_threshold = contrast_threshold;
    TIEPOINT_RETURN_IF_ERROR(changed.Check());
    options_.contrast_threshold = contrast_threshold;
    for (auto& w : workers_) w->options_.contrast_threshold = contrast_threshold;
    return Status::Ok();
  }

 private:
  // Scans D_1..D_S of one octave for extrema and refines them.
  void DetectInOctave(int octave, const std::vector<Plane>& dog, int threads,
                      std::vector<Detection>* detections) const;
  bool Refine(const std::vector<Plane>& dog, int x, int y, int layer, Detection* det) const;
  // Gradients of gauss[1..S] over the windows of `detections` (those of this octave).
  void ComputeGradients(int octave, const std::vector<Plane>& gauss,
                        const std::vector<Detection>& detections, int threads,
                        OctaveGradients* g);
  void Orientations(const OctaveGradients& g, const Detection& det,
                    std::vector<double>* angles) const;
  void Descriptor(const OctaveGradients& g, const Detection& det, double angle,
                  uint8_t* out) const;
  double LoweSigma(const Detection& det) const {
    return options_.sigma * std::pow(2.0, (det.layer + det.layer_offset) / options_.octave_layers);
  }
  int OrientationRadius(const Detection& det) const {
    return static_cast<int>(
        std::lround(kOrientationRadiusFactor * kOrientationSigmaFactor * LoweSigma(det)));
  }
  int DescriptorRadius(const Detection& det) const {
    // Every pixel whose rotated position can reach a bin: half-diagonal of (d+1) bins.
    return static_cast<int>(std::lround(kDescriptorBinFactor * LoweSigma(det) * std::sqrt(2.0) *
                                        (kDescriptorWidth + 1) * 0.5));
  }
  // Bytes of workspace Extract uses for a w x h image.
  double WorkspaceBytes(int w, int h) const;

  // The lowest contrast threshold a candidate is refined against: contrast_threshold, or
  // with min_features, its last halving at or above min_contrast_threshold.
  // contrast_threshold halved while it stays at or above `floor` (the last value of the
  // tier search below, reached by the same products).
  double Lowest(double floor) const {
    double t = options_.contrast_threshold;
    while (t * 0.5 >= floor * (1 - 1e-9)) t *= 0.5;
    return t;
  }
  bool Fallback() const { return options_.min_features > 0 && options_.fallback_min_features > 0; }
  double DetectionThreshold() const {
    if (options_.min_features <= 0) return options_.contrast_threshold;
    return Lowest(Fallback() ? options_.fallback_min_contrast_threshold : options_.min_contrast_threshold);
  }

  // Whether a plain run at contrast threshold t finds a refined sample: a candidate refined
  // onto it passed t's prefilter (candidate: its largest |D| there) and its contrast passes t.
  bool PassesThreshold(float candidate, double response, double t) const {
    const int S = options_.octave_layers;
    return candidate > static_cast<float>(0.5 * t / S) && response * S >= t;
  }

  SiftOptions options_;
  // The threshold DetectInOctave and Refine use in the running Extract.
  double detect_threshold_ = 0;
  Workspace ws_;
  // ExtractBatch's workers (one image each at a time), kept for their workspaces.
  std::vector<std::unique_ptr<SiftCpu>> workers_;
};

bool SiftCpu::Refine(const std::vector<Plane>& dog, int x, int y, int layer,
                     Detection* det) const {
  const int S = options_.octave_layers;
  const int w = dog[0].width, h = dog[0].height;
  Eigen::Vector3d g, offset;
  Eigen::Matrix3d H;
  double value = 0;
  int prev_x = -1, prev_y = -1, prev_layer = -1;
  for (int moves = 0;; ++moves) {
    const Plane& prev = dog[layer - 1];
    const Plane& cur = dog[layer];
    const Plane& next = dog[layer + 1];
    value = cur.at(x, y);
    g << 0.5 * (cur.at(x + 1, y) - cur.at(x - 1, y)), 0.5 * (cur.at(x, y + 1) - cur.at(x, y - 1)),
        0.5 * (next.at(x, y) - prev.at(x, y));
    const double dxx = cur.at(x + 1, y) + cur.at(x - 1, y) - 2.0 * value;
    const double dyy = cur.at(x, y + 1) + cur.at(x, y - 1) - 2.0 * value;
    const double dss = next.at(x, y) + prev.at(x, y) - 2.0 * value;
    const double dxy = 0.25 * (cur.at(x + 1, y + 1) - cur.at(x - 1, y + 1) -
                               cur.at(x + 1, y - 1) + cur.at(x - 1, y - 1));
    const double dxs = 0.25 * (next.at(x + 1, y) - next.at(x - 1, y) -
                               prev.at(x + 1, y) + prev.at(x - 1, y));
    const double dys = 0.25 * (next.at(x, y + 1) - next.at(x, y - 1) -
                               prev.at(x, y + 1) + prev.at(x, y - 1));
    H << dxx, dxy, dxs, dxy, dyy, dys, dxs, dys, dss;
    Eigen::Matrix3d H_inv;
    bool invertible = false;
    H.computeInverseWithCheck(H_inv, invertible, 1e-30);
    if (!invertible) return false;
    offset = -H_inv * g;
    if (!offset.allFinite() || offset.cwiseAbs().maxCoeff() > 1e6) return false;
    // A step beyond layer 1 or S would leave the octave. Near an octave boundary the
    // quadratic can overshoot |offset_s| = 0.5 while the neighbouring octave has no
    // extremum there, and Lowe's rule (reject) then loses every blob of those scales
    // (a Gaussian blob of sigma 8.16 px gave no keypoint at all). The layer is kept
    // instead. (A 0.2%-wide band around sigma 5.085 px remains where neither octave
    // has an extremum.)
    const int step_x = std::abs(offset[0]) > 0.5 ? static_cast<int>(std::lround(offset[0])) : 0;
    const int step_y = std::abs(offset[1]) > 0.5 ? static_cast<int>(std::lround(offset[1])) : 0;
    const int step_s =
        std::abs(offset[2]) > 0.5
            ? std::clamp(static_cast<int>(std::lround(offset[2])), 1 - layer, S - layer)
            : 0;
    // Converged; or bouncing back to the previous sample, which happens when the
    // extremum lies half-way between two samples (a blob centred between two pixels)
    // and the fit overshoots 0.5 from both. Either way the fit must stay within one
    // sample of this one.
    const bool converged = step_x == 0 && step_y == 0 && step_s == 0;
    const bool bouncing =
        x + step_x == prev_x && y + step_y == prev_y && layer + step_s == prev_layer;
    if (converged || bouncing) {
      if (offset.cwiseAbs().maxCoeff() < 1.0) break;
      return false;
    }
    if (moves == kMaxRefineMoves) return false;
    prev_x = x;
    prev_y = y;
    prev_layer = layer;
    x += step_x;
    y += step_y;
    layer += step_s;
    if (x < kSiftBorder || x >= w - kSiftBorder || y < kSiftBorder || y >= h - kSiftBorder) {
      return false;
    }
  }
  const double contrast = value + 0.5 * g.dot(offset);
  if (std::abs(contrast) * S < detect_threshold_) return false;
  const double tr = H(0, 0) + H(1, 1);
  const double det2 = H(0, 0) * H(1, 1) - H(0, 1) * H(0, 1);
  const double r = options_.edge_threshold;
  if (det2 <= 0 || tr * tr * r >= (r + 1) * (r + 1) * det2) return false;
  det->layer = layer;
  det->xi = x;
  det->yi = y;
  det->x = x + offset[0];
  det->y = y + offset[1];
  det->layer_offset = offset[2];
  det->response = std::abs(contrast);
  return true;
}

#if defined(__SSE2__) && (defined(__x86_64__) || defined(__i386__))
#define TIEPOINT_SIFT_AVX2_EXTREMA 1
// The 8 samples at x..x+7 of row c1 that may be extrema, as a bit mask: |v| above the
// prefilter, and v beyond the largest (or smallest) of the 13 neighbours that come before
// it in (layer, y, x) order and at least the largest (smallest) of the 13 after. A filter
// only: each lane it passes gets the exact scalar test (a NaN neighbour, which max and min
// may drop, can only let a lane through, never stop one that the exact test passes).
__attribute__((target("avx2"), always_inline)) inline void MaxMin3(const float* r, __m256* mx, __m256* mn) {
  for (int dx = -1; dx <= 1; ++dx) {
    const __m256 a = _mm256_loadu_ps(r + dx);
    *mx = _mm256_max_ps(*mx, a);
    *mn = _mm256_min_ps(*mn, a);
  }
}

__attribute__((target("avx2"))) int ExtremumCandidatesAvx2(const float* const rows[9], int x, float prefilter) {
  // rows: prev layer y-1, y, y+1; this layer y-1, y, y+1; next layer y-1, y, y+1.
  const __m256 v = _mm256_loadu_ps(rows[4] + x);
  const __m256 pass = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), v), _mm256_set1_ps(prefilter), _CMP_GT_OQ);
  if (_mm256_movemask_ps(pass) == 0) return 0;
  __m256 smax = _mm256_loadu_ps(rows[4] + x - 1), smin = smax;  // this row, x - 1: before
  __m256 wmax = _mm256_loadu_ps(rows[4] + x + 1), wmin = wmax;  // this row, x + 1: after
  for (int r = 0; r < 4; ++r) MaxMin3(rows[r] + x, &smax, &smin);
  for (int r = 5; r < 9; ++r) MaxMin3(rows[r] + x, &wmax, &wmin);
  const __m256 pos = _mm256_and_ps(_mm256_cmp_ps(v, smax, _CMP_GT_OQ), _mm256_cmp_ps(v, wmax, _CMP_GE_OQ));
  const __m256 neg = _mm256_and_ps(_mm256_cmp_ps(v, smin, _CMP_LT_OQ), _mm256_cmp_ps(v, wmin, _CMP_LE_OQ));
  return _mm256_movemask_ps(_mm256_and_ps(pass, _mm256_or_ps(pos, neg)));
}
#endif

void SiftCpu::DetectInOctave(int octave, const std::vector<Plane>& dog, int threads,
                             std::vector<Detection>* detections) const {
  const int S = options_.octave_layers;
  const int w = dog[0].width, h = dog[0].height;
  const float prefilter = static_cast<float>(0.5 * detect_threshold_ / S);
  const int nt = ThreadsFor(static_cast<size_t>(w) * h, threads);
#ifdef TIEPOINT_SIFT_AVX2_EXTREMA
  static const bool avx2 = __builtin_cpu_supports("avx2");
#endif
  for (int layer = 1; layer <= S; ++layer) {
    std::vector<std::vector<Detection>> rows(h);
    const Plane& prev = dog[layer - 1];
    const Plane& cur = dog[layer];
    const Plane& next = dog[layer + 1];
#pragma omp parallel for num_threads(nt) schedule(dynamic, 4)
    for (int y = kSiftBorder; y < h - kSiftBorder; ++y) {
      const float* row = cur.row(y);
      const int x_end = w - kSiftBorder;
      // The exact test of sample x: strictly beyond the neighbours that come before it in
      // (layer, y, x) order, at least equal to those after: of a pair of equal samples (a
      // blob centred between two pixels) exactly the first is an extremum, instead of
      // neither.
      auto consider = [&](int x) {
        const float v = row[x];
        if (!(std::abs(v) > prefilter)) return;
        const float sign = v > 0 ? 1.0f : -1.0f;
        const float sv = sign * v;
        bool extremum = true;
        for (int dy = -1; dy <= 1 && extremum; ++dy) {
          for (int dx = -1; dx <= 1 && extremum; ++dx) {
            const float a = sign * prev.at(x + dx, y + dy);
            const float b = sign * next.at(x + dx, y + dy);
            const float c = sign * cur.at(x + dx, y + dy);
            const bool c_before = dy < 0 || (dy == 0 && dx < 0);
            const bool c_ok = (dx == 0 && dy == 0) || (c_before ? sv > c : sv >= c);
            extremum = sv > a && sv >= b && c_ok;
          }
        }
        if (!extremum) return;
        Detection det;
        det.octave = octave;
        det.candidate = std::abs(v);
        if (Refine(dog, x, y, layer, &det)) rows[y].push_back(det);
      };
      int x = kSiftBorder;
#ifdef TIEPOINT_SIFT_AVX2_EXTREMA
      if (avx2) {
        const float* const nine[9] = {prev.row(y - 1), prev.row(y), prev.row(y + 1),
                                      cur.row(y - 1),  cur.row(y),  cur.row(y + 1),
                                      next.row(y - 1), next.row(y), next.row(y + 1)};
        for (; x + 8 <= x_end; x += 8) {
          for (int m = ExtremumCandidatesAvx2(nine, x, prefilter); m != 0; m &= m - 1) consider(x + __builtin_ctz(m));
        }
      }
#endif
      for (; x < x_end; ++x) {
#ifdef __SSE2__
        // Most samples fail the prefilter: skip them four at a time.
        {
          const __m128 t = _mm_set1_ps(prefilter), sign = _mm_set1_ps(-0.0f);
          while (x + 4 <= x_end &&
                 _mm_movemask_ps(_mm_cmpgt_ps(_mm_andnot_ps(sign, _mm_loadu_ps(row + x)), t)) == 0) {
            x += 4;
          }
          if (x >= x_end) break;
        }
#endif
        consider(x);
      }
    }
    for (const auto& row : rows) detections->insert(detections->end(), row.begin(), row.end());
  }
}

void SiftCpu::ComputeGradients(int octave, const std::vector<Plane>& gauss,
                               const std::vector<Detection>& detections, int threads,
                               OctaveGradients* g) {
  const int S = options_.octave_layers;
  const int w = gauss[0].width, h = gauss[0].height;
  g->width = w;
  g->height = h;
  g->magnitude.assign(S, nullptr);
  g->angle.assign(S, nullptr);
  if (w < 3 || h < 3) return;
  std::vector<int>& lo = ws_.row_lo;
  std::vector<int>& hi = ws_.row_hi;
  for (int layer = 1; layer <= S; ++layer) {
    // The columns each row's windows cover (Orientations and Descriptor read no others).
    lo.assign(h, w);
    hi.assign(h, -1);
    bool any = false;
    for (const Detection& det : detections) {
      if (det.octave != octave || det.layer != layer) continue;
      any = true;
      const int radius = std::max(OrientationRadius(det), DescriptorRadius(det));
      const int cx = static_cast<int>(std::lround(det.x)), cy = static_cast<int>(std::lround(det.y));
      const int y0 = std::max(1, cy - radius), y1 = std::min(h - 2, cy + radius);
      const int x0 = std::max(1, cx - radius), x1 = std::min(w - 2, cx + radius);
      for (int y = y0; y <= y1; ++y) {
        lo[y] = std::min(lo[y], x0);
        hi[y] = std::max(hi[y], x1);
      }
    }
    if (!any) continue;
    const size_t slot = static_cast<size_t>(octave) * S + layer - 1;
    float* magnitude = View(&ws_.magnitude[slot], w, h).data;
    float* angle = View(&ws_.angle[slot], w, h).data;
    const Plane& L = gauss[layer];
#pragma omp parallel for num_threads(ThreadsFor(L.size(), threads)) schedule(dynamic, 16)
    for (int y = 1; y < h - 1; ++y) {
      if (lo[y] > hi[y]) continue;
      const size_t offset = static_cast<size_t>(y) * w;
      GradientRow(L, y, lo[y], hi[y], magnitude + offset, angle + offset);
    }
    g->magnitude[layer - 1] = magnitude;
    g->angle[layer - 1] = angle;
  }
}

// The factors of a Gaussian window exp(-k ((px - x)^2 + (py - y)^2)) centred on a
// detection (x, y) over the pixels cx - radius .. cx + radius and cy - radius ..
// cy + radius: pixel (cx + i, cy + j) weighs y()[j + radius] * x()[i + radius]. Held on
// the stack up to radius 64.
class GaussianWindow {
 public:
  GaussianWindow(const Detection& det, int cx, int cy, int radius, double k) {
    if (radius > kSmallRadius) {
      big_.resize(2 * (2 * radius + 1));
      x_ = big_.data();
      y_ = x_ + 2 * radius + 1;
    }
    for (int i = -radius; i <= radius; ++i) {
      const double dx = cx + i - det.x, dy = cy + i - det.y;
      x_[i + radius] = std::exp(-dx * dx * k);
      y_[i + radius] = std::exp(-dy * dy * k);
    }
  }
  GaussianWindow(const GaussianWindow&) = delete;
  GaussianWindow& operator=(const GaussianWindow&) = delete;
  const double* x() const { return x_; }
  const double* y() const { return y_; }

 private:
  static constexpr int kSmallRadius = 64;
  double small_x_[2 * kSmallRadius + 1];
  double small_y_[2 * kSmallRadius + 1];
  std::vector<double> big_;
  double* x_ = small_x_;
  double* y_ = small_y_;
};

void SiftCpu::Orientations(const OctaveGradients& g, const Detection& det,
                           std::vector<double>* angles) const {
  angles->clear();
  const float* mag = g.magnitude[det.layer - 1];
  const float* ang = g.angle[det.layer - 1];
  const double sw = kOrientationSigmaFactor * LoweSigma(det);
  const int radius = OrientationRadius(det);
  const double inv_two_sw2 = 1.0 / (2.0 * sw * sw);
  const int cx = static_cast<int>(std::lround(det.x)), cy = static_cast<int>(std::lround(det.y));
  // The Gaussian weight exp(-(dx^2 + dy^2) / (2 sw^2)) as a product of a column and a
  // row factor.
  const GaussianWindow window(det, cx, cy, radius, inv_two_sw2);
  const double* ex = window.x();
  const double* ey = window.y();
  constexpr double kBinsPerRadian = kOrientationBins / kTwoPi;
  double hist[kOrientationBins] = {0};
  for (int j = -radius; j <= radius; ++j) {
    const int py = cy + j;
    if (py < 1 || py >= g.height - 1) continue;
    // Columns with i^2 + j^2 <= radius^2, inside the image.
    int half = static_cast<int>(std::sqrt(static_cast<double>(radius * radius - j * j)));
    while ((half + 1) * (half + 1) + j * j <= radius * radius) ++half;
    while (half * half + j * j > radius * radius) --half;
    const int i0 = std::max(-half, 1 - cx), i1 = std::min(half, g.width - 2 - cx);
    const size_t row = static_cast<size_t>(py) * g.width + cx;
    const double wrow = ey[j + radius];
    for (int i = i0; i <= i1; ++i) {
      const size_t idx = row + i;
      const double weight = wrow * ex[i + radius] * mag[idx];
      double bin = ang[idx] * kBinsPerRadian;
      bin += kOrientationBins * (bin < 0);  // branch-free: the sign is random
      const int b0 = FloorToInt(bin);
      const double frac = bin - b0;
      const int k0 = b0 >= kOrientationBins ? b0 - kOrientationBins : b0;
      const int k1 = k0 + 1 == kOrientationBins ? 0 : k0 + 1;
      hist[k0] += weight * (1.0 - frac);
      hist[k1] += weight * frac;
    }
  }
  // Smooth with [1 4 6 4 1] / 16, circularly.
  double smooth[kOrientationBins];
  const int n = kOrientationBins;
  for (int i = 0; i < n; ++i) {
    smooth[i] = (hist[(i + n - 2) % n] + hist[(i + 2) % n]) * (1.0 / 16) +
                (hist[(i + n - 1) % n] + hist[(i + 1) % n]) * (4.0 / 16) + hist[i] * (6.0 / 16);
  }
  const double peak = *std::max_element(smooth, smooth + n);
  if (!(peak > 0)) return;
  for (int i = 0; i < n; ++i) {
    const double l = smooth[(i + n - 1) % n], c = smooth[i], r = smooth[(i + 1) % n];
    if (c > l && c > r && c >= kOrientationPeakRatio * peak) {
      const double offset = 0.5 * (l - r) / (l - 2.0 * c + r);
      double angle = (i + offset) * (kTwoPi / n);
      if (angle < 0) angle += kTwoPi;
      if (angle >= kTwoPi) angle -= kTwoPi;
      angles->push_back(angle);
    }
  }
}

#ifdef TIEPOINT_SIFT_AVX2_EXTREMA
// Descriptor's per-sample arithmetic for n samples of one row, 4 at a time, the same
// operations in the same order as its scalar loop and its `add` (no FMA), so the same
// values: for each sample inside the window (valid), the offset of its cell (row r0, column
// c0) in the padded histogram, its orientation bin o0, and the eight trilinear weights
// `add` spreads (w[0], w[1]: cell (r0, c0) at o0, o0 + 1; w[2], w[3]: (r0, c0 + 1); w[4],
// w[5]: (r0 + 1, c0); w[6], w[7]: (r0 + 1, c0 + 1)). The caller's loop is left with the
// eight additions (its `spread`, which its scalar `add` ends in too).
struct DescriptorSamples {
  static constexpr int kMaxSamples = 136;  // a row's samples at most
  double w[8][kMaxSamples];
  int cell[kMaxSamples], o0[kMaxSamples];
  int valid[kMaxSamples];
};
__attribute__((target("avx2"))) void DescriptorRowAvx2(int n, double x0, double det_x, double dy, double cos_t,
                                                     double sin_t, double wrow, const double* ex,
                                                     const float* mag, const float* ang, double angle,
                                                     DescriptorSamples* out) {
  constexpr double d = kDescriptorWidth, nb = kDescriptorBins;
  const __m256d lanes = _mm256_set_pd(3, 2, 1, 0);
  const __m256d vcos = _mm256_set1_pd(cos_t), vsin = _mm256_set1_pd(sin_t), vnsin = _mm256_set1_pd(-sin_t);
  const __m256d vdy = _mm256_set1_pd(dy), vdetx = _mm256_set1_pd(det_x);
  const __m256d ady_r = _mm256_mul_pd(vsin, vdy), ady_c = _mm256_mul_pd(vcos, vdy);
  const __m256d half_d = _mm256_set1_pd(0.5 * d), half = _mm256_set1_pd(0.5);
  const __m256d minus1 = _mm256_set1_pd(-1.0), vd = _mm256_set1_pd(d), zero = _mm256_setzero_pd();
  const __m256d two_pi = _mm256_set1_pd(kTwoPi), bins_per_radian = _mm256_set1_pd(nb / kTwoPi);
  const __m256d vnb = _mm256_set1_pd(nb), vwrow = _mm256_set1_pd(wrow), vangle = _mm256_set1_pd(angle);
  const __m256d one = _mm256_set1_pd(1.0), vdp = _mm256_set1_pd(kDescriptorPaddedWidth);
  int k = 0;
  for (; k + 4 <= n; k += 4) {
    const __m256d dx = _mm256_sub_pd(_mm256_add_pd(_mm256_set1_pd(x0 + k), lanes), vdetx);
    const __m256d rx = _mm256_add_pd(_mm256_mul_pd(vcos, dx), ady_r);
    const __m256d ry = _mm256_add_pd(_mm256_mul_pd(vnsin, dx), ady_c);
    const __m256d cbin = _mm256_sub_pd(_mm256_add_pd(rx, half_d), half);
    const __m256d rbin = _mm256_sub_pd(_mm256_add_pd(ry, half_d), half);
    const __m256d inside = _mm256_and_pd(
        _mm256_and_pd(_mm256_cmp_pd(rbin, minus1, _CMP_GT_OQ), _mm256_cmp_pd(rbin, vd, _CMP_LT_OQ)),
        _mm256_and_pd(_mm256_cmp_pd(cbin, minus1, _CMP_GT_OQ), _mm256_cmp_pd(cbin, vd, _CMP_LT_OQ)));
    const int mask = _mm256_movemask_pd(inside);
    for (int l = 0; l < 4; ++l) out->valid[k + l] = (mask >> l) & 1;
    if (mask == 0) continue;
    const __m256d weight =
        _mm256_mul_pd(_mm256_mul_pd(vwrow, _mm256_loadu_pd(ex + k)), _mm256_cvtps_pd(_mm_loadu_ps(mag + k)));
    __m256d rel = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(ang + k)), vangle);
    rel = _mm256_add_pd(rel, _mm256_and_pd(_mm256_cmp_pd(rel, zero, _CMP_LT_OQ), two_pi));
    rel = _mm256_add_pd(rel, _mm256_and_pd(_mm256_cmp_pd(rel, zero, _CMP_LT_OQ), two_pi));
    __m256d obin = _mm256_mul_pd(rel, bins_per_radian);
    obin = _mm256_sub_pd(obin, _mm256_and_pd(_mm256_cmp_pd(obin, vnb, _CMP_GE_OQ), vnb));
    const __m256d r0 = _mm256_floor_pd(rbin), c0 = _mm256_floor_pd(cbin), o0 = _mm256_floor_pd(obin);
    const __m256d fr = _mm256_sub_pd(rbin, r0), fc = _mm256_sub_pd(cbin, c0), fo = _mm256_sub_pd(obin, o0);
    // add(): the products in its order.
    const __m256d w0 = _mm256_mul_pd(weight, _mm256_sub_pd(one, fr)), w1 = _mm256_mul_pd(weight, fr);
    const __m256d gc = _mm256_sub_pd(one, fc), go = _mm256_sub_pd(one, fo);
    const __m256d w00 = _mm256_mul_pd(w0, gc), w01 = _mm256_mul_pd(w0, fc);
    const __m256d w10 = _mm256_mul_pd(w1, gc), w11 = _mm256_mul_pd(w1, fc);
    _mm256_storeu_pd(out->w[0] + k, _mm256_mul_pd(w00, go));
    _mm256_storeu_pd(out->w[1] + k, _mm256_mul_pd(w00, fo));
    _mm256_storeu_pd(out->w[2] + k, _mm256_mul_pd(w01, go));
    _mm256_storeu_pd(out->w[3] + k, _mm256_mul_pd(w01, fo));
    _mm256_storeu_pd(out->w[4] + k, _mm256_mul_pd(w10, go));
    _mm256_storeu_pd(out->w[5] + k, _mm256_mul_pd(w10, fo));
    _mm256_storeu_pd(out->w[6] + k, _mm256_mul_pd(w11, go));
    _mm256_storeu_pd(out->w[7] + k, _mm256_mul_pd(w11, fo));
    // ((r0 + 1) dp + c0 + 1) nb, exact in doubles (small integers); lanes outside the
    // window are never read.
    const __m256d cell = _mm256_mul_pd(
        _mm256_add_pd(_mm256_mul_pd(_mm256_add_pd(r0, one), vdp), _mm256_add_pd(c0, one)), vnb);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out->cell + k), _mm256_cvttpd_epi32(cell));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out->o0 + k), _mm256_cvttpd_epi32(o0));
  }
  for (; k < n; ++k) out->valid[k] = -1;  // the caller's scalar loop takes these
}
#endif

void SiftCpu::Descriptor(const OctaveGradients& g, const Detection& det, double angle,
                         uint8_t* out) const {
  constexpr int d = kDescriptorWidth, nb = kDescriptorBins;
  static_assert((nb & (nb - 1)) == 0, "orientation bins wrap by a mask");
  const float* mag = g.magnitude[det.layer - 1];
  const float* ang = g.angle[det.layer - 1];
  const double bin_width = kDescriptorBinFactor * LoweSigma(det);
  const int radius = DescriptorRadius(det);
  const double cos_t = std::cos(angle) / bin_width, sin_t = std::sin(angle) / bin_width;
  // Gaussian of sigma = half the window (d/2 bins), in bin units; rx^2 + ry^2 is
  // (dx^2 + dy^2) / bin_width^2 whatever the rotation, so the weight is a product of a
  // column and a row factor.
  const double inv_two_sigma2 = 1.0 / (2.0 * (0.5 * d) * (0.5 * d));
  const double scale2 = inv_two_sigma2 / (bin_width * bin_width);
  const int cx = static_cast<int>(std::lround(det.x)), cy = static_cast<int>(std::lround(det.y));
  const GaussianWindow window(det, cx, cy, radius, scale2);
  const double* ex = window.x();
  const double* ey = window.y();
  constexpr double kBinsPerRadian = nb / kTwoPi;
  // Spatial bins -1..d on both axes (the outer ring catches the weights that fall off the
  // window, so the loop needs no bounds checks), 8 orientations each.
  constexpr int dp = kDescriptorPaddedWidth;
  double padded[dp * dp * nb] = {0};
  // Adds a sample's eight trilinear weights (w[0] .. w[7], `stride` apart; the order of
  // DescriptorSamples::w) to the cell at offset `cell` of `padded` and its neighbours below
  // and to the right, at orientations o0 and o0 + 1.
  auto spread = [&](int cell, int o0, const double* w, int stride) {
    const int o1 = (o0 + 1) & (nb - 1);
    double* c = &padded[cell];
    c[o0] += w[0];
    c[o1] += w[stride];
    c[nb + o0] += w[2 * stride];
    c[nb + o1] += w[3 * stride];
    c[dp * nb + o0] += w[4 * stride];
    c[dp * nb + o1] += w[5 * stride];
    c[(dp + 1) * nb + o0] += w[6 * stride];
    c[(dp + 1) * nb + o1] += w[7 * stride];
  };
  // A sample's weight, spread trilinearly over the two rows, columns and orientations
  // around (r0 + fr, c0 + fc, o0 + fo).
  auto add = [&](int r0, int c0, int o0, double fr, double fc, double fo, double weight) {
    const double w0 = weight * (1.0 - fr), w1 = weight * fr;
    const double w00 = w0 * (1.0 - fc), w01 = w0 * fc, w10 = w1 * (1.0 - fc), w11 = w1 * fc;
    const double w[8] = {w00 * (1.0 - fo), w00 * fo, w01 * (1.0 - fo), w01 * fo,
                         w10 * (1.0 - fo), w10 * fo, w11 * (1.0 - fo), w11 * fo};
    spread(((r0 + 1) * dp + c0 + 1) * nb, o0, w, 1);
  };
#ifdef TIEPOINT_SIFT_AVX2_EXTREMA
  static const bool avx2 = __builtin_cpu_supports("avx2");
  DescriptorSamples samples;
#endif
  const int i_lo = std::max(-radius, 1 - cx), i_hi = std::min(radius, g.width - 2 - cx);
  // The columns of row dy where cbin and rbin can lie in (-1, d), widened by a pixel (the
  // exact test follows): -2.5 < cos_t dx + sin_t dy < 2.5 and -2.5 < -sin_t dx + cos_t dy < 2.5
  // for d = 4.
  const double half = 0.5 * d + 0.5;
  auto columns = [&](double dy, int* first, int* last) {
    double lo = -1e300, hi = 1e300;
    auto limit = [&](double slope, double offset) {  // -half < slope dx + offset < half
      if (std::abs(slope) < 1e-12) {
        if (std::abs(offset) >= half + 1e-9) lo = 1, hi = -1;
        return;
      }
      double a = (-half - offset) / slope, b = (half - offset) / slope;
      if (a > b) std::swap(a, b);
      lo = std::max(lo, a);
      hi = std::min(hi, b);
    };
    limit(cos_t, sin_t * dy);
    limit(-sin_t, cos_t * dy);
    if (lo > hi) {
      *first = 1;
      *last = 0;
      return;
    }
    // dx = cx + i - det.x.
    *first = std::max(i_lo, static_cast<int>(std::floor(lo + det.x - cx)) - 1);
    *last = std::min(i_hi, static_cast<int>(std::ceil(hi + det.x - cx)) + 1);
  };
  for (int j = -radius; j <= radius; ++j) {
    const int py = cy + j;
    if (py < 1 || py >= g.height - 1) continue;
    const double dy = py - det.y;
    const size_t row = static_cast<size_t>(py) * g.width + cx;
    const double wrow = ey[j + radius];
    int first = 0, last = 0;
    columns(dy, &first, &last);
    int i = first;
#ifdef TIEPOINT_SIFT_AVX2_EXTREMA
    if (avx2 && last - first + 1 <= DescriptorSamples::kMaxSamples) {
      const int count = last - first + 1;
      DescriptorRowAvx2(count, static_cast<double>(cx + first), det.x, dy, cos_t, sin_t, wrow, ex + first + radius,
                        mag + row + first, ang + row + first, angle, &samples);
      int k = 0;
      for (; k < count && samples.valid[k] >= 0; ++k) {
        if (samples.valid[k]) spread(samples.cell[k], samples.o0[k], &samples.w[0][k], DescriptorSamples::kMaxSamples);
      }
      i = first + k;  // the last count % 4 samples: below
    }
#endif
    for (; i <= last; ++i) {
      const double dx = cx + i - det.x;
      const double rx = cos_t * dx + sin_t * dy;   // along the keypoint direction
      const double ry = -sin_t * dx + cos_t * dy;  // along the direction turned +90 deg
      const double cbin = rx + 0.5 * d - 0.5;
      const double rbin = ry + 0.5 * d - 0.5;
      if (rbin <= -1 || rbin >= d || cbin <= -1 || cbin >= d) continue;
      const size_t idx = row + i;
      const double weight = wrow * ex[i + radius] * mag[idx];
      // Branch-free wraps (the signs are random, so branches would mispredict half the
      // time); adding 0 changes nothing.
      double rel = ang[idx] - angle;  // in [-3 pi, pi]
      rel += kTwoPi * (rel < 0);
      rel += kTwoPi * (rel < 0);
      double obin = rel * kBinsPerRadian;
      obin -= nb * (obin >= nb);
      const int r0 = FloorToInt(rbin);
      const int c0 = FloorToInt(cbin);
      const int o0 = FloorToInt(obin);
      add(r0, c0, o0, rbin - r0, cbin - c0, obin - o0, weight);
    }
  }
  constexpr int n = d * d * nb;
  double hist[n];
  for (int r = 0; r < d; ++r) {
    for (int c = 0; c < d; ++c) {
      std::copy_n(&padded[((r + 1) * dp + c + 1) * nb], nb, &hist[(r * d + c) * nb]);
    }
  }
  double norm2 = 0;
  for (int i = 0; i < n; ++i) norm2 += hist[i] * hist[i];
  if (norm2 > 0) {
    const double clip = kDescriptorClip * std::sqrt(norm2);
    norm2 = 0;
    for (int i = 0; i < n; ++i) {
      hist[i] = std::min(hist[i], clip);
      norm2 += hist[i] * hist[i];
    }
    const double inv = 1.0 / std::sqrt(norm2);
    for (int i = 0; i < n; ++i) hist[i] *= inv;
    if (options_.root_sift) {
      double l1 = 0;
      for (int i = 0; i < n; ++i) l1 += hist[i];
      for (int i = 0; i < n; ++i) hist[i] = std::sqrt(hist[i] / l1);
    }
  }
  for (int i = 0; i < n; ++i) {
    const double q = std::round(kDescriptorQuantScale * hist[i]);
    out[i] = static_cast<uint8_t>(std::min(255.0, std::max(0.0, q)));
  }
}

double SiftCpu::WorkspaceBytes(int w, int h) const {
  const double S = options_.octave_layers;
  const double pixels = options_.upsample ? 4.0 * w * h : double(w) * h;
  // Input, S + 3 Gaussian and S + 2 DoG images of the first octave, and the gradients
  // (2 S planes per octave, 4/3 of the first octave over all octaves).
  return 4.0 * pixels * (1 + (S + 3) + (S + 2) + 2 * S * 4.0 / 3.0);
}

Status SiftCpu::Extract(const GrayImage& image, Features* features) {
  if (image.width < 0 || image.height < 0 ||
      image.pixels.size() != static_cast<size_t>(image.width) * image.height) {
    return Status::InvalidInput("SIFT: image of " + std::to_string(image.width) + " x " +
                                std::to_string(image.height) + " pixels holds " +
                                std::to_string(image.pixels.size()) + " values");
  }
  detect_threshold_ = DetectionThreshold();
  const int threads = ResolveThreads(options_.num_threads);
  const int S = options_.octave_layers;
  Features result;
  result.contrast_threshold = options_.contrast_threshold;  // lowered below when detected lower

  const SiftScaleSpacePlan plan = PlanSiftScaleSpace(options_, image.width, image.height);
  const int base_w = plan.base_width, base_h = plan.base_height, num_octaves = plan.num_octaves;
  if (num_octaves == 0) {
    *features = std::move(result);
    return Status::Ok();
  }

  // Storage for the first (largest) octave; later octaves reuse its front.
  ws_.gauss.resize(S + 3);
  ws_.dog.resize(S + 2);
  if (ws_.magnitude.size() < static_cast<size_t>(num_octaves) * S) {
    ws_.magnitude.resize(static_cast<size_t>(num_octaves) * S);
    ws_.angle.resize(static_cast<size_t>(num_octaves) * S);
  }
  std::vector<Plane> gauss(S + 3), dog(S + 2);
  for (int i = 0; i < S + 3; ++i) gauss[i] = View(&ws_.gauss[i], base_w, base_h);
  for (int i = 0; i < S + 2; ++i) dog[i] = View(&ws_.dog[i], base_w, base_h);
  {
    const Plane input = View(&ws_.input, base_w, base_h);
    if (options_.upsample) {
      Upsample2x(image, threads, input);
    } else {
      std::copy(image.pixels.begin(), image.pixels.end(), input.data);
    }
    GaussianBlur(input, plan.blurs[0], threads, &ws_.blur_scratch, gauss[0]);
  }

  std::vector<Detection> detections;
  std::vector<OctaveGradients> gradients(num_octaves);
  int w = base_w, h = base_h;
  for (int o = 0; o < num_octaves; ++o) {
    for (Plane& p : gauss) p.width = w, p.height = h;
    for (Plane& p : dog) p.width = w, p.height = h;
    for (int i = 1; i < S + 3; ++i) {
      GaussianBlur(gauss[i - 1], plan.blurs[i], threads, &ws_.blur_scratch, gauss[i], &dog[i - 1]);
    }
    DetectInOctave(o, dog, threads, &detections);
    if (detect_threshold_ < options_.contrast_threshold) {
      // Detecting low for min_features: once the samples that pass contrast_threshold reach
      // min_features, the image keeps contrast_threshold; from here it is a plain run
      // (earlier octaves keep the candidates a plain run detects).
      const double high = options_.contrast_threshold;
      auto passes = [&](const Detection& d) { return PassesThreshold(d.candidate, d.response, high); };
      std::vector<std::tuple<int, int, int, int>> keys;
      for (const Detection& d : detections)
        if (passes(d)) keys.emplace_back(d.octave, d.layer, d.yi, d.xi);
      std::sort(keys.begin(), keys.end());
      if (std::unique(keys.begin(), keys.end()) - keys.begin() >= options_.min_features) {
        detections.erase(std::remove_if(detections.begin(), detections.end(),
                                        [&](const Detection& d) { return !passes(d); }),
                         detections.end());
        detect_threshold_ = high;
      }
    }
    // This octave's detections: the tail (filtering keeps the order).
    size_t mine_first = detections.size();
    while (mine_first > 0 && detections[mine_first - 1].octave == o) --mine_first;
    const std::vector<Detection> mine(detections.begin() + mine_first, detections.end());
    ComputeGradients(o, gauss, mine, threads, &gradients[o]);
    if (o + 1 < num_octaves) {
      // The next base: gauss[S] at even pixels, into gauss[0] (S >= 1, so no overlap).
      Plane next = gauss[0];
      next.width = (w + 1) / 2;
      next.height = (h + 1) / 2;
      Downsample2x(gauss[S], next);
      w = next.width;
      h = next.height;
    }
  }

  // Candidates refined onto the same sample are one keypoint; this also fixes the order.
  auto key = [](const Detection& d) { return std::make_tuple(d.octave, d.layer, d.yi, d.xi); };
  auto unique_keypoints = [&](std::vector<Detection>* d) {
    std::stable_sort(d->begin(), d->end(),
                     [&](const Detection& a, const Detection& b) { return key(a) < key(b); });
    d->erase(std::unique(d->begin(), d->end(),
                         [&](const Detection& a, const Detection& b) { return key(a) == key(b); }),
             d->end());
  };
  auto orient = [&](const std::vector<Detection>& d, std::vector<std::vector<double>>* angles) {
    angles->assign(d.size(), {});
#pragma omp parallel for num_threads(ThreadsFor(d.size() * kPixelsPerKeypoint, threads)) \
    schedule(dynamic, 16)
    for (size_t i = 0; i < d.size(); ++i) Orientations(gradients[d[i].octave], d[i], &(*angles)[i]);
  };
  std::vector<std::vector<double>> angles;
  if (detect_threshold_ < options_.contrast_threshold) {
    // Detected down to min_contrast_threshold: keep what a plain run at the first of
    // contrast_threshold, /2, /4, ... giving min_features keypoints (after orientation
    // assignment, before max_features) would have found, or what the lowest gives. Exactly:
    // a plain run at t keeps a refined sample when one of the candidates refined onto it
    // passed t's prefilter and its contrast passes t; the refined values, and so the
    // orientations, do not depend on the candidate.
    std::vector<Detection> all = std::move(detections);
    std::vector<float> best_candidate;  // per unique sample: its largest candidate value
    {
      std::stable_sort(all.begin(), all.end(),
                       [&](const Detection& x, const Detection& y) { return key(x) < key(y); });
      std::vector<Detection> merged;
      for (const Detection& d : all) {
        if (!merged.empty() && key(merged.back()) == key(d)) {
          best_candidate.back() = std::max(best_candidate.back(), d.candidate);
        } else {
          merged.push_back(d);
          best_candidate.push_back(d.candidate);
        }
      }
      all = std::move(merged);
    }
    std::vector<std::vector<double>> all_angles;
    orient(all, &all_angles);
    auto count_at = [&](double t) {
      size_t count = 0;
      for (size_t i = 0; i < all.size(); ++i)
        if (PassesThreshold(best_candidate[i], all[i].response, t)) count += all_angles[i].size();
      return count;
    };
    const double floor = Lowest(options_.min_contrast_threshold);
    double t = options_.contrast_threshold;
    for (; t > floor; t *= 0.5)
      if (count_at(t) >= static_cast<size_t>(options_.min_features)) break;
    // Only the floor reaches (or approaches) min_features: the fallback's search goes on
    // from there (above the floor every threshold gave fewer than min_features <=
    // fallback_min_features, as it gives in a run with the fallback's bounds).
    if (Fallback() && t <= floor) {
      while (t > detect_threshold_ && count_at(t) < static_cast<size_t>(options_.fallback_min_features)) t *= 0.5;
    }
    detections.clear();
    for (size_t i = 0; i < all.size(); ++i)
      if (PassesThreshold(best_candidate[i], all[i].response, t)) {
        detections.push_back(all[i]);
        angles.push_back(std::move(all_angles[i]));
      }
    result.contrast_threshold = t;
  } else {
    unique_keypoints(&detections);
    orient(detections, &angles);
  }
  std::vector<OrientedKeypoint> oriented;
  for (size_t i = 0; i < detections.size(); ++i) {
    for (double a : angles[i]) oriented.push_back({static_cast<int>(i), a});
  }

  if (options_.max_features > 0 && oriented.size() > static_cast<size_t>(options_.max_features)) {
    std::vector<size_t> order(oriented.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return detections[oriented[a].detection].response >
             detections[oriented[b].detection].response;
    });
    order.resize(options_.max_features);
    std::sort(order.begin(), order.end());
    std::vector<OrientedKeypoint> kept;
    kept.reserve(order.size());
    for (size_t i : order) kept.push_back(oriented[i]);
    oriented = std::move(kept);
  }

  const size_t n = oriented.size();
  result.keypoints.resize(n);
  result.descriptors.resize(n * kSiftDescriptorDim);
  const double up = options_.upsample ? 0.5 : 1.0;
  // sigma_L 2^(1/(2S)): the characteristic scale (see sift.h).
  const double characteristic = std::pow(2.0, 0.5 / S);
#pragma omp parallel for num_threads(ThreadsFor(n * kPixelsPerKeypoint, threads)) \
    schedule(dynamic, 16)
  for (size_t i = 0; i < n; ++i) {
    const Detection& det = detections[oriented[i].detection];
    const double factor = std::ldexp(up, det.octave);
    Keypoint& k = result.keypoints[i];
    k.x = static_cast<float>(det.x * factor);
    k.y = static_cast<float>(det.y * factor);
    k.scale = static_cast<float>(LoweSigma(det) * characteristic * factor);
    k.orientation = static_cast<float>(oriented[i].angle);
    if (k.orientation >= static_cast<float>(kTwoPi)) k.orientation = 0.0f;
    Descriptor(gradients[det.octave], det, oriented[i].angle,
               &result.descriptors[i * kSiftDescriptorDim]);
  }
  *features = std::move(result);
  return Status::Ok();
}

void SiftCpu::ExtractBatch(const std::vector<const GrayImage*>& images,
                           std::vector<Features>* features, std::vector<Status>* statuses) {
  const int threads = ResolveThreads(options_.num_threads);
  const size_t count = images.size();
  double largest = 0;
  for (const GrayImage* image : images) {
    largest = std::max(largest, WorkspaceBytes(std::max(0, image->width), std::max(0, image->height)));
  }
  int num_workers = static_cast<int>(std::min<size_t>(threads, count));
  if (largest > 0) {
    num_workers = std::min(num_workers, std::max(1, static_cast<int>(kBatchWorkspaceBudget / largest)));
  }
  if (num_workers <= 1) {
    FeatureExtractor::ExtractBatch(images, features, statuses);
    return;
  }
  features->assign(count, Features());
  statuses->assign(count, Status::Ok());
  // Threads left over when there are fewer workers than threads go to the workers' rows.
  SiftOptions worker_options = options_;
  worker_options.num_threads = std::max(1, threads / num_workers);
  if (workers_.size() != static_cast<size_t>(num_workers) ||
      workers_.front()->options_.num_threads != worker_options.num_threads) {
    workers_.clear();
    for (int i = 0; i < num_workers; ++i) workers_.push_back(std::make_unique<SiftCpu>(worker_options));
  }
  std::atomic<size_t> next{0};
  auto work = [&](SiftCpu* worker) {
    for (size_t i = next++; i < count; i = next++) {
      (*statuses)[i] = worker->Extract(*images[i], &(*features)[i]);
      if (!(*statuses)[i].ok()) (*features)[i] = Features();
    }
  };
  // std::thread rather than an OpenMP team: each worker's own parallel regions are then
  // top-level regions, whatever the OpenMP nesting settings.
  std::vector<std::thread> pool;
  for (int i = 1; i < num_workers; ++i) pool.emplace_back(work, workers_[i].get());
  work(workers_[0].get());
  for (std::thread& t : pool) t.join();
}

}  // namespace

SiftScaleSpacePlan PlanSiftScaleSpace(const SiftOptions& options, int width, int height) {
  SiftScaleSpacePlan plan;
  plan.base_width = width;
  plan.base_height = height;
  if (options.upsample && width > 0 && height > 0) {
    plan.base_width = 2 * width - 1;
    plan.base_height = 2 * height - 1;
  }
  for (int w = plan.base_width, h = plan.base_height; w >= kSiftMinOctaveSide && h >= kSiftMinOctaveSide;
       w = (w + 1) / 2, h = (h + 1) / 2) {
    ++plan.num_octaves;
  }
  const int S = options.octave_layers;
  const double input_blur = options.upsample ? 2.0 * kInputBlur : kInputBlur;
  plan.blurs.assign(S + 3, 0.0);
  plan.blurs[0] = std::sqrt(std::max(options.sigma * options.sigma - input_blur * input_blur, 0.01));
  double below = options.sigma;  // sigma_0
  for (int i = 1; i < S + 3; ++i) {
    const double layer = options.sigma * std::pow(2.0, double(i) / S);
    plan.blurs[i] = std::sqrt(layer * layer - below * below);
    below = layer;
  }
  return plan;
}

Status SiftOptions::Check() const {
  if (max_features < 0) {
    return Status::InvalidOptions("SIFT max_features " + std::to_string(max_features) +
                                  ": expected >= 0 (0 keeps every feature)");
  }
  if (octave_layers < 1 || octave_layers > 12) {
    return Status::InvalidOptions("SIFT octave_layers " + std::to_string(octave_layers) +
                                  ": expected 1..12 (Lowe uses 3)");
  }
  if (!(sigma >= 0.5 && sigma <= 10.0)) {
    return Status::InvalidOptions("SIFT sigma " + std::to_string(sigma) +
                                  ": expected 0.5..10 pixels (Lowe uses 1.6)");
  }
  if (!(contrast_threshold >= 0.0 && contrast_threshold < 1.0)) {
    return Status::InvalidOptions("SIFT contrast_threshold " + std::to_string(contrast_threshold) +
                                  ": expected [0, 1) for images in [0, 1] (default 0.04)");
  }
  if (min_features < 0) {
    return Status::InvalidOptions("SIFT min_features " + std::to_string(min_features) +
                                  ": expected >= 0 (0: no lower contrast threshold)");
  }
  if (min_features > 0 && !(min_contrast_threshold > 0.0 && min_contrast_threshold <= contrast_threshold)) {
    return Status::InvalidOptions("SIFT min_contrast_threshold " + std::to_string(min_contrast_threshold) +
                                  ": expected (0, contrast_threshold] when min_features > 0");
  }
  if (fallback_min_features < 0) {
    return Status::InvalidOptions("SIFT fallback_min_features " + std::to_string(fallback_min_features) +
                                  ": expected >= 0 (0: no fallback)");
  }
  if (fallback_min_features > 0 && min_features > 0) {
    if (fallback_min_features < min_features) {
      return Status::InvalidOptions("SIFT fallback_min_features " + std::to_string(fallback_min_features) +
                                    ": expected >= min_features (" + std::to_string(min_features) + ")");
    }
    if (!(fallback_min_contrast_threshold > 0.0 && fallback_min_contrast_threshold <= min_contrast_threshold)) {
      return Status::InvalidOptions("SIFT fallback_min_contrast_threshold " +
                                    std::to_string(fallback_min_contrast_threshold) +
                                    ": expected (0, min_contrast_threshold] when fallback_min_features > 0");
    }
  }
  if (!(edge_threshold >= 1.0 && std::isfinite(edge_threshold))) {
    return Status::InvalidOptions("SIFT edge_threshold " + std::to_string(edge_threshold) +
                                  ": expected a curvature ratio >= 1 (Lowe uses 10)");
  }
  if (num_threads < 0) {
    return Status::InvalidOptions("SIFT num_threads " + std::to_string(num_threads) +
                                  ": expected >= 0 (0 uses every hardware thread)");
  }
  if (cuda_streams < 1 || cuda_streams > 64) {
    return Status::InvalidOptions("SIFT cuda_streams " + std::to_string(cuda_streams) +
                                  ": expected 1..64 images in flight");
  }
  return Status::Ok();
}

void FeatureExtractor::ExtractBatch(const std::vector<const GrayImage*>& images,
                                    std::vector<Features>* features,
                                    std::vector<Status>* statuses) {
  features->assign(images.size(), Features());
  statuses->assign(images.size(), Status::Ok());
  for (size_t i = 0; i < images.size(); ++i) {
    (*statuses)[i] = Extract(*images[i], &(*features)[i]);
    if (!(*statuses)[i].ok()) (*features)[i] = Features();
  }
}

void FeatureExtractor::ExtractStream(int count, int group, const NextImage& next,
                                     const ImageDone& done) {
  group = std::max(1, group);
  for (int begin = 0; begin < count; begin += group) {
    const int end = std::min(count, begin + group);
    std::vector<const GrayImage*> batch;
    std::vector<int> index;
    for (int i = begin; i < end; ++i) {
      if (const GrayImage* image = next(i)) {
        batch.push_back(image);
        index.push_back(i);
      }
    }
    std::vector<Features> features;
    std::vector<Status> statuses;
    if (!batch.empty()) ExtractBatch(batch, &features, &statuses);
    for (size_t b = 0; b < batch.size(); ++b) done(index[b], std::move(features[b]), std::move(statuses[b]));
  }
}

Status ExtractAgainWhileFewFeatures(FeatureExtractor* ex, const SiftOptions& rule,
                                    const std::vector<const GrayImage*>& images, std::vector<Features>* features,
                                    std::vector<char>* lowered, std::vector<Status>* statuses) {
  const int n = static_cast<int>(images.size());
  if (features->size() != images.size() || (lowered && lowered->size() != images.size()))
    return Status::Internal("ExtractAgainWhileFewFeatures: one features per image");
  if (statuses) statuses->assign(images.size(), Status::Ok());
  if (rule.min_features <= 0) return Status::Ok();
  // The thresholds the CPU extractor's one pass tries (SiftCpu::Lowest): contrast_threshold
  // halved, by the same products, while at or above a bound.
  const double start = rule.contrast_threshold;
  auto last_halving_down_to = [start](double bound) {
    double t = start;
    while (t * 0.5 >= bound * (1 - 1e-9)) t *= 0.5;
    return t;
  };
  const double floor = last_halving_down_to(rule.min_contrast_threshold);
  const bool fallback = rule.fallback_min_features > 0;
  const double lowest = fallback ? last_halving_down_to(rule.fallback_min_contrast_threshold) : floor;
  // The images of `active` below `want` features, again at half the threshold t. An image
  // at max_features has all it may keep: a lower threshold would add weaker features, which
  // the cap drops again.
  const int cap = rule.max_features > 0 ? rule.max_features : std::numeric_limits<int>::max();
  std::vector<int> active(n);
  for (int k = 0; k < n; ++k) active[k] = k;
  double t = start;
  auto lower = [&](int want) -> Status {
    std::vector<int> few;
    std::vector<const GrayImage*> few_images;
    for (int k : active)
      if (static_cast<int>((*features)[k].size()) < std::min(want, cap)) {
        few.push_back(k);
        few_images.push_back(images[k]);
      }
    active = std::move(few);
    if (active.empty()) return Status::Ok();
    t *= 0.5;
    // The same extractor at the lower threshold (its streams and buffers stay).
    TIEPOINT_RETURN_IF_ERROR(ex->SetContrastThreshold(t));
    std::vector<Features> more;
    std::vector<Status> more_status;
    ex->ExtractBatch(few_images, &more, &more_status);
    for (size_t j = 0; j < active.size(); ++j) {
      const int k = active[j];
      if (!more_status[j].ok()) {
        if (statuses && (*statuses)[k].ok()) (*statuses)[k] = std::move(more_status[j]);
      } else if (more[j].size() > (*features)[k].size()) {
        (*features)[k] = std::move(more[j]);
        if (lowered) (*lowered)[k] = 1;
      }
    }
    return Status::Ok();
  };
  auto run = [&]() -> Status {
    // Down to the floor while fewer than min_features; then, with the fallback, the images
    // that got there (every image when the floor is the threshold itself) on down while
    // fewer than fallback_min_features.
    while (t > floor && !active.empty()) TIEPOINT_RETURN_IF_ERROR(lower(rule.min_features));
    if (!fallback || active.empty()) return Status::Ok();
    while (t > lowest && !active.empty()) TIEPOINT_RETURN_IF_ERROR(lower(rule.fallback_min_features));
    return Status::Ok();
  };
  const Status result = run();
  // Back at the threshold given, whatever happened.
  const Status reset = ex->SetContrastThreshold(start);
  return result.ok() ? reset : result;
}

Status FeatureExtractor::Create(const SiftOptions& options, Device device,
                                std::unique_ptr<FeatureExtractor>* extractor) {
  TIEPOINT_RETURN_IF_ERROR(options.Check());
  switch (device) {
    case Device::kCpu:
      *extractor = std::make_unique<SiftCpu>(options);
      return Status::Ok();
    case Device::kCuda:
      if (options.min_features > 0)
        return Status::InvalidOptions("SIFT min_features: CPU only (the CUDA extractor keeps one threshold)");
      return CreateCudaSiftExtractor(options, extractor);
  }
  return Status::Internal("FeatureExtractor::Create: unknown device");
}

}  // namespace tiepoint
