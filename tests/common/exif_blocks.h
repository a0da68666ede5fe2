// Test-only EXIF writer: an APP1 segment holding "Exif\0\0" and a TIFF structure (IFD0
// pointing to the EXIF IFD, which holds the given tags), written byte by byte so tests know
// every value and can corrupt any of them. Put it after a JPEG's SOI.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tiepoint::testing {

using Bytes = std::vector<unsigned char>;

namespace exif_tags {
enum TiffType : uint16_t { kShort = 3, kLong = 4, kRational = 5 };

struct Tag {
  uint16_t tag;
  TiffType type;
  uint32_t a;      // the value, or a rational's numerator
  uint32_t b = 1;  // a rational's denominator
};

constexpr uint16_t kFocalLength = 0x920a;
constexpr uint16_t kFocalLengthIn35mm = 0xa405;
constexpr uint16_t kFocalPlaneXResolution = 0xa20e;
constexpr uint16_t kFocalPlaneResolutionUnit = 0xa210;
constexpr uint16_t kPixelXDimension = 0xa002;
}  // namespace exif_tags

// An APP1 segment (marker included) holding "Exif\0\0" and a TIFF structure whose IFD0
// has one entry, the pointer to the EXIF IFD holding `tags` (in the given order).
inline Bytes ExifApp1(const std::vector<exif_tags::Tag>& tags, bool big_endian = false) {
  Bytes tiff;
  auto u16 = [&](uint32_t v) {
    if (big_endian) {
      tiff.push_back(v >> 8);
      tiff.push_back(v & 0xff);
    } else {
      tiff.push_back(v & 0xff);
      tiff.push_back(v >> 8);
    }
  };
  auto u32 = [&](uint32_t v) {
    if (big_endian) {
      u16(v >> 16);
      u16(v & 0xffff);
    } else {
      u16(v & 0xffff);
      u16(v >> 16);
    }
  };
  tiff.push_back(big_endian ? 'M' : 'I');
  tiff.push_back(big_endian ? 'M' : 'I');
  u16(42);
  u32(8);
  // IFD0 at 8: one entry (ExifIfdPointer), then no next IFD.
  const uint32_t exif_ifd = 8 + 2 + 12 + 4;
  u16(1);
  u16(0x8769);
  u16(exif_tags::kLong);
  u32(1);
  u32(exif_ifd);
  u32(0);
  // The EXIF IFD, its rationals after it.
  uint32_t data_at = exif_ifd + 2 + 12 * static_cast<uint32_t>(tags.size()) + 4;
  u16(static_cast<uint32_t>(tags.size()));
  for (const exif_tags::Tag& t : tags) {
    u16(t.tag);
    u16(t.type);
    u32(1);
    if (t.type == exif_tags::kRational) {
      u32(data_at);
      data_at += 8;
    } else if (t.type == exif_tags::kShort) {
      u16(t.a);
      u16(0);
    } else {
      u32(t.a);
    }
  }
  u32(0);
  for (const exif_tags::Tag& t : tags)
    if (t.type == exif_tags::kRational) {
      u32(t.a);
      u32(t.b);
    }
  Bytes seg = {0xff, 0xe1};
  const size_t length = 2 + 6 + tiff.size();
  seg.push_back(length >> 8);
  seg.push_back(length & 0xff);
  for (char c : std::string("Exif\0\0", 6)) seg.push_back(static_cast<uint8_t>(c));
  seg.insert(seg.end(), tiff.begin(), tiff.end());
  return seg;
}


}  // namespace tiepoint::testing
