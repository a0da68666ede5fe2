// Generic RANSAC with adaptive stopping and local optimisation (internal to solver/).
//
// An Estimator provides:
//   using Model = ...;
//   static constexpr int kSampleSize;                 // points in a minimal sample
//   int NumData() const;
//   void MinimalSolve(const int* sample, std::vector<Model>* models) const;
//       // all models of a minimal sample (none for a degenerate sample)
//   bool FitNonMinimal(const std::vector<int>& indices, Model* model) const;
//       // least-squares fit to more than kSampleSize points (local optimisation)
//   double SquaredError(const Model& model, int i) const;   // pixels^2
//
// Scoring is MSAC (Torr & Zisserman 2000): cost = sum_i min(e_i^2, t^2), lower is better;
// it ranks models like the inlier count but prefers, among equal counts, the one that
// fits its inliers better. Each new best model is polished by local optimisation
// (Chum, Matas & Kittler, "Locally optimized RANSAC", DAGM 2003): refit to all its
// inliers, repeated while the cost drops (at most kLocalIterations times). The number of
// samples adapts to the best inlier ratio w seen so far:
//     N = log(1 - confidence) / log(1 - w^s),  clamped to [min_iterations, max_iterations].
// Sampling: s distinct indices drawn uniformly from a std::mt19937_64 seeded with
// options.seed, so results are identical on every platform for a seed.
//
// Two loops share this: RunRansac (the reference: every hypothesis scored in full in
// double precision) and RunRansacFast (same samples, same order, same decisions up to
// float rounding of near-threshold points), which adds
//  - bounded scoring: a hypothesis is scored in chunks of kScoreChunk points with the
//    estimator's float SIMD residuals (ransac_scoring.h) and abandoned as soon as its
//    partial MSAC cost reaches the best cost so far: the cost only grows with more
//    points, so an abandoned hypothesis could not have become the best (exact);
//  - a give-up bound: when `min_inliers` is set and the best model so far has fewer
//    inliers, RANSAC stops after max(min_iterations, GiveUpIterations(n, min_inliers, s,
//    confidence)) samples. Had a model with >= min_inliers inliers existed, one of its
//    all-inlier samples (probability per draw >= P = C(m, s) / C(n, s), the
//    hypergeometric for m = min_inliers) would have been drawn by then with probability
//    >= confidence even if only half of those samples, noisy, gave back a model with m
//    inliers: the argument of the adaptive stopping rule, applied to the weakest model
//    that could still verify, at the rate P / 2. (At the full rate P, bench/verify_bench.sh
//    lost 2 pairs that the reference verified with a marginal 15-inlier model found
//    after the bound: 1 of 275 for F, 1 of 43 for E; at P / 2, none.)
//  - batches: with num_threads > 1, batches of samples are solved and scored in parallel
//    (OpenMP) against the best cost at the batch's start, then taken in sample order
//    (new bests, local optimisation, stopping) exactly as the sequential loop would: the
//    result does not depend on the thread count.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "solver/geometry/ransac_scoring.h"

