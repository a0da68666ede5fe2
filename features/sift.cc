// SIFT on the CPU: the reference implementation (the algorithm is described in sift.h).
//
// Work is split so that every result lands in a slot fixed before the parallel loop
// (a row, a detection, a keypoint): the output never depends on the thread count.
#include "features/sift.h"

#include "features/sift_cuda.h"

#include <omp.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
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

// Mirror without repeating the edge pixel: -1 -> 1, n -> n - 2.
int Reflect101(int i, int n) {
  if (n == 1) return 0;
  while (i < 0 || i >= n) {
    if (i < 0) i = -i;
    if (i >= n) i = 2 * n - 2 - i;
  }
  return i;
}

GrayImage MakeImage(int w, int h) {
  GrayImage img;
  img.width = w;
  img.height = h;
  img.pixels.assign(static_cast<size_t>(w) * h, 0.0f);
  return img;
}

// Separable Gaussian blur, kernel radius ceil(4 sigma), mirrored borders.
void GaussianBlur(const GrayImage& in, double sigma, int threads, GrayImage* out) {
  const int w = in.width, h = in.height;
  const int r = std::max(1, static_cast<int>(std::ceil(4.0 * sigma)));
  std::vector<float> k(r + 1);
  double sum = 0;
  for (int i = 0; i <= r; ++i) {
    const double v = std::exp(-0.5 * i * i / (sigma * sigma));
    k[i] = static_cast<float>(v);
    sum += i == 0 ? v : 2 * v;
  }
  for (float& v : k) v = static_cast<float>(v / sum);

  std::vector<float> tmp(static_cast<size_t>(w) * h);
  const int nt = ThreadsFor(tmp.size(), threads);
#pragma omp parallel num_threads(nt)
  {
    std::vector<float> padded(w + 2 * r);
#pragma omp for schedule(static)
    for (int y = 0; y < h; ++y) {
      const float* src = &in.pixels[static_cast<size_t>(y) * w];
      for (int i = 0; i < w + 2 * r; ++i) padded[i] = src[Reflect101(i - r, w)];
      float* dst = &tmp[static_cast<size_t>(y) * w];
      const float* p = padded.data() + r;
      for (int x = 0; x < w; ++x) {
        float acc = k[0] * p[x];
        for (int j = 1; j <= r; ++j) acc += k[j] * (p[x - j] + p[x + j]);
        dst[x] = acc;
      }
    }
  }
  *out = MakeImage(w, h);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int y = 0; y < h; ++y) {
    float* dst = &out->pixels[static_cast<size_t>(y) * w];
    const float* c = &tmp[static_cast<size_t>(y) * w];
    for (int x = 0; x < w; ++x) dst[x] = k[0] * c[x];
    for (int j = 1; j <= r; ++j) {
      const float* a = &tmp[static_cast<size_t>(Reflect101(y - j, h)) * w];
      const float* b = &tmp[static_cast<size_t>(Reflect101(y + j, h)) * w];
      const float kj = k[j];
      for (int x = 0; x < w; ++x) dst[x] += kj * (a[x] + b[x]);
    }
  }
}

// Bilinear 2x upsampling onto (2w-1) x (2h-1): output pixel (2i, 2j) is input (i, j),
// odd pixels are midpoints, so no pixel is extrapolated.
GrayImage Upsample2x(const GrayImage& in, int threads) {
  const int w = in.width, h = in.height;
  GrayImage out = MakeImage(2 * w - 1, 2 * h - 1);
  const int ow = out.width;
#pragma omp parallel for num_threads(ThreadsFor(out.pixels.size(), threads)) schedule(static)
  for (int oy = 0; oy < out.height; ++oy) {
    const int y0 = oy / 2, y1 = (oy % 2) ? y0 + 1 : y0;
    const float* a = &in.pixels[static_cast<size_t>(y0) * w];
    const float* b = &in.pixels[static_cast<size_t>(y1) * w];
    float* dst = &out.pixels[static_cast<size_t>(oy) * ow];
    for (int ox = 0; ox < ow; ++ox) {
      const int x0 = ox / 2, x1 = (ox % 2) ? x0 + 1 : x0;
      dst[ox] = 0.25f * ((a[x0] + a[x1]) + (b[x0] + b[x1]));
    }
  }
  return out;
}

