// 8-bit images and Gaussian image pyramids for FAST detection and LK tracking.
//
// Coordinates follow io/image.h: pixel (0,0) is the centre of the top-left pixel, x right,
// y down. Pyramid level l+1 is level l blurred by the 5x5 binomial kernel
// [1 4 6 4 1]^T [1 4 6 4 1] / 256 and sampled at even pixels, so pixel (x, y) of level l
// sits exactly on pixel (2^l x, 2^l y) of level 0 (x_0 = 2^l x_l), and level l+1 has
// ((w+1)/2) x ((h+1)/2) pixels for a level l of w x h. Borders are mirrored without
// repeating the edge pixel (..., 2, 1 | 0, 1, 2, ...). The arithmetic is integer:
// value = (sum of weights x pixels + 128) >> 8, so the CUDA pyramid (features/fast_cuda.cu)
// is bit-identical to this one.
#pragma once

#include <cstdint>
#include <vector>

#include "io/base/status.h"
#include "io/image.h"

namespace tiepoint {

// Levels stop before a side would drop below this many pixels.
constexpr int kPyramidMinSide = 16;

// A single-channel 8-bit image, row-major: pixel (x, y) is data[y * width + x].
struct ImageU8 {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> data;

  uint8_t at(int x, int y) const { return data[static_cast<size_t>(y) * width + x]; }
  bool empty() const { return width == 0 || height == 0; }
};

struct ImagePyramid {
  std::vector<ImageU8> levels;  // levels[0] is the input image

  int num_levels() const { return static_cast<int>(levels.size()); }
};

// Grey in [0, 1] to 8 bits: round(255 v), clamped to [0, 255] (exact for 8-bit files).
ImageU8 QuantizeImage(const GrayImage& image);

// Number of levels a w x h image can have, at most `requested` (>= 1): level l exists when
// both of its sides are >= kPyramidMinSide (level 0 always exists).
int PyramidLevelsFor(int width, int height, int requested);

// Size of level `level` of a pyramid over a w x h image.
void PyramidLevelSize(int width, int height, int level, int* level_width, int* level_height);

// Builds PyramidLevelsFor(base, requested) levels. kInvalidInput for an empty image or one
// whose data size disagrees with its sides. OpenMP over rows with `num_threads` (0: all).
Status BuildPyramid(const ImageU8& base, int requested_levels, int num_threads,
                    ImagePyramid* pyramid);

}  // namespace tiepoint
