#include "bench/solver_bench.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <thread>
#include <memory>
#include <new>
#include <numeric>
#include <set>

#include "bench/svg_plot.h"
#include "io/base/cuda_device.h"
#include "io/base/device.h"
#include "io/bal.h"
#include "io/base/timer.h"
#include "io/report.h"
#include "solver/bundle_adjuster.h"
#include "solver/parallel.h"

namespace tiepoint {
namespace {

// "pcg-schur" or "pcg-schur@cuda" / "pcg-schur@cpu": the solver and where it runs.
Status ParseSolverName(const std::string& name, SolverType* type, Device* device) {
  const auto at = name.find('@');
  *device = Device::kCpu;
  if (at != std::string::npos) {
    TIEPOINT_RETURN_IF_ERROR(DeviceFromString(name.substr(at + 1), device));
  }
  return SolverTypeFromString(name.substr(0, at), type);
}


// How often the parent wakes to report elapsed time while a child is silent.
constexpr int kProgressIntervalMs = 250;

std::string ProblemName(const std::string& path) {
  std::string name = path.substr(path.find_last_of('/') + 1);
  for (const char* suffix : {".bz2", ".txt", ".bal"}) {
    const size_t n = std::strlen(suffix);
    if (name.size() > n && name.compare(name.size() - n, n, suffix) == 0) {
      name.resize(name.size() - n);
    }
  }
  return name.empty() ? path : name;
}

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Opens the file for reading (and closes it) so a missing or unreadable problem is named
// before any child starts, rather than as the same failure once per solver.
Status CheckReadable(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status::IoError("cannot open problem '" + path + "' for reading: " +
                           std::strerror(errno));
  }
  struct stat st;
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  ::close(fd);
  if (!regular) {
    return Status::IoError("problem '" + path + "' is not a regular file (expected a BAL "
                           ".txt or .txt.bz2 file)");
  }
  return Status::Ok();
}

// ---- Child side -------------------------------------------------------------------------

// Writes all of `text` to fd; false when the parent is gone.
bool WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

void Send(int fd, const nlohmann::json& message) {
  // Replace invalid UTF-8 (a path in a message) rather than throw in the child.
  WriteAll(fd, message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

void SendError(int fd, const Status& status) {
  Send(fd, {{"type", "error"},
            {"code", static_cast<int>(status.code())},
            {"message", status.message()}});
}

// Reads, solves, reports; never returns. Exit code: 0 with a result sent, else the
// Status exit code of what failed.
[[noreturn]] void RunChild(int fd, const std::string& path, SolverType type, Device device,
                           const SolverBenchOptions& options) {
  int code = 1;
  try {
    struct rusage ru;
    long long baseline_kib = 0;
    if (::getrusage(RUSAGE_SELF, &ru) == 0) baseline_kib = ru.ru_maxrss;
    Send(fd, {{"type", "start"}, {"baseline_rss_kib", baseline_kib}});

    Scene scene;
    const Timer load_timer;
    // As `tiepoint ba` does: the CUDA context is created while the file is read.
    std::thread warm_up;
    if (device == Device::kCuda) warm_up = std::thread(WarmUpCuda);
    Status s = ReadBal(path, &scene);
    if (warm_up.joinable()) warm_up.join();
    if (!s.ok()) {
      SendError(fd, s);
      ::_exit(s.ExitCode());
    }
    Send(fd, {{"type", "loaded"},
              {"load_time_s", load_timer.Seconds()},
              {"num_cameras", scene.num_cameras()},
              {"num_points", scene.num_points()},
              {"num_observations", scene.num_observations()}});
    // The parent wakes to read that message: a millisecond for it to go back to waiting,
    // so that its work does not overlap the first microseconds of the timed solve.
    ::usleep(1000);

    BundleAdjusterOptions bo;
    bo.solver = type;
    bo.device = device;
    bo.max_iterations = options.max_iterations;
    bo.num_threads = options.num_threads;
    // Progress for the terminal, at most every kProgressIntervalMs: a message per
    // iteration (JSON, a pipe write, the parent waking on this 2-core machine) cost about
    // 8 us inside the timed solve, more than a whole LM iteration of a small problem.
    // The trace itself comes from the summary, after the solve.
    bo.callback = [fd, last = Timer()](const IterationSummary& it) mutable {
      if (last.Seconds() * 1e3 < kProgressIntervalMs) return;
      last.Reset();
      Send(fd, {{"type", "iteration"}, {"iteration", it.iteration}, {"cost", it.cost}});
    };
    std::unique_ptr<BundleAdjuster> adjuster;
    BundleAdjusterSummary summary;
    if ((s = bo.Check(scene.num_cameras())).ok() &&
        (s = BundleAdjuster::Create(bo, &adjuster)).ok()) {
      s = adjuster->Solve(&scene, &summary);
    }
    if (!s.ok()) {
      SendError(fd, s);
      ::_exit(s.ExitCode());
    }
    nlohmann::json trace = nlohmann::json::array();
    for (const IterationSummary& it : summary.trace) {
      trace.push_back({it.iteration, it.cost, it.time_s});
    }
    Send(fd, {{"type", "result"},
              {"num_threads", summary.num_threads},
              {"initial_cost", summary.initial_cost},
              {"final_cost", summary.final_cost},
              {"iterations", summary.iterations},
              {"successful_iterations", summary.successful_iterations},
              {"termination", ToString(summary.termination)},
              {"usable", summary.IsSolutionUsable()},
              {"message", summary.message},
              {"total_time_s", summary.total_time_s},
              {"linear_solver_time_s", summary.linear_solver_time_s},
              {"evaluation_time_s", summary.evaluation_time_s},
              {"trace", trace}});
    code = 0;
  } catch (const std::bad_alloc&) {
    const Status s = Status::OutOfMemory("out of host memory while solving '" + path + "'");
    SendError(fd, s);
    code = s.ExitCode();
  } catch (const std::exception& e) {
    SendError(fd, Status::Internal(std::string("unexpected exception: ") + e.what()));
    code = 1;
  }
  ::_exit(code);
}

}  // namespace

void RunSolverBenchWorker(int fd, const std::string& problem, const std::string& solver,
                          int num_threads, int max_iterations) {
  SolverType type;
  Device device;
  const Status s = ParseSolverName(solver, &type, &device);
  if (!s.ok()) {
    SendError(fd, s);
    ::_exit(s.ExitCode());
  }
  SolverBenchOptions options;
  options.num_threads = num_threads;
  options.max_iterations = max_iterations;
  RunChild(fd, problem, type, device, options);
}

namespace {

// ---- Parent side ------------------------------------------------------------------------

// null (NaN or infinity in the child) reads as NaN.
double Number(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nan("");
  return it->get<double>();
}

StatusCode CodeFromInt(int code) {
  if (code <= static_cast<int>(StatusCode::kOk) || code > static_cast<int>(StatusCode::kInternal)) {
    return StatusCode::kInternal;
  }
  return static_cast<StatusCode>(code);
}

struct ChildOutcome {
  bool loaded = false;  // the child read the problem
  int num_cameras = 0;
  int num_points = 0;
  long long num_observations = 0;
};

// Applies one message line from the child to the run; false on a malformed line.
bool HandleMessage(const std::string& line, SolverRun* run, ChildOutcome* outcome,
                   BenchProgress* progress, bool* have_result, std::optional<Status>* error) {
  nlohmann::json m = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!m.is_object() || !m.contains("type")) return false;
  const std::string type = m["type"].is_string() ? m["type"].get<std::string>() : "";
  try {
    if (type == "start") {
      run->baseline_rss_bytes = m.value("baseline_rss_kib", 0LL) * 1024;
    } else if (type == "loaded") {
      outcome->loaded = true;
      progress->loaded = true;
      run->load_time_s = Number(m, "load_time_s");
      outcome->num_cameras = m.value("num_cameras", 0);
      outcome->num_points = m.value("num_points", 0);
      outcome->num_observations = m.value("num_observations", 0LL);
    } else if (type == "iteration") {
      progress->iteration = m.value("iteration", -1);
      progress->cost = Number(m, "cost");
    } else if (type == "error") {
      *error = Status(CodeFromInt(m.value("code", 0)), m.value("message", std::string()));
    } else if (type == "result") {
      run->num_threads = m.value("num_threads", 0);
      run->initial_cost = Number(m, "initial_cost");
      run->final_cost = Number(m, "final_cost");
      run->iterations = m.value("iterations", 0);
      run->successful_iterations = m.value("successful_iterations", 0);
      run->termination = m.value("termination", std::string());
      run->usable = m.value("usable", false);
      run->message = m.value("message", std::string());
      run->total_time_s = Number(m, "total_time_s");
      run->linear_solver_time_s = Number(m, "linear_solver_time_s");
      run->evaluation_time_s = Number(m, "evaluation_time_s");
      run->trace.clear();
      for (const auto& row : m.at("trace")) {
        TracePoint p;
        p.iteration = row.at(0).get<int>();
        p.cost = row.at(1).is_number() ? row.at(1).get<double>() : std::nan("");
        p.time_s = row.at(2).is_number() ? row.at(2).get<double>() : std::nan("");
        run->trace.push_back(p);
      }
      *have_result = true;
    } else {
      return false;
    }
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  return true;
}

std::string SignalName(int sig) {
  const char* text = ::strsignal(sig);
  return "signal " + std::to_string(sig) + (text ? std::string(" (") + text + ")" : "");
}

// Runs one solve in a child process and fills `run`. Never fails as a whole: whatever
// went wrong ends up in run->status.
void RunInChild(const std::string& path, const std::string& solver, SolverType type,
                Device device, const SolverBenchOptions& options,
                BenchProgress progress, SolverRun* run, ChildOutcome* outcome) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    run->status = Status::Internal(std::string("cannot create a pipe: ") + std::strerror(errno));
    return;
  }
  // Unflushed stdio buffers would otherwise be written twice (by parent and child).
  std::fflush(stdout);
  std::fflush(stderr);
  const Timer wall;
  const pid_t pid = ::fork();
  if (pid < 0) {
    run->status = Status::Internal(std::string("cannot fork a solver process: ") +
                                   std::strerror(errno));
    ::close(fds[0]);
    ::close(fds[1]);
    return;
  }
  if (pid == 0) {
    ::close(fds[0]);
    if (!options.worker_command.empty()) {
      std::vector<std::string> args = options.worker_command;
      for (const std::string& a :
           {std::string("--fd"), std::to_string(fds[1]), std::string("--solver"), solver,
            std::string("--threads"), std::to_string(options.num_threads),
            std::string("--max-iterations"), std::to_string(options.max_iterations), path}) {
        args.push_back(a);
      }
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::fcntl(fds[1], F_SETFD, 0);  // the pipe outlives the exec
      {
        const WideAffinity wide;
        ::execv(argv[0], argv.data());
      }
      ::fcntl(fds[1], F_SETFD, FD_CLOEXEC);  // exec failed: solve in this fork instead
    }
    RunChild(fds[1], path, type, device, options);
  }
  ::close(fds[1]);

  bool have_result = false, malformed = false;
  std::optional<Status> child_error;
  std::string buffer;
  char chunk[1 << 16];
  auto report = [&] {
    progress.elapsed_s = wall.Seconds();
    if (options.progress) options.progress(progress);
  };
  report();
  for (;;) {
    struct pollfd pfd = {fds[0], POLLIN, 0};
    const int ready = ::poll(&pfd, 1, kProgressIntervalMs);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) {
      report();
      continue;
    }
    const ssize_t n = ::read(fds[0], chunk, sizeof(chunk));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;  // EOF: the child has exited (or closed its end)
    buffer.append(chunk, static_cast<size_t>(n));
    size_t start = 0, newline;
    bool any = false;
    while ((newline = buffer.find('\n', start)) != std::string::npos) {
      if (!HandleMessage(buffer.substr(start, newline - start), run, outcome, &progress,
                         &have_result, &child_error)) {
        malformed = true;
      }
      start = newline + 1;
      any = true;
    }
    buffer.erase(0, start);
    if (any) report();
  }
  ::close(fds[0]);

