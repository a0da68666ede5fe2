// tiepoint extract IMAGE... -o DIR: keypoints and descriptors of each image, written to
// DIR/<image file name>.tpfeat (and .txt with --txt). A batch goes on past bad images;
// they are listed on stderr at the end and make the exit code 2 (3 when one failed for
// want of GPU memory or device).
//
// Images go in groups (2 x --cuda-streams with --device cuda, 4 on the CPU): a group is
// decoded on parallel threads, then extracted with ExtractBatch (on the GPU, uploads of some
// images overlap the kernels of others), then written in input order. The per-image time
// printed is the decoding time plus the image's share of its group's extraction time.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli/extract_fast.h"
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

// Images decoded together (on parallel threads) before the CPU extractor takes them one
// after another: decoding a JPEG is single-threaded, extraction is not.
constexpr int kCpuGroupSize = 4;

struct ExtractArgs {
  std::vector<std::string> images;
  std::string detector = "sift";
  std::string device = "cpu";
  int max_features = 0;
  bool upsample = false;
  bool root_sift = false;
  double contrast_threshold = SiftOptions().contrast_threshold;
  double edge_threshold = SiftOptions().edge_threshold;
  int threads = 0;
  int cuda_streams = SiftOptions().cuda_streams;
  std::string output_dir;
  bool txt = false;
  bool quiet = false;
  FastExtractArgs fast;  // --detector fast (cli/extract_fast.h)
};

int RunExtract(const ExtractArgs& a) {
  const char* cmd = "extract";
  if (a.detector == "fast") {
    return RunExtractFast(a.images, a.output_dir, a.device, a.threads, a.quiet, a.fast);
  }
  if (a.detector != "sift") {
    return ReportError(cmd, Status::InvalidOptions("--detector '" + a.detector +
                                                   "': expected sift or fast"));
  }
  Device device = Device::kCpu;
  Status s = DeviceFromString(a.device, &device);
  if (!s.ok()) return ReportError(cmd, Status::InvalidOptions("--" + s.message()));

  SiftOptions options;
  options.max_features = a.max_features;
  options.upsample = a.upsample;
  options.root_sift = a.root_sift;
  options.contrast_threshold = a.contrast_threshold;
  options.edge_threshold = a.edge_threshold;
  options.num_threads = a.threads;
  options.cuda_streams = a.cuda_streams;
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
  int exit_code = 2;  // when an image failed
  const int group_size = device == Device::kCuda ? 2 * options.cuda_streams : kCpuGroupSize;
  auto fail = [&](const std::string& path, const std::string& reason, bool name_path) {
    failed.emplace_back(path, reason);
    if (name_path) {
      std::fprintf(stderr, "tiepoint %s: error: %s: %s\n", cmd, path.c_str(), reason.c_str());
    } else {
      std::fprintf(stderr, "tiepoint %s: error: %s\n", cmd, reason.c_str());
    }
  };
  struct Job {
    std::string path, name, out;
    GrayImage image;
    Status status;
    double read_s = 0;
  };
  for (int begin = 0; begin < num_images; begin += group_size) {
    const int end = std::min(num_images, begin + group_size);
    std::vector<Job> jobs;
    for (int i = begin; i < end; ++i) {
      Job job;
      job.path = a.images[i];
      job.name = fs::path(job.path).filename().string();
      job.out = (fs::path(a.output_dir) / (job.name + ".tpfeat")).string();
      const auto [it, fresh] = written_by.emplace(job.out, job.path);
      if (!fresh) {
        fail(job.path, "its output " + job.out + " would overwrite the features of " + it->second +
                           " (same file name)", true);
        continue;
      }
      jobs.push_back(std::move(job));
    }
    if (jobs.empty()) continue;
    ProgressLine progress(show);
    progress.Update("[" + std::to_string(begin + 1) + (jobs.size() > 1 ? "-" + std::to_string(end) : "") +
                    "/" + std::to_string(num_images) + "] extracting " + jobs.front().path + " ...");
    // Decode (in parallel for a group), then extract the group in one batch.
    auto read = [](Job* job) {
      const Timer timer;
      job->status = ReadImageGray(job->path, &job->image);
      job->read_s = timer.Seconds();
    };
    if (jobs.size() == 1) {
      read(&jobs[0]);
    } else {
      std::vector<std::thread> readers;
      for (Job& job : jobs) readers.emplace_back(read, &job);
      for (std::thread& t : readers) t.join();
    }
    std::vector<const GrayImage*> batch;
    std::vector<size_t> batch_job;
    for (size_t j = 0; j < jobs.size(); ++j) {
      if (!jobs[j].status.ok()) continue;
      batch.push_back(&jobs[j].image);
      batch_job.push_back(j);
    }
    std::vector<Features> features;
    std::vector<Status> statuses;
    const Timer extract_timer;
    if (!batch.empty()) extractor->ExtractBatch(batch, &features, &statuses);
    // Per image: its share of the batch's extraction time.
    const double extract_s = batch.empty() ? 0.0 : extract_timer.Seconds() / batch.size();
    std::vector<Features> features_of(jobs.size());
    for (size_t b = 0; b < batch.size(); ++b) {
      jobs[batch_job[b]].status = statuses[b];
      features_of[batch_job[b]] = std::move(features[b]);
    }
    progress.Done();
    for (size_t j = 0; j < jobs.size(); ++j) {
      Job& job = jobs[j];
      Status st = job.status;
      if (st.ok()) st = WriteFeatures(job.out, features_of[j]);
      if (st.ok() && a.txt) {
        st = WriteFeaturesText((fs::path(a.output_dir) / (job.name + ".txt")).string(),
                               features_of[j]);
        if (!st.ok()) RemoveFileQuietly(job.out);  // all outputs of an image or none
      }
      if (!st.ok()) {
        // Out of GPU memory or a lost device is exit code 3, as for every command.
        if (st.ExitCode() == 3) exit_code = 3;
        fail(job.path, st.ToString(), false);
        continue;
      }
      total_features += static_cast<long long>(features_of[j].size());
      std::printf("%s: %d x %d, %zu features, %.3f s (read %.3f s, extract %.3f s) -> %s\n",
                  job.path.c_str(), job.image.width, job.image.height, features_of[j].size(),
                  job.read_s + extract_s, job.read_s, extract_s, job.out.c_str());
    }
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
    return exit_code;
  }
  return 0;
}

}  // namespace