namespace tiepoint {
namespace two_view {

template <class Model>
struct RansacOutput {
  bool found = false;         // at least one model was scored
  Model model{};
  double cost = std::numeric_limits<double>::infinity();  // MSAC cost of `model`
  int num_inliers = 0;
  int iterations = 0;
};

// Returns the number of inliers of `model` (e_i^2 <= threshold^2) and its MSAC cost;
// `inliers` (optional) receives their indices.
template <class Estimator>
int ScoreModel(const Estimator& estimator, const typename Estimator::Model& model,
               double squared_threshold, double* cost, std::vector<int>* inliers = nullptr) {
  const int n = estimator.NumData();
  int count = 0;
  double c = 0.0;
  if (inliers) inliers->clear();
  for (int i = 0; i < n; ++i) {
    const double e2 = estimator.SquaredError(model, i);
    if (e2 <= squared_threshold) {  // false for NaN
      ++count;
      c += e2;
      if (inliers) inliers->push_back(i);
    } else {
      c += squared_threshold;
    }
  }
  *cost = c;
  return count;
}

// Samples needed to see one all-inlier sample of size s with probability `confidence`
// when a fraction w of the data are inliers.
inline double RequiredIterations(double w, int s, double confidence) {
  const double all_inlier = std::pow(w, s);
  if (all_inlier >= 1.0) return 0.0;
  if (all_inlier <= 0.0) return std::numeric_limits<double>::infinity();
  return std::log(1.0 - confidence) / std::log1p(-all_inlier);
}

template <class Estimator>
RansacOutput<typename Estimator::Model> RunRansac(const Estimator& estimator, double threshold,
                                                  double confidence, int min_iterations,
                                                  int max_iterations, uint64_t seed) {
  using Model = typename Estimator::Model;
  constexpr int s = Estimator::kSampleSize;
  constexpr int kLocalIterations = 4;
  RansacOutput<Model> out;
  const int n = estimator.NumData();
  if (n < s) return out;
  const double t2 = threshold * threshold;
  std::mt19937_64 rng(seed);
  int sample[s];
  std::vector<Model> models;
  std::vector<int> inliers;
  double required = static_cast<double>(max_iterations);
  int it = 0;
  for (; it < max_iterations && (it < min_iterations || it < required); ++it) {
    for (int k = 0; k < s; ++k) {
      bool repeated = true;
      while (repeated) {
        sample[k] = static_cast<int>(rng() % static_cast<uint64_t>(n));
        repeated = false;
        for (int j = 0; j < k; ++j) repeated = repeated || sample[j] == sample[k];
      }
    }
    models.clear();
    estimator.MinimalSolve(sample, &models);
    for (const Model& model : models) {
      double cost;
      const int count = ScoreModel(estimator, model, t2, &cost, &inliers);
      if (!(cost < out.cost)) continue;
      out.found = true;
      out.model = model;
      out.cost = cost;
      out.num_inliers = count;
      // Local optimisation: refit to the inliers while that lowers the cost.
      for (int lo = 0; lo < kLocalIterations && static_cast<int>(inliers.size()) > s; ++lo) {
        Model refit = out.model;
        if (!estimator.FitNonMinimal(inliers, &refit)) break;
        double refit_cost;
        std::vector<int> refit_inliers;
        const int refit_count = ScoreModel(estimator, refit, t2, &refit_cost, &refit_inliers);
        if (!(refit_cost < out.cost)) break;
        out.model = refit;
        out.cost = refit_cost;
        out.num_inliers = refit_count;
        inliers.swap(refit_inliers);
      }
      required = RequiredIterations(static_cast<double>(out.num_inliers) / n, s, confidence);
    }
  }
  out.iterations = it;
  return out;
}

// Samples after which RANSAC may give up when no model with >= min_inliers inliers has
// been found: log(1 - confidence) / log(1 - P / 2), P = C(m, s) / C(n, s) the
// probability that s distinct draws from n all fall among m given points, halved for the
// all-inlier samples that noise keeps from reproducing the model. 0 when m > n (no model
// can reach m), infinity when m < s or m <= 0 (no bound).
inline double GiveUpIterations(int n, int min_inliers, int s, double confidence) {
  if (min_inliers <= 0 || min_inliers < s) return std::numeric_limits<double>::infinity();
  if (min_inliers > n) return 0.0;
  double p = 1.0;
  for (int j = 0; j < s; ++j) p *= static_cast<double>(min_inliers - j) / static_cast<double>(n - j);
  if (!(p > 0.0)) return std::numeric_limits<double>::infinity();
  return std::ceil(std::log(1.0 - confidence) / std::log1p(-0.5 * p));
}

struct RansacParams {
  double threshold = 1.0;       // inlier threshold on the error (its square is compared)
  double confidence = 0.9999;
  int min_iterations = 100;
  int max_iterations = 10000;
  uint64_t seed = 0;
  int min_inliers = 0;          // the give-up bound's m; 0: no bound
  int num_threads = 1;          // > 1: batches of hypotheses in parallel (same result)
  // PROSAC (below): the data indices best first (NumData() of them), or null for uniform
  // sampling. Not owned; must outlive the call.
  const int* prosac_order = nullptr;
  // PROSAC's non-randomness test: the probability that a correspondence is consistent
  // with a wrong model by chance.
  double prosac_beta = 0.05;
  // Samples to evaluate instead of drawing (RunRansacFast only), when num_candidates >= 0:
  // num_candidates groups of kSampleSize indices at `candidates`, solved, scored and
  // locally optimised in order; the stopping rules do not apply. Not owned.
  const int* candidates = nullptr;
  int num_candidates = -1;
};

// PROSAC (Chum & Matas, "Matching with PROSAC - progressive sample consensus", CVPR 2005):
// minimal samples are drawn from the n best-ranked correspondences, n growing on the
// schedule under which, after T_N = max_iterations samples, each s-subset of the N points
// has been drawn as often as uniform sampling would draw it (sample t holds the n-th point
// and s - 1 of the n - 1 before it while t <= T'_n, else s of the first n). Positions are
// ranks; the caller maps them through the order.
class ProsacSampler {
 public:
  ProsacSampler(int num_points, int sample_size, int horizon)
      : N_(num_points), s_(sample_size), horizon_(horizon), n_(sample_size) {
    // T_s = T_N C(s, s) / C(N, s).
    T_n_ = horizon;
    for (int i = 0; i < s_; ++i) T_n_ *= static_cast<double>(s_ - i) / static_cast<double>(N_ - i);
    T_prime_ = 1.0;
  }
  // Draws the next sample (ranks, distinct) into `rank`; returns the largest rank.
  template <class Rng>
  int Draw(Rng& rng, int* rank) {
    ++t_;
    if (t_ > horizon_) n_ = N_;  // past T_N: uniform over all points
    while (static_cast<double>(t_) >= T_prime_ && n_ < N_ && t_ <= horizon_) {
      const double next = T_n_ * static_cast<double>(n_ + 1) / static_cast<double>(n_ + 1 - s_);
      T_prime_ += std::max(1.0, std::ceil(next - T_n_));
      T_n_ = next;
      ++n_;
      if (static_cast<double>(t_) < T_prime_) break;
    }
    const bool forced = static_cast<double>(t_) <= T_prime_ && n_ > s_ && t_ <= horizon_ && n_ < N_;
    const int pool = forced ? n_ - 1 : n_;
    const int random = forced ? s_ - 1 : s_;
    for (int k = 0; k < random; ++k) {
      bool repeated = true;
      while (repeated) {
        rank[k] = static_cast<int>(rng() % static_cast<uint64_t>(pool));
        repeated = false;
        for (int j = 0; j < k; ++j) repeated = repeated || rank[j] == rank[k];
      }
    }
    if (forced) rank[s_ - 1] = n_ - 1;
    int largest = 0;
    for (int k = 0; k < s_; ++k) largest = std::max(largest, rank[k]);
    return largest;
  }

