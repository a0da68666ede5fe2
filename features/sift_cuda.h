// SIFT on an NVIDIA GPU: the algorithm of features/sift.h, computed with the CPU
// reference's arithmetic (same Gaussian taps, same mirrored borders, same order of float
// additions in the blurs, no fused multiply-adds, refinement in double), so that the two
// agree to rounding: in tests >= 99% of keypoints within 0.05 px of the CPU's, descriptors
// within 1 of 255 per element (tests/features/sift_cuda_test.cc).
//
// Kernels (features/sift_cuda.cu), per image:
//  - one fused kernel per Gaussian level: an output tile (32 x 64) and its halo are read
//    once into shared memory (all of a thread's loads in flight together), blurred along
//    rows there, then along columns (radius as a template parameter, so the tap loops
//    unroll; each thread computes 4 outputs of a row and 8 of a column from a window of
//    registers), and L_i and D_{i-1} = L_i - L_{i-1} are written; the row-blurred
//    intermediate never reaches global memory. Gradient magnitude and angle of L_1..L_S are
//    kept for orientation and descriptors, with each plane's largest magnitude; the next
//    octave's base is L_S at even pixels.
//  - extremum detection over D_1..D_S of an octave appends candidates to a queue through
//    an atomic counter; refinement (double precision, one thread per queued candidate, so
//    no warp waits on pixels that are not extrema) runs once over the queue of all octaves
//    and appends the accepted detections to a second queue.
//  - the host sorts the refined detections by (octave, layer, row, column) (packed 64-bit
//    keys), which fixes the output order whatever order the atomics produced, and drops
//    duplicates as the CPU does; orientation runs one block per detection, descriptors one
//    block per keypoint (the max_features strongest picked in linear time). Each block's
//    threads read its window's gradients in a scattered order and vote into one histogram
//    with 32-bit shared-memory atomics on fixed-point votes (a power-of-two unit per
//    keypoint, from the window's size and the plane's largest magnitude, so that no bin
//    can overflow): integer sums do not depend on the order of the additions, so the
//    output is deterministic (the same image gives the same bytes in the same order every
//    run) although all threads of a block vote at once. The unit (about 2^-19 of the
//    plane's largest magnitude on 1080p images) rounds a few percent of the descriptor
//    bytes one step away from the CPU's.
//  - the pyramid's kernels (about 55 for a 1080p image) are captured once per image size
//    into a CUDA graph and replayed with one launch per image.
// Workspace: the extractor owns, per stream, device buffers for one image's pyramid and
// pinned host staging buffers; they grow to the largest image seen and are reused for
// every later image (no allocation per image once warm). The extractor is owned by the
// caller (FeatureExtractor::Create), so the workspace lives as long as the caller keeps it.
//
// Streams: ExtractBatch runs options.cuda_streams host threads, each with its own CUDA
// stream and workspace, taking images in index order from a shared counter: while one
// image uploads (pinned memory, cudaMemcpyAsync), the kernels of others run. Each image
// waits for the GPU three times (detections with their count, orientations, descriptors),
// on blocking-sync events: a waiting thread sleeps and leaves its core to the others'
// host work. Extract() uses stream 0 from the calling thread. With more streams than the
// driver's hardware queues (CUDA_DEVICE_MAX_CONNECTIONS, default 8), streams share a
// queue; setting it to 32 in the environment measured 3-10% faster with 16-24 streams of
// in-memory images (bench/sift_bench). Through `tiepoint extract`, whose decoding pool
// runs beside the streams' threads, 12 streams on CUDA's 8 queues measured best, and the
// command leaves the variable unset (cli/main.cc).
//
// Errors: kUnavailable when the build has no CUDA or no GPU is usable (the message names
// --device cpu); kOutOfMemory naming the bytes when an image's workspace does not fit in
// GPU memory; kInvalidOptions when sigma and octave_layers need a blur wider than
// kSiftCudaMaxBlurRadius.
#pragma once

#include <memory>

#include "features/sift.h"
#include "io/base/status.h"

namespace tiepoint {

// Largest Gaussian kernel radius (ceil(4 sigma_increment)) the fused shared-memory blur
// takes: a (32 + 2r)^2 tile plus its row pass fit in 49.5 KiB of shared memory.
// The default options need 13.
constexpr int kSiftCudaMaxBlurRadius = 32;

// Creates the CUDA extractor (options already checked by FeatureExtractor::Create).
Status CreateCudaSiftExtractor(const SiftOptions& options,
                               std::unique_ptr<FeatureExtractor>* extractor);

}  // namespace tiepoint
