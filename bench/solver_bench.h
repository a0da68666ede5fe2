// Side-by-side benchmark of bundle-adjustment solvers on BAL problems (`tiepoint bench`).
//
// Every (problem, solver) pair is solved in its own child process: the parent fork()s, the
// child reads the problem, solves it with BundleAdjuster, streams one JSON object per line
// through a pipe (a line per LM iteration for progress, then the result) and _exit()s. The
// parent takes the child's peak resident memory from wait4()'s rusage (ru_maxrss), so
// each solver's peak is measured alone; a child that fails (error status, non-zero exit,
// signal, no result) becomes an error on that run and the benchmark goes on.
//
// Threading: fork() copies only the calling thread, so RunSolverBench must be called
// from a process that has started no other threads and has not initialised CUDA or an
// OpenMP pool (the child would inherit a half-copied runtime). The CLI calls it before
// anything else that might (e.g. DescribeMachine(), which queries CUDA devices).
//
// Metrics, per (problem, solver):
//   time per LM iteration = total_time_s / iterations; total_time_s is the solve alone
//     (the summary's clock), reading the file is reported apart as load_time_s.
//   time to reach tolerance tau: with best = the lowest final cost any solver reached on
//     the problem and initial = the problem's initial cost, the first trace time_s at
//     which  cost <= best + tau (initial - best)  (absent when never reached).
//   speed-up of a over b at tau = time_b / time_a (> 1: a reaches tau sooner).
//   peak memory: ru_maxrss of the child (bytes). It includes the parent's resident
//     memory at fork (the baseline, reported separately) since the child starts as its copy.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/base/status.h"

namespace tiepoint {

// One trace row kept by the benchmark: iteration 0 is the initial state.
struct TracePoint {
  int iteration = 0;
  double cost = 0.0;    // cost of the accepted point after this iteration
  double time_s = 0.0;  // cumulative solve time (seconds since the solve began)
};

// best + tau (initial - best): the cost that "reaching tolerance tau" means.
double CostThreshold(double initial_cost, double best_cost, double tau);

// The first time_s in `trace` at which cost <= threshold; nullopt when never reached.
std::optional<double> TimeToReach(const std::vector<TracePoint>& trace, double threshold);

// Splits "a,b,c" into names (spaces around items trimmed). Empty items, unknown names (the
// message of SolverTypeFromString) and a name listed twice are kInvalidOptions.
Status ParseSolverList(const std::string& text, std::vector<std::string>* names);

// Progress of the running child, for a terminal display.
struct BenchProgress {
  std::string problem;       // problem name (file name without .txt/.bz2)
  std::string solver;
  int run = 0;               // 1-based index of this run among all runs
  int num_runs = 0;
  bool loaded = false;       // the child has read the problem and is solving
  int iteration = -1;        // last iteration reported (-1: none yet)
  double cost = 0.0;         // cost at that iteration
  double elapsed_s = 0.0;    // wall time since the child was started
};

struct SolverBenchOptions {
  // BAL problem files (.txt or .txt.bz2), solved in this order.
  std::vector<std::string> problems;
  // Solver names as SolverTypeFromString accepts them, in this order for every problem.
  std::vector<std::string> solvers;
  // Worker threads per solve; 0 means all hardware threads.
  int num_threads = 0;
  // Maximum LM iterations per solve.
  int max_iterations = 50;
  // Solves of each (problem, solver), each in its own process; times to tau are the
  // median over them (small problems take tens of microseconds, where one run is noise).
  int repetitions = 1;
  // Cost tolerances for "time to reach tau", each in (0, 1).
  std::vector<double> taus = {0.1, 0.01, 0.001};
  // Each solve runs in a child process. With a worker command (`tiepoint bench` passes
  // {its own executable, "bench-worker"}), the child execs it: a fresh process, as
  // `tiepoint ba` would be. A forked copy of this process (the default, for tests and
  // for when exec fails) starts with none of the page tables of its code and copies on
  // write every page it touches, which cost a 1-observation solve 30-40 us on the dev
  // machine (~90 us to tau instead of ~55) against ~0 for Ceres's ~400 us.
  std::vector<std::string> worker_command;
  // Called while a child runs (per iteration and about four times a second); may be empty.
  // Runs in the calling thread.
  std::function<void(const BenchProgress&)> progress;

