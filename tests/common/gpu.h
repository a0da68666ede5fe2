// GPU tests skip cleanly where no usable CUDA device is present (CI, builds without CUDA).
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "io/base/cuda_device.h"

// Skips the calling test, naming why, unless a CUDA device is usable.
#define TIEPOINT_REQUIRE_GPU()                                                 \
  do {                                                                         \
    std::vector<::tiepoint::CudaDeviceInfo> devices;                           \
    const ::tiepoint::Status gpu = ::tiepoint::QueryCudaDevices(&devices);     \
    if (!gpu.ok()) GTEST_SKIP() << "no usable GPU: " << gpu.message();         \
  } while (0)
