// tiepoint extract IMAGE... -o DIR: keypoints and descriptors of each image, written to
// DIR/<image file name>.tpfeat (and .txt with --txt). A batch goes on past bad images;
// they are listed on stderr at the end and make the exit code 2 (3 when one failed for
// want of GPU memory or device).
//
// Three stages run at once (issue 18: the command, not only the kernels, fast):
//   - decoding: a pool of threads (all hardware threads with --device cuda, 4 on the CPU,
//     whose extractor uses the cores itself) decodes images in input order, at most a
//     window of images ahead of the extractor (memory stays bounded);
//   - extraction: FeatureExtractor::ExtractStream takes each image as soon as it is
//     decoded; on the GPU, --cuda-streams host threads each keep one image in flight with
//     no barrier between images (uploads of some overlap the kernels of others); on the
//     CPU, groups of 4 go through ExtractBatch. The extractor (a CUDA context) is created
//     while the first images decode. With --min-features on the GPU, groups of
//     2 x --cuda-streams images go through ExtractBatch instead, each group's images with
//     too few features extracted again at lower thresholds (ExtractAgainWhileFewFeatures)
//     before the next group;
//   - writing: a thread writes each image's files as soon as it and the images before it
//     are done (input order).
// The per-image time printed is its decoding time plus the time from handing it to the
// extractor to its result; images extracted together overlap (a CPU group of 4, or
// cuda_streams images on the GPU), so these times add up to more than the wall time.
#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <cstdio>
#include <cstring>
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
#include "cli/output_dir.h"
#include "cli/progress.h"
#include "features/resize.h"
#include "features/sift.h"
#include "sfm/reconstruction_pipeline.h"
#include "io/base/atomic_file.h"
#include "io/base/device.h"
#include "io/base/input_file.h"
#include "io/base/timer.h"
#include "io/features.h"
#include "io/image.h"
#include "io/mask.h"

