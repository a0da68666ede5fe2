// The incremental mapper, in the manner of Bundler and COLMAP, on tiepoint's own parts:
// two-view initialisation, image registration by absolute pose (P3P in LO-RANSAC,
// solver/geometry/absolute_pose.h), multi-view triangulation (solver/geometry/
// triangulation.h), bundle adjustment with shared intrinsics (solver/reconstruction_ba.h),
// outlier filtering after each adjustment.
//
// Loop (per model):
//  1. Initial pair: verified pairs with a relative pose (essential matrix with the
//     cameras' current intrinsics), not dominated by a homography (H inliers / E inliers
//     below max_h_inlier_ratio), sorted by inlier count; the first that triangulates at
//     least init_min_points points with a median triangulation angle of at least
//     init_min_tri_angle_deg, and survives a two-view BA, starts the model.
//  2. Next image: among unregistered images, those seeing most triangulated points, ranked
//     by a visibility pyramid score (how evenly the points spread over the image, as
//     COLMAP); the first whose absolute pose has at least abs_pose_min_inliers inliers
//     within abs_pose_max_error_px is registered. An image that sees few triangulated
//     points (a ring's views that overlap two at a time) registers from fewer inliers
//     (8) when a verified pair with a registered image agrees: its relative rotation within
//     2 degrees of the pose's, or, from 10 inliers, 80% of its matches within 4 px of the
//     epipolar geometry that the two poses give.
//  3. The new image continues existing points (observations within
//     filter_max_reproj_error_px) and triangulates tracks that now have two registered
//     views (angle >= tri_min_angle_deg, in front, within the error).
//  4. Local BA over the new image and the images sharing most points with it; filter; when
//     the model has grown by global_ba_ratio since the last global BA, global BA over all,
//     filter, retriangulate.
//  5. When nothing more registers: a final global BA; images left over may start another
//     model. Models whose common tracks agree on a similarity (RANSAC over 3-point fits of
//     the tracks' two points) are merged, adjusted together and grown further. Models that
//     share too few tracks are bridged: each registers the other's images that it can
//     (those with a verified pair into it), so that an image belongs to both; its two poses
//     then fix the rotation and its centre, and the common points' distances from that
//     centre the scale. With fewer than two common points: where two images are in both
//     models, the first's poses fix the rotation and the two centres the scale, when the
//     second image agrees (its orientations and the centres' direction within 2 degrees);
//     else, from one image, the ratio of the median depths of the points it sees in each
//     model, kept only when the merged model then holds merge_min_cross_points points seen
//     from both sides of the join elsewhere than in that image (else both models stay as
//     they were). A merged model is adjusted, then its tracks are retriangulated at
//     merge_retriangulation_factor times filter_max_reproj_error_px, halved down to 1x with
//     a global BA after each, so that where the similarity is off (the dino ring's second
//     joint) the tracks still come in and pull the join straight. What stays apart comes
//     out as separate models, largest first.
// Coordinates are COLMAP's (io/reconstruction.h): a keypoint (x, y) of tiepoint's features
// enters as (x + 0.5, y + 0.5).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "io/base/status.h"
#include "io/reconstruction.h"
#include "sfm/tracks.h"
#include "solver/reconstruction_ba.h"

