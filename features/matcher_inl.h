// Internal to the matcher backends: the ratio and distance tests of features/matcher.h,
// compiled into both the CPU reference and the CUDA kernel from this one definition, so
// the two decide every row alike.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define TIEPOINT_HOST_DEVICE __host__ __device__
#else
#define TIEPOINT_HOST_DEVICE
#endif

namespace tiepoint::matcher_internal {

// second(i) when B has a single descriptor: +infinity.
constexpr uint32_t kNoSecond = 0xffffffffu;

// ratio_sq = ratio^2; max_distance_sq = max_distance^2, or < 0 for no limit.
TIEPOINT_HOST_DEVICE inline bool PassesRatioAndDistance(double ratio_sq, double max_distance_sq,
                                                        uint32_t d1, uint32_t d2) {
  if (max_distance_sq >= 0 && !(static_cast<double>(d1) <= max_distance_sq)) return false;
  if (d2 == kNoSecond) return true;
  return static_cast<double>(d1) < ratio_sq * static_cast<double>(d2);
}

}  // namespace tiepoint::matcher_internal
