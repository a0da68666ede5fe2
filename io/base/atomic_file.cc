#include "io/base/atomic_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
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
  std::vector<std::string> made_folders;  // output folders a run made, deepest first
  std::atomic<bool> replacing{false};  // a ReplaceOutputs holds the lock
  std::atomic<bool> complete{false};   // a ReplaceOutputs has succeeded
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

namespace {

// Takes the registry's lock for a process about to exit. The lock may be held by a thread
// that died in the middle of an insert (out of memory): try for a moment, then go on
// anyway. A ReplaceOutputs in progress is waited for, however long it takes.
bool LockForExit(Registry& live) {
  for (int i = 0; i < 200 || live.replacing.load(); ++i) {
    if (live.mutex.try_lock()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

int RemoveAllLocked(Registry& live) {
  int removed = 0;
  for (const std::string& path : live.paths) removed += ::unlink(path.c_str()) == 0;
  for (const std::string& dir : live.dirs) {
    std::error_code ec;
    removed += std::filesystem::remove_all(dir, ec) > 0;
  }
  // Last, once the temporaries in them are gone: rmdir takes only empty folders.
  for (const std::string& dir : live.made_folders) ::rmdir(dir.c_str());
  return removed;
}

}  // namespace

void RegisterMadeFolders(const std::vector<std::string>& deepest_first, const std::function<void()>& make) {
  std::lock_guard<std::mutex> lock(Live().mutex);
  auto& made = Live().made_folders;
  made.insert(made.begin(), deepest_first.begin(), deepest_first.end());
  make();
}

void ForgetMadeFolders() {
  std::lock_guard<std::mutex> lock(Live().mutex);
  Live().made_folders.clear();
}

int RemoveLiveTemporaries() {
  Registry& live = Live();
  LockForExit(live);
  // The mutex stays locked: no Commit() may rename a temporary into place from now on.
  return RemoveAllLocked(live);
}

bool StopForSignal(int* removed) {
  Registry& live = Live();
  const bool locked = LockForExit(live);
  if (live.complete.load()) {
    if (locked) live.mutex.unlock();
    *removed = 0;
    return false;
  }
  *removed = RemoveAllLocked(live);  // and the mutex stays locked, as above
  return true;
}

bool OutputsComplete() { return Live().complete.load(); }

Status ReplaceOutputs(const std::vector<std::pair<std::string, std::string>>& moves) {
  namespace fs = std::filesystem;
  const std::string suffix = ".old-" + std::to_string(static_cast<long>(::getpid()));
  std::vector<std::string> aside;  // per move: where the old `to` was set aside, or ""
  Registry& live = Live();
  {
    live.replacing.store(true);
    std::lock_guard<std::mutex> lock(live.mutex);
    Status status = Status::Ok();
    size_t done = 0;
    for (; done < moves.size(); ++done) {
      const auto& [from, to] = moves[done];
      std::error_code ec;
      std::string old;
      if (fs::symlink_status(to, ec).type() != fs::file_type::not_found) {
        old = to + suffix;
        fs::rename(to, old, ec);
        if (ec) {
          status = Status::IoError(to + ": cannot replace: " + ec.message());
          break;
        }
      }
      aside.push_back(old);
      fs::rename(from, to, ec);
      if (ec) {
        status = Status::IoError(to + ": cannot move the new output into place: " + ec.message());
        if (!old.empty()) fs::rename(old, to, ec);
        aside.pop_back();
        break;
      }
    }
    if (!status.ok()) {
      // Undo in reverse order: the new outputs go back to their temporaries, the old come back.
      for (size_t i = aside.size(); i-- > 0;) {
        std::error_code ec;
        fs::rename(moves[i].second, moves[i].first, ec);
        if (!aside[i].empty()) fs::rename(aside[i], moves[i].second, ec);
      }
      live.replacing.store(false);
      return status;
    }
    live.complete.store(true);
    live.replacing.store(false);
  }
  for (const std::string& old : aside) {
    if (old.empty()) continue;
    std::error_code ec;
    fs::remove_all(old, ec);
  }
  return Status::Ok();
}

}  // namespace tiepoint