// Keeps the even pixels: output (i, j) is input (2i, 2j).
GrayImage Downsample2x(const GrayImage& in) {
  GrayImage out = MakeImage((in.width + 1) / 2, (in.height + 1) / 2);
  for (int y = 0; y < out.height; ++y) {
    for (int x = 0; x < out.width; ++x) out.at(x, y) = in.at(2 * x, 2 * y);
  }
  return out;
}

// What orientation assignment and descriptors need of an octave: the gradient of the
// Gaussian images L_1..L_S (magnitude and atan2 angle; zero on the outermost pixels,
// where central differences are undefined, so those pixels never vote).
struct OctaveGradients {
  int width = 0;
  int height = 0;
  std::vector<std::vector<float>> magnitude;  // [layer - 1][y * width + x]
  std::vector<std::vector<float>> angle;
};

void ComputeGradients(const GrayImage& L, int threads, std::vector<float>* magnitude,
                      std::vector<float>* angle) {
  const int w = L.width, h = L.height;
  magnitude->assign(static_cast<size_t>(w) * h, 0.0f);
  angle->assign(static_cast<size_t>(w) * h, 0.0f);
#pragma omp parallel for num_threads(ThreadsFor(angle->size(), threads)) schedule(static)
  for (int y = 1; y < h - 1; ++y) {
    for (int x = 1; x < w - 1; ++x) {
      const float dx = L.at(x + 1, y) - L.at(x - 1, y);
      const float dy = L.at(x, y + 1) - L.at(x, y - 1);
      const size_t i = static_cast<size_t>(y) * w + x;
      (*magnitude)[i] = std::sqrt(dx * dx + dy * dy);
      (*angle)[i] = std::atan2(dy, dx);
    }
  }
}

struct Detection {
  int octave = 0;
  int layer = 0;  // refined DoG layer, 1..S
  int xi = 0;     // refined integer sample, octave pixels
  int yi = 0;
  double x = 0;  // sub-pixel position, octave pixels
  double y = 0;
  double layer_offset = 0;  // sub-layer offset, [-0.5, 0.5] (up to +-1 at layers 1 and S)
  double response = 0;      // interpolated |D|
};

struct OrientedKeypoint {
  int detection = 0;  // index into the detections
  double angle = 0;   // radians, [0, 2 pi)
};

class SiftCpu : public FeatureExtractor {
 public:
  explicit SiftCpu(const SiftOptions& options) : options_(options) {}
  Status Extract(const GrayImage& image, Features* features) override;

 private:
  // Scans D_1..D_S of one octave for extrema and refines them.
  void DetectInOctave(int octave, const std::vector<GrayImage>& dog, int threads,
                      std::vector<Detection>* detections) const;
  bool Refine(const std::vector<GrayImage>& dog, int x, int y, int layer,
              Detection* det) const;
  void Orientations(const OctaveGradients& g, const Detection& det,
                    std::vector<double>* angles) const;
  void Descriptor(const OctaveGradients& g, const Detection& det, double angle,
                  uint8_t* out) const;
  double LoweSigma(const Detection& det) const {
    return options_.sigma * std::pow(2.0, (det.layer + det.layer_offset) / options_.octave_layers);
  }

  SiftOptions options_;
};

