// `tiepoint reconstruct`: photos in, a COLMAP sparse model out (sfm/reconstruction_pipeline.h).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <system_error>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/output_dir.h"
#include "cli/progress.h"
#include "io/base/folder_listing.h"
#include "io/features.h"
#include "io/image.h"
#include "sfm/reconstruction_pipeline.h"

namespace tiepoint::cli {
namespace {

// The output directory made (with its parents) before the work, or an error naming the cause:
// a path that is a file, a symbolic link to nothing (mkdir -p refuses it too), a parent that
// cannot be written. `made` takes back what it made if the run fails.
Status PrepareOutputDirectory(const std::string& dir, OutputDirectory* made) {
  struct stat st;
  if (::lstat(dir.c_str(), &st) == 0 && S_ISLNK(st.st_mode) && ::stat(dir.c_str(), &st) != 0) {
    char target[4096];
    const ssize_t n = ::readlink(dir.c_str(), target, sizeof(target) - 1);
    return Status::IoError(dir + ": a symbolic link to '" +
                           std::string(target, n > 0 ? static_cast<size_t>(n) : 0) +
                           "', which does not exist (create that directory, or name another -o)");
  }
  if (::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    return Status::IoError(dir + ": exists and is not a directory");
  }
  TIEPOINT_RETURN_IF_ERROR(made->Create(dir));
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return Status::IoError(dir + ": the output directory is not writable (" + std::strerror(errno) + ")");
  }
  return Status::Ok();
}

struct ReconstructArgs {
  std::vector<std::string> images;
  std::vector<std::string> image_names;  // as the model names them (io/image.h ExpandImageArguments)
  std::string output;
  std::string device = "cpu";
  std::string camera_model = "simple_radial";
  bool single_camera = false;
  bool single_camera_per_folder = false;
  std::string intrinsics;
  std::string pairs = "exhaustive";
  std::string tracks;
  std::string features_dir;
  std::string matches_dir;
  std::string images_dir;
  std::string mask_path;
  std::string camera_mask;
  std::string camera_params;  // "f,cx,cy,k": parsed into ReconstructionPipelineOptions::camera_params
  std::string format = "both";
  int threads = 0;
  std::string ba_solver = "auto";
  int max_features = 8192;
  int max_image_size = 3200;
  std::string quality;  // "" or low | medium | high | extreme
  bool max_features_given = false, max_image_size_given = false;
  bool no_upsample = false;
  int min_features = 500;
  double min_contrast_threshold = 0.01;
  bool no_second_attempt = false;
  double max_tri_angle = 120.0;
  std::string guided_matching = "off";
  int cuda_streams = 8;
  uint64_t seed = 0;
  bool quiet = false;
};

// With --features: the folders must be folders, and without IMAGES the images are those
// of the features files (NAME.tpfeat) in --features DIR and its subfolders (as `extract
// PHOTOS/` writes them), found at the same relative paths NAME in --image-path DIR.
Status StoredCorrespondenceImages(const ReconstructArgs& a, std::vector<std::string>* images,
                                  std::vector<std::string>* names) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& [flag, dir] : {std::pair<const char*, const std::string*>{"--features", &a.features_dir},
                                  {"--matches", &a.matches_dir}, {"--image-path", &a.images_dir}})
    if (!dir->empty() && !fs::is_directory(*dir, ec))
      return Status::InvalidInput(std::string(flag) + " " + *dir +
                                  (fs::exists(*dir, ec) ? ": not a directory" : ": no such directory"));
  if (a.features_dir.empty() || !a.images.empty()) {
    if (!a.images_dir.empty())
      return Status::InvalidOptions("--image-path DIR names the images of --features when no IMAGES are given; "
                                    "give one or the other");
    if (a.images.empty()) return Status::InvalidOptions("no images given (IMAGES..., or --features DIR --image-path DIR)");
    return Status::Ok();
  }
  if (a.images_dir.empty())
    return Status::InvalidOptions("--features without IMAGES: name the images, or the folder that holds them with "
                                  "--image-path DIR (their sizes make the cameras, their pixels the points' colours)");
  // As a folder of images is listed (io/base/folder_listing.h): the same names, the same order.
  const Status listed = ListFolder(a.features_dir, IsFeaturesFileName, names);
  if (!listed.ok()) return Status::IoError("--features " + a.features_dir + ": " + listed.message());
  if (names->empty()) return Status::InvalidInput("--features " + a.features_dir + ": no .tpfeat files (tiepoint extract writes them)");
  for (std::string& n : *names) n = FeaturesFileStem(n);  // "cam0/a.png.tpfeat" -> "cam0/a.png"
  images->clear();
  for (const std::string& n : *names) {
    images->push_back((fs::path(a.images_dir) / n).string());
    if (!fs::exists(images->back(), ec))
      return Status::InvalidInput("--image-path " + a.images_dir + ": no image '" + n + "' for " +
                                  (fs::path(a.features_dir) / FeaturesFileName(n)).string());
  }
  return Status::Ok();
}

