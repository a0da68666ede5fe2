#include "sfm/reconstruction_pipeline.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <unistd.h>

#include "features/resize.h"
#include "io/base/atomic_file.h"
#include "io/base/input_file.h"
#include "io/colmap_model.h"
#include "io/exif.h"
#include "io/image.h"
#include "io/mask.h"
#include "io/matches.h"
#include "io/pairs_file.h"
#include "io/reconstruction_export.h"
#include "io/report.h"
#include "io/track_file.h"
#include "sfm/stored_correspondences.h"
#include "sfm/tracks.h"
#include "solver/geometry/two_view_geometry.h"
#include "solver/reconstruction_ba_cuda.h"

namespace tiepoint {
namespace {

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

// Whether intrinsics given by the user (--intrinsics, --camera-params) make a pinhole camera
// of a width x height image: a field of view between 0.057 degrees (f = 1000 x size) and 177
// degrees (f = 0.01 x size), and a principal point within 10 times max(size, f) of the
// centre (a crop of a larger frame, even a small corner tile, has its principal point
// within its focal length's reach). (dx, dy): the principal point's offset from the
// image's centre, in whichever pixel convention the values come in.
bool FocalMakesCamera(double fx, double fy, int width, int height) {
  const double size = std::max(width, height);
  return fx <= 1000 * size && fy <= 1000 * size && fx >= 0.01 * size && fy >= 0.01 * size;
}
bool PrincipalPointMakesCamera(double dx, double dy, double fx, double fy, int width, int height) {
  const double reach = 10 * std::max(static_cast<double>(std::max(width, height)), std::max(fx, fy));
  return std::abs(dx) <= reach && std::abs(dy) <= reach;
}

namespace fs = std::filesystem;

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string BaseName(const std::string& path) { return fs::path(path).filename().string(); }

void Progress(const ReconstructionPipelineOptions& o, const std::string& line) {
  if (o.show_progress) std::fprintf(stderr, "%s\n", line.c_str());
}

// The 8-bit grey value at the pixel nearest (x, y) (tiepoint's pixel convention, clamped
// to the image): a point's colour.
uint8_t GrayAt(const GrayImage& g, double x, double y) {
  const int xi = std::clamp(static_cast<int>(std::lround(x)), 0, g.width - 1);
  const int yi = std::clamp(static_cast<int>(std::lround(y)), 0, g.height - 1);
  return static_cast<uint8_t>(std::clamp(g.at(xi, yi), 0.0f, 1.0f) * 255 + 0.5f);
}

// The image's colour at (x, y) in COLMAP's convention (the top-left pixel's centre at
// (0.5, 0.5)), bilinear between the four nearest pixel centres, clamped to the image;
// a grey image gives R = G = B. As COLMAP's Bitmap::InterpolateBilinear.
std::array<double, 3> ColourAt(const Image8& im, double x, double y) {
  const double u = std::clamp(x - 0.5, 0.0, im.width - 1.0);
  const double v = std::clamp(y - 0.5, 0.0, im.height - 1.0);
  const int x0 = std::min(static_cast<int>(u), im.width - 1), y0 = std::min(static_cast<int>(v), im.height - 1);
  const int x1 = std::min(x0 + 1, im.width - 1), y1 = std::min(y0 + 1, im.height - 1);
  const double ax = u - x0, ay = v - y0;
  std::array<double, 3> rgb{};
  for (int c = 0; c < 3; ++c) {
    const int ch = im.channels == 3 ? c : 0;
    auto at = [&](int xx, int yy) {
      return double(im.pixels[(static_cast<size_t>(yy) * im.width + xx) * im.channels + ch]);
    };
    rgb[c] = (1 - ay) * ((1 - ax) * at(x0, y0) + ax * at(x1, y0)) + ay * ((1 - ax) * at(x0, y1) + ax * at(x1, y1));
  }
  return rgb;
}

}  // namespace

Status ColourReconstructionPoints(const std::map<std::string, std::string>& paths, int num_threads,
                                  std::vector<Reconstruction>* models, ColourSummary* summary,
                                  const std::map<std::string, Image8>* decoded) {
  *summary = ColourSummary();
  // Each image once, whichever model holds it.
  std::map<std::string, std::vector<std::pair<size_t, uint32_t>>> holders;  // name -> (model, image_id)
  for (size_t m = 0; m < models->size(); ++m)
    for (const auto& [id, image] : (*models)[m].images) holders[image.name].push_back({m, id});
  std::vector<std::pair<std::string, std::vector<std::pair<size_t, uint32_t>>>> list(holders.begin(), holders.end());
  // Per image, the colour of each observation: (model, point3D_id, rgb). Summed below in
  // image order, so the result does not depend on the threads.
  struct Sample {
    size_t model;
    uint64_t point3D_id;
    std::array<double, 3> rgb;
  };
  std::vector<std::vector<Sample>> samples(list.size());
  std::vector<Status> status(list.size());
  int decoded_before = 0;
#pragma omp parallel for num_threads(std::max(1, num_threads)) schedule(dynamic) reduction(+ : decoded_before)
  for (size_t i = 0; i < list.size(); ++i) {
    const Image8* held = nullptr;
    if (decoded != nullptr) {
      const auto d = decoded->find(list[i].first);
      if (d != decoded->end() && !d->second.empty()) held = &d->second;
    }
    const auto it = paths.find(list[i].first);
    if (held == nullptr && it == paths.end()) {
      status[i] = Status::InvalidInput(list[i].first + ": no path for this image");
      continue;
    }
    Image8 read;  // one image per thread at a time
    if (held == nullptr) status[i] = ReadImage8(it->second, &read);
    else ++decoded_before;
    if (!status[i].ok()) continue;
    const Image8& im = held != nullptr ? *held : read;
    for (const auto& [m, id] : list[i].second)
      for (const Point2D& p : (*models)[m].images.at(id).points2D)
        if (p.point3D_id != kInvalidPoint3DId) samples[i].push_back({m, p.point3D_id, ColourAt(im, p.x, p.y)});
  }
  summary->images_decoded_before = decoded_before;
  std::vector<std::map<uint64_t, std::array<double, 4>>> sums(models->size());  // rgb, count
  for (size_t i = 0; i < list.size(); ++i) {
    if (!status[i].ok()) {
      summary->failures.push_back(status[i].message());
      continue;
    }
    ++summary->images_read;
    for (const Sample& s : samples[i]) {
      auto& acc = sums[s.model][s.point3D_id];
      for (int c = 0; c < 3; ++c) acc[c] += s.rgb[c];
      acc[3] += 1;
    }
  }
  for (size_t m = 0; m < models->size(); ++m)
    for (auto& [pid, point] : (*models)[m].points3D) {
      const auto it = sums[m].find(pid);
      if (it == sums[m].end()) continue;  // its images could not be read: the mapper's grey stays
      for (int c = 0; c < 3; ++c)
        point.rgb[c] = static_cast<uint8_t>(std::clamp(it->second[c] / it->second[3] + 0.5, 0.0, 255.0));
      ++summary->points_coloured;
    }
  return Status::Ok();
}

namespace {

// Pairs (i < j) of the usable images (indices into `usable`, which holds their indices
// among the images given) by the chosen selection. A pairs file names an image given by its
// name in the model (names[i]), its path as given, its file name or its file name's stem;
// its pairs with an image that could not be read are dropped, and counted in *dropped.
Status SelectPairs(const ReconstructionPipelineOptions& o, const std::vector<std::string>& names,
                   const std::vector<int>& usable, std::vector<std::pair<int, int>>* pairs, int* dropped) {
  const int n = static_cast<int>(usable.size());
  pairs->clear();
  *dropped = 0;
  if (o.pairs == PairSelection::kExhaustive) {
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j) pairs->push_back({i, j});
  } else if (o.pairs == PairSelection::kSequential) {
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n && j <= i + o.sequential_overlap; ++j) pairs->push_back({i, j});
  } else {
    std::vector<NamePair> named;
    TIEPOINT_RETURN_IF_ERROR(ReadPairsFile(o.pairs_file, &named));
    std::vector<std::vector<std::string>> names_of(names.size());
    for (size_t i = 0; i < names.size(); ++i)
      names_of[i] = {names[i], o.image_paths[i], BaseName(names[i]), std::filesystem::path(names[i]).stem().string()};
    std::vector<std::pair<int, int>> given;
    TIEPOINT_RETURN_IF_ERROR(ResolvePairs(o.pairs_file, named, names_of, "image", &given));
    std::vector<int> index(names.size(), -1);  // image given -> usable image
    for (int k = 0; k < n; ++k) index[usable[k]] = k;
    for (const auto& [a, b] : given) {
      if (index[a] < 0 || index[b] < 0) {
        ++*dropped;
      } else {
        pairs->push_back(std::minmax(index[a], index[b]));
      }
    }
  }
  return Status::Ok();
}

