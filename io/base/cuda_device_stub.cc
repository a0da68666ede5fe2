// Built when TIEPOINT_WITH_CUDA is OFF: the device queries answer "not built".
#include "io/base/cuda_device.h"

namespace tiepoint {

bool CudaBuilt() { return false; }

void WarmUpCuda() {}

Status UploadStaged(void*, const void*, size_t) {
  return Status::Unavailable("this build has no CUDA");
}

Status QueryCudaDevices(std::vector<CudaDeviceInfo>* devices) {
  devices->clear();
  return Status::Unavailable(
      "this tiepoint was built without CUDA (TIEPOINT_WITH_CUDA=OFF or no nvcc found); "
      "use --device cpu");
}

}  // namespace tiepoint
