// Feature matches between two images, their files, and the intrinsics table that
// `tiepoint match --verify essential --intrinsics FILE` reads.
//
// A match pairs keypoint index1 of features file 1 with keypoint index2 of features file 2
// (indices into the keypoint order of the .tpfeat files, io/features.h). distance_sq is
// the squared Euclidean distance of the two uint8 descriptors, an exact integer
// (at most 128 x 255^2 = 8,323,200).
//
// After geometric verification the file also holds the model (a homography, fundamental
// or essential matrix, in pixels of the images as io/image.h defines them: pixel (0,0) is
// the centre of the top-left pixel, x right, y down) and one inlier flag per match.
//
// Binary file (".tpmatch"), every field little-endian, no padding:
//   offset  size  field
//        0     8  magic "TPMATCH1" (ASCII, no terminator)
//        8     4  uint32 version, currently 1 (kMatchesFileVersion)
//       12     4  uint32 model: 0 none (not verified), 1 homography, 2 fundamental,
//                 3 essential (MatchModel)
//       16     4  uint32 verified: 1 when the model reached the estimator's minimum inlier
//                 count, else 0 (always 0 for model 0)
//       20     4  uint32 L1, bytes of the name of features file 1
//       24     4  uint32 L2, bytes of the name of features file 2
//       28     4  uint32 RANSAC iterations drawn (0 for model 0)
//       32     8  uint64 N1, keypoints in features file 1
//       40     8  uint64 N2, keypoints in features file 2
//       48     8  uint64 M, number of matches
//       56     8  uint64 number of inliers (matches whose flag is 1)
//       64    72  float64 matrix[9], row-major: H (x2 ~ H x1), F (x2^T F x1 = 0) or E
//                 (x2n^T E x1n = 0, normalised coordinates); zeros for model 0
//      136    72  float64 rotation[9], row-major R of cam2_from_cam1 (essential only, else
//                 identity)
//      208    24  float64 translation[3], t of cam2_from_cam1, |t| = 1 (essential only,
//                 else zeros)
//      232     8  float64 RMS error of the inliers, pixels (0 for model 0)
//      240    L1  name of features file 1 (UTF-8, no terminator; its path relative to the
//                 folder `match` was given, '/' between components, else its file name)
//   240+L1    L2  name of features file 2
//          12 M   matches: uint32 index1, uint32 index2, uint32 distance_sq
//           1 M   inlier flags, one byte per match in match order: 1 inlier, 0 not (all 0
//                 for model 0)
// The file is exactly 240 + L1 + L2 + 13 M bytes long. The reader checks the magic,
// version, model, the size against M before allocating, index1 < N1, index2 < N2, flags
// 0 or 1 and their count against the header, finite matrices; every error names the file
// and the field or match index.
//
// Text file (".txt", for people and scripts; written, not read back):
//   "# tiepoint matches <name1> <name2>"
//   "# keypoints <N1> <N2> matches <M> model <none|homography|fundamental|essential>
//    verified <0|1> inliers <n> rms_px <e>"
//   "# matrix m0 .. m8" and, for the essential model, "# rotation r0..r8" and
//   "# translation t0 t1 t2" (17 significant digits)
//   M lines "index1 index2 distance_sq inlier"
//
// Writers go through a temporary file renamed into place (never a partial file).
#pragma once

#include <cstddef>
#include <cstdint>
#include <istream>
#include <map>
#include <string>
#include <vector>

#include "io/base/status.h"

namespace tiepoint {

constexpr uint32_t kMatchesFileVersion = 1;

struct FeatureMatch {
  uint32_t index1 = 0;       // keypoint index in features file 1
  uint32_t index2 = 0;       // keypoint index in features file 2
  uint32_t distance_sq = 0;  // squared L2 distance of the two uint8 descriptors

  bool operator==(const FeatureMatch& o) const {
    return index1 == o.index1 && index2 == o.index2 && distance_sq == o.distance_sq;
  }
};

// The model stored with a pair's matches. io/ knows nothing of solver/: the CLI maps the
// geometric estimator's result onto this.
enum class MatchModel : uint32_t { kNone = 0, kHomography = 1, kFundamental = 2, kEssential = 3 };

// "none", "homography", "fundamental", "essential".
const char* ToString(MatchModel model);

struct PairMatches {
  std::string name1;  // features file 1: its path in the folder given ("cam0/a.png.tpfeat"), else its file name
  std::string name2;
  uint64_t num_keypoints1 = 0;
  uint64_t num_keypoints2 = 0;
  std::vector<FeatureMatch> matches;

  // Geometric verification (all defaults when model == kNone).
  MatchModel model = MatchModel::kNone;
  bool verified = false;
  uint32_t ransac_iterations = 0;
  double matrix[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  double rotation[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  double translation[3] = {0, 0, 0};
  double inlier_rms_error_px = 0;
  // One flag per match (1 inlier, 0 not), or empty (read as all 0).
  std::vector<uint8_t> inliers;

  uint64_t NumInliers() const;
  // kInvalidInput naming the first match index out of range, a flag count that differs
  // from the match count, or a flag other than 0/1.
  Status CheckConsistent() const;
};

// Binary format above.
Status WriteMatches(const std::string& path, const PairMatches& matches);
Status ReadMatches(const std::string& path, PairMatches* matches);
// The binary format held in memory (`size` bytes at `data`); `name` stands in for the path.
Status ParseMatches(const unsigned char* data, size_t size, const std::string& name,
                    PairMatches* matches);

// Text format above.
Status WriteMatchesText(const std::string& path, const PairMatches& matches);

// The file names `tiepoint match` gives a pair's outputs, and `reconstruct --matches` looks
// for: "<name1>--<name2><extension>", the names being the images' (FeaturesFileStem of the
// features files, io/features.h): their paths relative to the folder given, each '/'
// written "%2F" (MatchesFileNamePart), so that images of two subfolders with the same file
// name ("cam0/000001.png", "cam1/000001.png") get files of their own in one folder:
// "cam0%2F000001.png--cam1%2F000001.png.tpmatch".
std::string MatchesFileName(const std::string& name1, const std::string& name2,
                            const std::string& extension = ".tpmatch");
// An image name as MatchesFileName writes it: each '/' as "%2F".
std::string MatchesFileNamePart(const std::string& image_name);

// Pinhole intrinsics of one image, in pixels (x = fx X/Z + cx, y = fy Y/Z + cy).
struct CameraIntrinsics {
  double fx = 0, fy = 0, cx = 0, cy = 0;
};

// Reads an intrinsics table: one image per line, '#' starts a comment, blank lines are
// skipped, and a first line holding a single integer (the image count of Middlebury's
// *_par.txt files) is skipped. A line is either
//   NAME fx fy cx cy
//   NAME k11 k12 k13 k21 k22 k23 k31 k32 k33 [anything after: ignored]
// the second being the layout of Middlebury's *_par.txt (K row-major, then R and t, which
// are ignored); K must have k21 = k31 = k32 = 0 and k33 = 1 (skew k12 is ignored). NAME is
// the image's file name (a features file "NAME.tpfeat" looks up NAME); "*" gives the
// intrinsics of every image not named. Errors name the file and line: a line with another
// count of numbers, non-finite or non-positive focal lengths, a K of another shape, a name
// given twice.
Status ReadIntrinsicsTable(const std::string& path,
                           std::map<std::string, CameraIntrinsics>* table);
// The same from a stream; `name` stands in for the path in messages.
Status ReadIntrinsicsTable(std::istream& in, const std::string& name,
                           std::map<std::string, CameraIntrinsics>* table);

}  // namespace tiepoint
