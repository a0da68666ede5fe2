// WideAffinity: with OMP_PROC_BIND set, libgomp binds the initial thread to one
// place before main; the mask handed to an exec'd process must span all places again.
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "solver/parallel.h"

namespace tiepoint {
namespace {

int AffinityCount() {
  cpu_set_t s;
  if (sched_getaffinity(0, sizeof s, &s) != 0) return -1;
  return CPU_COUNT(&s);
}

TEST(ParallelAffinity, WidensTheBoundMaskToAllPlacesAndRestoresIt) {
  const char* bind = std::getenv("OMP_PROC_BIND");
  if (bind == nullptr) {
    // Not bound here: run this test again in a process that starts with OMP_PROC_BIND=true.
    if (AffinityCount() < 2) GTEST_SKIP() << "needs at least 2 CPUs in this process's mask";
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("OMP_PROC_BIND", "true", 1);
      execl("/proc/self/exe", "parallel_test",
            "--gtest_filter=ParallelAffinity.WidensTheBoundMaskToAllPlacesAndRestoresIt",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "the bound run failed (see its output above)";
    return;
  }
  // libgomp bound this process's initial thread to its first place.
  const int bound = AffinityCount();
  ASSERT_GE(bound, 1);
  {
    const WideAffinity wide;
    const int widened = AffinityCount();
    EXPECT_TRUE(wide.widened());
    EXPECT_GT(widened, bound) << "an exec'd process would start on the first place only";
  }
  EXPECT_EQ(AffinityCount(), bound);
}

}  // namespace
}  // namespace tiepoint
