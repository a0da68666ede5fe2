// COLMAP's text model: cameras.txt, images.txt, points3D.txt (see io/colmap_model.h).
#include <charconv>
#include <climits>
#include <cmath>
#include <istream>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/colmap_model_internal.h"

namespace tiepoint::colmap_internal {
namespace {

// ---------------------------------------------------------------------------------------
// Text writing.

void AppendReal(double v, std::string* out) {
  char buf[40];
  // %.17g, as COLMAP's stream with precision(17); to_chars is locale-independent.
  const auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::general, 17);
  out->append(buf, r.ptr);
}

template <typename T>
void AppendInt(T v, std::string* out) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, r.ptr);
}

std::string RealString(double v) {
  std::string s;
  AppendReal(v, &s);
  return s;
}

}  // namespace

Status WriteCamerasText(const Reconstruction& rec, std::ostream& out) {
  out << "# Camera list with one line of data per camera:\n"
         "#   CAMERA_ID, MODEL, WIDTH, HEIGHT, PARAMS[]\n"
         "# Number of cameras: "
      << rec.cameras.size() << "\n";
  std::string line;
  for (const auto& [id, camera] : rec.cameras) {
    line.clear();
    AppendInt(id, &line);
    line += ' ';
    line += CameraModelName(camera.model);
    line += ' ';
    AppendInt(camera.width, &line);
    line += ' ';
    AppendInt(camera.height, &line);
    for (double p : camera.params) {
      line += ' ';
      AppendReal(p, &line);
    }
    line += '\n';
    out << line;
  }
  return StreamStatus(out, "cameras.txt");
}

Status WriteImagesText(const Reconstruction& rec, std::ostream& out) {
  const double mean_observations = rec.images.empty() ? 0.0
                                                      : static_cast<double>(rec.NumObservations()) /
                                                            static_cast<double>(rec.images.size());
  out << "# Image list with two lines of data per image:\n"
         "#   IMAGE_ID, QW, QX, QY, QZ, TX, TY, TZ, CAMERA_ID, NAME\n"
         "#   POINTS2D[] as (X, Y, POINT3D_ID)\n"
         "# Number of images: "
      << rec.images.size() << ", mean observations per image: " << RealString(mean_observations)
      << "\n";
  std::string line;
  for (const auto& [id, image] : rec.images) {
    line.clear();
    AppendInt(id, &line);
    double q[4];
    UnitQuaternion(image.qvec, q);
    for (double v : q) {
      line += ' ';
      AppendReal(v, &line);
    }
    for (double v : image.tvec) {
      line += ' ';
      AppendReal(v, &line);
    }
    line += ' ';
    AppendInt(image.camera_id, &line);
    line += ' ';
    line += image.name;
    line += '\n';
    for (size_t i = 0; i < image.points2D.size(); ++i) {
      const Point2D& p = image.points2D[i];
      if (i > 0) line += ' ';
      AppendReal(p.x, &line);
      line += ' ';
      AppendReal(p.y, &line);
      line += ' ';
      if (p.point3D_id == kInvalidPoint3DId) {
        line += "-1";
      } else {
        AppendInt(p.point3D_id, &line);
      }
    }
    line += '\n';
    out << line;
  }
  return StreamStatus(out, "images.txt");
}

Status WritePoints3DText(const Reconstruction& rec, std::ostream& out) {
  out << "# 3D point list with one line of data per point:\n"
         "#   POINT3D_ID, X, Y, Z, R, G, B, ERROR, TRACK[] as (IMAGE_ID, POINT2D_IDX)\n"
         "# Number of points: "
      << rec.points3D.size() << ", mean track length: " << RealString(rec.MeanTrackLength())
      << "\n";
  std::string line;
  for (const auto& [id, point] : rec.points3D) {
    line.clear();
    AppendInt(id, &line);
    for (double v : point.xyz) {
      line += ' ';
      AppendReal(v, &line);
    }
    for (uint8_t c : point.rgb) {
      line += ' ';
      AppendInt(static_cast<int>(c), &line);
    }
    line += ' ';
    AppendReal(point.error, &line);
    // COLMAP writes "ERROR " and then the track joined by spaces: an empty track leaves the
    // trailing space.
    line += ' ';
    for (size_t i = 0; i < point.track.size(); ++i) {
      if (i > 0) line += ' ';
      AppendInt(point.track[i].image_id, &line);
      line += ' ';
      AppendInt(point.track[i].point2D_idx, &line);
    }
    line += '\n';
    out << line;
  }
  return StreamStatus(out, "points3D.txt");
}