Runner RegisterExtract(CLI::App& app) {
  auto a = std::make_shared<ExtractArgs>();
  app.add_option("images", a->images, "Images: PNG, JPEG, PGM or PPM (8 or 16 bit)")
      ->required();
  app.add_option("--detector", a->detector, "sift | fast (corners only, no descriptors)")
      ->capture_default_str();
  AddFastExtractOptions(app, &a->fast);
  app.add_option("--device", a->device, "cpu | cuda")->capture_default_str();
  app.add_option("--max-features", a->max_features,
                 "Keep the N strongest features per image (0 = all)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_flag("--upsample", a->upsample, "First octave from the image upsampled 2x");
  app.add_flag("--root-sift", a->root_sift, "Root-SIFT descriptors (L1 normalise, sqrt)");
  app.add_option("--contrast-threshold", a->contrast_threshold,
                 "SIFT: drop DoG extrema with |D| < T / 3 (images in [0, 1]); lower keeps more "
                 "features on dark or untextured objects")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--edge-threshold", a->edge_threshold,
                 "SIFT: drop extrema whose principal curvature ratio is >= R")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--threads", a->threads, "Worker threads (0 = all hardware threads)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--cuda-streams", a->cuda_streams,
                 "With --device cuda: images in flight at once (1..64)")
      ->capture_default_str();
  app.add_option("-o,--output", a->output_dir,
                 "Output directory (created if missing): <image file name>.tpfeat per image")
      ->required();
  app.add_flag("--txt", a->txt,
               "Also write <image file name>.txt (x y scale orientation d0..d127)");
  app.add_flag("--quiet", a->quiet, "No progress on the terminal");
  return [a] { return RunExtract(*a); };
}

}  // namespace tiepoint::cli
