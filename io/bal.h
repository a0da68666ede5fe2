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
// Files ending in ".bz2" are decompressed through libbz2 (no shell-out), over their
// blocks on all threads (io/bz2_parallel.h); concatenated bzip2 streams are read one
// after the other. Text is parsed on all threads (see BalReadOptions).
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
//   "<path>: is a directory, not a BAL file"                      (kIoError)
// On failure *scene is left unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <istream>
#include <string>

#include "io/base/status.h"
#include "io/scene.h"

namespace tiepoint {

// How BAL files are read.
struct BalReadOptions {
  // Threads for reading, bzip2 decoding and parsing; 0: all the process may use
  // (omp_get_max_threads(), which follows OMP_NUM_THREADS and the affinity mask).
  int num_threads = 0;
  // Bytes of text per parse chunk, each cut at the next line end; 0: automatic (the
  // text over 8 chunks per thread, within 64 KiB..4 MiB). Tests set a few bytes to put
  // chunk boundaries everywhere.
  size_t chunk_bytes = 0;
  // true: the input is held in memory whole (file bytes, or decoded bzip2 blocks) and
  // decoded and parsed on all threads; memory is the text (plus the compressed file for
  // .bz2) and the scene (a 1.7 GB text of 29M observations: about 1.7 + 0.8 GB).
  // false: the serial streaming reader (1 MiB at a time), the reference the parallel
  // path must equal; memory is the scene and a 1 MiB buffer. Text on one thread with
  // chunk_bytes 0 is read this way too (faster than the parallel path on one thread).
  bool parallel = true;
  // true: a ".bz2" of at least 4.5 MB per thread is decoded on the current CUDA device
  // (io/bz2_cuda.h; `tiepoint ba --device cuda` asks for it; smaller ones decode sooner
  // on the CPU). Where that declines (no GPU, too little GPU memory, a layout it does not
  // handle, corrupt data) the CPU decodes as without it, so the bytes and messages are
  // the same.
  bool bz2_on_gpu = false;

  // Explains options that make no sense (a negative thread count).
  Status Check() const;
};

// What a read did, for benchmarks and logs.
struct BalReadSummary {
  int threads = 1;             // threads the parallel path used
  bool parallel = false;       // true: the parallel path produced the scene
  std::string fallback_reason; // why the serial reader ran after the parallel path
                               // declined ("" if it did not run or was asked for)
  int64_t input_bytes = 0;     // bytes of the file or buffer (compressed for .bz2)
  int64_t text_bytes = 0;      // bytes of BAL text (decompressed); 0 where not known
  double read_seconds = 0;     // reading the file into memory
  double decompress_seconds = 0;  // parallel bzip2 decoding (0 for text)
  bool bz2_on_gpu = false;         // the GPU decoded the bzip2 data
  std::string gpu_decline_reason;  // why the GPU did not, where it was asked to
  double parse_seconds = 0;    // parsing (serial path: reading, decoding and parsing)
  double total_seconds = 0;
};

// Reads a BAL file; ".bz2" suffix selects bzip2 decompression. The result, and on
// failure the message, are the same whatever the options (parallel or serial, any
// thread count or chunk size). `summary` may be null.
Status ReadBal(const std::string& path, const BalReadOptions& options, Scene* scene,
               BalReadSummary* summary = nullptr);

// ReadBal with default options (parallel, all threads).
Status ReadBal(const std::string& path, Scene* scene);

// Reads BAL text from a stream (serially); `name` is used in error messages in place of
// a path.
Status ReadBal(std::istream& in, const std::string& name, Scene* scene);

// Reads a BAL file held in memory (`size` bytes at `data`, not owned, not modified);
// `name` stands in for the path in messages and, ending in ".bz2", selects bzip2.
Status ReadBalFromMemory(const char* data, size_t size, const std::string& name,
                         const BalReadOptions& options, Scene* scene,
                         BalReadSummary* summary = nullptr);
Status ReadBalFromMemory(const char* data, size_t size, const std::string& name, Scene* scene);

// Writes a BAL file (".bz2" suffix: bzip2-compressed) through a temporary file that is
// renamed into place only on success. Doubles are written with round-trip precision.
Status WriteBal(const std::string& path, const Scene& scene);

// Writes BAL text to a stream.
Status WriteBal(std::ostream& out, const Scene& scene);

}  // namespace tiepoint
