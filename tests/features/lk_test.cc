// Pyramidal LK (features/lk.h): on synthetic images shifted by a known sub-pixel or
// multi-pixel amount (smooth texture evaluated analytically, so the truth is exact) the
// shift is recovered to < 0.01 px, also under gain and bias; lost features are reported
// (flat patches, points leaving the image, a forward-backward failure); a patch turned by
// 14 degrees and zoomed by 0.89 is recovered to < 0.05 px with the true linear map
// (LkLinearMap) and not without, the identity map gives the same bits as no map, and the
// linear prediction (TrackWithLinearPrediction) fits the turn; on real sequences (KITTI 00,
// Oxford boat) the median forward-backward error is < 0.1 px and >= 90% of the KITTI
// tracks survive from one frame to the next. SequenceTracker: at most one new track per
// cell and no two live tracks re-detected in one cell. Then CUDA against the CPU reference
// (positions within 0.01 px, also with a linear map), skipping without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "features/fast.h"
#include "features/frontend.h"
#include "features/lk.h"
#include "features/pyramid.h"
#include "io/image.h"
#include "tests/common/gpu.h"
#include "tests/common/shared_data.h"

namespace tiepoint {
namespace {

struct Blob {
  double x, y, sigma, amplitude;
};

// Blobs at two scales: fine ones (sigma 2..5 px) for accuracy, coarse ones (8..16 px) so
// the coarse pyramid levels keep texture for large shifts.
std::vector<Blob> MakeBlobs(int w, int h, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> ux(-20, w + 20), uy(-20, h + 20), fine(2.0, 5.0),
      coarse(8.0, 16.0), ua(-50, 50);
  std::vector<Blob> blobs(static_cast<size_t>(w) * h / 40);
  for (size_t i = 0; i < blobs.size(); ++i) {
    const bool big = i % 8 == 0;
    blobs[i] = {ux(rng), uy(rng), big ? coarse(rng) : fine(rng), ua(rng) * (big ? 0.6 : 1.0)};
  }
  return blobs;
}

// The texture at (x - sx, y - sy), times gain plus bias, quantised to 8 bits.
ImageU8 Render(int w, int h, const std::vector<Blob>& blobs, double sx, double sy,
               double gain = 1.0, double bias = 0.0) {
  std::vector<double> acc(static_cast<size_t>(w) * h, 128.0);
  for (const Blob& b : blobs) {
    const int r = static_cast<int>(std::ceil(4 * b.sigma));
    const double cx = b.x + sx, cy = b.y + sy;
    for (int y = std::max(0, static_cast<int>(cy) - r); y <= std::min(h - 1, static_cast<int>(cy) + r); ++y) {
      for (int x = std::max(0, static_cast<int>(cx) - r); x <= std::min(w - 1, static_cast<int>(cx) + r); ++x) {
        const double d2 = (x - cx) * (x - cx) + (y - cy) * (y - cy);
        acc[static_cast<size_t>(y) * w + x] += b.amplitude * std::exp(-d2 / (2 * b.sigma * b.sigma));
      }
    }
  }
  ImageU8 img{w, h, std::vector<uint8_t>(acc.size())};
  for (size_t i = 0; i < acc.size(); ++i) {
    img.data[i] = static_cast<uint8_t>(std::clamp(std::round(gain * acc[i] + bias), 0.0, 255.0));
  }
  return img;
}

// The texture turned by `degrees` and zoomed by `scale` about (cx, cy), then shifted by
// (tx, ty): x' = s R (x - c) + c + t, exactly (Gaussian blobs stay Gaussian, sigma * s).
ImageU8 RenderSimilarity(int w, int h, const std::vector<Blob>& blobs, double scale,
                         double degrees, double cx, double cy, double tx, double ty) {
  const double t = degrees * M_PI / 180, c = scale * std::cos(t), s = scale * std::sin(t);
  std::vector<Blob> moved = blobs;
  for (Blob& b : moved) {
    const double u = b.x - cx, v = b.y - cy;
    b.x = c * u - s * v + cx + tx;
    b.y = s * u + c * v + cy + ty;
    b.sigma *= scale;
  }
  return Render(w, h, moved, 0, 0);
}

Point2f SimilarityOf(const Point2f& p, double scale, double degrees, double cx, double cy,
                     double tx, double ty) {
  const double t = degrees * M_PI / 180, c = scale * std::cos(t), s = scale * std::sin(t);
  const double u = p.x - cx, v = p.y - cy;
  return {static_cast<float>(c * u - s * v + cx + tx), static_cast<float>(s * u + c * v + cy + ty)};
}

std::vector<Point2f> GridPoints(int w, int h, int margin, int step, double jitter_seed) {
  std::mt19937 rng(static_cast<unsigned>(jitter_seed));
  std::uniform_real_distribution<float> j(0.0f, 1.0f);
  std::vector<Point2f> pts;
  for (int y = margin; y < h - margin; y += step) {
    for (int x = margin; x < w - margin; x += step) pts.push_back({x + j(rng), y + j(rng)});
  }
  return pts;
}

double Median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

struct ShiftCase {
  double sx, sy, gain, bias;
};

// Per feature, bilinear interpolation of 8-bit images limits LK to about 0.01 px (the
// template and the target are interpolated at different sub-pixel phases; OpenCV's LK
// shares this): the median feature error is ~0.01 px and the shift estimated from all
// features (their mean displacement) is within 0.005 px. Integer shifts are exact.
TEST(LkTest, RecoversSyntheticShiftsToOneHundredthOfAPixel) {
  const int w = 320, h = 240;
  const auto blobs = MakeBlobs(w, h, 42);
  const ImageU8 first = Render(w, h, blobs, 0, 0);
  ImagePyramid p0, p1;
  ASSERT_TRUE(BuildPyramid(first, 4, 0, &p0).ok());
  const auto points = GridPoints(w, h, 30, 17, 1);
  for (const ShiftCase& c : {ShiftCase{3, -2, 1, 0}, ShiftCase{0.37, -0.61, 1, 0},
                             ShiftCase{3.3, 2.2, 1, 0}, ShiftCase{11.7, -7.4, 1, 0},
                             ShiftCase{-2.45, 1.8, 1.15, 5}, ShiftCase{5.6, 4.1, 0.85, 20}}) {
    SCOPED_TRACE(::testing::Message() << "shift " << c.sx << "," << c.sy << " gain " << c.gain
                                      << " bias " << c.bias);
    ASSERT_TRUE(BuildPyramid(Render(w, h, blobs, c.sx, c.sy, c.gain, c.bias), 4, 0, &p1).ok());
    LkOptions o;
    std::vector<LkResult> r;
    ASSERT_TRUE(TrackLk(p0, p1, points, nullptr, o, &r).ok());
    std::vector<double> errors, gains;
    double mean_x = 0, mean_y = 0;
    for (size_t i = 0; i < points.size(); ++i) {
      if (r[i].status != LkStatus::kTracked) continue;
      const double ex = r[i].x - points[i].x - c.sx, ey = r[i].y - points[i].y - c.sy;
      errors.push_back(std::hypot(ex, ey));
      gains.push_back(r[i].gain);
      mean_x += ex;
      mean_y += ey;
    }
    ASSERT_GE(errors.size(), 0.9 * points.size());
    mean_x /= errors.size();
    mean_y /= errors.size();
    std::sort(errors.begin(), errors.end());
    const double median = errors[errors.size() / 2];
    const double p95 = errors[errors.size() * 95 / 100];
    std::printf("shift (%.2f, %.2f) gain %.2f: %zu of %zu tracked, shift error %.4f px, feature "
                "error median %.4f p95 %.4f max %.4f px\n",
                c.sx, c.sy, c.gain, errors.size(), points.size(), std::hypot(mean_x, mean_y),
                median, p95, errors.back());
    EXPECT_LT(std::hypot(mean_x, mean_y), 0.005);
    if (c.sx == std::round(c.sx) && c.sy == std::round(c.sy) && c.gain == 1) {
      EXPECT_LT(errors.back(), 1e-3);
    } else {
      EXPECT_LT(median, 0.015);
      EXPECT_LT(p95, 0.05);
    }
    EXPECT_NEAR(Median(gains), c.gain, 0.01);
  }
}

// A predicted shift larger than kLkMaxLevelShift (64 level pixels) on level 0: divergence
// is measured from where each level starts, so a good prediction of a fast feature (60-70
// px per frame near KITTI's right border) is tracked, not lost as kOutside.
TEST(LkTest, FollowsLargeShiftsFromAPrediction) {
  const int w = 320, h = 240;
  const auto blobs = MakeBlobs(w, h, 7);
  ImagePyramid p0, p1;
  ASSERT_TRUE(BuildPyramid(Render(w, h, blobs, 0, 0), 4, 0, &p0).ok());
  ASSERT_TRUE(BuildPyramid(Render(w, h, blobs, 70.4, -3.3), 4, 0, &p1).ok());
  std::vector<Point2f> points, guesses;
  for (const Point2f& p : GridPoints(w - 100, h, 40, 13, 5)) {
    points.push_back(p);
    guesses.push_back({p.x + 70.0f, p.y - 3.0f});
  }
  std::vector<LkResult> r;
  ASSERT_TRUE(TrackLk(p0, p1, points, &guesses, LkOptions(), &r).ok());
  std::vector<double> errors;
  for (size_t i = 0; i < r.size(); ++i) {
    if (r[i].status == LkStatus::kTracked) {
      errors.push_back(std::hypot(r[i].x - points[i].x - 70.4, r[i].y - points[i].y + 3.3));
    }
  }
  std::printf("shift (70.4, -3.3) predicted at (70, -3): %zu of %zu tracked, median error %.4f "
              "px\n", errors.size(), r.size(), Median(errors));
  EXPECT_GE(errors.size(), 0.9 * r.size());
  EXPECT_LT(Median(errors), 0.015);
}

TEST(LkTest, ReportsLostFeatures) {
  const int w = 200, h = 160;
  const auto blobs = MakeBlobs(w, h, 3);
  ImagePyramid p0, p1, flat;
  ASSERT_TRUE(BuildPyramid(Render(w, h, blobs, 0, 0), 3, 0, &p0).ok());
  ASSERT_TRUE(BuildPyramid(Render(w, h, blobs, 6, 0), 3, 0, &p1).ok());
  ASSERT_TRUE(BuildPyramid(ImageU8{w, h, std::vector<uint8_t>(w * h, 90)}, 3, 0, &flat).ok());
  LkOptions o;
  std::vector<LkResult> r;
  // A flat frame has no gradient: kFlat.
  ASSERT_TRUE(TrackLk(flat, p1, {{100, 80}}, nullptr, o, &r).ok());
  EXPECT_EQ(r[0].status, LkStatus::kFlat);
  // Moving right by 6 px from the right edge leaves the image.
  ASSERT_TRUE(TrackLk(p0, p1, {{w - 3.0f, 80}}, nullptr, o, &r).ok());
  EXPECT_NE(r[0].status, LkStatus::kTracked);
  // A wrong guess far away with one level and one iteration does not come back: the
  // forward-backward check catches what the forward pass alone accepts.
  LkOptions one = o;
  one.levels = 1;
  one.max_iterations = 1;
  one.fb_threshold = 0.05f;
  std::vector<Point2f> pts = {{100, 80}};
  std::vector<Point2f> guess = {{100 + 6 + 0.9f, 80 - 0.9f}};
  ASSERT_TRUE(TrackLk(p0, p1, pts, &guess, one, &r).ok());
  EXPECT_EQ(r[0].status, LkStatus::kForwardBackward) << r[0].fb_error;
  EXPECT_GT(r[0].fb_error, 0.05f);
  // A mismatch in sizes is an input error.
  ImagePyramid small;
  ASSERT_TRUE(BuildPyramid(Render(100, 80, blobs, 0, 0), 3, 0, &small).ok());
  EXPECT_EQ(TrackLk(p0, small, pts, nullptr, o, &r).code(), StatusCode::kInvalidInput);
  o.levels = 0;
  EXPECT_EQ(TrackLk(p0, p1, pts, nullptr, o, &r).code(), StatusCode::kInvalidOptions);
  o.levels = 3;
  o.cuda_warps_per_feature = 3;
  EXPECT_EQ(TrackLk(p0, p1, pts, nullptr, o, &r).code(), StatusCode::kInvalidOptions);
}

// A patch turned by 14 degrees and zoomed by 0.89 (the Oxford boat 1->2 pair's motion),
// predicted exactly: a translation-only patch (identity map) lands a tenth of a pixel
// off, the linear map of the true motion brings it back to the shift accuracy.
TEST(LkTest, LinearMapFollowsATurnedAndZoomedPatch) {
  const int w = 320, h = 240;
  const auto blobs = MakeBlobs(w, h, 11);
  const double scale = 0.89, deg = 14, cx = 160, cy = 120, tx = 0.3, ty = -0.2;
  ImagePyramid p0, p1;
  ASSERT_TRUE(BuildPyramid(Render(w, h, blobs, 0, 0), 4, 0, &p0).ok());
  ASSERT_TRUE(
      BuildPyramid(RenderSimilarity(w, h, blobs, scale, deg, cx, cy, tx, ty), 4, 0, &p1).ok());
  std::vector<Point2f> points, truth;
  for (const Point2f& p : GridPoints(w, h, 50, 11, 3)) {
    points.push_back(p);
    truth.push_back(SimilarityOf(p, scale, deg, cx, cy, tx, ty));
  }
  auto median_error = [&](const LkLinearMap& map, size_t* tracked, double* fb) {
    std::vector<LkResult> r;
    EXPECT_TRUE(TrackLk(p0, p1, points, &truth, map, LkOptions(), &r).ok());
    std::vector<double> err, fbe;
    for (size_t i = 0; i < r.size(); ++i) {
      if (r[i].status != LkStatus::kTracked) continue;
      err.push_back(std::hypot(r[i].x - truth[i].x, r[i].y - truth[i].y));
      fbe.push_back(r[i].fb_error);
    }
    *tracked = err.size();
    *fb = Median(fbe);
    return Median(err);
  };
  size_t n_id = 0, n_map = 0;
  double fb_id = 0, fb_map = 0;
  const double e_id = median_error(LkLinearMap(), &n_id, &fb_id);
  const double e_map = median_error(LkLinearMap::Similarity(scale, deg), &n_map, &fb_map);
  std::printf("turned 14 deg, zoom 0.89, exact prediction: identity map %zu of %zu tracked, median "
              "error %.4f px (FB %.4f); true map %zu tracked, median error %.4f px (FB %.4f)\n",
              n_id, points.size(), e_id, fb_id, n_map, e_map, fb_map);
  EXPECT_GE(n_map, 0.9 * points.size());
  EXPECT_GE(n_map, n_id);
  EXPECT_LT(e_map, 0.05);
  EXPECT_LT(fb_map, 0.05);
  EXPECT_GT(e_id, 0.05);
  EXPECT_GT(e_id, 3 * e_map);
}

// The identity map runs the identity code: the same bits as TrackLk without a map. A map
// one float step away from the identity runs the mapped code (per-sample positions, the
// update through A) and lands within 1e-3 px of it: the two paths agree.
TEST(LkTest, IdentityMapIsBitIdenticalAndTheMappedPathAgrees) {
  const int w = 320, h = 240;
  const auto blobs = MakeBlobs(w, h, 42);
  ImagePyramid p0, p1;
  ASSERT_TRUE(BuildPyramid(Render(w, h, blobs, 0, 0), 4, 0, &p0).ok());
  ASSERT_TRUE(BuildPyramid(Render(w, h, blobs, 3.3, 2.2, 1.1, 4), 4, 0, &p1).ok());
  const auto points = GridPoints(w, h, 30, 17, 1);
  std::vector<LkResult> plain, identity, near;
  ASSERT_TRUE(TrackLk(p0, p1, points, nullptr, LkOptions(), &plain).ok());
  ASSERT_TRUE(TrackLk(p0, p1, points, nullptr, LkLinearMap(), LkOptions(), &identity).ok());
  LkLinearMap almost;
  almost.a00 = std::nextafter(1.0f, 2.0f);
  ASSERT_FALSE(almost.IsIdentity());
  ASSERT_TRUE(TrackLk(p0, p1, points, nullptr, almost, LkOptions(), &near).ok());
  int tracked = 0;
  double worst = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    EXPECT_EQ(plain[i].status, identity[i].status);
    EXPECT_EQ(plain[i].x, identity[i].x);
    EXPECT_EQ(plain[i].y, identity[i].y);
    EXPECT_EQ(plain[i].fb_error, identity[i].fb_error);
    EXPECT_EQ(plain[i].gain, identity[i].gain);
    EXPECT_EQ(plain[i].bias, identity[i].bias);
    if (plain[i].status == LkStatus::kTracked && near[i].status == LkStatus::kTracked) {
      ++tracked;
      worst = std::max<double>(worst, std::hypot(plain[i].x - near[i].x, plain[i].y - near[i].y));
    }
  }
  std::printf("identity vs mapped path (A one float step off): %d tracked by both, worst %.2e px\n",
              tracked, worst);
  EXPECT_GE(tracked, static_cast<int>(0.9 * points.size()));
  EXPECT_LT(worst, 1e-3);
  // Maps LK refuses.
  LkLinearMap bad;
  bad.a00 = NAN;
  EXPECT_EQ(TrackLk(p0, p1, points, nullptr, bad, LkOptions(), &near).code(),
            StatusCode::kInvalidOptions);
  EXPECT_EQ(LkLinearMap::Similarity(0.2, 10).Check().code(), StatusCode::kInvalidOptions);
  EXPECT_EQ(LkLinearMap::Similarity(5, 10).Check().code(), StatusCode::kInvalidOptions);
  LkLinearMap mirror;
  mirror.a00 = -1;
  EXPECT_EQ(mirror.Check().code(), StatusCode::kInvalidOptions);
  EXPECT_TRUE(LkLinearMap::Similarity(0.89, -14).Check().ok());
  EXPECT_NEAR(LkLinearMap::Similarity(0.89, -14).RotationDegrees(), -14, 1e-4);
  EXPECT_NEAR(LkLinearMap::Similarity(0.89, -14).Scale(), 0.89, 1e-6);
  const LkLinearMap inv = LkLinearMap::Similarity(0.89, -14).Inverse();
  EXPECT_NEAR(inv.RotationDegrees(), 14, 1e-4);
  EXPECT_NEAR(inv.Scale(), 1 / 0.89, 1e-6);
}

// TrackWithLinearPrediction: from the identity, the similarity fitted to the first pass
// recovers the turn and zoom, a second pass runs with it and the map carries over; on a
// pure shift it fits no turn, runs no second pass and returns Track's results exactly.
TEST(LkTest, LinearPredictionFitsTheTurnAndSkipsPureShifts) {
  const int w = 320, h = 240;
  const auto blobs = MakeBlobs(w, h, 11);
  const double scale = 0.89, deg = 14, cx = 160, cy = 120, tx = 0.3, ty = -0.2;
  FrontEndOptions o;
  o.slots = 3;
  std::unique_ptr<FastLkFrontEnd> fe;
  ASSERT_TRUE(FastLkFrontEnd::Create(o, Device::kCpu, &fe).ok());
  ASSERT_TRUE(fe->SetFrame(0, Render(w, h, blobs, 0, 0)).ok());
  ASSERT_TRUE(fe->SetFrame(1, RenderSimilarity(w, h, blobs, scale, deg, cx, cy, tx, ty)).ok());
  ASSERT_TRUE(fe->SetFrame(2, Render(w, h, blobs, 2.6, -1.3)).ok());
  std::vector<Point2f> points, truth;
  for (const Point2f& p : GridPoints(w, h, 50, 11, 3)) {
    points.push_back(p);
    truth.push_back(SimilarityOf(p, scale, deg, cx, cy, tx, ty));
  }
  LkLinearMap map;
  std::vector<LkResult> r, first;
  LinearPredictionReport report;
  ASSERT_TRUE(fe->Track(0, 1, points, &truth, &first).ok());
  ASSERT_TRUE(TrackWithLinearPrediction(fe.get(), 0, 1, points, &truth, o.linear_prediction, &map,
                                        &r, &report).ok());
  ASSERT_TRUE(report.fitted);
  EXPECT_TRUE(report.second_pass());
  EXPECT_NEAR(map.RotationDegrees(), deg, 0.1);
  EXPECT_NEAR(map.Scale(), scale, 0.002);
  std::vector<double> err_first, err;
  for (size_t i = 0; i < r.size(); ++i) {
    if (first[i].status == LkStatus::kTracked) {
      err_first.push_back(std::hypot(first[i].x - truth[i].x, first[i].y - truth[i].y));
    }
    if (r[i].status == LkStatus::kTracked) {
      err.push_back(std::hypot(r[i].x - truth[i].x, r[i].y - truth[i].y));
    }
  }
  std::printf("linear prediction: fitted %.3f deg, scale %.4f on %d tracks; median error %.4f px "
              "(%zu tracked) against %.4f px (%zu) with the identity\n",
              map.RotationDegrees(), map.Scale(), report.inliers, Median(err), err.size(),
              Median(err_first), err_first.size());
  EXPECT_LT(Median(err), 0.05);
  EXPECT_GE(err.size(), err_first.size());
  // A pure shift: nothing to turn.
  LkLinearMap id;
  std::vector<LkResult> shifted, plain;
  ASSERT_TRUE(TrackWithLinearPrediction(fe.get(), 0, 2, points, nullptr, o.linear_prediction, &id,
                                        &shifted, &report).ok());
  ASSERT_TRUE(fe->Track(0, 2, points, nullptr, &plain).ok());
  EXPECT_TRUE(report.fitted);
  EXPECT_FALSE(report.second_pass());
  EXPECT_TRUE(id.IsIdentity());
  EXPECT_NEAR(report.fit.RotationDegrees(), 0, 0.05);
  EXPECT_NEAR(report.fit.Scale(), 1, 0.002);
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(plain[i].status, shifted[i].status);
    EXPECT_EQ(plain[i].x, shifted[i].x);
    EXPECT_EQ(plain[i].y, shifted[i].y);
  }
  LinearPredictionOptions bad;
  bad.min_tracks = 2;
  EXPECT_EQ(bad.Check().code(), StatusCode::kInvalidOptions);
  bad = LinearPredictionOptions();
  bad.min_rotation_deg = -1;
  EXPECT_EQ(bad.Check().code(), StatusCode::kInvalidOptions);
}