bool SiftCpu::Refine(const std::vector<GrayImage>& dog, int x, int y, int layer,
                     Detection* det) const {
  const int S = options_.octave_layers;
  const int w = dog[0].width, h = dog[0].height;
  Eigen::Vector3d g, offset;
  Eigen::Matrix3d H;
  double value = 0;
  int prev_x = -1, prev_y = -1, prev_layer = -1;
  for (int moves = 0;; ++moves) {
    const GrayImage& prev = dog[layer - 1];
    const GrayImage& cur = dog[layer];
    const GrayImage& next = dog[layer + 1];
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
  if (std::abs(contrast) * S < options_.contrast_threshold) return false;
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

void SiftCpu::DetectInOctave(int octave, const std::vector<GrayImage>& dog, int threads,
                             std::vector<Detection>* detections) const {
  const int S = options_.octave_layers;
  const int w = dog[0].width, h = dog[0].height;
  const float prefilter = static_cast<float>(0.5 * options_.contrast_threshold / S);
  const int nt = ThreadsFor(static_cast<size_t>(w) * h, threads);
  for (int layer = 1; layer <= S; ++layer) {
    std::vector<std::vector<Detection>> rows(h);
    const GrayImage& prev = dog[layer - 1];
    const GrayImage& cur = dog[layer];
    const GrayImage& next = dog[layer + 1];
#pragma omp parallel for num_threads(nt) schedule(dynamic, 4)
    for (int y = kSiftBorder; y < h - kSiftBorder; ++y) {
      for (int x = kSiftBorder; x < w - kSiftBorder; ++x) {
        const float v = cur.at(x, y);
        if (!(std::abs(v) > prefilter)) continue;
        // Strictly beyond the neighbours that come before it in (layer, y, x) order, at
        // least equal to those after: of a pair of equal samples (a blob centred between
        // two pixels) exactly the first is an extremum, instead of neither.
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
        if (!extremum) continue;
        Detection det;
        det.octave = octave;
        if (Refine(dog, x, y, layer, &det)) rows[y].push_back(det);
      }
    }
    for (const auto& row : rows) detections->insert(detections->end(), row.begin(), row.end());
  }
}

void SiftCpu::Orientations(const OctaveGradients& g, const Detection& det,
                           std::vector<double>* angles) const {
  angles->clear();
  const int layer = det.layer - 1;
  const std::vector<float>& mag = g.magnitude[layer];
  const std::vector<float>& ang = g.angle[layer];
  const double sw = kOrientationSigmaFactor * LoweSigma(det);
  const int radius = static_cast<int>(std::lround(kOrientationRadiusFactor * sw));
  const double inv_two_sw2 = 1.0 / (2.0 * sw * sw);
  const int cx = static_cast<int>(std::lround(det.x)), cy = static_cast<int>(std::lround(det.y));
  double hist[kOrientationBins] = {0};
  for (int j = -radius; j <= radius; ++j) {
    const int py = cy + j;
    if (py < 1 || py >= g.height - 1) continue;
    for (int i = -radius; i <= radius; ++i) {
      const int px = cx + i;
      if (px < 1 || px >= g.width - 1 || i * i + j * j > radius * radius) continue;
      const size_t idx = static_cast<size_t>(py) * g.width + px;
      const double dx = px - det.x, dy = py - det.y;
      const double weight = std::exp(-(dx * dx + dy * dy) * inv_two_sw2) * mag[idx];
      double bin = ang[idx] * (kOrientationBins / kTwoPi);
      if (bin < 0) bin += kOrientationBins;
      const double b0 = std::floor(bin);
      const double frac = bin - b0;
      const int i0 = static_cast<int>(b0) % kOrientationBins;
      hist[i0] += weight * (1.0 - frac);
      hist[(i0 + 1) % kOrientationBins] += weight * frac;
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

void SiftCpu::Descriptor(const OctaveGradients& g, const Detection& det, double angle,
                         uint8_t* out) const {
  constexpr int d = kDescriptorWidth, nb = kDescriptorBins;
  const int layer = det.layer - 1;
  const std::vector<float>& mag = g.magnitude[layer];
  const std::vector<float>& ang = g.angle[layer];
  const double bin_width = kDescriptorBinFactor * LoweSigma(det);
  // Every pixel whose rotated position can reach a bin: half-diagonal of (d+1) bins.
  const int radius = static_cast<int>(std::lround(bin_width * std::sqrt(2.0) * (d + 1) * 0.5));
  const double cos_t = std::cos(angle) / bin_width, sin_t = std::sin(angle) / bin_width;
  // Gaussian of sigma = half the window (d/2 bins), in bin units.
  const double inv_two_sigma2 = 1.0 / (2.0 * (0.5 * d) * (0.5 * d));
  const int cx = static_cast<int>(std::lround(det.x)), cy = static_cast<int>(std::lround(det.y));
  double hist[d * d * nb] = {0};
  for (int j = -radius; j <= radius; ++j) {
    const int py = cy + j;
    if (py < 1 || py >= g.height - 1) continue;
    for (int i = -radius; i <= radius; ++i) {
      const int px = cx + i;
      if (px < 1 || px >= g.width - 1) continue;
      const double dx = px - det.x, dy = py - det.y;
      const double rx = cos_t * dx + sin_t * dy;   // along the keypoint direction
      const double ry = -sin_t * dx + cos_t * dy;  // along the direction turned +90 deg
      const double cbin = rx + 0.5 * d - 0.5;
      const double rbin = ry + 0.5 * d - 0.5;
      if (rbin <= -1 || rbin >= d || cbin <= -1 || cbin >= d) continue;
      const size_t idx = static_cast<size_t>(py) * g.width + px;
      const double weight = std::exp(-(rx * rx + ry * ry) * inv_two_sigma2) * mag[idx];
      double rel = ang[idx] - angle;
      rel -= kTwoPi * std::floor(rel / kTwoPi);
      double obin = rel * (nb / kTwoPi);
      if (obin >= nb) obin -= nb;
      const int r0 = static_cast<int>(std::floor(rbin));
      const int c0 = static_cast<int>(std::floor(cbin));
      const int o0 = static_cast<int>(std::floor(obin));
      const double fr = rbin - r0, fc = cbin - c0, fo = obin - o0;
      for (int a = 0; a < 2; ++a) {
        const int r = r0 + a;
        if (r < 0 || r >= d) continue;
        const double wr = weight * (a ? fr : 1.0 - fr);
        for (int b = 0; b < 2; ++b) {
          const int c = c0 + b;
          if (c < 0 || c >= d) continue;
          const double wc = wr * (b ? fc : 1.0 - fc);
          double* cell = &hist[(r * d + c) * nb];
          cell[o0 % nb] += wc * (1.0 - fo);
          cell[(o0 + 1) % nb] += wc * fo;
        }
      }
    }
  }
  constexpr int n = d * d * nb;
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

Status SiftCpu::Extract(const GrayImage& image, Features* features) {
  if (image.width < 0 || image.height < 0 ||
      image.pixels.size() != static_cast<size_t>(image.width) * image.height) {
    return Status::InvalidInput("SIFT: image of " + std::to_string(image.width) + " x " +
                                std::to_string(image.height) + " pixels holds " +
                                std::to_string(image.pixels.size()) + " values");
  }
  const int threads = ResolveThreads(options_.num_threads);
  const int S = options_.octave_layers;
  Features result;

  int base_w = image.width, base_h = image.height;
  if (options_.upsample && base_w > 0 && base_h > 0) {
    base_w = 2 * base_w - 1;
    base_h = 2 * base_h - 1;
  }
  int num_octaves = 0;
  for (int w = base_w, h = base_h; w >= kSiftMinOctaveSide && h >= kSiftMinOctaveSide;
       w = (w + 1) / 2, h = (h + 1) / 2) {
    ++num_octaves;
  }
  if (num_octaves == 0) {
    *features = std::move(result);
    return Status::Ok();
  }

  // Blur of each Gaussian image in its octave's pixels, and the increments between them.
  std::vector<double> layer_sigma(S + 3), increment(S + 3, 0.0);
  for (int i = 0; i < S + 3; ++i) layer_sigma[i] = options_.sigma * std::pow(2.0, double(i) / S);
  for (int i = 1; i < S + 3; ++i) {
    increment[i] = std::sqrt(layer_sigma[i] * layer_sigma[i] -
                             layer_sigma[i - 1] * layer_sigma[i - 1]);
  }

  GrayImage base;
  {
    const double blur = options_.upsample ? 2.0 * kInputBlur : kInputBlur;
    const double sigma0 = std::sqrt(std::max(options_.sigma * options_.sigma - blur * blur, 0.01));
    if (options_.upsample) {
      GaussianBlur(Upsample2x(image, threads), sigma0, threads, &base);
    } else {
      GaussianBlur(image, sigma0, threads, &base);
    }
  }

  std::vector<Detection> detections;
  std::vector<OctaveGradients> gradients(num_octaves);
  for (int o = 0; o < num_octaves; ++o) {
    std::vector<GrayImage> gauss(S + 3);
    gauss[0] = std::move(base);
    for (int i = 1; i < S + 3; ++i) GaussianBlur(gauss[i - 1], increment[i], threads, &gauss[i]);
    std::vector<GrayImage> dog(S + 2);
    for (int i = 0; i < S + 2; ++i) {
      dog[i] = MakeImage(gauss[i].width, gauss[i].height);
      const size_t n = dog[i].pixels.size();
      const float* a = gauss[i + 1].pixels.data();
      const float* b = gauss[i].pixels.data();
      float* dst = dog[i].pixels.data();
#pragma omp parallel for num_threads(ThreadsFor(n, threads)) schedule(static)
      for (size_t p = 0; p < n; ++p) dst[p] = a[p] - b[p];
    }
    DetectInOctave(o, dog, threads, &detections);

    OctaveGradients& g = gradients[o];
    g.width = gauss[0].width;
    g.height = gauss[0].height;
    g.magnitude.resize(S);
    g.angle.resize(S);
    for (int layer = 1; layer <= S; ++layer) {
      ComputeGradients(gauss[layer], threads, &g.magnitude[layer - 1], &g.angle[layer - 1]);
    }
    if (o + 1 < num_octaves) base = Downsample2x(gauss[S]);
  }

  // Candidates refined onto the same sample are one keypoint; this also fixes the order.
  auto key = [](const Detection& d) { return std::make_tuple(d.octave, d.layer, d.yi, d.xi); };
  std::stable_sort(detections.begin(), detections.end(),
                   [&](const Detection& a, const Detection& b) { return key(a) < key(b); });
  detections.erase(std::unique(detections.begin(), detections.end(),
                               [&](const Detection& a, const Detection& b) {
                                 return key(a) == key(b);
                               }),
                   detections.end());

  std::vector<std::vector<double>> angles(detections.size());
#pragma omp parallel for num_threads(ThreadsFor(detections.size() * kPixelsPerKeypoint, threads)) \
    schedule(dynamic, 16)
  for (size_t i = 0; i < detections.size(); ++i) {
    Orientations(gradients[detections[i].octave], detections[i], &angles[i]);
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

}  // namespace

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

Status FeatureExtractor::Create(const SiftOptions& options, Device device,
                                std::unique_ptr<FeatureExtractor>* extractor) {
  TIEPOINT_RETURN_IF_ERROR(options.Check());
  switch (device) {
    case Device::kCpu:
      *extractor = std::make_unique<SiftCpu>(options);
      return Status::Ok();
    case Device::kCuda:
      return CreateCudaSiftExtractor(options, extractor);
  }
  return Status::Internal("FeatureExtractor::Create: unknown device");
}

}  // namespace tiepoint
