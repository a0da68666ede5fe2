// tiepoint <command> [options]: the only place that reads argv, prints and exits.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "io/base/atomic_file.h"
#include "io/base/cuda_device.h"
#include "io/base/status.h"
#include "solver/blas_buffer.h"
#include "solver/parallel.h"
#include "tiepoint/build_info.h"

namespace tiepoint::cli {

int ReportError(const char* command, const Status& status) {
  std::fprintf(stderr, "tiepoint %s: error: %s\n", command, status.ToString().c_str());
  return status.ExitCode();
}

void AddMaskOptions(CLI::App& app, std::string* mask_path, std::string* camera_mask) {
  app.add_option("--mask-path", *mask_path,
                 "Feature masks, as COLMAP's: image NAME's mask is DIR/NAME.png (same size); features on its "
                 "black pixels are dropped; an image without one keeps all");
  app.add_option("--camera-mask", *camera_mask,
                 "One feature mask for every image (COLMAP's camera_mask_path): an image of their size, features on "
                 "its black pixels dropped (with --mask-path, both apply)");
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

// How many OpenBLAS threads `command` should run with, or 0 to leave OpenBLAS's own choice
// (`available`, one per core): 1 for a command that never calls BLAS; under a limit on
// address space or data (`ulimit -v`, `ulimit -d`, a cluster's h_vmem), as many as a
// quarter of the lower limit holds at 128 MiB each, at least 1 (see SetStartupEnvironment).
int BlasThreadsFor(const std::string& command, int available) {
  bool uses_blas = false;
  for (const char* c : {"ba", "bench", "bench-worker", "reconstruct", "batch"}) uses_blas |= command == c;
  if (!uses_blas) return 1;
  const size_t limit = MemoryLimitBytes();
  if (limit == 0) return 0;
  const size_t fit = limit / 4 / kOpenBlasBufferBytes;
  if (fit >= static_cast<size_t>(available)) return 0;
  return std::max(1, static_cast<int>(fit));
}

// Settings that libraries read only when the process starts. Where one is missing, this
// process sets it and runs itself again (about 5 ms); where that fails, it goes on.
// - OpenBLAS's pthread build (Debian's default BLAS, under CHOLMOD and Ceres) starts its
//   threads when it loads, and each spins on sched_yield for 2^28 cycles (~0.1 s) after
//   start and after every threaded call before it sleeps. On a 2-core machine that spinner
//   takes a core from the solvers' OpenMP threads: 14 of 20 `ba --solver cholmod
//   --threads 2` runs of data/sample-20-2000.bal stalled ~90 ms (2 of 20 with pcg-schur),
//   none with OPENBLAS_THREAD_TIMEOUT=4 (its minimum: sleep at once), which keeps BLAS
//   threaded for large factorizations.
// - OpenBLAS's threads (one per core but the first) each map a 128 MiB buffer as they
//   start, and where that fails, retry for ever. Under a limit on address space (`ulimit
//   -v`, a cluster's h_vmem) a command hung that way: `extract` of one small image under
//   `ulimit -v 200000` never ended on this 2-core VM, and on a 64-core node the threads
//   alone ask for 8 GB. Commands that never call BLAS (everything but `ba`, `bench` and its
//   `bench-worker`, `reconstruct`, whose CHOLMOD factorizations use it, and `batch`, whose
//   jobs decide for themselves) get OPENBLAS_NUM_THREADS=1: no threads, and the one buffer
//   is mapped only if BLAS is called. The others, under such a limit, get as many threads
//   as a quarter of it holds (BlasThreadsFor). (A CHOLMOD factorization needs 128 MiB free
//   for the calling thread's buffer: solver/blas_buffer.h checks for it first.)
// A setuid or file-capability binary (AT_SECURE) runs without these: glibc drops
// GLIBC_TUNABLES across such an exec, and `ba` would run itself again for ever.
// - glibc's malloc asks for transparent huge pages for its large chunks only with
//   glibc.malloc.hugetlb=1 (madvise, for kernels whose THP mode is "madvise", as on the
//   device machine; glibc 2.35 and later, older ones ignore it). `ba` first-touches
//   gigabytes (the file, the decoded text, the scene): on an H100 host a Final-13682-size
//   problem read in 0.48 s instead of 1.06 s as text and 1.23-1.43 s instead of 1.46 s as
//   .bz2, and `ba --device cuda` took 2.84-3.01 s instead of 3.07-3.19 s on the .bz2, at
//   the same peak memory (bench/results/ba-bz2-wall-h100-20261126.json, call 3).
void SetStartupEnvironment(const std::string& command, char** argv) {
  bool changed = false;
  using GetThreads = int (*)();
  const auto get = reinterpret_cast<GetThreads>(::dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  const bool blas_threads = get != nullptr && get() > 1;
  if (blas_threads && std::getenv("OPENBLAS_THREAD_TIMEOUT") == nullptr &&
      ::setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1) == 0) {
    changed = true;
  }
  if (blas_threads && std::getenv("OPENBLAS_NUM_THREADS") == nullptr) {
    const int n = BlasThreadsFor(command, get());
    if (n > 0 && ::setenv("OPENBLAS_NUM_THREADS", std::to_string(n).c_str(), 1) == 0) changed = true;
  }
  if (command == "ba") {
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    if (tunables == nullptr || std::strstr(tunables, "glibc.malloc.hugetlb") == nullptr) {
      const std::string value = tunables == nullptr || *tunables == '\0'
                                    ? std::string("glibc.malloc.hugetlb=1")
                                    : std::string(tunables) + ":glibc.malloc.hugetlb=1";
      if (::setenv("GLIBC_TUNABLES", value.c_str(), 1) == 0) changed = true;
    }
  }
  if (!changed || ::getauxval(AT_SECURE) != 0) return;
  const WideAffinity wide;  // restored if the exec fails and this process goes on
  ::execv("/proc/self/exe", argv);
}

// Faults (issue 19). SIGINT/SIGTERM stop the process cleanly: every unfinished output
// (AtomicFile temporaries) is removed and the exit code is 128 + signal (130, 143);
// a signal after a command has put all its outputs in place (ReplaceOutputs) lets it finish.
// The handler only writes the signal number into a pipe; a thread waiting on the pipe
// does the work outside signal context. The pipe's descriptor is the one mutable global
// here: a signal handler can reach nothing else.
int g_stop_pipe[2] = {-1, -1};
const char* g_command = "";

extern "C" void OnStopSignal(int sig) {
  const int saved = errno;
  const unsigned char s = static_cast<unsigned char>(sig);
  if (::write(g_stop_pipe[1], &s, 1) < 0) {}  // nothing else is safe here
  errno = saved;
}

// Exit code 3 (out of memory, or no GPU): the outputs are already removed, so the process
// leaves at once, without the libraries' exit handlers. OpenBLAS's joins its server
// threads, and a thread that started after the address space ran out (RLIMIT_AS, under
// load) retries its 128 MiB buffer allocation for ever: `batch` of a `ba` job that ran out
// of memory under `ulimit -v` hung at that join in 1 of ~30 runs beside two busy loops
// (cli.faults.batch-memory).
[[noreturn]] void ExitWithoutLibraryFinalizers(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(code);
}

// Out of memory in any thread (std::bad_alloc leaves no OpenMP region or thread alive,
// and code that cannot handle it lets it escape main): remove the unfinished outputs and
// exit with 3 and a message, instead of an abort inside the allocator.
[[noreturn]] void OnTerminate() {
  bool out_of_memory = false;
  if (const std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::bad_alloc&) {
      out_of_memory = true;
    } catch (...) {
    }
  }
  tiepoint::RemoveLiveTemporaries();
  if (out_of_memory) {
    std::fprintf(stderr,
                 "tiepoint %s: error: out of memory: an allocation failed (the input needs "
                 "more memory than this process may use); no output was left half-written\n",
                 g_command);
    ExitWithoutLibraryFinalizers(3);
  }
  std::fprintf(stderr, "tiepoint %s: internal error: uncaught exception\n", g_command);
  std::abort();
}

void InstallFaultHandling(const char* command) {
  g_command = command;
  // Past RLIMIT_FSIZE a write fails with EFBIG (reported as a failed write, temporary
  // removed) instead of SIGXFSZ killing the process and leaving the temporary behind.
  std::signal(SIGXFSZ, SIG_IGN);
  std::set_terminate(OnTerminate);
  if (::pipe2(g_stop_pipe, O_CLOEXEC) != 0) return;
  std::thread([] {
    unsigned char sig = 0;
    while (::read(g_stop_pipe[0], &sig, 1) < 0 && errno == EINTR) {
    }
    const char* name = sig == SIGINT ? "SIGINT" : "SIGTERM";
    int removed = 0;
    if (!tiepoint::StopForSignal(&removed)) {
      // The outputs were already in place (`reconstruct` puts its files there in one step):
      // the work is done, and stopping now would only make the exit code disagree with them.
      std::fprintf(stderr, "tiepoint %s: %s came after the outputs were complete; finishing\n",
                   g_command, name);
      std::fflush(stderr);
      return;
    }
    std::fprintf(stderr, "tiepoint %s: stopped by %s; %d unfinished output%s removed\n",
                 g_command, name, removed, removed == 1 ? "" : "s");
    std::fflush(stderr);
    ::_exit(128 + sig);
  }).detach();
  for (const int sig : {SIGINT, SIGTERM}) {
    struct sigaction old = {};
    // A signal the caller ignores (a background job's SIGINT, nohup) stays ignored.
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    struct sigaction sa = {};
    sa.sa_handler = OnStopSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(sig, &sa, nullptr);
  }
}

}  // namespace

