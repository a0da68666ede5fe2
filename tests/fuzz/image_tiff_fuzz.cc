// Images, TIFF (libtiff behind tiepoint's memory client and per-handle error handlers,
// dimension and raster-size checks), through DecodeImageGray and DecodeImage8. Inputs of
// another format are dropped from the corpus, so the target stays on its decoder.
#include <cstring>

#include "io/image.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tiepoint;
  if (!(size >= 4 && (std::memcmp(data, "II", 2) == 0 || std::memcmp(data, "MM", 2) == 0))) return -1;
  GrayImage image;
  const Status s = DecodeImageGray(data, size, "fuzz.img", &image);
  fuzz::CheckFailure(s, "fuzz.img");
  if (s.ok()) fuzz::CheckGrayImage(image);
  Image8 colour;
  const Status s8 = DecodeImage8(data, size, "fuzz.img", &colour);
  fuzz::CheckFailure(s8, "fuzz.img");
  TIEPOINT_FUZZ_CHECK(s8.ok() == s.ok());
  if (s8.ok()) {
    TIEPOINT_FUZZ_CHECK(colour.width == image.width && colour.height == image.height);
    TIEPOINT_FUZZ_CHECK(colour.channels == 1 || colour.channels == 3);
    TIEPOINT_FUZZ_CHECK(colour.pixels.size() == static_cast<size_t>(colour.width) * colour.height * colour.channels);
  }
  return 0;
}
