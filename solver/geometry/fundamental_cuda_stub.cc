// Built when TIEPOINT_WITH_CUDA is OFF.
#include "solver/geometry/fundamental_cuda.h"

namespace tiepoint {

bool FundamentalSearchCudaBuilt() { return false; }

Status SearchFundamentalCuda(const std::vector<FundamentalSearchPair>&, const FundamentalSearchOptions&,
                             std::vector<FundamentalCandidates>*, const std::function<void(size_t, size_t)>&) {
  return Status::Unavailable(
      "fundamental search on the GPU: this tiepoint was built without CUDA (TIEPOINT_WITH_CUDA=OFF or no "
      "nvcc found); use --device cpu, or --verify-device cpu");
}

}  // namespace tiepoint
