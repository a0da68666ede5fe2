// Helpers shared by the solver tests: seeded synthetic scenes and one-call solves.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "solver/bundle_adjuster.h"
#include "solver/synthetic.h"

namespace tiepoint::testing {

inline Scene Synthetic(int cameras, int points, double observations_per_point, double noise_px,
                       uint64_t seed, Scene* truth = nullptr) {
  SyntheticOptions o;
  o.num_cameras = cameras;
  o.num_points = points;
  o.observations_per_point = observations_per_point;
  o.noise_px = noise_px;
  o.seed = seed;
  Scene s;
  EXPECT_TRUE(MakeSyntheticProblem(o, &s, truth).ok());
  return s;
}

// Solves with `options` (the solver type set to `type`); a non-OK Status fails the test.
inline BundleAdjusterSummary SolveWith(SolverType type, Scene* scene,
                                       BundleAdjusterOptions options = {}) {
  options.solver = type;
  std::unique_ptr<BundleAdjuster> adjuster;
  EXPECT_TRUE(BundleAdjuster::Create(options, &adjuster).ok());
  BundleAdjusterSummary summary;
  const Status s = adjuster->Solve(scene, &summary);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return summary;
}

}  // namespace tiepoint::testing
