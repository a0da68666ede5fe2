// Geometric verification, the reference RANSAC loop against the one with early stopping
// (RansacOptions::early_stop) and against early stopping with PROSAC sampling
// (RansacOptions::Sampling::kProsac, ranked by squared descriptor distance), on the same
// matches in the same run.
//
//   verify_bench --features DIR --matches DIR --model fundamental|essential|homography
//                [--intrinsics FILE] [--threads N] [--min-inliers M] [--max-error PX]
//                [--out FILE.json]
//
// DIR of --matches holds the .tpmatch files of `tiepoint match --pairs ...` without
// --verify (their feature files, by name, in --features); for the essential matrix, pairs
// with an image that --intrinsics does not name are left out. Pairs are spread over the
// threads as `tiepoint match` does (each thread takes the next pair); in the early-
// stopping run, as there, a pair taken when fewer pairs are left than threads also gets
// threads / (pairs left) threads for its hypotheses.
// Prints and writes seconds, verified pairs and inlier counts of both runs, and the
// pairs whose outcome differs.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/features.h"
#include "io/matches.h"
#include "solver/geometry/two_view_geometry.h"
#include "tiepoint/build_info.h"

namespace fs = std::filesystem;
using namespace tiepoint;

namespace {

struct Pair {
  std::string name1, name2;
  std::vector<std::array<double, 2>> x1, x2;
  std::vector<double> costs;  // squared descriptor distances (PROSAC's ranking)
  Intrinsics k1, k2;
};

struct Outcome {
  bool verified = false;
  int inliers = 0;
  int iterations = 0;
};

struct Run {
  double seconds = 0;      // wall
  double cpu_seconds = 0;  // all threads (steadier than wall on a shared machine)
  std::vector<Outcome> pairs;
};

Run Verify(const std::vector<Pair>& pairs, TwoViewModel model, const RansacOptions& base,
           int threads) {
  Run run;
  run.pairs.resize(pairs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t p = next++; p < pairs.size(); p = next++) {
      RansacOptions o = base;
      // As `tiepoint match`: pairs left < threads, the pair's RANSAC gets the idle ones.
      if (o.early_stop) o.num_threads = std::max<int>(1, threads / static_cast<int>(pairs.size() - p));
      TwoViewGeometry g;
      const bool essential = model == TwoViewModel::kEssential;
      const Status s = EstimateTwoViewGeometry(model, pairs[p].x1, pairs[p].x2, &pairs[p].costs,
                                               essential ? &pairs[p].k1 : nullptr,
                                               essential ? &pairs[p].k2 : nullptr, o, &g);
      if (!s.ok()) {
        std::fprintf(stderr, "%s - %s: %s\n", pairs[p].name1.c_str(), pairs[p].name2.c_str(),
                     s.message().c_str());
        std::exit(2);
      }
      run.pairs[p] = {g.verified, g.num_inliers, g.ransac_iterations};
    }
  };
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  const size_t workers = std::min<size_t>(pairs.size(), threads);
  std::vector<std::thread> pool;
  for (size_t w = 1; w < workers; ++w) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.cpu_seconds = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  return run;
}

