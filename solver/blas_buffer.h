// Room for OpenBLAS's buffer before a CHOLMOD factorization, under a limit on memory.
#pragma once

#include <cstddef>

#include "io/base/status.h"

namespace tiepoint {

// OpenBLAS maps a 128 MiB buffer for the calling thread at its first call, and where that
// mapping fails (a `ulimit -v` or `-d` with too little left) it retries for ever: a
// CHOLMOD factorization then hangs instead of failing. Under such a limit, before the
// process's first factorization, this maps and releases that buffer plus `factor_bytes`
// (what the factorization itself will allocate) and the margin below; where that fails it
// returns kOutOfMemory naming the limit, so the run ends with "out of memory" (exit 3)
// instead. Once a check has passed (OpenBLAS keeps its buffer), and without a limit, it
// returns Ok at once.
Status CheckRoomForBlasBuffer(const char* what, size_t factor_bytes);

}  // namespace tiepoint
