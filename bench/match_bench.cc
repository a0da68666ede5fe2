// match_bench: homography recovery on image pairs with ground truth, tiepoint's pipeline
// side by side with OpenCV's, in one run, on the same decoded images.
//
// Pairs (under --data, default $TIEPOINT_SHARED_DATA or ../shared/data): Oxford boat 1 -> 2..6
// and graf 1 -> 3, with their ground-truth homographies H (image 1 to image N).
//   tiepoint: SIFT (CPU, first octave upsampled, as OpenCV's default) -> DescriptorMatcher
//             (CPU, Lowe ratio 0.8; also a row with --mutual) -> EstimateTwoViewGeometry
//             (homography, RANSAC, 3 px);
//   OpenCV:   cv::SIFT -> cv::BFMatcher (L2, knnMatch k = 2, ratio 0.8) ->
//             cv::findHomography(RANSAC, 3 px).
// Both see the same 8-bit grey values (tiepoint's decoder rounded to 8 bit for OpenCV).
// Diagnostic row: tiepoint's SIFT and matches through cv::findHomography (RANSAC, 3 px).
// Score: the four image corners of image 1, (0,0), (w-1,0), (w-1,h-1), (0,h-1), mapped by
// the estimate and by H; corner error = the largest of the four distances (pixels of image
// 2). A pair succeeds when a model was found (verified for tiepoint) and the corner error
// is <= 3 px.
// Matching speed, same run: tiepoint's CPU matcher (all threads) against OpenCV's
// BFMatcher::knnMatch (cv::setNumThreads default) on each pair's tiepoint descriptors
// (as float for OpenCV), best of 3.
// Output: a table on stdout and, with --out, JSON (machine, date, commit, build flags).
#include <nlohmann/json.hpp>
#include <opencv2/calib3d.hpp>
#include <opencv2/core.hpp>
#include <opencv2/features2d.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "features/matcher.h"
#include "features/sift.h"
#include "io/base/timer.h"
#include "io/image.h"
#include "bench/bench_common.h"
#include "bench/opencv_common.h"
#include "io/report.h"
#include "solver/geometry/two_view_geometry.h"
#include "tiepoint/build_info.h"

