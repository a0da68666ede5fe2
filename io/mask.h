// Feature masks, as COLMAP's ImageReader.mask_path: the mask of image NAME (its name as a
// command gives it: the file name, or for an image found in a folder's subfolder its path
// relative to the folder, "cam0/a.png") is MASK_DIR/NAME.png, an image of the same size in
// any format io/image.h reads; a black pixel masks it (grey value 0 in 8 bits, as COLMAP
// reads masks: under 0.5 / 255 in io/image.h's [0, 1]): no feature whose position rounds
// to that pixel is kept. An image without a mask file keeps every feature.
//
// Unlike COLMAP, which skips an image whose mask cannot be read and does not check a
// mask's size, the commands stop (or fail that image) naming the mask: a mask given but
// unusable is a mistake to hear about.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/base/status.h"
#include "io/features.h"

namespace tiepoint {

struct FeatureMask {
  int width = 0;
  int height = 0;
  // One bit per pixel, row-major (pixel i is bit i % 64 of word i / 64): 1 where features
  // are kept, 0 masked. 3 MB for a 24-megapixel photo.
  std::vector<uint64_t> keep;

  bool empty() const { return keep.empty(); }
  bool Keeps(int x, int y) const {
    const size_t i = static_cast<size_t>(y) * static_cast<size_t>(width) + static_cast<size_t>(x);
    return (keep[i >> 6] >> (i & 63)) & 1u;
  }
};

// MASK_DIR/NAME.png.
std::string FeatureMaskPath(const std::string& mask_dir, const std::string& image_name);

// A mask folder must be a folder (kIoError otherwise):
//   "<dir>: not a folder (--mask-path: MASK_DIR/<image name>.png per image)".
Status CheckFeatureMaskFolder(const std::string& mask_dir);
// Image NAME's mask in `mask_dir`, for an image of width x height (ReadFeatureMask), or
// *found = false (and an empty mask) where it has no mask file. A folder that cannot be
// searched is an error, not "no mask" (kIoError "<file>: cannot look for the mask (...)").
Status FindFeatureMask(const std::string& mask_dir, const std::string& image_name, int width, int height,
                       FeatureMask* mask, bool* found);
// What the commands say of the images without a mask: "<without> of <total> images have no
// mask in <dir> (such as <its mask path>): all their features kept".
std::string ImagesWithoutMaskNote(size_t without, size_t total, const std::string& mask_dir,
                                  const std::string& first_image);

// Reads the mask at `path` for an image of width x height. Errors name the file: those of
// ReadImageGray (missing, unreadable, not an image), and kInvalidInput for another size
// (FeatureMaskFits).
Status ReadFeatureMask(const std::string& path, int width, int height, FeatureMask* mask);
// The same at the size the file has: one mask for every image (COLMAP's
// ImageReader.camera_mask_path, `--camera-mask FILE`), checked against each with
// FeatureMaskFits.
Status ReadFeatureMask(const std::string& path, FeatureMask* mask);
// kInvalidInput unless `mask` (read from `path`) is width x height:
//   "<path>: mask of W x H pixels for an image of W' x H'" (+ " (<image>)" when named).
Status FeatureMaskFits(const FeatureMask& mask, const std::string& path, int width, int height,
                       const std::string& image = "");

// Whether a point at (x, y) (pixel centres at integers) is kept: on the image, and its
// nearest pixel (a position on the outer edge, x = width - 0.5, taking the last pixel) not
// masked. An empty mask keeps every point.
bool FeatureMaskKeeps(const FeatureMask& mask, double x, double y);

// Drops the features (keypoints and descriptors) whose position, rounded to the nearest
// pixel (pixel centres at integers, io/image.h; a position on the image's outer edge, x =
// width - 0.5, to the last pixel), is masked, or that lie outside the image. Returns how many
// were dropped; an empty mask drops none.
size_t ApplyFeatureMask(const FeatureMask& mask, Features* features);

}  // namespace tiepoint