// The 8-bit grey images at two paths (the test fails when one is unreadable).
void ReadQuantizedPair(const std::string& a, const std::string& b, ImageU8* qa, ImageU8* qb) {
  GrayImage ga, gb;
  ASSERT_TRUE(ReadImageGray(a, &ga).ok()) << a;
  ASSERT_TRUE(ReadImageGray(b, &gb).ok()) << b;
  *qa = QuantizeImage(ga);
  *qb = QuantizeImage(gb);
}

// Oxford boat img1 and img2 and the ground-truth homography img1 -> img2 (nine numbers in
// H1to2p); skips the test when the shared data are absent.
void ReadBoatPair(ImageU8* qa, ImageU8* qb, double H[9]) {
  TIEPOINT_REQUIRE_SHARED(a, "features/oxford_boat/img1.pgm");
  TIEPOINT_REQUIRE_SHARED(b, "features/oxford_boat/img2.pgm");
  TIEPOINT_REQUIRE_SHARED(hpath, "features/oxford_boat/H1to2p");
  FILE* f = std::fopen(hpath.c_str(), "r");
  ASSERT_NE(f, nullptr) << hpath;
  for (int i = 0; i < 9; ++i) ASSERT_EQ(std::fscanf(f, "%lf", &H[i]), 1) << hpath;
  std::fclose(f);
  ReadQuantizedPair(a, b, qa, qb);
}

