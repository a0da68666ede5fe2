// The intrinsics table of `match --intrinsics` (NAME fx fy cx cy, or Middlebury's K rows).
#include <cmath>
#include <map>
#include <sstream>
#include <string>

#include "io/matches.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tiepoint;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::map<std::string, CameraIntrinsics> table;
  const Status s = ReadIntrinsicsTable(in, "fuzz.txt", &table);
  fuzz::CheckFailure(s, "fuzz.txt");
  if (s.ok()) {
    TIEPOINT_FUZZ_CHECK(!table.empty());
    for (const auto& [name, k] : table) {
      TIEPOINT_FUZZ_CHECK(k.fx > 0 && k.fy > 0 && std::isfinite(k.fx) && std::isfinite(k.fy) &&
                          std::isfinite(k.cx) && std::isfinite(k.cy));
    }
  }
  return 0;
}
