// Reading and writing BAL ("Bundle Adjustment in the Large") problem files.
//
// Format (text, whitespace separated, blank lines allowed between sections):
//   <num_cameras> <num_points> <num_observations>
//   <camera_index> <point_index> <x> <y>            (num_observations lines)
//   <camera parameter>                              (9 * num_cameras values)
//   <point coordinate>                              (3 * num_points values)
// The header's three numbers and each observation's four values must share a line;
// parameters may be laid out freely. Indices must be integers in range; every value must
// be finite. A camera without observations is accepted (degenerate but legal).
// Files ending in ".bz2" are stream-decompressed through libbz2 (no shell-out);
// concatenated bzip2 streams are read one after the other.
//
// Errors name the file and the line and say what was expected: empty file,
// malformed header, counts that disagree with the content, out-of-range indices,
// NaN/Inf values, truncation, trailing garbage, absurd header sizes (rejected
// before any allocation: beyond the limits, or, for a plain file or memory, needing over
// 4 times the bytes the input has; storage grows with the data actually read), unreadable path.
// Message shapes (the status code is kInvalidInput unless noted):
//   "<name>:<line>: expected <what>, found '<token>'[ (hint)]"
//   "<name>:<line>: expected <what>, file ends after <count>"   (line of the last token)
//   "<name>: corrupt bzip2 data ..." / "<name>: not a bzip2 file ..." (no line)
//   "<path>: cannot open for reading (<strerror>)"                (kIoError)
// On failure *scene is left unchanged.
#pragma once

#include <cstddef>
#include <istream>
#include <string>

#include "io/base/status.h"
#include "io/scene.h"

namespace tiepoint {

// Reads a BAL file; ".bz2" suffix selects bzip2 decompression.
Status ReadBal(const std::string& path, Scene* scene);

// Reads BAL text from a stream; `name` is used in error messages in place of a path.
Status ReadBal(std::istream& in, const std::string& name, Scene* scene);

// Reads a BAL file held in memory (`size` bytes at `data`, not owned, not modified);
// `name` stands in for the path in messages and, ending in ".bz2", selects bzip2.
Status ReadBalFromMemory(const char* data, size_t size, const std::string& name, Scene* scene);

// Writes a BAL file (".bz2" suffix: bzip2-compressed) through a temporary file that is
// renamed into place only on success. Doubles are written with round-trip precision.
Status WriteBal(const std::string& path, const Scene& scene);

// Writes BAL text to a stream.
Status WriteBal(std::ostream& out, const Scene& scene);

}  // namespace tiepoint