namespace {

// ---------------------------------------------------------------------------------------
// Text reading.

// The whitespace-separated fields of a line, as views into it.
void SplitFields(std::string_view line, std::vector<std::string_view>* fields) {
  fields->clear();
  size_t i = 0;
  while (true) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i >= line.size()) return;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    fields->push_back(line.substr(start, i - start));
  }
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

bool ParseReal(std::string_view tok, double* v) {
  if (!tok.empty() && tok[0] == '+') tok.remove_prefix(1);
  const auto r = std::from_chars(tok.data(), tok.data() + tok.size(), *v);
  return r.ec == std::errc() && r.ptr == tok.data() + tok.size() && std::isfinite(*v);
}

template <typename T>
bool ParseInt(std::string_view tok, T* v) {
  const auto r = std::from_chars(tok.data(), tok.data() + tok.size(), *v);
  return r.ec == std::errc() && r.ptr == tok.data() + tok.size();
}

// A text file read line by line, with the line number for messages.
class LineReader {
 public:
  LineReader(std::istream& in, std::string file) : in_(in), file_(std::move(file)) {}
  // The next line (trailing '\r' removed); false at the end.
  bool Next() {
    if (!std::getline(in_, line_)) return false;
    ++line_no_;
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    return true;
  }
  // The next line that is neither empty nor a '#' comment; comments go to `on_comment`.
  template <typename F>
  bool NextData(F&& on_comment) {
    while (Next()) {
      const std::string_view t = Trim(line_);
      if (t.empty()) continue;
      if (t[0] == '#') {
        on_comment(t);
        continue;
      }
      return true;
    }
    return false;
  }
  const std::string& line() const { return line_; }
  std::string Where() const { return file_ + ":" + std::to_string(line_no_) + ": "; }
  Status Error(const std::string& message) const { return Status::InvalidInput(Where() + message); }
  Status ReadStatus() const {
    if (in_.bad()) return Status::IoError(file_ + ": read error");
    return Status::Ok();
  }
  const std::string& file() const { return file_; }
  int64_t line_no() const { return line_no_; }

 private:
  std::istream& in_;
  std::string file_;
  std::string line_;
  int64_t line_no_ = 0;
};

// "# Number of cameras: 3" (and the images' and points' twins): the count, if the comment
// is that line.
void ParseCountComment(std::string_view comment, std::string_view prefix, int64_t* count,
                       std::string* where, const LineReader& reader) {
  if (comment.substr(0, prefix.size()) != prefix) return;
  std::string_view rest = comment.substr(prefix.size());
  const size_t end = rest.find(',');
  uint64_t n;
  if (ParseInt(Trim(rest.substr(0, end)), &n) && n <= INT64_MAX) {
    *count = static_cast<int64_t>(n);
    *where = reader.Where();
  }
}

Status CheckCount(const std::string& file, int64_t header, const std::string& header_where,
                  size_t records, const char* what) {
  if (header >= 0 && static_cast<uint64_t>(header) != records) {
    return Status::InvalidInput(header_where + "the header says " + std::to_string(header) + " " +
                                what + " but " + file + " holds " + std::to_string(records) +
                                " (a truncated or edited file?)");
  }
  return Status::Ok();
}

Status ReadCamerasText(std::istream& in, const std::string& file, Reconstruction* rec) {
  LineReader reader(in, file);
  int64_t header_count = -1;
  std::string header_where;
  std::vector<std::string_view> f;
  auto on_comment = [&](std::string_view c) {
    ParseCountComment(c, "# Number of cameras:", &header_count, &header_where, reader);
  };
  while (reader.NextData(on_comment)) {
    SplitFields(reader.line(), &f);
    if (f.size() < 4) {
      return reader.Error("expected 'CAMERA_ID MODEL WIDTH HEIGHT PARAMS[]'");
    }
    Camera camera;
    if (!ParseInt(f[0], &camera.camera_id)) {
      return reader.Error("CAMERA_ID '" + std::string(f[0]) + "' is not an integer in [0, 2^32)");
    }
    const std::string model_name(f[1]);
    if (!CameraModelFromName(model_name, &camera.model).ok()) {
      bool colmap_only = false;
      for (int id = 11; id <= 17; ++id) {
        const char* name = ColmapOnlyModelName(id);
        colmap_only = colmap_only || (name != nullptr && model_name == name);
      }
      return reader.Error(
          "camera model '" + model_name + "' " +
          (colmap_only ? "is a COLMAP model tiepoint does not support" : "is unknown") +
          "; tiepoint reads " + kSupportedModels);
    }
    if (!ParseInt(f[2], &camera.width) || !ParseInt(f[3], &camera.height)) {
      return reader.Error("WIDTH and HEIGHT must be integers in [1, 2^31)");
    }
    camera.params.resize(f.size() - 4);
    for (size_t i = 4; i < f.size(); ++i) {
      if (!ParseReal(f[i], &camera.params[i - 4])) {
        return reader.Error("parameter " + std::to_string(i - 3) + " '" + std::string(f[i]) +
                            "' is not a finite number");
      }
    }
    TIEPOINT_RETURN_IF_ERROR(CheckCamera(camera, reader.Where()));
    if (!rec->cameras.emplace(camera.camera_id, camera).second) {
      return reader.Error("camera " + std::to_string(camera.camera_id) + " appears twice");
    }
  }
  TIEPOINT_RETURN_IF_ERROR(reader.ReadStatus());
  return CheckCount(file, header_count, header_where, rec->cameras.size(), "cameras");
}

