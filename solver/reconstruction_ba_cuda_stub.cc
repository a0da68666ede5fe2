// Built when TIEPOINT_WITH_CUDA is OFF.
#include "solver/reconstruction_ba_cuda.h"

namespace tiepoint {

Status CreateCudaReducedPcg(std::unique_ptr<CudaReducedPcg>*) {
  return Status::Unavailable(
      "--ba-solver iterative-cuda: this tiepoint was built without CUDA (TIEPOINT_WITH_CUDA=OFF "
      "or no nvcc found); use --ba-solver iterative");
}

}  // namespace tiepoint
