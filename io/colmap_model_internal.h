// Internals of io/colmap_model.cc shared by its text and binary halves
// (colmap_model_text.cc, colmap_model_binary.cc): the consistency rules and where each record
// was read, for messages. Not part of the API.
#pragma once

#include <cstdint>
#include <istream>
#include <ostream>
#include <string>
#include <vector>

#include "io/base/status.h"
#include "io/reconstruction.h"

namespace tiepoint::colmap_internal {

inline constexpr const char* kFileNames[2][3] = {{"cameras.txt", "images.txt", "points3D.txt"},
                                                 {"cameras.bin", "images.bin", "points3D.bin"}};

inline std::string JoinPath(const std::string& dir, const char* file) {
  if (dir.empty()) return file;
  return dir.back() == '/' ? dir + file : dir + "/" + file;
}

// "SIMPLE_PINHOLE (0), ..." for messages; COLMAP's name of one of its models that tiepoint
// does not support (ids 6, 7 and 10: FULL_OPENCV, FOV, THIN_PRISM_FISHEYE), else nullptr.
extern const char* const kSupportedModels;
const char* ColmapOnlyModelName(int id);

// The per-record rules of colmap_model.h; `where` prefixes every message
// ("images.txt:12: ", or "" for an in-memory model).
Status CheckCamera(const Camera& camera, const std::string& where);
Status CheckImage(const Image& image, const std::string& where);
Status CheckPoint(uint64_t id, const Point3D& point, const std::string& where);

// The quaternion as written and as read: unchanged when its squared norm is within 1e-12
// of 1, else divided by its norm. Precondition: finite, not zero (CheckImage).
void UnitQuaternion(const double* q, double* out);

// Where each image and point was read, for messages about references between files. Kept
// as numbers (a string per record would cost more than the record) and looked up only when
// a message is made.
struct Locations {
  struct Entry {
    uint64_t id, pos, record;  // pos: line number (text) or byte offset (binary)
  };
  bool binary = false;
  std::string cameras_file = "the model's cameras";
  std::string images_file = "the model's images";
  std::string points_file = "the model's points3D";
  std::vector<Entry> images, points;  // in read order; empty for an in-memory model

  // "images.txt:12: ", "images.bin: byte 4096: image record 3: ", or "".
  std::string Image(uint64_t id) const;
  std::string Point(uint64_t id) const;
};

// The cross-references of colmap_model.h: cameras of images, unique names, tracks against
// points2D and back.
Status CheckReferences(const Reconstruction& rec, const Locations& at);

// kIoError when a stream has failed while writing `what`.
inline Status StreamStatus(const std::ostream& out, const char* what) {
  if (!out) return Status::IoError(std::string("writing ") + what + " failed");
  return Status::Ok();
}

// Text (colmap_model_text.cc).
Status WriteCamerasText(const Reconstruction& rec, std::ostream& out);
Status WriteImagesText(const Reconstruction& rec, std::ostream& out);
Status WritePoints3DText(const Reconstruction& rec, std::ostream& out);
Status ReadTextModel(std::istream& cameras, std::istream& images, std::istream& points3D,
                     const std::string& dir, Reconstruction* rec);

// Binary (colmap_model_binary.cc); bytes[3]: the three files' contents.
Status WriteCamerasBinary(const Reconstruction& rec, std::ostream& out);
Status WriteImagesBinary(const Reconstruction& rec, std::ostream& out);
Status WritePoints3DBinary(const Reconstruction& rec, std::ostream& out);
Status ReadBinaryModel(const std::vector<unsigned char>* bytes, const std::string& dir,
                       Reconstruction* rec);

}  // namespace tiepoint::colmap_internal