Status ReadImagesText(std::istream& in, const std::string& file, Reconstruction* rec,
                      Locations* at) {
  LineReader reader(in, file);
  int64_t header_count = -1;
  std::string header_where;
  std::vector<std::string_view> f;
  auto on_comment = [&](std::string_view c) {
    ParseCountComment(c, "# Number of images:", &header_count, &header_where, reader);
  };
  while (reader.NextData(on_comment)) {
    const std::string where = reader.Where();
    const int64_t image_line = reader.line_no();
    // The first nine fields, then the name: the rest of the line.
    const std::string_view line = Trim(reader.line());
    f.clear();
    size_t i = 0;
    while (f.size() < 9) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      if (i >= line.size()) break;
      const size_t start = i;
      while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
      f.push_back(line.substr(start, i - start));
    }
    const std::string_view name = Trim(i < line.size() ? line.substr(i) : std::string_view());
    if (f.size() < 9 || name.empty()) {
      return reader.Error("expected 'IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME'");
    }
    Image image;
    if (!ParseInt(f[0], &image.image_id)) {
      return reader.Error("IMAGE_ID '" + std::string(f[0]) + "' is not an integer in [0, 2^32)");
    }
    for (int k = 0; k < 4; ++k) {
      if (!ParseReal(f[1 + k], &image.qvec[k])) {
        return reader.Error("quaternion field " + std::to_string(k + 1) + " '" +
                            std::string(f[1 + k]) + "' is not a finite number");
      }
    }
    for (int k = 0; k < 3; ++k) {
      if (!ParseReal(f[5 + k], &image.tvec[k])) {
        return reader.Error("translation field " + std::to_string(k + 1) + " '" +
                            std::string(f[5 + k]) + "' is not a finite number");
      }
    }
    if (!ParseInt(f[8], &image.camera_id)) {
      return reader.Error("CAMERA_ID '" + std::string(f[8]) + "' is not an integer in [0, 2^32)");
    }
    image.name = std::string(name);
    // The POINTS2D line follows at once, even when empty.
    if (!reader.Next()) {
      return Status::InvalidInput(where + "image " + std::to_string(image.image_id) +
                                  " has no POINTS2D line (the file ends; truncated?)");
    }
    SplitFields(reader.line(), &f);
    if (f.size() % 3 != 0) {
      return reader.Error("POINTS2D of image " + std::to_string(image.image_id) + ": " +
                          std::to_string(f.size()) +
                          " fields, not a multiple of 3 (X Y POINT3D_ID ...)");
    }
    image.points2D.resize(f.size() / 3);
    for (size_t k = 0; k < image.points2D.size(); ++k) {
      Point2D& p = image.points2D[k];
      if (!ParseReal(f[3 * k], &p.x) || !ParseReal(f[3 * k + 1], &p.y)) {
        return reader.Error("point2D " + std::to_string(k) + " of image " +
                            std::to_string(image.image_id) + ": X and Y must be finite numbers");
      }
      const std::string_view id = f[3 * k + 2];
      if (id == "-1") {
        p.point3D_id = kInvalidPoint3DId;
      } else if (!ParseInt(id, &p.point3D_id) || p.point3D_id == kInvalidPoint3DId) {
        return reader.Error("point2D " + std::to_string(k) + " of image " +
                            std::to_string(image.image_id) + ": POINT3D_ID '" + std::string(id) +
                            "' is neither -1 nor an integer in [0, 2^64 - 1)");
      }
    }
    TIEPOINT_RETURN_IF_ERROR(CheckImage(image, where));
    UnitQuaternion(image.qvec, image.qvec);
    const uint32_t id = image.image_id;
    if (!rec->images.emplace(id, std::move(image)).second) {
      return Status::InvalidInput(where + "image " + std::to_string(id) + " appears twice");
    }
    at->images.push_back({id, static_cast<uint64_t>(image_line), rec->images.size() - 1});
  }
  TIEPOINT_RETURN_IF_ERROR(reader.ReadStatus());
  return CheckCount(file, header_count, header_where, rec->images.size(), "images");
}

