// match_gpu_bench: speed of the CUDA descriptor matcher (features/matcher_cuda.h), with the
// CPU reference in the same run for the ratio and for checking that the matches are
// identical. No OpenCV here (it runs on the device machine, which has none).
//
//  1. 16,384 x 16,384 descriptors, ratio test 0.8 and mutual check: random uint8
//     descriptors and real SIFT descriptors (tiepoint extract output, --features: the
//     .tpfeat files' descriptors pooled, the first half of the files for A, the second for
//     B). Timed with CUDA events around the kernels (descriptors resident on the GPU, as in
//     MatchPairs), after `--warmup` runs, median of `--repeats`; also with the copy of the
//     per-row results to the host. descriptor pairs/s = n1 n2 / median time.
//  2. Exhaustive matching of `--images` (100) sets of `--per-image` (8,000) descriptors,
//     each drawn from the real pool (seeded, with replacement): MatchPairs wall clock
//     (uploads, kernels, copies, compaction: everything), best of 3 after a warm-up.
//  3. The CPU reference on the same 16k x 16k problem (all hardware threads), once: time
//     and whether its matches equal the GPU's.
// Output: a table on stdout and, with --out, JSON (device, date, commit, build flags).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "features/matcher.h"
#include "features/matcher_cuda.h"
#include "io/base/cuda_device.h"
#include "io/base/timer.h"
#include "io/features.h"
#include "io/report.h"
#include "tiepoint/build_info.h"

namespace tiepoint {
namespace {

using json = nlohmann::json;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

std::string Now() {
  const std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::vector<uint8_t> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> d(n * 128);
  for (auto& v : d) v = static_cast<uint8_t>(rng() & 0xff);
  return d;
}

// n descriptors from `pool` (cycled if shorter).
std::vector<uint8_t> Take(const std::vector<uint8_t>& pool, size_t n) {
  std::vector<uint8_t> d(n * 128);
  const size_t have = pool.size() / 128;
  for (size_t i = 0; i < n; ++i) std::copy_n(&pool[(i % have) * 128], 128, &d[i * 128]);
  return d;
}

struct Args {
  std::vector<std::string> features;
  std::string out;
  int n = 16384;
  int warmup = 5;
  int repeats = 25;
  int images = 100;
  int per_image = 8000;
  bool cpu = true;
};

int Main(const Args& args) {
  json result;
  result["tool"] = "bench/match_gpu_bench";
  result["date"] = Now();
  result["commit"] = kGitCommit;
  result["build_flags"] = kBuildFlags;
  result["machine"] = DescribeMachine();
  std::vector<CudaDeviceInfo> devices;
  const Status gpu = QueryCudaDevices(&devices);
  if (!gpu.ok()) {
    std::fprintf(stderr, "match_gpu_bench: %s\n", gpu.ToString().c_str());
    return 3;
  }
  result["gpu"] = devices.front().name;
  result["gpu_sms"] = devices.front().multiprocessors;
  std::printf("match_gpu_bench: %s (%d SMs), commit %s, %s\n", devices.front().name.c_str(),
              devices.front().multiprocessors, kGitCommit, kBuildFlags);

  // Real descriptors: the first half of the files for A, the second half for B.
  std::vector<uint8_t> pool_a, pool_b, pool;
  for (size_t f = 0; f < args.features.size(); ++f) {
    Features feat;
    const Status s = ReadFeatures(args.features[f], &feat);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 2;
    }
    auto& dst = f < args.features.size() / 2 ? pool_a : pool_b;
    dst.insert(dst.end(), feat.descriptors.begin(), feat.descriptors.end());
    pool.insert(pool.end(), feat.descriptors.begin(), feat.descriptors.end());
  }
  result["real_pool_descriptors"] = pool.size() / 128;