// The corners and where H maps them (guesses for the tracker).
void CornersAndImages(const std::vector<FastCorner>& corners, const double H[9],
                      std::vector<Point2f>* pts, std::vector<Point2f>* guesses) {
  for (const FastCorner& c : corners) {
    pts->push_back({c.x, c.y});
    const double w = H[6] * c.x + H[7] * c.y + H[8];
    guesses->push_back({static_cast<float>((H[0] * c.x + H[1] * c.y + H[2]) / w),
                        static_cast<float>((H[3] * c.x + H[4] * c.y + H[5]) / w)});
  }
}

// FAST corners of frame a tracked into frame b: survival and forward-backward errors.
void TrackRealPair(const std::string& a, const std::string& b, Device device, double* survival,
                   double* median_fb, std::vector<LkResult>* results = nullptr) {
  GrayImage ga, gb;
  ASSERT_TRUE(ReadImageGray(a, &ga).ok());
  ASSERT_TRUE(ReadImageGray(b, &gb).ok());
  FrontEndOptions o;
  std::unique_ptr<FastLkFrontEnd> fe;
  const Status s = FastLkFrontEnd::Create(o, device, &fe);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(fe->SetFrame(0, QuantizeImage(ga)).ok());
  ASSERT_TRUE(fe->SetFrame(1, QuantizeImage(gb)).ok());
  std::vector<FastCorner> corners;
  ASSERT_TRUE(fe->Detect(0, nullptr, &corners).ok());
  ASSERT_GT(corners.size(), 100u);
  std::vector<Point2f> pts;
  for (const FastCorner& c : corners) pts.push_back({c.x, c.y});
  std::vector<LkResult> r;
  ASSERT_TRUE(fe->Track(0, 1, pts, nullptr, &r).ok());
  std::vector<double> fb;
  for (const LkResult& x : r) {
    if (x.status == LkStatus::kTracked) fb.push_back(x.fb_error);
  }
  *survival = static_cast<double>(fb.size()) / r.size();
  *median_fb = Median(fb);
  if (results) *results = r;
}

