// Feature tracks from verified two-view matches: the correspondence graph's connected
// components, found by union-find over every inlier match of every verified pair (as
// Bundler and COLMAP's track building do).
//
// A track may hold one feature per image. A match that would join two sets holding
// features of the same image (a feature of image A matched to two features of image B, or
// a chain of matches that comes back to A elsewhere: usually one wrong match bridging two
// real tracks) is not applied, so the component is split where it conflicts, and the
// split is counted (conflicting_matches). Matches are applied pair by pair, pairs with
// more inliers first, so the better-supported side of a conflict keeps the track. Tracks
// shorter than min_track_length are dropped and counted.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "io/base/status.h"

namespace tiepoint {

// Verified correspondences of one image pair: feature indices (index into image1's
// features, index into image2's).
struct PairCorrespondences {
  int image1 = 0, image2 = 0;
  std::vector<std::pair<uint32_t, uint32_t>> matches;
};

struct TrackElementRef {
  int image = 0;         // index into the image list
  uint32_t feature = 0;  // index into that image's features
};

struct Track {
  std::vector<TrackElementRef> elements;  // sorted by image; at most one per image
};

struct TrackSummary {
  int64_t num_tracks = 0;
  int64_t num_observations = 0;
  int64_t conflicting_matches = 0;      // matches not applied: they would put two
                                        // features of one image into one track (split)
  int64_t dropped_short_tracks = 0;     // tracks left below min_track_length
  double mean_track_length = 0;
};

// `num_features[i]` is image i's feature count. Errors (kInvalidInput) name a pair whose
// image or feature index is out of range. Deterministic: tracks are ordered by their
// smallest (image, feature).
Status BuildTracks(const std::vector<int>& num_features,
                   const std::vector<PairCorrespondences>& pairs, int min_track_length,
                   std::vector<Track>* tracks, TrackSummary* summary);

}  // namespace tiepoint
