// BAL .bz2: the bzip2 stream decoder under the BAL reader (concatenated streams, trailing
// garbage, truncation, corrupt blocks), from memory.
#include "io/bal.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tiepoint;
  // Inputs that are not bzip2 at all only test the magic check: keep the corpus to ones
  // that are (libFuzzer drops an input whose run returns -1).
  if (size < 3 || data[0] != 'B' || data[1] != 'Z' || data[2] != 'h') return -1;
  Scene scene;
  const Status s =
      ReadBalFromMemory(reinterpret_cast<const char*>(data), size, "fuzz.bz2", &scene);
  fuzz::CheckFailure(s, "fuzz.bz2");
  return 0;
}