namespace tiepoint {

struct MapperOptions {
  int init_min_points = 100;
  double init_min_tri_angle_deg = 4.0;
  double max_h_inlier_ratio = 0.8;
  int init_max_trials = 20;
  double abs_pose_max_error_px = 8.0;
  int abs_pose_min_inliers = 15;
  double abs_pose_min_inlier_ratio = 0.2;
  double tri_min_angle_deg = 1.5;
  double filter_max_reproj_error_px = 4.0;
  // After two models merge: tracks retriangulated with filter_max_reproj_error_px times this
  // factor, halved down to 1, with a global adjustment after each (1: off), so tracks where
  // the merge's similarity is off come in and pull the join straight.
  double merge_retriangulation_factor = 8.0;
  // A merge whose scale came from depths (step 5) stands only when, after the
  // retriangulation above, this many points have views in both former models other than
  // the shared image: tracks that meet where else the models join and agree with it.
  int merge_min_cross_points = 10;
  double filter_min_tri_angle_deg = 1.5;
  // No point is seen from two views whose rays to it are more than this apart (degrees;
  // 180: no limit). For both views to see the front of a surface patch, each must see it
  // at least half this angle from its normal, and SIFT does not match across views that
  // oblique (its repeatability falls off beyond about 60 degrees of viewpoint change). Such
  // points come from false matches between views from opposite sides of a ring, where the
  // epipolar constraint is weak; they are not created, not continued, and removed by the
  // filter.
  double max_tri_angle_deg = 120.0;
  int local_ba_num_images = 6;
  double global_ba_ratio = 1.1;
  int max_models = 10;
  // A model of fewer images is dropped (its images are reported as not registered). As in
  // COLMAP, where fewer images take part (those in at least one pair), that number is the
  // minimum instead, so that two photos give a model of two; never below 2.
  int min_model_size = 3;
  // Intrinsics: fixed (known calibration) or refined by BA.
  bool refine_intrinsics = true;
  // With refine_intrinsics: refined in each model's final adjustments only, held while it
  // grows (the second pass of a self-calibration, whose intrinsics come from the first).
  bool refine_intrinsics_final_only = false;
  bool refine_principal_point = false;  // in every adjustment (else as below)
  // Radial terms are refined in global adjustments once a model holds this many images,
  // and in each model's final adjustment.
  int refine_extra_min_images = 10;
  // The principal point is refined in the final adjustments of a model that holds this
  // many images (0: never), unless it leaves the image's middle (max_principal_point_shift of
  // max(width, height) from the centre): then it goes back to the centre and stays.
  int refine_principal_point_min_images = 8;
  double max_principal_point_shift = 0.1;
  // Each model's radial terms are kept only when they lower the final adjustment's cost by
  // more than this fraction against the same model with radial terms zero.
  double min_radial_gain = 0.02;
  // Likewise the refined principal point against the image centre.
  double min_principal_point_gain = 0.01;
  // A model of two images (whose intrinsics are held while it grows): the focal length
  // refined in its final adjustment is kept when it lowers the cost by more than this
  // fraction against the focal length held (negative: never refined).
  double min_two_view_focal_gain = 0.02;
  // PINHOLE and OPENCV: fx and fy move together (keeping the ratio they start with) while a
  // model grows; in the final adjustments of a model of at least this many images (0:
  // never) they are let apart, and kept apart only when that lowers the cost by more than
  // min_aspect_ratio_gain and leaves fy / fx within max_aspect_ratio_change (a fraction) of
  // its start.
  int refine_aspect_ratio_min_images = 8;
  double min_aspect_ratio_gain = 0.01;
  double max_aspect_ratio_change = 0.1;
  int ba_local_max_iterations = 25;
  int ba_global_max_iterations = 50;
  // Function tolerance of the adjustments while a model grows or merges (LM stops when an
  // iteration lowers the cost by less than this fraction); each model's final adjustments
  // use ba_final_function_tolerance. At 1e-4 the dino's adjustments take 0.34 s instead
  // of 0.75 (self-calibrated, 51 of them), and the rings, fountain-P11, balbianello and KITTI
  // end within 0.01 degrees of the models at 1e-6 (most the same to the third decimal).
  double ba_function_tolerance = 1e-4;
  // The same for each model's final adjustments (intrinsics refined). Their last steps at
  // 1e-6 lowered the cost by 1e-6 to 1e-5 of it each, for six to eight steps on the dino
  // ring's 16 images; the rings' and balbianello's errors at 1e-5 are those at 1e-6 to
  // 0.001 degrees.
  double ba_final_function_tolerance = 1e-5;
  // ReconstructionBAOptions::step_extension of every adjustment (0: plain LM).
  double ba_step_extension = 1.5;
  uint64_t seed = 0;
  int num_threads = 0;
  // Linear solver of every bundle adjustment (solver/reconstruction_ba.h).
  ReconstructionLinearSolver ba_linear_solver = ReconstructionLinearSolver::kDenseSchur;
  // With ba_linear_solver kDenseSchur and this > 0: bundles with at least this many
  // variable images use kSparseSchur (CHOLMOD) instead (`reconstruct --ba-solver auto`, the
  // default: dense Cholesky's O(n^3) on the reduced system is the cheaper one for the small
  // local bundles, CHOLMOD for the global bundles of large models; the two give the same
  // steps to rounding).
  int ba_sparse_from_images = 0;
  // Build one model only (no others, no merging): the first pass of a self-calibration,
  // which needs only the intrinsics the first model refines.
  bool first_model_only = false;
  // Stop a model's growth at this many images (0: never), then its final adjustments run.
  int max_model_images = 0;