Status ReadPoints3DText(std::istream& in, const std::string& file, Reconstruction* rec,
                        Locations* at) {
  LineReader reader(in, file);
  int64_t header_count = -1;
  std::string header_where;
  std::vector<std::string_view> f;
  auto on_comment = [&](std::string_view c) {
    ParseCountComment(c, "# Number of points:", &header_count, &header_where, reader);
  };
  while (reader.NextData(on_comment)) {
    SplitFields(reader.line(), &f);
    if (f.size() < 8 || (f.size() - 8) % 2 != 0) {
      return reader.Error(
          "expected 'POINT3D_ID X Y Z R G B ERROR' and (IMAGE_ID POINT2D_IDX) pairs");
    }
    uint64_t id;
    if (!ParseInt(f[0], &id) || id == kInvalidPoint3DId) {
      return reader.Error("POINT3D_ID '" + std::string(f[0]) +
                          "' is not an integer in [0, 2^64 - 1)");
    }
    Point3D point;
    for (int k = 0; k < 3; ++k) {
      if (!ParseReal(f[1 + k], &point.xyz[k])) {
        return reader.Error("point3D " + std::to_string(id) + ": " + "XYZ"[k] + " '" +
                            std::string(f[1 + k]) + "' is not a finite number");
      }
    }
    for (int k = 0; k < 3; ++k) {
      int c;
      if (!ParseInt(f[4 + k], &c) || c < 0 || c > 255) {
        return reader.Error("point3D " + std::to_string(id) + ": " + "RGB"[k] + " '" +
                            std::string(f[4 + k]) + "' is not an integer in [0, 255]");
      }
      point.rgb[k] = static_cast<uint8_t>(c);
    }
    if (!ParseReal(f[7], &point.error)) {
      return reader.Error("point3D " + std::to_string(id) + ": ERROR '" + std::string(f[7]) +
                          "' is not a finite number");
    }
    point.track.resize((f.size() - 8) / 2);
    for (size_t k = 0; k < point.track.size(); ++k) {
      if (!ParseInt(f[8 + 2 * k], &point.track[k].image_id) ||
          !ParseInt(f[9 + 2 * k], &point.track[k].point2D_idx)) {
        return reader.Error("point3D " + std::to_string(id) + ": track element " +
                            std::to_string(k) + " '" + std::string(f[8 + 2 * k]) + " " +
                            std::string(f[9 + 2 * k]) +
                            "' is not two integers in [0, 2^32) (IMAGE_ID POINT2D_IDX)");
      }
    }
    TIEPOINT_RETURN_IF_ERROR(CheckPoint(id, point, reader.Where()));
    if (!rec->points3D.emplace(id, std::move(point)).second) {
      return reader.Error("point3D " + std::to_string(id) + " appears twice");
    }
    at->points.push_back({id, static_cast<uint64_t>(reader.line_no()), rec->points3D.size() - 1});
  }
  TIEPOINT_RETURN_IF_ERROR(reader.ReadStatus());
  return CheckCount(file, header_count, header_where, rec->points3D.size(), "points");
}

}  // namespace

Status ReadTextModel(std::istream& cameras, std::istream& images, std::istream& points3D,
                     const std::string& dir, Reconstruction* rec) {
  Locations at;
  at.cameras_file = JoinPath(dir, kFileNames[0][0]);
  at.images_file = JoinPath(dir, kFileNames[0][1]);
  at.points_file = JoinPath(dir, kFileNames[0][2]);
  TIEPOINT_RETURN_IF_ERROR(ReadCamerasText(cameras, at.cameras_file, rec));
  TIEPOINT_RETURN_IF_ERROR(ReadImagesText(images, at.images_file, rec, &at));
  TIEPOINT_RETURN_IF_ERROR(ReadPoints3DText(points3D, at.points_file, rec, &at));
  return CheckReferences(*rec, at);
}

}  // namespace tiepoint::colmap_internal
