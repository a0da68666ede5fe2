// COLMAP's binary model: cameras.bin, images.bin, points3D.bin (see io/colmap_model.h).
#include <climits>
#include <cmath>
#include <cstring>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "io/base/binary_io.h"
#include "io/colmap_model_internal.h"

namespace tiepoint::colmap_internal {
namespace {

// ---------------------------------------------------------------------------------------
// Binary writing.

void AppendU32(uint32_t v, std::string* out) {
  unsigned char b[4];
  PutU32(v, b);
  out->append(reinterpret_cast<const char*>(b), 4);
}
void AppendU64(uint64_t v, std::string* out) {
  unsigned char b[8];
  PutU64(v, b);
  out->append(reinterpret_cast<const char*>(b), 8);
}
void AppendF64(double v, std::string* out) {
  unsigned char b[8];
  PutF64(v, b);
  out->append(reinterpret_cast<const char*>(b), 8);
}

}  // namespace

Status WriteCamerasBinary(const Reconstruction& rec, std::ostream& out) {
  std::string buf;
  AppendU64(rec.cameras.size(), &buf);
  for (const auto& [id, camera] : rec.cameras) {
    AppendU32(id, &buf);
    AppendU32(static_cast<uint32_t>(static_cast<int32_t>(camera.model)), &buf);
    AppendU64(static_cast<uint64_t>(camera.width), &buf);
    AppendU64(static_cast<uint64_t>(camera.height), &buf);
    for (double p : camera.params) AppendF64(p, &buf);
  }
  out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
  return StreamStatus(out, "cameras.bin");
}

Status WriteImagesBinary(const Reconstruction& rec, std::ostream& out) {
  std::string buf;
  AppendU64(rec.images.size(), &buf);
  for (const auto& [id, image] : rec.images) {
    AppendU32(id, &buf);
    double q[4];
    UnitQuaternion(image.qvec, q);
    for (double v : q) AppendF64(v, &buf);
    for (double v : image.tvec) AppendF64(v, &buf);
    AppendU32(image.camera_id, &buf);
    buf += image.name;
    buf += '\0';
    AppendU64(image.points2D.size(), &buf);
    for (const Point2D& p : image.points2D) {
      AppendF64(p.x, &buf);
      AppendF64(p.y, &buf);
      AppendU64(p.point3D_id, &buf);
    }
    if (buf.size() > (1u << 20)) {
      out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
      buf.clear();
    }
  }
  out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
  return StreamStatus(out, "images.bin");
}

Status WritePoints3DBinary(const Reconstruction& rec, std::ostream& out) {
  std::string buf;
  AppendU64(rec.points3D.size(), &buf);
  for (const auto& [id, point] : rec.points3D) {
    AppendU64(id, &buf);
    for (double v : point.xyz) AppendF64(v, &buf);
    for (uint8_t c : point.rgb) buf += static_cast<char>(c);
    AppendF64(point.error, &buf);
    AppendU64(point.track.size(), &buf);
    for (const TrackElement& el : point.track) {
      AppendU32(el.image_id, &buf);
      AppendU32(el.point2D_idx, &buf);
    }
    if (buf.size() > (1u << 20)) {
      out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
      buf.clear();
    }
  }
  out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
  return StreamStatus(out, "points3D.bin");
}

namespace {

// ---------------------------------------------------------------------------------------
// Binary reading: a cursor over the whole file that names the byte offset, the record and
// the field of every error.

class ByteReader {
 public:
  ByteReader(const unsigned char* data, size_t size, std::string file)
      : data_(data), size_(size), file_(std::move(file)) {}

  void SetRecord(std::string record) { record_ = std::move(record); }
  size_t remaining() const { return size_ - pos_; }
  size_t pos() const { return pos_; }

