#include "sfm/incremental_mapper.h"

#include <omp.h>

#include <Eigen/Core>
#include <Eigen/Geometry>
#include <Eigen/LU>
#include <Eigen/SVD>
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <memory>
#include <numeric>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "sfm/geometry_adapters.h"
#include "solver/reconstruction_ba.h"

namespace tiepoint {
namespace {

constexpr double kDeg = M_PI / 180.0;

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

Eigen::Matrix3d RotationOf(const Image& im) {
  double R[9];
  QuaternionToRotation(im.qvec, R);
  return Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>>(R);
}

Eigen::Vector3d CentreOf(const Image& im) {
  return -RotationOf(im).transpose() * Eigen::Vector3d(im.tvec[0], im.tvec[1], im.tvec[2]);
}

// The similarity x_a = s Q x_b + t from model b's frame into model a's under which one image's
// pose in b becomes its pose in a, for a given scale s: Q = R_a^T R_b, t = C_a - s Q C_b.
void SharedImageSimilarity(const Image& in_a, const Image& in_b, double s, Eigen::Matrix3d* Q, Eigen::Vector3d* t) {
  *Q = RotationOf(in_a).transpose() * RotationOf(in_b);
  *t = CentreOf(in_a) - s * *Q * CentreOf(in_b);
}

// The depths (camera z) of the model's points that the image sees, ascending.
std::vector<double> SortedDepths(const Reconstruction& r, const Image& im) {
  std::vector<double> d;
  const Eigen::Matrix3d R = RotationOf(im);
  const Eigen::Vector3d t(im.tvec[0], im.tvec[1], im.tvec[2]);
  for (const Point2D& p : im.points2D) {
    if (p.point3D_id == kInvalidPoint3DId) continue;
    const double* x = r.points3D.at(p.point3D_id).xyz;
    d.push_back((R * Eigen::Vector3d(x[0], x[1], x[2]) + t).z());
  }
  std::sort(d.begin(), d.end());
  return d;
}

Pose34 PoseOf(const Image& im) {
  Pose34 P;
  P.block<3, 3>(0, 0) = RotationOf(im);
  P.col(3) = Eigen::Vector3d(im.tvec[0], im.tvec[1], im.tvec[2]);
  return P;
}

class Mapper {
 public:
  Mapper(const MapperOptions& options, const std::vector<MapperImage>& images,
         const std::map<uint32_t, Camera>& cameras, const std::vector<MapperPair>& pairs,
         const std::vector<Track>& tracks, MapperSummary* summary, const MapperProgress& progress)
      : o_(options), images_(images), cameras_(cameras), pairs_(pairs), tracks_(tracks),
        summary_(summary), progress_(progress) {
    const int n = static_cast<int>(images.size());
    feature_track_.resize(n);
    for (int i = 0; i < n; ++i) feature_track_[i].assign(images[i].keypoints.size(), -1);
    for (size_t t = 0; t < tracks.size(); ++t)
      for (const TrackElementRef& e : tracks[t].elements) feature_track_[e.image][e.feature] = static_cast<int>(t);
    image_model_.assign(n, -1);
    summary_->images.assign(n, MapperImageStatus());
    for (int i = 0; i < n; ++i) summary_->images[i].reason = "not connected to a model";
    pair_tried_.assign(pairs.size(), 0);
    image_pairs_.resize(n);
    for (size_t p = 0; p < pairs.size(); ++p) {
      image_pairs_[pairs[p].image1].push_back(static_cast<int>(p));
      image_pairs_[pairs[p].image2].push_back(static_cast<int>(p));
    }
  }

  Status Run(std::vector<Reconstruction>* models) {
    summary_->min_model_size = MinModelSize();
    for (int m = 0; m < o_.max_models; ++m) {
      bool started = false;
      TIEPOINT_RETURN_IF_ERROR(BuildModel(static_cast<int>(done_.size()), &started));
      if (!started) break;
      KeepOrDropModel();
      if (o_.first_model_only && !done_.empty()) break;
    }
    if (!o_.first_model_only) TIEPOINT_RETURN_IF_ERROR(MergeModels());
    // The largest model may take the images of the others: they are released, the largest
    // grows (an image there can register with the pose-supported rule that needs images
    // registered on both sides), and what it leaves builds new models.
    if (done_.size() > 1) {
      std::stable_sort(done_.begin(), done_.end(), [](const ModelState& a, const ModelState& b) {
        return a.rec.images.size() > b.rec.images.size();
      });
      const size_t before = done_[0].rec.images.size();
      std::vector<ModelState> others;
      for (size_t m = 1; m < done_.size(); ++m) others.push_back(std::move(done_[m]));
      done_.resize(1);
      std::fill(image_model_.begin(), image_model_.end(), -1);
      for (const auto& [id, im] : done_[0].rec.images) image_model_[id - 1] = 0;
      Load(std::move(done_[0]));
      TIEPOINT_RETURN_IF_ERROR(Grow(0));
      done_[0] = Save();
      for (const auto& [id, im] : done_[0].rec.images) image_model_[id - 1] = 0;
      if (done_[0].rec.images.size() == before) {
        // Nothing changed: keep the other models as they were.
        for (ModelState& m : others) {
          for (const auto& [id, im] : m.rec.images) image_model_[id - 1] = static_cast<int>(done_.size());
          done_.push_back(std::move(m));
        }
      } else {
        for (size_t p = 0; p < pairs_.size(); ++p)
          if (image_model_[pairs_[p].image1] < 0 && image_model_[pairs_[p].image2] < 0) pair_tried_[p] = 0;
        for (int m = static_cast<int>(done_.size()); m < o_.max_models; ++m) {
          bool started = false;
          TIEPOINT_RETURN_IF_ERROR(BuildModel(static_cast<int>(done_.size()), &started));
          if (!started) break;
          KeepOrDropModel();
        }
      }
    }
    // The models the largest one left may now merge with it.
    if (done_.size() > 1) TIEPOINT_RETURN_IF_ERROR(MergeModels());
    // Images in no model: say so (their reason was set where they failed).
    for (size_t i = 0; i < images_.size(); ++i)
      if (image_model_[i] < 0) summary_->images[i].registered = false;
    summary_->initial_pairs.clear();
    for (ModelState& m : done_) {
      // The points' mean reprojection errors, for the output (once here: Filter ran over
      // every point of the model after each adjustment for them, a second of 13 in the
      // mapping of a 60-view ring).
      m.rec.UpdatePointErrors();
      models->push_back(std::move(m.rec));
      summary_->initial_pairs.push_back(m.init);
    }
    done_.clear();
    // Largest model first.
    std::vector<size_t> order(models->size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return (*models)[a].images.size() > (*models)[b].images.size();
    });
    std::vector<Reconstruction> sorted;
    std::vector<std::pair<int, int>> init_sorted;
    std::vector<int> new_index(models->size());
    for (size_t k = 0; k < order.size(); ++k) {
      new_index[order[k]] = static_cast<int>(k);
      sorted.push_back(std::move((*models)[order[k]]));
      init_sorted.push_back(summary_->initial_pairs[order[k]]);
    }
    *models = std::move(sorted);
    summary_->initial_pairs = init_sorted;
    for (size_t i = 0; i < images_.size(); ++i) {
      if (image_model_[i] >= 0) {
        summary_->images[i].model = new_index[image_model_[i]];
        summary_->images[i].registered = true;
        summary_->images[i].reason.clear();
      }
    }
    return Status::Ok();
  }

 private:
  // The fewest images a model keeps: min_model_size, or the number of images in at least
  // one pair where that is smaller (COLMAP's rule for small collections), and at least 2.
  int MinModelSize() const {
    int connected = 0;
    for (const std::vector<int>& p : image_pairs_) connected += !p.empty();
    return std::max(2, std::min(o_.min_model_size, connected));
  }

  // The model just built (rec_) joins done_, or is dropped when it is below MinModelSize()
  // (its images then say why); rec_ is emptied either way.
  void KeepOrDropModel() {
    if (static_cast<int>(rec_.images.size()) >= MinModelSize()) {
      for (const auto& [id, im] : rec_.images) image_model_[id - 1] = static_cast<int>(done_.size());
      done_.push_back(Save());
    } else {
      ++summary_->models_below_min_size;
      for (const auto& [id, im] : rec_.images) {
        summary_->images[id - 1].registered = false;
        summary_->images[id - 1].reason =
            "its model stayed below the minimum size (" + std::to_string(MinModelSize()) + " images)";
      }
    }
    rec_ = Reconstruction();
  }

  // --- model state -------------------------------------------------------------------------
  uint32_t ImageId(int i) const { return static_cast<uint32_t>(i + 1); }
  bool Registered(int i) const { return rec_.images.count(ImageId(i)) > 0; }
  const Camera& CameraOf(int i) const { return rec_.cameras.at(images_[i].camera_id); }

  Eigen::Vector2d Normalized(int i, uint32_t f) const {
    const Camera& c = CameraOf(i);
    const Point2D& p = images_[i].keypoints[f];
    double u, v;
    CameraPixelToNormalized(c.model, c.params.data(), p.x, p.y, &u, &v);
    return {u, v};
  }

  void AddImage(int i, const Eigen::Matrix3d& R, const Eigen::Vector3d& t) {
    if (!rec_.cameras.count(images_[i].camera_id))
      rec_.cameras[images_[i].camera_id] = cameras_.at(images_[i].camera_id);
    Image im;
    im.image_id = ImageId(i);
    im.camera_id = images_[i].camera_id;
    im.name = images_[i].name;
    const Eigen::Matrix<double, 3, 3, Eigen::RowMajor> Rr = R;
    RotationToQuaternion(Rr.data(), im.qvec);
    for (int k = 0; k < 3; ++k) im.tvec[k] = t[k];
    im.points2D = images_[i].keypoints;
    for (Point2D& p : im.points2D) p.point3D_id = kInvalidPoint3DId;
    rec_.images[im.image_id] = std::move(im);
    summary_->images[i].registered = true;
    summary_->images[i].reason.clear();
  }

