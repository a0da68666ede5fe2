// Images, PNG (libpng behind tiepoint's hooks: error longjmp, dimension and raster-size
// checks), through DecodeImageGray. Inputs of another format are dropped from the
// corpus, so the target stays on its decoder. Each chunk's CRC is recomputed before
// decoding (as libpng's own fuzzer ignores CRCs): otherwise nearly every mutation would
// stop at the first CRC check and the decoder behind it would go unexplored.
#include <zlib.h>

#include <cstring>
#include <vector>

#include "io/image.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

uint32_t Be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

void FixCrcs(std::vector<uint8_t>* png) {
  size_t at = 8;
  while (at + 12 <= png->size()) {
    const uint32_t length = Be32(&(*png)[at]);
    if (length > png->size() - at - 12) return;
    uint8_t* type = &(*png)[at + 4];
    const uint32_t crc = static_cast<uint32_t>(crc32(crc32(0, nullptr, 0), type, length + 4));
    uint8_t* out = type + 4 + length;
    for (int b = 0; b < 4; ++b) out[b] = static_cast<uint8_t>(crc >> (24 - 8 * b));
    at += 12 + length;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tiepoint;
  if (!(size >= 8 && std::memcmp(data, "\x89PNG\r\n\x1a\n", 8) == 0)) return -1;
  std::vector<uint8_t> png(data, data + size);
  FixCrcs(&png);
  GrayImage image;
  const Status s = DecodeImageGray(png.data(), png.size(), "fuzz.img", &image);
  fuzz::CheckFailure(s, "fuzz.img");
  if (s.ok()) fuzz::CheckGrayImage(image);
  return 0;
}