const char* kKitti = "multiview/kitti_odometry_00_excerpt/sequences/00/image_0/";

// The issue asks for >= 90% of tracks surviving each KITTI step. With the defaults
// (16x16 patches on levels 0-2, forward-backward check at 1 px, divergence measured from
// each level's start) the CPU reference keeps 93.3, 92.8, 92.1 and 90.9% (threshold 40).
TEST(LkTest, KittiTracksSurviveWithSmallForwardBackwardError) {
  std::vector<std::string> frames;
  for (int f = 0; f < 5; ++f) {
    TIEPOINT_REQUIRE_SHARED(path, std::string(kKitti) + "00000" + std::to_string(f) + ".png");
    frames.push_back(path);
  }
  FrontEndOptions o;
  o.fast.threshold = 40;
  std::unique_ptr<FastLkFrontEnd> fe;
  ASSERT_TRUE(FastLkFrontEnd::Create(o, Device::kCpu, &fe).ok());
  SequenceTracker tracker(fe.get(), o);
  for (const std::string& path : frames) {
    GrayImage g;
    ASSERT_TRUE(ReadImageGray(path, &g).ok());
    ASSERT_TRUE(tracker.AddFrame(QuantizeImage(g), nullptr).ok());
  }
  const SequenceTrackerSummary& s = tracker.summary();
  ASSERT_EQ(s.tracks_in.size(), 4u);
  for (size_t i = 0; i < s.tracks_in.size(); ++i) {
    const double survival = static_cast<double>(s.tracks_survived[i]) / s.tracks_in[i];
    std::printf("KITTI %zu->%zu: %d of %d tracks survive (%.1f%%)\n", i, i + 1,
                s.tracks_survived[i], s.tracks_in[i], 100 * survival);
    EXPECT_GE(survival, 0.90);
  }
  std::vector<double> fb(s.fb_errors.begin(), s.fb_errors.end());
  std::printf("KITTI median forward-backward error %.4f px over %zu tracked steps\n", Median(fb),
              fb.size());
  EXPECT_LT(Median(fb), 0.1);
}

