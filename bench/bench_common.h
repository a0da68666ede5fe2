// Small pieces the image benchmarks share (sift_bench, match_bench, essential_bench):
// ground-truth homography files, the 8-bit view of an image, the time stamp, best-of-N
// timing, the --data/--out command line and the JSON result file.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/base/timer.h"
#include "io/image.h"
#include "io/report.h"
#include "tiepoint/build_info.h"

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

// An image pair with the ground-truth homography H mapping image 1 to image 2; paths
// relative to the shared data folder.
struct HomographyPair {
  std::string name, img1, img2, homography;
};

// Oxford boat 1 -> 2..6 and graf 1 -> 3.
inline std::vector<HomographyPair> OxfordHomographyPairs() {
  std::vector<HomographyPair> pairs;
  for (int n = 2; n <= 6; ++n) {
    pairs.push_back({"boat 1-" + std::to_string(n), "features/oxford_boat/img1.pgm",
                     "features/oxford_boat/img" + std::to_string(n) + ".pgm",
                     "features/oxford_boat/H1to" + std::to_string(n) + "p"});
  }
  pairs.push_back({"graf 1-3", "features/opencv_samples/graf1.png",
                   "features/opencv_samples/graf3.png", "features/opencv_samples/H1to3p.xml"});
  return pairs;
}

// Both images and H of `pair` under `data`; false, saying on stdout that the pair is
// skipped (its name printed `name_width` wide, as in the caller's table), when one is
// missing or unreadable.
inline bool ReadHomographyPair(const std::string& data, const HomographyPair& pair, int name_width,
                               GrayImage* im1, GrayImage* im2, double H[9]) {
  if (ReadImageGray(data + "/" + pair.img1, im1).ok() && ReadImageGray(data + "/" + pair.img2, im2).ok() &&
      ReadTextHomography(data + "/" + pair.homography, H)) {
    return true;
  }
  std::printf("%-*s (missing under %s: skipped)\n", name_width, pair.name.c_str(), data.c_str());
  return false;
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

// The command line of a benchmark that takes only `--data DIR` (default
// $TIEPOINT_SHARED_DATA, else ../shared/data) and `--out RESULT.json`; anything else prints
// the usage and exits (0 for --help, else 2).
inline void ParseDataAndOut(int argc, char** argv, const char* tool, std::string* data, std::string* out) {
  const char* env = std::getenv("TIEPOINT_SHARED_DATA");
  *data = env ? env : "../shared/data";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--data" || a == "--out") && i + 1 < argc) {
      *(a == "--data" ? data : out) = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--data DIR] [--out RESULT.json]\n", tool);
      std::exit(a == "--help" ? 0 : 2);
    }
  }
}

// The fields every result file starts with: tool, date, commit, build flags, machine.
inline nlohmann::json ResultHeader(const std::string& tool) {
  return {{"tool", tool},
          {"date", UtcNow()},
          {"commit", kGitCommit},
          {"build_flags", kBuildFlags},
          {"machine", DescribeMachine()}};
}

// Writes the result when `out` is not empty; 0 when written (or not asked for), 2 with a
// message on failure.
inline int WriteResult(const std::string& out, const nlohmann::json& result) {
  if (out.empty()) return 0;
  const Status w = WriteJson(out, result);
  if (!w.ok()) {
    std::fprintf(stderr, "%s\n", w.ToString().c_str());
    return 2;
  }
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

}  // namespace tiepoint::bench