  int wstatus = 0;
  struct rusage ru;
  std::memset(&ru, 0, sizeof(ru));
  pid_t waited;
  do {
    waited = ::wait4(pid, &wstatus, 0, &ru);
  } while (waited < 0 && errno == EINTR);
  run->wall_time_s = wall.Seconds();
  if (waited == pid) run->peak_rss_bytes = static_cast<long long>(ru.ru_maxrss) * 1024;  // KiB

  if (child_error) {
    run->status = *child_error;
  } else if (waited != pid) {
    run->status = Status::Internal(std::string("cannot wait for the solver process: ") +
                                   std::strerror(errno));
  } else if (WIFSIGNALED(wstatus)) {
    const int sig = WTERMSIG(wstatus);
    run->status = Status::Internal(
        "the solver process was killed by " + SignalName(sig) +
        (sig == SIGKILL ? "; the kernel's out-of-memory killer is the usual sender" : ""));
  } else if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0) {
    run->status = Status::Internal("the solver process exited with status " +
                                   std::to_string(WEXITSTATUS(wstatus)) + " without a message");
  } else if (malformed || !have_result) {
    run->status = Status::Internal("the solver process exited without reporting a readable "
                                   "result");
  }
}

nlohmann::json OptionalToJson(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// NaN and infinity have no JSON form: write them as null.
nlohmann::json NumberToJson(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

std::string FormatDouble(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

std::string FormatTau(double tau) { return FormatDouble("%g", tau); }

}  // namespace

double CostThreshold(double initial_cost, double best_cost, double tau) {
  return best_cost + tau * (initial_cost - best_cost);
}

std::optional<double> TimeToReach(const std::vector<TracePoint>& trace, double threshold) {
  for (const TracePoint& p : trace) {
    if (p.cost <= threshold) return p.time_s;  // NaN costs compare false: never "reached"
  }
  return std::nullopt;
}

Status ParseSolverList(const std::string& text, std::vector<std::string>* names) {
  names->clear();
  std::set<std::string> seen;
  size_t start = 0;
  for (;;) {
    const size_t comma = std::min(text.find(',', start), text.size());
    std::string item = text.substr(start, comma - start);
    const size_t first = item.find_first_not_of(" \t");
    const size_t last = item.find_last_not_of(" \t");
    item = first == std::string::npos ? "" : item.substr(first, last - first + 1);
    if (item.empty()) {
      return Status::InvalidOptions("--solvers '" + text +
                                    "': expected a comma-separated list of solver names "
                                    "with no empty item, e.g. cholmod,ceres-sparse");
    }
    SolverType type;
    Device device;
    TIEPOINT_RETURN_IF_ERROR(ParseSolverName(item, &type, &device));
    if (!seen.insert(item).second) {
      return Status::InvalidOptions("--solvers: '" + item + "' is listed twice");
    }
    names->push_back(item);
    if (comma == text.size()) break;
    start = comma + 1;
  }
  return Status::Ok();
}

Status SolverBenchOptions::Check() const {
  if (problems.empty()) {
    return Status::InvalidOptions("no problem given: expected one or more BAL files");
  }
  if (solvers.empty()) {
    return Status::InvalidOptions("--solvers: expected at least one solver name");
  }
  std::set<std::string> seen;
  for (const std::string& name : solvers) {
    SolverType type;
    Device device;
    TIEPOINT_RETURN_IF_ERROR(ParseSolverName(name, &type, &device));
    if (!seen.insert(name).second) {
      return Status::InvalidOptions("--solvers: '" + name + "' is listed twice");
    }
  }
  if (num_threads < 0) {
    return Status::InvalidOptions("--threads " + std::to_string(num_threads) +
                                  ": expected 0 (all hardware threads) or more");
  }
  if (repetitions < 1) {
    return Status::InvalidOptions("--repetitions " + std::to_string(repetitions) +
                                  ": expected at least 1");
  }
  if (max_iterations < 1) {
    return Status::InvalidOptions("--max-iterations " + std::to_string(max_iterations) +
                                  ": expected at least 1");
  }
  for (double tau : taus) {
    if (!(tau > 0.0 && tau < 1.0)) {
      return Status::InvalidOptions("cost tolerance tau " + FormatTau(tau) +
                                    ": expected a value in (0, 1)");
    }
  }
  return Status::Ok();
}

double SolverRun::TimePerIteration() const {
  return iterations > 0 ? total_time_s / iterations : 0.0;
}

std::optional<double> ProblemBench::SpeedUp(size_t a, size_t b, size_t tau_index) const {
  if (a >= runs.size() || b >= runs.size()) return std::nullopt;
  const auto& ta = runs[a].time_to_tau;
  const auto& tb = runs[b].time_to_tau;
  if (tau_index >= ta.size() || tau_index >= tb.size() || !ta[tau_index] || !tb[tau_index]) {
    return std::nullopt;
  }
  if (!(*ta[tau_index] > 0.0)) return std::nullopt;
  return *tb[tau_index] / *ta[tau_index];
}

int SolverBenchResult::NumFailedRuns() const {
  int n = 0;
  for (const ProblemBench& p : problems) {
    for (const SolverRun& r : p.runs) n += r.ok() ? 0 : 1;
  }
  return n;
}

namespace {

// Median of times where nullopt (never reached) is slower than any time; nullopt when the
// median repetition never reached it.
std::optional<double> MedianTime(std::vector<std::optional<double>> v) {
  std::sort(v.begin(), v.end(), [](const std::optional<double>& a, const std::optional<double>& b) {
    return a && (!b || *a < *b);
  });
  return v[(v.size() - 1) / 2];
}

// Fills `run` (already the last repetition) from the successful repetitions `reps`: time
// to each tau per repetition and its median; the other fields from the repetition with
// the median time to the middle tau, the peak memory the largest of any.
void SummarizeRepetitions(const std::vector<double>& taus, double initial_cost,
                          double best_cost, std::vector<SolverRun>* reps, SolverRun* run) {
  if (reps->empty()) return;
  std::vector<std::vector<std::optional<double>>> times;
  long long peak = 0;
  for (const SolverRun& r : *reps) {
    std::vector<std::optional<double>> t(taus.size());
    for (size_t i = 0; i < taus.size(); ++i) {
      t[i] = TimeToReach(r.trace, CostThreshold(initial_cost, best_cost, taus[i]));
    }
    times.push_back(t);
    peak = std::max(peak, r.peak_rss_bytes);
  }
  const size_t mid = taus.size() / 2;
  std::vector<size_t> order(reps->size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto &ta = times[a][mid], &tb = times[b][mid];
    return ta && (!tb || *ta < *tb);
  });
  *run = (*reps)[order[(order.size() - 1) / 2]];
  run->peak_rss_bytes = peak;
  run->time_to_tau.assign(taus.size(), std::nullopt);
  for (size_t i = 0; i < taus.size(); ++i) {
    std::vector<std::optional<double>> column;
    for (const auto& t : times) column.push_back(t[i]);
    run->time_to_tau[i] = MedianTime(column);
  }
  run->repetition_time_to_tau = std::move(times);
}

}  // namespace

Status RunSolverBench(const SolverBenchOptions& options, SolverBenchResult* result) {
  TIEPOINT_RETURN_IF_ERROR(options.Check());
  for (const std::string& path : options.problems) TIEPOINT_RETURN_IF_ERROR(CheckReadable(path));

  SolverBenchResult out;
  out.date_utc = UtcNow();
  out.num_threads = options.num_threads;
  out.max_iterations = options.max_iterations;
  out.repetitions = options.repetitions;
  out.taus = options.taus;
  out.solvers = options.solvers;

  const int num_runs = static_cast<int>(options.problems.size() * options.solvers.size());
  int run_index = 0;
  for (const std::string& path : options.problems) {
    ProblemBench problem;
    problem.path = path;
    problem.name = ProblemName(path);
    std::optional<Status> unreadable;  // the problem failed to load: skip its other solvers
    bool have_counts = false;
    const size_t num_solvers = options.solvers.size();
    std::vector<SolverType> types(num_solvers);
    std::vector<Device> devices(num_solvers);
    for (size_t k = 0; k < num_solvers; ++k) {
      TIEPOINT_RETURN_IF_ERROR(ParseSolverName(options.solvers[k], &types[k], &devices[k]));
    }
    // Repetitions go round the solvers (solver 1, 2, ..., then 1, 2, ... again), so that a
    // slow spell of the machine falls on all of them rather than on one solver's runs.
    // Each solver's result: its last repetition (a failed one ends that solver's runs).
    std::vector<SolverRun> last(num_solvers);
    std::vector<std::vector<SolverRun>> repetitions(num_solvers);  // successful repetitions
    for (int rep = 0; rep < options.repetitions; ++rep) {
      for (size_t k = 0; k < num_solvers; ++k) {
        SolverRun& run = last[k];
        if (!run.ok()) continue;
        run = SolverRun();
        run.solver = options.solvers[k];
        if (unreadable) {
          run.status = Status(unreadable->code(),
                              "not run: the problem could not be read: " + unreadable->message());
          continue;
        }
        BenchProgress progress;
        progress.problem = problem.name;
        progress.solver = options.solvers[k];
        progress.run = run_index + static_cast<int>(k) + 1;
        progress.num_runs = num_runs;
        ChildOutcome outcome;
        RunInChild(path, options.solvers[k], types[k], devices[k], options, progress, &run,
                   &outcome);
        if (!outcome.loaded && !run.ok() && (run.status.code() == StatusCode::kInvalidInput ||
                                             run.status.code() == StatusCode::kIoError)) {
          unreadable = run.status;
        }
        if (outcome.loaded && !have_counts) {
          problem.num_cameras = outcome.num_cameras;
          problem.num_points = outcome.num_points;
          problem.num_observations = outcome.num_observations;
          have_counts = true;
        }
        if (run.ok()) repetitions[k].push_back(run);
      }
    }
    run_index += static_cast<int>(num_solvers);
    problem.runs = std::move(last);

    // Initial cost from the first run that reported one; best over usable runs.
    bool have_initial = false;
    for (const SolverRun& r : problem.runs) {
      if (r.ok() && !have_initial && std::isfinite(r.initial_cost)) {
        problem.initial_cost = r.initial_cost;
        have_initial = true;
      }
      if (r.ok() && r.usable && std::isfinite(r.final_cost) &&
          (!problem.best_cost || r.final_cost < *problem.best_cost)) {
        problem.best_cost = r.final_cost;
        problem.best_solver = r.solver;
      }
    }
    for (size_t k = 0; k < problem.runs.size(); ++k) {
      SolverRun& r = problem.runs[k];
      r.time_to_tau.assign(options.taus.size(), std::nullopt);
      if (!r.ok() || !problem.best_cost || !have_initial) continue;
      SummarizeRepetitions(options.taus, problem.initial_cost, *problem.best_cost,
                           &repetitions[k], &r);
    }
    out.problems.push_back(std::move(problem));
  }
  *result = std::move(out);
  return Status::Ok();
}

namespace {

// [[t(tau_0), t(tau_1), ...] per repetition], null for never.
nlohmann::json RepetitionsToJson(const std::vector<std::vector<std::optional<double>>>& reps) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& rep : reps) {
    nlohmann::json row = nlohmann::json::array();
    for (const auto& t : rep) row.push_back(OptionalToJson(t));
    out.push_back(row);
  }
  return out;
}

}  // namespace

