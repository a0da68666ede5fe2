// tiepoint bench PROBLEM... --solvers LIST: solve each problem with each solver in its own
// process; print a table, write JSON results and a cost-against-time plot.
#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/solver_bench.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "io/report.h"

namespace tiepoint::cli {
namespace {

struct BenchArgs {
  std::vector<std::string> problems;
  std::string solvers;
  int threads = 0;
  int max_iterations = 50;
  int repetitions = 1;
  std::string out;
  std::string plot;
  bool quiet = false;
};

std::string DescribeProgress(const BenchProgress& p) {
  char buf[160];
  std::string text = "[" + std::to_string(p.run) + "/" + std::to_string(p.num_runs) + "] " +
                     p.problem + " / " + p.solver + ": ";
  if (!p.loaded) {
    text += "reading";
  } else if (p.iteration < 0) {
    text += "setting up";
  } else {
    std::snprintf(buf, sizeof(buf), "iteration %d, cost %.6e", p.iteration, p.cost);
    text += buf;
  }
  std::snprintf(buf, sizeof(buf), " ... %.1f s", p.elapsed_s);
  return text + buf;
}

int RunBench(const BenchArgs& a) {
  const char* cmd = "bench";
  SolverBenchOptions options;
  options.problems = a.problems;
  Status s = ParseSolverList(a.solvers, &options.solvers);
  if (!s.ok()) return ReportError(cmd, s);
  options.num_threads = a.threads;
  options.max_iterations = a.max_iterations;
  options.repetitions = a.repetitions;
  if (!(s = options.Check()).ok()) return ReportError(cmd, s);
  if (!(s = CheckOutputDirectory("--out", a.out)).ok()) return ReportError(cmd, s);
  if (!(s = CheckOutputDirectory("--plot", a.plot)).ok()) return ReportError(cmd, s);

  ProgressLine progress(!a.quiet && StderrIsTerminal());
  options.progress = [&progress](const BenchProgress& p) { progress.Update(DescribeProgress(p)); };

  // Each run execs this executable's hidden bench-worker command (a fresh process).
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) options.worker_command = {std::string(exe, static_cast<size_t>(n)), "bench-worker"};

  // Nothing before this call may start threads or touch CUDA: the runs fork().
  SolverBenchResult result;
  if (!(s = RunSolverBench(options, &result)).ok()) return ReportError(cmd, s);
  progress.Done();

  size_t ratio_tau = 0;  // the table's speed-ups at tau = 0.01
  for (size_t t = 0; t < result.taus.size(); ++t) {
    if (std::fabs(result.taus[t] - 0.01) < 1e-12) ratio_tau = t;
  }
  std::printf("tiepoint bench: %zu problem%s x %zu solver%s, threads %s, max %d iterations%s\n\n",
              result.problems.size(), result.problems.size() == 1 ? "" : "s",
              result.solvers.size(), result.solvers.size() == 1 ? "" : "s",
              a.threads > 0 ? std::to_string(a.threads).c_str() : "all", a.max_iterations,
              a.repetitions > 1 ? (", median of " + std::to_string(a.repetitions) + " solves each").c_str() : "");
  std::printf("%s", FormatSolverBenchTable(result, ratio_tau).c_str());
  std::fflush(stdout);

  if (!a.out.empty()) {
    if (!(s = WriteJson(a.out, SolverBenchToJson(result))).ok()) return ReportError(cmd, s);
    std::printf("results: %s\n", a.out.c_str());
  }
  if (!a.plot.empty()) {
    std::vector<std::string> notes;
    if (!(s = WriteSolverBenchPlot(a.plot, result, &notes)).ok()) return ReportError(cmd, s);
    for (const std::string& n : notes) {
      std::fprintf(stderr, "tiepoint bench: plot: %s\n", n.c_str());
    }
    std::printf("plot: %s\n", a.plot.c_str());
  }

  const int failed = result.NumFailedRuns();
  if (failed > 0) {
    std::fprintf(stderr, "tiepoint bench: error: %d of %zu runs failed (listed above)\n", failed,
                 result.problems.size() * result.solvers.size());
    return 1;
  }
  return 0;
}

struct WorkerArgs {
  int fd = -1;
  std::string solver;
  int threads = 0;
  int max_iterations = 50;
  std::string problem;
};

}  // namespace

Runner RegisterBenchWorker(CLI::App& app) {
  auto a = std::make_shared<WorkerArgs>();
  app.add_option("--fd", a->fd, "Pipe to the bench process")->required()->check(CLI::NonNegativeNumber);
  app.add_option("--solver", a->solver, "Solver name, as in --solvers")->required();
  app.add_option("--threads", a->threads, "Worker threads")->check(CLI::NonNegativeNumber);
  app.add_option("--max-iterations", a->max_iterations, "Maximum LM iterations")->check(CLI::PositiveNumber);
  app.add_option("problem", a->problem, "BAL problem file")->required();
  return [a]() -> int {
    if (::fcntl(a->fd, F_GETFD) < 0) {
      std::fprintf(stderr, "tiepoint bench-worker: error: --fd %d is not an open file descriptor "
                   "(this command is started by `tiepoint bench`)\n", a->fd);
      return 2;
    }
    RunSolverBenchWorker(a->fd, a->problem, a->solver, a->threads, a->max_iterations);
  };
}

Runner RegisterBench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  app.add_option("problems", a->problems, "BAL problem files (.txt or .txt.bz2)")->required();
  app.add_option("--solvers", a->solvers,
                 "Comma-separated solvers, e.g. pcg-schur,cholmod,ceres-sparse,ceres-iterative; NAME@cuda runs NAME on the GPU")
      ->required();
  app.add_option("--threads", a->threads, "Worker threads per solve (0 = all hardware threads)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--max-iterations", a->max_iterations, "Maximum LM iterations per solve")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--repetitions", a->repetitions,
                 "Solves per problem and solver, each a fresh process; times to tau are their median")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--out", a->out, "Write the results as JSON (machine, build, traces)");
  app.add_option("--plot", a->plot, "Write cost against time as an SVG plot");
  app.add_flag("--quiet", a->quiet, "No progress on the terminal");
  return [a] { return RunBench(*a); };
}

}  // namespace tiepoint::cli
