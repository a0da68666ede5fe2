// Pairs files (io/pairs_file.h), resolved against a fixed list of images whose names
// overlap (a stem two images share, a path and a file name).
#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "io/pairs_file.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tiepoint;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::vector<NamePair> named;
  Status s = ReadPairs(in, "fuzz_pairs.txt", &named);
  fuzz::CheckFailure(s, "fuzz_pairs.txt");
  if (!s.ok()) return 0;
  TIEPOINT_FUZZ_CHECK(!named.empty());
  int line = 0;
  for (const NamePair& p : named) {
    TIEPOINT_FUZZ_CHECK(p.line > line);  // in file order, one pair a line
    line = p.line;
    TIEPOINT_FUZZ_CHECK(!p.name1.empty() && !p.name2.empty());
    TIEPOINT_FUZZ_CHECK(p.name1.find_first_of(" \t#\n") == std::string::npos);
    TIEPOINT_FUZZ_CHECK(p.name2.find_first_of(" \t#\n") == std::string::npos);
  }
  const std::vector<std::vector<std::string>> names = {
      {"a.png", "cam0/a.png", "a"}, {"b.png", "b"}, {"a.jpg", "a"}, {"c.png", "c"}};
  std::vector<std::pair<int, int>> pairs;
  s = ResolvePairs("fuzz_pairs.txt", named, names, "image", &pairs);
  fuzz::CheckFailure(s, "fuzz_pairs.txt");
  if (!s.ok()) return 0;
  std::set<std::pair<int, int>> seen;
  for (const auto& [i, j] : pairs) {
    TIEPOINT_FUZZ_CHECK(0 <= i && i < 4 && 0 <= j && j < 4 && i != j);
    TIEPOINT_FUZZ_CHECK(seen.insert(std::pair<int, int>(std::minmax(i, j))).second);  // each pair once
  }
  TIEPOINT_FUZZ_CHECK(!pairs.empty() && pairs.size() <= named.size());
  return 0;
}