// Boat img1 -> img2 turns by 14 degrees and zooms by 0.89 (plus a 130 px shift): beyond
// a translation-only patch model. Predicted by the ground-truth homography, the features
// LK keeps with the default patches (16x16 on levels 0-2, 8x8 above) and no linear
// prediction come back to within 0.21 px (median forward-backward error; boat img1 turned
// by 0, 5, 10, 14 degrees (zoom 1) gives 0.001, 0.019, 0.074 and 0.156 px, and 0.221 px at
// 14 degrees with zoom 0.89). With the linear prediction (the default: a similarity
// fitted to the first pass, -14.0 degrees and 0.882, then a second pass with the patches
// turned and zoomed by it) 481 of 536 corners are tracked with a median of 0.058 px (334
// with 0.211 px without).
void TrackBoat(const FrontEndOptions& o, size_t* tracked, size_t* total, double* median_fb,
               LkLinearMap* map_out) {
  ImageU8 qa, qb;
  double H[9];
  ReadBoatPair(&qa, &qb, H);
  if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
  std::unique_ptr<FastLkFrontEnd> fe;
  ASSERT_TRUE(FastLkFrontEnd::Create(o, Device::kCpu, &fe).ok());
  ASSERT_TRUE(fe->SetFrame(0, qa).ok());
  ASSERT_TRUE(fe->SetFrame(1, qb).ok());
  std::vector<FastCorner> corners;
  ASSERT_TRUE(fe->Detect(0, nullptr, &corners).ok());
  std::vector<Point2f> pts, guesses;
  CornersAndImages(corners, H, &pts, &guesses);
  std::vector<LkResult> r;
  LkLinearMap map;
  LinearPredictionReport report;
  ASSERT_TRUE(TrackWithLinearPrediction(fe.get(), 0, 1, pts, &guesses, o.linear_prediction, &map,
                                        &r, &report).ok());
  std::vector<double> fb;
  for (const LkResult& x : r) {
    if (x.status == LkStatus::kTracked) fb.push_back(x.fb_error);
  }
  std::printf("boat 1->2 (homography prediction, linear prediction %s: %.2f deg, scale %.4f): "
              "%zu of %zu tracked, median forward-backward error %.4f px\n",
              o.linear_prediction.enabled ? "on" : "off", map.RotationDegrees(), map.Scale(),
              fb.size(), r.size(), Median(fb));
  *tracked = fb.size();
  *total = r.size();
  *median_fb = Median(fb);
  *map_out = map;
}