int RunReconstruct(const ReconstructArgs& a) {
  const char* cmd = "reconstruct";
  ReconstructionPipelineOptions o;
  Status s = DeviceFromString(a.device, &o.device);
  if (!s.ok()) return ReportError(cmd, Status::InvalidOptions("--" + s.message()));
  if (!(s = CameraModelFromName(a.camera_model, &o.camera_model)).ok())
    return ReportError(cmd, Status::InvalidOptions("--camera-model: " + s.message()));
  o.image_paths = a.images;
  o.image_names = a.image_names;
  if (!(s = StoredCorrespondenceImages(a, &o.image_paths, &o.image_names)).ok()) return ReportError(cmd, s);
  o.features_dir = a.features_dir;
  o.mask_path = a.mask_path;
  o.camera_mask = a.camera_mask;
  if (!a.camera_params.empty()) {
    // COLMAP's form: the values separated by commas or semicolons (spaces around them allowed).
    std::string text = a.camera_params;
    for (char& ch : text)
      if (ch == ',' || ch == ';') ch = ' ';
    std::istringstream in(text);
    std::string token;
    while (in >> token) {
      char* end = nullptr;
      const double v = std::strtod(token.c_str(), &end);
      if (end == token.c_str() || *end != '\0')
        return ReportError(cmd, Status::InvalidOptions("--camera-params '" + a.camera_params + "': '" + token +
                                                       "' is not a number (give " +
                                                       CameraModelParamNames(o.camera_model) + ")"));
      o.camera_params.push_back(v);
    }
    if (o.camera_params.empty())
      return ReportError(cmd, Status::InvalidOptions("--camera-params '" + a.camera_params + "': no values (give " +
                                                     CameraModelParamNames(o.camera_model) + ")"));
  }
  o.matches_dir = a.matches_dir;
  o.output_dir = a.output;
  o.single_camera = a.single_camera;
  o.single_camera_per_folder = a.single_camera_per_folder;
  o.intrinsics_file = a.intrinsics;
  o.tracks_file = a.tracks;
  o.num_threads = a.threads;
  if (a.ba_solver == "auto") {  // dense, CHOLMOD from 150 variable images on
    o.mapper.ba_linear_solver = ReconstructionLinearSolver::kDenseSchur;
    o.mapper.ba_sparse_from_images = kAutoSparseFromImages;
  } else if (!(s = ReconstructionLinearSolverFromName(a.ba_solver, &o.mapper.ba_linear_solver)).ok()) {
    return ReportError(cmd, Status::InvalidOptions("--ba-solver: " + s.message() + " (or auto)"));
  }
  o.sift.max_features = a.max_features;
  o.max_image_size = a.max_image_size;
  if (!a.quality.empty()) {
    // COLMAP automatic_reconstructor's presets of SiftExtraction.max_image_size and
    // max_num_features (its mapper and matcher presets have no counterpart here).
    struct Preset { const char* name; int max_image_size, max_features; };
    constexpr Preset kPresets[] = {{"low", 1000, 2048}, {"medium", 1600, 4096}, {"high", 2400, 8192},
                                   {"extreme", 3200, 8192}};
    const Preset* preset = nullptr;
    for (const Preset& p : kPresets)
      if (a.quality == p.name) preset = &p;
    if (!preset)
      return ReportError(cmd, Status::InvalidOptions("--quality '" + a.quality + "': expected low, medium, high or extreme"));
    if (!a.max_image_size_given) o.max_image_size = preset->max_image_size;
    if (!a.max_features_given) o.sift.max_features = preset->max_features;
  }
  o.sift.upsample = !a.no_upsample;
  o.min_features_per_image = a.min_features;
  o.min_contrast_threshold = a.min_contrast_threshold;
  if (a.no_second_attempt) o.retry_min_features = 0;
  o.mapper.max_tri_angle_deg = a.max_tri_angle;
  if (a.guided_matching == "off") {
    o.guided_matching = GuidedMatching::kOff;
  } else if (a.guided_matching == "retry") {
    o.guided_matching = GuidedMatching::kRetry;
  } else if (a.guided_matching == "on") {
    o.guided_matching = GuidedMatching::kOn;
  } else {
    return ReportError(cmd, Status::InvalidOptions("--guided-matching '" + a.guided_matching +
                                                   "': expected off, retry or on"));
  }
  o.sift.cuda_streams = a.cuda_streams;
  if (o.device == Device::kCuda) RequestCudaQueues(a.cuda_streams);
  o.seed = a.seed;
  if (a.pairs == "exhaustive") {
    o.pairs = PairSelection::kExhaustive;
  } else if (a.pairs.rfind("sequential:", 0) == 0) {
    o.pairs = PairSelection::kSequential;
    try {
      size_t used = 0;
      o.sequential_overlap = std::stoi(a.pairs.substr(11), &used);
      if (used != a.pairs.size() - 11) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      return ReportError(cmd, Status::InvalidOptions("--pairs " + a.pairs + ": expected sequential:K with K an integer"));
    }
  } else {
    o.pairs = PairSelection::kFile;
    o.pairs_file = a.pairs;
  }
  if (!a.tracks.empty() && o.pairs == PairSelection::kExhaustive) {
    // With tracks every pair of frames sharing a track is a candidate; sequential:K limits it.
  }
  if (a.format == "both") {
    o.write_text = o.write_binary = true;
  } else if (a.format == "text") {
    o.write_text = true;
    o.write_binary = false;
  } else if (a.format == "binary") {
    o.write_text = false;
    o.write_binary = true;
  } else {
    return ReportError(cmd, Status::InvalidOptions("--format " + a.format + ": expected text, binary or both"));
  }
  o.show_progress = !a.quiet && StderrIsTerminal();
  if (!(s = o.Check()).ok()) return ReportError(cmd, s);
  OutputDirectory out_dir;
  if (!(s = PrepareOutputDirectory(a.output, &out_dir)).ok()) return ReportError(cmd, s);
  ReconstructionPipelineResult result;
  s = RunReconstructionPipeline(o, &result);
  if (!s.ok()) return ReportError(cmd, s);
  out_dir.Keep();
  const auto& models = result.report["models"];
  std::printf("%zu model(s) in %s/sparse (%.2f s)\n", models.size(), a.output.c_str(),
              result.report.value("total_seconds", 0.0));
  for (const auto& m : models)
    std::printf("  sparse/%d: %d of %d images, %d points, %lld observations, mean track length %.2f, "
                "mean reprojection error %.3f px\n",
                m["index"].get<int>(), m["registered_images"].get<int>(),
                result.report["images"].get<int>(), m["points"].get<int>(),
                m["observations"].get<long long>(), m["mean_track_length"].get<double>(),
                m["mean_reprojection_error_px"].get<double>());
  for (const auto& u : result.report["unregistered_images"])
    std::printf("  not registered: %s (%s)\n", u["image"].get<std::string>().c_str(),
                u["reason"].get<std::string>().c_str());
  return 0;
}

}  // namespace

