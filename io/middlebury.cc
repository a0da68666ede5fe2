#include "io/middlebury.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "io/base/atomic_file.h"
#include "io/base/input_file.h"

namespace tiepoint {
namespace {

double Distance(const std::array<double, 3>& a, const std::array<double, 3>& b) {
  return std::sqrt((a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]) +
                   (a[2] - b[2]) * (a[2] - b[2]));
}

double Norm(const std::array<double, 3>& a) { return Distance(a, {0, 0, 0}); }

}  // namespace

std::array<double, 3> MiddleburyCamera::Centre() const {
  std::array<double, 3> c{};
  for (int i = 0; i < 3; ++i) c[i] = -(R[i] * t[0] + R[3 + i] * t[1] + R[6 + i] * t[2]);
  return c;
}

Status ReadMiddleburyCameras(const std::string& path, std::vector<MiddleburyCamera>* cameras) {
  std::ifstream in;
  TIEPOINT_RETURN_IF_ERROR(OpenInputFile(path, "a camera file", &in));
  return ReadMiddleburyCameras(in, path, cameras);
}

Status ReadMiddleburyCameras(std::istream& in, const std::string& path,
                             std::vector<MiddleburyCamera>* cameras) {
  std::string line;
  int line_no = 0;
  long count = -1;
  std::vector<MiddleburyCamera> result;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string where = path + ":" + std::to_string(line_no) + ": ";
    std::istringstream fields(line);
    std::vector<std::string> tokens;
    for (std::string s; fields >> s;) tokens.push_back(s);
    if (tokens.empty()) continue;
    if (count < 0) {
      char* end = nullptr;
      count = std::strtol(tokens[0].c_str(), &end, 10);
      if (tokens.size() != 1 || *end != '\0' || count <= 0 || count > 100000) {
        return Status::InvalidInput(where + "expected the view count (a positive integer)");
      }
      continue;
    }
    if (static_cast<long>(result.size()) == count) {
      return Status::InvalidInput(where + "more views than the count " + std::to_string(count));
    }
    if (tokens.size() != 22) {
      return Status::InvalidInput(where + "expected 'name k11..k33 r11..r33 t1 t2 t3' (21 numbers), found " +
                                  std::to_string(tokens.size() - 1));
    }
    MiddleburyCamera c;
    c.name = tokens[0];
    double v[21];
    for (int i = 0; i < 21; ++i) {
      char* end = nullptr;
      v[i] = std::strtod(tokens[i + 1].c_str(), &end);
      if (end == tokens[i + 1].c_str() || *end != '\0' || !std::isfinite(v[i])) {
        return Status::InvalidInput(where + "'" + tokens[i + 1] + "' is not a finite number");
      }
    }
    std::copy(v, v + 9, c.K.begin());
    std::copy(v + 9, v + 18, c.R.begin());
    std::copy(v + 18, v + 21, c.t.begin());
    result.push_back(c);
  }
  if (in.bad()) return Status::IoError(path + ": read error");
  if (count < 0) return Status::InvalidInput(path + ": empty (no view count)");
  if (static_cast<long>(result.size()) != count) {
    return Status::InvalidInput(path + ": the count says " + std::to_string(count) + " views, the file has " +
                                std::to_string(result.size()));
  }
  *cameras = std::move(result);
  return Status::Ok();
}

Status WriteMiddleburyCameras(const std::string& path,
                              const std::vector<MiddleburyCamera>& cameras) {
  for (size_t i = 0; i < cameras.size(); ++i) {
    const MiddleburyCamera& c = cameras[i];
    const std::string where = path + ": camera " + std::to_string(i) + " ('" + c.name + "'): ";
    if (c.name.empty() || std::any_of(c.name.begin(), c.name.end(), [](char ch) {
          return std::isspace(static_cast<unsigned char>(ch)) != 0;
        })) {
      return Status::InvalidInput(where + "the name must be non-empty without white space");
    }
    const auto finite = [](double v) { return std::isfinite(v); };
    if (!std::all_of(c.K.begin(), c.K.end(), finite) || !std::all_of(c.R.begin(), c.R.end(), finite) ||
        !std::all_of(c.t.begin(), c.t.end(), finite)) {
      return Status::InvalidInput(where + "a number that is not finite");
    }
  }
  AtomicFile file(path);
  TIEPOINT_RETURN_IF_ERROR(file.Open());
  std::ofstream& out = file.stream();
  out << cameras.size() << '\n';
  char number[32];
  const auto put = [&](double v) {
    std::snprintf(number, sizeof(number), " %.17g", v);
    out << number;
  };
  for (const MiddleburyCamera& c : cameras) {
    out << c.name;
    for (double v : c.K) put(v);
    for (double v : c.R) put(v);
    for (double v : c.t) put(v);
    out << '\n';
  }
  return file.Commit();
}

std::vector<std::pair<int, int>> MiddleburyNeighbourPairs(const std::vector<MiddleburyCamera>& cameras,
                                                          int k) {
  const int n = static_cast<int>(cameras.size());
  std::vector<std::array<double, 3>> centres;
  for (const MiddleburyCamera& c : cameras) centres.push_back(c.Centre());
  std::vector<std::pair<int, int>> pairs;
  for (int i = 0; i < n; ++i) {
    std::vector<int> others;
    for (int j = 0; j < n; ++j) {
      if (j != i && Distance(centres[j], centres[i]) > 1e-3 * Norm(centres[i])) others.push_back(j);
    }
    std::sort(others.begin(), others.end(), [&](int a, int b) {
      return Distance(centres[a], centres[i]) < Distance(centres[b], centres[i]);
    });
    for (int m = 0; m < k && m < static_cast<int>(others.size()); ++m) {
      pairs.emplace_back(std::min(i, others[m]), std::max(i, others[m]));
    }
  }
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  return pairs;
}

}  // namespace tiepoint
