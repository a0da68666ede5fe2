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

// Copies `bytes` from pageable host memory to device memory (the current device) through
// two pinned staging buffers of 32 MiB kept by the process: the calling thread's OpenMP
// team fills one while the copy engine drains the other. Plain cudaMemcpy from pageable
// memory measured 8 GB/s on an H200 host (700 MB in 92 ms), this about 40 GB/s (the 662
// MB of a Final-13682-size problem's observations in 15-17 ms); under 8 MiB it is
// cudaMemcpy. With TIEPOINT_TIMING set it prints each upload's size and time, with the
// part spent copying on the host and waiting for the copy engine.
// Synchronous: the data is on the device when it returns. kUnavailable without CUDA.
Status UploadStaged(void* device_dst, const void* host_src, size_t bytes);

}  // namespace tiepoint
