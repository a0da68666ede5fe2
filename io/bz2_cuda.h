// bzip2 decoding on the GPU: every block of the file at once, in the stages of
// io/bz2_block.h (Huffman and move-to-front one thread per block, the inverse
// Burrows-Wheeler vector one warp per block, its walk cut into segments that run
// concurrently); the first run-length stage and the CRC on the host's threads, as the
// walked bytes arrive. Same contract as TryDecompressBz2Parallel
// (io/bz2_parallel.h): the verified bytes (every block CRC and every stream's combined
// CRC checked), or a decline saying why, after which the caller decodes with libbz2 for
// the authoritative bytes or message. It declines what it does not handle: a false magic
// inside a block, bzip2 0.9.0's randomised blocks, no GPU, too little GPU memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/bz2_parallel.h"

namespace tiepoint {

// The GPU's algorithm run on the CPU, one block after the other, `segments` walk segments
// per block (tests compare it with libbz2; no speed intended).
bool DecompressBz2StagedOnCpu(const char* data, size_t size, int segments, Bz2Decoded* out,
                              std::string* why);

// Options of the GPU decoder.
struct Bz2CudaOptions {
  int num_threads = 0;     // host threads (magic scan, copies); 0: all
  int segments = 1024;     // walk segments per block
  // Device memory the blocks in flight may take; 0: half the free memory.
  size_t memory_bytes = 0;
};

// What TryDecompressBz2Cuda measured (for benchmarks and TIEPOINT_TIMING).
struct Bz2CudaTiming {
  double scan_seconds = 0;      // magic scan and plan (host)
  double presize_seconds = 0;   // host blocks sized (first touch), before the context
  double context_seconds = 0;   // the first CUDA call (waits for the context)
  double upload_seconds = 0;    // compressed bytes to the device
  double allocate_seconds = 0;  // device memory for the blocks
  double kernels_seconds = 0;   // stages 1-3 on the device
  double download_seconds = 0;  // walked bytes to the host, and stage 4 there
  int batches = 0;
  // With TIEPOINT_TIMING: ms per kernel, summed over batches (decode, scatter, complete,
  // walk 1, chain, walk 2).
  std::vector<double> stage_ms;
};

// Decodes on the current CUDA device. The result is one buffer per bzip2 block.
bool TryDecompressBz2Cuda(const char* data, size_t size, const Bz2CudaOptions& options,
                          Bz2Decoded* out, std::string* why = nullptr,
                          Bz2CudaTiming* timing = nullptr);

// Host helpers of the GPU decoder, in a .cc so that they use OpenMP (nvcc builds none).
namespace bz2_detail {
int Threads(int requested);
// bzip2's block CRC of p[0, n).
uint32_t Bz2Crc(const uint8_t* p, size_t n);
// Stage 4 of io/bz2_block.h: bzip2's first run-length stage undone over the n walked
// bytes b into *out, and the CRC checked (libbz2's unRLE_obuf_to_output_FAST): kOk,
// kBadRuns or kCrcMismatch.
int32_t UndoInitialRuns(const uint8_t* b, int32_t n, uint32_t stored_crc, std::string* out);
// The buffer UndoInitialRuns sizes its output to first for n walked bytes.
inline size_t RunsCapacity(int32_t n) {
  return static_cast<size_t>(n) + static_cast<size_t>(n) / 8 + 64;
}
// (*blocks)[first + i].resize(bytes) for i < count on `threads` threads (first touch
// spread over them).
void ResizeBlocks(std::vector<std::string>* blocks, size_t first, int count, size_t bytes,
                  int threads);
// UndoInitialRuns for blocks[i] from walked + i * slot (n[i] bytes, CRC crcs[i]) on
// `threads` threads; the first error (and *failed its block index), or kOk.
int32_t UndoBlocks(const uint8_t* walked, size_t slot, const int32_t* n, const int32_t* crcs,
                   int count, int threads, std::string* blocks, int* failed);
}  // namespace bz2_detail

}  // namespace tiepoint
