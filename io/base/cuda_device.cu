#include "io/base/cuda_check.h"
#include "io/base/cuda_device.h"

namespace tiepoint {

bool CudaBuilt() { return true; }

void WarmUpCuda() {
  if (cudaFree(nullptr) != cudaSuccess) cudaGetLastError();
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
