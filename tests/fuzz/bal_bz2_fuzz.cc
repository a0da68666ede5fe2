// BAL .bz2: the bzip2 stream decoder under the BAL reader (concatenated streams, trailing
// garbage, truncation, corrupt blocks), from memory.
#include <vector>

#include "io/bal.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tiepoint;
  // Inputs that are not bzip2 at all only test the magic check: keep the corpus to ones
  // that are (libFuzzer drops an input whose run returns -1).
  if (size < 4 || data[0] != 'B' || data[1] != 'Z' || data[2] != 'h') return -1;
  // The block size digit only sizes libbz2's work array (digit x 400 KB, allocated per
  // stream): pinned to 1, a run costs ~2 ms under ASan instead of ~9 ms. Other digits are
  // left alone (libbz2 rejects them: the magic-error path stays covered).
  std::vector<char> bz2(data, data + size);
  if (bz2[3] >= '2' && bz2[3] <= '9') bz2[3] = '1';
  Scene scene;
  const Status s = ReadBalFromMemory(bz2.data(), bz2.size(), "fuzz.bz2", &scene);
  fuzz::CheckFailure(s, "fuzz.bz2");
  return 0;
}