TEST(LkTest, BoatForwardBackwardError) {
  size_t tracked = 0, total = 0;
  double median = 0;
  LkLinearMap map;
  TrackBoat(FrontEndOptions(), &tracked, &total, &median, &map);
  if (IsSkipped() || HasFatalFailure()) return;
  EXPECT_GT(tracked, 0.8 * total);
  EXPECT_LT(median, 0.1);
  // Homography H1to2p: about -14 degrees (image axes) and 0.88.
  EXPECT_NEAR(map.RotationDegrees(), -14.0, 0.5);
  EXPECT_NEAR(map.Scale(), 0.88, 0.01);
  // Without the linear prediction: the patch's own turn and zoom cost a fifth of a pixel.
  FrontEndOptions off;
  off.linear_prediction.enabled = false;
  size_t tracked_off = 0, total_off = 0;
  double median_off = 0;
  TrackBoat(off, &tracked_off, &total_off, &median_off, &map);
  EXPECT_TRUE(map.IsIdentity());
  EXPECT_LT(tracked_off, tracked);
  EXPECT_GT(median_off, 2 * median);
}

// The tracker on boat img1 -> img2 without any prediction (from rest): the first pass
// finds the turn, the second follows it.
TEST(LkTest, SequenceTrackerFollowsTheBoatTurn) {
  TIEPOINT_REQUIRE_SHARED(a, "features/oxford_boat/img1.pgm");
  TIEPOINT_REQUIRE_SHARED(b, "features/oxford_boat/img2.pgm");
  for (bool enabled : {true, false}) {
    FrontEndOptions o;
    o.linear_prediction.enabled = enabled;
    std::unique_ptr<FastLkFrontEnd> fe;
    ASSERT_TRUE(FastLkFrontEnd::Create(o, Device::kCpu, &fe).ok());
    SequenceTracker tracker(fe.get(), o);
    for (const std::string& path : {a, b}) {
      GrayImage g;
      ASSERT_TRUE(ReadImageGray(path, &g).ok());
      ASSERT_TRUE(tracker.AddFrame(QuantizeImage(g), nullptr).ok());
    }
    const SequenceTrackerSummary& s = tracker.summary();
    ASSERT_EQ(s.tracks_in.size(), 1u);
    std::vector<double> fb(s.fb_errors.begin(), s.fb_errors.end());
    std::printf("tracker on boat 1->2, linear prediction %s: %d of %d tracks survive, map %.2f "
                "deg, scale %.4f, median forward-backward error %.4f px\n",
                enabled ? "on" : "off", s.tracks_survived[0], s.tracks_in[0],
                s.map_rotation_deg[0], s.map_scale[0], Median(fb));
    if (enabled) {
      EXPECT_TRUE(s.second_pass[0]);
      EXPECT_LT(Median(fb), 0.1);
      EXPECT_GT(s.tracks_survived[0], s.tracks_in[0] / 2);
    } else {
      EXPECT_FALSE(s.second_pass[0]);
    }
  }
}

