// The EXIF focal length prior (io/exif.h) on JPEGs whose EXIF block the test writes byte
// by byte (TIFF header, IFD0 pointing to the EXIF IFD, the focal tags), so every value and
// every corruption is known.
#include "io/exif.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tests/common/exif_blocks.h"
#include "tests/common/image_encoders.h"
#include "tests/common/scratch_dir.h"

namespace tiepoint {
namespace {

using testing::Bytes;
using testing::ExifApp1;
using namespace testing::exif_tags;
using testing::ScratchDir;

// A small colour JPEG (libjpeg; its JFIF APP0 first), with `app1` put right after SOI.
Bytes Jpeg(int w, int h, const Bytes& app1 = {}) {
  std::vector<uint8_t> samples(static_cast<size_t>(w) * h * 3);
  for (size_t i = 0; i < samples.size(); ++i) samples[i] = static_cast<uint8_t>(i * 7);
  Bytes jpeg = testing::EncodeJpeg(w, h, 3, samples, 90);
  jpeg.insert(jpeg.begin() + 2, app1.begin(), app1.end());
  return jpeg;
}

struct Result {
  Status status;
  std::optional<ExifFocalPrior> prior;
  std::string why;
};

Result Decode(const Bytes& bytes, int w, int h) {
  Result r;
  r.status = DecodeExifFocalPrior(bytes.data(), bytes.size(), "photo.jpg", w, h, &r.prior, &r.why);
  return r;
}

TEST(ExifFocalPrior, From35mmEquivalent) {
  // 50 mm equivalent on a 320 x 240 image: 50 / 36 x 320 px.
  const Result r = Decode(Jpeg(320, 240, ExifApp1({{kFocalLengthIn35mm, kShort, 50}})), 320, 240);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_TRUE(r.prior.has_value()) << r.why;
  EXPECT_NEAR(r.prior->focal_px, 50.0 / 36.0 * 320, 1e-9);
  EXPECT_EQ(r.prior->source, "FocalLengthIn35mmFilm");
  EXPECT_EQ(r.prior->focal_length_35mm, 50);
  EXPECT_TRUE(r.why.empty());
}

// A TIFF is itself the structure an EXIF block holds: its IFD0 points to the EXIF IFD. The
// APP1 segment's TIFF part (after the marker, length and "Exif\0\0") stands for the file, in
// both byte orders; a TIFF whose IFD0 has no EXIF pointer has no EXIF block.
TEST(ExifFocalPrior, TiffFilesCarryTheirOwn) {
  for (const bool big_endian : {false, true}) {
    SCOPED_TRACE(big_endian ? "MM" : "II");
    const Bytes app1 = ExifApp1({{kFocalLengthIn35mm, kShort, 50}}, big_endian);
    const Bytes tiff(app1.begin() + 10, app1.end());
    ASSERT_EQ(tiff[0], big_endian ? 'M' : 'I');
    const Result r = Decode(tiff, 320, 240);
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    ASSERT_TRUE(r.prior.has_value()) << r.why;
    EXPECT_NEAR(r.prior->focal_px, 50.0 / 36.0 * 320, 1e-9);
    EXPECT_EQ(r.prior->source, "FocalLengthIn35mmFilm");
  }
  // IFD0 with one entry, ImageWidth 64: no EXIF pointer.
  const Bytes plain = {'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0, 1, 3, 0, 1, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0};
  const Result p = Decode(plain, 64, 48);
  ASSERT_TRUE(p.status.ok()) << p.status.message();
  EXPECT_FALSE(p.prior.has_value());
  EXPECT_EQ(p.why, "no EXIF block");
  // Every cut of the TIFF: an error naming the file, or a prior only once the tag's entry
  // (bytes 28-39, after IFD0 and the EXIF IFD's count) is whole; never a crash.
  const Bytes app1 = ExifApp1({{kFocalLengthIn35mm, kShort, 50}});
  const Bytes tiff(app1.begin() + 10, app1.end());
  for (size_t len = 0; len < tiff.size(); ++len) {
    const Result c = Decode(Bytes(tiff.begin(), tiff.begin() + len), 320, 240);
    if (!c.status.ok()) {
      EXPECT_EQ(c.status.code(), StatusCode::kInvalidInput);
      EXPECT_NE(c.status.message().find("photo.jpg"), std::string::npos) << c.status.message();
    }
    if (c.prior.has_value()) {
      EXPECT_GE(len, 40u);
      EXPECT_NEAR(c.prior->focal_px, 50.0 / 36.0 * 320, 1e-9);
    }
  }
}

TEST(ExifFocalPrior, PortraitUsesTheLongerSide) {
  const Result r = Decode(Jpeg(240, 320, ExifApp1({{kFocalLengthIn35mm, kShort, 28}})), 240, 320);
  ASSERT_TRUE(r.prior.has_value()) << r.why;
  EXPECT_NEAR(r.prior->focal_px, 28.0 / 36.0 * 320, 1e-9);
}

TEST(ExifFocalPrior, FromFocalLengthAndFocalPlaneResolution) {
  for (bool big_endian : {false, true}) {
    SCOPED_TRACE(big_endian ? "big-endian" : "little-endian");
    // 4.5 mm at 2000 pixels per cm (5 um pixels, a 5 mm wide sensor): 4.5 * 200 = 900 px.
    const Bytes app1 = ExifApp1({{kFocalLength, kRational, 45, 10},
                                 {kFocalPlaneXResolution, kRational, 2000, 1},
                                 {kFocalPlaneResolutionUnit, kShort, 3}},
                                big_endian);
    const Result r = Decode(Jpeg(1000, 750, app1), 1000, 750);
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    ASSERT_TRUE(r.prior.has_value()) << r.why;
    EXPECT_NEAR(r.prior->focal_px, 900, 1e-9);
    EXPECT_EQ(r.prior->source, "FocalLength+FocalPlaneXResolution");
    EXPECT_NEAR(r.prior->focal_length_mm, 4.5, 1e-12);
  }
}

TEST(ExifFocalPrior, FocalPlaneResolutionDefaultsToInchesAndFollowsResizing) {
  // No unit: inches. 5 mm at 5080 px/inch = 200 px/mm -> 1000 px for the 1280-pixel
  // original (a 6.4 mm sensor); the file is 640 wide (resized, PixelXDimension kept): 500 px.
  const Bytes app1 = ExifApp1({{kFocalLength, kRational, 5, 1},
                               {kFocalPlaneXResolution, kRational, 5080, 1},
                               {kPixelXDimension, kLong, 1280}});
  const Result r = Decode(Jpeg(640, 480, app1), 640, 480);
  ASSERT_TRUE(r.prior.has_value()) << r.why;
  EXPECT_NEAR(r.prior->focal_px, 500, 1e-9);
}

TEST(ExifFocalPrior, AResizedPhotoWhoseTagsImplyATinySensorGivesNone) {
  // Balbianello's Canon EOS 500D photos, resized to 640 x 427 with PixelXDimension rewritten
  // but the original FocalPlaneXResolution kept: 18 mm at 5315.44 px/inch gives 3767 px
  // (the truth is about 519) and implies a 3.1 mm wide sensor (the camera's is 22.3 mm).
  const Bytes app1 = ExifApp1({{kFocalLength, kRational, 18, 1},
                               {kFocalPlaneXResolution, kRational, 531544, 100},
                               {kFocalPlaneResolutionUnit, kShort, 2},
                               {kPixelXDimension, kLong, 640}});
  const Result r = Decode(Jpeg(640, 427, app1), 640, 427);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_FALSE(r.prior.has_value()) << r.prior->focal_px;
  EXPECT_NE(r.why.find("resized"), std::string::npos) << r.why;
}

TEST(ExifFocalPrior, ThirtyFiveMillimetreEquivalentComesFirst) {
  const Bytes app1 = ExifApp1({{kFocalLength, kRational, 45, 10},
                               {kFocalPlaneXResolution, kRational, 2000, 1},
                               {kFocalPlaneResolutionUnit, kShort, 3},
                               {kFocalLengthIn35mm, kShort, 36}});
  const Result r = Decode(Jpeg(1000, 750, app1), 1000, 750);
  ASSERT_TRUE(r.prior.has_value()) << r.why;
  EXPECT_NEAR(r.prior->focal_px, 1000, 1e-9);
  // An absurd 35 mm value falls through to the focal plane tags.
  const Bytes app1b = ExifApp1({{kFocalLength, kRational, 45, 10},
                                {kFocalPlaneXResolution, kRational, 2000, 1},
                                {kFocalPlaneResolutionUnit, kShort, 3},
                                {kFocalLengthIn35mm, kShort, 60000}});
  const Result rb = Decode(Jpeg(1000, 750, app1b), 1000, 750);
  ASSERT_TRUE(rb.prior.has_value()) << rb.why;
  EXPECT_NEAR(rb.prior->focal_px, 900, 1e-9);
}

TEST(ExifFocalPrior, NoExifGivesNone) {
  const Result r = Decode(Jpeg(64, 48), 64, 48);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_FALSE(r.prior.has_value());
  EXPECT_EQ(r.why, "no EXIF block");
  // Not a JPEG at all (a PNG): none, no error.
  const Bytes png = testing::EncodePng(4, 4, PNG_COLOR_TYPE_GRAY, 8, std::vector<uint16_t>(16, 7));
  const Result p = Decode(png, 4, 4);
  ASSERT_TRUE(p.status.ok()) << p.status.message();
  EXPECT_FALSE(p.prior.has_value());
}

TEST(ExifFocalPrior, TagsWithoutASensorSizeGiveNone) {
  const Result r = Decode(Jpeg(64, 48, ExifApp1({{kFocalLength, kRational, 35, 1}})), 64, 48);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_FALSE(r.prior.has_value());
  EXPECT_NE(r.why.find("sensor size is unknown"), std::string::npos) << r.why;
  const Result e = Decode(Jpeg(64, 48, ExifApp1({{kPixelXDimension, kLong, 64}})), 64, 48);
  ASSERT_TRUE(e.status.ok()) << e.status.message();
  EXPECT_FALSE(e.prior.has_value());
  EXPECT_NE(e.why.find("no focal length tags"), std::string::npos) << e.why;
}

TEST(ExifFocalPrior, AbsurdValuesAreRejectedWithAReason) {
  // 2000 mm equivalent: 17.8 x the image side, above the accepted 10 x.
  Result r = Decode(Jpeg(64, 48, ExifApp1({{kFocalLengthIn35mm, kShort, 2000}})), 64, 48);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_FALSE(r.prior.has_value());
  EXPECT_NE(r.why.find("outside"), std::string::npos) << r.why;
  // A zero denominator (undefined), a zero focal length, an unknown unit.
  r = Decode(Jpeg(64, 48, ExifApp1({{kFocalLength, kRational, 5, 0}, {kFocalPlaneXResolution, kRational, 5080, 1}})), 64, 48);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_FALSE(r.prior.has_value());
  EXPECT_NE(r.why.find("undefined"), std::string::npos) << r.why;
  r = Decode(Jpeg(64, 48, ExifApp1({{kFocalLength, kRational, 0, 1}, {kFocalPlaneXResolution, kRational, 5080, 1}})), 64, 48);
  EXPECT_FALSE(r.prior.has_value());
  EXPECT_NE(r.why.find("non-positive"), std::string::npos) << r.why;
  r = Decode(Jpeg(64, 48, ExifApp1({{kFocalLength, kRational, 5, 1}, {kFocalPlaneXResolution, kRational, 5080, 1},
                                    {kFocalPlaneResolutionUnit, kShort, 1}})), 64, 48);
  EXPECT_FALSE(r.prior.has_value());
  EXPECT_NE(r.why.find("FocalPlaneResolutionUnit"), std::string::npos) << r.why;
  // The unit as a rational 0/0 (NaN) or a LONG beyond int (found by the exif fuzz target:
  // the unit was cast to int, undefined behaviour for both): not a length unit either.
  for (const Tag unit : {Tag{kFocalPlaneResolutionUnit, kRational, 0, 0},
                         Tag{kFocalPlaneResolutionUnit, kLong, 4294967295u}}) {
    const std::vector<Tag> tags = {{kFocalLength, kRational, 5, 1},
                                   {kFocalPlaneXResolution, kRational, 5080, 1}, unit};
    r = Decode(Jpeg(64, 48, ExifApp1(tags)), 64, 48);
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    EXPECT_FALSE(r.prior.has_value());
    EXPECT_NE(r.why.find("is not a length unit"), std::string::npos) << r.why;
  }
}

TEST(ExifFocalPrior, CorruptBlocksGiveNoneOrAClearErrorNeverACrash) {
  // The APP1 length runs past the end of the file.
  Bytes cut = Jpeg(64, 48, ExifApp1({{kFocalLengthIn35mm, kShort, 50}}));
  cut.resize(30);
  Result r = Decode(cut, 64, 48);
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidInput);
  EXPECT_NE(r.status.message().find("photo.jpg"), std::string::npos) << r.status.message();
  EXPECT_NE(r.status.message().find("segment"), std::string::npos) << r.status.message();
  // An EXIF header with no TIFF structure after it.
  Bytes tiny = {0xff, 0xe1, 0x00, 0x0c, 'E', 'x', 'i', 'f', 0, 0, 'I', 'I', 42, 0};
  r = Decode(Jpeg(64, 48, tiny), 64, 48);
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidInput);
  EXPECT_NE(r.status.message().find("EXIF"), std::string::npos) << r.status.message();
  // A TIFF header whose IFD0 offset points far outside the block.
  Bytes bad = ExifApp1({{kFocalLengthIn35mm, kShort, 50}});
  bad[4 + 6 + 4] = 0xff;
  bad[4 + 6 + 5] = 0xff;
  r = Decode(Jpeg(64, 48, bad), 64, 48);
  EXPECT_FALSE(r.prior.has_value());
  if (!r.status.ok()) {
    EXPECT_EQ(r.status.code(), StatusCode::kInvalidInput);
    EXPECT_NE(r.status.message().find("corrupt EXIF"), std::string::npos) << r.status.message();
  }
  // Random byte changes in the EXIF block: an answer every time, the prior in range.
  const Bytes good = ExifApp1({{kFocalLength, kRational, 45, 10},
                               {kFocalPlaneXResolution, kRational, 2000, 1},
                               {kFocalPlaneResolutionUnit, kShort, 3},
                               {kFocalLengthIn35mm, kShort, 36}});
  std::mt19937 rng(7);
  int errors = 0, priors = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    Bytes m = good;
    const int changes = 1 + trial % 4;
    for (int c = 0; c < changes; ++c) m[4 + rng() % (m.size() - 4)] = static_cast<uint8_t>(rng());
    r = Decode(Jpeg(64, 48, m), 64, 48);
    if (!r.status.ok()) {
      ++errors;
      ASSERT_EQ(r.status.code(), StatusCode::kInvalidInput) << r.status.message();
      ASSERT_NE(r.status.message().find("photo.jpg"), std::string::npos);
    } else if (r.prior) {
      ++priors;
      ASSERT_GE(r.prior->focal_px, kMinFocalFactor * 64);
      ASSERT_LE(r.prior->focal_px, kMaxFocalFactor * 64);
    }
  }
  EXPECT_GT(priors, 0);
  std::printf("3000 mutated EXIF blocks: %d priors, %d errors\n", priors, errors);
}

TEST(ExifFocalPrior, ReadsFilesAndNamesAMissingOne) {
  ScratchDir dir("exif_files");
  const std::string path = dir.File("a.jpg");
  ASSERT_TRUE(testing::WriteBytes(path, Jpeg(320, 240, ExifApp1({{kFocalLengthIn35mm, kShort, 72}}))));
  std::optional<ExifFocalPrior> prior;
  std::string why;
  ASSERT_TRUE(ReadExifFocalPrior(path, 320, 240, &prior, &why).ok());
  ASSERT_TRUE(prior.has_value()) << why;
  EXPECT_NEAR(prior->focal_px, 640, 1e-9);
  const Status s = ReadExifFocalPrior(dir.File("missing.jpg"), 320, 240, &prior, &why);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("missing.jpg"), std::string::npos);
  EXPECT_FALSE(prior.has_value());
}

}  // namespace
}  // namespace tiepoint
