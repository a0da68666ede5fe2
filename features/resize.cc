#include "features/resize.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace tiepoint {
namespace {

// Per output index: the first input index and the normalised weights from there.
struct Taps {
  std::vector<int> first;
  std::vector<int> count;
  std::vector<float> weights;  // count[i] weights of output i, from offset[i]
  std::vector<size_t> offset;
};

Taps MakeTaps(int in_size, int out_size) {
  Taps t;
  const double s = static_cast<double>(in_size) / out_size;
  const double support = std::max(1.0, s);  // half-width of the triangle, input pixels
  t.first.resize(out_size);
  t.count.resize(out_size);
  t.offset.resize(out_size);
  for (int i = 0; i < out_size; ++i) {
    const double centre = (i + 0.5) * s - 0.5;
    const int lo = std::max(0, static_cast<int>(std::floor(centre - support)) + 1);
    const int hi = std::min(in_size - 1, static_cast<int>(std::ceil(centre + support)) - 1);
    t.first[i] = lo;
    t.offset[i] = t.weights.size();
    double sum = 0;
    for (int j = lo; j <= hi; ++j) sum += std::max(0.0, 1.0 - std::abs(j - centre) / support);
    for (int j = lo; j <= hi; ++j)
      t.weights.push_back(static_cast<float>(std::max(0.0, 1.0 - std::abs(j - centre) / support) / sum));
    t.count[i] = hi - lo + 1;
  }
  return t;
}

}  // namespace

void SizeWithin(int width, int height, int max_side, int* out_width, int* out_height) {
  *out_width = width;
  *out_height = height;
  const int side = std::max(width, height);
  if (max_side <= 0 || side <= max_side) return;
  const double f = static_cast<double>(max_side) / side;
  *out_width = std::max(1, static_cast<int>(std::lround(width * f)));
  *out_height = std::max(1, static_cast<int>(std::lround(height * f)));
}

Status ShrinkGray(const GrayImage& in, int width, int height, int num_threads, GrayImage* out) {
  if (in.empty() || in.pixels.size() != static_cast<size_t>(in.width) * in.height)
    return Status::InvalidInput("ShrinkGray: an empty image, or one whose pixels disagree with its size");
  if (width < 1 || height < 1 || width > in.width || height > in.height)
    return Status::InvalidInput("ShrinkGray: " + std::to_string(width) + " x " + std::to_string(height) +
                                " is not within the image's " + std::to_string(in.width) + " x " +
                                std::to_string(in.height));
  const Taps tx = MakeTaps(in.width, width), ty = MakeTaps(in.height, height);
  const int threads = num_threads > 0 ? num_threads : omp_get_max_threads();
  // Rows first (every input row to the output width), then columns.
  std::vector<float> rows(static_cast<size_t>(in.height) * width);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int y = 0; y < in.height; ++y) {
    const float* src = &in.pixels[static_cast<size_t>(y) * in.width];
    float* dst = &rows[static_cast<size_t>(y) * width];
    for (int x = 0; x < width; ++x) {
      const float* w = &tx.weights[tx.offset[x]];
      const float* p = src + tx.first[x];
      float v = 0;
      for (int k = 0; k < tx.count[x]; ++k) v += w[k] * p[k];
      dst[x] = v;
    }
  }
  GrayImage result;
  result.width = width;
  result.height = height;
  result.pixels.assign(static_cast<size_t>(width) * height, 0.0f);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int y = 0; y < height; ++y) {
    float* dst = &result.pixels[static_cast<size_t>(y) * width];
    const float* w = &ty.weights[ty.offset[y]];
    for (int k = 0; k < ty.count[y]; ++k) {
      const float* src = &rows[static_cast<size_t>(ty.first[y] + k) * width];
      const float wk = w[k];
      for (int x = 0; x < width; ++x) dst[x] += wk * src[x];
    }
  }
  *out = std::move(result);
  return Status::Ok();
}

Status CheckMaxImageSize(int max_side) {
  if (max_side == 0 || max_side >= kMinMaxImageSize) return Status::Ok();
  return Status::InvalidOptions("--max-image-size " + std::to_string(max_side) + ": must be 0 (full size) or at least " +
                                std::to_string(kMinMaxImageSize) + " pixels");
}

Status ShrinkToFit(int max_side, int num_threads, GrayImage* image) {
  int w = image->width, h = image->height;
  SizeWithin(image->width, image->height, max_side, &w, &h);
  if (w == image->width && h == image->height) return Status::Ok();
  return ShrinkGray(*image, w, h, num_threads, image);
}

void KeypointsToFullImage(double sx, double sy, Features* features) {
  if (sx == 1.0 && sy == 1.0) return;
  const double s = std::sqrt(sx * sy);
  for (Keypoint& kp : features->keypoints) {
    kp.x = static_cast<float>((kp.x + 0.5) * sx - 0.5);
    kp.y = static_cast<float>((kp.y + 0.5) * sy - 0.5);
    kp.scale = static_cast<float>(kp.scale * s);
  }
}

}  // namespace tiepoint
