// sift_bench_cpu: speed and output of tiepoint's CPU SIFT extractor, without OpenCV (so it
// builds everywhere; bench/sift_bench compares against OpenCV where it is installed).
//
//   sift_bench_cpu --images DIR [--upsample] [--threads 1,2] [--repeats 3]
//                  [--dump FILE] [--reference FILE] [--accuracy] [--data DIR] [--out JSON]
//
// Speed: every .png/.pgm/.jpg under --images (sorted by name), decoded once. For each thread
// count t of --threads, `--repeats` timed rounds (the best and the median are reported):
//   single: Extract() of each image in turn with num_threads = t (all threads on one image);
//   batch:  ExtractBatch() over all images with num_threads = t (what `tiepoint
//           reconstruct` and `tiepoint extract` call).
// Seconds per image and images/s for both, and the keypoint counts.
// --dump FILE writes every image's features (keypoints and descriptors, binary); with
// --reference FILE (an earlier --dump) the features are compared to it: keypoint counts,
// the share of reference keypoints with a keypoint within 0.05 px (scale within 0.1%,
// orientation within 1e-3 rad), and how far their descriptors differ.
// --accuracy: Oxford boat 1 -> 2..6 and graf 1 -> 3 under --data (default
// $TIEPOINT_SHARED_DATA or ../shared/data), repeatability (3 px through H) and matching
// score (mutual nearest neighbours, L2, correct within 3 px) as in bench/sift_bench, with
// the same options (--upsample) as the speed runs.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <time.h>
#include <vector>

#include "bench/bench_common.h"
#include "features/matcher.h"
#include "features/sift.h"
#include "io/base/timer.h"
#include "io/image.h"

