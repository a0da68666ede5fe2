// SIFT keypoints and descriptors (Lowe, "Distinctive Image Features from Scale-Invariant
// Keypoints", IJCV 60(2), 2004), behind a FeatureExtractor interface with a CPU reference
// implementation; the CUDA implementation will plug into the same factory.
//
// What the CPU extractor computes, in the coordinates of io/image.h (pixel (0,0) is the
// centre of the top-left pixel, x right, y down):
//  1. Scale space. The input is assumed to carry a blur of 0.5 px. With `upsample`, the
//     first octave is the image upsampled 2x by bilinear interpolation, sized (2w-1) x
//     (2h-1) so that upsampled pixel 2i lies exactly on original pixel i (its blur is
//     then 1.0 of its pixels). The octave base is blurred to `sigma`; each octave holds
//     S+3 Gaussian images L_i of blur sigma_i = sigma 2^(i/S) (S = octave_layers),
//     made incrementally by separable Gaussian blurs of sqrt(sigma_i^2 - sigma_{i-1}^2)
//     (kernel radius ceil(4 sigma), mirrored borders). The next octave's base is L_S
//     subsampled at even pixels, so octave pixel (i, j) sits on pixel (2i, 2j) of the
//     octave before. Octaves are added while both sides stay >= kSiftMinOctaveSide.
//  2. D_i = L_{i+1} - L_i (S+2 per octave). Candidates are extrema of their 26
//     neighbours in D_1..D_S with |D| > 0.5 contrast_threshold / S, at least
//     kSiftBorder pixels from the octave's edge; a tie is broken in (layer, y, x) order
//     (strictly beyond earlier neighbours, at least equal to later ones), so of two
//     equal samples exactly one is a candidate.
//  3. Refinement: a quadratic (second-order Taylor) fit of D in (x, y, layer) with
//     finite differences, offset = -H^-1 g; while any |offset| component > 0.5 the
//     sample moves to the neighbour (at most 5 moves, staying inside the border), else
//     the candidate is dropped. Two departures from Lowe, both accepting a fit whose
//     offsets stay below 1 where his rule drops the candidate: a move past layer 1 or
//     S is not taken (this closes gaps in scale coverage at octave boundaries), and a
//     move straight back to the previous sample ends the search (an extremum half-way
//     between two samples, where the fit overshoots 0.5 from both). Rejected when the
//     interpolated |D(offset)| < contrast_threshold / S (images in [0, 1]) or when the spatial
//     Hessian has tr^2 / det >= (r+1)^2 / r with r = edge_threshold (or det <= 0).
//     Candidates refined onto the same sample are kept once.
//  4. Orientation: on L at the refined layer, gradients by central differences (the
//     angle by a polynomial atan2, within 4e-7 rad of the exact one), magnitudes weighted
//     by a Gaussian of 1.5 sigma_L (window radius 3 x 1.5 sigma_L, circular) vote with
//     linear interpolation into 36 bins; the histogram is smoothed with [1 4 6 4 1]/16
//     (circular); every local peak >= 80% of the highest gives a keypoint, its angle
//     refined by a parabola through the peak and its neighbours.
//  5. Descriptor: 4 x 4 spatial bins of 3 sigma_L pixels each, 8 orientation bins,
//     over the window rotated to the keypoint's orientation; each gradient (angle
//     relative to the keypoint's) is weighted by a Gaussian of sigma = half the window
//     width (2 bins) and spread by trilinear interpolation over the neighbouring
//     (row, column, orientation) bins. Element index (row * 4 + column) * 8 + bin, rows
//     along the keypoint's "down" axis (its direction turned +90 degrees), columns along
//     its direction. The vector is L2-normalised, clipped at 0.2, renormalised; with
//     root_sift it is then L1-normalised and square-rooted (Arandjelovic & Zisserman
//     2012). Quantised as min(255, round(512 v)).
// sigma_L = sigma 2^((layer + layer_offset) / S) in octave pixels is Lowe's scale: the
// blur of the lower Gaussian of the DoG. The reported Keypoint::scale is the blob's
// characteristic scale instead, sigma_L 2^(1/(2S)) (x 1.122 for S = 3): for a Gaussian
// blob of sigma b the DoG response peaks at sigma_L = b / 2^(1/(2S)), so scale == b.
// Octave o reports x_image = x_octave 2^o / (upsample ? 2 : 1), and the same for y and
// scale. Orientation: radians in [0, 2 pi), atan2(dy, dx) with y down.
//
// With max_features > 0 only the max_features keypoints with the largest interpolated
// |D| are kept (ties: the earlier in output order), before descriptors are computed.
// Output order: octave, then DoG layer, then the extremum's integer row and column,
// then orientation in histogram-peak order. The output is identical for every thread
// count (OpenMP over image rows and over keypoints, results written to fixed slots).
//
// Memory: an extractor keeps its workspace between images (it only grows, so a run of
// images of one size allocates once): the input, the S+3 Gaussian and S+2 DoG images of
// the first octave (reused by the later ones) and the gradients (magnitude, angle) of
// layers 1..S of every octave, kept until the descriptors are done and computed only on
// the rows and columns the keypoints' windows cover (pages elsewhere are never touched):
// at most 4 (2S + 6 + 2S x 4/3) bytes per pixel of the first octave, 80 for S = 3.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "io/base/device.h"
#include "io/base/status.h"
#include "io/features.h"
#include "io/image.h"

