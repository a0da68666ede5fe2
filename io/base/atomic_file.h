// Writing output files so that a failure never leaves a half-written file behind.
//
// AtomicFile writes to "<path>.tmp-<pid>" in the same directory and renames it onto
// <path> on Commit(); if Commit() is never called (an error, an exception) the
// destructor removes the temporary. Rename within one directory is atomic on POSIX, so
// a reader (or a process killed mid-write) sees the complete old file or the complete
// new one, never a mix.
//
// Where <path> is a symbolic link (dangling or not) the file it points to is written,
// as a shell redirection would, and the link stays. Open() refuses, naming the cause, a
// <path> that is a directory or an existing file this process may not write; a file
// that is replaced keeps its permission bits.
//
// Every temporary that exists is listed in a process-wide registry, so that a fatal
// signal or an unrecoverable error can remove them before the process exits
// (RemoveLiveTemporaries, called by the command line's SIGINT/SIGTERM handling).
#pragma once

#include <fstream>
#include <string>
#include <utility>
#include <functional>
#include <vector>

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
  std::string path_;    // as given (messages name it)
  std::string target_;  // path_ with symbolic links followed: what is replaced
  std::string temp_path_;
  std::ofstream out_;
  bool registered_ = false;
  bool committed_ = false;
};

// Removes a file if it exists (used to clean up a temporary written by other means).
void RemoveFileQuietly(const std::string& path);

// A temporary directory (the caller creates it and fills it) that is removed with all it
// holds when this object is destroyed, or by RemoveLiveTemporaries when the process is
// stopped by a signal first. `tiepoint reconstruct` writes its model there and renames the
// parts into place at the end.
class LiveTemporaryDirectory {
 public:
  explicit LiveTemporaryDirectory(std::string path);
  ~LiveTemporaryDirectory();
  LiveTemporaryDirectory(const LiveTemporaryDirectory&) = delete;
  LiveTemporaryDirectory& operator=(const LiveTemporaryDirectory&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Output folders a command makes for its run (cli/output_dir.h), deepest first, each call's
// inside the earlier ones': RemoveLiveTemporaries and StopForSignal take back those that
// are empty once the temporaries are gone, so a run stopped by a signal or out of memory
// leaves no empty output folder. `make` (which creates them) runs under the registry's
// lock, so a stop never comes between the registering and the making. ForgetMadeFolders:
// the run keeps them (or took them back).
void RegisterMadeFolders(const std::vector<std::string>& deepest_first, const std::function<void()>& make);
void ForgetMadeFolders();

// Removes every AtomicFile temporary and LiveTemporaryDirectory that exists now and stops any further Commit()
// from renaming (they wait forever): for a process about to exit on a signal or a fatal
// error. Safe to call from any thread, not from a signal handler. Returns the number of
// temporaries removed.
int RemoveLiveTemporaries();

// Puts several finished outputs in place as one step, for a command whose result is more
// than one file (`tiepoint reconstruct`: sparse/, points.ply, overview.svg, report.json).
// Each `to` that exists is set aside, each `from` renamed onto its `to`, and the set-aside
// ones removed at the end; if a rename fails, the ones done are undone, so the old outputs
// come back whole and the message names the path. The renames run under the registry's
// lock: SIGINT/SIGTERM handling (StopForSignal) waits for them, so a signal never leaves a
// mix of old and new outputs. Once this has succeeded, OutputsComplete() is true for the
// rest of the process: it is a command's last step (batch runs each job in its own process).
Status ReplaceOutputs(const std::vector<std::pair<std::string, std::string>>& moves);
bool OutputsComplete();

// What the SIGINT/SIGTERM handling calls (from a thread, not a signal handler). Waits for a
// ReplaceOutputs in progress. If the outputs are complete, returns false and changes
// nothing: the signal came after the work was done, and the process should finish normally.
// Otherwise removes every live temporary, as RemoveLiveTemporaries does, sets *removed to
// their number and returns true: the process should exit.
bool StopForSignal(int* removed);

}  // namespace tiepoint
