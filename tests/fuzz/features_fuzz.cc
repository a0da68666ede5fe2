// .tpfeat: ParseFeatures; accepted features must be consistent (WriteFeatures takes them).
#include <cmath>

#include "io/features.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tiepoint;
  Features features;
  const Status s = ParseFeatures(data, size, "fuzz.tpfeat", &features);
  fuzz::CheckFailure(s, "fuzz.tpfeat");
  if (s.ok()) {
    TIEPOINT_FUZZ_CHECK(features.CheckConsistent().ok());
    for (const Keypoint& k : features.keypoints) {
      TIEPOINT_FUZZ_CHECK(std::isfinite(k.x) && std::isfinite(k.y) && k.scale > 0);
    }
  }
  return 0;
}
