#include "solver/parallel.h"

#include <omp.h>
#include <sched.h>

#include <cstring>
#include <vector>

namespace tiepoint {

static_assert(sizeof(cpu_set_t) <= 128, "cpu_set_t does not fit WideAffinity::saved_");

WideAffinity::WideAffinity() {
  if (omp_get_proc_bind() == omp_proc_bind_false) return;
  const int places = omp_get_num_places();
  if (places <= 0) return;
  cpu_set_t wide;
  CPU_ZERO(&wide);
  for (int p = 0; p < places; ++p) {
    std::vector<int> ids(static_cast<size_t>(omp_get_place_num_procs(p)));
    if (ids.empty()) continue;
    omp_get_place_proc_ids(p, ids.data());
    for (int id : ids) {
      if (id >= 0 && id < CPU_SETSIZE) CPU_SET(id, &wide);
    }
  }
  cpu_set_t current;
  if (CPU_COUNT(&wide) == 0 || sched_getaffinity(0, sizeof current, &current) != 0) return;
  if (CPU_EQUAL(&wide, &current)) return;
  if (sched_setaffinity(0, sizeof wide, &wide) != 0) return;
  std::memcpy(saved_, &current, sizeof current);
  widened_ = true;
}

WideAffinity::~WideAffinity() {
  if (!widened_) return;
  cpu_set_t mask;
  std::memcpy(&mask, saved_, sizeof mask);
  sched_setaffinity(0, sizeof mask, &mask);
}

}  // namespace tiepoint
