// Built when TIEPOINT_WITH_CUDA is OFF.
#include "solver/pcg_cuda.h"

namespace tiepoint {

Status CreateCudaPcgLinearSystem(const PcgOptions&, const BAProblem&, const LossFunction&,
                                 LinearSystem*) {
  return Status::Unavailable(
      "this tiepoint was built without CUDA (TIEPOINT_WITH_CUDA=OFF or no nvcc found); "
      "use --device cpu");
}

}  // namespace tiepoint