 private:
  int N_, s_, horizon_;
  int n_;
  int64_t t_ = 0;
  double T_n_, T_prime_;
};

// PROSAC's stopping rule for the best model so far: over prefixes of n best-ranked points
// whose inlier count I_n passes the non-randomness test (I_n at least the 95% quantile of
// s + Binomial(n - s, beta), by the normal approximation, plus one), the samples
// k_n = log(1 - confidence) / log(1 - C(I_n, s) / C(n, s)) that must be drawn from the
// first n to see an all-inlier one with probability `confidence` (maximality). Returns
// the n of the smallest k_n (N when none passes) and that k_n in *k.
inline int ProsacStoppingPrefix(const std::vector<uint8_t>& inlier_by_rank, int s, double confidence,
                                double beta, double* k) {
  const int N = static_cast<int>(inlier_by_rank.size());
  int best_n = N;
  double best_k = std::numeric_limits<double>::infinity();
  int I = 0;
  const double log_fail = std::log(1.0 - confidence);
  for (int n = 1; n <= N; ++n) {
    I += inlier_by_rank[n - 1];
    if (n <= s || I < s) continue;
    const double m = n - s;
    const double i_min = s + m * beta + 1.645 * std::sqrt(m * beta * (1.0 - beta)) + 1.0;
    if (I < i_min) continue;
    double p = 1.0;
    for (int j = 0; j < s; ++j) p *= static_cast<double>(I - j) / static_cast<double>(n - j);
    const double kn = p >= 1.0 ? 0.0 : log_fail / std::log1p(-p);
    if (kn < best_k) best_k = kn, best_n = n;
  }
  *k = best_k;
  return best_n;
}

// Hypotheses are scored kScoreChunk points at a time between the checks of the bound:
// small enough that a hopeless one stops early on the typical 20-200 matches of a pair,
// large enough that the per-chunk call and model set-up stay below a tenth of the work.
constexpr int kScoreChunk = 64;

// MSAC cost of `model` with float residuals (estimator.SquaredErrors), or +infinity as
// soon as the partial cost reaches `bound` (the model cannot beat a model of that cost).
// *count receives the inliers when the cost is returned.
template <class Estimator>
double BoundedCost(const Estimator& estimator, const typename Estimator::FloatModel& model,
                   float squared_threshold, double bound, int* count) {
  const int n = estimator.NumData();
  alignas(32) float e2[kScoreChunk];
  double cost = 0.0;
  int inliers = 0;
  for (int begin = 0; begin < n; begin += kScoreChunk) {
    const int len = std::min(kScoreChunk, n - begin);
    estimator.SquaredErrors(model, begin, len, e2);
    int k = 0;
    cost += TruncatedSum(e2, len, squared_threshold, &k);
    inliers += k;
    if (!(cost < bound)) return std::numeric_limits<double>::infinity();
  }
  *count = inliers;
  return cost;
}

// Indices with float squared error <= squared_threshold (those BoundedCost counts).
template <class Estimator>
void FloatInliers(const Estimator& estimator, const typename Estimator::FloatModel& model,
                  float squared_threshold, std::vector<int>* inliers) {
  const int n = estimator.NumData();
  alignas(32) float e2[kScoreChunk];
  inliers->clear();
  for (int begin = 0; begin < n; begin += kScoreChunk) {
    const int len = std::min(kScoreChunk, n - begin);
    estimator.SquaredErrors(model, begin, len, e2);
    for (int k = 0; k < len; ++k)
      if (e2[k] <= squared_threshold) inliers->push_back(begin + k);
  }
}

// RANSAC with bounded float scoring, the give-up bound and batches (top of this file).
// The estimator provides, beyond RunRansac's interface:
//   using FloatModel = ...;   FloatModel ToFloat(const Model&) const;
//   void SquaredErrors(const FloatModel&, int begin, int len, float* e2) const;
//       // float squared errors of points [begin, begin + len), pixels^2
template <class Estimator>
RansacOutput<typename Estimator::Model> RunRansacFast(const Estimator& estimator,
                                                      const RansacParams& params) {
  using Model = typename Estimator::Model;
  constexpr int s = Estimator::kSampleSize;
  constexpr int kLocalIterations = 4;
  RansacOutput<Model> out;
  const int n = estimator.NumData();
  if (n < s) return out;
  const float t2 = static_cast<float>(params.threshold * params.threshold);
  const double give_up = params.min_inliers > n
                             ? 0.0  // no model can reach min_inliers: nothing to search for
                             : std::max<double>(params.min_iterations,
                                                GiveUpIterations(n, params.min_inliers, s, params.confidence));
  std::mt19937_64 rng(params.seed);
  const int* order = params.prosac_order;
  ProsacSampler prosac(n, s, params.max_iterations);
  // PROSAC: max rank of each sample drawn so far (histogram), the prefix of the stopping
  // rule and the samples it needs from it.
  std::vector<int> max_rank_count(order ? n : 0, 0);
  std::vector<int> rank_of(order ? n : 0);
  std::vector<uint8_t> inlier_by_rank(order ? n : 0);
  for (int r = 0; order && r < n; ++r) rank_of[order[r]] = r;
  int stop_prefix = n;
  double stop_k = std::numeric_limits<double>::infinity();
  int64_t drawn_in_prefix = 0;
  std::vector<int> sample_max_rank;
  const int threads = std::max(1, params.num_threads);
  // Per thread 16 samples a batch: enough work to amortise the fork and join (~2 us)
  // against 1-10 us a sample; at most 16 * threads - 1 samples past the stop are wasted.
  const int batch = threads > 1 ? 16 * threads : 1;
  std::vector<std::array<int, s>> samples(batch);
  std::vector<std::vector<Model>> models(batch);
  std::vector<std::vector<double>> costs(batch);
  std::vector<std::vector<int>> counts(batch);
  std::vector<int> inliers, refit_inliers;
  double required = static_cast<double>(params.max_iterations);
  auto go_on = [&](int it) {
    if (params.num_candidates >= 0) return it < params.num_candidates;
    if (it >= params.max_iterations) return false;
    if (out.num_inliers < params.min_inliers && it >= give_up) return false;
    if (it < params.min_iterations) return true;
    if (order && out.num_inliers >= params.min_inliers && drawn_in_prefix >= stop_k) return false;
    return it < required;
  };
  int it = 0;
  while (go_on(it)) {
    const int size = std::min(batch, (params.num_candidates >= 0 ? params.num_candidates : params.max_iterations) - it);
    if (order) sample_max_rank.resize(size);
    for (int b = 0; b < size && order; ++b) {
      int* sample = samples[b].data();
      sample_max_rank[b] = prosac.Draw(rng, sample);
      for (int k = 0; k < s; ++k) sample[k] = order[sample[k]];
    }
    for (int b = 0; b < size && params.num_candidates >= 0; ++b) {
      for (int k = 0; k < s; ++k) samples[b][k] = params.candidates[(it + b) * s + k];
    }
    for (int b = 0; b < size && !order && params.num_candidates < 0; ++b) {
      int* sample = samples[b].data();
      for (int k = 0; k < s; ++k) {
        bool repeated = true;
        while (repeated) {
          sample[k] = static_cast<int>(rng() % static_cast<uint64_t>(n));
          repeated = false;
          for (int j = 0; j < k; ++j) repeated = repeated || sample[j] == sample[k];
        }
      }
    }
    const double bound = out.cost;  // the best at the batch's start: >= every later best
    auto solve_and_score = [&](int b) {
      models[b].clear();
      estimator.MinimalSolve(samples[b].data(), &models[b]);
      costs[b].resize(models[b].size());
      counts[b].resize(models[b].size());
      for (size_t m = 0; m < models[b].size(); ++m) {
        costs[b][m] = BoundedCost(estimator, estimator.ToFloat(models[b][m]), t2, bound, &counts[b][m]);
      }
    };
    if (size > 1) {
#pragma omp parallel for num_threads(threads) schedule(dynamic, 4)
      for (int b = 0; b < size; ++b) solve_and_score(b);
    } else {
      solve_and_score(0);
    }
    for (int b = 0; b < size && go_on(it); ++b, ++it) {
      if (order) {
        ++max_rank_count[sample_max_rank[b]];
        if (sample_max_rank[b] < stop_prefix) ++drawn_in_prefix;
      }
      bool new_best = false;
      for (size_t m = 0; m < models[b].size(); ++m) {
        if (!(costs[b][m] < out.cost)) continue;
        out.found = true;
        out.model = models[b][m];
        out.cost = costs[b][m];
        out.num_inliers = counts[b][m];
        FloatInliers(estimator, estimator.ToFloat(out.model), t2, &inliers);
        for (int lo = 0; lo < kLocalIterations && static_cast<int>(inliers.size()) > s; ++lo) {
          Model refit = out.model;
          if (!estimator.FitNonMinimal(inliers, &refit)) break;
          int refit_count = 0;
          const auto refit_float = estimator.ToFloat(refit);
          const double refit_cost = BoundedCost(estimator, refit_float, t2, out.cost, &refit_count);
          if (!(refit_cost < out.cost)) break;
          out.model = refit;
          out.cost = refit_cost;
          out.num_inliers = refit_count;
          FloatInliers(estimator, refit_float, t2, &refit_inliers);
          inliers.swap(refit_inliers);
        }
        required = RequiredIterations(static_cast<double>(out.num_inliers) / n, s, params.confidence);
        new_best = true;
      }
      if (order && new_best) {
        // `inliers` are those of out.model (after local optimisation).
        std::fill(inlier_by_rank.begin(), inlier_by_rank.end(), 0);
        for (int i : inliers) inlier_by_rank[rank_of[i]] = 1;
        stop_prefix = ProsacStoppingPrefix(inlier_by_rank, s, params.confidence, params.prosac_beta, &stop_k);
        drawn_in_prefix = 0;
        for (int r = 0; r < stop_prefix; ++r) drawn_in_prefix += max_rank_count[r];
      }
    }
  }
  out.iterations = it;
  return out;
}

}  // namespace two_view
}  // namespace tiepoint
