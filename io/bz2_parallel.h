// bzip2 decompression on all threads, over bzip2's independent blocks.
//
// A bzip2 file is one or more streams. A stream is "BZh" and a level digit '1'..'9'
// (blocks hold at most digit x 100,000 bytes before the Burrows-Wheeler transform), then
// its blocks, bit-packed with no byte alignment: each opens with the 48-bit magic
// 0x314159265359 ("pi") followed by that block's CRC; after the last block come the
// 48-bit end-of-stream magic 0x177245385090 ("sqrt pi"), the stream's combined CRC
// (for each block in order: combined = rotl(combined, 1) ^ block_crc) and zero bits up to
// a byte boundary. The next stream, if any, starts at that byte.
//
// A block decodes without its neighbours, but nothing records where blocks start, so,
// as lbzip2 and pbzip2 do:
//  1. FindBz2Magics scans for both magics at every bit offset (threads split the bytes).
//     Compressed data can hold the 48-bit pattern by chance (about once in 2^48 bit
//     offsets) or by design, so every match is only a candidate.
//  2. Each interval between consecutive candidates is copied, shifted to a byte boundary,
//     into a single-block stream of its own ("BZh" + the stream's digit + the block +
//     the end-of-stream magic + the block's CRC as combined CRC + padding) and decoded
//     with libbz2's BZ2_bzDecompress, intervals concurrently. libbz2 checks the block's
//     CRC against its decoded bytes.
//  3. One thread walks the streams in order from byte 0: a block starts where the
//     previous one ended; if its interval did not decode, the next candidate was a false
//     magic inside the block and the interval is merged with the following one (and so
//     on, a bounded number of times). Each stream's combined CRC is checked against the
//     block CRCs.
// Anything else (not bzip2, a stream header or end marker where none belongs, data after
// the last stream, a truncated or corrupt block, a false magic no merge resolves) makes
// TryDecompressBz2Parallel decline; the caller then decodes serially, which gives the
// authoritative bytes or error. So the parallel path returns exactly libbz2's bytes or
// nothing.
//
// Memory: the compressed input is read in place (not copied); each block's output is
// its own buffer (about digit x 100 KB for text) and the single-block stream copy is one
// per thread; libbz2 holds about digit x 400 KB per thread while decoding.
// Thread behaviour: the functions open their own OpenMP regions (num_threads clause; no
// global thread setting) and are safe to call from several threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/base/status.h"

namespace tiepoint {

struct Bz2ParallelOptions {
  // Threads for scanning and decoding; 0: all the process may use (omp_get_max_threads()).
  int num_threads = 0;
  // Merges tried for one block before giving up (each merge decodes the whole block
  // again): a guard against input full of planted magics, not a limit real files meet.
  int max_merges_per_block = 16;

  // Explains options that make no sense (negative counts).
  Status Check() const;
};

// A magic found by FindBz2Magics: the bit offset of its first bit (bit 0 is the most
// significant bit of byte 0) and which magic it is.
struct Bz2Magic {
  uint64_t bit = 0;
  bool end_of_stream = false;  // false: block magic 0x314159265359
};

// The decoded bytes as one buffer per block, in order; their concatenation is what
// libbz2 decodes from the input.
struct Bz2Decoded {
  std::vector<std::string> blocks;
  size_t size = 0;          // total bytes over blocks
  int streams = 0;          // bzip2 streams decoded
  int false_magics = 0;     // magic matches that turned out not to start a block
  std::string Concatenate() const;
};

// Every bit offset in data[0, size) where either 48-bit magic starts (the whole pattern
// inside the data), sorted by offset. num_threads <= 0: all threads.
std::vector<Bz2Magic> FindBz2Magics(const unsigned char* data, size_t size, int num_threads);

// The blocks of a file as its magics place them, assuming no false magic: block k is
// bits [begin, end) (end: the next magic) of a stream of level `level`.
struct Bz2BlockPlan {
  struct Block {
    uint64_t begin = 0;
    uint64_t end = 0;
    int level = 9;
    uint32_t crc = 0;  // the CRC stored in the block header
  };
  std::vector<Block> blocks;
  int streams = 0;
};

// Walks the streams of data[0, size) over `magics` (FindBz2Magics's), checking the stream
// headers, the order of magics and each stream's combined CRC against the stored block
// CRCs. False (and *why) where the layout is not that of a file without false magics.
bool PlanBz2Blocks(const unsigned char* data, size_t size, const std::vector<Bz2Magic>& magics,
                   Bz2BlockPlan* plan, std::string* why);

// Decodes data[0, size) over its blocks in parallel. True: *out holds the verified
// bytes. False: the input has something the parallel decoder does not handle or that
// does not verify; *out is cleared and *why (if given) says what, e.g. "block at bit
// 12345 does not decode"; decode serially for the authoritative result.
bool TryDecompressBz2Parallel(const char* data, size_t size, const Bz2ParallelOptions& options,
                              Bz2Decoded* out, std::string* why = nullptr);

// The same with the candidate magics given (normally FindBz2Magics's; tests add false
// ones to exercise the merging). `magics` must be sorted by bit offset.
bool TryDecompressBz2ParallelWithMagics(const char* data, size_t size,
                                        const std::vector<Bz2Magic>& magics,
                                        const Bz2ParallelOptions& options, Bz2Decoded* out,
                                        std::string* why = nullptr);

// Single-threaded libbz2 decoding of every concatenated stream (the reference, and the
// fallback of DecompressBz2). Errors name `name`: "<name>: not a bzip2 file (bad magic
// bytes)", "<name>: corrupt bzip2 data (checksum or format error)", "<name>: bzip2 data
// ends unexpectedly (the file is truncated)", "<name>: data after the end of bzip2
// stream <n> is not bzip2 (trailing garbage)".
Status DecompressBz2Serial(const char* data, size_t size, const std::string& name,
                           std::string* out);

// The first min(want, all) decoded bytes (libbz2 on the calling thread: it decodes the
// first block, tens of ms). False where those do not decode.
bool DecompressBz2Prefix(const char* data, size_t size, size_t want, std::string* out);

// TryDecompressBz2Parallel, and DecompressBz2Serial (one block holding everything) when
// it declines. Errors as DecompressBz2Serial's.
Status DecompressBz2(const char* data, size_t size, const std::string& name,
                     const Bz2ParallelOptions& options, Bz2Decoded* out);

}  // namespace tiepoint
