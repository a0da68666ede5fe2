// .tpmatch: ParseMatches; accepted matches must be consistent (WriteMatches takes them).
#include "io/matches.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tiepoint;
  PairMatches matches;
  const Status s = ParseMatches(data, size, "fuzz.tpmatch", &matches);
  fuzz::CheckFailure(s, "fuzz.tpmatch");
  if (s.ok()) TIEPOINT_FUZZ_CHECK(matches.CheckConsistent().ok());
  return 0;
}
