// The GPU's bzip2 decoder (issue 18), run on the CPU: `tiepoint ba --device cuda` hands the
// bytes of any .bz2 to kernels built from io/bz2_block.h (block plan, Huffman and
// move-to-front, the inverse BWT walked in segments, the first run-length stage and the
// CRCs), and DecompressBz2StagedOnCpu runs the same functions in the same order. On any
// input they must stay in bounds (ASan/UBSan here stand in for the GPU), and either
// decline, so the reader falls back to libbz2, or give exactly libbz2's bytes.
#include <string>
#include <vector>

#include "io/bz2_cuda.h"
#include "io/bz2_parallel.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tiepoint;
  if (size < 4 || data[0] != 'B' || data[1] != 'Z' || data[2] != 'h') return -1;
  // As in bal_bz2: digit 1 keeps the work arrays (and the runs) small; a block larger than
  // the digit allows is then refused by both decoders alike.
  std::vector<char> bz2(data, data + size);
  if (bz2[3] >= '2' && bz2[3] <= '9') bz2[3] = '1';
  // The segment count splits each block's walk: from a single segment (no chaining) to
  // more segments than most blocks have bytes (empty segments).
  static const int kSegments[] = {1, 3, 32, 1024};
  const int segments = kSegments[size % 4];
  Bz2Decoded out;
  std::string why;
  if (!DecompressBz2StagedOnCpu(bz2.data(), bz2.size(), segments, &out, &why)) {
    TIEPOINT_FUZZ_CHECK(!why.empty());  // a decline says why (the GPU path logs it)
    return 0;
  }
  std::string ref;
  const Status s = DecompressBz2Serial(bz2.data(), bz2.size(), "fuzz.bz2", &ref);
  TIEPOINT_FUZZ_CHECK(s.ok());  // accepted only what libbz2 accepts
  TIEPOINT_FUZZ_CHECK(out.Concatenate() == ref);
  return 0;
}
