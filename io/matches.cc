// Match files: the binary ".tpmatch" format, a text export and the intrinsics table
// (formats in matches.h).
#include "io/matches.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <vector>

#include "io/base/atomic_file.h"
#include "io/base/input_file.h"
#include "io/base/binary_io.h"

namespace tiepoint {
namespace {

constexpr char kMagic[8] = {'T', 'P', 'M', 'A', 'T', 'C', 'H', '1'};
constexpr size_t kHeaderBytes = 240;
constexpr size_t kMatchBytes = 12;
// Longest feature file name stored (a file name, not a path).
constexpr uint32_t kMaxNameBytes = 4096;

bool AllFinite(const double* v, int n) {
  for (int i = 0; i < n; ++i) {
    if (!std::isfinite(v[i])) return false;
  }
  return true;
}

}  // namespace

const char* ToString(MatchModel model) {
  switch (model) {
    case MatchModel::kNone: return "none";
    case MatchModel::kHomography: return "homography";
    case MatchModel::kFundamental: return "fundamental";
    case MatchModel::kEssential: return "essential";
  }
  return "unknown";
}

uint64_t PairMatches::NumInliers() const {
  uint64_t n = 0;
  for (uint8_t f : inliers) n += f != 0;
  return n;
}

Status PairMatches::CheckConsistent() const {
  if (!inliers.empty() && inliers.size() != matches.size()) {
    return Status::InvalidInput(std::to_string(matches.size()) + " matches but " +
                                std::to_string(inliers.size()) +
                                " inlier flags (expected one per match)");
  }
  for (size_t i = 0; i < matches.size(); ++i) {
    const FeatureMatch& m = matches[i];
    if (m.index1 >= num_keypoints1 || m.index2 >= num_keypoints2) {
      return Status::InvalidInput(
          "match " + std::to_string(i) + " pairs keypoints " + std::to_string(m.index1) +
          " and " + std::to_string(m.index2) + " but the feature files have " +
          std::to_string(num_keypoints1) + " and " + std::to_string(num_keypoints2));
    }
    if (!inliers.empty() && inliers[i] > 1) {
      return Status::InvalidInput("inlier flag of match " + std::to_string(i) + " is " +
                                  std::to_string(inliers[i]) + " (expected 0 or 1)");
    }
  }
  if (name1.size() > kMaxNameBytes || name2.size() > kMaxNameBytes) {
    return Status::InvalidInput("feature file name longer than " +
                                std::to_string(kMaxNameBytes) + " bytes");
  }
  return Status::Ok();
}

Status WriteMatches(const std::string& path, const PairMatches& m) {
  Status s = m.CheckConsistent();
  if (!s.ok()) return Status::InvalidInput("cannot write " + path + ": " + s.message());
  const size_t count = m.matches.size();
  std::vector<unsigned char> header(kHeaderBytes, 0);
  std::memcpy(header.data(), kMagic, sizeof(kMagic));
  PutU32(kMatchesFileVersion, &header[8]);
  PutU32(static_cast<uint32_t>(m.model), &header[12]);
  PutU32(m.model != MatchModel::kNone && m.verified ? 1u : 0u, &header[16]);
  PutU32(static_cast<uint32_t>(m.name1.size()), &header[20]);
  PutU32(static_cast<uint32_t>(m.name2.size()), &header[24]);
  PutU32(m.model == MatchModel::kNone ? 0u : m.ransac_iterations, &header[28]);
  PutU64(m.num_keypoints1, &header[32]);
  PutU64(m.num_keypoints2, &header[40]);
  PutU64(count, &header[48]);
  const bool has_model = m.model != MatchModel::kNone;
  PutU64(has_model ? m.NumInliers() : 0, &header[56]);
  const double identity[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  const double zeros[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < 9; ++i) PutF64(has_model ? m.matrix[i] : 0.0, &header[64 + 8 * i]);
  const bool essential = m.model == MatchModel::kEssential;
  for (int i = 0; i < 9; ++i) {
    PutF64(essential ? m.rotation[i] : identity[i], &header[136 + 8 * i]);
  }
  for (int i = 0; i < 3; ++i) PutF64(essential ? m.translation[i] : zeros[i], &header[208 + 8 * i]);
  PutF64(has_model ? m.inlier_rms_error_px : 0.0, &header[232]);
  std::vector<unsigned char> body(count * kMatchBytes + count);
  for (size_t i = 0; i < count; ++i) {
    unsigned char* p = &body[i * kMatchBytes];
    PutU32(m.matches[i].index1, p);
    PutU32(m.matches[i].index2, p + 4);
    PutU32(m.matches[i].distance_sq, p + 8);
    body[count * kMatchBytes + i] = has_model && !m.inliers.empty() ? m.inliers[i] : 0;
  }
  AtomicFile file(path);
  TIEPOINT_RETURN_IF_ERROR(file.Open());
  std::ofstream& out = file.stream();
  out.write(reinterpret_cast<const char*>(header.data()), header.size());
  out.write(m.name1.data(), m.name1.size());
  out.write(m.name2.data(), m.name2.size());
  out.write(reinterpret_cast<const char*>(body.data()), body.size());
  return file.Commit();
}

Status ReadMatches(const std::string& path, PairMatches* matches) {
  std::vector<unsigned char> bytes;
  TIEPOINT_RETURN_IF_ERROR(ReadWholeFile(path, "matches file", &bytes));
  return ParseMatches(bytes.data(), bytes.size(), path, matches);
}

Status ParseMatches(const unsigned char* data, size_t size, const std::string& name,
                    PairMatches* matches) {
  const std::string where = name + ": ";
  if (size < 8 || std::memcmp(data, kMagic, 8) != 0) {
    return Status::InvalidInput(where + "not a tiepoint match file (no TPMATCH1 magic)");
  }
  if (size < kHeaderBytes) {
    return Status::InvalidInput(where + "truncated match file: " + std::to_string(size) +
                                " bytes, the header alone is " + std::to_string(kHeaderBytes));
  }
  const uint32_t version = GetU32(data + 8);
  if (version != kMatchesFileVersion) {
    return Status::InvalidInput(where + "match file version " + std::to_string(version) +
                                " is not supported (this build reads version " +
                                std::to_string(kMatchesFileVersion) + ")");
  }
  PairMatches r;
  const uint32_t model = GetU32(data + 12);
  if (model > 3) {
    return Status::InvalidInput(where + "model " + std::to_string(model) +
                                " (expected 0 none, 1 homography, 2 fundamental, 3 essential)");
  }
  r.model = static_cast<MatchModel>(model);
  const uint32_t verified = GetU32(data + 16);
  if (verified > 1 || (verified == 1 && model == 0)) {
    return Status::InvalidInput(where + "verified flag " + std::to_string(verified) +
                                " (expected 0 or 1, and 0 without a model)");
  }
  r.verified = verified == 1;
  const uint32_t l1 = GetU32(data + 20), l2 = GetU32(data + 24);
  if (l1 > kMaxNameBytes || l2 > kMaxNameBytes) {
    return Status::InvalidInput(where + "feature file name lengths " + std::to_string(l1) +
                                " and " + std::to_string(l2) + " (expected at most " +
                                std::to_string(kMaxNameBytes) + " bytes)");
  }
  r.ransac_iterations = GetU32(data + 28);
  r.num_keypoints1 = GetU64(data + 32);
  r.num_keypoints2 = GetU64(data + 40);
  const uint64_t count = GetU64(data + 48);
  const uint64_t header_inliers = GetU64(data + 56);
  const size_t payload = size - kHeaderBytes - 0;
  const size_t names = static_cast<size_t>(l1) + l2;
  const bool overflow = count > std::numeric_limits<uint64_t>::max() / (kMatchBytes + 1) - names;
  if (overflow || names + count * (kMatchBytes + 1) != payload) {
    const bool short_file = overflow || names + count * (kMatchBytes + 1) > payload;
    return Status::InvalidInput(
        where + (short_file ? "truncated match file: " : "trailing bytes in match file: ") +
        "the header says " + std::to_string(count) + " matches and names of " +
        std::to_string(names) + " bytes, which take " +
        (overflow ? std::string("more than 2^64")
                  : std::to_string(names + count * (kMatchBytes + 1))) +
        " bytes after the 240-byte header, but the file has " + std::to_string(payload));
  }
  for (int i = 0; i < 9; ++i) r.matrix[i] = GetF64(data + 64 + 8 * i);
  for (int i = 0; i < 9; ++i) r.rotation[i] = GetF64(data + 136 + 8 * i);
  for (int i = 0; i < 3; ++i) r.translation[i] = GetF64(data + 208 + 8 * i);
  r.inlier_rms_error_px = GetF64(data + 232);
  if (!AllFinite(r.matrix, 9) || !AllFinite(r.rotation, 9) || !AllFinite(r.translation, 3) ||
      !std::isfinite(r.inlier_rms_error_px)) {
    return Status::InvalidInput(where + "non-finite value in the model (matrix, rotation, "
                                "translation or RMS error)");
  }
  const unsigned char* p = data + kHeaderBytes;
  r.name1.assign(reinterpret_cast<const char*>(p), l1);
  r.name2.assign(reinterpret_cast<const char*>(p + l1), l2);
  p += names;
  r.matches.resize(count);
  r.inliers.resize(count);
  const unsigned char* flags = p + count * kMatchBytes;
  uint64_t inliers = 0;
  for (size_t i = 0; i < count; ++i, p += kMatchBytes) {
    FeatureMatch& m = r.matches[i];
    m.index1 = GetU32(p);
    m.index2 = GetU32(p + 4);
    m.distance_sq = GetU32(p + 8);
    if (m.index1 >= r.num_keypoints1 || m.index2 >= r.num_keypoints2) {
      return Status::InvalidInput(
          where + "match " + std::to_string(i) + " pairs keypoints " + std::to_string(m.index1) +
          " and " + std::to_string(m.index2) + " but the header says the feature files have " +
          std::to_string(r.num_keypoints1) + " and " + std::to_string(r.num_keypoints2));
    }
    r.inliers[i] = flags[i];
    if (flags[i] > 1 || (flags[i] == 1 && model == 0)) {
      return Status::InvalidInput(where + "inlier flag of match " + std::to_string(i) + " is " +
                                  std::to_string(flags[i]) +
                                  " (expected 0 or 1, and 0 without a model)");
    }
    inliers += flags[i];
  }
  if (inliers != header_inliers) {
    return Status::InvalidInput(where + "the header says " + std::to_string(header_inliers) +
                                " inliers but " + std::to_string(inliers) + " flags are set");
  }
  *matches = std::move(r);
  return Status::Ok();
}

Status WriteMatchesText(const std::string& path, const PairMatches& m) {
  Status s = m.CheckConsistent();
  if (!s.ok()) return Status::InvalidInput("cannot write " + path + ": " + s.message());
  AtomicFile file(path);
  TIEPOINT_RETURN_IF_ERROR(file.Open());
  std::ofstream& out = file.stream();
  const bool has_model = m.model != MatchModel::kNone;
  char number[64];
  auto put = [&](const char* label, const double* v, int n) {
    out << "# " << label;
    for (int i = 0; i < n; ++i) {
      std::snprintf(number, sizeof(number), " %.17g", v[i]);
      out << number;
    }
    out << '\n';
  };
  out << "# tiepoint matches " << m.name1 << ' ' << m.name2 << '\n';
  std::snprintf(number, sizeof(number), "%.6g", has_model ? m.inlier_rms_error_px : 0.0);
  out << "# keypoints " << m.num_keypoints1 << ' ' << m.num_keypoints2 << " matches "
      << m.matches.size() << " model " << ToString(m.model) << " verified "
      << (has_model && m.verified ? 1 : 0) << " inliers " << (has_model ? m.NumInliers() : 0)
      << " rms_px " << number << '\n';
  if (has_model) {
    put("matrix", m.matrix, 9);
    if (m.model == MatchModel::kEssential) {
      put("rotation", m.rotation, 9);
      put("translation", m.translation, 3);
    }
  }
  std::string line;
  for (size_t i = 0; i < m.matches.size(); ++i) {
    const FeatureMatch& f = m.matches[i];
    line = std::to_string(f.index1);
    line += ' ';
    line += std::to_string(f.index2);
    line += ' ';
    line += std::to_string(f.distance_sq);
    line += ' ';
    line += (has_model && !m.inliers.empty() && m.inliers[i]) ? '1' : '0';
    line += '\n';
    out << line;
  }
  return file.Commit();
}

Status ReadIntrinsicsTable(const std::string& path,
                           std::map<std::string, CameraIntrinsics>* table) {
  std::ifstream in;
  TIEPOINT_RETURN_IF_ERROR(OpenInputFile(path, "an intrinsics file", &in));
  return ReadIntrinsicsTable(in, path, table);
}

Status ReadIntrinsicsTable(std::istream& in, const std::string& path,
                           std::map<std::string, CameraIntrinsics>* table) {
  std::map<std::string, CameraIntrinsics> result;
  std::string line;
  int line_no = 0;
  bool first_content = true;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string where = path + ":" + std::to_string(line_no) + ": ";
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::vector<std::string> tokens;
    for (std::string t; fields >> t;) tokens.push_back(t);
    if (tokens.empty()) continue;
    const bool was_first = first_content;
    first_content = false;
    if (was_first && tokens.size() == 1 &&
        tokens[0].find_first_not_of("0123456789") == std::string::npos) {
      continue;  // Middlebury's image count
    }
    std::vector<double> v;
    for (size_t i = 1; i < tokens.size(); ++i) {
      char* end = nullptr;
      const double x = std::strtod(tokens[i].c_str(), &end);
      if (end == tokens[i].c_str() || *end != '\0') {
        return Status::InvalidInput(where + "'" + tokens[i] + "' is not a number");
      }
      v.push_back(x);
    }
    CameraIntrinsics k;
    if (v.size() == 4) {
      k = {v[0], v[1], v[2], v[3]};
    } else if (v.size() >= 9) {
      if (v[3] != 0 || v[6] != 0 || v[7] != 0 || v[8] != 1) {
        return Status::InvalidInput(where + "K must be [fx s cx; 0 fy cy; 0 0 1]: k21, k31, "
                                    "k32 must be 0 and k33 1");
      }
      k = {v[0], v[4], v[2], v[5]};
    } else {
      return Status::InvalidInput(where + "expected 'NAME fx fy cx cy' or 'NAME k11 .. k33 "
                                  "[R t]', found " + std::to_string(v.size()) +
                                  " numbers after the name");
    }
    if (!(std::isfinite(k.fx) && k.fx > 0 && std::isfinite(k.fy) && k.fy > 0 &&
          std::isfinite(k.cx) && std::isfinite(k.cy))) {
      return Status::InvalidInput(where + "focal lengths must be positive and finite, the "
                                  "principal point finite");
    }
    if (!result.emplace(tokens[0], k).second) {
      return Status::InvalidInput(where + "image '" + tokens[0] + "' is given twice");
    }
  }
  if (in.bad()) return Status::IoError(path + ": read error");
  if (result.empty()) return Status::InvalidInput(path + ": no intrinsics in the file");
  *table = std::move(result);
  return Status::Ok();
}

std::string MatchesFileNamePart(const std::string& image_name) {
  std::string part;
  part.reserve(image_name.size());
  for (const char c : image_name) {
    if (c == '/')
      part += "%2F";
    else
      part += c;
  }
  return part;
}

std::string MatchesFileName(const std::string& name1, const std::string& name2, const std::string& extension) {
  return MatchesFileNamePart(name1) + "--" + MatchesFileNamePart(name2) + extension;
}

}  // namespace tiepoint