namespace tiepoint {

// Octaves stop when a side would drop below this many pixels.
constexpr int kSiftMinOctaveSide = 16;
// Extrema closer than this to an octave's edge are not considered: room for the 3x3x3
// neighbourhood and the refinement's moves.
constexpr int kSiftBorder = 5;

struct SiftOptions {
  // Keep at most this many keypoints, the strongest by interpolated |DoG|; 0 keeps all.
  int max_features = 0;
  // Start the first octave from the image upsampled 2x (finds ~4x more small features,
  // costs ~4x more time).
  bool upsample = false;
  // Root-SIFT descriptors (L1 normalise, square root) instead of Lowe's.
  bool root_sift = false;
  // DoG layers searched per octave (S); the octave holds S + 3 Gaussian images.
  int octave_layers = 3;
  // Blur of each octave's base image, in that octave's pixels.
  double sigma = 1.6;
  // Minimum |DoG| at the refined extremum, times S (for images in [0, 1]): candidates
  // with |D| < contrast_threshold / S are dropped.
  double contrast_threshold = 0.04;
  // CPU only. With min_features > 0, an image that gives fewer keypoints keeps those of
  // contrast_threshold / 2, / 4, ..., down to min_contrast_threshold: the first that gives
  // min_features (Features::contrast_threshold says which). One pass: detection runs at the
  // lowest, and each threshold keeps exactly the keypoints a run at it finds.
  int min_features = 0;
  double min_contrast_threshold = 0.01;
  // CPU only. With fallback_min_features > 0 (and min_features > 0), an image that gives
  // fewer than min_features at every threshold above min_contrast_threshold (it would keep
  // those of min_contrast_threshold, the lowest) keeps instead the keypoints of the first of
  // min_contrast_threshold, / 2, / 4, ..., down to fallback_min_contrast_threshold, that
  // gives fallback_min_features (or those of the lowest): what a run with min_features =
  // fallback_min_features and min_contrast_threshold = fallback_min_contrast_threshold
  // gives such an image, from the same pass (detection then runs down to
  // fallback_min_contrast_threshold). Other images keep what they have without it.
  int fallback_min_features = 0;
  double fallback_min_contrast_threshold = 0.0025;
  // Maximum ratio r of the principal curvatures of D (edge rejection): keypoints with
  // tr(H)^2 / det(H) >= (r + 1)^2 / r are dropped.
  double edge_threshold = 10.0;
  // OpenMP threads; 0 uses omp_get_max_threads(). Never changes the output.
  int num_threads = 0;
  // CUDA only: images of a batch in flight at once, each with its own stream, host
  // thread, device workspace (about 90 bytes per pixel of the first octave) and pinned
  // staging buffers (ExtractBatch). Never changes the output. Measured on an H100, 100
  // images of 1920 x 1080, median of 10 batches: 2,091 images/s with 16, 2,352 with 24,
  // 2,438 with 32 (bench/results/sift-h100-20261124.json). 8 keeps the workspaces small
  // for smaller GPUs. Through `tiepoint extract` (decoding on every core beside these
  // threads) 12 measured best on a 16-core H200 host: 4,400 1080p JPEGs in 4.0-4.5 s against
  // 4.6-4.8 s with 8 and 4.5-4.8 s with 16 (bench/results/extract-throughput-h200-20261126.json);
  // the command defaults to 12.
  int cuda_streams = 8;

