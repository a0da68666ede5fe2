#include "features/pyramid.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace tiepoint {
namespace {

int Mirror(int i, int n) {
  if (n == 1) return 0;
  if (i < 0) i = -i;
  if (i >= n) i = 2 * n - 2 - i;
  return std::clamp(i, 0, n - 1);
}

void Downsample(const ImageU8& in, ImageU8* out, int threads) {
  out->width = (in.width + 1) / 2;
  out->height = (in.height + 1) / 2;
  out->data.assign(static_cast<size_t>(out->width) * out->height, 0);
  static const int kW[5] = {1, 4, 6, 4, 1};
#pragma omp parallel num_threads(threads)
  {
    // Vertical pass first into one row of the input's width, then the horizontal pass.
    std::vector<int> row(in.width);
#pragma omp for schedule(static)
    for (int y = 0; y < out->height; ++y) {
      int rows[5];
      for (int j = 0; j < 5; ++j) rows[j] = Mirror(2 * y + j - 2, in.height);
      for (int x = 0; x < in.width; ++x) {
        int s = 0;
        for (int j = 0; j < 5; ++j) s += kW[j] * in.data[static_cast<size_t>(rows[j]) * in.width + x];
        row[x] = s;
      }
      uint8_t* dst = &out->data[static_cast<size_t>(y) * out->width];
      for (int x = 0; x < out->width; ++x) {
        int s = 0;
        for (int i = 0; i < 5; ++i) s += kW[i] * row[Mirror(2 * x + i - 2, in.width)];
        dst[x] = static_cast<uint8_t>((s + 128) >> 8);
      }
    }
  }
}

}  // namespace

ImageU8 QuantizeImage(const GrayImage& image) {
  ImageU8 out;
  out.width = image.width;
  out.height = image.height;
  out.data.resize(image.pixels.size());
  for (size_t i = 0; i < image.pixels.size(); ++i) {
    const float v = std::round(image.pixels[i] * 255.0f);
    out.data[i] = static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f));
  }
  return out;
}

int PyramidLevelsFor(int width, int height, int requested) {
  int levels = 1;
  int w = width, h = height;
  while (levels < requested) {
    w = (w + 1) / 2;
    h = (h + 1) / 2;
    if (w < kPyramidMinSide || h < kPyramidMinSide) break;
    ++levels;
  }
  return levels;
}

void PyramidLevelSize(int width, int height, int level, int* level_width, int* level_height) {
  for (int l = 0; l < level; ++l) {
    width = (width + 1) / 2;
    height = (height + 1) / 2;
  }
  *level_width = width;
  *level_height = height;
}

Status BuildPyramid(const ImageU8& base, int requested_levels, int num_threads,
                    ImagePyramid* pyramid) {
  if (base.empty()) return Status::InvalidInput("pyramid: empty image");
  if (base.data.size() != static_cast<size_t>(base.width) * base.height) {
    return Status::InvalidInput("pyramid: image data holds " + std::to_string(base.data.size()) +
                                " pixels, expected " + std::to_string(base.width) + " x " +
                                std::to_string(base.height));
  }
  if (requested_levels < 1) return Status::InvalidOptions("pyramid: levels must be >= 1");
  const int threads = num_threads > 0 ? num_threads : omp_get_max_threads();
  const int levels = PyramidLevelsFor(base.width, base.height, requested_levels);
  pyramid->levels.resize(levels);
  pyramid->levels[0] = base;
  for (int l = 1; l < levels; ++l) Downsample(pyramid->levels[l - 1], &pyramid->levels[l], threads);
  return Status::Ok();
}

}  // namespace tiepoint
