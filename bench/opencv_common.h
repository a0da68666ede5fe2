// The OpenCV side of the image benchmarks (OpenCV is a dependency of bench/ only).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <opencv2/core.hpp>

#include "io/image.h"

namespace tiepoint::bench {

// The image as 8-bit grey, rounded as Quantize8 rounds.
inline cv::Mat ToMat8(const GrayImage& image) {
  cv::Mat m(image.height, image.width, CV_8U);
  for (int y = 0; y < image.height; ++y) {
    for (int x = 0; x < image.width; ++x) {
      m.at<uint8_t>(y, x) =
          static_cast<uint8_t>(std::lround(std::clamp(image.at(x, y), 0.0f, 1.0f) * 255.0f));
    }
  }
  return m;
}

}  // namespace tiepoint::bench
