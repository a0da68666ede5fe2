// A large host memcpy split over the calling thread's OpenMP team.
#pragma once

#include <cstddef>

namespace tiepoint {

// memcpy(dst, src, bytes) on `threads` threads of the calling thread's OpenMP team (0:
// omp_get_max_threads()), one slice each. The team, not new threads: after a parallel
// region its threads spin for a while, so work given to them starts at once, where other
// threads would compete with the spinning ones for the cores.
void ParallelCopy(void* dst, const void* src, size_t bytes, int threads);

}  // namespace tiepoint