  uint64_t AddPoint(const Eigen::Vector3d& X, int track, const std::vector<TrackElementRef>& obs) {
    const uint64_t id = next_point_id_++;
    Point3D p;
    for (int k = 0; k < 3; ++k) p.xyz[k] = X[k];
    const MapperImage& first = images_[obs[0].image];
    const uint8_t g = first.gray.size() > obs[0].feature ? first.gray[obs[0].feature] : 128;
    p.rgb[0] = p.rgb[1] = p.rgb[2] = g;
    for (const TrackElementRef& e : obs) {
      p.track.push_back({ImageId(e.image), e.feature});
      rec_.images.at(ImageId(e.image)).points2D[e.feature].point3D_id = id;
    }
    rec_.points3D[id] = std::move(p);
    point_track_[id] = track;
    track_point_[track] = id;
    return id;
  }

  void AddObservation(uint64_t pid, int i, uint32_t f) {
    rec_.points3D.at(pid).track.push_back({ImageId(i), f});
    rec_.images.at(ImageId(i)).points2D[f].point3D_id = pid;
  }

  void DeletePoint(uint64_t pid) {
    auto it = rec_.points3D.find(pid);
    if (it == rec_.points3D.end()) return;
    for (const TrackElement& e : it->second.track)
      rec_.images.at(e.image_id).points2D[e.point2D_idx].point3D_id = kInvalidPoint3DId;
    track_point_.erase(point_track_.at(pid));
    point_track_.erase(pid);
    rec_.points3D.erase(it);
  }

  bool HasPoint(int track) const { return track_point_.count(track) > 0; }

  // The largest angle (radians) at X between the rays to the centres of two of `images`
  // (registered image ids).
  double LargestRayAngle(const Eigen::Vector3d& X, const std::vector<uint32_t>& images) const {
    std::vector<Eigen::Vector3d> rays;
    for (uint32_t id : images) rays.push_back((X - CentreOf(rec_.images.at(id))).normalized());
    double best = 0;
    for (size_t a = 0; a < rays.size(); ++a)
      for (size_t b = a + 1; b < rays.size(); ++b)
        best = std::max(best, std::acos(std::clamp(rays[a].dot(rays[b]), -1.0, 1.0)));
    return best;
  }
  // Counts each track once that had a point refused or removed, or a view refused, for
  // rays more than max_tri_angle_deg apart.
  void NoteWideAngle(int track) {
    if (wide_angle_tracks_.insert(track).second) ++summary_->wide_angle_tracks;
  }
  // Whether registered image i may observe point pid: its ray and those of the point's
  // views are at most max_tri_angle_deg apart.
  bool WithinMaxAngle(uint64_t pid, int i) {
    if (o_.max_tri_angle_deg >= 180) return true;
    const Point3D& p = rec_.points3D.at(pid);
    const Eigen::Vector3d X(p.xyz[0], p.xyz[1], p.xyz[2]);
    const Eigen::Vector3d r = (X - CentreOf(rec_.images.at(ImageId(i)))).normalized();
    const double c = std::cos(o_.max_tri_angle_deg * kDeg);
    for (const TrackElement& e : p.track)
      if (r.dot((X - CentreOf(rec_.images.at(e.image_id))).normalized()) < c) {
        NoteWideAngle(point_track_.at(pid));
        return false;
      }
    return true;
  }

  // The reprojection error that triangulation and filtering accept: the option's, times
  // loose_ while a merged model is retriangulated (TryMerge).
  double FilterPx() const { return loose_ * o_.filter_max_reproj_error_px; }

  // Reprojection error (pixels) of point X in image i at feature f; infinity behind.
  double ReprojError(int i, uint32_t f, const double* X) const {
    const Image& im = rec_.images.at(ImageId(i));
    double x, y;
    if (!ProjectToImage(CameraOf(i), im, X, &x, &y)) return std::numeric_limits<double>::infinity();
    const Point2D& p = images_[i].keypoints[f];
    return std::hypot(x - p.x, y - p.y);
  }

  // Focal length in pixels of image i (for thresholds in normalized units).
  double Focal(int i) const { return CameraOf(i).MeanFocal(); }

  // --- triangulation --------------------------------------------------------------------
  // Creates the track's point from its registered views, or adds views that fit.
  int TriangulateOrContinue(int track) {
    const Track& tr = tracks_[track];
    int added = 0;
    if (HasPoint(track)) {
      const uint64_t pid = track_point_.at(track);
      for (const TrackElementRef& e : tr.elements) {
        if (!Registered(e.image)) continue;
        const Image& im = rec_.images.at(ImageId(e.image));
        if (im.points2D[e.feature].point3D_id == pid) continue;
        if (ReprojError(e.image, e.feature, rec_.points3D.at(pid).xyz) <= FilterPx() &&
            WithinMaxAngle(pid, e.image)) {
          AddObservation(pid, e.image, e.feature);
          ++added;
        }
      }
      return added;
    }
    std::vector<TrackElementRef> views;
    std::vector<Pose34> poses;
    std::vector<Eigen::Vector2d> xn;
    double min_focal = 1e300;
    for (const TrackElementRef& e : tr.elements) {
      if (!Registered(e.image)) continue;
      views.push_back(e);
      poses.push_back(PoseOf(rec_.images.at(ImageId(e.image))));
      xn.push_back(Normalized(e.image, e.feature));
      min_focal = std::min(min_focal, Focal(e.image));
    }
    if (views.size() < 2) return 0;
    Eigen::Vector3d X;
    std::vector<uint8_t> inlier;
    double max_angle = 0;
    if (!RobustTriangulate(poses, xn, FilterPx() / min_focal,
                           o_.tri_min_angle_deg * kDeg, &X, &inlier, &max_angle))
      return 0;
    std::vector<TrackElementRef> obs;
    for (size_t k = 0; k < views.size(); ++k)
      if (inlier[k]) obs.push_back(views[k]);
    if (obs.size() < 2) return 0;
    if (o_.max_tri_angle_deg < 180 && max_angle > o_.max_tri_angle_deg * kDeg) {
      NoteWideAngle(track);
      return 0;
    }
    AddPoint(X, track, obs);
    return static_cast<int>(obs.size());
  }

  void TriangulateImage(int i) {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t f = 0; f < feature_track_[i].size(); ++f) {
      const int t = feature_track_[i][f];
      if (t >= 0) TriangulateOrContinue(t);
    }
    summary_->seconds_triangulation += Seconds(t0);
  }

