// Photos in, cameras and points out: the pipeline behind `tiepoint reconstruct`.
//
//  1. read the images (unreadable ones are named, skipped and reported);
//  2. SIFT on each (features/sift.h, CPU or CUDA), upsampled first octave by default;
//  3. descriptor matching of the chosen pairs (features/matcher.h, ratio test);
//  4. two-view verification of each pair (solver/geometry/two_view_geometry.h): a
//     fundamental matrix for the inliers, then with the cameras' intrinsics (given, else
//     the focal length prior of the JPEG's EXIF, io/exif.h, else f = 1.2 max(width,
//     height), as COLMAP) an essential matrix for the relative pose and a
//     homography for the planar / pure-rotation test (COLMAP's classification);
//  5. tracks (sfm/tracks.h) and the incremental mapper (sfm/incremental_mapper.h);
//     images of the least contrast get more features at once (retry_min_features below);
//     when images of little contrast leave the result incomplete, steps 2-5 run a second
//     time with more features for every image and the better result is kept;
//  6. outputs into OUT/ (written under a temporary name and renamed at the end, so a
//     crash or kill leaves no half-written model):
//       OUT/sparse/N/{cameras,images,points3D}.{txt,bin}  COLMAP model, largest first
//       OUT/sparse/N/model.bal                             BAL export
//       OUT/points.ply                                     coloured points + camera centres
//     (each point's colour is the mean of the image colours at its observations, from
//     the first decoding of the images where it gave them (PNG, TIFF, PGM, PPM) and
//     memory allows, else read again, see ColourReconstructionPoints)
//       OUT/report.json, OUT/overview.svg
// Sequence mode (`tracks_file`): correspondences come from `tiepoint track` output
// ("track_id frame x y", frame = index into the images) instead of SIFT matching.
// Stored correspondences (`features_dir`, `matches_dir`): steps 2 and 3 read what
// `tiepoint extract` and `tiepoint match` wrote (sfm/stored_correspondences.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "features/matcher.h"
#include "features/sift.h"
#include "io/base/device.h"
#include "io/base/status.h"
#include "io/reconstruction.h"
#include "nlohmann/json.hpp"
#include "sfm/incremental_mapper.h"

