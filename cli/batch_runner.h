// `tiepoint batch`: runs a job list to the end, one `tiepoint <kind>` process per job.
//
// The run directory RUN/ holds:
//   jobs/<name>/             a finished job (done or failed): the command's outputs, its report,
//                            stdout.txt, stderr.txt and job.json (the completion record)
//   jobs/.<name>.tmp-<host>-<pid>/   a job being run; renamed to jobs/<name>/ when it ends
//   shards/<I>-of-<N>.json   what each run (shard) planned and where it stands; .lock beside it
//   summary.json, summary.svg, written by an unsharded run and by `tiepoint batch summarize`
//
// Crash safety. A job counts as finished only when jobs/<name>/job.json exists and its key
// matches: the outputs are written into the temporary directory, which is renamed into place
// (swapped atomically with an older result), and only then is job.json renamed in from its
// own temporary. A kill at any moment (SIGKILL included) leaves either a finished job or
// none; the next run removes the temporaries of its own jobs and runs them again. Job
// processes die with the batch (PR_SET_PDEATHSIG).
//
// Shards. Shard I of N runs the jobs whose index % N == I and writes only its own jobs'
// directories and its own shards/ file, so shards on any number of machines that share RUN/
// never write the same file.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/batch_jobs.h"
#include "io/base/status.h"

namespace tiepoint::cli {

struct BatchRunOptions {
  std::string job_file;      // for the records and messages
  std::string run_dir;       // RUN/
  int max_jobs = 1;          // CPU jobs at once (--jobs)
  int shard_index = 0;       // --shard I/N
  int shard_count = 1;
  bool retry_failed = false;
  bool dry_run = false;
  bool verify_inputs = false;  // key by content hashes instead of size + mtime
  bool show_progress = false;  // a progress line on stderr (only when it is a terminal)
};

// Runs (or with dry_run lists) this shard's jobs. Returns the process exit code: 0 every job
// of the shard done; 1 some failed (this run or before, without --retry-failed); 2 bad run
// directory or options; 130 / 143 stopped by SIGINT / SIGTERM (running jobs stopped, their
// partial outputs removed, what was left printed).
int RunBatch(const BatchRunOptions& options, std::vector<BatchJob> jobs);

// jobs/<name> inside the run directory.
std::string JobDirectory(const std::string& run_dir, const std::string& name);

// This machine's host name (for temporary names and records).
std::string HostName();

// True when a process with this id runs on this machine.
bool ProcessAlive(long pid);

// "2026-11-24T10:12:13Z".
std::string UtcNow();

}  // namespace tiepoint::cli