namespace tiepoint::cli {
namespace {

namespace fs = std::filesystem;

// Images decoded together (on parallel threads) before the CPU extractor takes them one
// after another: decoding a JPEG is single-threaded, extraction is not.
constexpr int kCpuGroupSize = 4;

struct ExtractArgs {
  std::vector<std::string> images;
  std::vector<std::string> image_names;  // one per image (io/image.h ExpandImageArguments): "sub/x.png" from a folder
  std::string detector = "sift";
  std::string device = "cpu";
  int max_features = 0;
  int max_image_size = 0;
  bool upsample = false;
  bool root_sift = false;
  double contrast_threshold = SiftOptions().contrast_threshold;
  // Images of little contrast, as reconstruct's first attempt extracts them (its
  // --min-features 500 and --min-contrast-threshold 0.01; its fallback up to 2000 features
  // down to 0.0025 unless --no-second-attempt). Off here by default, as --upsample.
  int min_features = 0;
  double min_contrast_threshold = SiftOptions().min_contrast_threshold;
  bool no_second_attempt = false;
  std::string mask_path;  // io/mask.h: DIR/<image name>.png, COLMAP's mask_path
  std::string camera_mask;  // one mask for every image, COLMAP's camera_mask_path
  double edge_threshold = SiftOptions().edge_threshold;
  int threads = 0;
  // 12, not the library's 8: through this command (decoding on every core beside the
  // streams' threads) 12 measured best on a 16-core H200 host, 4,400 1080p JPEGs in
  // 4.0-4.5 s against 4.6-4.8 s with 8 and 4.5-4.8 s with 16
  // (bench/results/extract-throughput-h200-20261126.json).
  int cuda_streams = 12;
  std::string output_dir;
  bool txt = false;
  bool quiet = false;
  FastExtractArgs fast;  // --detector fast (cli/extract_fast.h)
};

int RunExtract(const ExtractArgs& a) {
  const char* cmd = "extract";
  if (a.detector == "fast") {
    if (a.max_image_size != 0)
      return ReportError(cmd, Status::InvalidOptions("--max-image-size applies to --detector sift; FAST keeps the "
                                                     "full image (see --levels)"));
    if (a.min_features != 0)
      return ReportError(cmd, Status::InvalidOptions("--min-features applies to --detector sift"));
    if (!a.mask_path.empty() || !a.camera_mask.empty())
      return ReportError(cmd, Status::InvalidOptions(std::string(a.mask_path.empty() ? "--camera-mask" : "--mask-path") +
                                                     " applies to --detector sift"));
    return RunExtractFast(a.images, a.image_names, a.output_dir, a.device, a.threads, a.quiet, a.fast);
  }
  if (a.detector != "sift") {
    return ReportError(cmd, Status::InvalidOptions("--detector '" + a.detector +
                                                   "': expected sift or fast"));
  }
  Device device = Device::kCpu;
  Status s = DeviceFromString(a.device, &device);
  if (!s.ok()) return ReportError(cmd, Status::InvalidOptions("--" + s.message()));
  if (!(s = CheckMaxImageSize(a.max_image_size)).ok()) return ReportError(cmd, s);

  SiftOptions options;
  options.max_features = a.max_features;
  options.upsample = a.upsample;
  options.root_sift = a.root_sift;
  options.contrast_threshold = a.contrast_threshold;
  options.edge_threshold = a.edge_threshold;
  options.num_threads = a.threads;
  options.cuda_streams = a.cuda_streams;
  // --min-features: the CPU extractor lowers the threshold in its one pass; the CUDA one
  // holds one threshold, and its images with too few features are extracted again
  // (ExtractAgainWhileFewFeatures, a group of images at a time, below).
  SiftOptions rule = options;
  if (a.min_features > 0) {
    if (!(a.min_contrast_threshold <= a.contrast_threshold)) {
      char message[128];
      std::snprintf(message, sizeof(message), "--min-contrast-threshold %g: above --contrast-threshold %g",
                    a.min_contrast_threshold, a.contrast_threshold);
      return ReportError(cmd, Status::InvalidOptions(message));
    }
    rule.min_features = a.min_features;
    rule.min_contrast_threshold = a.min_contrast_threshold;
    // reconstruct's first attempt: the second attempt's features at once for an image
    // that reaches min_features only at the lowest threshold, or not at all.
    const ReconstructionPipelineOptions second;  // its bounds: retry_min_features, retry_min_contrast_threshold
    if (!a.no_second_attempt && second.retry_min_features > a.min_features &&
        second.retry_min_contrast_threshold < a.min_contrast_threshold && a.min_contrast_threshold < a.contrast_threshold) {
      rule.fallback_min_features = second.retry_min_features;
      rule.fallback_min_contrast_threshold = second.retry_min_contrast_threshold;
    }
    if (device == Device::kCpu) options = rule;
  }
  const bool extract_again = device != Device::kCpu && rule.min_features > 0;
  FeatureMask camera_mask;  // --camera-mask, read before anything is written
  if (!a.camera_mask.empty() && !(s = ReadFeatureMask(a.camera_mask, &camera_mask)).ok()) return ReportError(cmd, s);
  if (!a.mask_path.empty() && !(s = CheckFeatureMaskFolder(a.mask_path)).ok()) return ReportError(cmd, s);
  OutputDirectory out_dir;
  if (!(s = out_dir.Create(a.output_dir)).ok()) return ReportError(cmd, s);

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
    GrayImage image;  // shrunk to fit --max-image-size
    int width = 0, height = 0;  // the image's own size
    FeatureMask mask;           // --mask-path: at the image's own size; empty: none
    bool without_mask = false;  // --mask-path has no file for it
    size_t masked = 0;          // features dropped by the mask
    Status status;
    double read_s = 0, extract_s = 0;
    Features features;
  };
  // Every image's job up front; an output name taken by an earlier image is a failure now.
  std::vector<Job> jobs;
  jobs.reserve(num_images);
  SeenFiles seen_files;
  for (int i = 0; i < num_images; ++i) {
    Job job;
    job.path = a.images[i];
    job.name = a.image_names[i];
    job.out = (fs::path(a.output_dir) / FeaturesFileName(job.name)).string();
    if (const Status same = seen_files.AddOnce(job.path, "image file"); !same.ok()) {
      fail(job.path, same.message(), false);  // the message names the path
      continue;
    }
    const auto [it, fresh] = written_by.emplace(job.out, job.path);
    if (!fresh) {
      fail(job.path, "its output " + job.out + " would overwrite the features of " + it->second +
                         " (the same name)", true);
      continue;
    }
    jobs.push_back(std::move(job));
  }
  const int num_jobs = static_cast<int>(jobs.size());

