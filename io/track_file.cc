#include "io/track_file.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <set>
#include <utility>

#include "io/base/input_file.h"

namespace tiepoint {
namespace {

bool NextToken(const std::string& line, size_t* pos, std::string_view* tok) {
  while (*pos < line.size() && (line[*pos] == ' ' || line[*pos] == '\t' || line[*pos] == '\r')) ++*pos;
  if (*pos >= line.size()) return false;
  const size_t start = *pos;
  while (*pos < line.size() && line[*pos] != ' ' && line[*pos] != '\t' && line[*pos] != '\r') ++*pos;
  *tok = std::string_view(line).substr(start, *pos - start);
  return true;
}

template <typename T>
bool Parse(std::string_view tok, T* value) {
  const char* end = tok.data() + tok.size();
  if constexpr (std::is_floating_point_v<T>) {
    // from_chars for double: GCC 11+ has it.
    auto r = std::from_chars(tok.data(), end, *value);
    return r.ec == std::errc() && r.ptr == end;
  } else {
    auto r = std::from_chars(tok.data(), end, *value);
    return r.ec == std::errc() && r.ptr == end;
  }
}

}  // namespace

Status ReadTrackFile(std::istream& in, const std::string& name,
                     std::vector<TrackObservation>* observations) {
  observations->clear();
  std::set<std::pair<int64_t, int>> seen;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string where = name + ":" + std::to_string(line_no) + ": ";
    size_t pos = 0;
    std::string_view tok[5];
    int count = 0;
    while (count < 5 && NextToken(line, &pos, &tok[count])) ++count;
    if (count == 0 || tok[0][0] == '#') continue;
    if (count != 4) return Status::InvalidInput(where + "expected 'track_id frame x y'");
    TrackObservation o;
    if (!Parse(tok[0], &o.track_id) || o.track_id < 0)
      return Status::InvalidInput(where + "track_id must be an integer >= 0");
    if (!Parse(tok[1], &o.frame) || o.frame < 0 || o.frame > 10000000)
      return Status::InvalidInput(where + "frame must be an integer in [0, 10^7]");
    if (!Parse(tok[2], &o.x) || !Parse(tok[3], &o.y) || !std::isfinite(o.x) || !std::isfinite(o.y))
      return Status::InvalidInput(where + "x and y must be finite numbers");
    if (!seen.insert({o.track_id, o.frame}).second)
      return Status::InvalidInput(where + "track " + std::to_string(o.track_id) + " appears twice in frame " +
                                  std::to_string(o.frame));
    observations->push_back(o);
  }
  if (in.bad()) return Status::IoError(name + ": read error");
  return Status::Ok();
}

Status ReadTrackFile(const std::string& path, std::vector<TrackObservation>* observations) {
  std::ifstream in;
  TIEPOINT_RETURN_IF_ERROR(OpenInputFile(path, "a tracks file", &in));
  return ReadTrackFile(in, path, observations);
}

}  // namespace tiepoint
