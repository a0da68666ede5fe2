// Counter-based minimal samples: sample t of stream k is a pure function of (seed, k, t),
// so a GPU thread can draw it without a shared generator, and the host can draw the same
// indices again from (seed, k, t) alone (solver/geometry/fundamental_cuda.h keeps only the
// winning sample numbers). Callable from host and device code.
#pragma once

#include <cstdint>

#include "io/base/host_device.h"

namespace tiepoint {
namespace two_view {

// SplitMix64 (Steele, Lea & Flood 2014): advances *state and returns a 64-bit output.
TIEPOINT_HOST_DEVICE inline uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// S distinct indices in [0, n) (n >= S), uniformly: each index is the high 32 bits of a
// SplitMix64 output times n (bias below n / 2^32), redrawn while it repeats an earlier one.
template <int S>
TIEPOINT_HOST_DEVICE inline void DrawSample(uint64_t seed, uint64_t stream, uint64_t sample, int n, int* out) {
  uint64_t state = seed;
  state = SplitMix64(&state) ^ stream;
  state = SplitMix64(&state) ^ sample;
  (void)SplitMix64(&state);
  for (int k = 0; k < S; ++k) {
    bool repeated = true;
    while (repeated) {
      const uint64_t r = SplitMix64(&state) >> 32;
      out[k] = static_cast<int>((r * static_cast<uint64_t>(n)) >> 32);
      repeated = false;
      for (int j = 0; j < k; ++j) repeated = repeated || out[j] == out[k];
    }
  }
}

}  // namespace two_view
}  // namespace tiepoint