  Status Check() const;
};

// One image as the mapper sees it.
struct MapperImage {
  std::string name;
  uint32_t camera_id = 0;
  std::vector<Point2D> keypoints;  // COLMAP convention; point3D_id ignored
  std::vector<uint8_t> gray;       // optional: one value per keypoint, for point colours
};

// A verified pair, with its relative pose when it has one.
struct MapperPair {
  int image1 = 0, image2 = 0;
  std::vector<std::pair<uint32_t, uint32_t>> inliers;  // feature indices
  bool has_pose = false;
  double rotation[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};  // cam2_from_cam1
  double translation[3] = {0, 0, 0};
  int num_h_inliers = 0;  // inliers of a homography fitted to the same matches
  // Inliers of the essential matrix behind the relative pose (0 without a pose): fewer
  // than `inliers` when those are the fundamental matrix's (self-calibration).
  int num_e_inliers = 0;
};

struct MapperImageStatus {
  bool registered = false;
  int model = -1;
  std::string reason;  // why not registered
};

struct MapperSummary {
  std::vector<MapperImageStatus> images;
  std::vector<std::pair<int, int>> initial_pairs;  // per model
  int local_ba_runs = 0, global_ba_runs = 0;
  int sparse_ba_runs = 0;  // of those, run with kSparseSchur by ba_sparse_from_images
  double seconds_registration = 0, seconds_triangulation = 0, seconds_ba = 0;
  int64_t filtered_observations = 0;
  // Tracks whose point was not created or was removed, or that had a view not added,
  // because two of the views' rays would be more than max_tri_angle_deg apart.
  int64_t wide_angle_tracks = 0;
  int merges = 0;  // models merged into larger ones through common tracks
  // The minimum model size applied (see MapperOptions::min_model_size), and the models
  // built and dropped for having fewer images.
  int min_model_size = 0;
  int models_below_min_size = 0;
  // The initial pair's minimum number of points the models were built with: init_min_points,
  // or, where no model came of that, half or a quarter of it (RunIncrementalMapper).
  int init_min_points = 0;
  // Of those, merges whose scale came from the depths seen by the shared image (step 5),
  // and such merges undone for want of points across the join.
  int depth_scale_merges = 0, depth_scale_merges_undone = 0;
  // Merges whose similarity came from two images in both models (step 5).
  int shared_images_merges = 0;
  int pair_registrations = 0;  // images registered by a pair's pose and a fitted distance
  // Images registered from fewer than abs_pose_min_inliers 2D-3D inliers because a pair's
  // matches agree with the pose (see step 2 above).
  int match_supported_registrations = 0;
};

// `progress(model, image, registered_count, total)` is called after each registration.
using MapperProgress = std::function<void(int model, int image, int num_registered, int total)>;

// Builds models from the images, cameras (initial intrinsics, keyed by camera_id), pairs
// and tracks. Models come out largest first. Where no model comes out, the pairs are tried
// again with init_min_points halved, twice at most (not below 5), as COLMAP's mapper relaxes
// its initialisation. An empty result with OK status means no pair initialised even then
// (the summary says why per image).
Status RunIncrementalMapper(const MapperOptions& options, const std::vector<MapperImage>& images,
                            const std::map<uint32_t, Camera>& cameras,
                            const std::vector<MapperPair>& pairs, const std::vector<Track>& tracks,
                            std::vector<Reconstruction>* models, MapperSummary* summary,
                            const MapperProgress& progress = nullptr);

}  // namespace tiepoint
