// essential_bench: relative poses from the essential matrix on the Middlebury sparse rings
// (templeSparseRing, dinoSparseRing: 16 views each, ground-truth K, R, t in *_par.txt with
// x = K [R | t] X), tiepoint's pipeline side by side with OpenCV's, in one run, on the
// same decoded images.
//
// Pairs: neighbouring views, each view with the two views whose ground-truth camera
// centres C = -R^T t are nearest (views at the same place are skipped), each pair once.
//   tiepoint: SIFT (CPU, first octave upsampled, contrast threshold 0.01: the objects are
//             dark and matte on black) -> DescriptorMatcher (CPU, ratio 0.8) ->
//             EstimateTwoViewGeometry (essential, 5-point RANSAC, 2 px Sampson, refined);
//   OpenCV:   cv::SIFT (contrastThreshold 0.01, its default upsampled first octave) ->
//             cv::BFMatcher (L2, knnMatch k = 2, ratio 0.8) -> cv::findEssentialMat (RANSAC,
//             prob 0.999, 2 px) -> cv::recoverPose.
// Diagnostic row: tiepoint's SIFT and matches through findEssentialMat + recoverPose.
// Score: rotation error = angle of R_est^T R_true with R_true = R2 R1^T (cam2_from_cam1),
// degrees; a pair succeeds when a pose was found and the error is <= 1 degree (issue 7).
// Also reported: the angle between the estimated and the true translation directions.
// Output: a table on stdout and, with --out, JSON (machine, date, commit, build flags).
#include <Eigen/Core>
#include <Eigen/Geometry>
#include <nlohmann/json.hpp>
#include <opencv2/calib3d.hpp>
#include <opencv2/core.hpp>
#include <opencv2/core/eigen.hpp>
#include <opencv2/features2d.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_common.h"
#include "bench/opencv_common.h"
#include "features/matcher.h"
#include "features/sift.h"
#include "io/image.h"
#include "io/middlebury.h"
#include "io/report.h"
#include "solver/two_view_geometry.h"
#include "tiepoint/build_info.h"