  void Retriangulate() {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t t = 0; t < tracks_.size(); ++t) {
      int reg = 0;
      for (const TrackElementRef& e : tracks_[t].elements) reg += Registered(e.image);
      if (reg >= 2) TriangulateOrContinue(static_cast<int>(t));
    }
    summary_->seconds_triangulation += Seconds(t0);
  }

  // Removes observations with a large reprojection error or behind the camera, points
  // with fewer than two observations and (when check_angle) points whose largest
  // triangulation angle is below the minimum. Restricted to `images` when non-empty.
  void Filter(const std::set<uint32_t>& images, bool check_angle) {
    // The points (ascending ids) of the given images, or every point.
    std::vector<uint64_t> ids;
    if (images.empty()) {
      ids.reserve(rec_.points3D.size());
      for (const auto& [pid, p] : rec_.points3D) ids.push_back(pid);
    } else {
      ids = rec_.PointsSeenBy(images);
    }
    for (uint64_t pid : ids) {
      const auto found = rec_.points3D.find(pid);
      if (found == rec_.points3D.end()) continue;
      Point3D& p = found->second;
      std::vector<TrackElement> keep;
      for (const TrackElement& e : p.track) {
        const int i = static_cast<int>(e.image_id) - 1;
        if (ReprojError(i, e.point2D_idx, p.xyz) <= FilterPx()) {
          keep.push_back(e);
        } else {
          rec_.images.at(e.image_id).points2D[e.point2D_idx].point3D_id = kInvalidPoint3DId;
          ++summary_->filtered_observations;
        }
      }
      p.track = keep;
      bool remove = p.track.size() < 2;
      if (!remove && (check_angle || o_.max_tri_angle_deg < 180)) {
        std::vector<uint32_t> views;
        for (const TrackElement& e : p.track) views.push_back(e.image_id);
        const double best = LargestRayAngle(Eigen::Vector3d(p.xyz[0], p.xyz[1], p.xyz[2]), views);
        remove = (check_angle && best < o_.filter_min_tri_angle_deg * kDeg) ||
                 (o_.max_tri_angle_deg < 180 && best > o_.max_tri_angle_deg * kDeg);
        if (remove && best > o_.max_tri_angle_deg * kDeg) NoteWideAngle(point_track_.at(pid));
      }
      if (remove) DeletePoint(pid);
    }
  }

  // --- bundle adjustment ------------------------------------------------------------------
  // What an adjustment changes, to go back to (BundleAdjustReconstruction writes back only
  // these): the cameras, the poses of the variable images and the points' positions.
  struct AdjustedState {
    std::map<uint32_t, Camera> cameras;
    std::vector<std::pair<uint32_t, std::array<double, 7>>> poses;  // qvec, tvec
    std::vector<std::pair<uint64_t, std::array<double, 3>>> points;
    void Take(const Reconstruction& r, const std::set<uint32_t>& variable) {
      cameras = r.cameras;
      for (uint32_t id : variable) {
        const Image& im = r.images.at(id);
        poses.push_back({id, {im.qvec[0], im.qvec[1], im.qvec[2], im.qvec[3], im.tvec[0], im.tvec[1], im.tvec[2]}});
      }
      points.reserve(r.points3D.size());
      for (const auto& [pid, p] : r.points3D) points.push_back({pid, {p.xyz[0], p.xyz[1], p.xyz[2]}});
    }
    void Restore(Reconstruction* r) const {
      r->cameras = cameras;
      for (const auto& [id, v] : poses) {
        Image& im = r->images.at(id);
        std::copy(v.begin(), v.begin() + 4, im.qvec);
        std::copy(v.begin() + 4, v.end(), im.tvec);
      }
      for (const auto& [pid, x] : points) std::copy(x.begin(), x.end(), r->points3D.at(pid).xyz);
    }
  };

  Status Adjust(const std::set<uint32_t>& variable, bool global, int max_iterations) {
    const auto t0 = std::chrono::steady_clock::now();
    ReconstructionBAOptions bo;
    bo.max_iterations = max_iterations;
    bo.function_tolerance = final_ba_ ? o_.ba_final_function_tolerance : o_.ba_function_tolerance;
    bo.step_extension = o_.ba_step_extension;
    bo.num_threads = o_.num_threads > 0 ? o_.num_threads : omp_get_max_threads();
    bo.linear_solver = o_.ba_linear_solver;
    const bool to_sparse = bo.linear_solver == ReconstructionLinearSolver::kDenseSchur &&
                           o_.ba_sparse_from_images > 0 &&
                           variable.size() >= static_cast<size_t>(o_.ba_sparse_from_images);
    if (to_sparse) bo.linear_solver = ReconstructionLinearSolver::kSparseSchur;
    bo.fix_intrinsics = !o_.refine_intrinsics || (rec_.images.size() < 3 && !two_view_focal_free_) ||
                        (o_.refine_intrinsics_final_only && !final_ba_);
    // Radial terms and the principal point are weakly constrained by a small model and,
    // refined early, walk into a wrong basin (the Middlebury rings: k1 near -0.6 where the
    // truth is 0); they are refined only in global adjustments of a model that has grown.
    const size_t size = rec_.images.size();
    bo.refine_extra = radial_fixed_ ? false : extra_override_ >= 0 ? extra_override_ == 1
                                           : global && (final_ba_ || size >= static_cast<size_t>(o_.refine_extra_min_images));
    bo.refine_principal_point = o_.refine_principal_point ||
                                (global && final_ba_ && principal_point_free_ && !hold_principal_point_ &&
                                 o_.refine_principal_point_min_images > 0 &&
                                 size >= static_cast<size_t>(o_.refine_principal_point_min_images));
    if (two_view_focal_free_) bo.refine_extra = bo.refine_principal_point = false;  // the focal length alone
    // Where the principal point may leave the image's middle: the state to run again from.
    AdjustedState before;
    const bool pp_may_run_off = bo.refine_principal_point && !o_.refine_principal_point;
    if (pp_may_run_off) before.Take(rec_, variable);
    bo.hold_aspect_ratio = !aspect_free_;
    bo.refine_tangential = tangential_free_;
    bo.loss.type = LossType::kCauchy;
    bo.loss.scale = 1.0;
    ReconstructionBAConfig config;
    config.variable_images = variable;
    config.only_points_of_variable_images = !global;
    // Gauge: the first image of the model keeps its pose; in a global BA the second
    // image's distance to it is free (LM's damping holds the scale).
    if (variable.count(first_image_)) config.fixed_pose_images.insert(first_image_);
    config.fixed_cameras = diverged_cameras_;
    ReconstructionBASummary s;
    // A camera whose refined focal length leaves (0.1, 10) times its prior, or stops being
    // finite, was not determined by its images (one image of a narrow field of view, its
    // own camera): the adjustment runs again from where it started with that camera's
    // intrinsics held at their values there, for the rest of the run (COLMAP drops such
    // images as having bogus parameters).
    auto run = [&]() -> Status {
      AdjustedState start;
      if (!bo.fix_intrinsics) start.Take(rec_, variable);
      // Each new run holds one camera more: at most one run per camera.
      while (true) {
        TIEPOINT_RETURN_IF_ERROR(BundleAdjustReconstruction(bo, config, &rec_, &s));
        if (bo.fix_intrinsics) return Status::Ok();
        bool diverged = false;
        for (const auto& [id, c] : rec_.cameras) {
          if (config.fixed_cameras.count(id)) continue;
          const double f0 = cameras_.at(id).fx();
          bool finite = true;
          for (double v : c.params) finite &= std::isfinite(v);
          if (finite && c.fx() > 0.1 * f0 && c.fx() < 10 * f0 && c.fy() > 0.1 * f0 && c.fy() < 10 * f0) continue;
          diverged_cameras_.insert(id);
          config.fixed_cameras.insert(id);
          diverged = true;
        }
        if (!diverged) return Status::Ok();
        start.Restore(&rec_);
      }
    };
    TIEPOINT_RETURN_IF_ERROR(run());
    if (pp_may_run_off && !PrincipalPointsPlausible()) {
      // The principal point left the middle of the image: not determined by this model
      // (forward motion, few views). Back to where the adjustment started (the image
      // centre), held there, and adjusted again from there.
      before.Restore(&rec_);
      principal_point_free_ = false;
      bo.refine_principal_point = false;
      TIEPOINT_RETURN_IF_ERROR(run());
    }
    last_cost_ = s.final_cost;
    summary_->seconds_ba += Seconds(t0);
    (global ? summary_->global_ba_runs : summary_->local_ba_runs)++;
    if (to_sparse) ++summary_->sparse_ba_runs;
    return Status::Ok();
  }

  std::set<uint32_t> AllImages() const {
    std::set<uint32_t> all;
    for (const auto& [id, im] : rec_.images) all.insert(id);
    return all;
  }

  // Every camera's principal point within max_principal_point_shift of its image centre.
  bool PrincipalPointsPlausible() const {
    for (const auto& [id, c] : rec_.cameras) {
      const double cx = c.cx(), cy = c.cy();
      const double limit = o_.max_principal_point_shift * std::max(c.width, c.height);
      if (std::abs(cx - 0.5 * c.width) > limit || std::abs(cy - 0.5 * c.height) > limit) return false;
    }
    return true;
  }

  // Model selection for the radial terms: the model is adjusted once with them free and
  // once with them zero; they are kept only when they lower the cost by more than
  // min_radial_gain (a relative figure). A narrow field of view leaves k1 nearly
  // degenerate with the focal length and the principal point: fitted freely it takes
  // values far from the truth for a gain in the noise (the Middlebury rings, k1 = -0.25 for
  // 0.1%), and the rotations pay for it.
  // OPENCV's tangential terms p1, p2 (and OPENCV_FISHEYE's k3, k4) are held (at zero, or at
  // --camera-params' values) while a model grows and in the radial candidate; where the
  // radial terms are kept, they are then freed as well, and kept free only when that lowers
  // the cost by another min_radial_gain.
  // Free with the radial terms from the start, on the Middlebury temple (k1, k2, p1, p2 =
  // -0.16, -9.5, -0.003, 0.002) they stood in for the principal point's 16 px offset, which
  // then stayed at the centre, and the rotations were 0.79 degrees off instead of 0.27.
  Status SelectRadialTerms() {
    // The models with distortion terms (the radial ones, OPENCV): their radial terms together.
    bool radial = false;
    for (const auto& [id, c] : rec_.cameras) radial |= c.HasDistortion();
    if (!radial || !o_.refine_intrinsics || rec_.images.size() < 3) return Status::Ok();
    const std::set<uint32_t> all = AllImages();
    const Reconstruction start = rec_;
    const bool pp_free = principal_point_free_;
    // Both candidates with the principal point where it is (SelectPrincipalPoint decides it
    // next, with the radial terms chosen here): refined in each, where it is weakly
    // determined (the dino ring) it ran off in both, and each ran twice.
    hold_principal_point_ = true;
    extra_override_ = 1;
    Status st = Adjust(all, true, o_.ba_global_max_iterations);
    const double cost_free = last_cost_;
    Reconstruction with_radial = std::move(rec_);
    const bool pp_free_radial = principal_point_free_;
    rec_ = start;
    principal_point_free_ = pp_free;
    for (auto& [id, c] : rec_.cameras)
      if (c.HasDistortion()) std::fill(c.params.begin() + CameraModelDistortionBegin(c.model), c.params.end(), 0.0);
    extra_override_ = 0;
    if (st.ok()) st = Adjust(all, true, o_.ba_global_max_iterations);
    const double cost_zero = last_cost_;
    extra_override_ = -1;
    hold_principal_point_ = false;
    TIEPOINT_RETURN_IF_ERROR(st);
    if (cost_free < (1.0 - o_.min_radial_gain) * cost_zero) {
      rec_ = std::move(with_radial);
      principal_point_free_ = pp_free_radial;
    } else {
      radial_fixed_ = true;
      return Status::Ok();
    }
    bool tangential = false;
    for (const auto& [id, c] : rec_.cameras) tangential |= CameraModelHasLaterDistortionTerms(c.model);
    if (!tangential) return Status::Ok();
    Reconstruction radial_only = rec_;
    hold_principal_point_ = true;
    extra_override_ = 1;
    tangential_free_ = true;
    st = Adjust(all, true, o_.ba_global_max_iterations);
    const double cost_tangential = last_cost_;
    extra_override_ = -1;
    hold_principal_point_ = false;
    TIEPOINT_RETURN_IF_ERROR(st);
    if (!(cost_tangential < (1.0 - o_.min_radial_gain) * cost_free)) {
      rec_ = std::move(radial_only);
      principal_point_free_ = pp_free_radial;
      tangential_free_ = false;
    }
    return Status::Ok();
  }

  // A model of two images holds its intrinsics while it grows (two views determine the focal
  // length only away from degenerate configurations, such as optical axes that meet). In its
  // final adjustment the focal length alone is let free, and kept only when that lowers the
  // cost by more than min_two_view_focal_gain against it held; the distortion terms and the
  // principal point stay where they are. The two images' cameras must be one, or alike
  // (model, size and parameters: photos of one camera given a camera each), and are then
  // tied into one for the free candidate: two free focal lengths from two views ran apart on
  // a pair of iPhone photos (605 px from EXIF -> 626 and 521 px, 48 of 297 matches kept;
  // tied, 619 px and 252). Unlike cameras stay held. Two 3072 x 2048 photos of fountain-P11
  // from the prior 1.2 max(w, h), 3686 px: 2803 px (truth 2759).
  Status SelectTwoViewFocal() {
    if (!o_.refine_intrinsics || rec_.images.size() != 2 || !(o_.min_two_view_focal_gain >= 0)) return Status::Ok();
    const uint32_t image2 = std::next(rec_.images.begin())->first;
    const uint32_t c1 = rec_.images.begin()->second.camera_id, c2 = rec_.images.at(image2).camera_id;
    if (c1 != c2) {
      const Camera &a = rec_.cameras.at(c1), &b = rec_.cameras.at(c2);
      if (a.model != b.model || a.width != b.width || a.height != b.height || a.params != b.params) return Status::Ok();
    }
    const std::set<uint32_t> all = AllImages();
    const Reconstruction start = rec_;
    Status st = Adjust(all, true, o_.ba_global_max_iterations);
    const double cost_held = last_cost_;
    Reconstruction held = std::move(rec_);
    rec_ = start;
    if (c1 != c2) {  // tied: the second image on the first one's camera
      rec_.cameras.erase(c2);
      rec_.images.at(image2).camera_id = c1;
    }
    two_view_focal_free_ = true;
    if (st.ok()) st = Adjust(all, true, o_.ba_global_max_iterations);
    two_view_focal_free_ = false;
    if (c1 != c2) {
      Camera untied = rec_.cameras.at(c1);
      untied.camera_id = c2;
      rec_.cameras[c2] = untied;
      rec_.images.at(image2).camera_id = c2;
    }
    const double cost_free = last_cost_;
    TIEPOINT_RETURN_IF_ERROR(st);
    if (!(cost_free < (1.0 - o_.min_two_view_focal_gain) * cost_held)) rec_ = std::move(held);
    return Status::Ok();
  }

  // The same for the principal point: refined in the final adjustment (when the model is
  // large enough), kept only when it lowers the cost by more than min_principal_point_gain
  // against the image centres; otherwise the centres, held fixed.
  Status SelectPrincipalPoint() {
    if (!o_.refine_intrinsics || o_.refine_principal_point || !principal_point_free_ ||
        o_.refine_principal_point_min_images <= 0 ||
        rec_.images.size() < static_cast<size_t>(o_.refine_principal_point_min_images))
      return Status::Ok();
    const std::set<uint32_t> all = AllImages();
    const Reconstruction start = rec_;
    Status st = Adjust(all, true, o_.ba_global_max_iterations);
    const double cost_free = last_cost_;
    if (!principal_point_free_) return st;  // left the image's middle: back at the centre
    Reconstruction with_pp = std::move(rec_);
    rec_ = start;
    for (auto& [id, c] : rec_.cameras) c.SetPrincipalPoint(0.5 * c.width, 0.5 * c.height);
    principal_point_free_ = false;
    if (st.ok()) st = Adjust(all, true, o_.ba_global_max_iterations);
    const double cost_centre = last_cost_;
    TIEPOINT_RETURN_IF_ERROR(st);
    if (cost_free < (1.0 - o_.min_principal_point_gain) * cost_centre) {
      rec_ = std::move(with_pp);
      principal_point_free_ = true;
    }
    return Status::Ok();
  }

  // PINHOLE and OPENCV: fx and fy moved together while the model grew (bo.hold_aspect_ratio).
  // In its final adjustments they are let apart, and kept apart only where the images show
  // it: a lower cost by more than min_aspect_ratio_gain, and fy / fx within
  // max_aspect_ratio_change of where it started. A narrow field of view leaves the ratio
  // nearly undetermined: free from the start, fx and fy ran to 1323 and 1536 px on the
  // Middlebury temple and to 1294 and 2837 px on the dino, where both are 1520 and 3310,
  // and the rotations were 1.1 and 20 degrees off.
  Status SelectAspectRatio() {
    bool two = false;
    for (const auto& [id, c] : rec_.cameras) two |= CameraModelHasTwoFocals(c.model);
    if (!two || !o_.refine_intrinsics || o_.refine_aspect_ratio_min_images <= 0 ||
        rec_.images.size() < static_cast<size_t>(o_.refine_aspect_ratio_min_images))
      return Status::Ok();
    const std::set<uint32_t> all = AllImages();
    const Reconstruction start = rec_;
    const bool pp_free = principal_point_free_;
    Status st = Adjust(all, true, o_.ba_global_max_iterations);
    const double cost_held = last_cost_;
    Reconstruction held = std::move(rec_);
    const bool pp_free_held = principal_point_free_;
    rec_ = start;
    principal_point_free_ = pp_free;
    aspect_free_ = true;
    if (st.ok()) st = Adjust(all, true, o_.ba_global_max_iterations);
    const double cost_free = last_cost_;
    TIEPOINT_RETURN_IF_ERROR(st);
    bool plausible = true;
    for (const auto& [id, c] : rec_.cameras) {
      if (!CameraModelHasTwoFocals(c.model)) continue;
      const Camera& c0 = start.cameras.at(id);
      const double change = (c.fy() / c.fx()) / (c0.fy() / c0.fx());
      plausible &= std::isfinite(change) && std::abs(change - 1) <= o_.max_aspect_ratio_change;
    }
    if (!(plausible && cost_free < (1.0 - o_.min_aspect_ratio_gain) * cost_held)) {
      rec_ = std::move(held);
      principal_point_free_ = pp_free_held;
      aspect_free_ = false;
    }
    return Status::Ok();
  }

  Status GlobalAdjust(int max_iterations) {
    const std::set<uint32_t> all = AllImages();
    TIEPOINT_RETURN_IF_ERROR(Adjust(all, true, max_iterations));
    Filter({}, true);
    return Status::Ok();
  }

  Status LocalAdjust(int i) {
    // The images sharing most points with image i.
    std::unordered_map<uint32_t, int> shared;
    for (const Point2D& p : rec_.images.at(ImageId(i)).points2D) {
      if (p.point3D_id == kInvalidPoint3DId) continue;
      for (const TrackElement& e : rec_.points3D.at(p.point3D_id).track)
        if (e.image_id != ImageId(i)) ++shared[e.image_id];
    }
    std::vector<std::pair<int, uint32_t>> ranked;
    for (const auto& [id, n] : shared) ranked.push_back({-n, id});
    std::sort(ranked.begin(), ranked.end());
    std::set<uint32_t> variable = {ImageId(i)};
    for (size_t k = 0; k < ranked.size() && static_cast<int>(variable.size()) < o_.local_ba_num_images; ++k)
      variable.insert(ranked[k].second);
    TIEPOINT_RETURN_IF_ERROR(Adjust(variable, false, o_.ba_local_max_iterations));
    Filter(variable, false);
    return Status::Ok();
  }

  // --- initialisation ---------------------------------------------------------------------
  bool TryInitialPair(int p) {
    const MapperPair& pr = pairs_[p];
    const int a = pr.image1, b = pr.image2;
    rec_ = Reconstruction();
    track_point_.clear();
    point_track_.clear();
    first_image_ = ImageId(a);
    principal_point_free_ = true;
    radial_fixed_ = false;
    aspect_free_ = false;
    tangential_free_ = false;
    AddImage(a, Eigen::Matrix3d::Identity(), Eigen::Vector3d::Zero());
    const Eigen::Matrix3d R = Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>>(pr.rotation);
    const Eigen::Vector3d t(pr.translation[0], pr.translation[1], pr.translation[2]);
    AddImage(b, R, t);
    std::vector<double> angles;
    for (const auto& [fa, fb] : pr.inliers) {
      const int ta = feature_track_[a][fa];
      if (ta < 0 || ta != feature_track_[b][fb] || HasPoint(ta)) continue;
      std::vector<Pose34> poses = {PoseOf(rec_.images.at(ImageId(a))), PoseOf(rec_.images.at(ImageId(b)))};
      std::vector<Eigen::Vector2d> xn = {Normalized(a, fa), Normalized(b, fb)};
      Eigen::Vector3d X;
      std::vector<uint8_t> inl;
      const double thr = o_.filter_max_reproj_error_px / std::min(Focal(a), Focal(b));
      if (!RobustTriangulate(poses, xn, thr, o_.tri_min_angle_deg * kDeg, &X, &inl) || !inl[0] || !inl[1])
        continue;
      const Eigen::Vector3d r1 = X, r2 = X - CentreOf(rec_.images.at(ImageId(b)));
      angles.push_back(std::acos(std::clamp(r1.normalized().dot(r2.normalized()), -1.0, 1.0)));
      AddPoint(X, ta, {{a, fa}, {b, fb}});
    }
    if (static_cast<int>(angles.size()) < o_.init_min_points) return false;
    std::nth_element(angles.begin(), angles.begin() + angles.size() / 2, angles.end());
    if (angles[angles.size() / 2] < init_angle_deg_ * kDeg) return false;
    if (!GlobalAdjust(o_.ba_global_max_iterations).ok()) return false;
    return static_cast<int>(rec_.points3D.size()) >= o_.init_min_points;
  }

  // --- models -----------------------------------------------------------------------------
  struct ModelState {
    Reconstruction rec;
    std::unordered_map<int, uint64_t> track_point;
    std::unordered_map<uint64_t, int> point_track;
    uint32_t first_image = 0;
    std::pair<int, int> init{-1, -1};
  };

  ModelState Save() {
    ModelState m;
    m.rec = std::move(rec_);
    m.track_point = std::move(track_point_);
    m.point_track = std::move(point_track_);
    m.first_image = first_image_;
    m.init = current_init_;
    rec_ = Reconstruction();
    track_point_.clear();
    point_track_.clear();
    return m;
  }

  void Load(ModelState&& m) {
    rec_ = std::move(m.rec);
    track_point_ = std::move(m.track_point);
    point_track_ = std::move(m.point_track);
    first_image_ = m.first_image;
    current_init_ = m.init;
    // A merged model selects its radial terms, principal point and aspect ratio afresh.
    radial_fixed_ = false;
    principal_point_free_ = true;
    aspect_free_ = false;
    tangential_free_ = false;
  }

  // Models that share tracks are merged (a similarity from their common points), and the
  // merged model grows further; models that share none are bridged first (TryBridge).
  Status MergeModels() {
    for (bool merged = true; merged;) {
      merged = false;
      for (size_t i = 0; i < done_.size() && !merged; ++i)
        for (size_t j = 0; j < done_.size() && !merged; ++j) {
          if (i == j || done_[i].rec.images.size() < done_[j].rec.images.size()) continue;
          bool ok = false;
          TIEPOINT_RETURN_IF_ERROR(TryMerge(i, j, &ok));
          if (!ok) TIEPOINT_RETURN_IF_ERROR(TryBridge(i, j, &ok));
          if (!ok) continue;
          merged = true;
          ++summary_->merges;
          done_.erase(done_.begin() + j);
          std::fill(image_model_.begin(), image_model_.end(), -1);
          for (size_t m = 0; m < done_.size(); ++m)
            for (const auto& [id, im] : done_[m].rec.images) image_model_[id - 1] = static_cast<int>(m);
        }
    }
    return Status::Ok();
  }

  // A copy of model `target` that registers the images of model `source` that have a
  // verified pair with one of its images (the usual absolute-pose rules), triangulating and
  // adjusting after each, into *extended; *added says how many registered (0: no copy made).
  Status ExtendWithImagesOf(size_t target, size_t source, ModelState* extended, int* added) {
    *added = 0;
    std::set<int> in_target, candidates;
    for (const auto& [id, im] : done_[target].rec.images) in_target.insert(static_cast<int>(id) - 1);
    for (const MapperPair& pr : pairs_) {
      const bool a_src = done_[source].rec.images.count(ImageId(pr.image1)) > 0;
      const bool b_src = done_[source].rec.images.count(ImageId(pr.image2)) > 0;
      if (a_src && in_target.count(pr.image2)) candidates.insert(pr.image1);
      if (b_src && in_target.count(pr.image1)) candidates.insert(pr.image2);
    }
    if (candidates.empty()) return Status::Ok();
    Load(ModelState(done_[target]));
    for (bool any = true; any;) {
      any = false;
      std::vector<std::pair<double, int>> ranked;
      for (int i : candidates) {
        if (Registered(i)) continue;
        int vis = 0;
        const double score = PyramidScore(i, &vis);
        if (vis >= kMinPairScaleInliers) ranked.push_back({-score, i});
      }
      std::sort(ranked.begin(), ranked.end());
      for (const auto& [score, i] : ranked) {
        if (!TryRegister(i)) continue;
        TriangulateImage(i);
        TIEPOINT_RETURN_IF_ERROR(LocalAdjust(i));
        ++*added;
        any = true;
        break;
      }
    }
    *extended = Save();
    return Status::Ok();
  }

  // Two models that share no track (a ring broken by one weak pair on each side, as the
  // Middlebury dino's) are bridged: each takes the other's images that it can register
  // (TryRegister's rules), so that those images belong to both and their tracks get a point
  // in each; TryMerge then fits the similarity on those points. When it fails (it changes
  // nothing then), both models go back to what they were.
  Status TryBridge(size_t i, size_t j, bool* merged) {
    *merged = false;
    ModelState ei, ej;
    int added_i = 0, added_j = 0;
    TIEPOINT_RETURN_IF_ERROR(ExtendWithImagesOf(i, j, &ei, &added_i));
    TIEPOINT_RETURN_IF_ERROR(ExtendWithImagesOf(j, i, &ej, &added_j));
    if (added_i + added_j == 0) return Status::Ok();
    if (added_i > 0) std::swap(done_[i], ei);
    if (added_j > 0) std::swap(done_[j], ej);
    TIEPOINT_RETURN_IF_ERROR(TryMerge(i, j, merged));
    if (!*merged) {
      if (added_i > 0) std::swap(done_[i], ei);
      if (added_j > 0) std::swap(done_[j], ej);
    }
    return Status::Ok();
  }

  // Merges model j into model i when enough of their common tracks agree on a similarity
  // (RANSAC over 3-point Umeyama fits; inliers within 1% of model i's median point
  // distance from its centroid); then adjusts and grows the merged model.
  Status TryMerge(size_t i, size_t j, bool* merged) {
    *merged = false;
    ModelState& a = done_[i];
    ModelState& b = done_[j];
    std::vector<Eigen::Vector3d> xa, xb;
    for (const auto& [track, pb] : b.track_point) {
      auto it = a.track_point.find(track);
      if (it == a.track_point.end()) continue;
      const double* pa = a.rec.points3D.at(it->second).xyz;
      const double* pbx = b.rec.points3D.at(pb).xyz;
      xa.emplace_back(pa[0], pa[1], pa[2]);
      xb.emplace_back(pbx[0], pbx[1], pbx[2]);
    }
    const int n = static_cast<int>(xa.size());
    if (a.rec.points3D.empty()) return Status::Ok();
    Eigen::Vector3d centroid = Eigen::Vector3d::Zero();
    std::vector<double> radii;
    for (const auto& [pid, p] : a.rec.points3D) centroid += Eigen::Vector3d(p.xyz[0], p.xyz[1], p.xyz[2]);
    centroid /= std::max<size_t>(1, a.rec.points3D.size());
    for (const auto& [pid, p] : a.rec.points3D)
      radii.push_back((Eigen::Vector3d(p.xyz[0], p.xyz[1], p.xyz[2]) - centroid).norm());
    std::nth_element(radii.begin(), radii.begin() + radii.size() / 2, radii.end());
    const double thr = 0.01 * radii[radii.size() / 2];
    double scale = 1;
    Eigen::Matrix3d Q = Eigen::Matrix3d::Identity();
    Eigen::Vector3d tr = Eigen::Vector3d::Zero();
    // From the common points alone: needs 6 that agree.
    auto from_points = [&]() -> bool {
      if (n < 6) return false;
      uint64_t state = o_.seed * 6364136223846793005ULL + 1442695040888963407ULL + n;
      auto next = [&]() {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        return static_cast<int>((state >> 33) % static_cast<uint64_t>(n));
      };
      auto count = [&](const Eigen::Matrix4d& T, std::vector<uint8_t>* mask) {
        int c = 0;
        if (mask) mask->assign(n, 0);
        for (int k = 0; k < n; ++k) {
          const Eigen::Vector3d y = T.block<3, 3>(0, 0) * xb[k] + T.block<3, 1>(0, 3);
          if ((y - xa[k]).norm() <= thr) {
            ++c;
            if (mask) (*mask)[k] = 1;
          }
        }
        return c;
      };
      Eigen::Matrix4d best = Eigen::Matrix4d::Identity();
      int best_count = -1;
      for (int it = 0; it < 500; ++it) {
        const int s0 = next(), s1 = next(), s2 = next();
        if (s0 == s1 || s1 == s2 || s0 == s2) continue;
        Eigen::Matrix3d A, B;
        A << xb[s0], xb[s1], xb[s2];
        B << xa[s0], xa[s1], xa[s2];
        const Eigen::Matrix4d T = Eigen::umeyama(A, B, true);
        if (!T.allFinite()) continue;
        const int c = count(T, nullptr);
        if (c > best_count) { best_count = c; best = T; }
      }
      if (best_count < std::max(6, n / 3)) return false;
      std::vector<uint8_t> mask;
      count(best, &mask);
      Eigen::Matrix3Xd A(3, best_count), B(3, best_count);
      for (int k = 0, c = 0; k < n; ++k)
        if (mask[k]) { A.col(c) = xb[k]; B.col(c) = xa[k]; ++c; }
      const Eigen::Matrix4d T = Eigen::umeyama(A, B, true);
      if (count(T, nullptr) < std::max(6, n / 3)) return false;
      scale = T.block<3, 3>(0, 0).col(0).norm();
      Q = T.block<3, 3>(0, 0) / scale;
      tr = T.block<3, 1>(0, 3);
      return true;
    };
    // From an image in both models (TryBridge) and common points: the image's two poses fix
    // the rotation and one point (its centre); the common points' distances from that
    // centre fix the scale (their median ratio), and at least two must agree with it.
    auto from_shared_image = [&]() -> bool {
      if (n < 2) return false;
      int best_support = 0;
      for (const auto& [id, imb] : b.rec.images) {
        auto ita = a.rec.images.find(id);
        if (ita == a.rec.images.end()) continue;
        const Eigen::Vector3d ca = CentreOf(ita->second), cb = CentreOf(imb);
        std::vector<double> ratios;
        for (int k = 0; k < n; ++k) {
          const double db = (xb[k] - cb).norm();
          if (db > 0) ratios.push_back((xa[k] - ca).norm() / db);
        }
        if (ratios.size() < 2) continue;
        std::nth_element(ratios.begin(), ratios.begin() + ratios.size() / 2, ratios.end());
        const double sc = ratios[ratios.size() / 2];
        if (!(sc > 0) || !std::isfinite(sc)) continue;
        Eigen::Matrix3d Qc;
        Eigen::Vector3d tc;
        SharedImageSimilarity(ita->second, imb, sc, &Qc, &tc);
        int support = 0;
        // Along the rays from the shared camera a two-view point's depth is the uncertain
        // part: points agree within 1% of their distance from it.
        for (int k = 0; k < n; ++k)
          support += (sc * Qc * xb[k] + tc - xa[k]).norm() <= std::max(thr, 0.01 * (xa[k] - ca).norm());
        if (support > best_support) {
          best_support = support;
          scale = sc;
          Q = Qc;
          tr = tc;
        }
      }
      return best_support >= 2;
    };
    // From an image in both models and fewer than two common points (the dino's arcs at
    // some seeds: the bridge's image and one point): the image's two poses fix the rotation
    // and its centre, and the ratio of the median depths of the points it sees in each model
    // the scale (the same surface seen from the same pose). Checked after the merge.
    auto from_shared_depths = [&]() -> bool {
      size_t best_points = 0;
      for (const auto& [id, imb] : b.rec.images) {
        auto ita = a.rec.images.find(id);
        if (ita == a.rec.images.end()) continue;
        const std::vector<double> da = SortedDepths(a.rec, ita->second), db = SortedDepths(b.rec, imb);
        const size_t m = std::min(da.size(), db.size());
        if (m < static_cast<size_t>(kMinDepthScalePoints) || m <= best_points) continue;
        const double sc = da[da.size() / 2] / db[db.size() / 2];
        if (!(sc > 0) || !std::isfinite(sc)) continue;
        best_points = m;
        scale = sc;
        SharedImageSimilarity(ita->second, imb, sc, &Q, &tr);
      }
      return best_points > 0;
    };
    // From two images in both models and fewer than two common points (the dino's arcs when
    // each arc registered both joints' images): the first image's two poses fix the rotation,
    // the two centres the scale and translation. Stands only when the second image agrees:
    // its two orientations within kMaxSharedImagesDisagreementDeg under the similarity, and
    // the direction between the two centres too.
    auto from_shared_centres = [&]() -> bool {
      std::vector<uint32_t> shared;
      for (const auto& [id, imb] : b.rec.images)
        if (a.rec.images.count(id)) shared.push_back(id);
      double best_baseline = 0;
      for (size_t u = 0; u < shared.size(); ++u)
        for (size_t v = u + 1; v < shared.size(); ++v) {
          const Image &a1 = a.rec.images.at(shared[u]), &b1 = b.rec.images.at(shared[u]);
          const Image &a2 = a.rec.images.at(shared[v]), &b2 = b.rec.images.at(shared[v]);
          const Eigen::Vector3d da = CentreOf(a2) - CentreOf(a1), db = CentreOf(b2) - CentreOf(b1);
          if (!(da.norm() > 0) || !(db.norm() > 0)) continue;
          const Eigen::Matrix3d Q1 = RotationOf(a1).transpose() * RotationOf(b1);
          const Eigen::Matrix3d Q2 = RotationOf(a2).transpose() * RotationOf(b2);
          const double rot_deg = Eigen::AngleAxisd(Q2 * Q1.transpose()).angle() / kDeg;
          const double dir_deg = std::acos(std::clamp(da.normalized().dot(Q1 * db.normalized()), -1.0, 1.0)) / kDeg;
          if (rot_deg > kMaxSharedImagesDisagreementDeg || dir_deg > kMaxSharedImagesDisagreementDeg) continue;
          if (da.norm() <= best_baseline) continue;
          best_baseline = da.norm();
          scale = da.norm() / db.norm();
          SharedImageSimilarity(a1, b1, scale, &Q, &tr);
        }
      return best_baseline > 0;
    };
    bool by_depths = false;
    if (n >= 2) {
      if (!from_points() && !from_shared_image()) return Status::Ok();
    } else if (from_shared_centres()) {
      ++summary_->shared_images_merges;
    } else if (from_shared_depths()) {
      by_depths = true;
    } else {
      return Status::Ok();
    }
    // What to go back to when a merge by depths finds no support across the join.
    std::unique_ptr<ModelState> undo_a, undo_b;
    std::set<uint32_t> only_a, only_b;
    if (by_depths) {
      undo_a = std::make_unique<ModelState>(a);
      undo_b = std::make_unique<ModelState>(b);
      for (const auto& [id, im] : a.rec.images)
        if (!b.rec.images.count(id)) only_a.insert(id);
      for (const auto& [id, im] : b.rec.images)
        if (!a.rec.images.count(id)) only_b.insert(id);
    }

    // Move b's images and points into a's frame, into the current model.
    ModelState bs = std::move(done_[j]);
    Load(std::move(done_[i]));
    for (const auto& [id, im] : bs.rec.images) {
      if (rec_.images.count(id)) continue;  // in both models (TryBridge): a's pose stays
      double R[9];
      QuaternionToRotation(im.qvec, R);
      const Eigen::Matrix3d Rb = Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>>(R);
      const Eigen::Matrix3d Rn = Rb * Q.transpose();
      const Eigen::Vector3d tn = scale * Eigen::Vector3d(im.tvec[0], im.tvec[1], im.tvec[2]) - Rn * tr;
      AddImage(static_cast<int>(id) - 1, Rn, tn);
    }
    for (const auto& [pid, p] : bs.rec.points3D) {
      const int track = bs.point_track.at(pid);
      std::vector<TrackElementRef> obs;
      for (const TrackElement& e : p.track) obs.push_back({static_cast<int>(e.image_id) - 1, e.point2D_idx});
      if (HasPoint(track)) {
        const uint64_t pid = track_point_.at(track);
        for (const TrackElementRef& e : obs)
          if (rec_.images.at(ImageId(e.image)).points2D[e.feature].point3D_id != pid)
            AddObservation(pid, e.image, e.feature);
      } else {
        const Eigen::Vector3d X = scale * Q * Eigen::Vector3d(p.xyz[0], p.xyz[1], p.xyz[2]) + tr;
        AddPoint(X, track, obs);
      }
    }
    TIEPOINT_RETURN_IF_ERROR(GlobalAdjust(o_.ba_global_max_iterations));
    Retriangulate();
    // The similarity comes from where the models meet (on the dino ring one image in both
    // and two points), so where else they meet (the ring's other joint) it can be degrees
    // off, beyond the filter: those tracks stay out and the adjustment keeps the misjoin.
    // Retriangulating with a loose threshold, halved down to the usual one with an
    // adjustment after each, brings them in to pull the join straight.
    if (o_.merge_retriangulation_factor > 1.0) {
      for (double f = o_.merge_retriangulation_factor; f >= 1.0; f /= 2) {
        loose_ = f;
        Retriangulate();
        const Status st = GlobalAdjust(o_.ba_global_max_iterations);
        loose_ = 1.0;
        TIEPOINT_RETURN_IF_ERROR(st);
      }
    }
    if (by_depths) {
      // Points with views on both sides of the join other than the shared image: a scale or
      // join that is off leaves those tracks beyond the filter, and nothing shows it.
      int cross = 0;
      for (const auto& [pid, p] : rec_.points3D) {
        bool in_a = false, in_b = false;
        for (const TrackElement& e : p.track) {
          in_a |= only_a.count(e.image_id) > 0;
          in_b |= only_b.count(e.image_id) > 0;
        }
        cross += in_a && in_b;
      }
      if (cross < o_.merge_min_cross_points) {
        (void)Save();
        done_[i] = std::move(*undo_a);
        done_[j] = std::move(*undo_b);
        ++summary_->depth_scale_merges_undone;
        return Status::Ok();
      }
      ++summary_->depth_scale_merges;
    }
    TIEPOINT_RETURN_IF_ERROR(Grow(static_cast<int>(i)));
    done_[i] = Save();
    *merged = true;
    return Status::Ok();
  }

  // --- registration -----------------------------------------------------------------------
  // Visibility pyramid score of image i's features that see a point (COLMAP's ranking).
  double PyramidScore(int i, int* num_visible) const {
    const Camera& c = cameras_.at(images_[i].camera_id);
    const double w = std::max(c.width, 1), h = std::max(c.height, 1);
    constexpr int kLevels = 4;
    std::vector<std::set<int>> cells(kLevels);
    int vis = 0;
    for (size_t f = 0; f < feature_track_[i].size(); ++f) {
      const int t = feature_track_[i][f];
      if (t < 0 || !HasPoint(t)) continue;
      ++vis;
      const Point2D& p = images_[i].keypoints[f];
      for (int l = 0; l < kLevels; ++l) {
        const int n = 2 << l;
        const int cx = std::clamp(static_cast<int>(p.x / w * n), 0, n - 1);
        const int cy = std::clamp(static_cast<int>(p.y / h * n), 0, n - 1);
        cells[l].insert(cy * n + cx);
      }
    }
    double score = 0;
    for (int l = 0; l < kLevels; ++l) score += static_cast<double>(cells[l].size()) * (2 << l);
    *num_visible = vis;
    return score;
  }

  // Fewest 2D-3D inliers that register an image whose pose a verified pair confirms.
  static constexpr int kMinSupportedInliers = 8;

  // The rotation predicted for image i by its verified pairs with registered images
  // (relative pose of the pair composed with the registered image's rotation). Where a
  // ring's views overlap only two at a time, an image sees few points that are already
  // triangulated (most tracks have two views), and a pose from few 2D-3D inliers is
  // accepted when a pair with a relative pose agrees with it within 2 degrees.
  bool RotationSupportedByPair(int i, const Eigen::Matrix3d& R) const {
    for (int p : image_pairs_[i]) {
      const MapperPair& pr = pairs_[p];
      if (!pr.has_pose || static_cast<int>(pr.inliers.size()) < o_.abs_pose_min_inliers) continue;
      const int other = pr.image1 == i ? pr.image2 : pr.image1;
      if (!Registered(other)) continue;
      const Eigen::Matrix3d Rrel = Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>>(pr.rotation);
      const Eigen::Matrix3d Ro = RotationOf(rec_.images.at(ImageId(other)));
      const Eigen::Matrix3d pred = pr.image1 == other ? Eigen::Matrix3d(Rrel * Ro) : Eigen::Matrix3d(Rrel.transpose() * Ro);
      const Eigen::Matrix3d E = pred * R.transpose();
      if (std::acos(std::clamp((E.trace() - 1) / 2, -1.0, 1.0)) < 2.0 * kDeg) return true;
    }
    return false;
  }

  // Whether the pose (R, t) of image i agrees with the matches of a verified pair with a
  // registered image: at least kPairMatchAgreement of the pair's inliers lie within
  // kPairMatchMaxErrorPx (Sampson distance, pixels) of the epipolar geometry that the two
  // model poses give. RotationSupportedByPair compares with the pair's own relative pose,
  // which on a narrow field of view is ill-determined: on the dino ring the pairs that join
  // its arcs (6-7, 12-13; 20-40 inliers) have relative rotations 1.4 to 85 degrees off,
  // seed to seed, for matches that are right. This tests the pose against the matches
  // themselves. A pose from few 2D-3D inliers trades rotation for translation along the
  // same ambiguity, so the test needs kMinPairMatchSupportedInliers of them: from 8, one
  // image of the dino (seed 5) registered 21 degrees off with 15 of its 17 pair matches
  // agreeing; from 10, every dino model of seeds 0-15 stayed within 1.1 degrees with the
  // intrinsics (1.6 self-calibrated).
  static constexpr double kPairMatchAgreement = 0.8;
  static constexpr double kPairMatchMaxErrorPx = 4.0;
  static constexpr int kMinPairMatchSupportedInliers = 10;
  bool PoseSupportedByPairMatches(int i, const Eigen::Matrix3d& R, const Eigen::Vector3d& t) const {
    for (int p : image_pairs_[i]) {
      const MapperPair& pr = pairs_[p];
      if (static_cast<int>(pr.inliers.size()) < o_.abs_pose_min_inliers) continue;
      const int other = pr.image1 == i ? pr.image2 : pr.image1;
      if (!Registered(other)) continue;
      const Image& im = rec_.images.at(ImageId(other));
      const Eigen::Matrix3d Ro = RotationOf(im);
      const Eigen::Vector3d to(im.tvec[0], im.tvec[1], im.tvec[2]);
      const bool i_first = pr.image1 == i;
      const Eigen::Matrix3d& R1 = i_first ? R : Ro;
      const Eigen::Matrix3d& R2 = i_first ? Ro : R;
      const Eigen::Vector3d& t1 = i_first ? t : to;
      const Eigen::Vector3d& t2 = i_first ? to : t;
      const Eigen::Matrix3d Rrel = R2 * R1.transpose();
      const Eigen::Vector3d trel = t2 - Rrel * t1;
      if (!(trel.norm() > 0)) continue;
      const double focal = 0.5 * (Focal(pr.image1) + Focal(pr.image2));
      const double thr2 = std::pow(kPairMatchMaxErrorPx / focal, 2);
      int agree = 0;
      for (const auto& [f1, f2] : pr.inliers)
        agree += PoseSampsonSquaredError(Rrel, trel, Normalized(pr.image1, f1), Normalized(pr.image2, f2)) <= thr2;
      // Self-calibrating, the pair's inliers are its fundamental matrix's, of which those
      // of its essential matrix are the ones a pose can fit.
      const size_t base = pr.num_e_inliers > 0 ? std::min(pr.inliers.size(), static_cast<size_t>(pr.num_e_inliers))
                                               : pr.inliers.size();
      if (agree >= kPairMatchAgreement * static_cast<double>(base)) return true;
    }
    return false;
  }

  // Fallback registration for an image that sees too few points for P3P: its rotation
  // and direction of travel come from a strong verified pair with a registered image (the
  // pair's relative pose composed with that image's pose), and only the distance along
  // that direction is estimated from the 2D-3D correspondences (one unknown: each
  // correspondence proposes a value, the one most correspondences agree with is kept).
  // Needs kMinPairScaleInliers agreeing correspondences; the pose is then refined on them
  // when they are enough to fix all six degrees of freedom.
  static constexpr int kMinPairScaleInliers = 4;
  // A scale from depths (TryMerge) needs the shared image to see this many points in each model.
  static constexpr int kMinDepthScalePoints = 10;
  // Two images in both models (TryMerge) must agree on the similarity within this (degrees).
  static constexpr double kMaxSharedImagesDisagreementDeg = 2.0;
  bool RegisterFromPair(int i, const std::vector<Eigen::Vector2d>& xn, const std::vector<Eigen::Vector3d>& X,
                        double focal, Eigen::Matrix3d* R_out, Eigen::Vector3d* t_out,
                        std::vector<uint8_t>* inliers_out) {
    const double thr = o_.abs_pose_max_error_px / focal;
    int best_support = 0;
    for (int p : image_pairs_[i]) {
      const MapperPair& pr = pairs_[p];
      if (!pr.has_pose || static_cast<int>(pr.inliers.size()) < 2 * o_.abs_pose_min_inliers) continue;
      const int other = pr.image1 == i ? pr.image2 : pr.image1;
      if (!Registered(other)) continue;
      const Image& im = rec_.images.at(ImageId(other));
      const Eigen::Matrix3d Rr = RotationOf(im);
      const Eigen::Vector3d tr(im.tvec[0], im.tvec[1], im.tvec[2]);
      const Eigen::Matrix3d Rrel = Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>>(pr.rotation);
      const Eigen::Vector3d trel(pr.translation[0], pr.translation[1], pr.translation[2]);
      Eigen::Matrix3d Ri;
      Eigen::Vector3d a, b;  // t_i = a + lambda b
      if (pr.image1 == other) {
        Ri = Rrel * Rr;
        a = Rrel * tr;
        b = trel;
      } else {
        Ri = Rrel.transpose() * Rr;
        a = Rrel.transpose() * tr;
        b = -Rrel.transpose() * trel;
      }
      auto error = [&](size_t k, double lambda) {
        const Eigen::Vector3d P = Ri * X[k] + a + lambda * b;
        if (P.z() <= 0) return std::numeric_limits<double>::infinity();
        return (Eigen::Vector2d(P.x() / P.z(), P.y() / P.z()) - xn[k]).norm();
      };
      // The distance along b that most correspondences agree with at `threshold`: each
      // correspondence proposes the one that puts its point on its image x coordinate.
      auto best_distance = [&](double threshold, int* best_count) {
        double best = -1;
        *best_count = 0;
        for (size_t k = 0; k < X.size(); ++k) {
          const Eigen::Vector3d c = Ri * X[k] + a;
          const double den = b.x() - xn[k].x() * b.z();
          if (std::abs(den) < 1e-12) continue;
          const double lambda = (xn[k].x() * c.z() - c.x()) / den;
          if (!(lambda > 0) || !std::isfinite(lambda)) continue;
          int support = 0;
          for (size_t q = 0; q < X.size(); ++q) support += error(q, lambda) <= threshold;
          if (support > *best_count) {
            *best_count = support;
            best = lambda;
          }
        }
        return best;
      };
      // The pair's pose as it is (what works when the intrinsics are known).
      int strict_count = 0;
      const double strict_lambda = best_distance(thr, &strict_count);
      if (strict_count > best_support) {
        best_support = strict_count;
        *R_out = Ri;
        *t_out = a + strict_lambda * b;
        inliers_out->assign(X.size(), 0);
        for (size_t q = 0; q < X.size(); ++q) (*inliers_out)[q] = error(q, strict_lambda) <= thr;
      }
      // The pair's pose is only as good as its essential matrix (with self-calibrated
      // intrinsics, a degree or so off: tens of pixels at a long focal length), so the
      // distance is chosen with a loose threshold and the pose then refined from there
      // under a robust loss before the inliers are counted at the real threshold.
      const double loose = 8 * thr;
      int best_loose = 0;
      const double best_lambda = best_distance(loose, &best_loose);
      if (best_loose < kMinPairScaleInliers) continue;
      Eigen::Matrix3d Rc = Ri;
      Eigen::Vector3d tc = a + best_lambda * b;
      std::vector<uint8_t> loose_mask(X.size(), 0);
      for (size_t q = 0; q < X.size(); ++q) loose_mask[q] = error(q, best_lambda) <= loose;
      if (!RefineAbsolutePosePair(xn, X, loose_mask, &Rc, &tc, thr)) continue;
      const Eigen::Matrix3d D = Rc * Ri.transpose();
      if (std::acos(std::clamp((D.trace() - 1) / 2, -1.0, 1.0)) > 3.0 * kDeg) continue;
      std::vector<uint8_t> mask(X.size(), 0);
      int support = 0;
      for (size_t q = 0; q < X.size(); ++q) {
        const Eigen::Vector3d P = Rc * X[q] + tc;
        mask[q] = P.z() > 0 && (Eigen::Vector2d(P.x() / P.z(), P.y() / P.z()) - xn[q]).norm() <= thr;
        support += mask[q];
      }
      if (support > best_support) {
        best_support = support;
        *R_out = Rc;
        *t_out = tc;
        *inliers_out = mask;
      }
    }
    return best_support >= kMinPairScaleInliers;
  }

  bool TryRegister(int i) {
    std::vector<Eigen::Vector2d> xn;
    std::vector<Eigen::Vector3d> X;
    std::vector<std::pair<uint32_t, uint64_t>> corr;
    // Temporarily make the camera available for Normalized().
    const bool had_camera = rec_.cameras.count(images_[i].camera_id) > 0;
    if (!had_camera) rec_.cameras[images_[i].camera_id] = cameras_.at(images_[i].camera_id);
    for (size_t f = 0; f < feature_track_[i].size(); ++f) {
      const int t = feature_track_[i][f];
      if (t < 0 || !HasPoint(t)) continue;
      const uint64_t pid = track_point_.at(t);
      const double* p = rec_.points3D.at(pid).xyz;
      xn.push_back(Normalized(i, static_cast<uint32_t>(f)));
      X.emplace_back(p[0], p[1], p[2]);
      corr.push_back({static_cast<uint32_t>(f), pid});
    }
    const double focal = Focal(i);
    const int n = static_cast<int>(xn.size());
    const int need = std::max(o_.abs_pose_min_inliers, static_cast<int>(std::ceil(o_.abs_pose_min_inlier_ratio * n)));
    Eigen::Matrix3d R;
    Eigen::Vector3d t;
    std::vector<uint8_t> inliers;
    int num_inliers = 0;
    const bool solved = n >= kMinSupportedInliers &&
                        SolveAbsolutePose(xn, X, o_.abs_pose_max_error_px / focal, o_.seed + i, &R, &t,
                                          &inliers, &num_inliers);
    bool ok = solved && (num_inliers >= need ||
                         (num_inliers >= kMinSupportedInliers && RotationSupportedByPair(i, R)));
    if (!ok && solved && num_inliers >= kMinPairMatchSupportedInliers && PoseSupportedByPairMatches(i, R, t)) {
      ok = true;
      ++summary_->match_supported_registrations;
    }
    if (!ok && RegisterFromPair(i, xn, X, focal, &R, &t, &inliers)) {
      ok = true;
      ++summary_->pair_registrations;
    }
    if (!ok) {
      if (!had_camera) rec_.cameras.erase(images_[i].camera_id);
      summary_->images[i].reason = "absolute pose: " + std::to_string(num_inliers) + " inliers of " +
                                   std::to_string(n) + " 2D-3D correspondences (needs " +
                                   std::to_string(need) + ")";
      return false;
    }
    AddImage(i, R, t);
    for (size_t k = 0; k < corr.size(); ++k)
      if (inliers[k] && WithinMaxAngle(corr[k].second, i)) AddObservation(corr[k].second, i, corr[k].first);
    return true;
  }

  Status BuildModel(int model_index, bool* started) {
    *started = false;
    // Initial pair candidates.
    std::vector<int> cand;
    for (size_t p = 0; p < pairs_.size(); ++p) {
      const MapperPair& pr = pairs_[p];
      if (pair_tried_[p] || !pr.has_pose || image_model_[pr.image1] >= 0 || image_model_[pr.image2] >= 0)
        continue;
      if (pr.num_h_inliers > o_.max_h_inlier_ratio * pr.inliers.size()) continue;
      if (static_cast<int>(pr.inliers.size()) < o_.init_min_points) continue;
      cand.push_back(static_cast<int>(p));
    }
    // COLMAP's order: the first image is the one with most verified correspondences
    // overall (a well-connected view starts a model that can grow), then its pairs by
    // inlier count.
    std::vector<int64_t> weight(images_.size(), 0);
    for (const MapperPair& pr : pairs_) {
      if (!pr.has_pose) continue;
      weight[pr.image1] += static_cast<int64_t>(pr.inliers.size());
      weight[pr.image2] += static_cast<int64_t>(pr.inliers.size());
    }
    auto key = [&](int p) {
      const MapperPair& pr = pairs_[p];
      const int first = weight[pr.image1] >= weight[pr.image2] ? pr.image1 : pr.image2;
      return std::make_tuple(-weight[first], first, -static_cast<int64_t>(pr.inliers.size()));
    };
    std::stable_sort(cand.begin(), cand.end(), [&](int a, int b) { return key(a) < key(b); });
    int trials = 0;
    bool init = false;
    int init_pair = -1;
    // Candidates are tried at the required median triangulation angle, then, if none
    // starts a model, once more at a quarter of it: a short sequence moving forward (KITTI)
    // has no pair with a wide angle.
    std::vector<int> cand2;
    for (int p : cand) cand2.push_back(p);
    for (int p : cand) cand2.push_back(-1 - p);
    for (int pp : cand2) {
      const int p = pp >= 0 ? pp : -1 - pp;
      if (pp == -1 - cand.front()) trials = 0;
      init_angle_deg_ = pp >= 0 ? o_.init_min_tri_angle_deg : o_.init_min_tri_angle_deg / 4;
      if (trials++ >= o_.init_max_trials) continue;
      pair_tried_[p] = 1;
      const auto t0 = std::chrono::steady_clock::now();
      init = TryInitialPair(p);
      summary_->seconds_registration += Seconds(t0);
      if (init) {
        current_init_ = {pairs_[p].image1, pairs_[p].image2};
        init_pair = p;
        break;
      }
      for (const auto& [id, im] : rec_.images) {
        summary_->images[id - 1].registered = false;
        summary_->images[id - 1].reason = "not connected to a model";
      }
    }
    if (!init) {
      rec_ = Reconstruction();
      return Status::Ok();
    }
    *started = true;
    const int total = static_cast<int>(images_.size());
    if (progress_) {
      progress_(model_index, pairs_[init_pair].image1, 1, total);
      progress_(model_index, pairs_[init_pair].image2, 2, total);
    }
    return Grow(model_index);
  }

  // Registers images into the current model while any registers, then adjusts it all.
  Status Grow(int model_index) {
    const int total = static_cast<int>(images_.size());
    size_t last_global = rec_.images.size();
    std::vector<int> tried_at(images_.size(), -1);  // model size at the last failed try
    while (o_.max_model_images <= 0 || rec_.images.size() < static_cast<size_t>(o_.max_model_images)) {
      // Rank the candidates.
      std::vector<std::pair<double, int>> ranked;
      for (int i = 0; i < total; ++i) {
        if (image_model_[i] >= 0 || Registered(i)) continue;
        if (tried_at[i] == static_cast<int>(rec_.points3D.size())) continue;  // nothing changed
        int vis = 0;
        const double score = PyramidScore(i, &vis);
        if (vis < kMinPairScaleInliers) {
          summary_->images[i].reason = vis == 0 ? "sees no point of the model" :
              "sees " + std::to_string(vis) + " points of the model (needs " + std::to_string(o_.abs_pose_min_inliers) + ")";
          continue;
        }
        ranked.push_back({-score, i});
      }
      if (ranked.empty()) break;
      std::sort(ranked.begin(), ranked.end());
      int registered = -1;
      for (const auto& [score, i] : ranked) {
        const auto t0 = std::chrono::steady_clock::now();
        const bool ok = TryRegister(i);
        summary_->seconds_registration += Seconds(t0);
        if (ok) { registered = i; break; }
        tried_at[i] = static_cast<int>(rec_.points3D.size());
      }
      if (registered < 0) break;
      TriangulateImage(registered);
      TIEPOINT_RETURN_IF_ERROR(LocalAdjust(registered));
      if (rec_.images.size() <= 8 || rec_.images.size() >= o_.global_ba_ratio * last_global) {
        TIEPOINT_RETURN_IF_ERROR(GlobalAdjust(o_.ba_global_max_iterations));
        Retriangulate();
        last_global = rec_.images.size();
      }
      if (progress_) progress_(model_index, registered, static_cast<int>(rec_.images.size()), total);
    }
    // Final adjustment (every intrinsic the options allow).
    final_ba_ = true;
    Status st = SelectTwoViewFocal();
    if (st.ok()) st = SelectRadialTerms();
    if (st.ok()) st = SelectPrincipalPoint();
    if (st.ok()) st = SelectAspectRatio();
    if (st.ok()) st = GlobalAdjust(o_.ba_global_max_iterations);
    if (st.ok()) {
      Retriangulate();
      st = GlobalAdjust(o_.ba_global_max_iterations);
    }
    final_ba_ = false;
    return st;
  }

  const MapperOptions& o_;
  const std::vector<MapperImage>& images_;
  const std::map<uint32_t, Camera>& cameras_;
  const std::vector<MapperPair>& pairs_;
  const std::vector<Track>& tracks_;
  MapperSummary* summary_;
  const MapperProgress& progress_;

  std::vector<std::vector<int>> feature_track_;
  std::vector<int> image_model_;
  std::vector<uint8_t> pair_tried_;
  Reconstruction rec_;
  std::unordered_map<int, uint64_t> track_point_;
  std::unordered_map<uint64_t, int> point_track_;
  std::unordered_set<int> wide_angle_tracks_;  // counted in summary_->wide_angle_tracks
  uint64_t next_point_id_ = 1;
  uint32_t first_image_ = 0;
  std::vector<ModelState> done_;
  std::vector<std::vector<int>> image_pairs_;  // per image: its pairs
  std::pair<int, int> current_init_{-1, -1};
  double init_angle_deg_ = 0;
  int extra_override_ = -1;   // radial terms: -1 as the model's size says, 0 fixed, 1 refined
  bool hold_principal_point_ = false;  // SelectRadialTerms: the principal point stays
  bool radial_fixed_ = false;  // SelectRadialTerms chose zero radial terms for this model
  double last_cost_ = 0;       // final cost of the last adjustment
  bool final_ba_ = false;             // the final adjustment of a model is running
  bool two_view_focal_free_ = false;  // SelectTwoViewFocal's free candidate is adjusting
  double loose_ = 1.0;                // triangulation and filtering at FilterPx()
  bool principal_point_free_ = true;  // cleared when the principal point proved undetermined
  bool aspect_free_ = false;  // SelectAspectRatio let fx and fy apart in this model
  bool tangential_free_ = false;  // SelectRadialTerms freed OPENCV's p1, p2 in this model
  std::set<uint32_t> diverged_cameras_;  // intrinsics held fixed: refined, they diverged
};

}  // namespace