  MatcherOptions options;
  options.ratio = 0.8;
  options.mutual = true;
  const size_t n = static_cast<size_t>(args.n);
  struct Problem {
    std::string name;
    std::vector<uint8_t> a, b;
  };
  std::vector<Problem> problems;
  problems.push_back({"random_uint8", Random(n, 1), Random(n, 2)});
  if (!pool_a.empty() && !pool_b.empty()) {
    problems.push_back({"real_sift", Take(pool_a, n), Take(pool_b, n)});
  }
  json square = json::array();
  std::printf("\n%-14s %-10s %7s %7s %10s %10s %12s %9s %s\n", "descriptors", "mutual", "n1",
              "n2", "kernel ms", "+copy ms", "pairs/s", "matches", "cpu==cuda");
  for (const Problem& p : problems) {
    for (bool mutual : {true, false}) {
      MatcherOptions o = options;
      o.mutual = mutual;
      std::vector<double> kernels, with_copy;
      std::vector<FeatureMatch> matches;
      const Status s = CudaMatchTiming(o, p.a.data(), n, p.b.data(), n, args.warmup,
                                       args.repeats, &kernels, &with_copy, &matches);
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        return 1;
      }
      const double med = Median(kernels), med_copy = Median(with_copy);
      const double rate = double(n) * double(n) / (med * 1e-3);
      json row = {{"descriptors", p.name},
                  {"mutual", mutual},
                  {"ratio", o.ratio},
                  {"n1", n},
                  {"n2", n},
                  {"kernel_ms_median", med},
                  {"kernel_ms_min", *std::min_element(kernels.begin(), kernels.end())},
                  {"kernel_ms_max", *std::max_element(kernels.begin(), kernels.end())},
                  {"with_result_copy_ms_median", med_copy},
                  {"descriptor_pairs_per_s", rate},
                  {"int8_tops", double(n) * double(n) * 128 * 2 / (med * 1e-3) / 1e12},
                  {"repeats", args.repeats},
                  {"warmup", args.warmup},
                  {"matches", matches.size()}};
      std::string same = "-";
      if (args.cpu && mutual) {
        std::unique_ptr<DescriptorMatcher> cpu;
        if (DescriptorMatcher::Create(o, Device::kCpu, &cpu).ok()) {
          std::vector<FeatureMatch> cpu_matches;
          const Timer t;
          if (cpu->Match(p.a.data(), n, p.b.data(), n, &cpu_matches).ok()) {
            const double cpu_s = t.Seconds();
            row["cpu_seconds"] = cpu_s;
            row["cpu_threads"] = std::thread::hardware_concurrency();
            row["cuda_vs_cpu_speedup"] = cpu_s / (med * 1e-3);
            row["cpu_matches_identical"] = cpu_matches == matches;
            same = cpu_matches == matches ? "yes" : "NO";
          }
        }
      }
      square.push_back(row);
      std::printf("%-14s %-10s %7zu %7zu %10.4f %10.4f %12.4g %9zu %s\n", p.name.c_str(),
                  mutual ? "yes" : "no", n, n, med, med_copy, rate, matches.size(), same.c_str());
    }
  }
  result["square"] = square;

