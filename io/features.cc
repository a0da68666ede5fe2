// Feature files: the binary ".tpfeat" format and a text export (format in features.h).
#include "io/features.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <vector>

#include "io/base/atomic_file.h"
#include "io/base/binary_io.h"

namespace tiepoint {
namespace {

constexpr char kMagic[8] = {'T', 'P', 'F', 'E', 'A', 'T', '0', '1'};
constexpr size_t kHeaderBytes = 24;
constexpr size_t kKeypointBytes = 16;

}  // namespace

Status Features::CheckConsistent() const {
  if (descriptors.size() != keypoints.size() * kSiftDescriptorDim) {
    return Status::InvalidInput("features hold " + std::to_string(keypoints.size()) +
                                " keypoints but " + std::to_string(descriptors.size()) +
                                " descriptor bytes (expected " +
                                std::to_string(kSiftDescriptorDim) + " per keypoint)");
  }
  return Status::Ok();
}

Status WriteFeatures(const std::string& path, const Features& features) {
  Status s = features.CheckConsistent();
  if (!s.ok()) return Status::InvalidInput("cannot write " + path + ": " + s.message());
  const size_t n = features.keypoints.size();
  std::vector<unsigned char> header(kHeaderBytes);
  std::memcpy(header.data(), kMagic, sizeof(kMagic));
  PutU32(kFeaturesFileVersion, &header[8]);
  PutU32(kSiftDescriptorDim, &header[12]);
  PutU64(n, &header[16]);
  std::vector<unsigned char> keypoints(n * kKeypointBytes);
  for (size_t i = 0; i < n; ++i) {
    const Keypoint& k = features.keypoints[i];
    unsigned char* p = &keypoints[i * kKeypointBytes];
    PutF32(k.x, p);
    PutF32(k.y, p + 4);
    PutF32(k.scale, p + 8);
    PutF32(k.orientation, p + 12);
  }
  AtomicFile file(path);
  TIEPOINT_RETURN_IF_ERROR(file.Open());
  std::ofstream& out = file.stream();
  out.write(reinterpret_cast<const char*>(header.data()), header.size());
  out.write(reinterpret_cast<const char*>(keypoints.data()), keypoints.size());
  out.write(reinterpret_cast<const char*>(features.descriptors.data()),
            features.descriptors.size());
  return file.Commit();
}

Status ReadFeatures(const std::string& path, Features* features) {
  std::vector<unsigned char> bytes;
  TIEPOINT_RETURN_IF_ERROR(ReadWholeFile(path, "feature file", &bytes));
  return ParseFeatures(bytes.data(), bytes.size(), path, features);
}

Status ParseFeatures(const unsigned char* data, size_t size, const std::string& name,
                     Features* features) {
  const std::string where = name + ": ";
  if (size < kHeaderBytes) {
    if (size >= 8 && std::memcmp(data, kMagic, 8) != 0) {
      return Status::InvalidInput(where + "not a tiepoint feature file (no TPFEAT01 magic)");
    }
    return Status::InvalidInput(where + "truncated feature file: " +
                                std::to_string(size) + " bytes, the header alone is " +
                                std::to_string(kHeaderBytes));
  }
  if (std::memcmp(data, kMagic, 8) != 0) {
    return Status::InvalidInput(where + "not a tiepoint feature file (no TPFEAT01 magic)");
  }
  const uint32_t version = GetU32(data + 8);
  if (version != kFeaturesFileVersion) {
    return Status::InvalidInput(where + "feature file version " + std::to_string(version) +
                                " is not supported (this build reads version " +
                                std::to_string(kFeaturesFileVersion) + ")");
  }
  const uint32_t dim = GetU32(data + 12);
  if (dim != static_cast<uint32_t>(kSiftDescriptorDim)) {
    return Status::InvalidInput(where + "descriptor dimension " + std::to_string(dim) +
                                " is not supported (expected " +
                                std::to_string(kSiftDescriptorDim) + ")");
  }
  const uint64_t n = GetU64(data + 16);
  const size_t per_keypoint = kKeypointBytes + dim;
  const size_t payload = size - kHeaderBytes;
  // An absurd n must neither overflow nor allocate: compare sizes before anything else.
  const bool overflow = n > std::numeric_limits<uint64_t>::max() / per_keypoint;
  const std::string needed =
      overflow ? std::string("more than 2^64") : std::to_string(n * per_keypoint);
  if (overflow || n * per_keypoint != payload) {
    const bool short_file = overflow || n * per_keypoint > payload;
    return Status::InvalidInput(
        where + (short_file ? "truncated feature file: " : "trailing bytes in feature file: ") +
        "the header says " + std::to_string(n) + " keypoints, which take " + needed +
        " bytes after the 24-byte header, but the file has " + std::to_string(payload));
  }
  Features result;
  result.keypoints.resize(n);
  const unsigned char* p = data + kHeaderBytes;
  for (size_t i = 0; i < n; ++i, p += kKeypointBytes) {
    Keypoint& k = result.keypoints[i];
    k.x = GetF32(p);
    k.y = GetF32(p + 4);
    k.scale = GetF32(p + 8);
    k.orientation = GetF32(p + 12);
    if (!std::isfinite(k.x) || !std::isfinite(k.y) || !std::isfinite(k.orientation) ||
        !std::isfinite(k.scale) || !(k.scale > 0)) {
      return Status::InvalidInput(where + "keypoint " + std::to_string(i) +
                                  " has a non-finite coordinate or a scale that is not "
                                  "positive (x " + std::to_string(k.x) + ", y " +
                                  std::to_string(k.y) + ", scale " + std::to_string(k.scale) +
                                  ", orientation " + std::to_string(k.orientation) + ")");
    }
  }
  result.descriptors.assign(p, p + n * dim);
  *features = std::move(result);
  return Status::Ok();
}

Status WriteFeaturesText(const std::string& path, const Features& features) {
  Status s = features.CheckConsistent();
  if (!s.ok()) return Status::InvalidInput("cannot write " + path + ": " + s.message());
  AtomicFile file(path);
  TIEPOINT_RETURN_IF_ERROR(file.Open());
  std::ofstream& out = file.stream();
  out << features.keypoints.size() << ' ' << kSiftDescriptorDim << '\n';
  std::string line;
  char number[96];
  for (size_t i = 0; i < features.keypoints.size(); ++i) {
    const Keypoint& k = features.keypoints[i];
    std::snprintf(number, sizeof(number), "%.9g %.9g %.9g %.9g", k.x, k.y, k.scale,
                  k.orientation);
    line = number;
    const uint8_t* d = features.descriptor(i);
    for (int j = 0; j < kSiftDescriptorDim; ++j) {
      line += ' ';
      line += std::to_string(static_cast<unsigned>(d[j]));
    }
    line += '\n';
    out << line;
  }
  return file.Commit();
}

std::string FeaturesFileName(const std::string& image_name) { return image_name + ".tpfeat"; }

bool IsFeaturesFileName(const std::string& file_name) { return FeaturesFileStem(file_name) != file_name; }

std::string FeaturesFileStem(const std::string& file_name) {
  const std::string ext = ".tpfeat";
  if (file_name.size() > ext.size() && file_name.compare(file_name.size() - ext.size(), ext.size(), ext) == 0)
    return file_name.substr(0, file_name.size() - ext.size());
  return file_name;
}

}  // namespace tiepoint
