// Where tests find ../shared/data: $TIEPOINT_SHARED_DATA, else the path CMake compiled in.
#pragma once

#include <cstdlib>
#include <string>
#include <sys/stat.h>

namespace tiepoint::testing {

inline std::string SharedDataDir() {
  if (const char* env = std::getenv("TIEPOINT_SHARED_DATA")) return env;
  return TIEPOINT_DEFAULT_SHARED_DATA;
}

inline bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Full path of a shared data file, or "" when absent (the test then skips with a message).
inline std::string SharedFile(const std::string& relative) {
  const std::string path = SharedDataDir() + "/" + relative;
  return FileExists(path) ? path : std::string();
}

}  // namespace tiepoint::testing

#define TIEPOINT_REQUIRE_SHARED(var, relative)                                          \
  const std::string var = ::tiepoint::testing::SharedFile(relative);                    \
  if (var.empty()) {                                                                    \
    GTEST_SKIP() << "shared data " << relative << " not found under "                   \
                 << ::tiepoint::testing::SharedDataDir() << " (set TIEPOINT_SHARED_DATA)"; \
  }
