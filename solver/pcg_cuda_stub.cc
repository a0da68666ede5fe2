// Built when TIEPOINT_WITH_CUDA is OFF.
#include "solver/pcg_cuda.h"

namespace tiepoint {

Status CreateCudaPcgLinearSystem(const PcgOptions&, const BAProblem&, const LossFunction&,
                                 LinearSystem*, bool) {
  return Status::Unavailable(
      "this tiepoint was built without CUDA (TIEPOINT_WITH_CUDA=OFF or no nvcc found); "
      "use --device cpu");
}

Status CreateCudaLmState(const PcgOptions& options, const BAProblem& problem,
                         const LossFunction& loss, const double*, const double*,
                         std::unique_ptr<LmState>*) {
  return CreateCudaPcgLinearSystem(options, problem, loss, nullptr);
}

Status MeasureCudaCgBandwidth(const BAProblem& problem, const double*, const double*, int,
                              CudaBandwidthReport*) {
  return CreateCudaPcgLinearSystem(PcgOptions(), problem, LossFunction(), nullptr);
}

Status CudaSchurOperatorsForTest(const BAProblem& problem, const LossFunction&, const double*,
                                 const double*, const double*, const std::vector<float>&,
                                 const std::vector<float>&, const std::vector<float>&, bool,
                                 std::vector<float>*, std::vector<float>*) {
  return CreateCudaPcgLinearSystem(PcgOptions(), problem, LossFunction(), nullptr);
}

}  // namespace tiepoint
