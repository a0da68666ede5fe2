// Features and matches of `tiepoint extract` / `tiepoint match` read back for a
// reconstruction (sfm/stored_correspondences.h): orientation of the pair files, the
// verification they hold, and every disagreement with the images named.
#include "sfm/stored_correspondences.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "tests/common/scratch_dir.h"

namespace tiepoint {
namespace {

// Keypoint i's descriptor: every byte value + i.
Features Grid(int n, float step, uint8_t value = 7) {
  Features f;
  for (int i = 0; i < n; ++i) {
    Keypoint k;
    k.x = step * static_cast<float>(i);
    k.y = 2.0f * static_cast<float>(i);
    k.scale = 1.5f;
    f.keypoints.push_back(k);
  }
  for (int i = 0; i < n; ++i) f.descriptors.insert(f.descriptors.end(), kSiftDescriptorDim, static_cast<uint8_t>(value + i));
  return f;
}

class StoredCorrespondences : public ::testing::Test {
 protected:
  StoredCorrespondences() : dir_("stored_correspondences") {
    names_ = {"a.png", "b.png", "c.png"};
    sizes_ = {{100, 80}, {100, 80}, {100, 80}};
    features_ = {Grid(10, 5, 7), Grid(8, 5, 30), Grid(6, 5, 60)};
    for (size_t k = 0; k < names_.size(); ++k)
      EXPECT_TRUE(WriteFeatures(StoredFeaturesPath(dir_.path(), names_[k]), features_[k]).ok());
  }
  // The file `tiepoint match` would write for images a and b (in that order) and these
  // keypoint pairs, with the descriptors' distances.
  PairMatches Pair(int a, int b, const std::vector<std::pair<uint32_t, uint32_t>>& pairs) const {
    PairMatches pm;
    pm.name1 = names_[a] + ".tpfeat";
    pm.name2 = names_[b] + ".tpfeat";
    pm.num_keypoints1 = features_[a].size();
    pm.num_keypoints2 = features_[b].size();
    for (const auto& [i, j] : pairs) {
      uint32_t d = 0;
      for (int k = 0; k < kSiftDescriptorDim; ++k) {
        const int e = int(features_[a].descriptor(i)[k]) - int(features_[b].descriptor(j)[k]);
        d += static_cast<uint32_t>(e * e);
      }
      pm.matches.push_back({i, j, d});
    }
    return pm;
  }
  testing::ScratchDir dir_;
  std::vector<std::string> names_;
  std::vector<std::pair<int, int>> sizes_;
  std::vector<Features> features_;
};

TEST_F(StoredCorrespondences, FeaturesAreReadForEveryImageInOrder) {
  std::vector<Features> f;
  ASSERT_TRUE(ReadStoredFeatures(dir_.path(), names_, sizes_, 2, &f).ok());
  ASSERT_EQ(f.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    ASSERT_EQ(f[k].size(), features_[k].size());
    EXPECT_EQ(f[k].keypoints.back().x, features_[k].keypoints.back().x);
  }
}

TEST_F(StoredCorrespondences, AMissingFeaturesFileIsNamed) {
  std::vector<Features> f;
  const Status s = ReadStoredFeatures(dir_.path(), {"a.png", "d.png"}, {{100, 80}, {100, 80}}, 1, &f);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find("d.png.tpfeat"), std::string::npos) << s.message();
}

TEST_F(StoredCorrespondences, AKeypointOutsideItsImageIsAnError) {
  // Image a's keypoints 8 and 9 lie at x = 40 and 45: inside 100 x 80, outside a 40 x 80
  // image (its last pixel's centre is at x = 39); the first is named.
  std::vector<Features> f;
  Status s = ReadStoredFeatures(dir_.path(), names_, {{40, 80}, {100, 80}, {100, 80}}, 1, &f);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find("keypoint 8 at (40, 16)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("a.png"), std::string::npos) << s.message();
  // and along y (y = 18 in a 100 x 18 image: the last pixel's centre is 17).
  s = ReadStoredFeatures(dir_.path(), names_, {{100, 18}, {100, 80}, {100, 80}}, 1, &f);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
}

TEST_F(StoredCorrespondences, KeypointsUpToTheOuterPixelEdgesAreInside) {
  // Pixel (0, 0)'s centre is at (0, 0): a 40 x 18 image spans [-0.5, 39.5] x [-0.5, 17.5].
  auto one = [&](float x, float y) {
    Features f;
    Keypoint k;
    k.x = x;
    k.y = y;
    k.scale = 1;
    f.keypoints.push_back(k);
    f.descriptors.assign(kSiftDescriptorDim, 1);
    EXPECT_TRUE(WriteFeatures(StoredFeaturesPath(dir_.path(), "edge.png"), f).ok());
    std::vector<Features> out;
    return ReadStoredFeatures(dir_.path(), {"edge.png"}, {{40, 18}}, 1, &out).ok();
  };
  EXPECT_TRUE(one(-0.5f, -0.5f));
  EXPECT_TRUE(one(39.5f, 17.5f));
  EXPECT_FALSE(one(-0.51f, 0.0f));
  EXPECT_FALSE(one(39.51f, 0.0f));
  EXPECT_FALSE(one(0.0f, -0.51f));
  EXPECT_FALSE(one(0.0f, 17.51f));
}

TEST_F(StoredCorrespondences, ATruncatedFeaturesFileIsNamed) {
  const std::string path = StoredFeaturesPath(dir_.path(), "b.png");
  std::filesystem::resize_file(path, 30);
  std::vector<Features> f;
  const Status s = ReadStoredFeatures(dir_.path(), names_, sizes_, 2, &f);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find("b.png.tpfeat"), std::string::npos) << s.message();
}

TEST_F(StoredCorrespondences, MatchesFollowThePairsOrderAndTheFilesVerification) {
  // a--b unverified: every match. c--a (the other order): indices swapped. b--c verified:
  // its inliers only. a--c is also the pair of the c--a file; b and c's other pairs: none.
  ASSERT_TRUE(WriteMatches(dir_.File("a.png--b.png.tpmatch"), Pair(0, 1, {{1, 2}, {3, 4}})).ok());
  ASSERT_TRUE(WriteMatches(dir_.File("c.png--a.png.tpmatch"), Pair(2, 0, {{5, 9}})).ok());
  PairMatches bc = Pair(1, 2, {{0, 0}, {1, 1}, {2, 2}});
  bc.model = MatchModel::kFundamental;
  bc.verified = true;
  bc.matrix[1] = 1;
  bc.inliers = {1, 0, 1};
  ASSERT_TRUE(WriteMatches(dir_.File("b.png--c.png.tpmatch"), bc).ok());
  std::vector<std::vector<FeatureMatch>> m;
  StoredMatchesSummary s;
  ASSERT_TRUE(ReadStoredMatches(dir_.path(), names_, {}, features_, {{0, 1}, {0, 2}, {1, 2}}, 2, &m, &s).ok());
  ASSERT_EQ(m.size(), 3u);
  ASSERT_EQ(m[0].size(), 2u);
  EXPECT_EQ(m[0][1].index1, 3u);
  EXPECT_EQ(m[0][1].index2, 4u);
  ASSERT_EQ(m[1].size(), 1u);
  EXPECT_EQ(m[1][0].index1, 9u);  // a's keypoint first
  EXPECT_EQ(m[1][0].index2, 5u);
  ASSERT_EQ(m[2].size(), 2u);
  EXPECT_EQ(m[2][1].index1, 2u);
  EXPECT_EQ(s.files_read, 3);
  EXPECT_EQ(s.pairs_verified, 1);
  EXPECT_EQ(s.pairs_not_verified, 0);
  EXPECT_EQ(s.pairs_without_file, 0);
  EXPECT_EQ(s.matches, 5);

  // A pair the file's verification rejected has no candidates; a pair without a file neither.
  bc.verified = false;
  ASSERT_TRUE(WriteMatches(dir_.File("b.png--c.png.tpmatch"), bc).ok());
  std::filesystem::remove(dir_.File("a.png--b.png.tpmatch"));
  ASSERT_TRUE(ReadStoredMatches(dir_.path(), names_, {}, features_, {{0, 1}, {0, 2}, {1, 2}}, 1, &m, &s).ok());
  EXPECT_TRUE(m[0].empty());
  EXPECT_TRUE(m[2].empty());
  EXPECT_EQ(s.files_read, 2);
  EXPECT_EQ(s.pairs_not_verified, 1);
  EXPECT_EQ(s.pairs_without_file, 1);
  EXPECT_EQ(s.matches, 1);
}

TEST_F(StoredCorrespondences, SubfoldersImagesPairsAreFoundByTheirPathsElseByTheOtherNames) {
  // Images of two subfolders sharing a file name, as `match FEATURES/` names them; the
  // third pair's file is one of `match` given the feature files one by one (file names).
  const std::vector<std::string> paths = {"cam0/a.png", "cam1/a.png", "cam1/b.png"};
  const std::vector<std::string> others = {"a0.png", "a1.png", "b.png"};
  auto write = [&](int a, int b, const std::vector<std::string>& by, std::vector<std::pair<uint32_t, uint32_t>> km) {
    PairMatches pm = Pair(a, b, km);
    pm.name1 = by[a] + ".tpfeat";
    pm.name2 = by[b] + ".tpfeat";
    ASSERT_TRUE(WriteMatches(dir_.File(MatchesFileName(by[a], by[b])), pm).ok());
  };
  write(0, 1, paths, {{1, 2}});
  write(2, 0, others, {{5, 9}});  // "b.png--a0.png.tpmatch": the other order
  std::vector<std::vector<FeatureMatch>> m;
  StoredMatchesSummary s;
  ASSERT_TRUE(ReadStoredMatches(dir_.path(), paths, others, features_, {{0, 1}, {0, 2}, {1, 2}}, 1, &m, &s).ok());
  ASSERT_EQ(m[0].size(), 1u);
  EXPECT_EQ(m[0][0].index2, 2u);
  ASSERT_EQ(m[1].size(), 1u);
  EXPECT_EQ(m[1][0].index1, 9u);
  EXPECT_TRUE(m[2].empty());
  EXPECT_EQ(s.files_read, 2);
  // Without the other names, only the first.
  ASSERT_TRUE(ReadStoredMatches(dir_.path(), paths, {}, features_, {{0, 1}, {0, 2}, {1, 2}}, 1, &m, &s).ok());
  EXPECT_EQ(s.files_read, 1);
  EXPECT_TRUE(m[1].empty());
  // A file found by the paths must hold the features by those paths.
  write(1, 2, others, {{0, 0}});
  std::filesystem::rename(dir_.File(MatchesFileName(others[1], others[2])), dir_.File(MatchesFileName(paths[1], paths[2])));
  const Status st = ReadStoredMatches(dir_.path(), paths, others, features_, {{1, 2}}, 1, &m, &s);
  EXPECT_EQ(st.code(), StatusCode::kInvalidInput);
  EXPECT_NE(st.message().find("cam1%2Fa.png--cam1%2Fb.png.tpmatch: its feature files are 'a1.png.tpfeat'"),
            std::string::npos)
      << st.message();
}

TEST_F(StoredCorrespondences, AFolderWithoutAnyPairsFileIsAnError) {
  // The wrong folder (here the features'): no pair has a file.
  std::vector<std::vector<FeatureMatch>> m;
  StoredMatchesSummary s;
  const Status st = ReadStoredMatches(dir_.path(), names_, {}, features_, {{0, 1}, {1, 2}}, 1, &m, &s);
  EXPECT_EQ(st.code(), StatusCode::kInvalidInput);
  EXPECT_NE(st.message().find("a.png--b.png.tpmatch"), std::string::npos) << st.message();
}

TEST_F(StoredCorrespondences, MatchesOfOtherFeaturesAreRefused) {
  std::vector<std::vector<FeatureMatch>> m;
  StoredMatchesSummary s;
  // Keypoint counts of other features files.
  PairMatches pm = Pair(0, 1, {{1, 2}});
  pm.num_keypoints2 = 9;
  ASSERT_TRUE(WriteMatches(dir_.File("a.png--b.png.tpmatch"), pm).ok());
  Status st = ReadStoredMatches(dir_.path(), names_, {}, features_, {{0, 1}}, 1, &m, &s);
  EXPECT_EQ(st.code(), StatusCode::kInvalidInput);
  EXPECT_NE(st.message().find("N2 = 9"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("a.png--b.png.tpmatch"), std::string::npos) << st.message();
  // Feature file names that are not the pair's (a renamed file).
  pm = Pair(0, 1, {{1, 2}});
  pm.name2 = "x.png.tpfeat";
  ASSERT_TRUE(WriteMatches(dir_.File("a.png--b.png.tpmatch"), pm).ok());
  st = ReadStoredMatches(dir_.path(), names_, {}, features_, {{0, 1}}, 1, &m, &s);
  EXPECT_EQ(st.code(), StatusCode::kInvalidInput);
  EXPECT_NE(st.message().find("x.png.tpfeat"), std::string::npos) << st.message();
  // The same names and counts, but the descriptors at those indices are others (features
  // extracted again since): the stored distances give it away.
  pm = Pair(0, 1, {{1, 2}, {3, 4}});
  pm.matches[1].distance_sq += 128;
  ASSERT_TRUE(WriteMatches(dir_.File("a.png--b.png.tpmatch"), pm).ok());
  st = ReadStoredMatches(dir_.path(), names_, {}, features_, {{0, 1}}, 1, &m, &s);
  EXPECT_EQ(st.code(), StatusCode::kInvalidInput);
  EXPECT_NE(st.message().find("match 1 (keypoints 3, 4)"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("extracted again"), std::string::npos) << st.message();
  // A truncated file: the reader's error, naming it.
  ASSERT_TRUE(WriteMatches(dir_.File("a.png--b.png.tpmatch"), Pair(0, 1, {{1, 2}})).ok());
  std::filesystem::resize_file(dir_.File("a.png--b.png.tpmatch"), 100);
  st = ReadStoredMatches(dir_.path(), names_, {}, features_, {{0, 1}}, 1, &m, &s);
  EXPECT_EQ(st.code(), StatusCode::kInvalidInput);
  EXPECT_NE(st.message().find("a.png--b.png.tpmatch"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tiepoint
