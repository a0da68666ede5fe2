#include "io/base/parallel_copy.h"

#include <algorithm>
#include <cstring>

#include <omp.h>

namespace tiepoint {

void ParallelCopy(void* dst, const void* src, size_t bytes, int threads) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  threads = threads > 0 ? threads : omp_get_max_threads();
  if (threads == 1 || bytes < (size_t{1} << 20)) {
    std::memcpy(d, s, bytes);
    return;
  }
  const size_t slice = ((bytes + threads - 1) / threads + 63) / 64 * 64;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t) {
    const size_t begin = static_cast<size_t>(t) * slice;
    if (begin < bytes) std::memcpy(d + begin, s + begin, std::min(slice, bytes - begin));
  }
}

}  // namespace tiepoint