  Status Error(size_t offset, const std::string& field, const std::string& what) const {
    return Status::InvalidInput(file_ + ": byte " + std::to_string(offset) + ": " + record_ +
                                (field.empty() ? "" : ", " + field) + ": " + what);
  }
  Status Need(size_t bytes, const char* field) const {
    if (remaining() < bytes) {
      return Error(pos_, field,
                   "the file ends " + std::to_string(remaining()) + " bytes on, " +
                       std::to_string(bytes) + " needed (truncated)");
    }
    return Status::Ok();
  }
  Status U32(const char* field, uint32_t* v) {
    TIEPOINT_RETURN_IF_ERROR(Need(4, field));
    *v = GetU32(data_ + pos_);
    pos_ += 4;
    return Status::Ok();
  }
  Status U64(const char* field, uint64_t* v) {
    TIEPOINT_RETURN_IF_ERROR(Need(8, field));
    *v = GetU64(data_ + pos_);
    pos_ += 8;
    return Status::Ok();
  }
  Status U8(const char* field, uint8_t* v) {
    TIEPOINT_RETURN_IF_ERROR(Need(1, field));
    *v = data_[pos_];
    pos_ += 1;
    return Status::Ok();
  }
  // A finite double.
  Status F64(const std::string& field, double* v) {
    TIEPOINT_RETURN_IF_ERROR(Need(8, field.c_str()));
    *v = GetF64(data_ + pos_);
    if (!std::isfinite(*v)) return Error(pos_, field, "not a finite number");
    pos_ += 8;
    return Status::Ok();
  }
  // A count of records of at least `min_bytes` each, which the rest of the file must be
  // able to hold: checked before anything is sized by it.
  Status Count(const char* field, size_t min_bytes, uint64_t* n) {
    const size_t at = pos_;
    TIEPOINT_RETURN_IF_ERROR(U64(field, n));
    if (*n > remaining() / min_bytes) {
      return Error(at, field,
                   std::to_string(*n) + " records of at least " + std::to_string(min_bytes) +
                       " bytes cannot fit in the " + std::to_string(remaining()) +
                       " bytes left (a corrupt or truncated file)");
    }
    return Status::Ok();
  }
  Status String(const char* field, std::string* s) {
    const void* nul = std::memchr(data_ + pos_, '\0', remaining());
    if (nul == nullptr) return Error(pos_, field, "no terminating NUL before the end of the file");
    const size_t len = static_cast<const unsigned char*>(nul) - (data_ + pos_);
    s->assign(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len + 1;
    return Status::Ok();
  }
  Status End() const {
    if (remaining() != 0) {
      return Status::InvalidInput(file_ + ": byte " + std::to_string(pos_) + ": " +
                                  std::to_string(remaining()) +
                                  " bytes after the last record (a corrupt file?)");
    }
    return Status::Ok();
  }
  const std::string& file() const { return file_; }

 private:
  const unsigned char* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string file_;
  std::string record_ = "header";
};

// Smallest records: a camera with 3 params; an image with a 0-byte name and no points2D;
// a point with an empty track.
constexpr size_t kMinCameraBytes = 4 + 4 + 8 + 8 + 3 * 8;
constexpr size_t kMinImageBytes = 4 + 7 * 8 + 4 + 1 + 8;
constexpr size_t kMinPointBytes = 8 + 3 * 8 + 3 + 8 + 8;

std::string RecordName(const char* what, uint64_t i, uint64_t n) {
  return std::string(what) + " record " + std::to_string(i) + " of " + std::to_string(n);
}

Status ReadCamerasBinary(ByteReader& r, Reconstruction* rec) {
  uint64_t n;
  TIEPOINT_RETURN_IF_ERROR(r.Count("camera count", kMinCameraBytes, &n));
  for (uint64_t i = 0; i < n; ++i) {
    r.SetRecord(RecordName("camera", i, n));
    const size_t start = r.pos();
    Camera camera;
    TIEPOINT_RETURN_IF_ERROR(r.U32("camera_id", &camera.camera_id));
    r.SetRecord(RecordName("camera", i, n) + " (camera " + std::to_string(camera.camera_id) + ")");
    uint32_t model_bits;
    const size_t model_at = r.pos();
    TIEPOINT_RETURN_IF_ERROR(r.U32("model_id", &model_bits));
    const int model_id = static_cast<int32_t>(model_bits);
    if (!CameraModelFromId(model_id, &camera.model)) {
      const char* colmap_name = ColmapOnlyModelName(model_id);
      return r.Error(model_at, "model_id",
                     "camera model id " + std::to_string(model_id) +
                         (colmap_name != nullptr
                              ? std::string(" (COLMAP's ") + colmap_name + ") is not supported"
                              : std::string(" is unknown")) +
                         "; tiepoint reads " + kSupportedModels);
    }
    uint64_t width, height;
    const size_t size_at = r.pos();
    TIEPOINT_RETURN_IF_ERROR(r.U64("width", &width));
    TIEPOINT_RETURN_IF_ERROR(r.U64("height", &height));
    if (width < 1 || height < 1 || width > INT_MAX || height > INT_MAX) {
      return r.Error(
          size_at, "width/height",
          std::to_string(width) + " x " + std::to_string(height) + " is outside [1, 2^31)");
    }
    camera.width = static_cast<int>(width);
    camera.height = static_cast<int>(height);
    camera.params.resize(CameraModelNumParams(camera.model));
    for (size_t k = 0; k < camera.params.size(); ++k) {
      TIEPOINT_RETURN_IF_ERROR(r.F64("params[" + std::to_string(k) + "]", &camera.params[k]));
    }
    const std::string where = r.file() + ": byte " + std::to_string(start) + ": ";
    TIEPOINT_RETURN_IF_ERROR(CheckCamera(camera, where));
    if (!rec->cameras.emplace(camera.camera_id, camera).second) {
      return Status::InvalidInput(where + "camera " + std::to_string(camera.camera_id) +
                                  " appears twice");
    }
  }
  return r.End();
}

Status ReadImagesBinary(ByteReader& r, Reconstruction* rec, Locations* at) {
  uint64_t n;
  TIEPOINT_RETURN_IF_ERROR(r.Count("image count", kMinImageBytes, &n));
  static const char* const kQ[] = {"qw", "qx", "qy", "qz"};
  static const char* const kT[] = {"tx", "ty", "tz"};
  for (uint64_t i = 0; i < n; ++i) {
    r.SetRecord(RecordName("image", i, n));
    const size_t start = r.pos();
    Image image;
    TIEPOINT_RETURN_IF_ERROR(r.U32("image_id", &image.image_id));
    const std::string record =
        RecordName("image", i, n) + " (image " + std::to_string(image.image_id) + ")";
    r.SetRecord(record);
    for (int k = 0; k < 4; ++k) TIEPOINT_RETURN_IF_ERROR(r.F64(kQ[k], &image.qvec[k]));
    for (int k = 0; k < 3; ++k) TIEPOINT_RETURN_IF_ERROR(r.F64(kT[k], &image.tvec[k]));
    TIEPOINT_RETURN_IF_ERROR(r.U32("camera_id", &image.camera_id));
    TIEPOINT_RETURN_IF_ERROR(r.String("name", &image.name));
    uint64_t num_points;
    TIEPOINT_RETURN_IF_ERROR(r.Count("num_points2D", 24, &num_points));
    image.points2D.resize(num_points);
    for (uint64_t k = 0; k < num_points; ++k) {
      Point2D& p = image.points2D[k];
      const std::string field = "point2D " + std::to_string(k);
      TIEPOINT_RETURN_IF_ERROR(r.F64(field + " x", &p.x));
      TIEPOINT_RETURN_IF_ERROR(r.F64(field + " y", &p.y));
      TIEPOINT_RETURN_IF_ERROR(r.U64("point3D_id", &p.point3D_id));
    }
    const std::string where = r.file() + ": byte " + std::to_string(start) + ": " + record + ": ";
    TIEPOINT_RETURN_IF_ERROR(CheckImage(image, where));
    UnitQuaternion(image.qvec, image.qvec);
    const uint32_t id = image.image_id;
    if (!rec->images.emplace(id, std::move(image)).second) {
      return Status::InvalidInput(where + "image " + std::to_string(id) + " appears twice");
    }
    at->images.push_back({id, start, i});
  }
  return r.End();
}

Status ReadPoints3DBinary(ByteReader& r, Reconstruction* rec, Locations* at) {
  uint64_t n;
  TIEPOINT_RETURN_IF_ERROR(r.Count("point count", kMinPointBytes, &n));
  static const char* const kX[] = {"x", "y", "z"};
  static const char* const kC[] = {"r", "g", "b"};
  for (uint64_t i = 0; i < n; ++i) {
    r.SetRecord(RecordName("point3D", i, n));
    const size_t start = r.pos();
    uint64_t id;
    TIEPOINT_RETURN_IF_ERROR(r.U64("point3D_id", &id));
    const std::string record =
        RecordName("point3D", i, n) + " (point3D " + std::to_string(id) + ")";
    r.SetRecord(record);
    Point3D point;
    for (int k = 0; k < 3; ++k) TIEPOINT_RETURN_IF_ERROR(r.F64(kX[k], &point.xyz[k]));
    for (int k = 0; k < 3; ++k) TIEPOINT_RETURN_IF_ERROR(r.U8(kC[k], &point.rgb[k]));
    TIEPOINT_RETURN_IF_ERROR(r.F64("error", &point.error));
    uint64_t length;
    TIEPOINT_RETURN_IF_ERROR(r.Count("track length", 8, &length));
    point.track.resize(length);
    for (TrackElement& el : point.track) {
      TIEPOINT_RETURN_IF_ERROR(r.U32("track image_id", &el.image_id));
      TIEPOINT_RETURN_IF_ERROR(r.U32("track point2D_idx", &el.point2D_idx));
    }
    const std::string where = r.file() + ": byte " + std::to_string(start) + ": " + record + ": ";
    TIEPOINT_RETURN_IF_ERROR(CheckPoint(id, point, where));
    if (!rec->points3D.emplace(id, std::move(point)).second) {
      return Status::InvalidInput(where + "point3D " + std::to_string(id) + " appears twice");
    }
    at->points.push_back({id, start, i});
  }
  return r.End();
}

}  // namespace

Status ReadBinaryModel(const std::vector<unsigned char>* bytes, const std::string& dir,
                       Reconstruction* rec) {
  Locations at;
  at.binary = true;
  at.cameras_file = JoinPath(dir, kFileNames[1][0]);
  at.images_file = JoinPath(dir, kFileNames[1][1]);
  at.points_file = JoinPath(dir, kFileNames[1][2]);
  {
    ByteReader r(bytes[0].data(), bytes[0].size(), at.cameras_file);
    TIEPOINT_RETURN_IF_ERROR(ReadCamerasBinary(r, rec));
  }
  {
    ByteReader r(bytes[1].data(), bytes[1].size(), at.images_file);
    TIEPOINT_RETURN_IF_ERROR(ReadImagesBinary(r, rec, &at));
  }
  {
    ByteReader r(bytes[2].data(), bytes[2].size(), at.points_file);
    TIEPOINT_RETURN_IF_ERROR(ReadPoints3DBinary(r, rec, &at));
  }
  return CheckReferences(*rec, at);
}

}  // namespace tiepoint::colmap_internal