namespace tiepoint {
namespace {

using bench::BestOf;
using bench::MapHomography;
using bench::Quantize8;
using bench::ToMat8;

using json = nlohmann::json;

constexpr double kSuccessPx = 3.0;



// Largest distance between the corners of a w x h image mapped by `est` and by `truth`;
// infinity when the estimate maps a corner to infinity or NaN.
double CornerError(const double est[9], const double truth[9], int w, int h) {
  const double corners[4][2] = {{0, 0}, {w - 1.0, 0}, {w - 1.0, h - 1.0}, {0, h - 1.0}};
  double worst = 0;
  for (const auto& c : corners) {
    double ex, ey, tx, ty;
    MapHomography(est, c[0], c[1], &ex, &ey);
    MapHomography(truth, c[0], c[1], &tx, &ty);
    const double d = std::hypot(ex - tx, ey - ty);
    if (!std::isfinite(d)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, d);
  }
  return worst;
}



cv::Mat ToFloatMat(const Features& f) {
  cv::Mat m(static_cast<int>(f.size()), kSiftDescriptorDim, CV_32F);
  for (size_t i = 0; i < f.size(); ++i) {
    for (int j = 0; j < kSiftDescriptorDim; ++j) {
      m.at<float>(static_cast<int>(i), j) = f.descriptor(i)[j];
    }
  }
  return m;
}



struct Outcome {
  int keypoints1 = 0, keypoints2 = 0, matches = 0, inliers = 0;
  bool model = false;
  double corner_error = std::numeric_limits<double>::infinity();
  double H[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  bool success() const { return model && corner_error <= kSuccessPx; }
  json ToJson() const {
    return {{"keypoints1", keypoints1},
            {"keypoints2", keypoints2},
            {"matches", matches},
            {"inliers", inliers},
            {"model_found", model},
            {"corner_error_px", std::isfinite(corner_error) ? json(corner_error) : json(nullptr)},
            {"success", success()},
            {"H", std::vector<double>(H, H + 9)}};
  }
};

// cv::findHomography (RANSAC, kSuccessPx) on the matches, scored against the truth H on a
// w x h image 1: fills the model, inliers, H and corner error of `o` when a model is found.
void OpenCvHomography(const std::vector<cv::Point2f>& x1, const std::vector<cv::Point2f>& x2,
                      const double truth[9], int w, int h, Outcome* o) {
  if (x1.size() < 4) return;
  cv::Mat mask;
  const cv::Mat est = cv::findHomography(x1, x2, cv::RANSAC, kSuccessPx, mask);
  if (est.empty()) return;
  o->model = true;
  o->inliers = cv::countNonZero(mask);
  for (int i = 0; i < 9; ++i) o->H[i] = est.at<double>(i / 3, i % 3);
  o->corner_error = CornerError(o->H, truth, w, h);
}

struct Args {
  std::string data;
  std::string out;
};

int Main(const Args& args) {
  json result = bench::ResultHeader("bench/match_bench");
  result["opencv_version"] = CV_VERSION;
  result["success_threshold_px"] = kSuccessPx;
  std::printf("match_bench: OpenCV %s; commit %s\n", CV_VERSION, kGitCommit);

  const std::vector<bench::HomographyPair> pairs = bench::OxfordHomographyPairs();

  SiftOptions sift_options;
  sift_options.upsample = true;
  std::unique_ptr<FeatureExtractor> sift;
  Status s = FeatureExtractor::Create(sift_options, Device::kCpu, &sift);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  cv::Ptr<cv::SIFT> opencv_sift = cv::SIFT::create();
  RansacOptions ransac;
  ransac.max_error_px = kSuccessPx;

  json rows = json::array();
  int ok_tiepoint = 0, ok_tiepoint_mutual = 0, ok_tiepoint_cv = 0, ok_opencv = 0, counted = 0;
  std::printf("\n%-9s %-17s %6s %6s %7s %7s %12s %s\n", "pair", "pipeline", "kp1", "kp2",
              "matches", "inliers", "corner err", "ok");
  for (const bench::HomographyPair& pair : pairs) {
    GrayImage im1, im2;
    double H[9];
    if (!bench::ReadHomographyPair(args.data, pair, 9, &im1, &im2, H)) {
      continue;
    }
    ++counted;
    im1 = Quantize8(im1);
    im2 = Quantize8(im2);
    json row;
    row["pair"] = pair.name;
    auto print = [&](const char* pipeline, const Outcome& o) {
      std::printf("%-9s %-17s %6d %6d %7d %7d %12.3f %s\n", pair.name.c_str(), pipeline,
                  o.keypoints1, o.keypoints2, o.matches, o.inliers, o.corner_error,
                  o.success() ? "yes" : "no");
    };

    // tiepoint: SIFT -> matcher -> RANSAC homography.
    Features f1, f2;
    if (!(s = sift->Extract(im1, &f1)).ok() || !(s = sift->Extract(im2, &f2)).ok()) {
      std::fprintf(stderr, "%s: %s\n", pair.name.c_str(), s.ToString().c_str());
      return 1;
    }
    for (bool mutual : {false, true}) {
      MatcherOptions mo;
      mo.ratio = 0.8;
      mo.mutual = mutual;
      std::unique_ptr<DescriptorMatcher> matcher;
      std::vector<FeatureMatch> matches;
      if (!(s = DescriptorMatcher::Create(mo, Device::kCpu, &matcher)).ok() ||
          !(s = matcher->Match(f1, f2, &matches)).ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        return 1;
      }
      std::vector<std::array<double, 2>> x1, x2;
      for (const FeatureMatch& m : matches) {
        x1.push_back({f1.keypoints[m.index1].x, f1.keypoints[m.index1].y});
        x2.push_back({f2.keypoints[m.index2].x, f2.keypoints[m.index2].y});
      }
      TwoViewGeometry g;
      Outcome o;
      o.keypoints1 = static_cast<int>(f1.size());
      o.keypoints2 = static_cast<int>(f2.size());
      o.matches = static_cast<int>(matches.size());
      if ((s = EstimateTwoViewGeometry(TwoViewModel::kHomography, x1, x2, nullptr, nullptr, ransac,
                                       &g)).ok() &&
          g.verified) {
        o.model = true;
        o.inliers = g.num_inliers;
        std::copy(g.matrix, g.matrix + 9, o.H);
        o.corner_error = CornerError(o.H, H, im1.width, im1.height);
      } else if (!s.ok()) {
        std::fprintf(stderr, "%s: %s\n", pair.name.c_str(), s.ToString().c_str());
      }
      const char* name = mutual ? "tiepoint+mutual" : "tiepoint";
      print(name, o);
      row[name] = o.ToJson();
      (mutual ? ok_tiepoint_mutual : ok_tiepoint) += o.success();
      if (mutual) continue;
      // Diagnostic row: tiepoint's matches through OpenCV's estimator (separates the
      // features and matches from the estimator).
      Outcome c = o;
      c.model = false;
      c.inliers = 0;
      c.corner_error = std::numeric_limits<double>::infinity();
      std::vector<cv::Point2f> c1, c2;
      for (size_t k = 0; k < x1.size(); ++k) {
        c1.emplace_back(static_cast<float>(x1[k][0]), static_cast<float>(x1[k][1]));
        c2.emplace_back(static_cast<float>(x2[k][0]), static_cast<float>(x2[k][1]));
      }
      OpenCvHomography(c1, c2, H, im1.width, im1.height, &c);
      print("tiepoint+cv-H", c);
      row["tiepoint_matches_opencv_findhomography"] = c.ToJson();
      ok_tiepoint_cv += c.success();
    }

    // OpenCV: SIFT -> BFMatcher knn ratio 0.8 -> findHomography(RANSAC, 3 px).
    {
      std::vector<cv::KeyPoint> k1, k2;
      cv::Mat d1, d2;
      opencv_sift->detectAndCompute(ToMat8(im1), cv::noArray(), k1, d1);
      opencv_sift->detectAndCompute(ToMat8(im2), cv::noArray(), k2, d2);
      cv::BFMatcher bf(cv::NORM_L2);
      std::vector<std::vector<cv::DMatch>> knn;
      if (!d1.empty() && !d2.empty()) bf.knnMatch(d1, d2, knn, 2);
      std::vector<cv::Point2f> x1, x2;
      for (const auto& m : knn) {
        if (m.size() == 2 && m[0].distance < 0.8f * m[1].distance) {
          x1.push_back(k1[m[0].queryIdx].pt);
          x2.push_back(k2[m[0].trainIdx].pt);
        }
      }
      Outcome o;
      o.keypoints1 = static_cast<int>(k1.size());
      o.keypoints2 = static_cast<int>(k2.size());
      o.matches = static_cast<int>(x1.size());
      OpenCvHomography(x1, x2, H, im1.width, im1.height, &o);
      print("opencv", o);
      row["opencv"] = o.ToJson();
      ok_opencv += o.success();
    }

    // Matching speed on the tiepoint descriptors: tiepoint CPU matcher vs OpenCV BFMatcher.
    {
      MatcherOptions mo;
      std::unique_ptr<DescriptorMatcher> matcher;
      (void)DescriptorMatcher::Create(mo, Device::kCpu, &matcher);
      std::vector<FeatureMatch> matches;
      const double tp_s = BestOf(3, [&] { (void)matcher->Match(f1, f2, &matches); });
      const cv::Mat a = ToFloatMat(f1), b = ToFloatMat(f2);
      cv::BFMatcher bf(cv::NORM_L2);
      std::vector<std::vector<cv::DMatch>> knn;
      const double cv_s = BestOf(3, [&] { bf.knnMatch(a, b, knn, 2); });
      row["matching_speed"] = {{"descriptors1", f1.size()},
                               {"descriptors2", f2.size()},
                               {"tiepoint_cpu_seconds", tp_s},
                               {"opencv_bfmatcher_knn2_seconds", cv_s},
                               {"tiepoint_speedup", cv_s / tp_s}};
      std::printf("%-9s matching %zu x %zu: tiepoint cpu %.4f s, opencv BFMatcher knn %.4f s "
                  "(%.1fx)\n",
                  pair.name.c_str(), f1.size(), f2.size(), tp_s, cv_s, cv_s / tp_s);
    }
    rows.push_back(row);
  }
  result["pairs"] = rows;
  result["successes"] = {{"pairs", counted},
                         {"tiepoint", ok_tiepoint},
                         {"tiepoint_mutual", ok_tiepoint_mutual},
                         {"tiepoint_matches_opencv_findhomography", ok_tiepoint_cv},
                         {"opencv", ok_opencv}};
  std::printf("\nsuccesses (corner error <= %.0f px) of %d pairs: tiepoint (ratio 0.8) %d, "
              "tiepoint (ratio 0.8 + mutual) %d, tiepoint matches + OpenCV findHomography %d, "
              "OpenCV %d\n",
              kSuccessPx, counted, ok_tiepoint, ok_tiepoint_mutual, ok_tiepoint_cv, ok_opencv);
  if (const int rc = bench::WriteResult(args.out, result); rc != 0) return rc;
  return counted > 0 ? 0 : 3;
}

}  // namespace
}  // namespace tiepoint

int main(int argc, char** argv) {
  tiepoint::Args args;
  tiepoint::bench::ParseDataAndOut(argc, argv, "match_bench", &args.data, &args.out);
  return tiepoint::Main(args);
}
