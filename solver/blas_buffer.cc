#include "solver/blas_buffer.h"

#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <string>

namespace tiepoint {

size_t MemoryLimitBytes() {
  rlim_t lowest = RLIM_INFINITY;
  for (const int resource : {RLIMIT_AS, RLIMIT_DATA}) {
    struct rlimit limit = {};
    if (::getrlimit(resource, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) lowest = std::min(lowest, limit.rlim_cur);
  }
  return lowest == RLIM_INFINITY ? 0 : static_cast<size_t>(lowest);
}

Status CheckRoomForBlasBuffer(const char* what, size_t factor_bytes) {
  static std::atomic<bool> passed{false};
  if (passed.load()) return Status::Ok();
  const size_t lowest = MemoryLimitBytes();
  if (lowest == 0) {
    passed = true;
    return Status::Ok();
  }
  constexpr size_t kMargin = size_t{16} << 20;  // its alignment and bookkeeping, CHOLMOD's workspace
  const size_t bytes = kOpenBlasBufferBytes + kMargin + factor_bytes;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return Status::OutOfMemory(std::string(what) + ": the CHOLMOD factorization needs " +
                               std::to_string((bytes + (1 << 20) - 1) >> 20) +
                               " MiB more address space (128 MiB of it OpenBLAS's buffer) than the "
                               "process's limit of " +
                               std::to_string(lowest >> 20) +
                               " MiB (ulimit -v / -d) leaves; raise the limit, or use a matrix-free "
                               "solver (pcg-schur), which needs no BLAS");
  }
  ::munmap(p, bytes);
  passed = true;
  return Status::Ok();
}

}  // namespace tiepoint
