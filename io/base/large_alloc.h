// Large uninitialised arrays, on transparent huge pages when the user asks for them.
#pragma once

#include <cstddef>

namespace tiepoint {

// `bytes` of uninitialised memory, freed with std::free; throws std::bad_alloc. Arrays of
// 4 MiB and more are 2 MiB aligned and, with TIEPOINT_HUGEPAGES=1 in the environment,
// advised onto transparent huge pages (madvise; a no-op where the kernel has them off).
// Off by default: on this project's VM (THP "madvise", defrag "madvise") a fresh process's
// first touch of huge pages ran at 0.4-0.5 GB/s against 2.5 GB/s in 4 KiB pages, and SIFT's
// workspace on them made `extract` of fountain-P11 take 8.2-11.7 s (2.3-9.5 s in the
// kernel) instead of 8.4-8.7 s (2.0-2.2 s), and the dino's extraction 0.71-0.83 s instead
// of 0.61-0.65 s; on an H200 host they gained 4-8% of a 1 s extraction, and for the solvers'
// block arrays nothing measurable at 10^6 observations (README;
// bench/results/sift-hugepages-20261128.json).
void* AllocateLarge(size_t bytes);

}  // namespace tiepoint
