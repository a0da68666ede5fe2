// tiepoint extract IMAGE... -o DIR: keypoints and descriptors of each image, written to
// DIR/<image file name>.tpfeat (and .txt with --txt). A batch goes on past bad images;
// they are listed on stderr at the end and make the exit code 2.
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli/progress.h"
#include "features/sift.h"
#include "io/base/atomic_file.h"
#include "io/base/device.h"
#include "io/base/timer.h"
#include "io/features.h"
#include "io/image.h"

namespace tiepoint::cli {
namespace {

namespace fs = std::filesystem;

struct ExtractArgs {
  std::vector<std::string> images;
  std::string detector = "sift";
  std::string device = "cpu";
  int max_features = 0;
  bool upsample = false;
  bool root_sift = false;
  int threads = 0;
  std::string output_dir;
  bool txt = false;
  bool quiet = false;
};

int RunExtract(const ExtractArgs& a) {
  const char* cmd = "extract";
  if (a.detector == "fast") {
    return ReportError(cmd, Status::InvalidOptions(
                                "--detector fast: not available yet (FAST + grid NMS comes "
                                "with its own issue); use --detector sift"));
  }
  if (a.detector != "sift") {
    return ReportError(cmd, Status::InvalidOptions("--detector '" + a.detector +
                                                   "': expected sift (fast: not available yet)"));
  }
  Device device = Device::kCpu;
  Status s = DeviceFromString(a.device, &device);
  if (!s.ok()) return ReportError(cmd, Status::InvalidOptions("--" + s.message()));

  SiftOptions options;
  options.max_features = a.max_features;
  options.upsample = a.upsample;
  options.root_sift = a.root_sift;
  options.num_threads = a.threads;
  std::unique_ptr<FeatureExtractor> extractor;
  if (!(s = FeatureExtractor::Create(options, device, &extractor)).ok()) {
    return ReportError(cmd, s);
  }

  std::error_code ec;
  fs::create_directories(a.output_dir, ec);
  if (ec || !fs::is_directory(a.output_dir)) {
    return ReportError(cmd, Status::IoError(a.output_dir + ": cannot create output directory (" +
                                            (ec ? ec.message() : "not a directory") + ")"));
  }

  const bool show = !a.quiet && StderrIsTerminal();
  std::vector<std::pair<std::string, std::string>> failed;  // image, reason
  std::map<std::string, std::string> written_by;            // output name -> image
  const Timer total;
  long long total_features = 0;
  const int num_images = static_cast<int>(a.images.size());
  for (int i = 0; i < num_images; ++i) {
    const std::string& path = a.images[i];
    const std::string name = fs::path(path).filename().string();
    const std::string out = (fs::path(a.output_dir) / (name + ".tpfeat")).string();
    const auto [it, fresh] = written_by.emplace(out, path);
    if (!fresh) {
      failed.emplace_back(path, "its output " + out + " would overwrite the features of " +
                                    it->second + " (same file name)");
      std::fprintf(stderr, "tiepoint %s: error: %s: %s\n", cmd, path.c_str(),
                   failed.back().second.c_str());
      continue;
    }
    ProgressLine progress(show);
    progress.Update("[" + std::to_string(i + 1) + "/" + std::to_string(num_images) +
                    "] extracting " + path + " ...");
    const Timer timer;
    GrayImage image;
    Features features;
    s = ReadImageGray(path, &image);
    const double read_s = timer.Seconds();
    if (s.ok()) s = extractor->Extract(image, &features);
    const double extract_s = timer.Seconds() - read_s;
    if (s.ok()) s = WriteFeatures(out, features);
    if (s.ok() && a.txt) {
      s = WriteFeaturesText((fs::path(a.output_dir) / (name + ".txt")).string(), features);
      if (!s.ok()) RemoveFileQuietly(out);  // all outputs of an image or none
    }
    progress.Done();
    if (!s.ok()) {
      std::fprintf(stderr, "tiepoint %s: error: %s\n", cmd, s.ToString().c_str());
      failed.emplace_back(path, s.ToString());
      continue;
    }
    total_features += static_cast<long long>(features.size());
    std::printf("%s: %d x %d, %zu features, %.3f s (read %.3f s, extract %.3f s) -> %s\n",
                path.c_str(), image.width, image.height, features.size(), timer.Seconds(),
                read_s, extract_s, out.c_str());
    std::fflush(stdout);
  }
  const int ok = num_images - static_cast<int>(failed.size());
  std::printf("tiepoint extract: %d of %d images, %lld features, %.2f s (detector sift, "
              "device %s)\n",
              ok, num_images, total_features, total.Seconds(), ToString(device));
  if (!failed.empty()) {
    std::fprintf(stderr, "tiepoint %s: %zu of %d images failed:\n", cmd, failed.size(),
                 num_images);
    for (const auto& [path, reason] : failed) {
      std::fprintf(stderr, "  %s\n", path.c_str());
    }
    return 2;
  }
  return 0;
}

}  // namespace

Runner RegisterExtract(CLI::App& app) {
  auto a = std::make_shared<ExtractArgs>();
  app.add_option("images", a->images, "Images: PNG, JPEG, PGM or PPM (8 or 16 bit)")
      ->required();
  app.add_option("--detector", a->detector, "sift (fast: not available yet)")
      ->capture_default_str();
  app.add_option("--device", a->device, "cpu | cuda")->capture_default_str();
  app.add_option("--max-features", a->max_features,
                 "Keep the N strongest features per image (0 = all)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_flag("--upsample", a->upsample, "First octave from the image upsampled 2x");
  app.add_flag("--root-sift", a->root_sift, "Root-SIFT descriptors (L1 normalise, sqrt)");
  app.add_option("--threads", a->threads, "Worker threads (0 = all hardware threads)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("-o,--output", a->output_dir,
                 "Output directory (created if missing): <image file name>.tpfeat per image")
      ->required();
  app.add_flag("--txt", a->txt,
               "Also write <image file name>.txt (x y scale orientation d0..d127)");
  app.add_flag("--quiet", a->quiet, "No progress on the terminal");
  return [a] { return RunExtract(*a); };
}

}  // namespace tiepoint::cli
