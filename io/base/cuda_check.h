// The one checking macro every CUDA runtime call goes through (include from .cu files).
// It records file and line and returns a Status up the stack instead of aborting.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "io/base/status.h"

#define TIEPOINT_CUDA_RETURN_IF_ERROR(call)                                             \
  do {                                                                                  \
    const cudaError_t _tp_err = (call);                                                 \
    if (_tp_err != cudaSuccess) {                                                       \
      const ::tiepoint::StatusCode _tp_code = _tp_err == cudaErrorMemoryAllocation      \
                                                  ? ::tiepoint::StatusCode::kOutOfMemory \
                                                  : ::tiepoint::StatusCode::kUnavailable;\
      return ::tiepoint::Status(_tp_code, std::string(#call) + " failed at " + __FILE__ + \
                                              ":" + std::to_string(__LINE__) + ": " +   \
                                              cudaGetErrorString(_tp_err));             \
    }                                                                                   \
  } while (0)
