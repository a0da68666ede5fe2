#include "io/base/input_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <utility>

namespace tiepoint {

Status RefuseDirectory(const std::string& path, const std::string& what) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return Status::IoError(path + ": is a directory, not " + what);
  return Status::Ok();
}

Status OpenInputFile(const std::string& path, const std::string& what, std::ifstream* in,
                     std::ios::openmode mode) {
  TIEPOINT_RETURN_IF_ERROR(RefuseDirectory(path, what));
  errno = 0;
  in->open(path, mode | std::ios::in);
  if (!*in) {
    return Status::IoError(path + ": cannot open for reading (" +
                           (errno != 0 ? std::strerror(errno) : "unknown error") + ")");
  }
  return Status::Ok();
}

Status SeenFiles::AddOnce(const std::string& path, const std::string& what) {
  std::string earlier;
  if (Add(path, &earlier)) return Status::Ok();
  return Status::InvalidInput(path + (earlier == path ? ": the same " + what + " given twice"
                                                      : ": the same " + what + " as " + earlier));
}

bool SeenFiles::Add(const std::string& path, std::string* earlier) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) return true;
  const auto [it, fresh] = seen_.emplace(std::make_pair(uint64_t(st.st_dev), uint64_t(st.st_ino)), path);
  if (!fresh) *earlier = it->second;
  return fresh;
}

}  // namespace tiepoint
