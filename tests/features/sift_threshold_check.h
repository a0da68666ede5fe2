// Test-only, shared by sift_test (CPU) and sift_cuda_test (CUDA): ExtractWith (one image
// through a fresh extractor) and the check of FeatureExtractor::SetContrastThreshold: the
// same extractor at each threshold in turn (down, up, down again) must give, one image or a
// batch, the bytes of a fresh extractor made at that threshold; lowering it must find more
// keypoints (so a threshold left unapplied, on a batch worker or in a captured graph, fails
// here); a bad value is refused and changes nothing.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "features/sift.h"

namespace tiepoint::testing {

// The features of `image` from a fresh extractor on `device` (the test fails, and the
// result is empty, when it cannot be made).
inline Features ExtractWith(const GrayImage& image, const SiftOptions& options, Device device) {
  std::unique_ptr<FeatureExtractor> extractor;
  const Status created = FeatureExtractor::Create(options, device, &extractor);
  EXPECT_TRUE(created.ok()) << created.ToString();
  Features features;
  if (!created.ok()) return features;
  const Status s = extractor->Extract(image, &features);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(features.descriptors.size(), features.keypoints.size() * kSiftDescriptorDim);
  return features;
}

inline void ExpectSameFeatures(const Features& got, const Features& want, const char* what, double t, size_t i) {
  ASSERT_EQ(got.size(), want.size()) << what << ", threshold " << t << ", image " << i;
  EXPECT_EQ(std::memcmp(got.keypoints.data(), want.keypoints.data(), want.size() * sizeof(Keypoint)), 0)
      << what << ", threshold " << t << ", image " << i;
  EXPECT_EQ(got.descriptors, want.descriptors) << what << ", threshold " << t << ", image " << i;
  EXPECT_EQ(got.contrast_threshold, t) << what << ", image " << i;
}

inline void CheckSetContrastThreshold(const std::vector<GrayImage>& images, const SiftOptions& options,
                                      Device device) {
  std::vector<const GrayImage*> ptrs;
  for (const GrayImage& g : images) ptrs.push_back(&g);
  std::unique_ptr<FeatureExtractor> reused;
  ASSERT_TRUE(FeatureExtractor::Create(options, device, &reused).ok());
  size_t previous = 0;
  for (double t : {0.04, 0.01, 0.04, 0.0025}) {
    ASSERT_TRUE(reused->SetContrastThreshold(t).ok());
    SiftOptions fresh = options;
    fresh.contrast_threshold = t;
    std::vector<Features> got;
    std::vector<Status> statuses;
    reused->ExtractBatch(ptrs, &got, &statuses);
    Features single;
    ASSERT_TRUE(reused->Extract(images[0], &single).ok());
    for (size_t i = 0; i < images.size(); ++i) {
      ASSERT_TRUE(statuses[i].ok()) << statuses[i].ToString();
      const Features want = ExtractWith(images[i], fresh, device);
      ASSERT_NO_FATAL_FAILURE(ExpectSameFeatures(got[i], want, "batch", t, i));
      if (i == 0) ASSERT_NO_FATAL_FAILURE(ExpectSameFeatures(single, want, "one image", t, i));
    }
    if (t == 0.01) EXPECT_GT(got[0].size(), previous + 20) << "0.01 against 0.04";
    previous = got[0].size();
  }
  EXPECT_EQ(reused->SetContrastThreshold(-1.0).code(), StatusCode::kInvalidOptions);
  Features after;
  ASSERT_TRUE(reused->Extract(images[0], &after).ok());
  EXPECT_EQ(after.contrast_threshold, 0.0025);
}

// `image` at each of `contrasts` c: pixel values 0.5 + c (v - 0.5).
inline std::vector<GrayImage> AtContrasts(const GrayImage& image, const std::vector<float>& contrasts) {
  std::vector<GrayImage> images;
  for (const float c : contrasts) {
    images.push_back(image);
    for (float& v : images.back().pixels) v = 0.5f + c * (v - 0.5f);
  }
  return images;
}

// SiftOptions::min_features, fallback_min_features and min_contrast_threshold of a check.
struct MinFeaturesRule {
  int min_features, fallback;
  double min_ct;
};

// ExtractAgainWhileFewFeatures (what `reconstruct` and `extract --min-features` do with the
// CUDA extractor) with an extractor on `device` made at options.contrast_threshold = 0.04,
// min_features and fallback_min_features as given, min_contrast_threshold min_ct and
// fallback_min_contrast_threshold 0.0025: each image must end with the bytes of a fresh
// extractor at the threshold the rule picks from that device's own counts at 0.04, 0.02,
// ..., 0.0025. The rule: the floor is the last of those at or above min_ct; the first
// threshold above the floor giving min_features, else (the image reaches the floor) the
// first from the floor on giving fallback_min_features, else 0.0025. The image must be
// flagged lowered when that is below 0.04, and the images must take at least `distinct`
// different thresholds (else the check would prove little). Returns the features.
inline std::vector<Features> CheckExtractAgainWhileFewFeatures(const std::vector<GrayImage>& images,
                                                               SiftOptions options, Device device, int min_features,
                                                               int fallback_min_features, double min_ct = 0.01,
                                                               size_t distinct = 3) {
  const std::vector<double> thresholds = {0.04, 0.02, 0.01, 0.005, 0.0025};
  size_t floor = 0;
  while (floor + 1 < thresholds.size() && thresholds[floor + 1] >= min_ct * (1 - 1e-9)) ++floor;
  options.contrast_threshold = 0.04;
  std::vector<const GrayImage*> ptrs;
  for (const GrayImage& g : images) ptrs.push_back(&g);
  // The rule, from fresh extractors' counts.
  std::vector<size_t> want(images.size());
  std::vector<std::vector<Features>> at(images.size());
  std::set<size_t> taken;
  for (size_t i = 0; i < images.size(); ++i) {
    for (double t : thresholds) {
      SiftOptions fresh = options;
      fresh.contrast_threshold = t;
      at[i].push_back(ExtractWith(images[i], fresh, device));
    }
    size_t k = 0;
    while (k < floor && static_cast<int>(at[i][k].size()) < min_features) ++k;
    if (k == floor)
      while (k + 1 < thresholds.size() && static_cast<int>(at[i][k].size()) < fallback_min_features) ++k;
    want[i] = k;
    taken.insert(k);
  }
  EXPECT_GE(taken.size(), distinct) << "the images take too few thresholds for the check";
  std::unique_ptr<FeatureExtractor> ex;
  EXPECT_TRUE(FeatureExtractor::Create(options, device, &ex).ok());
  if (!ex) return {};
  std::vector<Features> got;
  std::vector<Status> statuses;
  ex->ExtractBatch(ptrs, &got, &statuses);
  SiftOptions rule = options;
  rule.min_features = min_features;
  rule.min_contrast_threshold = min_ct;
  rule.fallback_min_features = fallback_min_features;
  rule.fallback_min_contrast_threshold = 0.0025;
  std::vector<char> lowered(images.size(), 0);
  const Status s = ExtractAgainWhileFewFeatures(ex.get(), rule, ptrs, &got, &lowered, &statuses);
  EXPECT_TRUE(s.ok()) << s.ToString();
  for (size_t i = 0; i < images.size(); ++i) {
    EXPECT_TRUE(statuses[i].ok()) << statuses[i].ToString();
    ExpectSameFeatures(got[i], at[i][want[i]], "again while few", thresholds[want[i]], i);
    EXPECT_EQ(lowered[i] != 0, want[i] > 0) << "image " << i;
  }
  // The extractor is back at 0.04.
  Features after;
  EXPECT_TRUE(ex->Extract(images[0], &after).ok());
  EXPECT_EQ(after.contrast_threshold, 0.04);
  return got;
}

}  // namespace tiepoint::testing
