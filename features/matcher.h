// Brute-force descriptor matching with Lowe's ratio test and a mutual check, behind a
// DescriptorMatcher interface with a CPU reference implementation and a CUDA backend
// (features/matcher_cuda.h) that gives IDENTICAL matches.
//
// What is computed, for descriptor sets A (n1 x 128 uint8) and B (n2 x 128 uint8):
//   d(i, j) = sum_k (A[i][k] - B[j][k])^2, an exact integer (<= 128 x 255^2 = 8,323,200;
//             computed as |a|^2 + |b|^2 - 2 a.b in 32-bit integers, so exact).
//   best(i)   = the j with the smallest d(i, j); among equal distances the lowest j.
//   second(i) = the smallest d(i, j') over j' != best(i) (so two columns at the same
//               distance make second(i) == d(i, best(i))); +infinity when n2 == 1.
//   col(j)    = the i with the smallest d(i, j); among equal distances the lowest i.
// Row i gives the match (i, best(i)) when every enabled test passes:
//   ratio:    d1 < ratio^2 * d2 in double precision, d1 = d(i, best(i)), d2 = second(i)
//             (i.e. Lowe's sqrt(d1) < ratio sqrt(d2)); passes when d2 is +infinity.
//             ratio = 1 keeps every row whose nearest neighbour is unique.
//   max distance: d1 <= max_distance^2 (in double; max_distance < 0 disables it).
//   mutual:   col(best(i)) == i.
// Matches come out in increasing index1 (at most one per row; with the mutual check also
// at most one per column). The same inputs give the same matches on every backend,
// thread count and run.
//
// Cost: n1 n2 128 multiply-adds. The CPU reference does one pass over A x B for the rows
// and, with the mutual check, one over B x A for the columns (OpenMP over blocks of
// rows); the CUDA backend computes the products on tensor cores and keeps every
// reduction on chip (matcher_cuda.h). On many pairs without the mutual check (an
// exhaustive match of a set of images), on a CPU with AVX2 but not AVX-512 VNNI (whose
// scan is faster still), the CPU's MatchPairs projects every descriptor on
// the 32 principal axes of the set's descriptors and takes the projected distances, each
// a lower bound of the true one at a quarter of its cost, to rule out the targets that
// cannot be a row's nearest two; it computes the exact distance to the rest (~3% of the
// pairs on SIFT). The matches are the same, bit for bit (matcher.cc says why); only the
// time changes (MatcherSummary::exact_distances counts the distances computed).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "io/base/device.h"
#include "io/base/status.h"
#include "io/features.h"
#include "io/matches.h"

namespace tiepoint {

// Largest descriptor set accepted on either side (indices are 32-bit, and the CUDA
// backend packs a row index with a distance into 64 bits).
constexpr uint64_t kMaxMatcherDescriptors = uint64_t{1} << 26;

struct MatcherOptions {
  // Lowe's ratio: keep a match when its distance is below ratio x the second-nearest's.
  // In (0, 1]; 0.8 is Lowe's value.
  double ratio = 0.8;
  // Keep a match only when the two descriptors are each other's nearest neighbour.
  bool mutual = false;
  // Largest descriptor distance (L2, in descriptor units: SIFT descriptors have norm
  // ~512) a match may have; < 0 means no limit.
  double max_distance = -1;
  // CPU: OpenMP threads; 0 uses omp_get_max_threads(). Never changes the output.
  int num_threads = 0;
  // CUDA only: pairs in flight at once in MatchPairs, each on its own stream. Never
  // changes the output.
  int cuda_streams = 4;
  // CUDA only: split the columns of each pair into this many ranges handled by separate
  // thread blocks (more blocks when n1 is small); 0 picks from the GPU's multiprocessor
  // count. Never changes the output.
  int cuda_column_splits = 0;

  // Explains the first option out of range, naming the field.
  Status Check() const;
};

// Times of the last call, for reports.
struct MatcherSummary {
  double seconds = 0;             // wall clock of the call
  double descriptor_pairs = 0;    // sum over pairs of n1 x n2
  // Distances computed exactly: descriptor_pairs, less those the CPU's bounded scan
  // (MatchPairs on many pairs) showed could not be among a row's nearest two.
  double exact_distances = 0;
};

// Thread safety: a matcher may be used from one thread at a time; it parallelises
// internally.
class DescriptorMatcher {
 public:
  virtual ~DescriptorMatcher() = default;

  // Replaces *matches with the matches of a (n1 descriptors) against b (n2), 128 bytes
  // each, row-major. kInvalidInput when a set exceeds kMaxMatcherDescriptors.
  virtual Status Match(const uint8_t* a, uint64_t n1, const uint8_t* b, uint64_t n2,
                       std::vector<FeatureMatch>* matches) = 0;

  // Match() for Features (checks that descriptors hold 128 bytes per keypoint).
  Status Match(const Features& a, const Features& b, std::vector<FeatureMatch>* matches);

  // Matches every (first, second) pair of `images` (indices into it); (*matches)[p] is
  // pair p's result. The CUDA backend uploads each image's descriptors once and keeps
  // cuda_streams pairs in flight; the CPU runs the pairs one after another. Stops at the
  // first error. `progress`, when set, is called after each pair with (done, total).
  virtual Status MatchPairs(const std::vector<const Features*>& images,
                            const std::vector<std::pair<int, int>>& pairs,
                            std::vector<std::vector<FeatureMatch>>* matches,
                            const std::function<void(size_t, size_t)>& progress = nullptr);

  const MatcherSummary& summary() const { return summary_; }

  // The one place a backend is chosen: kCpu is the reference implementation; kCuda is
  // features/matcher_cuda.h, kUnavailable with a message naming --device cpu when this
  // build has no CUDA or no GPU can be used. Checks the options first.
  static Status Create(const MatcherOptions& options, Device device,
                       std::unique_ptr<DescriptorMatcher>* matcher);

 protected:
  // The start every backend's Match shares: checks the sizes (CheckMatcherSizes), empties
  // `matches` and resets the summary to this pair's count of descriptor pairs.
  Status BeginMatch(uint64_t n1, uint64_t n2, std::vector<FeatureMatch>* matches);

  MatcherSummary summary_;
};

// Guided matching's descriptor step (COLMAP's guided_matching; sfm/ chooses the pairs a
// two-view geometry allows): the matches of a against b where row i may match only the
// columns cols[ptr[i] .. ptr[i + 1]) (increasing, each < b.size()). best(i), second(i) and
// col(j) are those of the header's definition taken over the allowed pairs only, and the
// same tests apply (options' ratio, max_distance, mutual); a row with one allowed column
// has no second (the ratio test passes). Matches come out in increasing index1. CPU only
// (the allowed pairs are a few percent of n1 x n2); threads never change the output.
// kInvalidInput when ptr or cols do not fit the two sets.
Status MatchRestricted(const Features& a, const Features& b, const std::vector<uint64_t>& ptr,
                       const std::vector<uint32_t>& cols, const MatcherOptions& options,
                       std::vector<FeatureMatch>* matches);

}  // namespace tiepoint