// CUDA's hardware work queues (CUDA_DEVICE_MAX_CONNECTIONS, default 8) cost context
// creation and teardown time, so they are raised only where a command runs more streams
// than that, and never over the caller's own setting. History: every command but `extract`
// and the solvers used to get 32, after bench/sift_bench measured 24 streams at 2,251 ->
// 2,410 images/s with them on an H100 (bench/results/sift-h100-20261124.json). But
// `extract`, with 12 streams beside its decoding pool, took 3.6-3.8 s for 4,400 1080p JPEGs
// with 8 against 4.0-4.5 s with 32 on an H200 host
// (bench/results/extract-throughput-h200-20261126.json); `ba` (one stream) 3.02-3.20 s
// against 3.38-3.78 s on a Final-13682-size .bz2 (bench/results/ba-bz2-wall-h100-20261126.json);
// and `reconstruct` (8 streams) on the dino ring 0.88-0.91 s against 1.44-1.63 s end to end,
// context creation 0.25-0.28 s against 0.61-0.85 s, fountain-P11 2.64-2.78 s against
// 3.87-3.93 s, the same models (bench/results/reconstruct-cuda-connections-h200-20261127.json).
void RequestCudaQueues(int streams) {
  if (streams <= 8) return;
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", std::to_string(std::min(streams, 32)).c_str(), /*overwrite=*/0);
}

}  // namespace tiepoint::cli