Runner RegisterReconstruct(CLI::App& app) {
  auto a = std::make_shared<ReconstructArgs>();
  app.add_option("images", a->images, "Images (PNG, JPEG, TIFF, PGM/PPM), or a folder of them (the image files in it and its subfolders, in name order, named by their paths relative to it); with --features, "
                 "optional (see --image-path)");
  app.add_option("-o,--output", a->output, "Output folder: sparse/N/, points.ply, report.json, overview.svg")
      ->required();
  app.add_option("--device", a->device, "cpu | cuda (feature extraction and matching)")->capture_default_str();
  app.add_option("--camera-model", a->camera_model,
                 "simple_pinhole | pinhole | simple_radial | radial | opencv | opencv_fisheye | full_opencv | fov | "
                 "simple_radial_fisheye | radial_fisheye | thin_prism_fisheye")
      ->capture_default_str();
  app.add_flag("--single-camera", a->single_camera, "One camera (shared intrinsics) for all images of one size");
  app.add_flag("--single-camera-per-folder", a->single_camera_per_folder,
               "One camera for the images of one size in each folder (a rig's cam0/, cam1/ in the folder given)");
  app.add_option("--camera-params", a->camera_params,
                 "Every camera's initial intrinsics, refined (COLMAP's camera_params): the --camera-model's "
                 "parameters, comma-separated, in COLMAP's order and pixels (simple_radial: f,cx,cy,k)");
  app.add_option("--intrinsics", a->intrinsics,
                 "Known intrinsics, held fixed: lines 'NAME fx fy cx cy' or a Middlebury *_par.txt");
  app.add_option("--pairs", a->pairs, "exhaustive | sequential:K | a file of 'NAME1 NAME2' lines")
      ->capture_default_str();
  auto* tracks_opt = app.add_option("--tracks", a->tracks,
                 "Correspondences from `tiepoint track` (lines 'track_id frame x y'; frame = index of the image)");
  auto* features_opt = app.add_option(
      "--features", a->features_dir,
      "Features of `tiepoint extract` (DIR/<image name>.tpfeat) in place of extraction (--max-features, "
      "--max-image-size, --no-upsample, --min-features, --min-contrast-threshold, --cuda-streams and the second attempt then do not "
      "apply)");
  features_opt->excludes(tracks_opt);
  app.add_option("--matches", a->matches_dir,
                 "Matches of `tiepoint match` (DIR/<name1>--<name2>.tpmatch, an image of a subfolder named by its path with / "
                 "as %2F, or by its file name where unique) in place of matching: with --features; "
                 "where it verified, its inliers (verified again; pairs it rejected are dropped)")
      ->needs(features_opt);
  AddMaskOptions(app, &a->mask_path, &a->camera_mask);
  app.add_option("--image-path", a->images_dir,
                 "With --features and no IMAGES: the folder holding the images, one per features file (NAME for "
                 "NAME.tpfeat), taken in name order")
      ->needs(features_opt);
  app.add_option("--format", a->format, "COLMAP model format: text | binary | both")->capture_default_str();
  app.add_option("--threads", a->threads, "CPU threads (0 = all hardware threads)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--ba-solver", a->ba_solver,
                 "Bundle adjustment linear solver: auto (dense, CHOLMOD for bundles of 150+ images) | "
                 "dense | sparse (CHOLMOD) | iterative (PCG) | iterative-cuda (PCG on the GPU)")
      ->capture_default_str();
  auto* max_features_opt =
      app.add_option("--max-features", a->max_features, "Most SIFT features per image")->capture_default_str();
  auto* max_image_size_opt = app.add_option("--max-image-size", a->max_image_size,
                 "SIFT runs on images shrunk to fit this many pixels a side (as COLMAP's max_image_size); "
                 "features and cameras stay in the full image's pixels (0 = never shrink; not with --tracks or --features)")
      ->capture_default_str();
  app.add_option("--quality", a->quality,
                 "low | medium | high | extreme: COLMAP automatic_reconstructor's --max-image-size and "
                 "--max-features (1000 and 2048, 1600 and 4096, 2400 and 8192, 3200 and 8192); either option given "
                 "wins over it");
  app.add_flag("--no-upsample", a->no_upsample, "SIFT without the upsampled first octave (faster, fewer features)");
  app.add_option("--min-features", a->min_features,
                 "An image with fewer SIFT features is extracted again at half the contrast threshold, "
                 "down to --min-contrast-threshold (0 = never)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--min-contrast-threshold", a->min_contrast_threshold,
                 "Lowest SIFT contrast threshold for --min-features (images in [0, 1]); an image that reaches "
                 "--min-features only there, or not at all, gets up to 2000 features down to 0.0025 "
                 "(see --no-second-attempt)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--no-second-attempt", a->no_second_attempt,
               "Neither give the images of least contrast up to 2000 features (contrast threshold down to "
               "0.0025) nor, when images of little contrast leave the model incomplete, extract every image "
               "so again and map again");
  app.add_option("--guided-matching", a->guided_matching,
                 "Match each verified pair again among the feature pairs its epipolar geometry allows: "
                 "off | retry (in the second attempt, or when every image got the second attempt's features) | on; "
                 "adds chance matches too")
      ->capture_default_str();
  app.add_option("--max-tri-angle", a->max_tri_angle,
                 "Largest angle (degrees) between two views' rays to a point (180: no limit); wider ones "
                 "come from false matches between opposite views")
      ->capture_default_str();
  app.add_option("--cuda-streams", a->cuda_streams, "With --device cuda: images in flight")->capture_default_str();
  app.add_option("--seed", a->seed, "Seed of the RANSAC samplers")->capture_default_str();
  app.add_flag("-q,--quiet", a->quiet, "No progress lines");
  return [a, max_features_opt, max_image_size_opt] {  // a folder among the images stands for the images in it
    a->max_features_given = max_features_opt->count() > 0;
    a->max_image_size_given = max_image_size_opt->count() > 0;
    if (Status s = ExpandImageArguments(a->images, &a->images, &a->image_names); !s.ok())
      return ReportError("reconstruct", s);
    return RunReconstruct(*a);
  };
}

}  // namespace tiepoint::cli
