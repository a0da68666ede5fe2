// Writing output files so that a failure never leaves a half-written file behind.
//
// AtomicFile writes to "<path>.tmp-<pid>" in the same directory and renames it onto
// <path> on Commit(); if Commit() is never called (an error, an exception) the
// destructor removes the temporary. Rename within one directory is atomic on POSIX.
#pragma once

#include <fstream>
#include <string>

#include "io/base/status.h"

namespace tiepoint {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Opens the temporary for writing (binary). Names the path on failure.
  Status Open();
  // The stream to write into; valid after a successful Open().
  std::ofstream& stream() { return out_; }
  const std::string& temp_path() const { return temp_path_; }
  const std::string& path() const { return path_; }
  // Flushes, closes, checks for write errors and renames onto the final path.
  Status Commit();

 private:
  std::string path_;
  std::string temp_path_;
  std::ofstream out_;
  bool committed_ = false;
};

// Removes a file if it exists (used to clean up a temporary written by other means).
void RemoveFileQuietly(const std::string& path);

}  // namespace tiepoint