TEST(LkTest, SequenceTrackerKeepsTracksAndFillsEmptyCells) {
  const int w = 256, h = 192;
  const auto blobs = MakeBlobs(w, h, 9);
  FrontEndOptions o;
  o.fast.threshold = 8;
  std::unique_ptr<FastLkFrontEnd> fe;
  ASSERT_TRUE(FastLkFrontEnd::Create(o, Device::kCpu, &fe).ok());
  SequenceTracker tracker(fe.get(), o);
  std::vector<TrackPoint> prev, cur;
  const int cells = FastGridColumns(w, 32) * FastGridRows(h, 32);
  for (int f = 0; f < 4; ++f) {
    ASSERT_TRUE(tracker.AddFrame(Render(w, h, blobs, 1.5 * f, -0.5 * f), &cur).ok());
    if (f == 0) {
      // New tracks keep LkPatchReach (32 px) from the border: the 4 x 2 inner cells of
      // the 8 x 6 grid, and the inner halves of the ring around them.
      EXPECT_EQ(LkPatchReach(o.lk, 4), 32);
      EXPECT_LE(static_cast<int>(cur.size()), cells);
      EXPECT_GT(static_cast<int>(cur.size()), 8);
      for (const TrackPoint& t : cur) {
        EXPECT_TRUE(t.x >= 32 && t.y >= 32 && t.x <= w - 33 && t.y <= h - 33) << t.x << "," << t.y;
      }
    } else {
      // Tracks that continue moved by the synthetic shift.
      int continued = 0;
      for (const TrackPoint& t : cur) {
        for (const TrackPoint& p : prev) {
          if (p.track_id != t.track_id) continue;
          ++continued;
          EXPECT_NEAR(t.x - p.x, 1.5, 0.05);
          EXPECT_NEAR(t.y - p.y, -0.5, 0.05);
        }
      }
      EXPECT_GE(continued, static_cast<int>(0.9 * prev.size()));
    }
    prev = cur;
  }
  EXPECT_EQ(tracker.summary().frames, 4);
  ImageU8 other{100, 100, std::vector<uint8_t>(10000, 5)};
  EXPECT_EQ(tracker.AddFrame(other, &cur).code(), StatusCode::kInvalidInput);
}

// ---- CUDA against the CPU reference -------------------------------------------------

// Every split of a feature over warps (LkOptions::cuda_warps_per_feature) against the CPU.
// `map`: the linear prediction of both passes (features/lk.h).
void CompareLkWarps(const ImageU8& a, const ImageU8& b, const std::vector<Point2f>& points,
                    const std::vector<Point2f>* guesses, int warps, const LkLinearMap& map);
void CompareLk(const ImageU8& a, const ImageU8& b, const std::vector<Point2f>& points,
               const std::vector<Point2f>* guesses, const LkLinearMap& map = LkLinearMap()) {
  for (int warps : {1, 2, 4}) {
    SCOPED_TRACE("cuda_warps_per_feature " + std::to_string(warps));
    CompareLkWarps(a, b, points, guesses, warps, map);
  }
}
void CompareLkWarps(const ImageU8& a, const ImageU8& b, const std::vector<Point2f>& points,
                    const std::vector<Point2f>* guesses, int warps, const LkLinearMap& map) {
  FrontEndOptions o;
  o.lk.cuda_warps_per_feature = warps;
  std::unique_ptr<FastLkFrontEnd> cpu, gpu;
  ASSERT_TRUE(FastLkFrontEnd::Create(o, Device::kCpu, &cpu).ok());
  const Status s = FastLkFrontEnd::Create(o, Device::kCuda, &gpu);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (FastLkFrontEnd* fe : {cpu.get(), gpu.get()}) {
    ASSERT_TRUE(fe->SetFrame(0, a).ok());
    ASSERT_TRUE(fe->SetFrame(1, b).ok());
  }
  std::vector<LkResult> rc, rg;
  ASSERT_TRUE(cpu->TrackMapped(0, 1, points, guesses, map, &rc).ok());
  ASSERT_TRUE(gpu->TrackMapped(0, 1, points, guesses, map, &rg).ok());
  ASSERT_EQ(rc.size(), rg.size());
  int same_status = 0, both = 0;
  double worst = 0;
  for (size_t i = 0; i < rc.size(); ++i) {
    same_status += rc[i].status == rg[i].status;
    if (rc[i].status == LkStatus::kTracked && rg[i].status == LkStatus::kTracked) {
      ++both;
      worst = std::max<double>(worst, std::hypot(rc[i].x - rg[i].x, rc[i].y - rg[i].y));
    }
  }
  std::printf("CUDA (%d warps per feature%s) vs CPU LK: %d of %zu same status, %d tracked by "
              "both, worst distance %.2e px\n", warps, map.IsIdentity() ? "" : ", linear map",
              same_status, rc.size(), both, worst);
  EXPECT_GE(same_status, static_cast<int>(0.99 * rc.size()));
  EXPECT_GT(both, static_cast<int>(0.5 * rc.size()));
  EXPECT_LT(worst, 0.01);
}