  // Decoding pool: job i is decoded once i < taken + window (taken: jobs handed to the
  // extractor so far).
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int pool = std::max(1, std::min(num_jobs, device == Device::kCuda
                                                      ? (a.threads > 0 ? a.threads : hw)
                                                      : kCpuGroupSize));
  const int window = group_size;  // one group decoded ahead (a 1920x1080 image is 8 MB of floats)
  std::mutex decode_mutex;
  std::condition_variable decode_cv;
  std::vector<char> decoded(num_jobs, 0);
  int next_decode = 0, taken = 0;
  bool stop_decoding = false;
  std::vector<std::thread> decoders;
  for (int t = 0; t < pool; ++t) {
    decoders.emplace_back([&] {
      for (;;) {
        int i;
        {
          std::unique_lock<std::mutex> lock(decode_mutex);
          decode_cv.wait(lock, [&] {
            return stop_decoding || next_decode >= num_jobs || next_decode < taken + window;
          });
          if (stop_decoding || next_decode >= num_jobs) return;
          i = next_decode++;
        }
        Job& job = jobs[i];
        const Timer timer;
        job.status = ReadImageGray(job.path, &job.image);
        job.width = job.image.width;
        job.height = job.image.height;
        if (job.status.ok() && !a.mask_path.empty()) {
          bool found = false;
          job.status = FindFeatureMask(a.mask_path, job.name, job.width, job.height, &job.mask, &found);
          job.without_mask = !found;
        }
        if (job.status.ok() && !camera_mask.empty())
          job.status = FeatureMaskFits(camera_mask, a.camera_mask, job.width, job.height, job.path);
        if (job.status.ok()) job.status = ShrinkToFit(a.max_image_size, 1, &job.image);
        job.read_s = timer.Seconds();
        {
          std::lock_guard<std::mutex> lock(decode_mutex);
          decoded[i] = 1;
        }
        decode_cv.notify_all();
      }
    });
  }
  auto stop_decoders = [&] {
    {
      std::lock_guard<std::mutex> lock(decode_mutex);
      stop_decoding = true;
    }
    decode_cv.notify_all();
    for (std::thread& t : decoders) t.join();
    decoders.clear();
  };

  // The extractor (with --device cuda, the CUDA context and its warm-up) while the first
  // images decode.
  std::unique_ptr<FeatureExtractor> extractor;
  if (!(s = FeatureExtractor::Create(options, device, &extractor)).ok()) {
    stop_decoders();
    return ReportError(cmd, s);
  }

