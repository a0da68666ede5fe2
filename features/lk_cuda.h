// Internal to the CUDA frontend (features/fast_cuda.cu, features/lk_cuda.cu): device
// buffers, the device view of a pyramid and the LK launch. Include from .cu files only;
// the public interface is features/fast_cuda.h.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "features/lk.h"
#include "io/base/cuda_buffer.h"
#include "io/base/cuda_check.h"
#include "io/base/status.h"

namespace tiepoint::cuda_internal {

constexpr int kMaxLevels = 8;

// Device and pinned buffers: io/base/cuda_buffer.h (tiepoint::DeviceBuffer, PinnedBuffer).

// A pyramid in device memory, passed to kernels by value.
struct PyramidView {
  const uint8_t* level[kMaxLevels] = {};
  int width[kMaxLevels] = {};
  int height[kMaxLevels] = {};
  int levels = 0;
};

struct LkDeviceResult {
  float x, y, fb_error, gain, bias;
  int status;  // LkStatus
};

// Tracks n points (float2 pairs, level-0 pixels) from `prev` into `next`; d_guesses may
// be null. `map`: the linear prediction of features/lk.h (the identity runs the identity
// kernel). Asynchronous on `stream`.
Status LaunchLk(const PyramidView& prev, const PyramidView& next, int levels,
                const float* d_points, const float* d_guesses, int n, const LkLinearMap& map,
                const LkOptions& options, LkDeviceResult* d_results, cudaStream_t stream);

}  // namespace tiepoint::cuda_internal
