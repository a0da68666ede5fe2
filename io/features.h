// Keypoints and descriptors of one image, and their files.
//
// Coordinates follow the project's image convention (io/image.h): pixel (0,0) is the
// centre of the top-left pixel, x right, y down, in pixels of the original image.
//
// Binary file (".tpfeat"), every field little-endian, no padding:
//   offset  size  field
//        0     8  magic "TPFEAT01" (ASCII, no terminator)
//        8     4  uint32 version, currently 1 (kFeaturesFileVersion)
//       12     4  uint32 descriptor dimension D (128 for SIFT, the only one accepted now)
//       16     8  uint64 number of keypoints N
//       24  16 N  keypoints: float32 x, y, scale, orientation (IEEE 754), one after another
//   24+16N   D N  descriptors: uint8, D per keypoint, in keypoint order
// The file is exactly 24 + (16 + D) N bytes long. The reader checks the magic, version,
// dimension, that the size agrees with N (before allocating: an absurd N in a short file
// is an error, not an allocation), that x, y, orientation are finite and scale is
// positive and finite. Every error names the file and says what was expected.
//
// Text file (".txt", for people and scripts; written, not read back):
//   line 1:           "<N> <D>"
//   N lines:          "x y scale orientation d0 d1 ... d(D-1)"
// with floats written to round-trip (9 significant digits) and descriptors as integers.
//
// Both writers go through a temporary file renamed into place (never a partial file).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/base/status.h"

namespace tiepoint {

// Length of a SIFT descriptor: 4 x 4 spatial bins x 8 orientation bins.
constexpr int kSiftDescriptorDim = 128;
constexpr uint32_t kFeaturesFileVersion = 1;

struct Keypoint {
  float x = 0;            // column, pixels of the original image (see convention above)
  float y = 0;            // row, pixels of the original image
  float scale = 0;        // Gaussian sigma of the feature, pixels of the original image
  float orientation = 0;  // radians in [0, 2 pi): atan2(dy, dx) of the dominant gradient,
                          // so, with y down, positive angles turn from +x towards +y
                          // (clockwise on screen)
};

struct Features {
  std::vector<Keypoint> keypoints;
  // The contrast threshold the keypoints passed (SIFT; set by the extractor, not stored in
  // feature files; 0 when unknown).
  double contrast_threshold = 0;
  // kSiftDescriptorDim bytes per keypoint, row-major: descriptors[i * 128 + j] is
  // element j of keypoint i's descriptor.
  std::vector<uint8_t> descriptors;

  size_t size() const { return keypoints.size(); }
  const uint8_t* descriptor(size_t i) const { return &descriptors[i * kSiftDescriptorDim]; }
  // kInvalidInput when descriptors.size() != 128 * keypoints.size().
  Status CheckConsistent() const;
};

// Binary format above.
Status WriteFeatures(const std::string& path, const Features& features);
Status ReadFeatures(const std::string& path, Features* features);
// The binary format held in memory (`size` bytes at `data`); `name` stands in for the path.
Status ParseFeatures(const unsigned char* data, size_t size, const std::string& name,
                     Features* features);

// Text format above.
Status WriteFeaturesText(const std::string& path, const Features& features);

// The file names `tiepoint extract` gives, and its readers (`match`, `reconstruct
// --features`) look for: "<image name>.tpfeat", the image name being its file name, or for
// an image found in a folder's subfolder its path relative to the folder ("cam0/a.png").
std::string FeaturesFileName(const std::string& image_name);
// The image file name of a features file name ("a.png.tpfeat" -> "a.png"); a name that does
// not end in ".tpfeat" (or is only that) comes back as it is.
std::string FeaturesFileStem(const std::string& file_name);
// Whether a file name is a features file's ("a.png.tpfeat"): FeaturesFileStem takes its end.
bool IsFeaturesFileName(const std::string& file_name);

}  // namespace tiepoint