int Usage() {
  std::fprintf(stderr,
               "usage: verify_bench --features DIR --matches DIR --model fundamental|essential|"
               "homography [--intrinsics FILE] [--threads N] [--min-inliers M] [--max-error PX] "
               "[--out FILE.json]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string features_dir, matches_dir, model_name = "fundamental", intrinsics_file, out_file;
  bool skip_reference = false;  // profiling the early-stopping run alone
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  RansacOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return Usage();
    const std::string v = argv[++i];
    if (a == "--features") features_dir = v;
    else if (a == "--matches") matches_dir = v;
    else if (a == "--model") model_name = v;
    else if (a == "--intrinsics") intrinsics_file = v;
    else if (a == "--threads") threads = std::max(1, std::atoi(v.c_str()));
    else if (a == "--min-inliers") options.min_inliers = std::atoi(v.c_str());
    else if (a == "--max-error") options.max_error_px = std::atof(v.c_str());
    else if (a == "--out") out_file = v;
    else if (a == "--seed") options.seed = std::strtoull(v.c_str(), nullptr, 10);
    else if (a == "--skip-reference") skip_reference = v == "1";
    else return Usage();
  }
  if (features_dir.empty() || matches_dir.empty()) return Usage();
  TwoViewModel model;
  Status s = TwoViewModelFromString(model_name, &model);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 2;
  }
  std::map<std::string, CameraIntrinsics> intrinsics;
  if (!intrinsics_file.empty() && !(s = ReadIntrinsicsTable(intrinsics_file, &intrinsics)).ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 2;
  }
  auto lookup = [&](const std::string& feature_name, Intrinsics* k) {
    const std::string stem = FeaturesFileStem(feature_name);
    auto it = intrinsics.find(stem);
    if (it == intrinsics.end()) it = intrinsics.find("*");
    if (it == intrinsics.end()) return false;
    *k = {it->second.fx, it->second.fy, it->second.cx, it->second.cy};
    return true;
  };

  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(matches_dir))
    if (e.path().extension() == ".tpmatch") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  std::map<std::string, Features> features;
  std::vector<Pair> pairs;
  size_t total_matches = 0, skipped = 0;
  for (const std::string& f : files) {
    PairMatches pm;
    if (!(s = ReadMatches(f, &pm)).ok()) {
      std::fprintf(stderr, "%s\n", s.message().c_str());
      return 2;
    }
    for (const std::string& name : {pm.name1, pm.name2}) {
      if (features.count(name)) continue;
      if (!(s = ReadFeatures((fs::path(features_dir) / name).string(), &features[name])).ok()) {
        std::fprintf(stderr, "%s\n", s.message().c_str());
        return 2;
      }
    }
    Pair p;
    p.name1 = pm.name1;
    p.name2 = pm.name2;
    const Features& f1 = features[pm.name1];
    const Features& f2 = features[pm.name2];
    for (const FeatureMatch& m : pm.matches) {
      const Keypoint& a = f1.keypoints[m.index1];
      const Keypoint& b = f2.keypoints[m.index2];
      p.x1.push_back({a.x, a.y});
      p.x2.push_back({b.x, b.y});
      p.costs.push_back(m.distance_sq);
    }
    if (model == TwoViewModel::kEssential && !(lookup(p.name1, &p.k1) && lookup(p.name2, &p.k2))) {
      ++skipped;  // no intrinsics for one of the images: not a pair for the essential matrix
      continue;
    }
    total_matches += p.x1.size();
    pairs.push_back(std::move(p));
  }
  std::printf("%zu pairs (%zu left out without intrinsics), %zu matches, model %s, %d threads\n",
              pairs.size(), skipped, total_matches, model_name.c_str(), threads);

  RansacOptions reference = options;
  reference.early_stop = false;
  RansacOptions fast = options;
  fast.early_stop = true;
  RansacOptions prosac = fast;
  prosac.sampling = RansacOptions::Sampling::kProsac;
  const Run ref = skip_reference ? Run{0, 0, std::vector<Outcome>(pairs.size())}
                                 : Verify(pairs, model, reference, threads);
  const Run now = Verify(pairs, model, fast, threads);
  const Run pro = Verify(pairs, model, prosac, threads);
  // The same early-stopping loop with the next seed: how much the outcome of the search
  // itself varies (the noise floor of any comparison of sampling schemes).
  RansacOptions next_seed = fast;
  next_seed.seed = options.seed + 1;
  const Run other = Verify(pairs, model, next_seed, threads);

  nlohmann::json result;
  result["tool"] = "bench/verify_bench";
  result["commit"] = kGitCommit;
  result["model"] = model_name;
  result["threads"] = threads;
  result["hardware_threads"] = std::thread::hardware_concurrency();
  result["pairs"] = pairs.size();
  result["pairs_left_out_without_intrinsics"] = skipped;
  result["matches"] = total_matches;
  result["options"] = {{"max_error_px", options.max_error_px},
                       {"min_inliers", options.min_inliers},
                       {"max_iterations", options.max_iterations},
                       {"confidence", options.confidence}};
  auto summarise = [&](const Run& r) {
    size_t verified = 0, inliers_verified = 0, inliers_all = 0, iterations = 0;
    for (const Outcome& o : r.pairs) {
      verified += o.verified;
      inliers_all += o.inliers;
      if (o.verified) inliers_verified += o.inliers;
      iterations += o.iterations;
    }
    return nlohmann::json{{"seconds", r.seconds},
                          {"cpu_seconds", r.cpu_seconds},
                          {"verified_pairs", verified},
                          {"inliers_of_verified_pairs", inliers_verified},
                          {"inliers_all_pairs", inliers_all},
                          {"ransac_iterations", iterations}};
  };
  result["reference"] = summarise(ref);
  result["early_stop"] = summarise(now);
  result["prosac"] = summarise(pro);
  result["early_stop_next_seed"] = summarise(other);
  // Run b against run a, pair by pair.
  auto compare = [&](const Run& ra, const char* a_name, const Run& rb, const char* b_name) {
    nlohmann::json c, differ = nlohmann::json::array();
    size_t both = 0, inliers_a = 0, inliers_b = 0, only_a = 0, only_b = 0, within_2 = 0;
    double worst_relative = 0;
    for (size_t p = 0; p < pairs.size(); ++p) {
      const Outcome& a = ra.pairs[p];
      const Outcome& b = rb.pairs[p];
      only_a += a.verified && !b.verified;
      only_b += b.verified && !a.verified;
      if (a.verified && b.verified) {
        ++both;
        inliers_a += a.inliers;
        inliers_b += b.inliers;
        const double rel = std::abs(b.inliers - a.inliers) / double(a.inliers);
        worst_relative = std::max(worst_relative, rel);
        within_2 += rel <= 0.02;
      }
      if (a.verified != b.verified || (a.verified && a.inliers != b.inliers)) {
        differ.push_back({{"pair", pairs[p].name1 + " " + pairs[p].name2},
                          {"matches", pairs[p].x1.size()},
                          {a_name, {{"verified", a.verified}, {"inliers", a.inliers}, {"iterations", a.iterations}}},
                          {b_name, {{"verified", b.verified}, {"inliers", b.inliers}, {"iterations", b.iterations}}}});
      }
    }
    c["verified_in_both"] = both;
    c["verified_only_in_" + std::string(a_name)] = only_a;
    c["verified_only_in_" + std::string(b_name)] = only_b;
    c["inliers_in_both"] = {{a_name, inliers_a}, {b_name, inliers_b}};
    c["largest_relative_inlier_change_in_both"] = worst_relative;
    c["pairs_within_2_percent"] = within_2;
    c["pairs_that_differ"] = differ;
    c["speedup"] = ra.seconds / std::max(1e-9, rb.seconds);
    c["cpu_speedup"] = ra.cpu_seconds / std::max(1e-9, rb.cpu_seconds);
    std::printf("%s -> %s: speedup %.2fx (cpu %.2fx); verified in both %zu (only %s %zu, only %s %zu), "
                "their inliers %zu -> %zu (largest change %.1f%%, %zu within 2%%); %zu pairs differ\n",
                a_name, b_name, c["speedup"].get<double>(), c["cpu_speedup"].get<double>(), both, a_name, only_a,
                b_name, only_b, inliers_a, inliers_b, 100 * worst_relative, within_2, differ.size());
    return c;
  };
  std::printf("%-20s %9s %9s %9s %16s %12s %12s\n", "run", "seconds", "cpu s", "verified",
              "inliers(verif.)", "inliers(all)", "iterations");
  for (const char* key : {"reference", "early_stop", "prosac", "early_stop_next_seed"}) {
    const auto& r = result[key];
    std::printf("%-20s %9.3f %9.3f %9zu %16zu %12zu %12zu\n", key, r["seconds"].get<double>(),
                r["cpu_seconds"].get<double>(),
                r["verified_pairs"].get<size_t>(), r["inliers_of_verified_pairs"].get<size_t>(),
                r["inliers_all_pairs"].get<size_t>(), r["ransac_iterations"].get<size_t>());
  }
  // The earlier session's fields (reference -> early_stop) keep their names.
  const nlohmann::json es = compare(ref, "reference", now, "early_stop");
  for (const char* k : {"verified_in_both", "inliers_in_both", "largest_relative_inlier_change_in_both",
                        "pairs_that_differ", "speedup", "cpu_speedup"})
    result[k] = es[k];
  result["reference_vs_prosac"] = compare(ref, "reference", pro, "prosac");
  result["early_stop_vs_prosac"] = compare(now, "early_stop", pro, "prosac");
  result["early_stop_vs_next_seed"] = compare(now, "early_stop", other, "early_stop_next_seed");
  if (!out_file.empty()) {
    std::ofstream out(out_file);
    out << result.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "%s: cannot write\n", out_file.c_str());
      return 2;
    }
  }
  return 0;
}
