#include "io/base/binary_io.h"

#include <sys/stat.h>

#include <cerrno>
#include <fstream>
#include <iterator>

namespace tiepoint {

Status ReadWholeFile(const std::string& path, const char* what, std::vector<unsigned char>* bytes) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return Status::IoError(path + ": cannot open for reading (" + std::strerror(errno) + ")");
  }
  if (S_ISDIR(st.st_mode)) return Status::IoError(path + ": is a directory, not a " + what);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::IoError(path + ": cannot open for reading (" + std::strerror(errno) + ")");
  }
  bytes->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) return Status::IoError(path + ": read error");
  return Status::Ok();
}

}  // namespace tiepoint