  // Writer: each job as soon as it and every job before it are finished (input order).
  std::mutex write_mutex;
  std::condition_variable write_cv;
  std::vector<char> finished(num_jobs, 0);
  ProgressLine progress(show);
  std::thread writer([&] {
    for (int j = 0; j < num_jobs; ++j) {
      {
        std::unique_lock<std::mutex> lock(write_mutex);
        write_cv.wait(lock, [&] { return finished[j] != 0; });
      }
      Job& job = jobs[j];
      Status st = job.status;
      // An image of a folder's subfolder: its features in the same subfolder of the output.
      if (st.ok() && job.name.find('/') != std::string::npos)
        st = out_dir.Create(fs::path(job.out).parent_path().string());
      if (st.ok()) st = WriteFeatures(job.out, job.features);
      if (st.ok() && a.txt) {
        st = WriteFeaturesText((fs::path(a.output_dir) / (job.name + ".txt")).string(), job.features);
        if (!st.ok()) RemoveFileQuietly(job.out);  // all outputs of an image or none
      }
      if (!st.ok()) {
        // Out of GPU memory or a lost device is exit code 3, as for every command.
        if (st.ExitCode() == 3) exit_code = 3;
        fail(job.path, st.ToString(), false);
        job.features = Features();
        continue;
      }
      total_features += static_cast<long long>(job.features.size());
      const std::string shrunk = job.image.width == job.width && job.image.height == job.height
                                     ? ""
                                     : " (SIFT at " + std::to_string(job.image.width) + " x " +
                                           std::to_string(job.image.height) + ")";
      char lowered[96] = "";
      if (job.features.contrast_threshold < a.contrast_threshold * (1 - 1e-9))
        std::snprintf(lowered, sizeof(lowered), " at contrast threshold %g", job.features.contrast_threshold);
      if (job.masked > 0) {
        const size_t used = std::strlen(lowered);
        std::snprintf(lowered + used, sizeof(lowered) - used, ", %zu masked", job.masked);
      }
      std::printf("%s: %d x %d%s, %zu features%s, %.3f s (read %.3f s, extract %.3f s) -> %s\n",
                  job.path.c_str(), job.width, job.height, shrunk.c_str(), job.features.size(), lowered,
                  job.read_s + job.extract_s, job.read_s, job.extract_s, job.out.c_str());
      job.features = Features();
      if (j + 1 == num_jobs || (j + 1) % 8 == 0) {
        std::fflush(stdout);
        progress.Update("[" + std::to_string(j + 1) + "/" + std::to_string(num_jobs) + "] " + job.path);
      }
    }
  });
  auto finish = [&](int i) {
    {
      std::lock_guard<std::mutex> lock(write_mutex);
      finished[i] = 1;
    }
    write_cv.notify_one();
  };

  // Extraction: the extractor takes each image as soon as it is decoded (a job that
  // failed to decode goes straight to the writer, which reports it).
  std::vector<Timer> started(num_jobs);
  auto next = [&](int i) -> const GrayImage* {
    {
      std::unique_lock<std::mutex> lock(decode_mutex);
      decode_cv.wait(lock, [&] { return decoded[i] != 0; });
      taken = std::max(taken, i + 1);
    }
    decode_cv.notify_all();
    if (!jobs[i].status.ok()) {
      finish(i);
      return nullptr;
    }
    started[i].Reset();
    return &jobs[i].image;
  };
  auto done = [&](int i, Features&& features, Status&& status) {
    Job& job = jobs[i];
    job.extract_s = started[i].Seconds();
    job.status = std::move(status);
    job.features = std::move(features);
    KeypointsToFullImage(static_cast<double>(job.width) / job.image.width,
                         static_cast<double>(job.height) / job.image.height, &job.features);
    job.masked = ApplyFeatureMask(job.mask, &job.features) + ApplyFeatureMask(camera_mask, &job.features);
    // The pixels are not needed any more (the writer prints only the size).
    std::vector<float>().swap(job.image.pixels);
    job.mask = FeatureMask();
    finish(i);
  };
  if (!extract_again) {
    extractor->ExtractStream(num_jobs, group_size, next, done);
  } else {
    // --min-features with --device cuda: a group of images at a time, those of the group
    // with too few features extracted again at lower thresholds before the next group (so
    // only a group's images are held, however many of them are dark).
    for (int begin = 0; begin < num_jobs; begin += group_size) {
      std::vector<int> index;
      std::vector<const GrayImage*> batch;
      for (int i = begin; i < std::min(num_jobs, begin + group_size); ++i)
        if (const GrayImage* image = next(i)) {
          index.push_back(i);
          batch.push_back(image);
        }
      if (batch.empty()) continue;
      std::vector<Features> features;
      std::vector<Status> statuses;
      extractor->ExtractBatch(batch, &features, &statuses);
      std::vector<size_t> ok;
      std::vector<const GrayImage*> ok_images;
      std::vector<Features> ok_features;
      for (size_t k = 0; k < batch.size(); ++k)
        if (statuses[k].ok()) {
          ok.push_back(k);
          ok_images.push_back(batch[k]);
          ok_features.push_back(std::move(features[k]));
        }
      std::vector<Status> again_statuses;
      const Status again =
          ExtractAgainWhileFewFeatures(extractor.get(), rule, ok_images, &ok_features, nullptr, &again_statuses);
      for (size_t j = 0; j < ok.size(); ++j) {
        features[ok[j]] = std::move(ok_features[j]);
        // An image whose extraction at a lower threshold failed (out of GPU memory: exit 3)
        // fails: its features would not be those asked for.
        if (!again.ok()) statuses[ok[j]] = again;
        else if (!again_statuses[j].ok()) statuses[ok[j]] = std::move(again_statuses[j]);
      }
      for (size_t k = 0; k < batch.size(); ++k) done(index[k], std::move(features[k]), std::move(statuses[k]));
    }
  }
  stop_decoders();
  writer.join();
  progress.Done();
  const int ok = num_images - static_cast<int>(failed.size());
  if (!a.mask_path.empty()) {
    int without = 0;
    const Job* first = nullptr;
    for (const Job& job : jobs)
      if (job.without_mask) {
        ++without;
        if (!first) first = &job;
      }
    if (first)
      std::fprintf(stderr, "tiepoint %s: %s\n", cmd,
                   ImagesWithoutMaskNote(without, num_jobs, a.mask_path, first->name).c_str());
  }
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
  out_dir.Keep();
  return 0;
}

}  // namespace

