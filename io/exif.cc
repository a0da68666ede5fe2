#include "io/exif.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include <libexif/exif-data.h>
#include <libexif/exif-log.h>

#include "io/base/file_bytes.h"

namespace tiepoint {
namespace {

std::string Number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

// The first APP1 segment holding "Exif\0\0" among the markers before the first scan.
// Ok with *segment = nullptr when there is none.
Status FindExifSegment(const unsigned char* data, size_t size, const std::string& name,
                       const unsigned char** segment, size_t* segment_size) {
  *segment = nullptr;
  *segment_size = 0;
  size_t pos = 2;  // after SOI
  while (pos < size) {
    if (data[pos] != 0xff) {
      return Status::InvalidInput(name + ": corrupt JPEG: expected a marker at byte " +
                                  std::to_string(pos) + " before the first scan");
    }
    while (pos < size && data[pos] == 0xff) ++pos;  // fill bytes
    if (pos >= size) break;
    const unsigned char marker = data[pos++];
    if (marker == 0xd9 || marker == 0xda) return Status::Ok();  // EOI, SOS: no EXIF before
    if (marker == 0x01 || (marker >= 0xd0 && marker <= 0xd8)) continue;  // no length
    if (size - pos < 2) break;
    const size_t length = (static_cast<size_t>(data[pos]) << 8) | data[pos + 1];
    if (length < 2 || length > size - pos) {
      char m[8];
      std::snprintf(m, sizeof(m), "0x%02X", marker);
      return Status::InvalidInput(name + ": corrupt or truncated JPEG: the segment of marker " + m +
                                  " at byte " + std::to_string(pos - 2) + " gives length " +
                                  std::to_string(length) + ", " + std::to_string(size - pos) +
                                  " bytes are left");
    }
    const unsigned char* body = data + pos + 2;
    const size_t body_size = length - 2;
    if (marker == 0xe1 && body_size >= 6 && std::memcmp(body, "Exif\0\0", 6) == 0) {
      if (body_size < 6 + 8) {
        return Status::InvalidInput(name + ": corrupt EXIF block: the APP1 segment at byte " +
                                    std::to_string(pos - 2) + " holds " + std::to_string(body_size) +
                                    " bytes, too few for the EXIF and TIFF headers (14)");
      }
      *segment = body;
      *segment_size = body_size;
      return Status::Ok();
    }
    pos += length;
  }
  return Status::InvalidInput(name + ": truncated JPEG: the file ends among the header markers, "
                              "before the first scan");
}

// What libexif said went wrong while loading (its log's first corrupt-data message).
struct LogState {
  std::string first_corrupt;
};

void LogHook(ExifLog*, ExifLogCode code, const char* domain, const char* format, va_list args,
             void* data) {
  auto* state = static_cast<LogState*>(data);
  if (code != EXIF_LOG_CODE_CORRUPT_DATA && code != EXIF_LOG_CODE_NO_MEMORY) return;
  if (!state->first_corrupt.empty()) return;
  char buf[256];
  std::vsnprintf(buf, sizeof(buf), format, args);
  state->first_corrupt = std::string(domain != nullptr ? domain : "libexif") + ": " + buf;
}

// A tag of the EXIF sub-IFD (or, as some writers put it, of IFD0).
ExifEntry* FindEntry(ExifData* ed, ExifTag tag) {
  if (ExifEntry* e = exif_content_get_entry(ed->ifd[EXIF_IFD_EXIF], tag)) return e;
  return exif_content_get_entry(ed->ifd[EXIF_IFD_0], tag);
}

// The entry's first value as a double; false when absent or of an unexpected type.
// A rational with a zero denominator reads as NaN (the caller rejects it by name).
bool EntryValue(ExifData* ed, ExifTag tag, double* value) {
  const ExifEntry* e = FindEntry(ed, tag);
  if (e == nullptr || e->data == nullptr || e->components < 1) return false;
  const ExifByteOrder order = exif_data_get_byte_order(ed);
  switch (e->format) {
    case EXIF_FORMAT_SHORT:
      if (e->size < 2) return false;
      *value = exif_get_short(e->data, order);
      return true;
    case EXIF_FORMAT_LONG:
      if (e->size < 4) return false;
      *value = exif_get_long(e->data, order);
      return true;
    case EXIF_FORMAT_RATIONAL: {
      if (e->size < 8) return false;
      const ExifRational r = exif_get_rational(e->data, order);
      *value = r.denominator == 0 ? std::nan("") : static_cast<double>(r.numerator) / r.denominator;
      return true;
    }
    case EXIF_FORMAT_SRATIONAL: {
      if (e->size < 8) return false;
      const ExifSRational r = exif_get_srational(e->data, order);
      *value = r.denominator == 0 ? std::nan("") : static_cast<double>(r.numerator) / r.denominator;
      return true;
    }
    default:
      return false;
  }
}

// The prior from the tags, or a reason in *why_none.
void PriorFromTags(ExifData* ed, int width, int height, std::optional<ExifFocalPrior>* prior,
                   std::string* why_none) {
  const double max_side = std::max(width, height);
  ExifFocalPrior p;
  double f35 = 0, f = 0, xres = 0, unit = 2, pixel_x = 0;
  const bool has_f35 = EntryValue(ed, EXIF_TAG_FOCAL_LENGTH_IN_35MM_FILM, &f35);
  const bool has_f = EntryValue(ed, EXIF_TAG_FOCAL_LENGTH, &f);
  const bool has_xres = EntryValue(ed, EXIF_TAG_FOCAL_PLANE_X_RESOLUTION, &xres);
  EntryValue(ed, EXIF_TAG_FOCAL_PLANE_RESOLUTION_UNIT, &unit);
  const bool has_pixel_x = EntryValue(ed, EXIF_TAG_PIXEL_X_DIMENSION, &pixel_x);
  if (has_f35 && std::isfinite(f35)) p.focal_length_35mm = f35;
  if (has_f && std::isfinite(f)) p.focal_length_mm = f;
  std::string notes;
  auto accept = [&](double focal_px, const char* source, const std::string& how) {
    if (!std::isfinite(focal_px) || focal_px <= 0) {
      notes += (notes.empty() ? "" : "; ") + how + " gives a non-positive or undefined focal length";
      return false;
    }
    if (focal_px < kMinFocalFactor * max_side || focal_px > kMaxFocalFactor * max_side) {
      notes += (notes.empty() ? "" : "; ") + how + " gives " + Number(focal_px) + " px, outside [" +
               Number(kMinFocalFactor) + ", " + Number(kMaxFocalFactor) + "] x max(width, height) = [" +
               Number(kMinFocalFactor * max_side) + ", " + Number(kMaxFocalFactor * max_side) + "] px";
      return false;
    }
    p.focal_px = focal_px;
    p.source = source;
    return true;
  };
  // A 35 mm equivalent of 0 means "unknown" in EXIF: no note for it.
  if (has_f35 && f35 != 0 &&
      accept(f35 / 36.0 * max_side, "FocalLengthIn35mmFilm",
             "FocalLengthIn35mmFilm " + Number(f35) + " mm")) {
    *prior = p;
    return;
  }
  if (has_f && has_xres) {
    // Compared as a double: the tag may come as a rational (0/0 is NaN) or a LONG beyond
    // int, which a cast to int would make undefined behaviour.
    double unit_mm = 0;
    if (unit == 2) {
      unit_mm = 25.4;
    } else if (unit == 3) {
      unit_mm = 10.0;
    } else if (unit == 4) {
      unit_mm = 1.0;
    } else if (unit == 5) {
      unit_mm = 0.001;
    }
    const std::string how = "FocalLength " + Number(f) + " mm with FocalPlaneXResolution " +
                            Number(xres) + " per " + (unit_mm > 0 ? Number(unit_mm) + " mm" : "?");
    if (unit_mm == 0) {
      notes += (notes.empty() ? "" : "; ") + std::string("FocalPlaneResolutionUnit ") + Number(unit) +
               " is not a length unit (2 inch, 3 cm, 4 mm, 5 um)";
    } else {
      const double scale = has_pixel_x && pixel_x > 0 ? width / pixel_x : 1.0;
      // The sensor width these tags imply. A photo resized after the EXIF was written
      // keeps the original FocalPlaneXResolution while PixelXDimension (or the image) is
      // smaller: the implied sensor shrinks with it (Balbianello's 640-pixel Canon photos:
      // 3.1 mm for an APS-C sensor of 22.3 mm, a prior 7x too long). Sensors that write
      // these tags are at least 1/3.2" (4.5 mm wide).
      const double sensor_mm = (has_pixel_x && pixel_x > 0 ? pixel_x : width) / (xres / unit_mm);
      const double focal_px = f * xres / unit_mm * scale;
      if (std::isfinite(focal_px) && focal_px > 0 && !(sensor_mm >= kMinSensorWidthMm)) {
        notes += (notes.empty() ? "" : "; ") + how + " implies a sensor " + Number(sensor_mm) +
                 " mm wide (under " + Number(kMinSensorWidthMm) +
                 " mm: the photo was probably resized after its EXIF was written)";
      } else if (accept(focal_px, "FocalLength+FocalPlaneXResolution",
                 how + (scale != 1.0 ? " and PixelXDimension " + Number(pixel_x) : ""))) {
        *prior = p;
        return;
      }
    }
  }
  if (notes.empty()) {
    notes = has_f ? "FocalLength " + Number(f) +
                        " mm without FocalLengthIn35mmFilm or FocalPlaneXResolution (the sensor size is unknown)"
                  : "no focal length tags in the EXIF block";
  }
  if (why_none != nullptr) *why_none = notes;
}

}  // namespace

Status DecodeExifFocalPrior(const unsigned char* data, size_t size, const std::string& name,
                            int width, int height, std::optional<ExifFocalPrior>* prior,
                            std::string* why_none) {
  prior->reset();
  if (why_none != nullptr) why_none->clear();
  if (width <= 0 || height <= 0) {
    return Status::InvalidOptions(name + ": EXIF focal prior asked for a " + std::to_string(width) +
                                  " x " + std::to_string(height) + " image");
  }
  const bool jpeg = size >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff;
  // A classic TIFF is itself the structure an EXIF block holds: its IFD0 (the image's
  // tags) points to the EXIF IFD. libexif reads it behind the "Exif\0\0" header of an APP1
  // segment, which is prepended to a copy. (BigTIFF is not EXIF's format: no prior.)
  const bool tiff = size >= 8 && ((data[0] == 'I' && data[1] == 'I' && data[2] == 42 && data[3] == 0) ||
                                  (data[0] == 'M' && data[1] == 'M' && data[2] == 0 && data[3] == 42));
  if (!jpeg && !tiff) {
    if (why_none != nullptr) *why_none = "not a JPEG or TIFF (no EXIF read)";
    return Status::Ok();
  }
  const unsigned char* segment = nullptr;
  size_t segment_size = 0;
  std::vector<unsigned char> wrapped;
  if (jpeg) {
    TIEPOINT_RETURN_IF_ERROR(FindExifSegment(data, size, name, &segment, &segment_size));
  } else if (size <= std::numeric_limits<unsigned int>::max() - 6) {
    wrapped.reserve(size + 6);
    wrapped.insert(wrapped.end(), {'E', 'x', 'i', 'f', 0, 0});
    wrapped.insert(wrapped.end(), data, data + size);
    segment = wrapped.data();
    segment_size = wrapped.size();
  }
  if (segment == nullptr) {
    if (why_none != nullptr) *why_none = "no EXIF block";
    return Status::Ok();
  }
  ExifData* ed = exif_data_new();
  ExifLog* log = exif_log_new();
  if (ed == nullptr || log == nullptr) {
    if (ed != nullptr) exif_data_unref(ed);
    if (log != nullptr) exif_log_unref(log);
    return Status::OutOfMemory(name + ": cannot create an EXIF reader");
  }
  LogState state;
  exif_log_set_func(log, LogHook, &state);
  exif_data_log(ed, log);
  // Read the tags as written: no "fixing", which would add default entries (a
  // FocalPlaneResolutionUnit the camera never wrote, say).
  exif_data_unset_option(ed, EXIF_DATA_OPTION_FOLLOW_SPECIFICATION);
  exif_data_load_data(ed, segment, static_cast<unsigned int>(segment_size));
  std::string why;
  PriorFromTags(ed, width, height, prior, &why);
  const bool any_focal_tag = FindEntry(ed, EXIF_TAG_FOCAL_LENGTH) != nullptr ||
                             FindEntry(ed, EXIF_TAG_FOCAL_LENGTH_IN_35MM_FILM) != nullptr;
  const bool has_exif_ifd = ed->ifd[EXIF_IFD_EXIF] != nullptr && ed->ifd[EXIF_IFD_EXIF]->count > 0;
  exif_data_unref(ed);
  exif_log_unref(log);
  // A TIFF without an EXIF IFD has no EXIF block; whatever libexif made of its image tags
  // is not ours to report.
  if (tiff && !has_exif_ifd && !prior->has_value()) {
    if (why_none != nullptr) *why_none = "no EXIF block";
    return Status::Ok();
  }
  if (!prior->has_value() && !any_focal_tag && !state.first_corrupt.empty()) {
    return Status::InvalidInput(name + ": corrupt EXIF block (" + std::to_string(segment_size) +
                                " bytes): " + state.first_corrupt);
  }
  if (!prior->has_value() && why_none != nullptr) *why_none = why;
  return Status::Ok();
}

Status ReadExifFocalPrior(const std::string& path, int width, int height,
                          std::optional<ExifFocalPrior>* prior, std::string* why_none) {
  prior->reset();
  FileBytes bytes;
  TIEPOINT_RETURN_IF_ERROR(ReadFileBytes(path, 1, &bytes));
  return DecodeExifFocalPrior(reinterpret_cast<const unsigned char*>(bytes.data.get()), bytes.size,
                              path, width, height, prior, why_none);
}

}  // namespace tiepoint
