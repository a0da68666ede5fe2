// tiepoint <command> [options]: the only place that reads argv, prints and exits.
#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "io/base/cuda_device.h"
#include "io/base/status.h"
#include "solver/parallel.h"
#include "tiepoint/build_info.h"

namespace tiepoint::cli {

int ReportError(const char* command, const Status& status) {
  std::fprintf(stderr, "tiepoint %s: error: %s\n", command, status.ToString().c_str());
  return status.ExitCode();
}

Status CheckOutputDirectory(const char* option, const std::string& path) {
  if (path.empty()) return Status::Ok();
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return Status::IoError(std::string(option) + " " + path + ": cannot write into directory '" +
                           dir + "' (" + std::strerror(errno) + ")");
  }
  return Status::Ok();
}

namespace {

int RunVersion() {
  std::printf("tiepoint %s (commit %s)\nbuild: %s\n", kVersion, kGitCommit, kBuildFlags);
  std::vector<CudaDeviceInfo> devices;
  const Status s = QueryCudaDevices(&devices);
  if (!s.ok()) {
    std::printf("cuda: %s\n", s.message().c_str());
  } else {
    for (const auto& d : devices) {
      std::printf("cuda device %d: %s, %.1f GiB, compute capability %d.%d, %d SMs\n", d.index,
                  d.name.c_str(), d.total_memory_bytes / (1024.0 * 1024.0 * 1024.0),
                  d.compute_capability_major, d.compute_capability_minor, d.multiprocessors);
    }
  }
  return 0;
}

// OpenBLAS's pthread build (Debian's default BLAS, under CHOLMOD and Ceres) starts its
// threads when it loads, and each spins on sched_yield for 2^28 cycles (~0.1 s) after
// start and after every threaded call before it sleeps. On a 2-core machine that spinner
// takes a core from the solvers' OpenMP threads: 14 of 20 `ba --solver cholmod --threads 2`
// runs of data/sample-20-2000.bal stalled ~90 ms (2 of 20 with pcg-schur), none with
// OPENBLAS_THREAD_TIMEOUT=4 (its minimum: sleep at once), which keeps BLAS threaded for
// large factorizations. OpenBLAS reads it only when it loads, so when it is unset this
// process runs itself again with it set (about 5 ms); where that fails, it goes on.
void CalmOpenBlasThreads(char** argv) {
  if (std::getenv("OPENBLAS_THREAD_TIMEOUT") != nullptr) return;
  using GetThreads = int (*)();
  const auto get = reinterpret_cast<GetThreads>(::dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  if (get == nullptr || get() <= 1) return;  // another BLAS, or no OpenBLAS threads
  if (::setenv("OPENBLAS_THREAD_TIMEOUT", "4", /*overwrite=*/1) != 0) return;
  const WideAffinity wide;  // restored if the exec fails and this process goes on
  ::execv("/proc/self/exe", argv);
}

}  // namespace
}  // namespace tiepoint::cli

int main(int argc, char** argv) {
  using namespace tiepoint::cli;
  CalmOpenBlasThreads(argv);
  // More hardware work queues than CUDA's default 8, unless the caller chose: streams
  // beyond 8 (extract --cuda-streams 24) otherwise share queues and wait on each other.
  // Measured on an H100 with bench/sift_bench: 24 streams, median 2,251 -> 2,410 images/s
  // (bench/results/sift-h100-20261124.json). Set before the CUDA runtime starts.
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", /*overwrite=*/0);
  CLI::App app{
      "tiepoint: structure from motion and bundle adjustment for BAL problems.\n"
      "Run `tiepoint <command> --help` for the options of a command."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("tiepoint ") + tiepoint::kVersion);

  CLI::App* ba = app.add_subcommand("ba", "Bundle-adjust a BAL problem (.txt or .txt.bz2)");
  const Runner run_ba = RegisterBa(*ba);
  CLI::App* synth = app.add_subcommand("synth", "Generate a synthetic BAL problem and its truth");
  const Runner run_synth = RegisterSynth(*synth);
  CLI::App* bench = app.add_subcommand("bench", "Compare solvers side by side on BAL problems");
  const Runner run_bench = RegisterBench(*bench);
  CLI::App* bench_worker = app.add_subcommand("bench-worker", "One solve of `tiepoint bench`")->group("");
  const Runner run_bench_worker = RegisterBenchWorker(*bench_worker);
  CLI::App* extract = app.add_subcommand("extract", "Detect and describe features (SIFT) in images");
  const Runner run_extract = RegisterExtract(*extract);
  CLI::App* track = app.add_subcommand("track", "Track FAST corners through an image sequence (LK)");
  const Runner run_track = RegisterTrack(*track);
  CLI::App* match = app.add_subcommand("match", "Match features between image pairs (ratio test, RANSAC)");
  const Runner run_match = RegisterMatch(*match);
  CLI::App* batch = app.add_subcommand("batch", "Run a job list (ba, bench, reconstruct): resumable, sharded, Slurm");
  const Runner run_batch = RegisterBatch(*batch);
  CLI::App* version = app.add_subcommand("version", "Print version, commit, build flags and GPUs");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    // --help and --version exit 0; every usage error exits 2 like bad input.
    return code == 0 ? 0 : 2;
  }
  if (ba->parsed()) return run_ba();
  if (synth->parsed()) return run_synth();
  if (bench->parsed()) return run_bench();
  if (bench_worker->parsed()) return run_bench_worker();
  if (extract->parsed()) return run_extract();
  if (track->parsed()) return run_track();
  if (match->parsed()) return run_match();
  if (batch->parsed()) return run_batch();
  if (version->parsed()) return RunVersion();
  return 2;
}