  // Exhaustive matching of many images.
  if (args.images > 1 && !pool.empty()) {
    std::vector<Features> images(args.images);
    std::mt19937 rng(7);
    const size_t have = pool.size() / 128;
    for (Features& f : images) {
      f.descriptors.resize(static_cast<size_t>(args.per_image) * 128);
      f.keypoints.resize(args.per_image);
      for (int i = 0; i < args.per_image; ++i) {
        std::copy_n(&pool[(rng() % have) * 128], 128, &f.descriptors[static_cast<size_t>(i) * 128]);
      }
    }
    std::vector<const Features*> ptrs;
    for (const Features& f : images) ptrs.push_back(&f);
    std::vector<std::pair<int, int>> pairs;
    for (int i = 0; i < args.images; ++i)
      for (int j = i + 1; j < args.images; ++j) pairs.emplace_back(i, j);
    json runs = json::array();
    for (int streams : {2, 4, 8}) {
      MatcherOptions o = options;
      o.cuda_streams = streams;
      std::unique_ptr<DescriptorMatcher> m;
      if (!DescriptorMatcher::Create(o, Device::kCuda, &m).ok()) return 1;
      std::vector<std::vector<FeatureMatch>> out;
      double best = 1e300;
      for (int r = 0; r < 4; ++r) {
        const Timer t;
        const Status s = m->MatchPairs(ptrs, pairs, &out);
        if (!s.ok()) {
          std::fprintf(stderr, "%s\n", s.ToString().c_str());
          return 1;
        }
        if (r > 0) best = std::min(best, t.Seconds());
      }
      size_t total = 0;
      for (const auto& v : out) total += v.size();
      const double dp = double(pairs.size()) * args.per_image * args.per_image;
      runs.push_back({{"cuda_streams", streams},
                      {"seconds_best_of_3", best},
                      {"pairs_per_s", pairs.size() / best},
                      {"descriptor_pairs_per_s", dp / best},
                      {"matches_total", total}});
      std::printf("exhaustive %d images x %d: %zu pairs, %d streams: %.3f s (%.0f pairs/s, "
                  "%.3g descriptor pairs/s), %zu matches\n",
                  args.images, args.per_image, pairs.size(), streams, best, pairs.size() / best,
                  dp / best, total);
    }
    // CPU reference on the first pairs, for the ratio.
    json cpu_row;
    if (args.cpu) {
      std::unique_ptr<DescriptorMatcher> cpu;
      if (DescriptorMatcher::Create(options, Device::kCpu, &cpu).ok()) {
        const std::vector<std::pair<int, int>> few(pairs.begin(), pairs.begin() + 8);
        std::vector<std::vector<FeatureMatch>> out;
        const Timer t;
        if (cpu->MatchPairs(ptrs, few, &out).ok()) {
          cpu_row = {{"pairs", few.size()}, {"seconds", t.Seconds()},
                     {"seconds_per_pair", t.Seconds() / few.size()}};
          std::printf("cpu reference: %.3f s per %d x %d pair (%u threads)\n",
                      t.Seconds() / few.size(), args.per_image, args.per_image,
                      std::thread::hardware_concurrency());
        }
      }
    }
    result["exhaustive"] = {{"images", args.images},
                            {"descriptors_per_image", args.per_image},
                            {"pairs", pairs.size()},
                            {"ratio", options.ratio},
                            {"mutual", options.mutual},
                            {"runs", runs},
                            {"cpu_reference", cpu_row}};
  }
  if (!args.out.empty()) {
    const Status s = WriteJson(args.out, result);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 2;
    }
    std::printf("wrote %s\n", args.out.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace tiepoint

int main(int argc, char** argv) {
  tiepoint::Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--out") {
      args.out = next();
    } else if (a == "--n") {
      args.n = std::atoi(next().c_str());
    } else if (a == "--repeats") {
      args.repeats = std::atoi(next().c_str());
    } else if (a == "--warmup") {
      args.warmup = std::atoi(next().c_str());
    } else if (a == "--images") {
      args.images = std::atoi(next().c_str());
    } else if (a == "--per-image") {
      args.per_image = std::atoi(next().c_str());
    } else if (a == "--no-cpu") {
      args.cpu = false;
    } else if (a == "--help") {
      std::printf("match_gpu_bench [--out JSON] [--n 16384] [--repeats 25] [--warmup 5] "
                  "[--images 100] [--per-image 8000] [--no-cpu] FEATURES.tpfeat...\n");
      return 0;
    } else {
      args.features.push_back(a);
    }
  }
  if (args.n < 1 || args.repeats < 1 || args.warmup < 0) {
    std::fprintf(stderr, "bad --n/--repeats/--warmup\n");
    return 2;
  }
  return tiepoint::Main(args);
}
