// Normalization that makes single-precision bundle adjustment safe (Wu et al. 2011, §4).
//
// A similarity of the scene and a change of pixel units, applied before the solve and
// undone after it:
//   lengths:  X' = X / L, t' = t / L, with L the median depth of the observations
//             (reprojections are invariant: p = -P.xy / P.z does not change);
//   pixels:   f' = f / F, x' = x / F, with F the median focal length (k1, k2 unchanged,
//             since p does not change), so residuals scale by 1/F and the cost by 1/F^2.
// L and F are the medians rounded to the nearest power of two: float safety needs only
// the order of magnitude, and scaling by a power of two is exact, so Denormalize after
// Normalize returns the inputs bit for bit (the solvers normalize the scene in place).
// The solver then also scales Jacobian columns (solver/pcg_linearization.h).
#pragma once

#include <cstdint>

namespace tiepoint {

struct BAProblem;
struct Scene;

struct Normalization {
  double length_scale = 1.0;  // L: median depth
  double pixel_scale = 1.0;   // F: median focal length
  // cost_original = cost_normalized * CostScale().
  double CostScale() const { return pixel_scale * pixel_scale; }
};

// Medians over the observations (depth) and cameras (|f|), rounded to powers of two; 1
// where undefined.
Normalization ComputeNormalization(const BAProblem& problem, const double* cameras,
                                   const double* points);

void NormalizeParameters(const Normalization& n, int num_cameras, int num_points,
                         double* cameras, double* points);
void DenormalizeParameters(const Normalization& n, int num_cameras, int num_points,
                           double* cameras, double* points);
// Observations: x' = x / F, and back.
void NormalizeObservations(const Normalization& n, Scene* scene);
void DenormalizeObservations(const Normalization& n, Scene* scene);

}  // namespace tiepoint
