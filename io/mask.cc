#include "io/mask.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <system_error>
#include <utility>

#include "io/image.h"

namespace tiepoint {

std::string FeatureMaskPath(const std::string& mask_dir, const std::string& image_name) {
  std::string path = mask_dir;
  if (!path.empty() && path.back() != '/') path += '/';
  return path + image_name + ".png";
}

Status CheckFeatureMaskFolder(const std::string& mask_dir) {
  std::error_code ec;
  if (std::filesystem::is_directory(mask_dir, ec)) return Status::Ok();
  return Status::IoError(mask_dir + ": not a folder (--mask-path: MASK_DIR/<image name>.png per image)");
}

Status FindFeatureMask(const std::string& mask_dir, const std::string& image_name, int width, int height,
                       FeatureMask* mask, bool* found) {
  *mask = FeatureMask();
  const std::string file = FeatureMaskPath(mask_dir, image_name);
  std::error_code ec;
  *found = std::filesystem::exists(file, ec);
  if (ec) return Status::IoError(file + ": cannot look for the mask (" + ec.message() + ")");
  return *found ? ReadFeatureMask(file, width, height, mask) : Status::Ok();
}

std::string ImagesWithoutMaskNote(size_t without, size_t total, const std::string& mask_dir,
                                  const std::string& first_image) {
  return std::to_string(without) + " of " + std::to_string(total) + " images have no mask in " + mask_dir +
         " (such as " + FeatureMaskPath(mask_dir, first_image) + "): all their features kept";
}

Status ReadFeatureMask(const std::string& path, FeatureMask* mask) {
  GrayImage image;
  TIEPOINT_RETURN_IF_ERROR(ReadImageGray(path, &image));
  FeatureMask m;
  m.width = image.width;
  m.height = image.height;
  m.keep.assign((image.pixels.size() + 63) / 64, 0);
  // COLMAP reads a mask as 8-bit grey and masks where that is 0.
  for (size_t i = 0; i < image.pixels.size(); ++i)
    if (image.pixels[i] * 255.0f >= 0.5f) m.keep[i >> 6] |= uint64_t{1} << (i & 63);
  *mask = std::move(m);
  return Status::Ok();
}

Status FeatureMaskFits(const FeatureMask& mask, const std::string& path, int width, int height,
                       const std::string& image) {
  if (mask.width == width && mask.height == height) return Status::Ok();
  return Status::InvalidInput(path + ": mask of " + std::to_string(mask.width) + " x " + std::to_string(mask.height) +
                              " pixels for an image of " + std::to_string(width) + " x " + std::to_string(height) +
                              (image.empty() ? "" : " (" + image + ")"));
}

Status ReadFeatureMask(const std::string& path, int width, int height, FeatureMask* mask) {
  FeatureMask m;
  TIEPOINT_RETURN_IF_ERROR(ReadFeatureMask(path, &m));
  TIEPOINT_RETURN_IF_ERROR(FeatureMaskFits(m, path, width, height));
  *mask = std::move(m);
  return Status::Ok();
}

bool FeatureMaskKeeps(const FeatureMask& mask, double x, double y) {
  if (mask.empty()) return true;
  // On the image: [-0.5, size - 0.5] each way, edges included (io/image.h).
  if (!InsideImage(x, y, mask.width, mask.height)) return false;
  const int ix = std::min(mask.width - 1, static_cast<int>(std::floor(x + 0.5)));
  const int iy = std::min(mask.height - 1, static_cast<int>(std::floor(y + 0.5)));
  return mask.Keeps(ix, iy);
}

size_t ApplyFeatureMask(const FeatureMask& mask, Features* features) {
  if (mask.empty()) return 0;
  size_t kept = 0;
  const size_t n = features->size();
  for (size_t i = 0; i < n; ++i) {
    const Keypoint& kp = features->keypoints[i];
    if (!FeatureMaskKeeps(mask, kp.x, kp.y)) continue;
    if (kept != i) {
      features->keypoints[kept] = kp;
      std::copy(features->descriptors.begin() + i * kSiftDescriptorDim,
                features->descriptors.begin() + (i + 1) * kSiftDescriptorDim,
                features->descriptors.begin() + kept * kSiftDescriptorDim);
    }
    ++kept;
  }
  features->keypoints.resize(kept);
  features->descriptors.resize(kept * kSiftDescriptorDim);
  return n - kept;
}

}  // namespace tiepoint