TEST(LkCudaTest, MatchesCpuOnSyntheticShifts) {
  TIEPOINT_REQUIRE_GPU();
  const int w = 320, h = 240;
  const auto blobs = MakeBlobs(w, h, 42);
  const auto points = GridPoints(w, h, 20, 9, 2);
  CompareLk(Render(w, h, blobs, 0, 0), Render(w, h, blobs, 4.3, -2.9, 1.1, 5), points, nullptr);
  std::vector<Point2f> guesses = points;
  for (Point2f& g : guesses) g.x += 4;
  CompareLk(Render(w, h, blobs, 0, 0), Render(w, h, blobs, 4.3, -2.9), points, &guesses);
  // A predicted shift beyond kLkMaxLevelShift on level 0 (LkTest.FollowsLargeShifts...).
  for (Point2f& g : guesses) g.x += 66;
  CompareLk(Render(w, h, blobs, 0, 0), Render(w, h, blobs, 70.3, -2.9), points, &guesses);
}

// A non-identity map (the mapped kernels): the synthetic 14 degree turn with zoom 0.89
// predicted exactly, and Oxford boat 1->2 predicted by its homography with the map fitted
// there (-14 degrees, 0.882).
TEST(LkCudaTest, MatchesCpuWithALinearMap) {
  TIEPOINT_REQUIRE_GPU();
  const int w = 320, h = 240;
  const auto blobs = MakeBlobs(w, h, 11);
  const double scale = 0.89, deg = 14, cx = 160, cy = 120, tx = 0.3, ty = -0.2;
  std::vector<Point2f> points, truth;
  for (const Point2f& p : GridPoints(w, h, 50, 11, 3)) {
    points.push_back(p);
    truth.push_back(SimilarityOf(p, scale, deg, cx, cy, tx, ty));
  }
  const ImageU8 a = Render(w, h, blobs, 0, 0);
  const ImageU8 b = RenderSimilarity(w, h, blobs, scale, deg, cx, cy, tx, ty);
  CompareLk(a, b, points, &truth, LkLinearMap::Similarity(scale, deg));
  // Near the border (clamped samples), a shift with gain and bias under a map 2 degrees off.
  CompareLk(Render(w, h, blobs, 0, 0), Render(w, h, blobs, 4.3, -2.9, 1.1, 5),
            GridPoints(w, h, 10, 13, 4), nullptr, LkLinearMap::Similarity(1.0, 2.0));
  ImageU8 qa, qb;
  double H[9];
  ReadBoatPair(&qa, &qb, H);
  if (::testing::Test::IsSkipped() || ::testing::Test::HasFatalFailure()) return;
  ImagePyramid pa;
  ASSERT_TRUE(BuildPyramid(qa, 3, 0, &pa).ok());
  std::vector<FastCorner> corners;
  ASSERT_TRUE(DetectFast(pa, FastOptions(), nullptr, &corners).ok());
  std::vector<Point2f> pts, guesses;
  CornersAndImages(corners, H, &pts, &guesses);
  CompareLk(qa, qb, pts, &guesses, LkLinearMap::Similarity(0.8824, -13.995));
}

TEST(LkCudaTest, MatchesCpuOnKitti) {
  TIEPOINT_REQUIRE_GPU();
  TIEPOINT_REQUIRE_SHARED(a, std::string(kKitti) + "000000.png");
  TIEPOINT_REQUIRE_SHARED(b, std::string(kKitti) + "000001.png");
  ImageU8 qa, qb;
  ReadQuantizedPair(a, b, &qa, &qb);
  if (::testing::Test::HasFatalFailure()) return;
  ImagePyramid pa;
  ASSERT_TRUE(BuildPyramid(qa, 3, 0, &pa).ok());
  std::vector<FastCorner> corners;
  ASSERT_TRUE(DetectFast(pa, FastOptions(), nullptr, &corners).ok());
  std::vector<Point2f> pts;
  for (const FastCorner& c : corners) pts.push_back({c.x, c.y});
  CompareLk(qa, qb, pts, nullptr);
  double survival = 0, fb = 0, cpu_survival = 0, cpu_fb = 0;
  TrackRealPair(a, b, Device::kCuda, &survival, &fb);
  TrackRealPair(a, b, Device::kCpu, &cpu_survival, &cpu_fb);
  std::printf("KITTI 0->1 survival / median forward-backward error: CUDA %.1f%% %.4f px, CPU "
              "%.1f%% %.4f px\n", 100 * survival, fb, 100 * cpu_survival, cpu_fb);
  EXPECT_NEAR(survival, cpu_survival, 0.01);
  EXPECT_LT(fb, 0.1);
}

}  // namespace
}  // namespace tiepoint