Status MapperOptions::Check() const {
  if (init_min_points < 5) return Status::InvalidOptions("mapper: init_min_points must be >= 5");
  if (!(abs_pose_max_error_px > 0)) return Status::InvalidOptions("mapper: abs_pose_max_error_px must be > 0");
  if (abs_pose_min_inliers < 4) return Status::InvalidOptions("mapper: abs_pose_min_inliers must be >= 4");
  if (!(filter_max_reproj_error_px > 0)) return Status::InvalidOptions("mapper: filter_max_reproj_error_px must be > 0");
  if (merge_min_cross_points < 0) return Status::InvalidOptions("mapper: merge_min_cross_points must be >= 0");
  if (!(merge_retriangulation_factor >= 1.0 && merge_retriangulation_factor <= 1000.0))
    return Status::InvalidOptions("mapper: merge_retriangulation_factor must be in [1, 1000] (1: off)");
  if (local_ba_num_images < 1) return Status::InvalidOptions("mapper: local_ba_num_images must be >= 1");
  if (!(ba_function_tolerance >= 0 && ba_function_tolerance < 1))
    return Status::InvalidOptions("mapper: ba_function_tolerance must be in [0, 1)");
  if (!(ba_final_function_tolerance >= 0 && ba_final_function_tolerance < 1))
    return Status::InvalidOptions("mapper: ba_final_function_tolerance must be in [0, 1)");
  if (!(ba_step_extension == 0 || ba_step_extension >= 1))
    return Status::InvalidOptions("mapper: ba_step_extension must be 0 (off) or >= 1");
  if (!(global_ba_ratio >= 1)) return Status::InvalidOptions("mapper: global_ba_ratio must be >= 1");
  if (refine_aspect_ratio_min_images < 0)
    return Status::InvalidOptions("mapper: refine_aspect_ratio_min_images must be >= 0");
  if (!(min_aspect_ratio_gain >= 0 && min_aspect_ratio_gain < 1))
    return Status::InvalidOptions("mapper: min_aspect_ratio_gain must be in [0, 1)");
  if (!(max_aspect_ratio_change >= 0)) return Status::InvalidOptions("mapper: max_aspect_ratio_change must be >= 0");
  if (!(max_tri_angle_deg > tri_min_angle_deg && max_tri_angle_deg <= 180))
    return Status::InvalidOptions("mapper: --max-tri-angle must be above the minimum triangulation angle and at most 180");
  return Status::Ok();
}