Runner RegisterExtract(CLI::App& app) {
  auto a = std::make_shared<ExtractArgs>();
  app.add_option("images", a->images, "Images: PNG, JPEG, TIFF, PGM or PPM (8 or 16 bit); a folder: the image files in it and its subfolders, in name order")
      ->required();
  app.add_option("--detector", a->detector, "sift | fast (corners only, no descriptors)")
      ->capture_default_str();
  AddFastExtractOptions(app, &a->fast);
  app.add_option("--device", a->device, "cpu | cuda")->capture_default_str();
  app.add_option("--max-features", a->max_features,
                 "Keep the N strongest features per image (0 = all)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--max-image-size", a->max_image_size,
                 "SIFT on images shrunk to fit this many pixels a side, features in the full image's pixels "
                 "(0 = full size; reconstruct's default, as COLMAP's, is 3200)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_flag("--upsample", a->upsample, "First octave from the image upsampled 2x");
  app.add_flag("--root-sift", a->root_sift, "Root-SIFT descriptors (L1 normalise, sqrt)");
  app.add_option("--contrast-threshold", a->contrast_threshold,
                 "SIFT: drop DoG extrema with |D| < T / 3 (images in [0, 1]); lower keeps more "
                 "features on dark or untextured objects")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--min-features", a->min_features,
                 "An image with fewer SIFT features is extracted again at half the contrast threshold, down to "
                 "--min-contrast-threshold (0 = never; reconstruct's default is 500: with --upsample, "
                 "--max-image-size 3200 and --max-features 8192 this gives reconstruct's features)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--min-contrast-threshold", a->min_contrast_threshold,
                 "Lowest SIFT contrast threshold for --min-features (images in [0, 1]); an image that reaches "
                 "--min-features only there, or not at all, gets up to 2000 features down to 0.0025, as in "
                 "reconstruct's first attempt (see --no-second-attempt)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_flag("--no-second-attempt", a->no_second_attempt,
               "With --min-features: no more features (up to 2000, down to 0.0025) for the images of least "
               "contrast, as reconstruct --no-second-attempt");
  AddMaskOptions(app, &a->mask_path, &a->camera_mask);
  app.add_option("--edge-threshold", a->edge_threshold,
                 "SIFT: drop extrema whose principal curvature ratio is >= R")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--threads", a->threads, "Worker threads (0 = all hardware threads)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--cuda-streams", a->cuda_streams,
                 "With --device cuda: images in flight at once (1..64)")
      ->capture_default_str();
  app.add_option("-o,--output", a->output_dir,
                 "Output directory (created if missing): <image file name>.tpfeat per image (an image in a "
                 "folder's subfolder SUB: SUB/<image file name>.tpfeat)")
      ->required();
  app.add_flag("--txt", a->txt,
               "Also write <image file name>.txt (x y scale orientation d0..d127)");
  app.add_flag("--quiet", a->quiet, "No progress on the terminal");
  return [a] {  // a folder among the images stands for the images in it
    if (Status s = ExpandImageArguments(a->images, &a->images, &a->image_names); !s.ok())
      return ReportError("extract", s);
    return RunExtract(*a);
  };
}

}  // namespace tiepoint::cli
