// A whole file read into memory, by several threads for a regular file.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "io/base/status.h"

namespace tiepoint {

struct FileBytes {
  std::unique_ptr<char[]> data;  // `size` bytes (not NUL-terminated)
  size_t size = 0;
  bool regular = false;  // a regular file (size known from fstat); else a pipe, device...
};

// Reads all of `path`. A regular file is read with pread in 8 MiB pieces on up to
// `num_threads` threads (0: all the process may use): page-cache copies run at memory
// speed only when several cores share them. Anything else (a pipe, /dev/stdin) is read
// sequentially to its end. The buffer is not zero-filled first.
// Errors (kIoError; kOutOfMemory when the buffer cannot be had):
//   "<path>: cannot open for reading (<strerror>)"
//   "<path>: read error (<strerror>)"        (e.g. "Is a directory")
//   "<path>: read error (file shrank while being read)"
Status ReadFileBytes(const std::string& path, int num_threads, FileBytes* out);

}  // namespace tiepoint
