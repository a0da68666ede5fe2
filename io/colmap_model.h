// COLMAP's sparse model (cameras, images, points3D) in its text and binary formats, each record
// written byte for byte as COLMAP 3.8 writes it, and read back with every field checked.
// Checked against the real `colmap` 3.8: model_converter and model_analyzer read both formats
// and report the same counts and mean error; a model written by COLMAP reads here and writes
// back with identical records (COLMAP's own writer renormalizes quaternions, changing the
// last digit of some).
//
// Text (cameras.txt, images.txt, points3D.txt): COLMAP's '#' header lines, then
//   cameras.txt   CAMERA_ID MODEL WIDTH HEIGHT PARAMS[]
//   images.txt    IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME
//                 X Y POINT3D_ID ... (the next line, always; empty for no points2D; -1 for
//                 a point2D without a 3D point)
//   points3D.txt  POINT3D_ID X Y Z R G B ERROR IMAGE_ID POINT2D_IDX ...
// Reals with 17 significant digits (printf "%.17g", as COLMAP's precision(17)), so every
// double reads back exactly; lines end in '\n'.
//
// Binary (cameras.bin, images.bin, points3D.bin), little-endian, no padding:
//   cameras.bin   uint64 count; per camera: uint32 id, int32 model id, uint64 width,
//                 uint64 height, double params[NumParams(model)]
//   images.bin    uint64 count; per image: uint32 id, double qw qx qy qz, double tx ty tz,
//                 uint32 camera_id, name bytes + NUL, uint64 num_points2D, then per point2D
//                 double x, double y, uint64 point3D_id (2^64 - 1 for none)
//   points3D.bin  uint64 count; per point: uint64 id, double x y z, uint8 r g b,
//                 double error, uint64 track length, then (uint32 image_id,
//                 uint32 point2D_idx) per element
//
// Records are written in increasing id order (the maps' order); COLMAP writes them in the order
// of its hash maps, so whole files compare equal only after sorting records. Quaternions
// are written unit: one whose squared norm is off 1 by more than 1e-12 is divided by its norm
// (COLMAP normalizes too), others are written as they are, so text -> binary -> text is
// byte-identical. The readers apply the same rule to what they read.
//
// A consistent model (checked by the writer and by the reader):
//  - every camera: a supported model, the model's parameter count, finite parameters,
//    focal length(s) > 0, width and height in [1, 2^31 - 1];
//  - every image: a camera that exists, a finite non-zero quaternion, a finite translation,
//    finite points2D, a non-empty name that is unique, holds no line break, tab or NUL and
//    does not begin or end with a space (names with inner spaces are written, but COLMAP
//    3.8's text reader keeps only the part before the first space);
//  - every point3D: id != 2^64 - 1, finite xyz and error, a track whose elements name an
//    existing image and a point2D index inside it, no element twice in any track, and that
//    point2D names this point back;
//  - every point2D with a point3D_id: that point exists and its track holds the point2D.
// Tracks may hold several elements of one image (COLMAP allows it).
#pragma once

#include <cstddef>
#include <istream>
#include <ostream>
#include <string>

#include "io/base/status.h"
#include "io/reconstruction.h"

namespace tiepoint {

enum class ColmapFormat { kText, kBinary };

// "text", "binary".
const char* ToString(ColmapFormat format);
// Accepts "text" and "binary"; kInvalidOptions otherwise.
Status ColmapFormatFromString(const std::string& name, ColmapFormat* format);

// The consistency rules above; kInvalidInput naming the camera, image or point and what is
// wrong.
Status CheckColmapModel(const Reconstruction& reconstruction);

// Writes dir/cameras.{txt|bin}, dir/images.{txt|bin}, dir/points3D.{txt|bin}, creating dir
// (and its parents) when missing. The model is checked first (CheckColmapModel) and nothing
// is written when it fails. Each file goes through a temporary renamed into place
// (AtomicFile), so none is ever half-written; a failure after the first file is renamed
// can leave some files new and others old (write into a fresh directory and rename it for
// an all-or-nothing model). kIoError when dir cannot be made or a file written.
Status WriteColmapModel(const std::string& dir, const Reconstruction& reconstruction,
                        ColmapFormat format);

// Reads the model in dir: the binary files when all three *.bin exist, else the text files
// (COLMAP's rule), else kIoError saying which files are missing.
Status ReadColmapModel(const std::string& dir, Reconstruction* reconstruction);
// Reads the named format only.
Status ReadColmapModel(const std::string& dir, ColmapFormat format, Reconstruction* reconstruction);

// Stream-level forms (tests, string streams). Writers check the model first, as above,
// and write nothing when it fails; kIoError when a stream fails.
Status WriteColmapModelText(const Reconstruction& reconstruction, std::ostream& cameras,
                            std::ostream& images, std::ostream& points3D);
Status WriteColmapModelBinary(const Reconstruction& reconstruction, std::ostream& cameras,
                              std::ostream& images, std::ostream& points3D);

// Readers: `dir` only names the files in messages ("<dir>/images.txt:12: ..."); binary
// messages name the file, the byte offset, the record and the field. On error
// *reconstruction is left empty. Text errors (kInvalidInput): a line with too few or too
// many fields, a number that does not parse or is not finite, an unknown or unsupported
// camera model, a wrong parameter count, a duplicate id or name, a missing POINTS2D line,
// a count in a "# Number of ...:" header line that disagrees with the records; binary
// errors add: a file shorter than its counts say (checked before anything is allocated for
// them), bytes after the last record, a name without its NUL. Then the cross-references
// (kInvalidInput, naming the file and line or record): an image's camera, a track's image and
// point2D index, a point2D's point3D and the track that must hold it back.
Status ReadColmapModelText(std::istream& cameras, std::istream& images, std::istream& points3D,
                           const std::string& dir, Reconstruction* reconstruction);
Status ReadColmapModelBinary(std::istream& cameras, std::istream& images, std::istream& points3D,
                             const std::string& dir, Reconstruction* reconstruction);

}  // namespace tiepoint
