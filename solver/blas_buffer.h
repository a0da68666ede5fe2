// Room for OpenBLAS's buffer before a CHOLMOD factorization, under a limit on memory.
#pragma once

#include <cstddef>

#include "io/base/status.h"

namespace tiepoint {

// OpenBLAS's buffer per thread (its BUFFER_SIZE on x86-64), mapped at the thread's start
// (server threads) or first call (the caller).
inline constexpr size_t kOpenBlasBufferBytes = size_t{128} << 20;

// The lower of the process's limits on address space and data (`ulimit -v`, `ulimit -d`,
// a cluster's h_vmem), in bytes; 0 where neither is set.
size_t MemoryLimitBytes();

// OpenBLAS maps a 128 MiB buffer for the calling thread at its first call, and where that
// mapping fails (a `ulimit -v` or `-d` with too little left) it retries for ever: a
// CHOLMOD factorization then hangs instead of failing. Under such a limit, before the
// process's first factorization, this maps and releases that buffer plus `factor_bytes`
// (what the factorization itself will allocate) and the margin below; where that fails it
// returns kOutOfMemory naming the limit, so the run ends with "out of memory" (exit 3)
// instead. Without a limit, and once a check has passed, it returns Ok at once: OpenBLAS
// keeps the buffer it maps at the first BLAS call after the check. (A heuristic: a process
// whose first factorizations call no BLAS, CHOLMOD's simplicial ones, and whose free room
// then shrinks below the buffer can still hang; and `factor_bytes` is an estimate.)
Status CheckRoomForBlasBuffer(const char* what, size_t factor_bytes);

}  // namespace tiepoint