Status RunIncrementalMapper(const MapperOptions& options, const std::vector<MapperImage>& images,
                            const std::map<uint32_t, Camera>& cameras,
                            const std::vector<MapperPair>& pairs, const std::vector<Track>& tracks,
                            std::vector<Reconstruction>* models, MapperSummary* summary,
                            const MapperProgress& progress) {
  TIEPOINT_RETURN_IF_ERROR(options.Check());
  *summary = MapperSummary();
  models->clear();
  for (size_t i = 0; i < images.size(); ++i)
    if (!cameras.count(images[i].camera_id))
      return Status::InvalidInput("mapper: image " + images[i].name + " names camera " +
                                  std::to_string(images[i].camera_id) + ", which is not given");
  for (const MapperPair& p : pairs)
    if (p.image1 < 0 || p.image2 < 0 || p.image1 >= static_cast<int>(images.size()) ||
        p.image2 >= static_cast<int>(images.size()))
      return Status::InvalidInput("mapper: a pair names an image out of range");
  // No model at all: as COLMAP's mapper relaxes its initialisation, the pairs are tried
  // again with half as many points required (twice at most, down to 5): two photos, or a
  // few with little texture, whose best pair triangulates fewer than init_min_points.
  MapperOptions o = options;
  for (int relaxation = 0;; ++relaxation) {
    *summary = MapperSummary();
    models->clear();
    Mapper mapper(o, images, cameras, pairs, tracks, summary, progress);
    TIEPOINT_RETURN_IF_ERROR(mapper.Run(models));
    summary->init_min_points = o.init_min_points;
    if (!models->empty() || relaxation == 2 || o.init_min_points <= 5) return Status::Ok();
    o.init_min_points = std::max(5, o.init_min_points / 2);
  }
}

}  // namespace tiepoint