namespace tiepoint {
namespace {

using json = nlohmann::json;

struct Args {
  std::string images;
  std::string data;
  std::string out;
  std::string dump;
  std::string reference;
  std::vector<int> threads = {1, 2};
  int repeats = 3;
  bool upsample = false;
  bool accuracy = false;
};

std::vector<std::string> ListImages(const std::string& dir) {
  std::vector<std::string> paths;
  DIR* d = opendir(dir.c_str());
  if (!d) return paths;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    auto ends = [&](const char* s) {
      const size_t n = std::strlen(s);
      return name.size() > n && name.compare(name.size() - n, n, s) == 0;
    };
    if (ends(".png") || ends(".pgm") || ends(".jpg") || ends(".ppm")) paths.push_back(dir + "/" + name);
  }
  closedir(d);
  std::sort(paths.begin(), paths.end());
  return paths;
}

bool WriteDump(const std::string& path, const std::vector<Features>& all) {
  std::ofstream f(path, std::ios::binary);
  const uint64_t n = all.size();
  f.write(reinterpret_cast<const char*>(&n), sizeof(n));
  for (const Features& x : all) {
    const uint64_t k = x.size();
    f.write(reinterpret_cast<const char*>(&k), sizeof(k));
    f.write(reinterpret_cast<const char*>(x.keypoints.data()), k * sizeof(Keypoint));
    f.write(reinterpret_cast<const char*>(x.descriptors.data()), k * kSiftDescriptorDim);
  }
  return static_cast<bool>(f);
}

bool ReadDump(const std::string& path, std::vector<Features>* all) {
  std::ifstream f(path, std::ios::binary);
  uint64_t n = 0;
  if (!f.read(reinterpret_cast<char*>(&n), sizeof(n)) || n > 100000) return false;
  all->assign(n, Features());
  for (Features& x : *all) {
    uint64_t k = 0;
    if (!f.read(reinterpret_cast<char*>(&k), sizeof(k)) || k > (1u << 26)) return false;
    x.keypoints.resize(k);
    x.descriptors.resize(k * kSiftDescriptorDim);
    f.read(reinterpret_cast<char*>(x.keypoints.data()), k * sizeof(Keypoint));
    f.read(reinterpret_cast<char*>(x.descriptors.data()), k * kSiftDescriptorDim);
  }
  return static_cast<bool>(f);
}

struct Agreement {
  size_t reference = 0, current = 0;
  size_t matched = 0;          // reference keypoints with a current one within 0.05 px
  size_t identical = 0;        // ... with bit-identical keypoint and descriptor
  size_t descriptor_close = 0; // ... whose descriptors differ by at most 2 per element
  int max_descriptor_diff = 0;
  double sum_descriptor_l2 = 0;  // L2 distance of the matched descriptors (units of 512)
};

double AngleDiff(double a, double b) {
  const double d = std::fabs(a - b);
  return std::min(d, 2 * M_PI - d);
}

void Compare(const Features& ref, const Features& cur, Agreement* r) {
  r->reference += ref.size();
  r->current += cur.size();
  std::vector<size_t> by_x(cur.size());
  for (size_t i = 0; i < by_x.size(); ++i) by_x[i] = i;
  std::sort(by_x.begin(), by_x.end(),
            [&](size_t a, size_t b) { return cur.keypoints[a].x < cur.keypoints[b].x; });
  std::vector<float> xs(by_x.size());
  for (size_t i = 0; i < by_x.size(); ++i) xs[i] = cur.keypoints[by_x[i]].x;
  for (size_t i = 0; i < ref.size(); ++i) {
    const Keypoint& k = ref.keypoints[i];
    auto fits = [&](size_t j) {
      const Keypoint& q = cur.keypoints[j];
      return std::fabs(q.x - k.x) <= 0.05 && std::fabs(q.y - k.y) <= 0.05 &&
             std::fabs(q.scale / k.scale - 1) < 1e-3 && AngleDiff(q.orientation, k.orientation) < 1e-3;
    };
    long best = -1;
    if (i < cur.size() && fits(i)) {
      best = static_cast<long>(i);
    } else {
      for (auto it = std::lower_bound(xs.begin(), xs.end(), k.x - 0.05f);
           it != xs.end() && *it <= k.x + 0.05f; ++it) {
        if (fits(by_x[it - xs.begin()])) {
          best = static_cast<long>(by_x[it - xs.begin()]);
          break;
        }
      }
    }
    if (best < 0) continue;
    ++r->matched;
    int diff = 0;
    double l2 = 0;
    for (int e = 0; e < kSiftDescriptorDim; ++e) {
      const int d = int(ref.descriptor(i)[e]) - int(cur.descriptor(best)[e]);
      diff = std::max(diff, std::abs(d));
      l2 += d * d;
    }
    r->sum_descriptor_l2 += std::sqrt(l2);
    r->max_descriptor_diff = std::max(r->max_descriptor_diff, diff);
    if (diff <= 2) ++r->descriptor_close;
    if (diff == 0 && std::memcmp(&k, &cur.keypoints[best], sizeof(Keypoint)) == 0) ++r->identical;
  }
}

struct PairScore {
  int keypoints1 = 0, keypoints2 = 0, n1 = 0, repeated = 0, matches = 0, correct = 0;
};

PairScore Score(const Features& a, const Features& b, const double H[9], int w1, int h1, int w2,
                int h2, DescriptorMatcher* matcher) {
  double Hinv[9];
  {
    const double* m = H;
    const double c00 = m[4] * m[8] - m[5] * m[7], c01 = m[5] * m[6] - m[3] * m[8],
                 c02 = m[3] * m[7] - m[4] * m[6];
    const double det = m[0] * c00 + m[1] * c01 + m[2] * c02;
    const double inv[9] = {c00 / det, (m[2] * m[7] - m[1] * m[8]) / det, (m[1] * m[5] - m[2] * m[4]) / det,
                           c01 / det, (m[0] * m[8] - m[2] * m[6]) / det, (m[2] * m[3] - m[0] * m[5]) / det,
                           c02 / det, (m[1] * m[6] - m[0] * m[7]) / det, (m[0] * m[4] - m[1] * m[3]) / det};
    std::copy(inv, inv + 9, Hinv);
  }
  PairScore s;
  s.keypoints1 = static_cast<int>(a.size());
  s.keypoints2 = static_cast<int>(b.size());
  std::vector<int> ia, ib;
  std::vector<std::pair<double, double>> mapped;
  for (size_t i = 0; i < a.size(); ++i) {
    double x, y;
    bench::MapHomography(H, a.keypoints[i].x, a.keypoints[i].y, &x, &y);
    if (x < 0 || y < 0 || x > w2 - 1 || y > h2 - 1) continue;
    ia.push_back(static_cast<int>(i));
    mapped.emplace_back(x, y);
  }
  for (size_t i = 0; i < b.size(); ++i) {
    double x, y;
    bench::MapHomography(Hinv, b.keypoints[i].x, b.keypoints[i].y, &x, &y);
    if (x < 0 || y < 0 || x > w1 - 1 || y > h1 - 1) continue;
    ib.push_back(static_cast<int>(i));
  }
  s.n1 = static_cast<int>(ia.size());
  const int gw = w2 / 3 + 2, gh = h2 / 3 + 2;
  std::vector<std::vector<int>> grid(static_cast<size_t>(gw) * gh);
  for (int j : ib) {
    const int cx = std::clamp(static_cast<int>(b.keypoints[j].x / 3), 0, gw - 1);
    const int cy = std::clamp(static_cast<int>(b.keypoints[j].y / 3), 0, gh - 1);
    grid[static_cast<size_t>(cy) * gw + cx].push_back(j);
  }
  for (const auto& [px, py] : mapped) {
    const int cx = static_cast<int>(px / 3), cy = static_cast<int>(py / 3);
    bool found = false;
    for (int gy = std::max(0, cy - 1); gy <= std::min(gh - 1, cy + 1) && !found; ++gy) {
      for (int gx = std::max(0, cx - 1); gx <= std::min(gw - 1, cx + 1) && !found; ++gx) {
        for (int j : grid[static_cast<size_t>(gy) * gw + gx]) {
          const double dx = b.keypoints[j].x - px, dy = b.keypoints[j].y - py;
          if (dx * dx + dy * dy <= 9.0) {
            found = true;
            break;
          }
        }
      }
    }
    s.repeated += found;
  }
  std::vector<uint8_t> da, db;
  for (int i : ia) da.insert(da.end(), a.descriptor(i), a.descriptor(i) + kSiftDescriptorDim);
  for (int i : ib) db.insert(db.end(), b.descriptor(i), b.descriptor(i) + kSiftDescriptorDim);
  std::vector<FeatureMatch> matches;
  if (!ia.empty() && !ib.empty() && matcher->Match(da.data(), ia.size(), db.data(), ib.size(), &matches).ok()) {
    s.matches = static_cast<int>(matches.size());
    for (const FeatureMatch& m : matches) {
      const auto& [px, py] = mapped[m.index1];
      const Keypoint& q = b.keypoints[ib[m.index2]];
      if ((q.x - px) * (q.x - px) + (q.y - py) * (q.y - py) <= 9.0) ++s.correct;
    }
  }
  return s;
}

// CPU seconds of the whole process so far (all threads): on a machine shared with other
// work, wall clock says little, CPU time still tells how much work a run took.
double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int Main(const Args& args) {
  json result = bench::ResultHeader("bench/sift_bench_cpu");
  result["upsample"] = args.upsample;
  SiftOptions options;
  options.upsample = args.upsample;

  if (!args.images.empty()) {
    const std::vector<std::string> paths = ListImages(args.images);
    if (paths.empty()) {
      std::fprintf(stderr, "sift_bench_cpu: no images under %s\n", args.images.c_str());
      return 2;
    }
    std::vector<GrayImage> images(paths.size());
    for (size_t i = 0; i < paths.size(); ++i) {
      const Status s = ReadImageGray(paths[i], &images[i]);
      if (!s.ok()) {
        std::fprintf(stderr, "sift_bench_cpu: %s\n", s.ToString().c_str());
        return 2;
      }
    }
    std::vector<const GrayImage*> ptrs;
    for (const GrayImage& g : images) ptrs.push_back(&g);
    result["images"] = args.images;
    result["num_images"] = images.size();
    result["image_size"] = std::to_string(images[0].width) + "x" + std::to_string(images[0].height);
    std::printf("%zu images (%d x %d) from %s, upsample %s\n", images.size(), images[0].width,
                images[0].height, args.images.c_str(), args.upsample ? "on" : "off");
    std::vector<Features> features;
    json runs = json::array();
    for (int t : args.threads) {
      SiftOptions o = options;
      o.num_threads = t;
      std::unique_ptr<FeatureExtractor> e;
      if (!FeatureExtractor::Create(o, Device::kCpu, &e).ok()) return 2;
      std::vector<double> single, batch, single_cpu, batch_cpu;
      for (int r = 0; r < args.repeats; ++r) {
        std::vector<Features> f(images.size());
        Timer timer;
        double cpu = ProcessCpuSeconds();
        for (size_t i = 0; i < images.size(); ++i) {
          if (!e->Extract(images[i], &f[i]).ok()) return 2;
        }
        single.push_back(timer.Seconds());
        single_cpu.push_back(ProcessCpuSeconds() - cpu);
        std::vector<Status> st;
        timer.Reset();
        cpu = ProcessCpuSeconds();
        e->ExtractBatch(ptrs, &f, &st);
        batch.push_back(timer.Seconds());
        batch_cpu.push_back(ProcessCpuSeconds() - cpu);
        features = std::move(f);
      }
      size_t total = 0;
      for (const Features& f : features) total += f.size();
      const double n = static_cast<double>(images.size());
      const double sb = *std::min_element(single.begin(), single.end());
      const double bb = *std::min_element(batch.begin(), batch.end());
      const double sc = *std::min_element(single_cpu.begin(), single_cpu.end());
      const double bc = *std::min_element(batch_cpu.begin(), batch_cpu.end());
      std::printf("threads %d: single %.4f s/image (median %.4f), %.2f images/s, cpu %.4f s/image; batch "
                  "%.4f s/image (median %.4f), %.2f images/s, cpu %.4f s/image; %zu keypoints (%.1f per "
                  "image)\n",
                  t, sb / n, Median(single) / n, n / sb, sc / n, bb / n, Median(batch) / n, n / bb, bc / n,
                  total, total / n);
      runs.push_back({{"threads", t},
                      {"single_seconds_per_image_best", sb / n},
                      {"single_seconds_per_image_median", Median(single) / n},
                      {"single_images_per_second", n / sb},
                      {"batch_seconds_per_image_best", bb / n},
                      {"batch_seconds_per_image_median", Median(batch) / n},
                      {"batch_images_per_second", n / bb},
                      {"batch_seconds_total_best", bb},
                      {"single_cpu_seconds_per_image_best", sc / n},
                      {"batch_cpu_seconds_per_image_best", bc / n},
                      {"keypoints_total", total}});
    }
    result["speed"] = runs;
    json counts = json::array();
    for (const Features& f : features) counts.push_back(f.size());
    result["keypoints_per_image"] = counts;
    if (!args.dump.empty() && !WriteDump(args.dump, features)) {
      std::fprintf(stderr, "sift_bench_cpu: cannot write %s\n", args.dump.c_str());
      return 2;
    }
    if (!args.reference.empty()) {
      std::vector<Features> ref;
      if (!ReadDump(args.reference, &ref) || ref.size() != features.size()) {
        std::fprintf(stderr, "sift_bench_cpu: %s is not a dump of these images\n", args.reference.c_str());
        return 2;
      }
      Agreement a;
      for (size_t i = 0; i < ref.size(); ++i) Compare(ref[i], features[i], &a);
      std::printf("against %s: %zu reference keypoints, %zu now (%+.3f%%); %.3f%% of reference keypoints "
                  "within 0.05 px, %.3f%% bit-identical; descriptors within 2: %.3f%%, max diff %d, mean L2 "
                  "%.4f (of 512)\n",
                  args.reference.c_str(), a.reference, a.current,
                  100.0 * (double(a.current) - double(a.reference)) / a.reference,
                  100.0 * a.matched / a.reference, 100.0 * a.identical / a.reference,
                  a.matched ? 100.0 * a.descriptor_close / a.matched : 100.0, a.max_descriptor_diff,
                  a.matched ? a.sum_descriptor_l2 / a.matched : 0.0);
      result["agreement"] = {{"reference", args.reference},
                             {"reference_keypoints", a.reference},
                             {"keypoints", a.current},
                             {"matched_within_0_05px", a.matched},
                             {"bit_identical", a.identical},
                             {"descriptor_within_2", a.descriptor_close},
                             {"max_descriptor_diff", a.max_descriptor_diff},
                             {"mean_descriptor_l2", a.matched ? a.sum_descriptor_l2 / a.matched : 0.0}};
    }
  }

  if (args.accuracy) {
    MatcherOptions mo;
    mo.ratio = 1.0;
    mo.mutual = true;
    std::unique_ptr<DescriptorMatcher> matcher;
    std::unique_ptr<FeatureExtractor> e;
    if (!DescriptorMatcher::Create(mo, Device::kCpu, &matcher).ok() ||
        !FeatureExtractor::Create(options, Device::kCpu, &e).ok()) {
      return 2;
    }
    json rows = json::array();
    std::printf("\n%-10s %7s %7s %7s %8s %8s %8s\n", "pair", "kp1", "kp2", "n1", "repeat", "matches",
                "m.score");
    for (const bench::HomographyPair& pair : bench::OxfordHomographyPairs()) {
      GrayImage im1, im2;
      double H[9];
      if (!bench::ReadHomographyPair(args.data, pair, 10, &im1, &im2, H)) continue;
      Features f1, f2;
      if (!e->Extract(im1, &f1).ok() || !e->Extract(im2, &f2).ok()) return 2;
      const PairScore s = Score(f1, f2, H, im1.width, im1.height, im2.width, im2.height, matcher.get());
      const double rep = s.n1 ? double(s.repeated) / s.n1 : 0, ms = s.n1 ? double(s.correct) / s.n1 : 0;
      std::printf("%-10s %7d %7d %7d %8.4f %8d %8.4f\n", pair.name.c_str(), s.keypoints1, s.keypoints2,
                  s.n1, rep, s.matches, ms);
      rows.push_back({{"pair", pair.name},          {"keypoints1", s.keypoints1},
                      {"keypoints2", s.keypoints2}, {"common1", s.n1},
                      {"repeatability", rep},       {"mutual_nn_matches", s.matches},
                      {"correct_matches", s.correct}, {"matching_score", ms}});
    }
    result["accuracy"] = rows;
  }
  return bench::WriteResult(args.out, result);
}

}  // namespace
}  // namespace tiepoint

int main(int argc, char** argv) {
  tiepoint::Args args;
  const char* env = std::getenv("TIEPOINT_SHARED_DATA");
  args.data = env ? env : "../shared/data";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "sift_bench_cpu: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--images") {
      args.images = value();
    } else if (a == "--data") {
      args.data = value();
    } else if (a == "--out") {
      args.out = value();
    } else if (a == "--dump") {
      args.dump = value();
    } else if (a == "--reference") {
      args.reference = value();
    } else if (a == "--threads") {
      args.threads.clear();
      std::stringstream list(value());
      std::string item;
      while (std::getline(list, item, ',')) args.threads.push_back(std::atoi(item.c_str()));
    } else if (a == "--repeats") {
      args.repeats = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--upsample") {
      args.upsample = true;
    } else if (a == "--accuracy") {
      args.accuracy = true;
    } else {
      std::fprintf(stderr,
                   "usage: sift_bench_cpu [--images DIR] [--upsample] [--threads 1,2] [--repeats N] "
                   "[--dump FILE] [--reference FILE] [--accuracy] [--data DIR] [--out JSON]\n");
      return a == "--help" ? 0 : 2;
    }
  }
  return tiepoint::Main(args);
}
