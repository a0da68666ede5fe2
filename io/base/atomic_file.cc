#include "io/base/atomic_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

namespace tiepoint {
namespace {

// The live temporaries. A process-wide registry is the one way a signal or a fatal
// error elsewhere can find them; it holds only names and is guarded by one mutex.
struct Registry {
  std::mutex mutex;
  std::set<std::string> paths;
  std::set<std::string> dirs;  // temporary directories (LiveTemporaryDirectory)
};

Registry& Live() {
  static Registry* registry = new Registry;  // never destroyed: usable until _exit
  return *registry;
}

std::string Directory(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

// `path` with symbolic links followed (dangling ones included), at most 16 deep; a
// relative link target is relative to the link's directory.
std::string FollowLinks(std::string path) {
  for (int hop = 0; hop < 16; ++hop) {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return path;
    char target[4096];
    const ssize_t n = ::readlink(path.c_str(), target, sizeof(target) - 1);
    if (n <= 0) return path;
    target[n] = '\0';
    path = target[0] == '/' ? std::string(target) : Directory(path) + target;
  }
  return path;
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  target_ = FollowLinks(path_);
  temp_path_ = target_ + ".tmp-" + std::to_string(static_cast<long>(::getpid()));
}

AtomicFile::~AtomicFile() {
  if (!committed_) {
    if (out_.is_open()) out_.close();
    if (registered_) {
      std::lock_guard<std::mutex> lock(Live().mutex);
      RemoveFileQuietly(temp_path_);
      Live().paths.erase(temp_path_);
    }
  }
}

Status AtomicFile::Open() {
  const std::string shown = target_ == path_ ? path_ : path_ + " (-> " + target_ + ")";
  struct stat st;
  const bool exists = ::stat(target_.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) {
    return Status::IoError(shown + ": is a directory, cannot write a file there");
  }
  if (exists && ::access(target_.c_str(), W_OK) != 0) {
    return Status::IoError(shown + ": exists and cannot be replaced (" + std::strerror(errno) +
                           ")");
  }
  {
    std::lock_guard<std::mutex> lock(Live().mutex);
    Live().paths.insert(temp_path_);
    registered_ = true;
    out_.open(temp_path_, std::ios::binary | std::ios::trunc);
  }
  if (!out_) {
    return Status::IoError(shown + ": cannot open for writing (" + std::strerror(errno) + ")");
  }
  // A replaced file keeps its permissions (umask applies only to a new one).
  if (exists) ::chmod(temp_path_.c_str(), st.st_mode & 07777);
  return Status::Ok();
}

Status AtomicFile::Commit() {
  errno = 0;
  out_.flush();
  const bool good = static_cast<bool>(out_);
  const int flush_errno = errno;
  out_.close();
  if (!good || out_.fail()) {
    const int err = flush_errno != 0 ? flush_errno : errno;
    return Status::IoError(path_ + ": write failed (" +
                           (err != 0 ? std::string(std::strerror(err)) + "; " : std::string()) +
                           "disk full, file size limit or device error)");
    // the destructor removes the temporary
  }
  std::lock_guard<std::mutex> lock(Live().mutex);
  if (std::rename(temp_path_.c_str(), target_.c_str()) != 0) {
    return Status::IoError(path_ + ": cannot rename temporary into place (" +
                           std::strerror(errno) + ")");
  }
  Live().paths.erase(temp_path_);
  committed_ = true;
  return Status::Ok();
}

void RemoveFileQuietly(const std::string& path) { std::remove(path.c_str()); }

LiveTemporaryDirectory::LiveTemporaryDirectory(std::string path) : path_(std::move(path)) {
  std::lock_guard<std::mutex> lock(Live().mutex);
  Live().dirs.insert(path_);
}

LiveTemporaryDirectory::~LiveTemporaryDirectory() {
  std::lock_guard<std::mutex> lock(Live().mutex);
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  Live().dirs.erase(path_);
}

int RemoveLiveTemporaries() {
  // The lock may be held by a thread that died in the middle of an insert (out of
  // memory): try for a moment, then remove what can be read anyway.
  Registry& live = Live();
  bool locked = false;
  for (int i = 0; i < 200 && !(locked = live.mutex.try_lock()); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  int removed = 0;
  for (const std::string& path : live.paths) removed += ::unlink(path.c_str()) == 0;
  for (const std::string& dir : live.dirs) {
    std::error_code ec;
    removed += std::filesystem::remove_all(dir, ec) > 0;
  }
  // The mutex stays locked: no Commit() may rename a temporary into place from now on.
  (void)locked;
  return removed;
}

}  // namespace tiepoint
