// Replays a fuzz target's inputs without libFuzzer: runs LLVMFuzzerTestOneInput on every
// file named on the command line and every file in the directories named (not
// recursive). Built with the project's compiler under -DTIEPOINT_ASAN=ON, this is how CI
// checks that the committed corpus (and every crash once found) still runs clean.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_check.h"

namespace {

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (!IsDirectory(arg)) {
      files.push_back(arg);
      continue;
    }
    DIR* dir = ::opendir(arg.c_str());
    if (dir == nullptr) {
      std::fprintf(stderr, "replay: cannot open directory %s\n", arg.c_str());
      return 2;
    }
    while (const dirent* e = ::readdir(dir)) {
      const std::string path = arg + "/" + e->d_name;
      if (e->d_name[0] != '.' && !IsDirectory(path)) files.push_back(path);
    }
    ::closedir(dir);
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "replay: no input files\n");
    return 2;
  }
  for (const std::string& path : files) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
      return 2;
    }
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
    // A copy of exactly the input's size, so reading one byte past it is an ASan error.
    std::vector<uint8_t> data(bytes.begin(), bytes.end());
    static const uint8_t kNothing = 0;  // libFuzzer passes a valid pointer for size 0 too
    LLVMFuzzerTestOneInput(data.empty() ? &kNothing : data.data(), data.size());
  }
  std::printf("replay: %zu inputs ran clean\n", files.size());
  return 0;
}
