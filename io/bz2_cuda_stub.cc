// Built when TIEPOINT_WITH_CUDA is OFF: the GPU bzip2 decoder always declines.
#include "io/bz2_cuda.h"

namespace tiepoint {

bool TryDecompressBz2Cuda(const char*, size_t, const Bz2CudaOptions&, Bz2Decoded* out,
                          std::string* why, Bz2CudaTiming* timing) {
  *out = Bz2Decoded();
  if (timing != nullptr) *timing = Bz2CudaTiming();
  if (why != nullptr) *why = "this build has no CUDA";
  return false;
}

}  // namespace tiepoint