namespace tiepoint {

enum class PairSelection { kExhaustive, kSequential, kFile };

enum class GuidedMatching { kOff, kRetry, kOn };

struct ReconstructionPipelineOptions {
  std::vector<std::string> image_paths;
  // The images' names in the model (COLMAP's image names), one per path; empty: their file
  // names. Images from a folder are named by their paths relative to it ("100MEDIA/
  // DJI_0001.JPG", io/image.h ExpandImageArguments). Names must be unique.
  std::vector<std::string> image_names;
  std::string output_dir;
  Device device = Device::kCpu;
  CameraModelId camera_model = CameraModelId::kSimpleRadial;
  // One camera for all images of one size (else one camera per image, as COLMAP's default).
  // Its initial focal length: the images' EXIF prior when they all agree, else the median
  // of the priors of those that have one, else 1.2 max(width, height).
  bool single_camera = false;
  // One camera for the images of one size in each folder (COLMAP's ImageReader.
  // single_camera_per_folder): the images of a rig's cam0/ share one, those of cam1/ another,
  // whether given as files, as those folders or as the folder above them. Not with
  // single_camera.
  bool single_camera_per_folder = false;
  // Known intrinsics (lines "NAME fx fy cx cy" or Middlebury *_par.txt): held fixed. NAME
  // is the image's name, or its file name where no two images share one, or "*".
  std::string intrinsics_file;
  // Every camera's initial parameters (COLMAP's ImageReader.camera_params): camera_model's,
  // in COLMAP's order and pixel convention (the top-left pixel's centre at (0.5, 0.5)), in
  // place of the EXIF prior or the default; refined as those are. Not with intrinsics_file.
  std::vector<double> camera_params;
  PairSelection pairs = PairSelection::kExhaustive;
  int sequential_overlap = 10;  // K of sequential:K
  std::string pairs_file;       // io/pairs_file.h: lines "NAME1 NAME2"
  std::string tracks_file;      // sequence mode
  // Correspondences from files (sfm/stored_correspondences.h): the features of `tiepoint
  // extract` in features_dir (<image name>.tpfeat, or <file name>.tpfeat for an image of a
  // subfolder whose file name is unique), in place of extraction, and the
  // matches of `tiepoint match` in matches_dir (needs features_dir), in place of matching,
  // for the pairs chosen by `pairs`. The images are still read (sizes, EXIF, colours). No
  // second attempt (the features are not the pipeline's to extract again).
  std::string features_dir;
  std::string matches_dir;
  // Feature masks (io/mask.h, COLMAP's ImageReader.mask_path): image NAME's mask is
  // mask_path/NAME.png, and the features extracted on its black pixels are dropped; an
  // image without a mask file keeps all (report: stages.read.images_without_mask). A mask
  // that cannot be read or is of another size stops the run (kInvalidInput/kIoError naming
  // it) before any extraction. Not with tracks_file or features_dir (no extraction).
  std::string mask_path;
  // One mask for every image (COLMAP's ImageReader.camera_mask_path): a dashboard, a
  // watermark, a vignette. Each image must have its size (kInvalidInput naming both); with
  // mask_path, a feature must pass both. Not with tracks_file or features_dir.
  std::string camera_mask;
  int num_threads = 0;
  SiftOptions sift;             // max_features 8192, upsample on (set by the constructor)
  // Images with a side over this many pixels are held shrunk to fit from their reading on
  // and SIFT runs on them so (features/resize.h), as COLMAP's SiftExtraction.max_image_size;
  // the features are mapped back to the full image, whose size the camera keeps
  // (`reconstruct --max-image-size`; 0: never; not with tracks_file or features_dir, which
  // bring their own correspondences). Three 6000 x 4000 views with 2 threads: 7.9 GB of
  // memory at full size (SIFT's upsampled scale space), 2.3 GB shrunk.
  int max_image_size = 3200;
  // Images of little contrast (the dark Middlebury dino: ~170 features at the default
  // threshold) are extracted again with sift.contrast_threshold halved, not below
  // min_contrast_threshold, while they give fewer than min_features_per_image (`reconstruct
  // --min-features`, `--min-contrast-threshold`; 0 features: never).
  int min_features_per_image = 500;
  double min_contrast_threshold = 0.01;
  // An image that reaches min_features_per_image only at min_contrast_threshold, or not
  // at all, gets at once up to retry_min_features, down to retry_min_contrast_threshold
  // (report: extract.images_given_more_features; on the CPU from the same pass, see
  // SiftOptions::fallback_min_features). A second attempt, when some images had little
  // contrast (were extracted at a lower threshold), not all of them got those features, and
  // the model is not whole: extraction again with up to retry_min_features per image, down
  // to retry_min_contrast_threshold, then everything after it; the result with more images
  // in its largest model is kept. Only when the grey images take at most
  // retry_max_image_bytes (they are kept for it). retry_min_features 0: neither
  // (`reconstruct --no-second-attempt`).
  int retry_min_features = 2000;
  double retry_min_contrast_threshold = 0.0025;
  size_t retry_max_image_bytes = size_t{1} << 30;
  // Self-calibrating (no intrinsics given), the mapper runs twice: first one model of at
  // most this many images, whose refined intrinsics seed the second run (0: no bound). On
  // fountain-P11 a first model of 6 images gives the focal length of one of 11 to 0.001%
  // and the same final model, in 3.5 s of mapping instead of 5.8 (this VM, 2 threads).
  int self_calibration_first_model_images = 6;
  // Self-calibrating, the fewest RANSAC samples of the first verification's essential
  // matrices (made with the prior focal length, which can be 2-4x off: they pick the first
  // pass's initial pair and keep pairs of 15-29 fundamental-matrix inliers) and of the whole
  // second verification (each verified pair's essential matrix and homography again, among
  // its fundamental matrix's inliers, with the first model's intrinsics); past it, the
  // adaptive rule at 99.99% confidence and the give-up bound decide. The fundamental
  // matrices, and everything with known intrinsics, keep RansacOptions' 100 (COLMAP's
  // min_num_trials): with intrinsics, 30 split the dino's model at 3 more RANSAC seeds of 41
  // (its essential matrices decide which matches go into the tracks). On the dino ring
  // (one thread) the two verifications took 0.71-0.75 and 0.09-0.14 s where 100 took
  // 0.93-1.0 and 0.22-0.23, for models whose errors agree to four digits on both rings; the
  // dino's is whole at the same 38 RANSAC seeds of 41.
  int self_calibration_min_iterations = 30;
  MatcherOptions matcher;
  double verify_max_error_px = 4.0;
  int verify_min_inliers = 15;
  // Guided matching (COLMAP's guided_matching): each verified pair is matched again among
  // the feature pairs its fundamental matrix allows (each point within verify_max_error_px
  // of the other's epipolar line), the ratio test taken among those candidates only, and
  // verified again; the result replaces the pair's when it verifies with more inliers.
  // Weakly textured pairs, whose true matches lose the ratio test to look-alikes elsewhere
  // in the image, gain the most. Off by default, as in COLMAP: the ratio test among a
  // band's candidates also passes by chance, and so does a false pair's F. On the dino's
  // pairs, matching against image 2 mirrored through its centre (a null model) gives
  // 60-340 such matches per pair; false pairs between opposite views grow from 15 inliers
  // to 100-190, and with the GPU's features the second attempt then ends in 10 + 6 images
  // instead of one model of 16. The temple's columns, repeated along its epipolar lines,
  // gain false matches (median rotation error 0.27 -> 0.80 degrees). kRetry: in the second
  // attempt only (images of little contrast), or in the first when every image got its
  // features there; kOn: in every attempt. Cost: every feature
  // pair of a verified pair is tested against the band (n1 n2 per pair, on the CPU).
  GuidedMatching guided_matching = GuidedMatching::kOff;
  uint64_t seed = 0;
  MapperOptions mapper;
  bool write_text = true, write_binary = true;
  bool show_progress = false;  // a progress line per stage and a line per registered image

