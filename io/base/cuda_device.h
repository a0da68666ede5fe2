// What CUDA devices this process can use. Safe to call in a build without CUDA and on a
// machine without a GPU: the answer is then an kUnavailable Status saying why.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "io/base/status.h"

namespace tiepoint {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  size_t total_memory_bytes = 0;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  int multiprocessors = 0;
};

// True when this binary was built with the CUDA backends.
bool CudaBuilt();

// Fills `devices`; kUnavailable (with the driver's reason) when none can be used.
Status QueryCudaDevices(std::vector<CudaDeviceInfo>* devices);

// Creates the CUDA context of the current device now (it takes a few hundred ms), loading
// every kernel, and maps a slice of device memory into the default stream-ordered pool
// (which then keeps freed memory), so a caller can overlap all of it with file reading.
// A no-op without CUDA; errors surface later.
void WarmUpCuda();

}  // namespace tiepoint
