#include "io/colmap_model.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "io/base/atomic_file.h"
#include "io/base/binary_io.h"
#include "io/colmap_model_internal.h"

namespace tiepoint {
namespace colmap_internal {

// The camera models of COLMAP releases after 3.8 (tiepoint reads all of 3.8's), so that a
// model written by one with them is named.
const char* ColmapOnlyModelName(int id) {
  switch (id) {
    case 11: return "RAD_TAN_THIN_PRISM_FISHEYE";
    case 12: return "SIMPLE_DIVISION";
    case 13: return "DIVISION";
    case 14: return "SIMPLE_FISHEYE";
    case 15: return "FISHEYE";
    case 16: return "EUCM";
    case 17: return "EQUIRECTANGULAR";
    default: return nullptr;
  }
}

const char* const kSupportedModels =
    "SIMPLE_PINHOLE (0), PINHOLE (1), SIMPLE_RADIAL (2), RADIAL (3), OPENCV (4), OPENCV_FISHEYE (5), "
    "FULL_OPENCV (6), FOV (7), SIMPLE_RADIAL_FISHEYE (8), RADIAL_FISHEYE (9), THIN_PRISM_FISHEYE (10)";

Status CheckCamera(const Camera& camera, const std::string& where) {
  const int expected = CameraModelNumParams(camera.model);
  if (expected == 0) {
    return Status::InvalidInput(where + "camera " + std::to_string(camera.camera_id) +
                                ": unknown camera model id " +
                                std::to_string(static_cast<int>(camera.model)));
  }
  if (static_cast<int>(camera.params.size()) != expected) {
    return Status::InvalidInput(where + "camera " + std::to_string(camera.camera_id) + ": " +
                                CameraModelName(camera.model) + " has " + std::to_string(expected) +
                                " parameters, not " + std::to_string(camera.params.size()));
  }
  if (camera.width < 1 || camera.height < 1) {
    return Status::InvalidInput(where + "camera " + std::to_string(camera.camera_id) +
                                ": width and height must be >= 1, not " +
                                std::to_string(camera.width) + " x " +
                                std::to_string(camera.height));
  }
  for (size_t i = 0; i < camera.params.size(); ++i) {
    if (!std::isfinite(camera.params[i])) {
      return Status::InvalidInput(where + "camera " + std::to_string(camera.camera_id) +
                                  ": parameter " + std::to_string(i + 1) + " is not finite");
    }
  }
  if (!(camera.fx() > 0) || !(camera.fy() > 0)) {
    return Status::InvalidInput(where + "camera " + std::to_string(camera.camera_id) +
                                ": the focal length must be > 0");
  }
  return Status::Ok();
}

// Why a name cannot be an image name, or nullptr.
static const char* NameProblem(const std::string& name) {
  if (name.empty()) return "the image name is empty";
  for (char c : name) {
    if (c == '\n' || c == '\r' || c == '\t' || c == '\0') {
      return "the image name holds a line break, tab or NUL";
    }
  }
  if (name.front() == ' ' || name.back() == ' ') {
    return "the image name begins or ends with a space";
  }
  return nullptr;
}

static bool QuaternionIsUnit(const double* q) {
  const double n2 = q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3];
  return std::abs(n2 - 1) <= 1e-12;
}

// The quaternion to write: as it is when unit to 1e-12 (so that text -> binary -> text
// changes no byte), else divided by its norm.
void UnitQuaternion(const double* q, double* out) {
  if (QuaternionIsUnit(q)) {
    for (int i = 0; i < 4; ++i) out[i] = q[i];
    return;
  }
  // Scaled by the largest component first, so that neither 1e200 nor 1e-200 overflows.
  double m = 0;
  for (int i = 0; i < 4; ++i) m = std::max(m, std::abs(q[i]));
  double s[4];
  for (int i = 0; i < 4; ++i) s[i] = q[i] / m;
  const double n = std::sqrt(s[0] * s[0] + s[1] * s[1] + s[2] * s[2] + s[3] * s[3]);
  for (int i = 0; i < 4; ++i) out[i] = s[i] / n;
}

Status CheckImage(const Image& image, const std::string& where) {
  const std::string what = where + "image " + std::to_string(image.image_id) + ": ";
  if (const char* problem = NameProblem(image.name)) {
    return Status::InvalidInput(what + problem);
  }
  const double* q = image.qvec;
  for (int i = 0; i < 4; ++i) {
    if (!std::isfinite(q[i])) return Status::InvalidInput(what + "the quaternion is not finite");
  }
  if (q[0] == 0 && q[1] == 0 && q[2] == 0 && q[3] == 0) {
    return Status::InvalidInput(what + "the quaternion is zero");
  }
  for (int i = 0; i < 3; ++i) {
    if (!std::isfinite(image.tvec[i])) {
      return Status::InvalidInput(what + "the translation is not finite");
    }
  }
  for (size_t i = 0; i < image.points2D.size(); ++i) {
    if (!std::isfinite(image.points2D[i].x) || !std::isfinite(image.points2D[i].y)) {
      return Status::InvalidInput(what + "point2D " + std::to_string(i) + " is not finite");
    }
  }
  return Status::Ok();
}

Status CheckPoint(uint64_t id, const Point3D& point, const std::string& where) {
  const std::string what = where + "point3D " + std::to_string(id) + ": ";
  if (id == kInvalidPoint3DId) {
    return Status::InvalidInput(where + "point3D id 2^64 - 1 is reserved for 'no point'");
  }
  for (int i = 0; i < 3; ++i) {
    if (!std::isfinite(point.xyz[i])) return Status::InvalidInput(what + "xyz is not finite");
  }
  if (!std::isfinite(point.error)) return Status::InvalidInput(what + "the error is not finite");
  return Status::Ok();
}

std::string Locations::Image(uint64_t id) const {
  for (const Entry& e : images) {
    if (e.id != id) continue;
    if (!binary) return images_file + ":" + std::to_string(e.pos) + ": ";
    return images_file + ": byte " + std::to_string(e.pos) + ": image record " +
           std::to_string(e.record) + ": ";
  }
  return "";
}

std::string Locations::Point(uint64_t id) const {
  for (const Entry& e : points) {
    if (e.id != id) continue;
    if (!binary) return points_file + ":" + std::to_string(e.pos) + ": ";
    return points_file + ": byte " + std::to_string(e.pos) + ": point3D record " +
           std::to_string(e.record) + ": ";
  }
  return "";
}

Status CheckReferences(const Reconstruction& rec, const Locations& at) {
  std::unordered_map<std::string, uint32_t> names;
  names.reserve(rec.images.size());
  // Which points2D a track has claimed, per image (images in map order).
  std::map<uint32_t, std::vector<char>> claimed;
  for (const auto& [id, image] : rec.images) {
    if (rec.cameras.count(image.camera_id) == 0) {
      return Status::InvalidInput(at.Image(id) + "image " + std::to_string(id) + " names camera " +
                                  std::to_string(image.camera_id) + ", which is not in " +
                                  at.cameras_file);
    }
    auto [it, inserted] = names.emplace(image.name, id);
    if (!inserted) {
      return Status::InvalidInput(at.Image(id) + "image " + std::to_string(id) + " has the name '" +
                                  image.name + "' of image " + std::to_string(it->second));
    }
    claimed[id].assign(image.points2D.size(), 0);
  }
  for (const auto& [point_id, point] : rec.points3D) {
    for (const TrackElement& el : point.track) {
      // Made only for a message: Locations::Point is a linear search, and a string per
      // element would cost more than the check.
      const uint64_t id = point_id;  // a structured binding cannot be captured in C++17
      const auto where = [&] {
        return at.Point(id) + "point3D " + std::to_string(id) + ", track element (" +
               std::to_string(el.image_id) + ", " + std::to_string(el.point2D_idx) + "): ";
      };
      const auto image_it = rec.images.find(el.image_id);
      if (image_it == rec.images.end()) {
        return Status::InvalidInput(where() + "image " + std::to_string(el.image_id) + " is not in " +
                                    at.images_file);
      }
      const Image& image = image_it->second;
      if (el.point2D_idx >= image.points2D.size()) {
        return Status::InvalidInput(where() + "image " + std::to_string(el.image_id) + " has only " +
                                    std::to_string(image.points2D.size()) + " points2D");
      }
      char& mark = claimed[el.image_id][el.point2D_idx];
      if (mark) {
        return Status::InvalidInput(where() + "that point2D is in a track twice");
      }
      mark = 1;
      const uint64_t named = image.points2D[el.point2D_idx].point3D_id;
      if (named != point_id) {
        return Status::InvalidInput(where() + "that point2D names " +
                                    (named == kInvalidPoint3DId
                                         ? std::string("no point3D (-1)")
                                         : "point3D " + std::to_string(named)) +
                                    " in " + at.images_file);
      }
    }
  }
  for (const auto& [id, image] : rec.images) {
    const std::vector<char>& marks = claimed[id];
    for (size_t i = 0; i < image.points2D.size(); ++i) {
      const uint64_t named = image.points2D[i].point3D_id;
      if (named == kInvalidPoint3DId || marks[i]) continue;
      const std::string where =
          at.Image(id) + "image " + std::to_string(id) + ", point2D " + std::to_string(i) + ": ";
      if (rec.points3D.count(named) == 0) {
        return Status::InvalidInput(where + "names point3D " + std::to_string(named) +
                                    ", which is not in " + at.points_file);
      }
      return Status::InvalidInput(where + "names point3D " + std::to_string(named) +
                                  ", whose track in " + at.points_file + " does not hold (" +
                                  std::to_string(id) + ", " + std::to_string(i) + ")");
    }
  }
  return Status::Ok();
}

}  // namespace colmap_internal

