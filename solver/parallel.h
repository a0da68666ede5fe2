// One OpenMP parallel region, or none at all for a single thread.
//
// Loops inside `body` are orphaned worksharing loops (`#pragma omp for`, reductions
// included): with threads > 1 they split over the team of the region opened here; with
// threads <= 1 no region is opened and each loop runs whole on the calling thread (an
// orphaned `omp for` outside any parallel region binds to a team of one).
//
// Why not `#pragma omp parallel num_threads(1)`: libgomp still forms a team of one and
// ends it with a futex system call, about 0.25 us per region on this project's machines;
// a small problem's LM iteration passes through ~20 regions, which made the fixed cost of
// solving a 1-observation BAL file several times its arithmetic.
#pragma once

namespace tiepoint {

template <typename Body>
inline void ParallelRegion(int threads, Body&& body) {
  if (threads > 1) {
#pragma omp parallel num_threads(threads)
    body();
  } else {
    body();
  }
}

// With OMP_PROC_BIND set, libgomp binds the initial thread to the first place before
// main. Whatever inherits that one-place mask runs on that place alone: a process started
// by exec (tiepoint re-running itself, `tiepoint bench` starting a solve), whose own libgomp
// then puts every thread there (a two-thread solve on one core ran 1.8x slower), and
// std::threads (Ceres's pool). A WideAffinity widens the calling thread's mask to the union
// of the places (libgomp builds them from the mask the process started with, or from
// OMP_PLACES) for its lifetime: around an exec (restored if the exec fails) or while the
// threads are made. Without OMP_PROC_BIND it does nothing.
class WideAffinity {
 public:
  WideAffinity();
  ~WideAffinity();
  WideAffinity(const WideAffinity&) = delete;
  WideAffinity& operator=(const WideAffinity&) = delete;
  bool widened() const { return widened_; }

 private:
  bool widened_ = false;
  unsigned char saved_[128] = {};  // the cpu_set_t it replaced
};

}  // namespace tiepoint