namespace tiepoint {
namespace {

using bench::Quantize8;
using bench::ToMat8;
using json = nlohmann::json;

constexpr double kSuccessDeg = 1.0;
constexpr double kMaxErrorPx = 2.0;
constexpr double kContrast = 0.01;
constexpr double kPi = 3.14159265358979323846;

// A ring camera (io/middlebury.h) as Eigen matrices.
struct View {
  std::string name;
  Eigen::Matrix3d K, R;  // R: cam_from_world
  Eigen::Vector3d t;
};

View ToView(const MiddleburyCamera& c) {
  View v;
  v.name = c.name;
  v.K = Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>>(c.K.data());
  v.R = Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>>(c.R.data());
  v.t = Eigen::Vector3d(c.t[0], c.t[1], c.t[2]);
  return v;
}

double AngleDeg(double cosine) { return std::acos(std::clamp(cosine, -1.0, 1.0)) * 180.0 / kPi; }

struct Outcome {
  int matches = 0, inliers = 0;
  bool pose = false;
  double rotation_error = std::numeric_limits<double>::infinity();
  double direction_error = std::numeric_limits<double>::infinity();
  bool success() const { return pose && rotation_error <= kSuccessDeg; }
  void Score(const Eigen::Matrix3d& R, const Eigen::Vector3d& t, const Eigen::Matrix3d& R_true,
             const Eigen::Vector3d& t_true) {
    pose = true;
    rotation_error = AngleDeg(0.5 * ((R.transpose() * R_true).trace() - 1.0));
    direction_error = AngleDeg(t.normalized().dot(t_true.normalized()));
  }
  json ToJson() const {
    auto finite = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
    return {{"matches", matches},
            {"inliers", inliers},
            {"pose_found", pose},
            {"rotation_error_deg", finite(rotation_error)},
            {"translation_direction_error_deg", finite(direction_error)},
            {"success", success()}};
  }
};

// findEssentialMat (RANSAC, 2 px) + recoverPose on pixel coordinates with the ring's K.
Outcome OpenCvPose(const std::vector<cv::Point2d>& x1, const std::vector<cv::Point2d>& x2,
                   const Eigen::Matrix3d& K, const Eigen::Matrix3d& R_true,
                   const Eigen::Vector3d& t_true) {
  Outcome o;
  o.matches = static_cast<int>(x1.size());
  if (x1.size() < 5) return o;
  cv::Mat k;
  cv::eigen2cv(K, k);
  cv::Mat mask;
  cv::Mat E = cv::findEssentialMat(x1, x2, k, cv::RANSAC, 0.999, kMaxErrorPx, mask);
  if (E.empty() || E.rows != 3) return o;  // several solutions stacked: take the first
  cv::Mat R, t;
  o.inliers = cv::recoverPose(E, x1, x2, k, R, t, mask);
  if (o.inliers <= 0) return o;
  Eigen::Matrix3d Re;
  Eigen::Vector3d te;
  cv::cv2eigen(R, Re);
  cv::cv2eigen(t, te);
  o.Score(Re, te, R_true, t_true);
  return o;
}

struct Args {
  std::string data;
  std::string out;
};

int Main(const Args& args) {
  json result = bench::ResultHeader("bench/essential_bench");
  result["opencv_version"] = CV_VERSION;
  result["success_threshold_deg"] = kSuccessDeg;
  result["ransac_threshold_px"] = kMaxErrorPx;
  result["sift_contrast_threshold"] = kContrast;
  std::printf("essential_bench: OpenCV %s; commit %s\n", CV_VERSION, kGitCommit);

  SiftOptions sift_options;
  sift_options.upsample = true;
  sift_options.contrast_threshold = kContrast;
  std::unique_ptr<FeatureExtractor> sift;
  Status s = FeatureExtractor::Create(sift_options, Device::kCpu, &sift);
  MatcherOptions mo;
  mo.ratio = 0.8;
  std::unique_ptr<DescriptorMatcher> matcher;
  if (s.ok()) s = DescriptorMatcher::Create(mo, Device::kCpu, &matcher);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  cv::Ptr<cv::SIFT> opencv_sift = cv::SIFT::create(0, 3, kContrast);
  RansacOptions ransac;
  ransac.max_error_px = kMaxErrorPx;

  int counted = 0;
  json sets = json::object();
  json totals = json::object();
  for (const std::string set : {"templeSparseRing", "dinoSparseRing"}) {
    const std::string dir = args.data + "/multiview/middlebury/" + set;
    const std::string prefix = set == "templeSparseRing" ? "templeSR" : "dinoSR";
    std::vector<MiddleburyCamera> cameras;
    const Status read = ReadMiddleburyCameras(dir + "/" + prefix + "_par.txt", &cameras);
    if (!read.ok()) {
      std::printf("%s: %s: skipped\n", set.c_str(), read.ToString().c_str());
      continue;
    }
    std::vector<View> views;
    for (const MiddleburyCamera& c : cameras) views.push_back(ToView(c));
    const int n = static_cast<int>(views.size());
    std::vector<Features> features(n);
    std::vector<std::vector<cv::KeyPoint>> cv_keys(n);
    std::vector<cv::Mat> cv_desc(n);
    for (int v = 0; v < n; ++v) {
      GrayImage image;
      const std::string path = dir + "/" + views[v].name;
      if (!(s = ReadImageGray(path, &image)).ok() || !(s = sift->Extract(image = Quantize8(image), &features[v])).ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        return 1;
      }
      opencv_sift->detectAndCompute(ToMat8(image), cv::noArray(), cv_keys[v], cv_desc[v]);
    }
    std::printf("\n%-34s %-15s %7s %7s %9s %9s %s\n", "pair", "pipeline", "matches", "inliers",
                "rot err", "dir err", "ok");
    json rows = json::array();
    int ok_tp = 0, ok_tp_cv = 0, ok_cv = 0, pairs_here = 0;
    for (const auto& [i, j] : MiddleburyNeighbourPairs(cameras)) {
      ++pairs_here;
      const Eigen::Matrix3d R_true = views[j].R * views[i].R.transpose();
      const Eigen::Vector3d t_true = views[j].t - R_true * views[i].t;
      const std::string name = views[i].name + "-" + views[j].name;
      json row = {{"pair", name}, {"true_rotation_deg", AngleDeg(0.5 * (R_true.trace() - 1.0))}};
      auto print = [&](const char* pipeline, const Outcome& o) {
        std::printf("%-34s %-15s %7d %7d %9.3f %9.3f %s\n", name.c_str(), pipeline, o.matches,
                    o.inliers, o.rotation_error, o.direction_error, o.success() ? "yes" : "no");
      };

      // tiepoint: matcher -> 5-point RANSAC -> refinement.
      std::vector<FeatureMatch> matches;
      if (!(s = matcher->Match(features[i], features[j], &matches)).ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        return 1;
      }
      std::vector<std::array<double, 2>> x1, x2;
      std::vector<cv::Point2d> c1, c2;
      for (const FeatureMatch& m : matches) {
        const Keypoint& a = features[i].keypoints[m.index1];
        const Keypoint& b = features[j].keypoints[m.index2];
        x1.push_back({a.x, a.y});
        x2.push_back({b.x, b.y});
        c1.emplace_back(a.x, a.y);
        c2.emplace_back(b.x, b.y);
      }
      const Eigen::Matrix3d& K1 = views[i].K;
      const Eigen::Matrix3d& K2 = views[j].K;
      const Intrinsics in1{K1(0, 0), K1(1, 1), K1(0, 2), K1(1, 2)};
      const Intrinsics in2{K2(0, 0), K2(1, 1), K2(0, 2), K2(1, 2)};
      Outcome tp;
      tp.matches = static_cast<int>(matches.size());
      TwoViewGeometry g;
      if ((s = EstimateTwoViewGeometry(TwoViewModel::kEssential, x1, x2, &in1, &in2, ransac, &g)).ok() &&
          g.verified) {
        tp.inliers = g.num_inliers;
        Eigen::Matrix3d R;
        for (int k = 0; k < 9; ++k) R(k / 3, k % 3) = g.rotation[k];
        tp.Score(R, Eigen::Vector3d(g.translation[0], g.translation[1], g.translation[2]), R_true, t_true);
      }
      print("tiepoint", tp);
      row["tiepoint"] = tp.ToJson();
      ok_tp += tp.success();

      // Diagnostic: tiepoint's matches through OpenCV's estimator.
      const Outcome tp_cv = OpenCvPose(c1, c2, K1, R_true, t_true);
      print("tiepoint+cv-E", tp_cv);
      row["tiepoint_matches_opencv_essential"] = tp_cv.ToJson();
      ok_tp_cv += tp_cv.success();

      // OpenCV: SIFT -> BFMatcher knn ratio 0.8 -> findEssentialMat -> recoverPose.
      std::vector<cv::Point2d> o1, o2;
      if (!cv_desc[i].empty() && !cv_desc[j].empty()) {
        cv::BFMatcher bf(cv::NORM_L2);
        std::vector<std::vector<cv::DMatch>> knn;
        bf.knnMatch(cv_desc[i], cv_desc[j], knn, 2);
        for (const auto& m : knn) {
          if (m.size() == 2 && m[0].distance < 0.8f * m[1].distance) {
            o1.emplace_back(cv_keys[i][m[0].queryIdx].pt);
            o2.emplace_back(cv_keys[j][m[0].trainIdx].pt);
          }
        }
      }
      const Outcome cv_o = OpenCvPose(o1, o2, K1, R_true, t_true);
      print("opencv", cv_o);
      row["opencv"] = cv_o.ToJson();
      ok_cv += cv_o.success();
      rows.push_back(row);
    }
    counted += pairs_here;
    std::printf("%s: within %.0f degree of %d neighbouring pairs: tiepoint %d, tiepoint matches + "
                "OpenCV estimator %d, OpenCV %d\n",
                set.c_str(), kSuccessDeg, pairs_here, ok_tp, ok_tp_cv, ok_cv);
    sets[set] = rows;
    totals[set] = {{"pairs", pairs_here},
                   {"tiepoint", ok_tp},
                   {"tiepoint_matches_opencv_essential", ok_tp_cv},
                   {"opencv", ok_cv}};
  }
  result["sets"] = sets;
  result["successes"] = totals;
  if (const int rc = bench::WriteResult(args.out, result); rc != 0) return rc;
  return counted > 0 ? 0 : 3;
}

}  // namespace
}  // namespace tiepoint

int main(int argc, char** argv) {
  tiepoint::Args args;
  tiepoint::bench::ParseDataAndOut(argc, argv, "essential_bench", &args.data, &args.out);
  return tiepoint::Main(args);
}