struct PairResult {
  std::vector<std::pair<uint32_t, uint32_t>> inliers;
  std::vector<std::pair<uint32_t, uint32_t>> f_inliers;  // of the fundamental matrix
  bool verified = false, has_pose = false;
  double R[9], t[3];
  int num_matches = 0, num_e_inliers = 0, num_h_inliers = 0;
  std::string model;  // "calibrated", "uncalibrated", "planar", "none"
  // The fundamental matrix (x2^T F x1 = 0, pixels undistorted with the prior, tiepoint's
  // convention), when one verified.
  double F[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  bool guided = false;  // the inliers come from guided matching
  // log10 of the pair's number of false alarms (solver/geometry/two_view_geometry.h): of
  // the essential matrix with known intrinsics, else of the fundamental matrix, over all
  // the pair's matches; +infinity when no model was found.
  double log10_nfa = std::numeric_limits<double>::infinity();
};

// Intrinsics of a camera as the two-view code wants them (tiepoint's pixel convention).
Intrinsics ToIntrinsics(const Camera& c) {
  Intrinsics k;
  k.fx = c.fx();
  k.fy = c.fy();
  k.cx = c.cx() - 0.5;
  k.cy = c.cy() - 0.5;
  return k;
}

// A keypoint undistorted with the camera's prior, in tiepoint's convention (the two-view
// code's pixels).
std::array<double, 2> UndistortedPoint(const Point2D& k, const Camera& c) {
  double u, v;
  CameraPixelToNormalized(c.model, c.params.data(), k.x, k.y, &u, &v);
  return {c.fx() * u + c.cx() - 0.5, c.fy() * v + c.cy() - 0.5};
}

void VerifyPair(const ReconstructionPipelineOptions& o, const std::vector<Point2D>& k1,
                const std::vector<Point2D>& k2, const Camera& c1, const Camera& c2,
                const std::vector<std::pair<uint32_t, uint32_t>>& matches, bool known_intrinsics,
                uint64_t seed, PairResult* out, bool matches_are_f_inliers = false,
                int ransac_min_iterations = 0) {
  const int num_matches = out->num_matches;
  const double log10_nfa = out->log10_nfa;  // of the first verification, kept by a second
  *out = PairResult();
  if (matches_are_f_inliers) out->log10_nfa = log10_nfa;
  out->num_matches = matches_are_f_inliers ? num_matches : static_cast<int>(matches.size());
  out->model = "none";
  if (static_cast<int>(matches.size()) < o.verify_min_inliers) return;
  std::vector<std::array<double, 2>> x1, x2;
  for (const auto& [a, b] : matches) {
    x1.push_back(UndistortedPoint(k1[a], c1));
    x2.push_back(UndistortedPoint(k2[b], c2));
  }
  RansacOptions ro;
  ro.max_error_px = o.verify_max_error_px;
  ro.min_inliers = o.verify_min_inliers;
  ro.seed = seed;
  // Unrelated pairs have no model to find: RANSAC runs to its maximum on them, so it is
  // kept at 2,000 draws (COLMAP's 10,000 buys nothing here: at the 25% inlier ratio of the
  // weakest real pairs, 7-point samples reach 99.99% confidence in 2,400 draws, and those
  // pairs add little).
  ro.max_iterations = 2000;
  if (ransac_min_iterations > 0) ro.min_iterations = ransac_min_iterations;
  TwoViewGeometry F;
  if (matches_are_f_inliers) {
    F.verified = true;
    F.inlier_mask.assign(matches.size(), 1);
  } else if (!EstimateTwoViewGeometry(TwoViewModel::kFundamental, x1, x2, nullptr, nullptr, ro, &F).ok() ||
             !F.verified) {
    return;
  }
  std::copy(F.matrix, F.matrix + 9, out->F);
  std::vector<std::array<double, 2>> y1, y2;
  std::vector<std::pair<uint32_t, uint32_t>>& f_inliers = out->f_inliers;
  for (size_t k = 0; k < matches.size(); ++k)
    if (F.inlier_mask[k]) {
      f_inliers.push_back(matches[k]);
      y1.push_back(x1[k]);
      y2.push_back(x2[k]);
    }
  const Intrinsics i1 = ToIntrinsics(c1), i2 = ToIntrinsics(c2);
  TwoViewGeometry E, H;
  // Self-calibrating, the first verification's essential matrices are made with the prior
  // focal length and estimated again after the first pass: they take the same floor as that
  // second verification, which passes it for all its estimates (ransac_min_iterations).
  RansacOptions roe = ro;
  if (!known_intrinsics && !matches_are_f_inliers) roe.min_iterations = o.self_calibration_min_iterations;
  if (EstimateTwoViewGeometry(TwoViewModel::kEssential, y1, y2, &i1, &i2, roe, &E).ok() && E.verified) {
    out->num_e_inliers = E.num_inliers;
    out->has_pose = true;
    std::copy(E.rotation, E.rotation + 9, out->R);
    std::copy(E.translation, E.translation + 3, out->t);
  }
  // The significance of the model that decides the pair (a second verification keeps the
  // first's). With known intrinsics, the essential matrix's inliers among the fundamental
  // matrix's: a lower bound on its support among all the matches, so it errs on the safe
  // side.
  if (!matches_are_f_inliers)
    out->log10_nfa = known_intrinsics && out->has_pose
                         ? EssentialLog10Nfa(E.matrix, i1, i2, x1, x2, ro.max_error_px, E.num_inliers)
                         : FundamentalLog10Nfa(F.matrix, x1, x2, ro.max_error_px, F.num_inliers);
  // Which correspondences go on to the tracks. With known intrinsics a pair must fit an
  // essential matrix and only its inliers count. Otherwise the fundamental matrix's
  // inliers count, but a pair without a relative pose must have twice the minimum: on the
  // Middlebury temple, unrelated views give 15-20 chance inliers of 7-point F fits among
  // 30-50 matches, and those pairs put wrong matches into the tracks.
  if (known_intrinsics) {
    if (!out->has_pose) return;
    for (size_t k = 0; k < f_inliers.size(); ++k)
      if (E.inlier_mask[k]) out->inliers.push_back(f_inliers[k]);
    out->model = "calibrated";
  } else {
    if (!out->has_pose && static_cast<int>(f_inliers.size()) < 2 * o.verify_min_inliers) return;
    out->inliers = f_inliers;
    out->model = out->has_pose ? "calibrated" : "uncalibrated";
  }
  out->verified = true;
  if (EstimateTwoViewGeometry(TwoViewModel::kHomography, y1, y2, nullptr, nullptr, ro, &H).ok() &&
      H.verified) {
    out->num_h_inliers = H.num_inliers;
    if (H.num_inliers > o.mapper.max_h_inlier_ratio * std::max<int>(1, out->num_e_inliers))
      out->model = "planar or panoramic";
  }
}

// Keypoints undistorted with the camera's prior, in the verification's convention.
std::vector<std::array<double, 2>> Undistorted(const std::vector<Point2D>& k, const Camera& c) {
  std::vector<std::array<double, 2>> x(k.size());
  for (size_t i = 0; i < k.size(); ++i) x[i] = UndistortedPoint(k[i], c);
  return x;
}

// Guided matching of a verified pair (ReconstructionPipelineOptions::guided_matching):
// the candidates of feature i of image 1 are the features of image 2 within max_error of
// the epipolar line F x1_i, whose own line F^T x2_j passes within max_error of x1_i.
void GuidedMatch(const ReconstructionPipelineOptions& o, const Features& f1, const Features& f2,
                 const std::vector<std::array<double, 2>>& x1, const std::vector<std::array<double, 2>>& x2,
                 const double* F, std::vector<std::pair<uint32_t, uint32_t>>* matches) {
  matches->clear();
  const double thr = o.verify_max_error_px;
  // Lines normalised so that a dot product is a distance in pixels.
  auto line = [](const double* M, bool transpose, double x, double y, double l[3]) {
    for (int r = 0; r < 3; ++r)
      l[r] = transpose ? M[r] * x + M[3 + r] * y + M[6 + r] : M[3 * r] * x + M[3 * r + 1] * y + M[3 * r + 2];
    const double s = std::hypot(l[0], l[1]);
    if (s > 0) for (int r = 0; r < 3; ++r) l[r] /= s;
  };
  std::vector<std::array<double, 3>> l2(x2.size());
  for (size_t j = 0; j < x2.size(); ++j) line(F, true, x2[j][0], x2[j][1], l2[j].data());
  std::vector<uint64_t> ptr(1, 0);
  std::vector<uint32_t> cols;
  for (size_t i = 0; i < x1.size(); ++i) {
    double l[3];
    line(F, false, x1[i][0], x1[i][1], l);
    for (size_t j = 0; j < x2.size(); ++j)
      if (std::abs(l[0] * x2[j][0] + l[1] * x2[j][1] + l[2]) <= thr &&
          std::abs(l2[j][0] * x1[i][0] + l2[j][1] * x1[i][1] + l2[j][2]) <= thr)
        cols.push_back(static_cast<uint32_t>(j));
    ptr.push_back(cols.size());
  }
  MatcherOptions mo = o.matcher;
  mo.num_threads = 1;  // the pairs are spread over the threads
  std::vector<FeatureMatch> fm;
  if (!MatchRestricted(f1, f2, ptr, cols, mo, &fm).ok()) return;
  for (const FeatureMatch& m : fm) matches->push_back({m.index1, m.index2});
}

}  // namespace

Status ReconstructionPipelineOptions::Check() const {
  if (output_dir.empty()) return Status::InvalidOptions("reconstruct: an output directory (-o) is required");
  if (image_paths.empty()) return Status::InvalidOptions("reconstruct: no images given");
  if (!image_names.empty() && image_names.size() != image_paths.size())
    return Status::InvalidOptions("reconstruct: " + std::to_string(image_names.size()) + " image names for " +
                                  std::to_string(image_paths.size()) + " images");
  if (!matches_dir.empty() && features_dir.empty())
    return Status::InvalidOptions("reconstruct: --matches needs --features (the keypoints its matches index)");
  if (!features_dir.empty() && !tracks_file.empty())
    return Status::InvalidOptions("reconstruct: --features and --tracks are two sources of correspondences: give one");
  if ((!mask_path.empty() || !camera_mask.empty()) && (!features_dir.empty() || !tracks_file.empty()))
    return Status::InvalidOptions(std::string("reconstruct: ") + (mask_path.empty() ? "--camera-mask" : "--mask-path") +
                                  " applies to the features reconstruct extracts, not to those of " +
                                  (features_dir.empty() ? "--tracks" : "--features"));
  if (!mask_path.empty()) TIEPOINT_RETURN_IF_ERROR(CheckFeatureMaskFolder(mask_path));
  if (!camera_params.empty()) {
    if (!intrinsics_file.empty())
      return Status::InvalidOptions("reconstruct: --camera-params (initial, refined) and --intrinsics (held fixed): give one");
    if (static_cast<int>(camera_params.size()) != CameraModelNumParams(camera_model))
      return Status::InvalidOptions("reconstruct: --camera-params: " + std::to_string(camera_params.size()) +
                                    " values for " + CameraModelName(camera_model) + ", which takes " +
                                    CameraModelParamNames(camera_model));
    for (const double v : camera_params)
      if (!std::isfinite(v)) return Status::InvalidOptions("reconstruct: --camera-params: a value is not finite");
  }
  if (sequential_overlap < 1) return Status::InvalidOptions("reconstruct: --pairs sequential:K needs K >= 1");
  if (single_camera && single_camera_per_folder)
    return Status::InvalidOptions("reconstruct: --single-camera and --single-camera-per-folder: give one");
  if (pairs == PairSelection::kFile) {
    // Before the images are read and extracted: a folder, a missing file, a malformed line or
    // no pairs fail at once (the names are resolved against the images later).
    std::vector<NamePair> named;
    TIEPOINT_RETURN_IF_ERROR(ReadPairsFile(pairs_file, &named));
  }
  if (!(verify_max_error_px > 0)) return Status::InvalidOptions("reconstruct: verification error must be > 0");
  if (self_calibration_min_iterations < 1 || self_calibration_min_iterations > 2000)
    return Status::InvalidOptions("reconstruct: self_calibration_min_iterations must be in [1, 2000]");
  if (!write_text && !write_binary) return Status::InvalidOptions("reconstruct: --format writes nothing");
  if (min_features_per_image < 0) return Status::InvalidOptions("reconstruct: --min-features must be >= 0");
  if (const Status s = CheckMaxImageSize(max_image_size); !s.ok())
    return Status::InvalidOptions("reconstruct: " + s.message());
  if (!(min_contrast_threshold > 0) || !std::isfinite(min_contrast_threshold))
    return Status::InvalidOptions("reconstruct: --min-contrast-threshold must be > 0");
  if (self_calibration_first_model_images < 0)
    return Status::InvalidOptions("reconstruct: self_calibration_first_model_images must be >= 0");
  if (retry_min_features < 0 || !(retry_min_contrast_threshold > 0) || !std::isfinite(retry_min_contrast_threshold))
    return Status::InvalidOptions("reconstruct: the second attempt needs retry_min_features >= 0 and retry_min_contrast_threshold > 0");
  TIEPOINT_RETURN_IF_ERROR(sift.Check());
  TIEPOINT_RETURN_IF_ERROR(matcher.Check());
  TIEPOINT_RETURN_IF_ERROR(mapper.Check());
  return Status::Ok();
}