  ReconstructionPipelineOptions() {
    sift.max_features = 8192;
    sift.upsample = true;
  }
  Status Check() const;
};

struct ReconstructionPipelineResult {
  std::vector<Reconstruction> models;
  nlohmann::json report;  // what report.json holds
};

// What ColourReconstructionPoints did.
struct ColourSummary {
  int images_read = 0;
  int images_decoded_before = 0;  // of images_read, taken from `decoded`, not read again
  int64_t points_coloured = 0;
  std::vector<std::string> failures;  // images that could not be read again (messages)
};

// Gives each 3D point of `models` the mean RGB over its observations of the image colour
// at the observation (bilinear; COLMAP's Reconstruction::ExtractColorsForAllImages does
// the same). `paths` maps an image name (Image::name) to its file. Each registered image is
// read once through ReadImage8, on up to num_threads threads, each holding one image at a
// time, unless `decoded` holds it by name already (ReadImage8's samples of that file);
// grey images give R = G = B. A point none of whose images can be read keeps its colour,
// and the images are listed in summary->failures (it is not an error).
Status ColourReconstructionPoints(const std::map<std::string, std::string>& paths, int num_threads,
                                  std::vector<Reconstruction>* models, ColourSummary* summary,
                                  const std::map<std::string, Image8>* decoded = nullptr);

// Runs everything and writes the outputs. Errors: kInvalidInput for duplicate image names
// (naming both paths), a bad intrinsics, pairs or tracks file; kInsufficientData (exit 1)
// when fewer than two images can be read or no pair initialises a model (nothing written
// under sparse/); kUnavailable for --device cuda without a GPU.
Status RunReconstructionPipeline(const ReconstructionPipelineOptions& options,
                                 ReconstructionPipelineResult* result);

}  // namespace tiepoint
