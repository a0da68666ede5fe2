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
// What the matches allow (Cramer-Rao bound, RotationBound below): over the matches within
// 2 px (Sampson) of the ground-truth epipolar geometry, the smallest RMS rotation error an
// unbiased estimator can have with noise of their own RMS Sampson distance, linearised at
// the true pose; for tiepoint's ratio-test matches and, as an oracle, for every nearest
// neighbour (no ratio test) that the ground truth accepts. A bound above 1 degree means
// that no estimator reaches 1 degree on that pair with those correspondences, except by luck.
// The estimator's reported uncertainty (TwoViewGeometry::rotation_uncertainty_deg) beside
// its actual error. And the estimator itself on ideal data of each pair's size and noise (SimulateEstimates):
// how many pairs an outlier-free version of the same matches would bring within 1 degree.
// Output: a table on stdout and, with --out, JSON (machine, date, commit, build flags).
#include <Eigen/Core>
#include <Eigen/Geometry>
#include <Eigen/SVD>
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
#include <random>
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
#include "solver/geometry/essential.h"
#include "solver/geometry/fundamental.h"
#include "solver/geometry/ransac_utils.h"
#include "solver/geometry/two_view_geometry.h"
#include "tiepoint/build_info.h"

namespace tiepoint {
namespace {

using bench::Quantize8;
using bench::ToMat8;
using json = nlohmann::json;

constexpr double kSuccessDeg = 1.0;
constexpr double kMaxErrorPx = 2.0;
constexpr double kContrast = 0.01;
constexpr double kBoundGatePx = 2.0;
// Pairs whose reported rotation uncertainty (TwoViewGeometry) is at most this are counted
// apart: how far a user can trust a pose by the estimator's own account.
constexpr double kConfidentDeg = 0.5;
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

// Cramer-Rao bound on the relative rotation: two_view::RotationStandardError at the true
// pose over the matches within `gate_px` (Sampson distance) of the true geometry, with
// sigma = their RMS Sampson distance (match noise and any error of the ground truth).
struct RotationBound {
  std::vector<int> indices;  // the consistent matches
  int consistent = 0;
  double sigma_px = 0.0;
  double rotation_rms_deg = std::numeric_limits<double>::infinity();
  json ToJson() const {
    return {{"consistent_matches", consistent},
            {"sigma_px", sigma_px},
            {"rotation_rms_deg", std::isfinite(rotation_rms_deg) ? json(rotation_rms_deg) : json(nullptr)}};
  }
};

RotationBound BoundRotation(const Eigen::Matrix3d& K1, const Eigen::Matrix3d& K2,
                            const Eigen::Matrix3d& R, const Eigen::Vector3d& t,
                            const std::vector<std::array<double, 2>>& x1,
                            const std::vector<std::array<double, 2>>& x2, double gate_px) {
  const Eigen::Matrix3d F = two_view::FundamentalFromEssential(two_view::Skew(t) * R, K1, K2);
  std::vector<Eigen::Vector2d> p1, p2;
  RotationBound out;
  double sum_sq = 0.0;
  for (size_t k = 0; k < x1.size(); ++k) {
    p1.emplace_back(x1[k][0], x1[k][1]);
    p2.emplace_back(x2[k][0], x2[k][1]);
    const double e2 = two_view::SampsonSquaredError(F, p1.back(), p2.back());
    if (!(e2 <= gate_px * gate_px)) continue;
    out.indices.push_back(static_cast<int>(k));
    sum_sq += e2;
  }
  out.consistent = static_cast<int>(out.indices.size());
  if (out.consistent == 0) return out;
  out.sigma_px = std::sqrt(sum_sq / out.consistent);
  out.rotation_rms_deg =
      two_view::RotationStandardError(p1, p2, K1, K2, out.indices, R, t, out.sigma_px) * 180.0 / kPi;
  return out;
}

// The estimator on ideal data of the pair's size and noise: the ratio matches within the
// gate of the true geometry (`consistent`, from BoundRotation), triangulated with the true cameras (linear, DLT) and projected
// back (exact correspondences at the real image positions), plus Gaussian noise of sigma px
// on every coordinate, no outliers; kSimulationTrials draws (fixed seeds) through
// EstimateTwoViewGeometry. `within`: draws that end within 1 degree of the truth; an
// unverified draw counts as a miss.
constexpr int kSimulationTrials = 40;
struct Simulation {
  int points = 0, verified = 0, within = 0;
  double rms_deg = std::numeric_limits<double>::infinity();
  json ToJson() const {
    return {{"points", points},
            {"trials", kSimulationTrials},
            {"verified", verified},
            {"within_1_deg", within},
            {"rms_rotation_error_deg", std::isfinite(rms_deg) ? json(rms_deg) : json(nullptr)}};
  }
};

Simulation SimulateEstimates(const Eigen::Matrix3d& K1, const Eigen::Matrix3d& K2,
                             const Eigen::Matrix3d& R_true, const Eigen::Vector3d& t_true,
                             const std::vector<std::array<double, 2>>& x1,
                             const std::vector<std::array<double, 2>>& x2,
                             const std::vector<int>& consistent, const Intrinsics& in1,
                             const Intrinsics& in2, const RansacOptions& ransac, double sigma_px) {
  Eigen::Matrix<double, 3, 4> P1, P2;
  P1 << K1, Eigen::Vector3d::Zero();
  P2 << K2 * R_true, K2 * t_true.normalized();
  std::vector<Eigen::Vector2d> p1, p2;
  for (const int k : consistent) {
    Eigen::Matrix4d A;
    A.row(0) = x1[k][0] * P1.row(2) - P1.row(0);
    A.row(1) = x1[k][1] * P1.row(2) - P1.row(1);
    A.row(2) = x2[k][0] * P2.row(2) - P2.row(0);
    A.row(3) = x2[k][1] * P2.row(2) - P2.row(1);
    const Eigen::Vector4d X = Eigen::JacobiSVD<Eigen::Matrix4d>(A, Eigen::ComputeFullV).matrixV().col(3);
    p1.push_back((P1 * X).hnormalized());
    p2.push_back((P2 * X).hnormalized());
  }
  Simulation out;
  out.points = static_cast<int>(p1.size());
  double sum_sq = 0.0;
  for (int trial = 0; trial < kSimulationTrials; ++trial) {
    std::mt19937_64 rng(1000 + trial);
    std::normal_distribution<double> noise(0.0, sigma_px);
    std::vector<std::array<double, 2>> y1, y2;
    for (size_t k = 0; k < p1.size(); ++k) {
      y1.push_back({p1[k].x() + noise(rng), p1[k].y() + noise(rng)});
      y2.push_back({p2[k].x() + noise(rng), p2[k].y() + noise(rng)});
    }
    RansacOptions options = ransac;
    options.seed = trial;
    TwoViewGeometry g;
    if (!EstimateTwoViewGeometry(TwoViewModel::kEssential, y1, y2, &in1, &in2, options, &g).ok() ||
        !g.verified)
      continue;
    Eigen::Matrix3d R;
    for (int k = 0; k < 9; ++k) R(k / 3, k % 3) = g.rotation[k];
    const double error = AngleDeg(0.5 * ((R.transpose() * R_true).trace() - 1.0));
    sum_sq += error * error;
    out.within += error <= kSuccessDeg;
    ++out.verified;
  }
  if (out.verified > 0) out.rms_deg = std::sqrt(sum_sq / out.verified);
  return out;
}

std::vector<std::array<double, 2>> Positions(const Features& f, const std::vector<FeatureMatch>& m,
                                             bool first) {
  std::vector<std::array<double, 2>> x;
  for (const FeatureMatch& fm : m) {
    const Keypoint& k = f.keypoints[first ? fm.index1 : fm.index2];
    x.push_back({k.x, k.y});
  }
  return x;
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
  result["bound_gate_px"] = kBoundGatePx;
  std::printf("essential_bench: OpenCV %s; commit %s\n", CV_VERSION, kGitCommit);

  SiftOptions sift_options;
  sift_options.upsample = true;
  sift_options.contrast_threshold = kContrast;
  std::unique_ptr<FeatureExtractor> sift;
  Status s = FeatureExtractor::Create(sift_options, Device::kCpu, &sift);
  MatcherOptions mo;
  mo.ratio = 0.8;
  std::unique_ptr<DescriptorMatcher> matcher, nearest;
  if (s.ok()) s = DescriptorMatcher::Create(mo, Device::kCpu, &matcher);
  MatcherOptions no_ratio;  // every nearest neighbour, for the oracle bound
  no_ratio.ratio = 1.0;
  if (s.ok()) s = DescriptorMatcher::Create(no_ratio, Device::kCpu, &nearest);
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
    int ok_tp = 0, ok_tp_cv = 0, ok_cv = 0, pairs_here = 0, bound_ratio_ok = 0, bound_all_ok = 0;
    double expected_successes = 0.0;
    int confident = 0, confident_ok = 0;
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
      // The estimator's own account of how well its inliers fix the rotation.
      const double reported = tp.pose ? g.rotation_uncertainty_deg : std::numeric_limits<double>::infinity();
      row["tiepoint"]["rotation_uncertainty_deg"] = std::isfinite(reported) ? json(reported) : json(nullptr);
      std::printf("%-34s reported rotation uncertainty %.2f deg\n", "", reported);
      if (reported <= kConfidentDeg) {
        ++confident;
        confident_ok += tp.success();
      }
      ok_tp += tp.success();

      // What these matches allow (and every ground-truth-consistent nearest neighbour).
      std::vector<FeatureMatch> all_nearest;
      if (!(s = nearest->Match(features[i], features[j], &all_nearest)).ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        return 1;
      }
      const RotationBound bound_ratio = BoundRotation(K1, K2, R_true, t_true, x1, x2, kBoundGatePx);
      const RotationBound bound_all =
          BoundRotation(K1, K2, R_true, t_true, Positions(features[i], all_nearest, true),
                        Positions(features[j], all_nearest, false), kBoundGatePx);
      std::printf("%-34s bound: ratio matches %d consistent, sigma %.2f px -> %.2f deg; all nearest "
                  "neighbours %d consistent, sigma %.2f px -> %.2f deg\n",
                  "", bound_ratio.consistent, bound_ratio.sigma_px, bound_ratio.rotation_rms_deg,
                  bound_all.consistent, bound_all.sigma_px, bound_all.rotation_rms_deg);
      const Simulation simulated =
          SimulateEstimates(K1, K2, R_true, t_true, x1, x2, bound_ratio.indices, in1, in2, ransac,
                            bound_ratio.sigma_px);
      std::printf("%-34s simulated: %d exact correspondences + %.2f px noise, %d trials: rms rotation "
                  "error %.2f deg, within 1 degree in %d\n",
                  "", simulated.points, bound_ratio.sigma_px, kSimulationTrials, simulated.rms_deg,
                  simulated.within);
      row["simulation"] = simulated.ToJson();
      expected_successes += static_cast<double>(simulated.within) / kSimulationTrials;
      row["rotation_bound_ratio_matches"] = bound_ratio.ToJson();
      row["rotation_bound_all_nearest_neighbours"] = bound_all.ToJson();
      bound_ratio_ok += bound_ratio.rotation_rms_deg <= kSuccessDeg;
      bound_all_ok += bound_all.rotation_rms_deg <= kSuccessDeg;

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
    std::printf("%s: pairs whose reported rotation uncertainty is <= %.1f degree: %d, of which "
                "within %.0f degree: %d\n",
                set.c_str(), kConfidentDeg, confident, kSuccessDeg, confident_ok);
    std::printf("%s: pairs whose Cramer-Rao rotation bound is <= %.0f degree: %d with tiepoint's "
                "matches, %d with every consistent nearest neighbour\n",
                set.c_str(), kSuccessDeg, bound_ratio_ok, bound_all_ok);
    std::printf("%s: the estimator on simulated ideal data of each pair's size and noise ends within "
                "%.0f degree on %.1f pairs (average over %d draws)\n",
                set.c_str(), kSuccessDeg, expected_successes, kSimulationTrials);
    sets[set] = rows;
    totals[set] = {{"pairs", pairs_here},
                   {"tiepoint", ok_tp},
                   {"tiepoint_matches_opencv_essential", ok_tp_cv},
                   {"opencv", ok_cv},
                   {"bound_within_1_deg_ratio_matches", bound_ratio_ok},
                   {"bound_within_1_deg_all_nearest_neighbours", bound_all_ok},
                   {"simulated_expected_successes", expected_successes},
                   {"reported_uncertainty_within_0_5_deg", confident},
                   {"reported_uncertainty_within_0_5_deg_and_success", confident_ok}};
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
