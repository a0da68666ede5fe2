// Built when TIEPOINT_WITH_CUDA is OFF.
#include "features/matcher_cuda.h"

namespace tiepoint {

namespace {
Status NoCuda() {
  return Status::Unavailable(
      "CUDA matcher: this tiepoint was built without CUDA (TIEPOINT_WITH_CUDA=OFF or no nvcc "
      "found); use --device cpu");
}
}  // namespace

Status CreateCudaMatcher(const MatcherOptions&, std::unique_ptr<DescriptorMatcher>*) {
  return NoCuda();
}

Status CudaMatchTiming(const MatcherOptions&, const uint8_t*, uint64_t, const uint8_t*, uint64_t,
                       int, int, std::vector<double>*, std::vector<double>*,
                       std::vector<FeatureMatch>*) {
  return NoCuda();
}

}  // namespace tiepoint
