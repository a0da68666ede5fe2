// The focal length prior of a photo, from the EXIF block of a JPEG or a TIFF (libexif).
//
// What `tiepoint reconstruct` uses as a camera's initial focal length when no
// --intrinsics are given: COLMAP's order of preference, in pixels of the image as stored
// (width x height, no EXIF orientation applied; the decoder does not apply it either):
//  1. FocalLengthIn35mmFilm f35 (mm):  f_px = f35 / 36 mm * max(width, height).
//     The 35 mm frame is 36 x 24 mm; COLMAP divides by 35, which is 2.8% longer.
//  2. FocalLength f (mm) with FocalPlaneXResolution r (pixels per unit, on the sensor) and
//     FocalPlaneResolutionUnit (2 inch, the EXIF default when absent; 3 cm; 4 mm and 5 um as
//     some cameras write): f_px = f * r / (unit in mm), scaled by width / PixelXDimension
//     when PixelXDimension is present (the image was resized after the EXIF was written).
//     (COLMAP first looks the sensor width up in its camera database; tiepoint has none.)
//  3. otherwise no prior: the caller keeps its default, 1.2 max(width, height).
// A value that is not finite or positive, or outside [kMinFocalFactor, kMaxFocalFactor] x
// max(width, height) (a 35 mm equivalent of 3.6 mm to 360 mm), is no prior either; the
// reason is said in *why_none so the caller can report it.
//
// JPEG files carry the block read here in the first APP1 segment that starts with
// "Exif\0\0", found by walking the markers before the first scan; a classic TIFF file is
// itself that block's structure (its IFD0 points to the EXIF IFD; a TIFF without one has
// "no EXIF block"). PNG, PGM, PPM and BigTIFF files have no prior (Ok, nullopt). Malformed input never crashes: marker segments that
// run past the end of the file, an APP1 too short for its header, or an EXIF block that
// libexif reports corrupt and that holds no focal tags give kInvalidInput naming the file
// and what is wrong; an unreadable path gives kIoError. Focal tags that libexif could read
// from a block with corrupt parts elsewhere (maker notes, say) are used, as COLMAP would.
//
// Thread safety: reentrant (libexif objects are created per call).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "io/base/status.h"

namespace tiepoint {

// The accepted range of a prior, as multiples of max(width, height).
constexpr double kMinFocalFactor = 0.1;
constexpr double kMaxFocalFactor = 10.0;
// FocalLength + FocalPlaneXResolution give no prior when they imply a sensor narrower than
// this (a photo resized after its EXIF was written).
constexpr double kMinSensorWidthMm = 4.0;

struct ExifFocalPrior {
  double focal_px = 0;  // the prior, in pixels of the width x height image
  // Which tags gave it: "FocalLengthIn35mmFilm" or "FocalLength+FocalPlaneXResolution".
  std::string source;
  // The tags as read (0 when absent), for the report.
  double focal_length_mm = 0;
  double focal_length_35mm = 0;
};

// Reads `path` and computes the prior for an image of width x height pixels (both > 0).
// Ok with *prior = nullopt when there is none; *why_none (if given) then says why ("no
// EXIF block", "no focal length tags", or the rejected value); it is cleared otherwise.
Status ReadExifFocalPrior(const std::string& path, int width, int height,
                          std::optional<ExifFocalPrior>* prior, std::string* why_none = nullptr);

// The same for a file held in memory; `name` stands in for the path in messages.
Status DecodeExifFocalPrior(const unsigned char* data, size_t size, const std::string& name,
                            int width, int height, std::optional<ExifFocalPrior>* prior,
                            std::string* why_none = nullptr);

}  // namespace tiepoint
