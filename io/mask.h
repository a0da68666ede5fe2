// Feature masks, as COLMAP's ImageReader.mask_path: the mask of image NAME (its name as a
// command gives it: the file name, or for an image found in a folder's subfolder its path
// relative to the folder, "cam0/a.png") is MASK_DIR/NAME.png, an image of the same size in
// any format io/image.h reads; a black pixel (grey value 0) masks it: no feature whose
// position rounds to that pixel is kept. An image without a mask file keeps every feature.
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
  std::vector<uint8_t> keep;  // per pixel, row-major: 1 where features are kept, 0 masked

  bool empty() const { return keep.empty(); }
};

// MASK_DIR/NAME.png.
std::string FeatureMaskPath(const std::string& mask_dir, const std::string& image_name);

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

// Drops the features (keypoints and descriptors) whose position, rounded to the nearest
// pixel (pixel centres at integers, io/image.h), is masked or lies outside the mask. Returns
// how many were dropped; an empty mask drops none.
size_t ApplyFeatureMask(const FeatureMask& mask, Features* features);

}  // namespace tiepoint
