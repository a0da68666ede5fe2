// Tracks by union-find over verified matches (sfm/tracks.h).
#include "sfm/tracks.h"

#include <gtest/gtest.h>

namespace tiepoint {
namespace {

TEST(Tracks, ChainsOfMatchesBecomeOneTrack) {
  // 0:1 <-> 1:2 <-> 2:3, and a separate 0:5 <-> 2:0.
  std::vector<PairCorrespondences> pairs = {{0, 1, {{1, 2}}}, {1, 2, {{2, 3}}}, {0, 2, {{5, 0}}}};
  std::vector<Track> tracks;
  TrackSummary s;
  ASSERT_TRUE(BuildTracks({10, 10, 10}, pairs, 2, &tracks, &s).ok());
  ASSERT_EQ(tracks.size(), 2u);
  ASSERT_EQ(tracks[0].elements.size(), 3u);
  EXPECT_EQ(tracks[0].elements[0].image, 0);
  EXPECT_EQ(tracks[0].elements[0].feature, 1u);
  EXPECT_EQ(tracks[0].elements[2].image, 2);
  EXPECT_EQ(tracks[0].elements[2].feature, 3u);
  EXPECT_EQ(tracks[1].elements.size(), 2u);
  EXPECT_EQ(s.num_observations, 5);
  EXPECT_EQ(s.conflicting_matches, 0);
  EXPECT_DOUBLE_EQ(s.mean_track_length, 2.5);
}

TEST(Tracks, AConflictingMatchSplitsTheComponent) {
  // Image 0's features 1 and 4 both match image 1's feature 2 (pair 0-1, 2 matches), and
  // image 1's feature 2 matches image 2's feature 7 (pair 1-2, 1 match, applied later).
  std::vector<PairCorrespondences> pairs = {{1, 2, {{2, 7}}}, {0, 1, {{1, 2}, {4, 2}}}};
  std::vector<Track> tracks;
  TrackSummary s;
  ASSERT_TRUE(BuildTracks({10, 10, 10}, pairs, 2, &tracks, &s).ok());
  // The larger pair goes first: 0:1-1:2 joins, 0:4-1:2 is refused, then 1:2-2:7 joins.
  ASSERT_EQ(tracks.size(), 1u);
  ASSERT_EQ(tracks[0].elements.size(), 3u);
  EXPECT_EQ(tracks[0].elements[0].image, 0);
  EXPECT_EQ(tracks[0].elements[0].feature, 1u);
  EXPECT_EQ(tracks[0].elements[2].feature, 7u);
  EXPECT_EQ(s.conflicting_matches, 1);
}

TEST(Tracks, AWrongMatchBetweenTwoTracksDoesNotMergeThem) {
  // Two real tracks across images 0, 1, 2 and one wrong match 0:1 <-> 2:9 joining them.
  std::vector<PairCorrespondences> pairs = {{0, 1, {{1, 1}, {3, 3}}}, {1, 2, {{1, 1}, {3, 9}}},
                                            {0, 2, {{1, 1}, {3, 9}, {1, 9}}}};
  std::vector<Track> tracks;
  TrackSummary s;
  ASSERT_TRUE(BuildTracks({10, 10, 10}, pairs, 2, &tracks, &s).ok());
  ASSERT_EQ(tracks.size(), 2u);
  EXPECT_EQ(tracks[0].elements.size(), 3u);
  EXPECT_EQ(tracks[1].elements.size(), 3u);
  EXPECT_EQ(s.conflicting_matches, 1);
}

TEST(Tracks, OutOfRangeIndicesAreErrors) {
  std::vector<Track> tracks;
  TrackSummary s;
  EXPECT_EQ(BuildTracks({10, 10}, {{0, 1, {{10, 2}}}}, 2, &tracks, &s).code(), StatusCode::kInvalidInput);
  EXPECT_EQ(BuildTracks({10, 10}, {{0, 2, {{1, 2}}}}, 2, &tracks, &s).code(), StatusCode::kInvalidInput);
  EXPECT_EQ(BuildTracks({10, 10}, {{1, 1, {{1, 2}}}}, 2, &tracks, &s).code(), StatusCode::kInvalidInput);
}

}  // namespace
}  // namespace tiepoint
