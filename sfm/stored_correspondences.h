// Features and matches that `tiepoint extract` and `tiepoint match` wrote, read back for
// the images of a reconstruction (`tiepoint reconstruct --features DIR [--matches DIR]`),
// as COLMAP's mapper starts from a database that its extractor and matcher filled.
//
// Files, as those commands name them:
//   FEATURES_DIR/<image name>.tpfeat    (io/features.h; an image of a folder's subfolder,
//                                        "cam0/a.png", in the same subfolder, as extract
//                                        writes it)
//   MATCHES_DIR/<image name 1>--<image name 2>.tpmatch  (io/matches.h MatchesFileName:
//                                        "cam0%2Fa.png--cam1%2Fa.png.tpmatch" for images of
//                                        subfolders, as `match FEATURES_DIR` writes it, or
//                                        by their file names, as `match` of files does)
// A pair's file may name its images in either order; a folder with no file for any pair is
// an error (the wrong folder), a pair without one has no matches. Its matches are the pair's
// candidates; where the file holds a verification (`match --verify`), only its inliers are,
// and a pair that it did not verify has none. The pipeline verifies each pair again
// (its own two-view classification: calibrated, uncalibrated, planar).
//
// Every file is checked against the images it stands for; errors (kInvalidInput) name the
// file and what disagrees: a missing features file, a keypoint outside its image (the
// features of another image), a matches file whose feature file names or keypoint counts
// are not those of the features read, or whose matches' descriptor distances (stored
// exactly) are not those between the features' descriptors (features extracted again
// since, with the same counts), and every error of the io/ readers.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "io/base/status.h"
#include "io/features.h"
#include "io/matches.h"

namespace tiepoint {

// The features file of image `name` in `dir`.
std::string StoredFeaturesPath(const std::string& dir, const std::string& name);

// Reads dir/<names[k]>.tpfeat for every image k, on up to num_threads threads. sizes[k]
// is image k's (width, height): every keypoint must lie within it (pixel centres at
// integers, io/image.h, so x in [-0.5, width - 0.5]). The first error in image order is
// returned.
Status ReadStoredFeatures(const std::string& dir, const std::vector<std::string>& names,
                          const std::vector<std::pair<int, int>>& sizes, int num_threads,
                          std::vector<Features>* features);

struct StoredMatchesSummary {
  int files_read = 0;
  int pairs_without_file = 0;    // no file in either order: no matches
  int pairs_not_verified = 0;    // the file's verification rejected the pair
  int pairs_verified = 0;        // the file's verification kept the pair: its inliers are used
  int64_t matches = 0;           // candidates handed on, over all pairs
};

// For each pair (i, j) of `pairs`: the matches of dir/MatchesFileName(names[i], names[j])
// (or of the file in the other order, indices swapped), filtered as above, with index1 into
// features[i] and index2 into features[j]. `tiepoint match FEATURES/` names its files by the
// images' paths in that folder ("cam0%2Fa.png--cam1%2Fa.png.tpmatch"), `match` of feature
// files given one by one by their file names: where no file holds a pair by `names`, the
// file of `other_names` (empty: none; else one per image, e.g. the file names where those
// are unique) is read.
Status ReadStoredMatches(const std::string& dir, const std::vector<std::string>& names,
                         const std::vector<std::string>& other_names,
                         const std::vector<Features>& features, const std::vector<std::pair<int, int>>& pairs,
                         int num_threads, std::vector<std::vector<FeatureMatch>>* matches,
                         StoredMatchesSummary* summary);

}  // namespace tiepoint