nlohmann::json SolverBenchToJson(const SolverBenchResult& result) {
  nlohmann::json problems = nlohmann::json::array();
  for (const ProblemBench& p : result.problems) {
    nlohmann::json runs = nlohmann::json::array();
    for (const SolverRun& r : p.runs) {
      nlohmann::json run = {{"solver", r.solver}, {"ok", r.ok()}};
      if (!r.ok()) {
        run["error"] = r.status.ToString();
        run["peak_rss_bytes"] = r.peak_rss_bytes;
        runs.push_back(run);
        continue;
      }
      nlohmann::json taus = nlohmann::json::array();
      for (size_t t = 0; t < result.taus.size(); ++t) {
        nlohmann::json entry = {{"tau", result.taus[t]}};
        entry["threshold_cost"] =
            p.best_cost ? NumberToJson(CostThreshold(p.initial_cost, *p.best_cost, result.taus[t]))
                        : nlohmann::json(nullptr);
        entry["time_s"] = t < r.time_to_tau.size() ? OptionalToJson(r.time_to_tau[t])
                                                    : nlohmann::json(nullptr);
        taus.push_back(entry);
      }
      nlohmann::json trace = nlohmann::json::array();
      for (const TracePoint& tp : r.trace) {
        trace.push_back({{"iteration", tp.iteration},
                         {"cost", NumberToJson(tp.cost)},
                         {"time_s", NumberToJson(tp.time_s)}});
      }
      const double obs = static_cast<double>(p.num_observations);
      run.update({
          {"threads", r.num_threads},
          {"iterations", r.iterations},
          {"successful_iterations", r.successful_iterations},
          {"initial_cost", NumberToJson(r.initial_cost)},
          {"final_cost", NumberToJson(r.final_cost)},
          {"termination", r.termination},
          {"usable", r.usable},
          {"message", r.message},
          {"load_time_s", NumberToJson(r.load_time_s)},
          {"total_time_s", NumberToJson(r.total_time_s)},
          {"time_per_iteration_s", NumberToJson(r.TimePerIteration())},
          {"linear_solver_time_s", NumberToJson(r.linear_solver_time_s)},
          {"evaluation_time_s", NumberToJson(r.evaluation_time_s)},
          {"process_wall_time_s", NumberToJson(r.wall_time_s)},
          {"peak_rss_bytes", r.peak_rss_bytes},
          {"baseline_rss_bytes", r.baseline_rss_bytes},
          {"peak_rss_bytes_per_observation",
           obs > 0 ? NumberToJson(r.peak_rss_bytes / obs) : nlohmann::json(nullptr)},
          {"added_rss_bytes_per_observation",
           obs > 0 ? NumberToJson((r.peak_rss_bytes - r.baseline_rss_bytes) / obs)
                   : nlohmann::json(nullptr)},
          {"time_to_tau", taus},
          {"time_to_tau_repetitions", RepetitionsToJson(r.repetition_time_to_tau)},
          {"trace", trace},
      });
      runs.push_back(run);
    }
    // speed-ups[tau]["a_vs_b"] = time_b / time_a.
    nlohmann::json speedups = nlohmann::json::array();
    for (size_t t = 0; t < result.taus.size(); ++t) {
      nlohmann::json pairs = nlohmann::json::object();
      for (size_t a = 0; a < p.runs.size(); ++a) {
        for (size_t b = 0; b < p.runs.size(); ++b) {
          if (a == b) continue;
          pairs[p.runs[a].solver + "_vs_" + p.runs[b].solver] = OptionalToJson(p.SpeedUp(a, b, t));
        }
      }
      speedups.push_back({{"tau", result.taus[t]}, {"pairs", pairs}});
    }
    problems.push_back({
        {"name", p.name},
        {"path", p.path},
        {"num_cameras", p.num_cameras},
        {"num_points", p.num_points},
        {"num_observations", p.num_observations},
        {"initial_cost", NumberToJson(p.initial_cost)},
        {"best_cost", p.best_cost ? NumberToJson(*p.best_cost) : nlohmann::json(nullptr)},
        {"best_solver", p.best_cost ? nlohmann::json(p.best_solver) : nlohmann::json(nullptr)},
        {"solvers", runs},
        {"speedups", speedups},
    });
  }
  return {
      {"benchmark", "solver"},
      {"date", result.date_utc},
      {"machine", DescribeMachine()},
      {"build", DescribeBuild()},
      {"threads", result.num_threads},
      {"max_iterations", result.max_iterations},
      {"repetitions", result.repetitions},
      {"solvers", result.solvers},
      {"taus", result.taus},
      {"definitions",
       {{"time_per_iteration_s", "total_time_s / iterations; total_time_s is the solve, "
                                 "excluding load_time_s"},
        {"time_to_tau", "first trace time_s with cost <= best_cost + tau * (initial_cost - "
                        "best_cost); best_cost is the lowest final cost of any solver on the "
                        "problem; null: never reached. With repetitions > 1 (each solve a "
                        "fresh process), the median over time_to_tau_repetitions, where never "
                        "counts as slowest; the other fields come from the repetition with the "
                        "median time at the middle tau"},
        {"speedups", "pairs a_vs_b = time_to_tau(b) / time_to_tau(a); > 1 means a is faster"},
        {"peak_rss_bytes", "ru_maxrss of the solver's process, the largest of its "
                           "repetitions (includes baseline_rss_bytes, its size when it began)"}}},
      {"problems", problems},
  };
}

