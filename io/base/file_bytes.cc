#include "io/base/file_bytes.h"

#include <fcntl.h>
#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>

namespace tiepoint {
namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

Status ReadError(const std::string& path, int err) {
  return Status::IoError(path + ": read error (" +
                         (err != 0 ? std::strerror(err) : "unknown error") + ")");
}

constexpr size_t kPiece = size_t{8} << 20;

}  // namespace

Status ReadFileBytes(const std::string& path, int num_threads, FileBytes* out) {
  errno = 0;
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    return Status::IoError(path + ": cannot open for reading (" + std::strerror(errno) + ")");
  }
  struct stat st;
  const bool regular = ::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode);
  FileBytes result;
  result.regular = regular;
  if (regular) {
    const size_t size = static_cast<size_t>(st.st_size);
    result.data.reset(new (std::nothrow) char[std::max<size_t>(size, 1)]);
    if (!result.data) return Status::OutOfMemory(path + ": out of memory reading the file");
    result.size = size;
    const int64_t pieces = static_cast<int64_t>((size + kPiece - 1) / kPiece);
    const int threads = num_threads > 0 ? num_threads : omp_get_max_threads();
    std::atomic<int> error{0};  // errno of a failed read; -1: the file shrank
    char* const data = result.data.get();
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (threads > 1 && pieces > 1)
    for (int64_t k = 0; k < pieces; ++k) {
      size_t at = static_cast<size_t>(k) * kPiece;
      const size_t end = std::min(size, at + kPiece);
      while (at < end && error.load(std::memory_order_relaxed) == 0) {
        const ssize_t got = ::pread(fd.get(), data + at, end - at, static_cast<off_t>(at));
        if (got < 0) {
          if (errno == EINTR) continue;
          error.store(errno != 0 ? errno : EIO);
        } else if (got == 0) {
          error.store(-1);
        } else {
          at += static_cast<size_t>(got);
        }
      }
    }
    const int err = error.load();
    if (err == -1) return Status::IoError(path + ": read error (file shrank while being read)");
    if (err != 0) return ReadError(path, err);
  } else {
    size_t capacity = size_t{1} << 20;
    result.data.reset(new (std::nothrow) char[capacity]);
    if (!result.data) return Status::OutOfMemory(path + ": out of memory reading the file");
    for (;;) {
      if (result.size == capacity) {
        const size_t grown = capacity * 2;
        std::unique_ptr<char[]> bigger(new (std::nothrow) char[grown]);
        if (!bigger) return Status::OutOfMemory(path + ": out of memory reading the file");
        std::memcpy(bigger.get(), result.data.get(), result.size);
        result.data = std::move(bigger);
        capacity = grown;
      }
      errno = 0;
      const ssize_t got =
          ::read(fd.get(), result.data.get() + result.size, capacity - result.size);
      if (got < 0) {
        if (errno == EINTR) continue;
        return ReadError(path, errno);
      }
      if (got == 0) break;
      result.size += static_cast<size_t>(got);
    }
  }
  *out = std::move(result);
  return Status::Ok();
}

}  // namespace tiepoint
