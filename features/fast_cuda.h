// The CUDA backend of FastLkFrontEnd (features/frontend.h): image pyramids built on the
// device, the FAST segment test, grid and plain suppression (features/fast_cuda.cu) and the
// LK tracker (features/lk_cuda.cu), giving the corners of the CPU reference bit for bit and
// LK positions within 0.01 px of it.
//
// Kernels, per frame: one launch per pyramid level (5x5 binomial, integer, as pyramid.h).
// Grid suppression: ONE launch for the segment test, score and suppression of all searched
// levels: a block per cell scores the cell's pixels of each level and a 1-pixel ring into
// shared memory (a thread per pixel, the 8 KiB table read through the read-only cache);
// each warp then takes 32-pixel cell rows (a lane per column), checks each corner's 3x3
// neighbourhood and keeps its column's best in registers over the rows and levels; the
// warp's best comes out of a butterfly of shuffles and the warps of a block combine
// through shared memory. Plain suppression (and DetectRaw): one launch scoring every pixel
// of all levels into float score maps, then a thread per pixel, survivors appended through
// an atomic counter and sorted on the host.
// LK: a warp per feature, each lane holding 8 (16x16) or 2 (8x8) template pixels in
// registers; the sums come out of butterfly (xor) shuffle reductions, so every lane solves
// the same 4x4 system; the backward pass runs in the same warp.
//
// Device memory lives in RAII buffers; every CUDA call goes through
// TIEPOINT_CUDA_RETURN_IF_ERROR. Each frontend owns one stream; methods return when their
// results are on the host.
#pragma once

#include <memory>
#include <vector>

#include "features/frontend.h"

namespace tiepoint {

// kUnavailable when this build has no CUDA or no GPU is usable (the message names
// --device cpu).
Status CreateCudaFrontEnd(const FrontEndOptions& options, std::unique_ptr<FastLkFrontEnd>* frontend);

// Times of the device work of one frame, measured with CUDA events (for the benchmark).
struct CudaFrontEndTimes {
  double upload_us = 0;       // host -> device copy of the 8-bit frame (pinned)
  double pyramid_us = 0;      // pyramid kernels
  double detect_us = 0;       // segment test + suppression kernels
  double download_us = 0;     // corners back to the host
  double track_us = 0;        // the last Track's LK kernel (forward + backward)
};

// The last SetFrame, Detect and Track's times of a CUDA frontend; kInvalidOptions for a CPU one.
Status LastCudaFrontEndTimes(FastLkFrontEnd* frontend, CudaFrontEndTimes* times);

// Device time of the detection of the frame in `slot` (grid suppression), for the
// benchmark. Each timed region is queued behind a ~100 us spin kernel, so that its CUDA
// events see device time only (the kernels and the gaps between them, no host launch
// latency). busy: the spin kernel occupies every SM, so the GPU counts as busy and runs at
// the clocks of sustained work; false: one spinning thread, the GPU nearly idle between
// regions (its clocks may stay low, as for a frame now and then). Medians over `reps`.
struct CudaDetectTiming {
  double fast_nms_us = 0;          // the fused FAST + grid suppression kernel of one frame
  double pyramid_fast_nms_us = 0;  // pyramid kernels + that kernel, one frame
  double batch_frame_us = 0;       // per frame, `batch` frames of the same work back to back
                                   // (one CUDA graph; median of 5 replays)
  double sm_mhz = 0;               // SM clock counted by the last spin kernel
};
Status TimeCudaDetect(FastLkFrontEnd* frontend, int slot, int reps, int batch, bool busy,
                      CudaDetectTiming* timing);

// Device time of the LK kernel tracking `points` from slot `from` to `to` (no guesses;
// forward + backward when options.lk.fb_threshold > 0), measured as TimeCudaDetect.
Status TimeCudaTrack(FastLkFrontEnd* frontend, int from, int to, const std::vector<Point2f>& points,
                     int reps, bool busy, double* kernel_us, double* sm_mhz);

}  // namespace tiepoint