std::string FormatSolverBenchTable(const SolverBenchResult& result, size_t ratio_tau_index) {
  size_t wp = 7, ws = 6;
  for (const ProblemBench& p : result.problems) {
    wp = std::max(wp, p.name.size());
    for (const SolverRun& r : p.runs) ws = std::max(ws, r.solver.size());
  }
  const bool ratios = ratio_tau_index < result.taus.size();
  std::string out;
  auto cell = [&out](const std::string& text, size_t width, bool left) {
    const std::string pad(width > text.size() ? width - text.size() : 0, ' ');
    out += left ? text + pad : pad + text;
    out += "  ";
  };
  auto time_cell = [](const std::optional<double>& t) {
    return t ? FormatDouble("%.3f", *t) : std::string("never");
  };

  cell("problem", wp, true);
  cell("solver", ws, true);
  cell("iters", 5, false);
  cell("final cost", 12, false);
  cell("ms/iter", 9, false);
  std::vector<size_t> tau_widths;
  for (double tau : result.taus) {
    const std::string h = "t(" + FormatTau(tau) + ") s";
    tau_widths.push_back(std::max<size_t>(h.size(), 8));
    cell(h, tau_widths.back(), false);
  }
  cell("peak MB", 8, false);
  std::vector<size_t> ratio_widths;
  if (ratios) {
    for (const std::string& s : result.solvers) {
      ratio_widths.push_back(std::max<size_t>(s.size() + 3, 6));
      cell("vs " + s, ratio_widths.back(), false);
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  out += "\n";
  const size_t rule = out.size() - 1;
  out += std::string(rule, '-') + "\n";

  std::vector<std::string> failures;
  for (const ProblemBench& p : result.problems) {
    for (size_t i = 0; i < p.runs.size(); ++i) {
      const SolverRun& r = p.runs[i];
      const size_t line_start = out.size();
      cell(p.name, wp, true);
      cell(r.solver, ws, true);
      if (!r.ok()) {
        out += "FAILED (see below)";
        failures.push_back(p.name + " / " + r.solver + ": " + r.status.ToString());
      } else {
        cell(std::to_string(r.iterations), 5, false);
        cell(FormatDouble("%.6e", r.final_cost), 12, false);
        cell(r.iterations > 0 ? FormatDouble("%.1f", 1e3 * r.TimePerIteration()) : "-", 9,
             false);
        for (size_t t = 0; t < result.taus.size(); ++t) {
          cell(time_cell(t < r.time_to_tau.size() ? r.time_to_tau[t] : std::nullopt),
               tau_widths[t], false);
        }
        cell(FormatDouble("%.1f", r.peak_rss_bytes / (1024.0 * 1024.0)), 8, false);
        if (ratios) {
          for (size_t b = 0; b < p.runs.size() && b < ratio_widths.size(); ++b) {
            if (b == i) {
              cell("-", ratio_widths[b], false);
              continue;
            }
            const auto s = p.SpeedUp(i, b, ratio_tau_index);
            cell(s ? FormatDouble("%.2fx", *s) : "n/a", ratio_widths[b], false);
          }
        }
        if (!r.usable) out += "(" + r.termination + ")";
      }
      while (out.size() > line_start && out.back() == ' ') out.pop_back();
      out += "\n";
    }
  }
  out += std::string(rule, '-') + "\n";
  out += "t(tau): solve time until cost <= best + tau (initial - best), best = lowest final "
         "cost of any solver on the problem; never: not reached.\n";
  if (ratios) {
    out += "vs X: speed-up at tau=" + FormatTau(result.taus[ratio_tau_index]) +
           " = t(X) / t(this solver); above 1 this solver is faster; n/a: one did not reach it.\n";
  }
  out += "peak MB: peak resident memory of the solver's process (reading included).\n";
  for (const std::string& f : failures) out += "FAILED " + f + "\n";
  return out;
}

Status WriteSolverBenchPlot(const std::string& path, const SolverBenchResult& result,
                            std::vector<std::string>* notes) {
  std::vector<LogLogPanel> panels;
  for (const ProblemBench& p : result.problems) {
    LogLogPanel panel;
    panel.title = p.name;
    if (p.num_observations > 0) {
      panel.title += ": " + std::to_string(p.num_cameras) + " cameras, " +
                     std::to_string(p.num_points) + " points, " +
                     std::to_string(p.num_observations) + " observations";
    }
    panel.x_label = "solve time [s]";
    panel.y_label = "cost  (\xC2\xBD \xCE\xA3 squared residuals)";  // ½ Σ
    for (size_t i = 0; i < p.runs.size(); ++i) {
      const SolverRun& r = p.runs[i];
      // One colour per solver across panels: its position in the --solvers list.
      const auto pos = std::find(result.solvers.begin(), result.solvers.end(), r.solver);
      if (!r.ok()) {
        panel.footnotes.push_back(r.solver + " failed: " + r.status.ToString());
        continue;
      }
      PlotSeries series;
      series.name = r.solver;
      series.color_index = static_cast<int>(pos - result.solvers.begin());
      for (const TracePoint& tp : r.trace) series.xy.emplace_back(tp.time_s, tp.cost);
      panel.series.push_back(std::move(series));
    }
    if (p.best_cost) {
      for (double tau : result.taus) {
        panel.reference_lines.push_back(
            {CostThreshold(p.initial_cost, *p.best_cost, tau),
             "\xCF\x84 = " + FormatTau(tau)});  // τ
      }
      panel.footnotes.push_back(
          "dashed: cost = best + \xCF\x84 (initial \xE2\x88\x92 best), best = " +
          FormatDouble("%.6e", *p.best_cost) + " (" + p.best_solver + ")");
    }
    panels.push_back(std::move(panel));
  }
  LogLogFigureOptions figure;
  figure.title = "Cost against solve time (" +
                 (result.num_threads > 0 ? std::to_string(result.num_threads) + " threads"
                                         : std::string("all hardware threads")) +
                 ", " + result.date_utc + ")";
  return WriteLogLogSvg(path, panels, figure, notes);
}

}  // namespace tiepoint
