// Middlebury *_par.txt cameras, and the neighbour pairs computed from them.
#include <sstream>
#include <string>
#include <vector>

#include "io/middlebury.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tiepoint;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::vector<MiddleburyCamera> cameras;
  const Status s = ReadMiddleburyCameras(in, "fuzz_par.txt", &cameras);
  fuzz::CheckFailure(s, "fuzz_par.txt");
  if (s.ok()) {
    TIEPOINT_FUZZ_CHECK(!cameras.empty());
    for (const auto& [i, j] : MiddleburyNeighbourPairs(cameras)) {
      TIEPOINT_FUZZ_CHECK(0 <= i && i < j && j < static_cast<int>(cameras.size()));
    }
  }
  return 0;
}