  // Explains the first option out of range, naming the field.
  Status Check() const;
};

// The scale space of step 1 above, which both backends build (the CUDA extractor must
// match the CPU reference): the first octave's size (the image's, or 2w-1 x 2h-1 with
// `upsample`), the number of octaves, and the Gaussian blurs in octave pixels:
// blurs[0] takes the input (blurred 0.5 px, 1.0 px upsampled) to `sigma`, blurs[i]
// (i = 1 .. S+2) takes L_{i-1} to L_i. num_octaves is 0 for an image too small for one.
struct SiftScaleSpacePlan {
  int base_width = 0;
  int base_height = 0;
  int num_octaves = 0;
  std::vector<double> blurs;
};
SiftScaleSpacePlan PlanSiftScaleSpace(const SiftOptions& options, int width, int height);

// Detects keypoints and computes their descriptors for one image.
// Thread safety: an extractor may be used from one thread at a time; it parallelises
// internally with num_threads.
class FeatureExtractor {
 public:
  virtual ~FeatureExtractor() = default;

  // Replaces *features with the keypoints and descriptors of `image` (kSiftDescriptorDim
  // bytes per keypoint). kInvalidInput when the image's pixel count disagrees with its
  // size. An image too small for one octave gives no features (not an error).
  virtual Status Extract(const GrayImage& image, Features* features) = 0;

  // Extract() for each image; (*statuses)[i] is image i's outcome and (*features)[i] its
  // features (empty on failure), so a batch goes on past a bad image. The CPU extractor
  // runs up to num_threads images at once, each on a worker of its own with its own
  // workspace (workers together within 4 GiB of workspace; threads left over when there
  // are fewer workers than threads go to each worker's rows); the CUDA extractor keeps
  // cuda_streams images in flight (upload of one overlapping the kernels of others). The
  // features of an image never depend on the batch it is in.
  virtual void ExtractBatch(const std::vector<const GrayImage*>& images,
                            std::vector<Features>* features, std::vector<Status>* statuses);

  // ExtractBatch for a pipeline that decodes while it extracts, over images 0..count-1:
  // next(i) blocks until image i is ready and returns it (null: skip image i), and
  // done(i, features, status) takes each result as soon as it is ready, in any order and
  // possibly from several threads at once (both must be thread-safe; next is called in
  // index order). The CUDA extractor keeps cuda_streams images in flight with no barrier
  // between images; the default takes `group` images at a time through ExtractBatch. The
  // features of an image never depend on how it was run.
  using NextImage = std::function<const GrayImage*(int)>;
  using ImageDone = std::function<void(int, Features&&, Status&&)>;
  virtual void ExtractStream(int count, int group, const NextImage& next, const ImageDone& done);

  // The same extractor at another contrast threshold: what follows extracts as one made by
  // Create with options.contrast_threshold = contrast_threshold would, keeping what this one
  // has set up (the CUDA extractor's streams and its device and pinned buffers, whose
  // set-up took most of a small image's time when each threshold got an extractor of its
  // own). kInvalidOptions, with nothing changed, where Create would refuse the options.
  virtual Status SetContrastThreshold(double contrast_threshold) = 0;

  // The one place a backend is chosen: kCpu is the reference implementation; kCuda is
  // the CUDA extractor of features/sift_cuda.h, kUnavailable with a message naming
  // --device cpu when this build has no CUDA or no GPU can be used. Checks the options
  // first.
  static Status Create(const SiftOptions& options, Device device,
                       std::unique_ptr<FeatureExtractor>* extractor);
};

// SiftOptions::min_features and fallback_min_features (as `rule` sets them) for an
// extractor that holds one contrast threshold, the CUDA one (the CPU extractor applies
// them in its one pass; this gives what that pass gives, but counts the features kept
// after max_features where the pass counts them before): each image whose (*features)[k], from `ex` at rule.contrast_threshold, are
// fewer than rule.min_features is extracted again at half the threshold, then at half
// that, down to the floor (the last halving at or above rule.min_contrast_threshold),
// keeping the larger set each time; then, with rule.fallback_min_features > 0, the images
// that reached the floor (each, when the floor is rule.contrast_threshold itself) go on
// down to the last halving at or above rule.fallback_min_contrast_threshold while fewer
// than fallback_min_features. An image with max_features features (if set) is not
// extracted again. (*lowered)[k] (if given) is set to 1 for an image that took
// features of a lower threshold; (*statuses)[k] (if given) is image k's first failed
// extraction (it keeps what it had), else Ok. `ex` is at rule.contrast_threshold again at
// the end, whatever happened. Errors: SetContrastThreshold's.
Status ExtractAgainWhileFewFeatures(FeatureExtractor* ex, const SiftOptions& rule,
                                    const std::vector<const GrayImage*>& images, std::vector<Features>* features,
                                    std::vector<char>* lowered, std::vector<Status>* statuses = nullptr);

}  // namespace tiepoint
