// Small pieces the image benchmarks share (sift_bench, match_bench): ground-truth
// homography files, the 8-bit view of an image, the time stamp and best-of-N timing.
#pragma once

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "io/base/timer.h"
#include "io/image.h"

namespace tiepoint::bench {

// A 3x3 homography, row-major, from an Oxford "H1to2p" text file (nine numbers) or
// OpenCV's XML storage (the numbers between <data> and </data>). False if unreadable.
inline bool ReadTextHomography(const std::string& path, double H[9]) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  const size_t open = text.find("<data>");
  if (open != std::string::npos) {
    const size_t close = text.find("</data>", open);
    text = text.substr(open + 6, close - open - 6);
  }
  std::istringstream numbers(text);
  for (int i = 0; i < 9; ++i) {
    if (!(numbers >> H[i])) return false;
  }
  return true;
}

// (x, y) mapped by the homography H.
inline void MapHomography(const double H[9], double x, double y, double* ox, double* oy) {
  const double w = H[6] * x + H[7] * y + H[8];
  *ox = (H[0] * x + H[1] * y + H[2]) / w;
  *oy = (H[3] * x + H[4] * y + H[5]) / w;
}

// The 8-bit values OpenCV sees, back as float, so both extractors see the same image.
inline GrayImage Quantize8(const GrayImage& image) {
  GrayImage q = image;
  for (float& v : q.pixels) v = std::lround(std::clamp(v, 0.0f, 1.0f) * 255.0f) / 255.0f;
  return q;
}

// Now, as ISO 8601 UTC.
inline std::string UtcNow() {
  const std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// The shortest wall time of `runs` calls of f, in seconds.
inline double BestOf(int runs, const std::function<void()>& f) {
  double best = 1e300;
  for (int r = 0; r < runs; ++r) {
    const Timer t;
    f();
    best = std::min(best, t.Seconds());
  }
  return best;
}

}  // namespace tiepoint::bench