namespace {

using namespace colmap_internal;  // NOLINT: this file's own internals

using FileWriter = Status (*)(const Reconstruction&, std::ostream&);
constexpr FileWriter kWriters[2][3] = {
    {WriteCamerasText, WriteImagesText, WritePoints3DText},
    {WriteCamerasBinary, WriteImagesBinary, WritePoints3DBinary}};

// The rest of the stream, read in blocks (not a byte at a time through an iterator).
std::vector<unsigned char> Slurp(std::istream& in) {
  std::vector<unsigned char> out;
  char block[1 << 16];
  while (in.read(block, sizeof(block)) || in.gcount() > 0) {
    out.insert(out.end(), block, block + in.gcount());
  }
  return out;
}

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

const char* ToString(ColmapFormat format) {
  return format == ColmapFormat::kText ? "text" : "binary";
}

Status ColmapFormatFromString(const std::string& name, ColmapFormat* format) {
  if (name == "text") {
    *format = ColmapFormat::kText;
  } else if (name == "binary") {
    *format = ColmapFormat::kBinary;
  } else {
    return Status::InvalidOptions("unknown COLMAP model format '" + name +
                                  "': expected text or binary");
  }
  return Status::Ok();
}

Status CheckColmapModel(const Reconstruction& rec) {
  for (const auto& [id, camera] : rec.cameras) {
    if (camera.camera_id != id) {
      return Status::InvalidInput("cameras[" + std::to_string(id) + "] has camera_id " +
                                  std::to_string(camera.camera_id) +
                                  " (the map key and the id must agree)");
    }
    TIEPOINT_RETURN_IF_ERROR(CheckCamera(camera, ""));
  }
  for (const auto& [id, image] : rec.images) {
    if (image.image_id != id) {
      return Status::InvalidInput("images[" + std::to_string(id) + "] has image_id " +
                                  std::to_string(image.image_id) +
                                  " (the map key and the id must agree)");
    }
    TIEPOINT_RETURN_IF_ERROR(CheckImage(image, ""));
  }
  for (const auto& [id, point] : rec.points3D) TIEPOINT_RETURN_IF_ERROR(CheckPoint(id, point, ""));
  return CheckReferences(rec, Locations());
}

Status WriteColmapModelText(const Reconstruction& rec, std::ostream& cameras, std::ostream& images,
                            std::ostream& points3D) {
  TIEPOINT_RETURN_IF_ERROR(CheckColmapModel(rec));
  TIEPOINT_RETURN_IF_ERROR(WriteCamerasText(rec, cameras));
  TIEPOINT_RETURN_IF_ERROR(WriteImagesText(rec, images));
  return WritePoints3DText(rec, points3D);
}

Status WriteColmapModelBinary(const Reconstruction& rec, std::ostream& cameras,
                              std::ostream& images, std::ostream& points3D) {
  TIEPOINT_RETURN_IF_ERROR(CheckColmapModel(rec));
  TIEPOINT_RETURN_IF_ERROR(WriteCamerasBinary(rec, cameras));
  TIEPOINT_RETURN_IF_ERROR(WriteImagesBinary(rec, images));
  return WritePoints3DBinary(rec, points3D);
}

Status WriteColmapModel(const std::string& dir, const Reconstruction& rec, ColmapFormat format) {
  TIEPOINT_RETURN_IF_ERROR(CheckColmapModel(rec));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return Status::IoError(dir + ": cannot create the model directory (" + ec.message() + ")");
  const int f = format == ColmapFormat::kText ? 0 : 1;
  // All three temporaries first, then the renames: a failure while writing leaves the
  // directory as it was.
  std::vector<std::unique_ptr<AtomicFile>> files;
  for (int k = 0; k < 3; ++k) {
    files.push_back(std::make_unique<AtomicFile>(JoinPath(dir, kFileNames[f][k])));
    AtomicFile& file = *files.back();
    TIEPOINT_RETURN_IF_ERROR(file.Open());
    errno = 0;
    const Status s = kWriters[f][k](rec, file.stream());
    if (!s.ok()) {
      const int err = errno;  // the failed write's (EFBIG, ENOSPC, EIO), as AtomicFile says it
      if (file.stream().fail()) {
        return Status::IoError(file.path() + ": write failed (" +
                               (err != 0 ? std::string(std::strerror(err)) + "; " : std::string()) +
                               "disk full, file size limit or device error)");
      }
      return Status::IoError(file.path() + ": " + s.message());
    }
  }
  for (auto& file : files) TIEPOINT_RETURN_IF_ERROR(file->Commit());
  return Status::Ok();
}

Status ReadColmapModelText(std::istream& cameras, std::istream& images, std::istream& points3D,
                           const std::string& dir, Reconstruction* out) {
  *out = Reconstruction();
  Reconstruction rec;
  TIEPOINT_RETURN_IF_ERROR(ReadTextModel(cameras, images, points3D, dir, &rec));
  *out = std::move(rec);
  return Status::Ok();
}

Status ReadColmapModelBinary(std::istream& cameras, std::istream& images, std::istream& points3D,
                             const std::string& dir, Reconstruction* out) {
  *out = Reconstruction();
  std::vector<unsigned char> bytes[3] = {Slurp(cameras), Slurp(images), Slurp(points3D)};
  for (int k = 0; k < 3; ++k) {
    if ((k == 0 ? cameras : k == 1 ? images : points3D).bad()) {
      return Status::IoError(JoinPath(dir, kFileNames[1][k]) + ": read error");
    }
  }
  Reconstruction rec;
  TIEPOINT_RETURN_IF_ERROR(ReadBinaryModel(bytes, dir, &rec));
  *out = std::move(rec);
  return Status::Ok();
}

Status ReadColmapModel(const std::string& dir, ColmapFormat format, Reconstruction* out) {
  *out = Reconstruction();
  const int f = format == ColmapFormat::kText ? 0 : 1;
  if (f == 1) {
    std::vector<unsigned char> bytes[3];
    for (int k = 0; k < 3; ++k) {
      TIEPOINT_RETURN_IF_ERROR(
          ReadWholeFile(JoinPath(dir, kFileNames[1][k]), "COLMAP model file", &bytes[k]));
    }
    Reconstruction rec;
    TIEPOINT_RETURN_IF_ERROR(ReadBinaryModel(bytes, dir, &rec));
    *out = std::move(rec);
    return Status::Ok();
  }
  std::ifstream in[3];
  for (int k = 0; k < 3; ++k) {
    const std::string path = JoinPath(dir, kFileNames[0][k]);
    if (!IsRegularFile(path)) return Status::IoError(path + ": no such file");
    in[k].open(path);
    if (!in[k]) return Status::IoError(path + ": cannot open for reading");
  }
  return ReadColmapModelText(in[0], in[1], in[2], dir, out);
}

Status ReadColmapModel(const std::string& dir, Reconstruction* out) {
  *out = Reconstruction();
  for (int f = 1; f >= 0; --f) {
    bool all = true;
    for (int k = 0; k < 3; ++k) all = all && IsRegularFile(JoinPath(dir, kFileNames[f][k]));
    if (all) return ReadColmapModel(dir, f == 1 ? ColmapFormat::kBinary : ColmapFormat::kText, out);
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::IoError(dir + ": no such directory (expected a COLMAP model directory)");
  }
  return Status::IoError(dir +
                         ": no COLMAP model: expected cameras.bin, images.bin, points3D.bin or "
                         "cameras.txt, images.txt, points3D.txt");
}

}  // namespace tiepoint
