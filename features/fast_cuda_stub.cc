// Built when TIEPOINT_WITH_CUDA is OFF.
#include "features/fast_cuda.h"

namespace tiepoint {

Status CreateCudaFrontEnd(const FrontEndOptions&, std::unique_ptr<FastLkFrontEnd>*) {
  return Status::Unavailable(
      "this tiepoint was built without CUDA (TIEPOINT_WITH_CUDA=OFF or no nvcc found); "
      "use --device cpu");
}

Status LastCudaFrontEndTimes(FastLkFrontEnd*, CudaFrontEndTimes*) {
  return Status::InvalidOptions("not a CUDA frontend");
}

Status TimeCudaDetect(FastLkFrontEnd*, int, int, int, bool, CudaDetectTiming*) {
  return Status::InvalidOptions("not a CUDA frontend");
}

Status TimeCudaTrack(FastLkFrontEnd*, int, int, const std::vector<Point2f>&, int, bool, double*,
                     double*) {
  return Status::InvalidOptions("not a CUDA frontend");
}

}  // namespace tiepoint
