#include "io/base/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace tiepoint {

AtomicFile::AtomicFile(std::string path)
    : path_(std::move(path)),
      temp_path_(path_ + ".tmp-" + std::to_string(static_cast<long>(::getpid()))) {}

AtomicFile::~AtomicFile() {
  if (!committed_) {
    if (out_.is_open()) out_.close();
    RemoveFileQuietly(temp_path_);
  }
}

Status AtomicFile::Open() {
  out_.open(temp_path_, std::ios::binary | std::ios::trunc);
  if (!out_) {
    return Status::IoError(path_ + ": cannot open for writing (" + std::strerror(errno) + ")");
  }
  return Status::Ok();
}

Status AtomicFile::Commit() {
  out_.flush();
  const bool good = static_cast<bool>(out_);
  out_.close();
  if (!good || out_.fail()) {
    RemoveFileQuietly(temp_path_);
    return Status::IoError(path_ + ": write failed (disk full or device error)");
  }
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    RemoveFileQuietly(temp_path_);
    return Status::IoError(path_ + ": cannot rename temporary into place (" + err + ")");
  }
  committed_ = true;
  return Status::Ok();
}

void RemoveFileQuietly(const std::string& path) { std::remove(path.c_str()); }

}  // namespace tiepoint
