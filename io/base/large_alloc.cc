#include "io/base/large_alloc.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

namespace tiepoint {

void* AllocateLarge(size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20;
  void* p = nullptr;
  if (bytes >= 2 * kHuge) {
    static const bool huge = [] {
      const char* v = std::getenv("TIEPOINT_HUGEPAGES");
      return v != nullptr && v[0] == '1';
    }();
    const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
    if (posix_memalign(&p, kHuge, rounded) != 0) throw std::bad_alloc();
    if (huge) madvise(p, rounded, MADV_HUGEPAGE);
  } else {
    p = std::malloc(bytes > 0 ? bytes : 1);
    if (p == nullptr) throw std::bad_alloc();
  }
  return p;
}

}  // namespace tiepoint