  // Explains bad options in words (no problem or solver, unknown or repeated solver,
  // negative threads, tau outside (0, 1)). Does not touch the files.
  Status Check() const;
};

struct SolverRun {
  std::string solver;
  Status status;                  // why the run failed; ok when the child reported a result
  // What the child reported (meaningful when status.ok()).
  int num_threads = 0;            // threads the solver used
  double load_time_s = 0.0;       // reading the problem, not part of the solve
  double initial_cost = 0.0;
  double final_cost = 0.0;
  int iterations = 0;
  int successful_iterations = 0;
  std::string termination;        // ToString(TerminationType)
  bool usable = false;            // termination is not a failure
  std::string message;
  double total_time_s = 0.0;      // the solve
  double linear_solver_time_s = 0.0;
  double evaluation_time_s = 0.0;
  std::vector<TracePoint> trace;
  // Measured by the parent from wait4() (bytes; 0 when unknown).
  long long peak_rss_bytes = 0;
  long long baseline_rss_bytes = 0;  // the child's resident memory when it began
  double wall_time_s = 0.0;          // the child process, start to exit
  // Per tau (parallel to SolverBenchResult::taus); filled by RunSolverBench: the median
  // over the repetitions (a repetition that never reached it counts as the slowest).
  std::vector<std::optional<double>> time_to_tau;
  // Per repetition, per tau; the fields above are those of the repetition with the median
  // time to the middle tau (peak_rss_bytes: the largest of any repetition).
  std::vector<std::vector<std::optional<double>>> repetition_time_to_tau;

  bool ok() const { return status.ok(); }
  // total_time_s / iterations; 0 when no iteration ran.
  double TimePerIteration() const;
};

struct ProblemBench {
  std::string path;
  std::string name;                  // file name without .txt / .bal / .bz2
  int num_cameras = 0;               // from the first successful run
  int num_points = 0;
  long long num_observations = 0;
  double initial_cost = 0.0;         // from the first successful run
  std::optional<double> best_cost;   // lowest final cost of a usable run
  std::string best_solver;
  std::vector<SolverRun> runs;       // one per solver, in options order

  // time_b / time_a at taus[tau_index]; nullopt when either did not reach it.
  std::optional<double> SpeedUp(size_t a, size_t b, size_t tau_index) const;
};

struct SolverBenchResult {
  std::string date_utc;              // ISO-8601, when the benchmark started
  int num_threads = 0;               // as requested (0: all hardware threads)
  int max_iterations = 0;
  int repetitions = 1;
  std::vector<double> taus;
  std::vector<std::string> solvers;
  std::vector<ProblemBench> problems;

  int NumFailedRuns() const;
};

// Runs every (problem, solver) in a child process as described above. Returns an error
// only when nothing could start: bad options, or a problem file that cannot be opened
// for reading (named in the message; checked for every file before the first run).
// Failures of single runs are recorded in SolverRun::status.
Status RunSolverBench(const SolverBenchOptions& options, SolverBenchResult* result);

// The worker side of one run (SolverBenchOptions::worker_command + "--fd FD --solver NAME
// --threads N --max-iterations M PROBLEM"): reads the problem, solves it and writes the
// messages to the pipe `fd`. Never returns; exits 0 with a result sent.
[[noreturn]] void RunSolverBenchWorker(int fd, const std::string& problem,
                                       const std::string& solver, int num_threads,
                                       int max_iterations);

// The result as JSON: machine (DescribeMachine()), build, date, threads, taus, and per
// problem its counts, best cost, per-solver metrics with traces and time to each tau,
// and per tau the speed-up of every solver over every other ("a_vs_b": time_b / time_a).
nlohmann::json SolverBenchToJson(const SolverBenchResult& result);

// A fixed-width text table: problem, solver, iterations, final cost, time per iteration,
// time to each tau, peak memory, and the speed-ups at taus[ratio_tau_index].
std::string FormatSolverBenchTable(const SolverBenchResult& result, size_t ratio_tau_index);

// Cost against solve time on log-log axes, one curve per solver, one panel per problem,
// with dashed lines at the tau thresholds. Written atomically. `notes` (may be null)
// receives what the plot could not show.
Status WriteSolverBenchPlot(const std::string& path, const SolverBenchResult& result,
                            std::vector<std::string>* notes);

}  // namespace tiepoint
