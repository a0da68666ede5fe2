// The EXIF focal length prior (io/exif.h: the JPEG marker walk, then libexif on the APP1
// block; or libexif on a whole TIFF), through DecodeExifFocalPrior for a 640 x 480 image.
// Inputs that are neither JPEGs nor TIFFs are dropped from the corpus; the seeds are SOI +
// an EXIF APP1 + EOI (make_seeds.sh), and the TIFF image seeds are replayed too.
#include <cmath>

#include "io/exif.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tiepoint;
  const bool jpeg = size >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff;
  const bool tiff = size >= 2 && ((data[0] == 'I' && data[1] == 'I') || (data[0] == 'M' && data[1] == 'M'));
  if (!jpeg && !tiff) return -1;
  std::optional<ExifFocalPrior> prior;
  std::string why;
  const Status s = DecodeExifFocalPrior(data, size, "fuzz.jpg", 640, 480, &prior, &why);
  fuzz::CheckFailure(s, "fuzz.jpg");
  if (s.ok() && prior) {
    TIEPOINT_FUZZ_CHECK(std::isfinite(prior->focal_px));
    TIEPOINT_FUZZ_CHECK(prior->focal_px >= kMinFocalFactor * 640 && prior->focal_px <= kMaxFocalFactor * 640);
    TIEPOINT_FUZZ_CHECK(!prior->source.empty());
    TIEPOINT_FUZZ_CHECK(why.empty());
  } else if (s.ok()) {
    TIEPOINT_FUZZ_CHECK(!why.empty());
  } else {
    TIEPOINT_FUZZ_CHECK(!prior);
  }
  return 0;
}
