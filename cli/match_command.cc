// tiepoint match FEATURES... -o DIR: brute-force descriptor matching (features/matcher.h)
// of image pairs, optionally followed by geometric verification (solver/
// two_view_geometry.h): DIR/<name1>--<name2>.tpmatch per pair (name = the image's: the
// feature file's path in the folder given, or its file name, without ".tpfeat", each '/'
// written "%2F"; format and MatchesFileName in io/matches.h), .txt with --txt, .svg with
// --svg, and DIR/summary.json over all pairs (a table on stdout too).
//
// Every input is read and checked before anything is written: a bad feature file, pair
// list or intrinsics table is an error naming the file (exit 2) and leaves no output.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli/output_dir.h"
#include "cli/progress.h"
#include "features/matcher.h"
#include "io/base/atomic_file.h"
#include "io/base/device.h"
#include "io/base/folder_listing.h"
#include "io/base/input_file.h"
#include "io/base/timer.h"
#include "io/features.h"
#include "io/image.h"
#include "io/matches.h"
#include "io/pairs_file.h"
#include "io/report.h"
#include "solver/geometry/fundamental_cuda.h"
#include "solver/geometry/two_view_geometry.h"
#include "tiepoint/build_info.h"

namespace tiepoint::cli {
namespace {

namespace fs = std::filesystem;

struct MatchArgs {
  std::vector<std::string> features;
  std::vector<std::string> feature_names;  // per feature file: its name ("a.png.tpfeat"; "cam0/a.png.tpfeat" from a folder)
  std::vector<std::string> image_names;    // FeaturesFileStem of those ("a.png"; "cam0/a.png")
  std::string pairs = "exhaustive";
  double ratio = MatcherOptions().ratio;
  bool mutual = false;
  double max_distance = -1;
  std::string device = "cpu";
  int threads = 0;
  int cuda_streams = MatcherOptions().cuda_streams;
  std::string verify;
  std::string verify_device;  // empty: --device
  std::string intrinsics;
  double max_error = RansacOptions().max_error_px;
  int min_inliers = RansacOptions().min_inliers;
  int max_iterations = RansacOptions().max_iterations;
  uint64_t seed = 0;
  bool no_early_stop = false;
  std::string output_dir;
  bool svg = false;
  std::string images_dir;
  bool txt = false;
  bool quiet = false;
};

std::string Stem(const std::string& path) { return FeaturesFileStem(fs::path(path).filename().string()); }

// --pairs: "exhaustive", "sequential:K" or a pairs file (io/pairs_file.h) of feature files
// named as given on the command line, by their file names, by their images' file names or
// by those names' stems.
Status BuildPairs(const std::string& spec, const std::vector<std::string>& files,
                  const std::vector<std::string>& image_names, std::vector<std::pair<int, int>>* pairs) {
  const int n = static_cast<int>(files.size());
  pairs->clear();
  if (spec == "exhaustive") {
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j) pairs->emplace_back(i, j);
    return Status::Ok();
  }
  if (spec.rfind("sequential:", 0) == 0) {
    const std::string k_text = spec.substr(11);
    char* end = nullptr;
    const long k = std::strtol(k_text.c_str(), &end, 10);
    if (k_text.empty() || *end != '\0' || k < 1 || k > 1000000) {
      return Status::InvalidOptions("--pairs '" + spec +
                                    "': expected sequential:K with K a positive integer");
    }
    for (int i = 0; i < n; ++i)
      for (long d = 1; d <= k && i + d < n; ++d) pairs->emplace_back(i, static_cast<int>(i + d));
    return Status::Ok();
  }
  std::vector<NamePair> named;
  TIEPOINT_RETURN_IF_ERROR(ReadPairsFile(spec, &named));
  std::vector<std::vector<std::string>> names_of(n);
  for (int i = 0; i < n; ++i) {
    // "f/view_000.png.tpfeat": the path, "view_000.png.tpfeat", "view_000.png", "view_000".
    const std::string image = Stem(files[i]);
    names_of[i] = {files[i], fs::path(files[i]).filename().string(), image, fs::path(image).stem().string()};
    // Listed from a folder: also the image's name there, as reconstruct names it ("cam0/a.png").
    names_of[i].push_back(image_names[i]);
  }
  return ResolvePairs(spec, named, names_of, "feature file", pairs);
}

MatchModel ToMatchModel(TwoViewModel m) {
  switch (m) {
    case TwoViewModel::kHomography: return MatchModel::kHomography;
    case TwoViewModel::kFundamental: return MatchModel::kFundamental;
    case TwoViewModel::kEssential: return MatchModel::kEssential;
  }
  return MatchModel::kNone;
}

// The image as an SVG href: a base64 data URI for PNG and JPEG files (the SVG stands alone),
// else a file:// reference (browsers show no PGM).
std::string ImageHref(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const bool png = bytes.rfind("\x89PNG", 0) == 0;
  const bool jpeg = bytes.size() > 2 && static_cast<unsigned char>(bytes[0]) == 0xff &&
                    static_cast<unsigned char>(bytes[1]) == 0xd8;
  if (!png && !jpeg) return "file://" + path;
  static const char kTable[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out = png ? "data:image/png;base64," : "data:image/jpeg;base64,";
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 2]);
    out += kTable[(v >> 18) & 63];
    out += kTable[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kTable[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kTable[v & 63] : '=';
  }
  return out;
}

std::string Fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

// Side by side: image 1 at x = 0, image 2 at x = w1 + gap; lines for the inliers (every
// match when there is no model). Images from --images are embedded (PNG, JPEG) or
// referenced by absolute path (other formats); without them the panels are grey
// rectangles spanning the keypoints.
Status WritePairSvg(const std::string& path, const PairMatches& pm, const Features& f1,
                    const Features& f2, const std::string& image1, const std::string& image2,
                    const std::array<int, 2>& size1, const std::array<int, 2>& size2) {
  const int gap = 20;
  const int w = size1[0] + gap + size2[0], h = std::max(size1[1], size2[1]);
  AtomicFile file(path);
  TIEPOINT_RETURN_IF_ERROR(file.Open());
  std::ofstream& out = file.stream();
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\" "
         "width=\""
      << w << "\" height=\"" << h << "\" viewBox=\"0 0 " << w << ' ' << h << "\">\n";
  auto panel = [&](int x0, const std::array<int, 2>& size, const std::string& image) {
    out << "<rect x=\"" << x0 << "\" y=\"0\" width=\"" << size[0] << "\" height=\"" << size[1]
        << "\" fill=\"#404040\"/>\n";
    if (!image.empty()) {
      const std::string href = ImageHref(image);
      out << "<image x=\"" << x0 - 0.5 << "\" y=\"-0.5\" width=\"" << size[0] << "\" height=\""
          << size[1] << "\" preserveAspectRatio=\"none\" href=\"" << href << "\" xlink:href=\""
          << href << "\"/>\n";
    }
  };
  panel(0, size1, image1);
  panel(size1[0] + gap, size2, image2);
  const bool has_model = pm.model != MatchModel::kNone;
  out << "<g stroke-width=\"1\" fill=\"none\" stroke-opacity=\"0.8\">\n";
  for (size_t k = 0; k < pm.matches.size(); ++k) {
    if (has_model && !(k < pm.inliers.size() && pm.inliers[k])) continue;
    const Keypoint& a = f1.keypoints[pm.matches[k].index1];
    const Keypoint& b = f2.keypoints[pm.matches[k].index2];
    const double bx = b.x + size1[0] + gap;
    out << "<line x1=\"" << Fmt("%.1f", a.x) << "\" y1=\"" << Fmt("%.1f", a.y) << "\" x2=\""
        << Fmt("%.1f", bx) << "\" y2=\"" << Fmt("%.1f", b.y) << "\" stroke=\""
        << (has_model ? "#30e030" : "#30a0ff") << "\"/>\n";
  }
  out << "</g>\n<text x=\"4\" y=\"14\" fill=\"yellow\" font-size=\"12\" font-family=\"sans-serif\">"
      << pm.name1 << " - " << pm.name2 << ": " << pm.matches.size() << " matches";
  if (has_model) out << ", " << pm.NumInliers() << " inliers (" << ToString(pm.model) << ")";
  out << "</text>\n</svg>\n";
  return file.Commit();
}

int RunMatch(const MatchArgs& a) {
  const char* cmd = "match";
  Device device = Device::kCpu;
  Status s = DeviceFromString(a.device, &device);
  if (!s.ok()) return ReportError(cmd, Status::InvalidOptions("--" + s.message()));
  MatcherOptions options;
  options.ratio = a.ratio;
  options.mutual = a.mutual;
  options.max_distance = a.max_distance;
  options.num_threads = a.threads;
  options.cuda_streams = a.cuda_streams;
  if (!(s = options.Check()).ok()) return ReportError(cmd, s);
  if (device == Device::kCuda) RequestCudaQueues(options.cuda_streams);
  const bool verify = !a.verify.empty();
  TwoViewModel model = TwoViewModel::kHomography;
  RansacOptions ransac;
  ransac.max_error_px = a.max_error;
  ransac.min_inliers = a.min_inliers;
  ransac.max_iterations = std::max(a.max_iterations, 1);
  ransac.min_iterations = std::min(ransac.min_iterations, ransac.max_iterations);
  ransac.seed = a.seed;
  ransac.early_stop = !a.no_early_stop;
  if (verify) {
    if (!(s = TwoViewModelFromString(a.verify, &model)).ok()) {
      return ReportError(cmd, Status::InvalidOptions("--verify: " + s.message()));
    }
    if (!(s = ransac.Check()).ok()) return ReportError(cmd, s);
  }
  // Where the fundamental matrix's RANSAC searches: the GPU by default with --device cuda.
  Device verify_device = device;
  if (!a.verify_device.empty()) {
    if (!(s = DeviceFromString(a.verify_device, &verify_device)).ok()) {
      return ReportError(cmd, Status::InvalidOptions("--verify-" + s.message()));
    }
  }
  const bool verify_on_gpu = verify && model == TwoViewModel::kFundamental &&
                             verify_device == Device::kCuda && ransac.early_stop;
  if (verify && verify_device == Device::kCuda && !verify_on_gpu && !a.verify_device.empty()) {
    return ReportError(cmd, Status::InvalidOptions(
                                "--verify-device cuda searches fundamental matrices only, with early "
                                "stopping (not with --verify " + a.verify + (a.no_early_stop ? ", --no-early-stop" : "") +
                                "); use --verify-device cpu"));
  }
  if (a.features.size() < 2) {
    return ReportError(cmd, Status::InvalidOptions("expected at least two feature files, got " +
                                                   std::to_string(a.features.size())));
  }
  std::map<std::string, CameraIntrinsics> intrinsics;
  const bool essential = verify && model == TwoViewModel::kEssential;
  if (essential && a.intrinsics.empty()) {
    return ReportError(cmd, Status::InvalidOptions(
                                "--verify essential needs --intrinsics FILE (lines 'NAME fx fy "
                                "cx cy' or Middlebury's *_par.txt)"));
  }
  if (!a.intrinsics.empty()) {
    if (!(s = ReadIntrinsicsTable(a.intrinsics, &intrinsics)).ok()) return ReportError(cmd, s);
  }

  // Read and check every input before writing anything.
  const int n = static_cast<int>(a.features.size());
  std::vector<Features> features(n);
  std::map<std::string, std::string> file_of;  // name in the outputs' names -> file (outputs must not collide)
  // --intrinsics lines name an image by its name ("cam0/a.png") or, where no two share it,
  // its file name ("a.png"), as reconstruct's do.
  std::map<std::string, int> file_name_count;
  for (const std::string& f : a.features) ++file_name_count[Stem(f)];
  std::vector<Intrinsics> k(n);
  const bool show = !a.quiet && StderrIsTerminal();
  {
    ProgressLine progress(show);
    SeenFiles seen_files;
    for (int i = 0; i < n; ++i) {
      progress.Update("[" + std::to_string(i + 1) + "/" + std::to_string(n) + "] reading " +
                      a.features[i]);
      if (!(s = seen_files.AddOnce(a.features[i], "feature file")).ok()) return ReportError(cmd, s);
      if (!(s = ReadFeatures(a.features[i], &features[i])).ok()) return ReportError(cmd, s);
      const std::string& name = a.image_names[i];
      const auto [it, fresh] = file_of.emplace(MatchesFileNamePart(name), a.features[i]);
      if (!fresh) {
        return ReportError(cmd, Status::InvalidInput(a.features[i] + ": its outputs would overwrite those of " +
                                                     it->second + " (both named '" + it->first +
                                                     "' in them); give a folder that holds both, whose "
                                                     "files are named by their paths in it"));
      }
      if (features[i].size() > kMaxMatcherDescriptors) {
        return ReportError(cmd, Status::InvalidInput(a.features[i] + ": " +
                                                     std::to_string(features[i].size()) +
                                                     " keypoints, more than the matcher takes"));
      }
      if (essential) {
        const std::string file_name = Stem(a.features[i]);
        auto kt = intrinsics.find(name);
        if (kt == intrinsics.end() && file_name != name && file_name_count[file_name] == 1)
          kt = intrinsics.find(file_name);
        if (kt == intrinsics.end()) kt = intrinsics.find("*");
        if (kt == intrinsics.end()) {
          return ReportError(cmd, Status::InvalidInput(
                                      a.intrinsics + ": no intrinsics for image '" + name +
                                      "' (of " + a.features[i] + ") and no '*' line"));
        }
        k[i] = {kt->second.fx, kt->second.fy, kt->second.cx, kt->second.cy};
      }
    }
  }
  std::vector<std::pair<int, int>> pairs;
  if (!(s = BuildPairs(a.pairs, a.features, a.image_names, &pairs)).ok()) return ReportError(cmd, s);
  // Every output's name fits a file name (255 bytes; images deep in subfolders have long
  // names), checked before anything is written.
  // Nor may two pairs share one: the pairs 'a--b.png', 'c.png' and 'a', 'b.png--c.png'
  // would write one file over the other. (Two images of one name part, 'x%2Fy.png' beside
  // 'x/y.png', are refused earlier, image by image.)
  constexpr size_t kMaxFileNameBytes = 255;
  {
    std::unordered_map<std::string, size_t> pair_of_name;  // gone before the matching starts
    for (size_t p = 0; p < pairs.size(); ++p) {
      const auto [i, j] = pairs[p];
      const std::string longest = MatchesFileName(a.image_names[i], a.image_names[j], ".tpmatch");
      if (longest.size() > kMaxFileNameBytes)
        return ReportError(cmd, Status::InvalidInput(a.features[i] + ", " + a.features[j] + ": the pair's output name '" +
                                                     longest + "' is " + std::to_string(longest.size()) +
                                                     " bytes, more than a file name may have (255)"));
      const auto [it, inserted] = pair_of_name.emplace(longest, p);
      if (!inserted) {
        const auto [i0, j0] = pairs[it->second];
        return ReportError(cmd, Status::InvalidInput("the pairs " + a.features[i0] + ", " + a.features[j0] + " and " +
                                                     a.features[i] + ", " + a.features[j] + " would both be written to '" +
                                                     longest + "': rename an image"));
      }
    }
  }
  // Image sizes for the SVGs: from --images when given, else the keypoints' extent.
  std::vector<std::string> image_path(n);
  std::vector<std::array<int, 2>> image_size(n);
  if (a.svg) {
    for (int i = 0; i < n; ++i) {
      GrayImage img;
      const std::string candidate =
          a.images_dir.empty() ? std::string() : (fs::path(a.images_dir) / a.image_names[i]).string();
      if (!candidate.empty() && ReadImageGray(candidate, &img).ok()) {
        image_path[i] = fs::absolute(candidate).string();
        image_size[i] = {img.width, img.height};
      } else {
        float mx = 1, my = 1;
        for (const Keypoint& kp : features[i].keypoints) mx = std::max(mx, kp.x), my = std::max(my, kp.y);
        image_size[i] = {static_cast<int>(std::ceil(mx)) + 1, static_cast<int>(std::ceil(my)) + 1};
      }
    }
  }

  std::unique_ptr<DescriptorMatcher> matcher;
  if (!(s = DescriptorMatcher::Create(options, device, &matcher)).ok()) return ReportError(cmd, s);
  OutputDirectory out_dir;
  if (!(s = out_dir.Create(a.output_dir)).ok()) return ReportError(cmd, s);

  std::vector<const Features*> ptrs;
  for (const Features& f : features) ptrs.push_back(&f);
  std::vector<std::vector<FeatureMatch>> matches;
  const Timer match_timer;
  {
    ProgressLine progress(show);
    s = matcher->MatchPairs(ptrs, pairs, &matches, [&](size_t done, size_t total) {
      progress.Update("matching: " + std::to_string(done) + "/" + std::to_string(total) +
                      " pairs");
    });
  }
  if (!s.ok()) return ReportError(cmd, s);
  const double match_s = match_timer.Seconds();

  const Timer verify_timer;
  std::vector<PairMatches> results(pairs.size());
  // Essential only: TwoViewGeometry::rotation_uncertainty_deg (summary and table, not in
  // the match files).
  std::vector<double> rotation_uncertainty(pairs.size(), 0.0);
  for (size_t p = 0; p < pairs.size(); ++p) {
    const auto [i, j] = pairs[p];
    PairMatches& pm = results[p];
    pm.name1 = a.feature_names[i];
    pm.name2 = a.feature_names[j];
    pm.num_keypoints1 = features[i].size();
    pm.num_keypoints2 = features[j].size();
    pm.matches = std::move(matches[p]);
  }
  double gpu_search_s = 0.0;
  if (verify) {
    // Pairs go to --threads workers (each pair's result depends only on its matches and
    // the seed, never on the worker or the thread count). When fewer pairs are left than
    // workers (few pairs, or the last ones of many), a pair's RANSAC also spreads its
    // hypotheses over workers / (pairs left) threads, so that the cores idle at the
    // tail help with the slowest pairs.
    //
    // With the GPU search (--device cuda or --verify-device cuda, fundamental matrices),
    // this thread searches the pairs' hypotheses on the GPU in chunks of about
    // kChunkCorrespondences matches (solver/geometry/fundamental_cuda.h), while the
    // workers solve, score and refine the best samples of the chunks already searched.
    // At most two chunks wait for the workers, which bounds the memory of the
    // coordinates; the samples do not depend on the chunks (each pair keeps its stream).
    constexpr size_t kChunkCorrespondences = size_t{1} << 20;
    std::vector<Status> statuses(pairs.size());
    std::atomic<size_t> next{0}, done{0};
    const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    const size_t workers = std::min<size_t>(pairs.size(), a.threads > 0 ? a.threads : hw);
    const size_t all_threads = a.threads > 0 ? a.threads : hw;
    std::vector<FundamentalCandidates> candidates(verify_on_gpu ? pairs.size() : 0);
    std::vector<std::vector<std::array<double, 2>>> gpu_x1(candidates.size()), gpu_x2(candidates.size());
    std::mutex mu;
    std::condition_variable cv;
    std::atomic<size_t> ready{verify_on_gpu ? 0 : pairs.size()};  // pairs [0, ready) searched
    bool search_failed = false;
    Status search_status;
    // Pixel coordinates of pair p's matches in its two images.
    auto coordinates = [&](size_t p, std::vector<std::array<double, 2>>* x1, std::vector<std::array<double, 2>>* x2) {
      const auto [i, j] = pairs[p];
      x1->reserve(results[p].matches.size());
      x2->reserve(results[p].matches.size());
      for (const FeatureMatch& m : results[p].matches) {
        const Keypoint& p1 = features[i].keypoints[m.index1];
        const Keypoint& p2 = features[j].keypoints[m.index2];
        x1->push_back({p1.x, p1.y});
        x2->push_back({p2.x, p2.y});
      }
    };
    auto wait_searched = [&](size_t p) {
      if (p < ready) return true;
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return p < ready || search_failed; });
      return p < ready;
    };
    auto work = [&] {
      for (size_t p = next++; p < pairs.size(); p = next++) {
        if (!wait_searched(p)) break;
        const auto [i, j] = pairs[p];
        PairMatches& pm = results[p];
        std::vector<std::array<double, 2>> x1, x2;
        if (verify_on_gpu) {
          x1.swap(gpu_x1[p]);
          x2.swap(gpu_x2[p]);
        } else {
          coordinates(p, &x1, &x2);
        }
        TwoViewGeometry g;
        RansacOptions pair_ransac = ransac;
        pair_ransac.num_threads =
            static_cast<int>(std::max<size_t>(1, all_threads / std::max<size_t>(1, pairs.size() - p)));
        if (verify_on_gpu) {
          pair_ransac.candidate_samples = &candidates[p].samples;
          pair_ransac.num_threads = 1;
        }
        statuses[p] = EstimateTwoViewGeometry(model, x1, x2, essential ? &k[i] : nullptr,
                                              essential ? &k[j] : nullptr, pair_ransac, &g);
        if (verify_on_gpu) std::vector<int>().swap(candidates[p].samples);
        if (statuses[p].ok()) {
          pm.model = ToMatchModel(model);
          pm.verified = g.verified;
          pm.ransac_iterations = static_cast<uint32_t>(
              std::max(0, verify_on_gpu ? candidates[p].samples_drawn : g.ransac_iterations));
          std::copy(g.matrix, g.matrix + 9, pm.matrix);
          std::copy(g.rotation, g.rotation + 9, pm.rotation);
          std::copy(g.translation, g.translation + 3, pm.translation);
          pm.inlier_rms_error_px =
              std::isfinite(g.inlier_rms_error_px) ? g.inlier_rms_error_px : 0.0;
          pm.inliers = g.inlier_mask;
          rotation_uncertainty[p] = g.rotation_uncertainty_deg;
          if (pm.inliers.size() != pm.matches.size()) pm.inliers.assign(pm.matches.size(), 0);
        }
        ++done;
        if (verify_on_gpu) {
          std::lock_guard<std::mutex> lock(mu);
          cv.notify_all();
        }
      }
    };
    // The GPU search, chunk by chunk (on this thread).
    auto search = [&] {
      FundamentalSearchOptions so;
      so.max_error_px = ransac.max_error_px;
      so.samples = ransac.max_iterations;
      so.seed = ransac.seed;
      so.min_inliers = ransac.min_inliers;
      size_t previous_begin = 0;
      for (size_t begin = 0; begin < pairs.size();) {
        size_t end = begin, sum = 0;
        while (end < pairs.size() && (end == begin || sum + results[end].matches.size() <= kChunkCorrespondences)) {
          sum += results[end++].matches.size();
        }
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return done >= previous_begin; });
        }
        const Timer chunk_timer;
        std::vector<FundamentalSearchPair> chunk(end - begin);
        for (size_t p = begin; p < end; ++p) {
          coordinates(p, &gpu_x1[p], &gpu_x2[p]);
          chunk[p - begin].x1 = &gpu_x1[p];
          chunk[p - begin].x2 = &gpu_x2[p];
        }
        so.first_stream = begin;
        std::vector<FundamentalCandidates> found;
        const Status st = SearchFundamentalCuda(chunk, so, &found);
        gpu_search_s += chunk_timer.Seconds();
        std::lock_guard<std::mutex> lock(mu);
        if (!st.ok()) {
          search_failed = true;
          search_status = st;
          cv.notify_all();
          return;
        }
        for (size_t p = begin; p < end; ++p) candidates[p] = std::move(found[p - begin]);
        ready = end;
        cv.notify_all();
        previous_begin = begin;
        begin = end;
      }
    };
    std::vector<std::thread> pool;
    for (size_t w = verify_on_gpu ? 0 : 1; w < workers; ++w) pool.emplace_back(work);
    {
      ProgressLine progress(show);
      std::thread watcher;
      std::atomic<bool> stop{false};
      if (show) {
        watcher = std::thread([&] {
          while (!stop) {
            std::string line = "verifying (" + std::string(ToString(model)) + "): " +
                               std::to_string(done.load()) + "/" + std::to_string(pairs.size()) + " pairs";
            if (verify_on_gpu) line += ", " + std::to_string(ready.load()) + " searched on the GPU";
            progress.Update(line);
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
          }
        });
      }
      if (verify_on_gpu) {
        search();
      } else {
        work();
      }
      for (std::thread& t : pool) t.join();
      stop = true;
      if (watcher.joinable()) watcher.join();
    }
    if (search_failed) return ReportError(cmd, search_status);
    for (size_t p = 0; p < pairs.size(); ++p) {
      if (!statuses[p].ok()) {
        return ReportError(cmd, Status(statuses[p].code(), results[p].name1 + " - " +
                                                              results[p].name2 + ": " +
                                                              statuses[p].message()));
      }
    }
  }
  const double verify_s = verify_timer.Seconds();

  // Outputs: per pair (all files of a pair or none), then the summary.
  nlohmann::json rows = nlohmann::json::array();
  size_t total_matches = 0, total_inliers = 0, verified_pairs = 0;
  std::printf("%-28s %-28s %8s %8s %8s %9s\n", "features 1", "features 2", "kp1", "kp2",
              "matches", verify ? "inliers" : "");
  for (size_t p = 0; p < pairs.size(); ++p) {
    const auto [i, j] = pairs[p];
    const PairMatches& pm = results[p];
    auto out = [&](const char* extension) {
      return (fs::path(a.output_dir) / MatchesFileName(a.image_names[i], a.image_names[j], extension)).string();
    };
    s = WriteMatches(out(".tpmatch"), pm);
    if (s.ok() && a.txt) s = WriteMatchesText(out(".txt"), pm);
    if (s.ok() && a.svg) {
      s = WritePairSvg(out(".svg"), pm, features[i], features[j], image_path[i],
                       image_path[j], image_size[i], image_size[j]);
    }
    if (!s.ok()) {
      RemoveFileQuietly(out(".tpmatch"));
      RemoveFileQuietly(out(".txt"));
      return ReportError(cmd, s);
    }
    total_matches += pm.matches.size();
    total_inliers += pm.NumInliers();
    verified_pairs += pm.verified;
    std::printf("%-28s %-28s %8llu %8llu %8zu", pm.name1.c_str(), pm.name2.c_str(),
                static_cast<unsigned long long>(pm.num_keypoints1),
                static_cast<unsigned long long>(pm.num_keypoints2), pm.matches.size());
    if (verify) {
      std::printf(" %9llu", static_cast<unsigned long long>(pm.NumInliers()));
      if (pm.model == MatchModel::kEssential && pm.verified) {
        std::printf("  rotation +- %.2g deg", rotation_uncertainty[p]);
      }
      if (!pm.verified) std::printf(" (not verified)");
    }
    std::printf("\n");
    nlohmann::json row = {{"features1", pm.name1},
                          {"features2", pm.name2},
                          {"file", MatchesFileName(a.image_names[i], a.image_names[j])},
                          {"keypoints1", pm.num_keypoints1},
                          {"keypoints2", pm.num_keypoints2},
                          {"matches", pm.matches.size()}};
    if (verify) {
      row["model"] = ToString(pm.model);
      row["verified"] = pm.verified;
      row["inliers"] = pm.NumInliers();
      row["ransac_iterations"] = pm.ransac_iterations;
      row["inlier_rms_error_px"] = pm.inlier_rms_error_px;
      row["matrix"] = std::vector<double>(pm.matrix, pm.matrix + 9);
      if (pm.model == MatchModel::kEssential) {
        row["rotation_cam2_from_cam1"] = std::vector<double>(pm.rotation, pm.rotation + 9);
        row["translation_cam2_from_cam1"] = std::vector<double>(pm.translation, pm.translation + 3);
        const double u = rotation_uncertainty[p];
        row["rotation_uncertainty_deg"] = std::isfinite(u) ? nlohmann::json(u) : nlohmann::json(nullptr);
      }
    }
    rows.push_back(row);
  }
  nlohmann::json summary;
  summary["tool"] = "tiepoint match";
  summary["version"] = kVersion;
  summary["commit"] = kGitCommit;
  summary["device"] = ToString(device);
  summary["options"] = {{"pairs", a.pairs},         {"ratio", a.ratio},
                        {"mutual", a.mutual},       {"max_distance", a.max_distance},
                        {"verify", verify ? a.verify : "none"},
                        {"max_error_px", a.max_error}, {"min_inliers", a.min_inliers},
                        {"seed", a.seed}};
  summary["pairs"] = rows;
  summary["totals"] = {{"pairs", pairs.size()},
                       {"matches", total_matches},
                       {"verified_pairs", verified_pairs},
                       {"inliers", total_inliers},
                       {"matching_seconds", match_s},
                       {"verification_seconds", verify_s},
                       {"verification_device", verify ? ToString(verify_on_gpu ? Device::kCuda : Device::kCpu) : "none"},
                       {"verification_gpu_search_seconds", gpu_search_s},
                       {"descriptor_pairs", matcher->summary().descriptor_pairs},
                       {"exact_distances", matcher->summary().exact_distances}};
  if (!(s = WriteJson((fs::path(a.output_dir) / "summary.json").string(), summary)).ok()) {
    return ReportError(cmd, s);
  }
  std::printf("tiepoint match: %zu pairs, %zu matches%s, matching %.3f s (device %s)%s\n",
              pairs.size(), total_matches,
              verify ? (", " + std::to_string(total_inliers) + " inliers, " +
                        std::to_string(verified_pairs) + " pairs verified").c_str()
                     : "",
              match_s, ToString(device),
              verify ? (", verification " + Fmt("%.3f", verify_s) + " s").c_str() : "");
  out_dir.Keep();
  return 0;
}

}  // namespace

