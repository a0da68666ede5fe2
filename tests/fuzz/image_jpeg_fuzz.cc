// Images, JPEG (libjpeg behind tiepoint's hooks: warnings as errors, pixel and scan bounds), through DecodeImageGray. Inputs of another format are
// dropped from the corpus, so each target stays on its decoder.
#include <cmath>
#include <cstring>

#include "io/image.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tiepoint;
  if (!(size >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff)) return -1;
  GrayImage image;
  const Status s = DecodeImageGray(data, size, "fuzz.img", &image);
  fuzz::CheckFailure(s, "fuzz.img");
  if (s.ok()) fuzz::CheckGrayImage(image);
  return 0;
}
