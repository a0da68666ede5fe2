// Images, PGM/PPM (P2, P3, P5, P6: tiepoint's own parser), through DecodeImageGray. Inputs of another format are
// dropped from the corpus, so each target stays on its decoder.
#include <cmath>
#include <cstring>

#include "io/image.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tiepoint;
  if (!(size >= 2 && data[0] == 'P' && std::strchr("2356", data[1]) != nullptr && data[1] != 0)) return -1;
  GrayImage image;
  const Status s = DecodeImageGray(data, size, "fuzz.img", &image);
  fuzz::CheckFailure(s, "fuzz.img");
  if (s.ok()) fuzz::CheckGrayImage(image);
  return 0;
}