Runner RegisterMatch(CLI::App& app) {
  auto a = std::make_shared<MatchArgs>();
  app.add_option("features", a->features,
                 "Feature files (.tpfeat from tiepoint extract); a folder: the .tpfeat files in it and its "
                 "subfolders, in name order")
      ->required();
  app.add_option("--pairs", a->pairs,
                 "exhaustive | sequential:K (each file with the K after it) | a file of "
                 "'NAME1 NAME2' lines")
      ->capture_default_str();
  app.add_option("--ratio", a->ratio, "Lowe's ratio test: keep when d1 < ratio * d2, (0, 1]")
      ->capture_default_str();
  app.add_flag("--mutual", a->mutual, "Keep only mutual nearest neighbours");
  app.add_option("--max-distance", a->max_distance,
                 "Largest descriptor distance kept (SIFT norms are ~512); < 0: no limit")
      ->capture_default_str();
  app.add_option("--device", a->device, "cpu | cuda")->capture_default_str();
  app.add_option("--threads", a->threads,
                 "CPU threads for matching and verification (0 = all hardware threads)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--cuda-streams", a->cuda_streams, "With --device cuda: pairs in flight (1..64)")
      ->capture_default_str();
  app.add_option("--verify", a->verify,
                 "Geometric verification by RANSAC: homography | fundamental | essential");
  app.add_option("--verify-device", a->verify_device,
                 "cpu | cuda: where --verify fundamental searches its RANSAC hypotheses (default: "
                 "--device); the CPU then refines each pair's best samples");
  app.add_option("--intrinsics", a->intrinsics,
                 "For --verify essential: lines 'NAME fx fy cx cy' or Middlebury *_par.txt "
                 "(NAME = the image's name: the feature file's path in the folder given, or its "
                 "file name, without .tpfeat; its file name where unique; '*' = any)");
  app.add_option("--max-error", a->max_error, "RANSAC inlier threshold, pixels")
      ->capture_default_str();
  app.add_option("--min-inliers", a->min_inliers, "Fewest inliers for a verified pair")
      ->capture_default_str();
  app.add_option("--max-iterations", a->max_iterations, "Most RANSAC iterations per pair")
      ->capture_default_str();
  app.add_option("--seed", a->seed, "RANSAC seed")->capture_default_str();
  app.add_flag("--no-early-stop", a->no_early_stop,
               "Verification the reference way (for comparisons): RANSAC on every pair, each "
               "hypothesis scored in full, no give-up bound; same verified pairs, slower");
  app.add_option("-o,--output", a->output_dir,
                 "Output directory (created if missing): <name1>--<name2>.tpmatch per pair (name: the image's, "
                 "the feature file's name without .tpfeat, from a folder its path there with / as %2F), "
                 "summary.json")
      ->required();
  app.add_flag("--txt", a->txt, "Also write <name1>--<name2>.txt (index1 index2 distance^2 inlier)");
  app.add_flag("--svg", a->svg, "Also draw each pair's inlier matches side by side (.svg)");
  app.add_option("--images", a->images_dir,
                 "With --svg: folder holding the images (NAME for NAME.tpfeat) to draw under "
                 "the matches");
  app.add_flag("--quiet", a->quiet, "No progress on the terminal");
  return [a] {
    // A folder stands for the feature files in it and its subfolders (extract's -o folder).
    if (Status s = ExpandFolderArguments(a->features, IsFeaturesFileName, "feature files (*.tpfeat)", &a->features,
                                         &a->feature_names);
        !s.ok())
      return ReportError("match", s);
    for (const std::string& name : a->feature_names)
      a->image_names.push_back(FeaturesFileStem(name));  // "cam0/a.png.tpfeat" -> "cam0/a.png"
    return RunMatch(*a);
  };
}

}  // namespace tiepoint::cli
