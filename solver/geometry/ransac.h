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
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

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

}  // namespace two_view
}  // namespace tiepoint
