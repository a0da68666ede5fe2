// Fundamental-matrix RANSAC's hypothesis search on the GPU, for many image pairs at once
// (`tiepoint match --device cuda --verify fundamental`).
//
// On the CPU (solver/geometry/ransac.h) a pair of unrelated images draws RANSAC's whole
// max_iterations samples, each a 7-point solve and a scoring pass, one pair per thread;
// with thousands of such pairs verification took most of `match`. Here every pair's
// samples are drawn, solved and scored on the GPU, one thread per sample:
//  - samples come from solver/geometry/sample_draw.h (sample t of pair k from (seed, k, t)),
//    uniformly, max_iterations of them for every pair with at least min_inliers (and 7)
//    correspondences; fewer are not searched, as the CPU does not search them;
//  - each sample's 7x9 system is solved in double precision (Gaussian elimination, the
//    det = 0 cubic in closed form), as on the CPU, giving 1 or 3 rank-2 matrices;
//  - each matrix is scored by its MSAC cost, sum of min(e^2, t^2) over the pair's
//    correspondences with e the Sampson distance in pixels, computed in float on the
//    Hartley-normalised coordinates (the Sampson distance in pixels is the normalised
//    residual over the normalised gradient weighted by the two Hartley scales, so no
//    pixel-sized number enters float); a matrix stops being scored once its partial cost
//    exceeds the best cost found so far in its slot (it cannot win);
//  - the samples are dealt to `candidates` interleaved slots per pair, and each slot keeps
//    its lowest-cost sample (ties: the lower sample number). The result does not depend on
//    the order the GPU runs in.
// The caller then hands each pair's candidate samples to EstimateTwoViewGeometry
// (RansacOptions::candidate_samples), which solves them again in double precision on the
// CPU, scores them, and runs the same local optimisation and refinement as after its own
// search, so the final model, inliers and verification decision come from the CPU code.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "io/base/status.h"

namespace tiepoint {

struct FundamentalSearchOptions {
  double max_error_px = 3.0;  // inlier threshold on the Sampson distance, pixels (> 0)
  int samples = 10000;        // samples per pair (RansacOptions::max_iterations), >= 1
  uint64_t seed = 0;
  int min_inliers = 15;       // pairs with fewer correspondences are not searched
  int candidates = 4;         // slots per pair, 1..32
  // Pair k of a call draws from sampler stream first_stream + k: a caller that searches
  // its pairs in several calls passes each call's first pair index, so that the samples
  // do not depend on how the pairs were split.
  uint64_t first_stream = 0;
};

struct FundamentalSearchPair {
  // Pixel coordinates of the correspondences in image 1 and image 2 (same length).
  const std::vector<std::array<double, 2>>* x1 = nullptr;
  const std::vector<std::array<double, 2>>* x2 = nullptr;
};

struct FundamentalCandidates {
  int samples_drawn = 0;     // 0 when the pair was not searched
  std::vector<int> samples;  // 7 correspondence indices per candidate, lowest cost first
};

// True when this binary has the CUDA search (a GPU may still be missing).
bool FundamentalSearchCudaBuilt();

// One entry of *out per pair. kUnavailable without a GPU or CUDA build (naming
// --device cpu), kOutOfMemory naming the sizes, kInvalidInput for null or mismatched
// coordinate arrays (naming the pair), kInvalidOptions for bad options. `progress`
// (optional) is called with (pairs searched, pairs) between launches.
Status SearchFundamentalCuda(const std::vector<FundamentalSearchPair>& pairs,
                             const FundamentalSearchOptions& options,
                             std::vector<FundamentalCandidates>* out,
                             const std::function<void(size_t, size_t)>& progress = nullptr);

}  // namespace tiepoint