int main(int argc, char** argv) {
  using namespace tiepoint::cli;
  const std::string command = argc > 1 ? argv[1] : "";
  SetStartupEnvironment(command, argv);
  InstallFaultHandling(argc > 1 ? argv[1] : "");  // argv outlives main: the stop thread keeps it
  CLI::App app{
      "tiepoint: structure from motion and bundle adjustment for BAL problems.\n"
      "Run `tiepoint <command> --help` for the options of a command."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("tiepoint ") + tiepoint::kVersion);

  CLI::App* ba = app.add_subcommand("ba", "Bundle-adjust a BAL problem (.txt or .txt.bz2) or a COLMAP model (a folder)");
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
  CLI::App* reconstruct =
      app.add_subcommand("reconstruct", "Photos to cameras and points: incremental SfM, COLMAP model out");
  const Runner run_reconstruct = RegisterReconstruct(*reconstruct);
  CLI::App* render = app.add_subcommand(
      "render-scene", "Render a textured synthetic scene from a ring of known cameras (PNG + *_par.txt)");
  const Runner run_render = RegisterRender(*render);
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
  const auto run = [&]() -> int {
    if (ba->parsed()) return run_ba();
    if (synth->parsed()) return run_synth();
    if (bench->parsed()) return run_bench();
    if (bench_worker->parsed()) return run_bench_worker();
    if (extract->parsed()) return run_extract();
    if (track->parsed()) return run_track();
    if (match->parsed()) return run_match();
    if (reconstruct->parsed()) return run_reconstruct();
    if (render->parsed()) return run_render();
    if (batch->parsed()) return run_batch();
    if (version->parsed()) return RunVersion();
    return 2;
  };
  const int code = run();
  if (code == 3) ExitWithoutLibraryFinalizers(code);
  return code;
}
