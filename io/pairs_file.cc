#include "io/pairs_file.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "io/base/input_file.h"

namespace tiepoint {

Status ReadPairsFile(const std::string& path, std::vector<NamePair>* pairs) {
  pairs->clear();
  std::ifstream in;
  TIEPOINT_RETURN_IF_ERROR(OpenInputFile(path, "a pairs file", &in));
  return ReadPairs(in, path, pairs);
}

Status ReadPairs(std::istream& in, const std::string& path, std::vector<NamePair>* pairs) {
  pairs->clear();
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::vector<std::string> names;
    for (std::string t; names.size() < 3 && fields >> t;) names.push_back(t);
    if (names.empty()) continue;
    if (names.size() != 2) {
      size_t n = names.size();
      for (std::string t; fields >> t;) ++n;
      return Status::InvalidInput(path + ":" + std::to_string(line_no) + ": expected two names, found " +
                                  std::to_string(n));
    }
    pairs->push_back({names[0], names[1], line_no});
  }
  if (in.bad()) return Status::IoError(path + ": read error");
  if (pairs->empty()) return Status::InvalidInput(path + ": no pairs in the file");
  return Status::Ok();
}

Status ResolvePairs(const std::string& path, const std::vector<NamePair>& named,
                    const std::vector<std::vector<std::string>>& names_of, const std::string& noun,
                    std::vector<std::pair<int, int>>* pairs) {
  pairs->clear();
  // name -> the first item answering to it, and a second one if any (ambiguous).
  std::map<std::string, std::pair<int, int>> index;
  for (int i = 0; i < static_cast<int>(names_of.size()); ++i)
    for (const std::string& name : names_of[i]) {
      auto [it, fresh] = index.emplace(name, std::make_pair(i, -1));
      if (!fresh && it->second.first != i && it->second.second < 0) it->second.second = i;
    }
  const auto describe = [&](int i) { return names_of[i].empty() ? std::to_string(i) : names_of[i][0]; };
  std::set<std::pair<int, int>> seen;
  for (const NamePair& p : named) {
    const std::string where = path + ":" + std::to_string(p.line) + ": ";
    int ij[2];
    for (int k = 0; k < 2; ++k) {
      const std::string& name = k == 0 ? p.name1 : p.name2;
      const auto it = index.find(name);
      if (it == index.end()) return Status::InvalidInput(where + "'" + name + "' is not one of the " + noun + "s given");
      if (it->second.second >= 0)
        return Status::InvalidInput(where + "'" + name + "' names more than one " + noun + " (" +
                                    describe(it->second.first) + " and " + describe(it->second.second) + ")");
      ij[k] = it->second.first;
    }
    if (ij[0] == ij[1]) return Status::InvalidInput(where + "pairs '" + p.name1 + "' with itself");
    if (seen.insert(std::pair<int, int>(std::minmax(ij[0], ij[1]))).second) pairs->emplace_back(ij[0], ij[1]);
  }
  return Status::Ok();
}

}  // namespace tiepoint