Status RunReconstructionPipeline(const ReconstructionPipelineOptions& o,
                                 ReconstructionPipelineResult* result) {
  TIEPOINT_RETURN_IF_ERROR(o.Check());
  using json = nlohmann::json;
  const auto t_all = std::chrono::steady_clock::now();
  json& report = result->report;
  report = json::object();
  report["stages"] = json::object();
  const int threads = o.num_threads > 0 ? o.num_threads : omp_get_max_threads();

  // One file under two names: a photo given and also found through its folder, a link.
  SeenFiles seen_files;
  for (const std::string& p : o.image_paths)
    if (std::string earlier; !seen_files.Add(p, &earlier))
      return Status::InvalidInput(earlier == p ? p + ": the same image file given twice"
                                               : "the same image file twice: " + earlier + " and " + p);
  // Names must be unique: the model refers to images by name.
  std::vector<std::string> names_given = o.image_names;  // the names of the images given
  if (names_given.empty())
    for (const std::string& p : o.image_paths) names_given.push_back(BaseName(p));
  std::map<std::string, std::string> by_name;
  for (size_t i = 0; i < o.image_paths.size(); ++i) {
    const std::string& p = o.image_paths[i];
    auto [it, inserted] = by_name.emplace(names_given[i], p);
    if (!inserted)
      return Status::InvalidInput("duplicate image name '" + it->first + "': " + it->second + " and " + p);
  }
  // Check the output directory before the work.
  {
    std::error_code ec;
    fs::create_directories(o.output_dir, ec);
    if (ec || !fs::is_directory(o.output_dir))
      return Status::IoError(o.output_dir + ": cannot create the output directory");
    if (access(o.output_dir.c_str(), W_OK) != 0)
      return Status::IoError(o.output_dir + ": the output directory is not writable");
  }
  // Backends first, so a missing GPU fails at once.
  std::unique_ptr<FeatureExtractor> extractor;
  std::unique_ptr<DescriptorMatcher> matcher;
  // The SIFT options of an attempt that wants min_features per image, lowering the contrast
  // threshold down to min_ct for images with fewer. On the CPU the extractor lowers it
  // itself, in the same pass (`lower` true); the CUDA extractor keeps one threshold, and
  // those images are extracted again (in `attempt` below).
  // With `fallback` (the first attempt, when a second one may run), an image that reaches
  // min_features only at min_ct, or not at all, gets the second attempt's features at once
  // (up to retry_min_features, down to retry_min_contrast_threshold): the CPU extractor
  // takes them from the same pass (SiftOptions::fallback_min_features), and for the CUDA
  // extractor the halving goes on for those images.
  struct Extraction {
    SiftOptions sift;
    bool lower = false;
    int fallback_min_features = 0;
    double fallback_min_ct = 0;
  };
  // The second attempt's bounds are wider than the first's (fallback features, and the
  // second attempt itself when the grey images are small enough to keep).
  const bool fallback_allowed = o.tracks_file.empty() && o.features_dir.empty() && o.retry_min_features > o.min_features_per_image &&
                                o.retry_min_contrast_threshold < o.min_contrast_threshold;
  auto extraction = [&](int min_features, double min_ct, bool fallback) {
    Extraction e;
    e.sift = o.sift;
    e.sift.num_threads = threads;
    e.lower = o.device == Device::kCpu && min_features > 0 && min_ct < e.sift.contrast_threshold;
    if (fallback && fallback_allowed && min_features > 0 && min_ct < e.sift.contrast_threshold) {
      e.fallback_min_features = o.retry_min_features;
      e.fallback_min_ct = o.retry_min_contrast_threshold;
    }
    if (e.lower) {
      e.sift.min_features = min_features;
      e.sift.min_contrast_threshold = min_ct;
      e.sift.fallback_min_features = e.fallback_min_features;
      e.sift.fallback_min_contrast_threshold = e.fallback_min_ct;
    }
    return e;
  };
  MatcherOptions mo = o.matcher;
  mo.num_threads = threads;
  // The backends' start (with --device cuda, the GPU's context: 0.2-0.35 s on the H200
  // host, a quarter of the Middlebury rings' time there) is a stage of its own.
  const auto t_setup = std::chrono::steady_clock::now();
  double extractor_seconds = 0, matcher_seconds = 0;
  const Extraction first = extraction(o.min_features_per_image, o.min_contrast_threshold, true);
  if (o.tracks_file.empty()) {
    if (o.features_dir.empty()) TIEPOINT_RETURN_IF_ERROR(FeatureExtractor::Create(first.sift, o.device, &extractor));
    extractor_seconds = Since(t_setup);
    if (o.matches_dir.empty()) TIEPOINT_RETURN_IF_ERROR(DescriptorMatcher::Create(mo, o.device, &matcher));
    matcher_seconds = Since(t_setup) - extractor_seconds;
  }
  if (o.mapper.ba_linear_solver == ReconstructionLinearSolver::kIterativeSchurCuda) {
    // Without a usable GPU, stop before any work, with the solver's own message (it names
    // --ba-solver iterative); creating one allocates nothing on the device.
    std::unique_ptr<CudaReducedPcg> probe;
    TIEPOINT_RETURN_IF_ERROR(CreateCudaReducedPcg(&probe));
  }
  report["stages"]["setup"] = {{"seconds", Since(t_setup)}, {"device", o.device == Device::kCuda ? "cuda" : "cpu"},
                               {"extractor_seconds", extractor_seconds}, {"matcher_seconds", matcher_seconds}};
  std::map<std::string, CameraIntrinsics> known;
  if (!o.intrinsics_file.empty()) TIEPOINT_RETURN_IF_ERROR(ReadIntrinsicsTable(o.intrinsics_file, &known));

  // 1. Images.
  auto t0 = std::chrono::steady_clock::now();
  const int n_in = static_cast<int>(o.image_paths.size());
  std::vector<GrayImage> gray(n_in);
  // The images' colours from the same decoding, for the points' colours at the end (PNG,
  // TIFF, PGM, PPM; not JPEG, see DecodeImageGrayAndColour), held while they fit in
  // kHeldColourBytes; the others are read again there. The dino ring's 16 PNGs: 15 MB,
  // 0.04 s of reading again on 2 threads.
  constexpr int64_t kHeldColourBytes = int64_t{256} << 20;
  std::vector<Image8> colour(n_in);
  std::atomic<int64_t> colour_bytes{0};
  // The images' own sizes, which their cameras keep: an image SIFT will see shrunk (over
  // max_image_size) is held shrunk from here on: (max_image_size / its larger side)^2 of its
  // memory, a quarter for a 6400-pixel side.
  std::vector<std::array<int, 2>> full_size(n_in, {0, 0});
  const bool shrink = o.max_image_size > 0 && o.tracks_file.empty() && o.features_dir.empty();
  std::vector<Status> read_status(n_in);
  // The focal length priors of the JPEGs' EXIF (not read when --intrinsics gives them).
  std::vector<std::optional<ExifFocalPrior>> exif(n_in);
  std::vector<std::string> exif_note(n_in);
  // --camera-mask: one mask for all, read first (a bad one fails before any image is read).
  FeatureMask camera_mask;
  if (!o.camera_mask.empty()) TIEPOINT_RETURN_IF_ERROR(ReadFeatureMask(o.camera_mask, &camera_mask));
  // --mask-path: each image's mask, at its own size (none where it has no mask file).
  std::vector<FeatureMask> masks(o.mask_path.empty() ? 0 : n_in);
  std::vector<Status> mask_status(masks.size());
#pragma omp parallel for num_threads(threads) schedule(dynamic)
  for (int i = 0; i < n_in; ++i) {
    // One read of the file for its pixels and its EXIF.
    std::vector<unsigned char> bytes;
    read_status[i] = ReadImageFile(o.image_paths[i], &bytes);
    if (read_status[i].ok())
      read_status[i] = DecodeImageGrayAndColour(bytes.data(), bytes.size(), o.image_paths[i], &gray[i], &colour[i]);
    if (!colour[i].empty()) {
      const int64_t size = static_cast<int64_t>(colour[i].pixels.size());
      if (colour_bytes.fetch_add(size) + size > kHeldColourBytes) {
        colour_bytes -= size;
        colour[i] = Image8();
      }
    }
    if (!read_status[i].ok() || gray[i].empty()) continue;
    full_size[i] = {gray[i].width, gray[i].height};
    if (!masks.empty()) {
      bool found = false;
      mask_status[i] = FindFeatureMask(o.mask_path, names_given[i], gray[i].width, gray[i].height, &masks[i], &found);
    }
    if (known.empty()) {
      const Status s = DecodeExifFocalPrior(bytes.data(), bytes.size(), o.image_paths[i], gray[i].width,
                                            gray[i].height, &exif[i], &exif_note[i]);
      if (!s.ok()) exif_note[i] = s.message();
    }
    std::vector<unsigned char>().swap(bytes);  // not held while the image is shrunk
    if (shrink) read_status[i] = ShrinkToFit(o.max_image_size, 1, &gray[i]);
  }
  std::vector<int> usable;
  json skipped = json::array();
  for (int i = 0; i < n_in; ++i) {
    if (read_status[i].ok() && !gray[i].empty()) {
      usable.push_back(i);
    } else {
      const std::string why = read_status[i].ok() ? "empty image" : read_status[i].message();
      skipped.push_back({{"image", names_given[i]}, {"path", o.image_paths[i]}, {"reason", why}});
      std::fprintf(stderr, "tiepoint reconstruct: skipping %s: %s\n", o.image_paths[i].c_str(), why.c_str());
      gray[i] = GrayImage();
    }
  }
  report["stages"]["read"] = {{"seconds", Since(t0)}, {"images", usable.size()}, {"skipped", skipped.size()}};
  if (!camera_mask.empty())
    for (int i : usable)
      TIEPOINT_RETURN_IF_ERROR(FeatureMaskFits(camera_mask, o.camera_mask, full_size[i][0], full_size[i][1], names_given[i]));
  if (!masks.empty()) {
    // A mask given but unusable is the user's mistake to hear about, not a mask to do without.
    for (int i : usable) TIEPOINT_RETURN_IF_ERROR(mask_status[i]);
    // (A mask read is never empty: it has its image's size.)
    std::vector<std::string> without;
    for (int i : usable)
      if (masks[i].empty()) without.push_back(names_given[i]);
    report["stages"]["read"]["images_without_mask"] = without.size();
    if (!without.empty())
      std::fprintf(stderr, "tiepoint reconstruct: %s\n",
                   ImagesWithoutMaskNote(without.size(), usable.size(), o.mask_path, without.front()).c_str());
  }
  report["skipped_images"] = skipped;
  if (usable.size() < 2)
    return Status::InsufficientData("fewer than two usable images (" + std::to_string(usable.size()) +
                                    " of " + std::to_string(n_in) + " could be read): nothing to reconstruct");
  const int n = static_cast<int>(usable.size());
  // Image k's full size over the size it is held at: (1, 1) unless shrunk for SIFT.
  auto Shrinkage = [&](int k) -> std::array<double, 2> {
    const GrayImage& g = gray[usable[k]];
    return {static_cast<double>(full_size[usable[k]][0]) / g.width,
            static_cast<double>(full_size[usable[k]][1]) / g.height};
  };
  std::vector<std::string> names(n);  // of the usable images
  for (int k = 0; k < n; ++k) names[k] = names_given[usable[k]];
  // Images of a folder's subfolders ("cam0/a.png") are also known by their file names
  // ("a.png": an --intrinsics line, a pairs file, features and matches files) where no two
  // images share one.
  std::vector<std::string> file_names(n);
  for (int k = 0; k < n; ++k) file_names[k] = BaseName(names[k]);
  const bool file_names_unique = std::set<std::string>(file_names.begin(), file_names.end()).size() == file_names.size();
  // COLMAP writes a name with a space into its text model as it is, and reads it back only
  // up to the space; pairs files and intrinsics tables split at spaces: said once, on
  // stderr and in the report, where it applies.
  if (o.write_text || o.pairs == PairSelection::kFile || !o.intrinsics_file.empty()) {
    const auto spaced = std::find_if(names.begin(), names.end(), [](const std::string& s) {
      return s.find_first_of(" \t") != std::string::npos;
    });
    if (spaced != names.end()) {
      std::string warning = "image names with spaces (such as '" + *spaced + "'): ";
      if (o.write_text)
        warning += "COLMAP reads the text model's image names only up to the first space (its binary model "
                   "keeps them whole)";
      if (o.pairs == PairSelection::kFile || !o.intrinsics_file.empty())
        warning += std::string(o.write_text ? "; " : "") +
                   "a pairs file or --intrinsics line, split at spaces, can name such an image only by its file "
                   "name or stem, where those have none";
      std::fprintf(stderr, "tiepoint reconstruct: warning: %s\n", warning.c_str());
      report["warnings"].push_back(warning);
    }
  }
  Progress(o, "read " + std::to_string(n) + " images" +
                  (skipped.empty() ? "" : " (" + std::to_string(skipped.size()) + " skipped)"));
  // The pairs to match, once for every attempt below, before any feature is extracted.
  std::vector<std::pair<int, int>> pairs;
  int pairs_dropped = 0;
  if (o.tracks_file.empty()) {
    TIEPOINT_RETURN_IF_ERROR(SelectPairs(o, names_given, usable, &pairs, &pairs_dropped));
    if (pairs_dropped > 0) {
      std::fprintf(stderr, "tiepoint reconstruct: %d pair(s) of %s dropped: an image of each was skipped\n",
                   pairs_dropped, o.pairs_file.c_str());
      if (pairs.empty())
        return Status::InvalidInput(o.pairs_file + ": no pairs left: each names an image that was skipped");
    }
  }

  // 2. Cameras: known intrinsics (fixed), else the prior (EXIF, else 1.2 max(w, h)), one per
  // image or per size.
  std::map<uint32_t, Camera> cameras;
  std::vector<uint32_t> image_camera(n);
  std::map<uint32_t, std::string> focal_source;  // camera -> "intrinsics file", "exif", "default"
  json camera_report = json::array();
  json exif_notes = json::array();
  {
    // (folder, (w, h, fx, fy, cx, cy)) -> camera; the folder only with single_camera_per_folder.
    std::map<std::pair<std::string, std::array<double, 6>>, uint32_t> shared;
    for (int k = 0; k < n; ++k) {
      const struct {
        int width, height;
      } g{full_size[usable[k]][0], full_size[usable[k]][1]};
      Camera c;
      c.width = g.width;
      c.height = g.height;
      std::array<double, 6> key{double(g.width), double(g.height), 0, 0, 0, 0};
      if (!known.empty()) {
        auto it = known.find(names[k]);
        if (it == known.end() && file_names_unique) it = known.find(file_names[k]);
        if (it == known.end()) it = known.find("*");
        if (it == known.end())
          return Status::InvalidInput(o.intrinsics_file + ": no intrinsics for image '" + names[k] + "'");
        const CameraIntrinsics& K = it->second;
        // The table's reader takes any positive, finite focal length and any finite principal
        // point; against the image they must make a pinhole camera.
        if (!FocalMakesCamera(K.fx, K.fy, g.width, g.height))
          return Status::InvalidInput(o.intrinsics_file + ": the focal length of image '" + names[k] + "' (" +
                                      Number(K.fx) + ", " + Number(K.fy) + " px) is not within 0.01 to 1000 times its size (" +
                                      std::to_string(g.width) + " x " + std::to_string(g.height) +
                                      "): a field of view over 177 or under 0.06 degrees");
        if (!PrincipalPointMakesCamera(K.cx - 0.5 * (g.width - 1), K.cy - 0.5 * (g.height - 1), K.fx, K.fy, g.width,
                                       g.height))
          return Status::InvalidInput(o.intrinsics_file + ": the principal point of image '" + names[k] + "' (" +
                                      Number(K.cx) + ", " + Number(K.cy) + ") lies over 10 times max(size, focal length) (" +
                                      std::to_string(g.width) + " x " + std::to_string(g.height) + ", " +
                                      Number(std::max(K.fx, K.fy)) + " px) from its centre");
        // COLMAP's convention puts the top-left pixel's centre at (0.5, 0.5).
        if (std::abs(K.fx - K.fy) > 1e-9 * K.fx) {
          c.model = CameraModelId::kPinhole;
          c.params = {K.fx, K.fy, K.cx + 0.5, K.cy + 0.5};
        } else {
          c.model = CameraModelId::kSimplePinhole;
          c.params = {K.fx, K.cx + 0.5, K.cy + 0.5};
        }
        key = {double(g.width), double(g.height), K.fx, K.fy, K.cx, K.cy};
      } else {
        c.model = o.camera_model;
        // The focal length is set per camera below (its images' EXIF priors, or the default).
        const double f = 1.2 * std::max(g.width, g.height);
        const double cx = g.width / 2.0, cy = g.height / 2.0;
        switch (o.camera_model) {
          case CameraModelId::kSimplePinhole: c.params = {f, cx, cy}; break;
          case CameraModelId::kPinhole: c.params = {f, f, cx, cy}; break;
          case CameraModelId::kSimpleRadial: c.params = {f, cx, cy, 0}; break;
          case CameraModelId::kRadial: c.params = {f, cx, cy, 0, 0}; break;
          case CameraModelId::kOpenCV: c.params = {f, f, cx, cy, 0, 0, 0, 0}; break;
          case CameraModelId::kOpenCVFisheye: c.params = {f, f, cx, cy, 0, 0, 0, 0}; break;
          case CameraModelId::kSimpleRadialFisheye: c.params = {f, cx, cy, 0}; break;
          case CameraModelId::kRadialFisheye: c.params = {f, cx, cy, 0, 0}; break;
          case CameraModelId::kFullOpenCV:
          case CameraModelId::kThinPrismFisheye: c.params = {f, f, cx, cy, 0, 0, 0, 0, 0, 0, 0, 0}; break;
          // omega = 0 is a stationary point of the projection (it acts as omega^2), so the
          // adjustment could not move it; COLMAP starts at 0.01 too.
          case CameraModelId::kFov: c.params = {f, f, cx, cy, 0.01}; break;
        }
      }
      const bool share = o.single_camera || o.single_camera_per_folder || !known.empty();
      // The folder the image file is in, however it was named on the command line (links
      // to it followed).
      std::string folder;
      if (o.single_camera_per_folder) {
        std::error_code ec;
        const fs::path parent = fs::path(o.image_paths[usable[k]]).parent_path();
        folder = fs::weakly_canonical(parent.empty() ? fs::path(".") : parent, ec).string();
        if (ec) folder = fs::path(o.image_paths[usable[k]]).lexically_normal().parent_path().string();
      }
      const std::pair<std::string, std::array<double, 6>> shared_key = {folder, key};
      auto it = share ? shared.find(shared_key) : shared.end();
      if (it != shared.end()) {
        image_camera[k] = it->second;
      } else {
        c.camera_id = static_cast<uint32_t>(cameras.size() + 1);
        cameras[c.camera_id] = c;
        image_camera[k] = c.camera_id;
        if (share) shared[shared_key] = c.camera_id;
      }
    }
    // Per camera: its images' priors. A shared camera takes their common value, else their
    // median (images without EXIF do not count), else the default.
    std::map<uint32_t, std::vector<int>> members;
    for (int k = 0; k < n; ++k) members[image_camera[k]].push_back(k);
    for (auto& [id, c] : cameras) {
      json entry = {{"camera_id", id}, {"width", c.width}, {"height", c.height}, {"images", members[id].size()}};
      if (!known.empty()) {
        focal_source[id] = "intrinsics file";
      } else {
        std::vector<double> priors;
        for (int k : members[id])
          if (exif[usable[k]]) priors.push_back(exif[usable[k]]->focal_px);
        const double default_f = 1.2 * std::max(c.width, c.height);
        double f = default_f;
        if (!priors.empty()) {
          std::sort(priors.begin(), priors.end());
          const size_t h = priors.size() / 2;
          f = priors.size() % 2 ? priors[h] : 0.5 * (priors[h - 1] + priors[h]);
          entry["exif_images"] = priors.size();
          if (priors.back() - priors.front() > 1e-9 * priors.back()) {
            entry["exif_focal_px_range"] = {priors.front(), priors.back()};
            entry["note"] = "the images' EXIF priors differ: their median is used";
          }
          if (members[id].size() == 1) entry["exif_source"] = exif[usable[members[id][0]]]->source;
        }
        c.SetFocal(f);
        focal_source[id] = priors.empty() ? "default" : "exif";
        if (!o.camera_params.empty()) {
          // --camera-params: the user's initial values. Against this camera's image they must
          // make a camera, as --intrinsics' values must, and its distortion must not fold it.
          const std::vector<double>& p = o.camera_params;
          Camera given = c;
          given.params = p;
          const double fx = given.fx(), fy = given.fy(), cx = given.cx(), cy = given.cy();
          const std::string what = "--camera-params " + CameraModelParamNames(c.model) + " for the " +
                                   std::to_string(c.width) + " x " + std::to_string(c.height) + " images: ";
          if (!FocalMakesCamera(fx, fy, c.width, c.height))
            return Status::InvalidOptions(what + "a focal length (" + Number(fx) + ", " + Number(fy) +
                                          " px) not within 0.01 to 1000 times the image's size");
          if (!PrincipalPointMakesCamera(cx - 0.5 * c.width, cy - 0.5 * c.height, fx, fy, c.width, c.height))
            return Status::InvalidOptions(what + "a principal point (" + Number(cx) + ", " + Number(cy) +
                                          ") over 10 times max(size, focal length) from the centre");
          // Radial distortion r_d = r (1 + k1 r^2 + k2 r^4) must keep growing with r out to
          // the corner farthest from the principal point (s = r^2 up to s_c): 1 + 3 k1 s +
          // 5 k2 s^2 > 0 on [0, s_c], else the image folds onto itself.
          // OPENCV: its radial terms k1, k2 (the tangential ones are small beside them).
          // The fisheye models: theta_d = theta (1 + k1 theta^2 + ...) must keep growing
          // with the angle theta until it reaches the corner's theta_d, below 90 degrees.
          // s_c: the squared normalized radius of the corner farthest from the principal point.
          double s_c = 0;
          for (const double x : {0.0, double(c.width)})
            for (const double y : {0.0, double(c.height)})
              s_c = std::max(s_c, (x - cx) * (x - cx) / (fx * fx) + (y - cy) * (y - cy) / (fy * fy));
          if (CameraModelIsFisheye(c.model) || c.model == CameraModelId::kThinPrismFisheye) {
            // THIN_PRISM_FISHEYE: its radial terms k1, k2, k3, k4 (parameters 4, 5, 8, 9).
            const bool prism = c.model == CameraModelId::kThinPrismFisheye;
            double prism_k[4] = {0, 0, 0, 0};
            if (prism) prism_k[0] = p[4], prism_k[1] = p[5], prism_k[2] = p[8], prism_k[3] = p[9];
            const double* k = prism ? prism_k : p.data() + CameraModelDistortionBegin(c.model);
            const int num_k = prism ? 4 : CameraModelFisheyeTerms(c.model);
            double theta_d_end, slope;
            FisheyeAngleMap(k, num_k, FisheyeGrowingBranchEnd(k, num_k), &theta_d_end, &slope);
            if (!(theta_d_end >= std::sqrt(s_c))) {
              std::string ks;
              for (int j = 0; j < num_k; ++j) ks += (j ? ", " : "") + Number(k[j]);
              return Status::InvalidOptions(what + "a fisheye distortion (" + (prism ? "k1, k2, k3, k4 = " : "") + ks +
                                            ") under which the image folds before its farthest corner, or that "
                                            "corner lies beyond 90 degrees from the axis");
            }
          } else if (c.model == CameraModelId::kFov) {
            // The corner's radius r_d must come from a finite one: omega r_d below 90 degrees
            // (omega's sign does not matter; 180 degrees or more is not a lens).
            const double omega = std::abs(p[4]);
            // omega = 0 (the pinhole) is a stationary point of the projection, which depends
            // on omega^2 there: refined, it would never leave 0 (COLMAP warns the same).
            if (omega == 0)
              return Status::InvalidOptions(what + "omega = 0, where the adjustment cannot move it (the projection "
                                            "depends on omega^2 there): start it at a small value such as 0.01 "
                                            "(reconstruct's own start), or use --camera-model pinhole");
            if (!(omega < 3.141592653589793) || !(omega * std::sqrt(s_c) < 1.5707963267948966))
              return Status::InvalidOptions(what + "an omega (" + Number(p[4]) +
                                            ") under which the image's farthest corner lies beyond 90 degrees "
                                            "from the axis, or not within (-pi, pi)");
          } else if (c.model == CameraModelId::kFullOpenCV) {
            // r (1 + k1 r^2 + k2 r^4 + k3 r^6) / (1 + k4 r^2 + k5 r^4 + k6 r^6) must keep
            // growing, its denominator positive, out to the corner (a scan of 2,000 radii).
            const double k1 = p[4], k2 = p[5], k3 = p[8], k4 = p[9], k5 = p[10], k6 = p[11];
            bool folds = false;
            double last = 0;
            for (int i = 1; i <= 2000 && !folds; ++i) {
              const double s = s_c * i / 2000;
              const double den = 1 + s * (k4 + s * (k5 + s * k6));
              const double rd = std::sqrt(s) * (1 + s * (k1 + s * (k2 + s * k3))) / den;
              folds = !(den > 0) || !(rd > last);
              last = rd;
            }
            if (folds) {
              std::string ks;
              for (const double x : {k1, k2, k3, k4, k5, k6}) ks += (ks.empty() ? "" : ", ") + Number(x);
              return Status::InvalidOptions(what + "a radial distortion (" + ks +
                                            ") under which the image folds before its farthest corner");
            }
          } else if (c.HasDistortion()) {
            const int k = CameraModelDistortionBegin(c.model);
            const bool two = c.model != CameraModelId::kSimpleRadial;
            const double k1 = p[k], k2 = two ? p[k + 1] : 0.0;
            auto slope = [&](double s) { return 1 + 3 * k1 * s + 5 * k2 * s * s; };
            bool folds = !(slope(s_c) > 0);
            if (k2 > 0) {
              const double vertex = -3 * k1 / (10 * k2);
              if (vertex > 0 && vertex < s_c && !(slope(vertex) > 0)) folds = true;
            }
            if (folds)
              return Status::InvalidOptions(what + "a radial distortion (" + Number(k1) +
                                            (two ? ", " + Number(k2) : std::string()) +
                                            ") under which the image folds before its farthest corner");
          }
          c.params = p;
          focal_source[id] = "camera params";
        }
      }
      entry["focal_source"] = focal_source[id];
      entry["initial_focal_px"] = c.fx();
      entry["initial_params"] = c.params;  // in COLMAP's order and pixels, as cameras.txt
      camera_report.push_back(entry);
    }
    // EXIF that was there but gave no prior (rejected values, corrupt blocks): said in the
    // report. No EXIF at all, or a PNG, is the common case and goes unmentioned.
    for (int k = 0; k < n; ++k) {
      const std::string& note = exif_note[usable[k]];
      if (note.empty() || note == "no EXIF block" || note.rfind("not a JPEG", 0) == 0) continue;
      exif_notes.push_back({{"image", names[k]}, {"note", note + "; the default focal length is used"}});
    }
  }
  report["cameras"] = camera_report;
  if (!exif_notes.empty()) report["exif_notes"] = exif_notes;

  // Stages 3-7 (features, matching, verification, tracks, mapping), run once, and again
  // when a second attempt is worth it (below).
  size_t num_verified_pairs = 0;
  // guided: guided matching (retry_guided: also when every image got the fallback's
  // features, which are then what a second attempt would give them).
  auto attempt = [&](FeatureExtractor* ex, int min_features_x, double min_ct_x, bool fallback, bool free_gray,
                     bool guided, bool retry_guided, int* num_lowered, int* num_fallback) -> Status {
    *num_lowered = *num_fallback = 0;
    const Extraction ext = extraction(min_features_x, min_ct_x, fallback);
    std::vector<MapperImage> mimages(n);
    std::vector<PairCorrespondences> correspondences;
    std::vector<MapperPair> mpairs;
    json pair_report = json::array();
    // The verified pairs: candidates (vpairs) and their results, turned into the tracks'
    // correspondences and the mapper's pairs.
    std::vector<std::pair<int, int>> vpairs;
    std::vector<PairResult> vresults;
    auto CollectPairs = [&]() {
      correspondences.clear();
      mpairs.clear();
      pair_report = json::array();
      // The unverified pair with most matches (absent when every pair verified): what a
      // collection without a verified pair is told.
      json strongest_unverified;
      int verified = 0;
      for (size_t p = 0; p < vpairs.size(); ++p) {
        const PairResult& r = vresults[p];
        if (!r.verified) {
          if (strongest_unverified.is_null() || r.num_matches > strongest_unverified.value("matches", 0))
            strongest_unverified = {{"image1", names[vpairs[p].first]}, {"image2", names[vpairs[p].second]},
                                    {"matches", r.num_matches}, {"f_inliers", r.f_inliers.size()}};
          continue;
        }
        ++verified;
        const auto [a, b] = vpairs[p];
        correspondences.push_back({a, b, r.inliers});
        MapperPair mp;
        mp.image1 = a;
        mp.image2 = b;
        mp.inliers = r.inliers;
        mp.has_pose = r.has_pose;
        std::copy(r.R, r.R + 9, mp.rotation);
        std::copy(r.t, r.t + 3, mp.translation);
        mp.num_h_inliers = r.num_h_inliers;
        mp.num_e_inliers = r.has_pose ? r.num_e_inliers : 0;
        mpairs.push_back(std::move(mp));
        pair_report.push_back({{"image1", names[a]}, {"image2", names[b]}, {"matches", r.num_matches},
                               {"inliers", r.inliers.size()}, {"guided", r.guided}, {"e_inliers", r.num_e_inliers},
                               {"h_inliers", r.num_h_inliers}, {"configuration", r.model}});
        if (std::isfinite(r.log10_nfa)) pair_report.back()["log10_nfa"] = std::round(r.log10_nfa * 10) / 10;
      }
      json stage = {{"verified_pairs", verified}};
      if (!strongest_unverified.is_null()) stage["most_matches_unverified"] = strongest_unverified;
      return stage;
    };
    if (o.tracks_file.empty()) {
      // 3. Features.
      t0 = std::chrono::steady_clock::now();
      std::vector<Features> features;
      std::vector<char> lowered_image(n, 0);
      int num_shrunk = 0;
      int64_t num_masked = 0;
      // With --features, the names the images' features are stored under (and, by those,
      // their matches): their own, or their file names.
      std::vector<std::string> feature_names = names;
      if (!o.features_dir.empty()) {
        // The features of `tiepoint extract`, each checked against its image's size.
        std::vector<std::pair<int, int>> sizes;
        for (int k = 0; k < n; ++k) sizes.push_back({gray[usable[k]].width, gray[usable[k]].height});
        // An image of a folder's subfolder ("cam0/a.png") has its features where `extract
        // PHOTOS/` writes them (cam0/a.png.tpfeat), else, its file name being unique, where
        // `extract PHOTOS/*/*.png` does (a.png.tpfeat).
        for (int k = 0; k < n; ++k) {
          std::error_code ec;
          if (file_names_unique && file_names[k] != names[k] &&
              !fs::exists(StoredFeaturesPath(o.features_dir, names[k]), ec) &&
              fs::exists(StoredFeaturesPath(o.features_dir, file_names[k]), ec))
            feature_names[k] = file_names[k];
        }
        TIEPOINT_RETURN_IF_ERROR(ReadStoredFeatures(o.features_dir, feature_names, sizes, threads, &features));
      } else {
        std::vector<const GrayImage*> ptrs;
        for (int k = 0; k < n; ++k) ptrs.push_back(&gray[usable[k]]);
        std::vector<Status> fstatus;
        ex->ExtractBatch(ptrs, &features, &fstatus);
        for (int k = 0; k < n; ++k)
          if (!fstatus[k].ok()) return Status(fstatus[k].code(), names[k] + ": " + fstatus[k].message());
        for (int k = 0; k < n; ++k) lowered_image[k] = features[k].contrast_threshold < ext.sift.contrast_threshold;
        // The CUDA extractor: images with too few features again at lower thresholds.
        if (!ext.lower) {
          SiftOptions rule = ext.sift;
          rule.min_features = min_features_x;
          rule.min_contrast_threshold = min_ct_x;
          rule.fallback_min_features = ext.fallback_min_features;
          rule.fallback_min_contrast_threshold = ext.fallback_min_ct;
          TIEPOINT_RETURN_IF_ERROR(ExtractAgainWhileFewFeatures(ex, rule, ptrs, &features, &lowered_image, &fstatus));
          for (int k = 0; k < n; ++k)
            if (!fstatus[k].ok()) return Status(fstatus[k].code(), names[k] + ": " + fstatus[k].message());
        }
        // Features of shrunk images back to the full image's pixels (features/resize.h).
        for (int k = 0; k < n; ++k) {
          const auto [sx, sy] = Shrinkage(k);
          if (sx == 1.0 && sy == 1.0) continue;
          ++num_shrunk;
          KeypointsToFullImage(sx, sy, &features[k]);
        }
        // --mask-path, --camera-mask: the features on the masks' black pixels dropped.
        for (int k = 0; k < n && !masks.empty(); ++k) num_masked += ApplyFeatureMask(masks[usable[k]], &features[k]);
        for (int k = 0; k < n && !camera_mask.empty(); ++k) num_masked += ApplyFeatureMask(camera_mask, &features[k]);
      }
      int64_t total_features = 0;
      for (int k = 0; k < n; ++k) {
        const GrayImage& g = gray[usable[k]];
        mimages[k].name = names[k];
        mimages[k].camera_id = image_camera[k];
        const auto [sx, sy] = Shrinkage(k);
        for (const Keypoint& kp : features[k].keypoints) {
          Point2D p;
          p.x = kp.x + 0.5;
          p.y = kp.y + 0.5;
          mimages[k].keypoints.push_back(p);
          mimages[k].gray.push_back(GrayAt(g, (kp.x + 0.5) / sx - 0.5, (kp.y + 0.5) / sy - 0.5));
        }
        total_features += static_cast<int64_t>(features[k].size());
      }
      *num_lowered = static_cast<int>(std::count(lowered_image.begin(), lowered_image.end(), 1));
      if (ext.fallback_min_features > 0)
        for (int k = 0; k < n; ++k) *num_fallback += features[k].contrast_threshold <= min_ct_x * (1 + 1e-9);
      report["stages"]["extract"] = {{"seconds", Since(t0)}, {"features", total_features}};
      if (n > 0) {
        size_t fewest = features[0].size(), most = features[0].size();
        for (int k = 1; k < n; ++k) {
          fewest = std::min(fewest, features[k].size());
          most = std::max(most, features[k].size());
        }
        report["stages"]["extract"]["features_per_image"] = {fewest, most};
      }
      if (o.features_dir.empty()) {
        report["stages"]["extract"]["max_features"] = o.sift.max_features;
        report["stages"]["extract"]["max_image_size"] = o.max_image_size;
      }
      // (A features file does not hold the threshold its features passed.)
      if (o.features_dir.empty()) report["stages"]["extract"]["images_at_lower_contrast_threshold"] = *num_lowered;
      if (!masks.empty() || !camera_mask.empty()) report["stages"]["extract"]["features_masked"] = num_masked;
      if (num_shrunk > 0) {
        report["stages"]["extract"]["images_shrunk"] = num_shrunk;
      }
      if (ext.fallback_min_features > 0)
        report["stages"]["extract"]["images_given_more_features"] = *num_fallback;
      if (!o.features_dir.empty()) report["stages"]["extract"]["read_from"] = o.features_dir;
      if (retry_guided && *num_fallback == n) guided = true;
      Progress(o, (o.features_dir.empty() ? "extracted " : "read ") + std::to_string(total_features) + " features" +
                      (o.features_dir.empty() ? "" : " from " + o.features_dir));

      // 4. Matching.
      t0 = std::chrono::steady_clock::now();
      std::vector<const Features*> fptrs;
      for (const Features& f : features) fptrs.push_back(&f);
      std::vector<std::vector<FeatureMatch>> matches;
      if (o.matches_dir.empty()) {
        TIEPOINT_RETURN_IF_ERROR(matcher->MatchPairs(fptrs, pairs, &matches));
        report["stages"]["match"] = {{"seconds", Since(t0)}, {"pairs", pairs.size()}};
        Progress(o, "matched " + std::to_string(pairs.size()) + " pairs");
      } else {
        // The matches of `tiepoint match` (its verified pairs' inliers, where it verified).
        StoredMatchesSummary sm;
        // `match FEATURES/` names its files by the images' paths in the folder
        // ("cam0%2Fa.png--cam1%2Fa.png.tpmatch"), `match` of files given one by one by
        // their file names (where no two images share one).
        TIEPOINT_RETURN_IF_ERROR(ReadStoredMatches(o.matches_dir, feature_names,
                                                   file_names_unique ? file_names : std::vector<std::string>(),
                                                   features, pairs, threads, &matches, &sm));
        report["stages"]["match"] = {{"seconds", Since(t0)},
                                     {"pairs", pairs.size()},
                                     {"read_from", o.matches_dir},
                                     {"files_read", sm.files_read},
                                     {"pairs_without_file", sm.pairs_without_file},
                                     {"pairs_verified_in_files", sm.pairs_verified},
                                     {"pairs_rejected_in_files", sm.pairs_not_verified},
                                     {"matches", sm.matches}};
        Progress(o, "read the matches of " + std::to_string(sm.files_read) + " of " + std::to_string(pairs.size()) +
                        " pairs from " + o.matches_dir);
      }
      if (pairs_dropped > 0) report["stages"]["match"]["pairs_dropped_with_skipped_images"] = pairs_dropped;

      // 5. Verification, pairs spread over the threads.
      t0 = std::chrono::steady_clock::now();
      std::vector<PairResult> results(pairs.size());
  #pragma omp parallel for num_threads(threads) schedule(dynamic)
      for (size_t p = 0; p < pairs.size(); ++p) {
        std::vector<std::pair<uint32_t, uint32_t>> m;
        for (const FeatureMatch& fm : matches[p]) m.push_back({fm.index1, fm.index2});
        const auto [a, b] = pairs[p];
        VerifyPair(o, mimages[a].keypoints, mimages[b].keypoints, cameras.at(image_camera[a]),
                   cameras.at(image_camera[b]), m, !known.empty(), o.seed + p, &results[p]);
      }
      json guided_report;
      if (guided) {
        // Guided matching of the verified pairs (see the option).
        const auto tg = std::chrono::steady_clock::now();
        std::vector<std::vector<std::array<double, 2>>> und(n);
        for (int k = 0; k < n; ++k) und[k] = Undistorted(mimages[k].keypoints, cameras.at(image_camera[k]));
        int64_t before = 0, after = 0;
        int replaced = 0;
  #pragma omp parallel for num_threads(threads) schedule(dynamic) reduction(+ : before, after, replaced)
        for (size_t p = 0; p < pairs.size(); ++p) {
          if (!results[p].verified) continue;
          const auto [a, b] = pairs[p];
          std::vector<std::pair<uint32_t, uint32_t>> gm;
          GuidedMatch(o, features[a], features[b], und[a], und[b], results[p].F, &gm);
          PairResult g;
          g.num_matches = static_cast<int>(gm.size());
          g.log10_nfa = results[p].log10_nfa;
          VerifyPair(o, mimages[a].keypoints, mimages[b].keypoints, cameras.at(image_camera[a]),
                     cameras.at(image_camera[b]), gm, !known.empty(), o.seed + p, &g, true);
          before += static_cast<int64_t>(results[p].inliers.size());
          if (g.verified && g.inliers.size() > results[p].inliers.size()) {
            std::copy(results[p].F, results[p].F + 9, g.F);
            g.guided = true;
            results[p] = std::move(g);
            ++replaced;
          }
          after += static_cast<int64_t>(results[p].inliers.size());
        }
        guided_report = {{"seconds", Since(tg)}, {"pairs_replaced", replaced}, {"inliers_before", before},
                         {"inliers_after", after}};
      }
      vpairs = pairs;
      vresults = std::move(results);
      json verify = CollectPairs();
      verify["seconds"] = Since(t0);
      if (guided) report["stages"]["guided_matching"] = guided_report;
      Progress(o, "verified " + std::to_string(verify["verified_pairs"].get<int>()) + " of " +
                      std::to_string(pairs.size()) + " pairs");
      report["stages"]["verify"] = std::move(verify);
    } else {
      // Sequence mode: observations of `tiepoint track`.
      t0 = std::chrono::steady_clock::now();
      std::vector<TrackObservation> obs;
      TIEPOINT_RETURN_IF_ERROR(ReadTrackFile(o.tracks_file, &obs));
      if (obs.empty())
        return Status::InvalidInput(o.tracks_file + ": no observations (lines 'track_id frame x y' of `tiepoint track`)");
      std::vector<int> frame_to_image(n_in, -1);
      for (int k = 0; k < n; ++k) frame_to_image[usable[k]] = k;
      // track id -> (image, feature)
      std::map<int64_t, std::vector<std::pair<int, uint32_t>>> by_track;
      for (const TrackObservation& t : obs) {
        if (t.frame < 0 || t.frame >= n_in)
          return Status::InvalidInput(o.tracks_file + ": frame " + std::to_string(t.frame) +
                                      " is not among the " + std::to_string(n_in) + " images given");
        const int k = frame_to_image[t.frame];
        if (k < 0) continue;
        // Pixel centres at integers, as `tiepoint track` writes them (io/image.h).
        const GrayImage& gi = gray[usable[k]];
        if (!InsideImage(t.x, t.y, gi.width, gi.height))
          return Status::InvalidInput(o.tracks_file + ": track " + std::to_string(t.track_id) + " in frame " +
                                      std::to_string(t.frame) + " at (" + Number(t.x) + ", " + Number(t.y) +
                                      ") lies outside image '" + names[k] + "' (" + std::to_string(gi.width) +
                                      " x " + std::to_string(gi.height) + "): the tracks of other frames?");
        Point2D p;
        p.x = t.x + 0.5;
        p.y = t.y + 0.5;
        by_track[t.track_id].push_back({k, static_cast<uint32_t>(mimages[k].keypoints.size())});
        mimages[k].keypoints.push_back(p);
        mimages[k].gray.push_back(GrayAt(gi, t.x, t.y));
      }
      for (int k = 0; k < n; ++k) {
        mimages[k].name = names[k];
        mimages[k].camera_id = image_camera[k];
      }
      std::map<std::pair<int, int>, std::vector<std::pair<uint32_t, uint32_t>>> pm;
      for (const auto& [id, elems] : by_track)
        for (size_t a = 0; a < elems.size(); ++a)
          for (size_t b = a + 1; b < elems.size(); ++b) {
            auto x = elems[a], y = elems[b];
            if (x.first == y.first) continue;
            if (x.first > y.first) std::swap(x, y);
            if (o.pairs == PairSelection::kSequential && y.first - x.first > o.sequential_overlap) continue;
            pm[{x.first, y.first}].push_back({x.second, y.second});
          }
      report["stages"]["tracks_file"] = {{"seconds", Since(t0)}, {"observations", obs.size()}};
      t0 = std::chrono::steady_clock::now();
      std::vector<std::pair<std::pair<int, int>, std::vector<std::pair<uint32_t, uint32_t>>>> plist(pm.begin(), pm.end());
      std::vector<PairResult> results(plist.size());
  #pragma omp parallel for num_threads(threads) schedule(dynamic)
      for (size_t p = 0; p < plist.size(); ++p) {
        const auto [a, b] = plist[p].first;
        VerifyPair(o, mimages[a].keypoints, mimages[b].keypoints, cameras.at(image_camera[a]),
                   cameras.at(image_camera[b]), plist[p].second, !known.empty(), o.seed + p, &results[p]);
      }
      for (const auto& pl : plist) vpairs.push_back(pl.first);
      vresults = std::move(results);
      json verify = CollectPairs();
      verify["seconds"] = Since(t0);
      report["stages"]["verify"] = std::move(verify);
    }
    report["pairs"] = pair_report;
    // The grey images are not needed after extraction: their memory (4 bytes a pixel) goes
    // back before the mapping, unless a second attempt may need them. Their sizes stay.
    if (free_gray)
      for (GrayImage& g : gray) std::vector<float>().swap(g.pixels);

    // 6. Tracks.
    t0 = std::chrono::steady_clock::now();
    std::vector<int> num_features(n);
    for (int k = 0; k < n; ++k) num_features[k] = static_cast<int>(mimages[k].keypoints.size());
    std::vector<Track> tracks;
    TrackSummary ts;
    TIEPOINT_RETURN_IF_ERROR(BuildTracks(num_features, correspondences, 2, &tracks, &ts));
    report["stages"]["tracks"] = {{"seconds", Since(t0)},
                                  {"tracks", ts.num_tracks},
                                  {"observations", ts.num_observations},
                                  {"mean_length", ts.mean_track_length},
                                  {"conflicting_matches_split", ts.conflicting_matches},
                                  {"short_tracks_dropped", ts.dropped_short_tracks}};
    Progress(o, "built " + std::to_string(ts.num_tracks) + " tracks (" +
                    std::to_string(ts.conflicting_matches) + " matches not joined: they would put two features of one image in a track)");

    // 7. Mapping.
    t0 = std::chrono::steady_clock::now();
    MapperOptions mo2 = o.mapper;
    mo2.seed = o.seed;
    mo2.num_threads = threads;
    if (!known.empty()) mo2.refine_intrinsics = false;
    MapperSummary ms;
    auto progress = [&](int model, int image, int num_registered, int total) {
      Progress(o, "model " + std::to_string(model) + ": registered " + names[image] + " (" +
                      std::to_string(num_registered) + " of " + std::to_string(total) + ")");
    };
    // Self-calibrating, the first pass builds one model only, of at most
    // self_calibration_first_model_images images (its intrinsics are what the second pass
    // below needs).
    MapperOptions mo_first = mo2;
    if (known.empty()) {
      mo_first.first_model_only = true;
      mo_first.max_model_images = o.self_calibration_first_model_images;
    }
    TIEPOINT_RETURN_IF_ERROR(RunIncrementalMapper(mo_first, mimages, cameras, mpairs, tracks, &result->models, &ms, progress));
    // Self-calibration, second pass: the prior focal length (1.2 max(w, h)) can be far off
    // (the Middlebury rings: 2x and 4x), and the pairs' relative poses, the initial pair and
    // the pose-from-pair registrations were all computed with it. The intrinsics the first
    // model refined go back into the essential matrices of the verified pairs (their
    // fundamental-matrix inliers are kept), and the mapper runs again from there, holding
    // them while a model grows and refining them in its final adjustments (the first
    // pass's focal length is within 0.5% on the rings, 0.001% on fountain-P11); the second
    // result is kept when it is whole (one model of every image). When it is not, the first
    // pass runs again in full (every model, no bound on their size), and the result with
    // more images in its largest model is kept (ties: the second pass).
    if (known.empty() && !result->models.empty()) {
      const auto t1 = std::chrono::steady_clock::now();
      std::map<uint32_t, Camera> refined = cameras;
      for (const auto& [id, c] : result->models[0].cameras) refined[id] = c;
      std::vector<PairResult> second(vresults.size());
  #pragma omp parallel for num_threads(threads) schedule(dynamic)
      for (size_t p = 0; p < vresults.size(); ++p) {
        if (!vresults[p].verified) continue;
        const auto [a, b] = vpairs[p];
        second[p].num_matches = vresults[p].num_matches;
        second[p].log10_nfa = vresults[p].log10_nfa;
        VerifyPair(o, mimages[a].keypoints, mimages[b].keypoints, refined.at(image_camera[a]),
                   refined.at(image_camera[b]), vresults[p].f_inliers, false, o.seed + p, &second[p], true,
                   o.self_calibration_min_iterations);
      }
      std::swap(vresults, second);
      CollectPairs();
      const double reverify_seconds = Since(t1);
      std::vector<Track> tracks2;
      TrackSummary ts2;
      TIEPOINT_RETURN_IF_ERROR(BuildTracks(num_features, correspondences, 2, &tracks2, &ts2));
      std::vector<Reconstruction> models2;
      MapperSummary ms2;
      MapperOptions mo_second = mo2;
      mo_second.refine_intrinsics_final_only = true;
      TIEPOINT_RETURN_IF_ERROR(RunIncrementalMapper(mo_second, mimages, refined, mpairs, tracks2, &models2, &ms2, progress));
      auto registered = [](const std::vector<Reconstruction>& m) { return m.empty() ? size_t{0} : m[0].images.size(); };
      const size_t first_model = registered(result->models);
      const bool whole = models2.size() == 1 && registered(models2) == static_cast<size_t>(n);
      bool keep = whole;
      json pass = {{"registered_first_model", first_model}, {"reverify_seconds", reverify_seconds}};
      if (!keep) {
        std::swap(vresults, second);
        CollectPairs();
        result->models.clear();
        ms = MapperSummary();
        TIEPOINT_RETURN_IF_ERROR(RunIncrementalMapper(mo2, mimages, cameras, mpairs, tracks, &result->models, &ms, progress));
        pass["registered_first_pass_in_full"] = registered(result->models);
        keep = registered(models2) >= registered(result->models);
        std::swap(vresults, second);
        if (keep) CollectPairs();
      }
      pass["seconds"] = Since(t1);
      pass["kept"] = keep;
      pass["registered_second_pass"] = registered(models2);
      report["stages"]["self_calibration_pass"] = pass;
      if (keep) {
        result->models = std::move(models2);
        ms = std::move(ms2);
        ts = ts2;
        tracks = std::move(tracks2);
      } else {
        std::swap(vresults, second);
        CollectPairs();
      }
      report["pairs"] = pair_report;
    }
    report["stages"]["map"] = {{"seconds", Since(t0)},
                               {"registration_seconds", ms.seconds_registration},
                               {"triangulation_seconds", ms.seconds_triangulation},
                               {"ba_seconds", ms.seconds_ba},
                               {"local_ba", ms.local_ba_runs},
                               {"global_ba", ms.global_ba_runs},
                               {"sparse_ba", ms.sparse_ba_runs},
                               {"filtered_observations", ms.filtered_observations},
                               {"wide_angle_tracks", ms.wide_angle_tracks},
                               {"merges", ms.merges},
                               {"min_model_size", ms.min_model_size},
                               {"init_min_points", ms.init_min_points},
                               {"models_below_min_size", ms.models_below_min_size},
                               {"depth_scale_merges", ms.depth_scale_merges},
                               {"depth_scale_merges_undone", ms.depth_scale_merges_undone},
                               {"shared_images_merges", ms.shared_images_merges},
                               {"pair_registrations", ms.pair_registrations},
                               {"match_supported_registrations", ms.match_supported_registrations}};
    json unregistered = json::array();
    for (int k = 0; k < n; ++k)
      if (!ms.images[k].registered) unregistered.push_back({{"image", names[k]}, {"reason", ms.images[k].reason}});
    for (const json& s : skipped) unregistered.push_back({{"image", s["image"]}, {"reason", "unreadable: " + s["reason"].get<std::string>()}});
    report["unregistered_images"] = unregistered;
    json models = json::array();
    for (size_t m = 0; m < result->models.size(); ++m) {
      const Reconstruction& r = result->models[m];
      json cams = json::array();
      for (const auto& [id, c] : r.cameras)
        cams.push_back({{"camera_id", id}, {"model", CameraModelName(c.model)}, {"width", c.width},
                        {"height", c.height}, {"params", c.params},
                        {"focal_source", focal_source.count(id) ? focal_source[id] : "default"},
                        {"initial_focal_px", cameras.count(id) ? cameras.at(id).fx() : 0.0}});
      models.push_back({{"index", m},
                        {"registered_images", r.images.size()},
                        {"points", r.points3D.size()},
                        {"observations", r.NumObservations()},
                        {"mean_track_length", r.MeanTrackLength()},
                        {"mean_reprojection_error_px", r.MeanReprojectionError()},
                        // What `colmap model_analyzer` prints: the mean of the points' errors.
                        {"mean_point_error_px", r.MeanPointError()},
                        {"initial_pair", {names[ms.initial_pairs[m].first], names[ms.initial_pairs[m].second]}},
                        {"cameras", cams}});
    }
    report["models"] = models;
    report["images"] = n_in;
    num_verified_pairs = mpairs.size();
    return Status::Ok();
  };
  // The grey images stay for a second attempt when they are small enough.
  size_t gray_bytes = 0;
  for (const GrayImage& g : gray) gray_bytes += g.pixels.size() * sizeof(float);
  const bool may_retry = fallback_allowed && gray_bytes <= o.retry_max_image_bytes;
  int num_lowered = 0, num_fallback = 0;
  TIEPOINT_RETURN_IF_ERROR(attempt(extractor.get(), o.min_features_per_image, o.min_contrast_threshold, true,
                                   !may_retry, o.guided_matching == GuidedMatching::kOn,
                                   o.guided_matching == GuidedMatching::kRetry, &num_lowered, &num_fallback));
  // Second attempt: images of little contrast (some were already extracted at a lower
  // threshold) and a model that is not whole (no model, several, or images left out): the
  // features are extracted again with up to retry_min_features per image, down to
  // retry_min_contrast_threshold, and everything after runs again. The result that
  // registers more images in its largest model is kept (ties: the first). Not when every
  // image already had those features (all below min_features at min_contrast_threshold:
  // the fallback above), as on the dark, untextured Middlebury dino, whose ring closes so
  // in one attempt.
  auto largest = [](const std::vector<Reconstruction>& m) { return m.empty() ? size_t{0} : m[0].images.size(); };
  if (may_retry && num_lowered > 0 && num_fallback < n &&
      (result->models.size() != 1 || largest(result->models) < static_cast<size_t>(n))) {
    const auto t1 = std::chrono::steady_clock::now();
    Progress(o, "the model is not whole and " + std::to_string(num_lowered) +
                    " images have little contrast: a second attempt with up to " +
                    std::to_string(o.retry_min_features) + " features per image");
    std::vector<Reconstruction> first_models = std::move(result->models);
    result->models.clear();
    const json first_report = report;
    const size_t first_pairs = num_verified_pairs;
    // Where neither attempt lowers the threshold inside the extractor (the CUDA extractor),
    // both have the same options: the first attempt's extractor serves again.
    const Extraction second = extraction(o.retry_min_features, o.retry_min_contrast_threshold, false);
    std::unique_ptr<FeatureExtractor> extractor2;
    FeatureExtractor* ex2 = extractor.get();
    if (second.lower || first.lower) {
      TIEPOINT_RETURN_IF_ERROR(FeatureExtractor::Create(second.sift, o.device, &extractor2));
      ex2 = extractor2.get();
    }
    int num_lowered2 = 0, num_fallback2 = 0;
    TIEPOINT_RETURN_IF_ERROR(attempt(ex2, o.retry_min_features, o.retry_min_contrast_threshold, false,
                                     true, o.guided_matching != GuidedMatching::kOff, false, &num_lowered2,
                                     &num_fallback2));
    const bool keep = largest(result->models) > largest(first_models);
    auto sizes = [](const std::vector<Reconstruction>& models) {
      json a = json::array();
      for (const Reconstruction& m : models) a.push_back(m.images.size());
      return a;
    };
    const json first_summary = sizes(first_models), second_summary = sizes(result->models);
    if (!keep) {
      result->models = std::move(first_models);
      report = first_report;
      num_verified_pairs = first_pairs;
    }
    report["second_attempt"] = {{"seconds", Since(t1)},
                                {"min_features", o.retry_min_features},
                                {"min_contrast_threshold", o.retry_min_contrast_threshold},
                                {"first_attempt_model_sizes", first_summary},
                                {"second_attempt_model_sizes", second_summary},
                                {"kept", keep ? "second" : "first"}};
  }
  for (GrayImage& g : gray) std::vector<float>().swap(g.pixels);
  {
    // The backends' buffers and streams (with --device cuda, pinned and device memory).
    const auto t_release = std::chrono::steady_clock::now();
    extractor.reset();
    matcher.reset();
    report["stages"]["release"] = {{"seconds", Since(t_release)}};
  }
  if (result->models.empty()) {
    // Why, as far as the report can say: models too small to keep, and the strongest pair.
    std::string why = std::to_string(num_verified_pairs) + (num_verified_pairs == 1 ? " verified pair" : " verified pairs");
    const json* best = nullptr;
    if (report.contains("pairs"))
      for (const json& p : report["pairs"])
        if (!best || p.value("inliers", 0) > best->value("inliers", 0)) best = &p;
    if (best)
      why += "; the most inliers: " + std::to_string(best->value("inliers", 0)) + " in " +
             best->value("image1", std::string()) + " - " + best->value("image2", std::string()) + " (" +
             best->value("configuration", std::string()) + ")";
    const json verify = report.contains("stages") ? report["stages"].value("verify", json::object()) : json::object();
    if (!best && verify.contains("most_matches_unverified")) {
      // No pair verified: how close the strongest came.
      const json& u = verify["most_matches_unverified"];
      why += "; the most matches: " + std::to_string(u.value("matches", 0)) + ", in " +
             u.value("image1", std::string()) + " - " + u.value("image2", std::string()) + ", of which " +
             std::to_string(u.value("f_inliers", 0)) + " fit a fundamental matrix; a pair needs " +
             std::to_string(o.verify_min_inliers) + " inliers, or " + std::to_string(2 * o.verify_min_inliers) +
             " without a relative pose";
      const json extract = report["stages"].value("extract", json::object());
      if (extract.contains("features_per_image") && extract["features_per_image"].size() == 2)
        why += "; features per image: " + std::to_string(extract["features_per_image"][0].get<int64_t>()) + " to " +
               std::to_string(extract["features_per_image"][1].get<int64_t>());
    }
    const json map = report.contains("stages") ? report["stages"].value("map", json::object()) : json::object();
    const int below = map.value("models_below_min_size", 0);
    if (below > 0)
      return Status::InsufficientData("no model of at least " + std::to_string(map.value("min_model_size", 0)) +
                                      " images (" + std::to_string(below) + " smaller dropped; " + why +
                                      "): nothing written under sparse/");
    return Status::InsufficientData("no image pair initialises a model (" + why +
                                    "): nothing written under sparse/");
  }

  // Colours: of every registered image, held from the read or read again.
  t0 = std::chrono::steady_clock::now();
  ColourSummary colours;
  std::map<std::string, Image8> held_colour;
  for (int i = 0; i < n_in; ++i)
    if (read_status[i].ok() && !colour[i].empty()) held_colour.emplace(names_given[i], std::move(colour[i]));
  TIEPOINT_RETURN_IF_ERROR(ColourReconstructionPoints(by_name, threads, &result->models, &colours, &held_colour));
  held_colour.clear();
  report["stages"]["colour"] = {{"seconds", Since(t0)}, {"images_read", colours.images_read},
                                {"images_decoded_at_read", colours.images_decoded_before},
                                {"points_coloured", colours.points_coloured}, {"unreadable", colours.failures}};
  for (const std::string& f : colours.failures)
    std::fprintf(stderr, "tiepoint reconstruct: points keep grey colours: %s\n", f.c_str());
  Progress(o, "coloured " + std::to_string(colours.points_coloured) + " points");

  // 8. Outputs: everything under a temporary directory, renamed into place at the end.
  t0 = std::chrono::steady_clock::now();
  const fs::path out(o.output_dir);
  const fs::path tmp = out / (".tmp-reconstruct-" + std::to_string(getpid()));
  std::error_code ec;
  fs::remove_all(tmp, ec);
  // Removed at return, or by the SIGINT/SIGTERM handling if the process is stopped first.
  const LiveTemporaryDirectory cleanup(tmp.string());
  for (size_t m = 0; m < result->models.size(); ++m) {
    const fs::path dir = tmp / "sparse" / std::to_string(m);
    fs::create_directories(dir, ec);
    if (ec) return Status::IoError(dir.string() + ": " + ec.message());
    if (o.write_text) TIEPOINT_RETURN_IF_ERROR(WriteColmapModel(dir.string(), result->models[m], ColmapFormat::kText));
    if (o.write_binary) TIEPOINT_RETURN_IF_ERROR(WriteColmapModel(dir.string(), result->models[m], ColmapFormat::kBinary));
    TIEPOINT_RETURN_IF_ERROR(WriteReconstructionBal((dir / "model.bal").string(), result->models[m]));
  }
  TIEPOINT_RETURN_IF_ERROR(WriteReconstructionPly((tmp / "points.ply").string(), result->models[0]));
  TIEPOINT_RETURN_IF_ERROR(WriteReconstructionOverviewSvg((tmp / "overview.svg").string(), result->models[0]));
  report["stages"]["write"] = {{"seconds", Since(t0)}};
  report["total_seconds"] = Since(t_all);
  report["build"] = DescribeBuild();
  report["threads"] = threads;
  report["device"] = ToString(o.device);
  TIEPOINT_RETURN_IF_ERROR(WriteJson((tmp / "report.json").string(), report));
  // One step: a signal or a failed rename leaves the old outputs or the new ones, not a mix.
  std::vector<std::pair<std::string, std::string>> moves;
  for (const char* name : {"sparse", "points.ply", "overview.svg", "report.json"})
    moves.emplace_back((tmp / name).string(), (out / name).string());
  return ReplaceOutputs(moves);
}

}  // namespace tiepoint
