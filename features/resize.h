// Shrinking a grey image before feature extraction: `reconstruct`'s max_image_size, as
// COLMAP's SiftExtraction.max_image_size (3200), which keeps SIFT's upsampled scale space of
// a 24-megapixel photo (12000 x 8000 floats an image) out of memory.
//
// Coordinates follow io/image.h (pixel centres at integers). An output of W' x H' pixels
// covers the input's W x H area: output pixel x' sits at input x = (x' + 0.5) s - 0.5 with
// s = W / W' (and the same for y), which is also how a feature found at x' maps back.
// Each output pixel is the input weighted by a triangle of half-width s input pixels about
// that point (bilinear interpolation widened to the footprint, as Pillow's BILINEAR
// resampling): little aliasing, and a blur of about 0.5 output pixels, which SIFT assumes of
// its input. Weights at the borders are renormalised over the pixels inside.
#pragma once

#include "io/base/status.h"
#include "io/features.h"
#include "io/image.h"

namespace tiepoint {

// The size of a w x h image scaled to fit within max_side pixels a side, aspect kept
// (each side rounded, at least 1); w x h itself when it fits or max_side <= 0.
void SizeWithin(int width, int height, int max_side, int* out_width, int* out_height);

// `in` resampled to width x height, each no larger than in's side (kInvalidInput
// otherwise, or for an empty image). OpenMP over rows with `num_threads` (0: all). `out`
// may be `in` (it is read whole before *out is written).
Status ShrinkGray(const GrayImage& in, int width, int height, int num_threads, GrayImage* out);

// The --max-image-size of `extract` and `reconstruct`: 0 (never shrink) or at least
// kMinMaxImageSize; else kInvalidOptions "--max-image-size N: must be 0 (full size) or at
// least 16 pixels".
constexpr int kMinMaxImageSize = 16;
Status CheckMaxImageSize(int max_side);

// `image` shrunk in place to SizeWithin(max_side) when it does not fit (max_side > 0);
// untouched otherwise. The errors of ShrinkGray.
Status ShrinkToFit(int max_side, int num_threads, GrayImage* image);

// Keypoints found on an image shrunk by sx, sy (full size over shrunk size, per axis) moved
// to the full image's pixels: x = (x' + 0.5) sx - 0.5, y likewise, scale times sqrt(sx sy).
void KeypointsToFullImage(double sx, double sy, Features* features);

}  // namespace tiepoint
