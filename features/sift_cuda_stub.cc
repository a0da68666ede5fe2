// Built when TIEPOINT_WITH_CUDA is OFF.
#include "features/sift_cuda.h"

namespace tiepoint {

Status CreateCudaSiftExtractor(const SiftOptions&, std::unique_ptr<FeatureExtractor>*) {
  return Status::Unavailable(
      "CUDA SIFT: this tiepoint was built without CUDA (TIEPOINT_WITH_CUDA=OFF or no nvcc "
      "found); use --device cpu");
}

}  // namespace tiepoint
