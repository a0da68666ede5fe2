#include "io/base/cuda_check.h"
#include "io/base/cuda_device.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace tiepoint {

bool CudaBuilt() { return true; }

void WarmUpCuda() {
  // Load every kernel now, with the context (this runs while the input is read), not at
  // each kernel's first launch in the timed solve.
  setenv("CUDA_MODULE_LOADING", "EAGER", /*overwrite=*/0);
  if (cudaFree(nullptr) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  // Keep freed device memory in the stream-ordered pool the solvers allocate from, and map
  // a first slice of it now (a quarter of the free memory, at most 4 GiB), so the solve's
  // allocations are served from memory already mapped.
  int device = 0;
  cudaMemPool_t pool;
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetDefaultMemPool(&pool, device) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  uint64_t threshold = UINT64_MAX;
  cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  const size_t reserve = std::min<size_t>(free_bytes / 4, size_t{4} << 30);
  void* p = nullptr;
  if (reserve > 0 && cudaMallocAsync(&p, reserve, 0) == cudaSuccess) {
    cudaFreeAsync(p, 0);
    cudaStreamSynchronize(0);
  }
  cudaGetLastError();
}

Status QueryCudaDevices(std::vector<CudaDeviceInfo>* devices) {
  devices->clear();
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error for later callers
    return Status::Unavailable(std::string("no usable CUDA device: ") + cudaGetErrorString(err));
  }
  if (count == 0) return Status::Unavailable("no CUDA device found");
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    TIEPOINT_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, i));
    CudaDeviceInfo info;
    info.index = i;
    info.name = prop.name;
    info.total_memory_bytes = prop.totalGlobalMem;
    info.compute_capability_major = prop.major;
    info.compute_capability_minor = prop.minor;
    info.multiprocessors = prop.multiProcessorCount;
    devices->push_back(info);
  }
  return Status::Ok();
}

}  // namespace tiepoint
