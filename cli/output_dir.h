// An output folder made for a command's run, and taken back if the run fails before
// writing anything into it.
#pragma once

#include <string>
#include <vector>

#include "io/base/status.h"

namespace tiepoint::cli {

class OutputDirectory {
 public:
  OutputDirectory() = default;
  OutputDirectory(const OutputDirectory&) = delete;
  OutputDirectory& operator=(const OutputDirectory&) = delete;
  // Removes the folders Create made, deepest first, where they are still empty, unless
  // Keep() was called: a run that fails with an error leaves no empty folder behind (what it
  // wrote stays). A run stopped by SIGINT/SIGTERM or out of memory (cli/main.cc ends those
  // at once, without this destructor) leaves none either: the folders are registered with
  // io/base/atomic_file.h's RegisterMadeFolders, which that stop takes back. One
  // OutputDirectory per process at a time (a command's).
  ~OutputDirectory();

  // Makes `dir` and its missing parents. Errors (kIoError) name the path:
  //   "<dir>: cannot create the output directory (<reason>)"
  // It may be called again for folders inside the first (extract's subfolders for the
  // images of a folder's subfolders): they are taken back too, before their parents.
  Status Create(const std::string& dir);
  // The run succeeded: what Create made stays, empty or not.
  void Keep();

 private:
  std::vector<std::string> made_;  // deepest first
};

}  // namespace tiepoint::cli
