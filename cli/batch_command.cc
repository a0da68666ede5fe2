// tiepoint batch JOBS.json -o RUN/ ...   run a job list, resumably, optionally one shard of it
// tiepoint batch summarize RUN/          merge what every shard wrote
// tiepoint batch slurm JOBS.json -o RUN/ --shards N ...   print a Slurm submission script
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/batch_jobs.h"
#include "cli/batch_runner.h"
#include "cli/batch_summary.h"
#include "cli/commands.h"
#include "cli/progress.h"

namespace tiepoint::cli {
namespace {

struct BatchArgs {
  std::string job_file;
  std::string run_dir;
  int jobs = 1;
  std::string device;
  std::string shard;
  bool retry_failed = false;
  bool dry_run = false;
  bool verify_inputs = false;
  bool quiet = false;
  // summarize
  std::string summarize_dir;
  // slurm
  std::string slurm_job_file;
  std::string slurm_run_dir;
  int shards = 0;
  std::string partition;
  int gpus_per_task = 0;
  int cpus_per_task = 0;
  std::string time_limit;
  int slurm_jobs = 1;
  std::string slurm_device;
  bool slurm_retry_failed = false;
  bool slurm_verify_inputs = false;
};

std::string Absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[4096];
  if (::getcwd(cwd, sizeof(cwd)) == nullptr) return path;
  std::string p = path;
  while (p.rfind("./", 0) == 0) p = p.substr(2);
  return p.empty() || p == "." ? std::string(cwd) : std::string(cwd) + "/" + p;
}

std::string StripSlash(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

Status LoadJobs(CLI::App& app, const std::string& job_file, const std::string& device,
                std::vector<BatchJob>* jobs) {
  if (!device.empty() && device != "cpu" && device != "cuda") {
    return Status::InvalidOptions("--device '" + device + "': expected cpu or cuda");
  }
  CommandCatalog catalog;
  catalog.root = app.get_parent();
  JobFileOptions jf;
  jf.path = job_file;
  jf.default_device = device;
  return LoadJobFile(jf, catalog, jobs);
}

int RunMain(CLI::App& app, const BatchArgs& a) {
  const char* cmd = "batch";
  if (a.job_file.empty()) {
    return ReportError(cmd, Status::InvalidOptions("give a job file: tiepoint batch JOBS.json -o RUN/ "
                                                   "(or `batch summarize RUN/`, `batch slurm ...`)"));
  }
  if (a.run_dir.empty()) {
    return ReportError(cmd, Status::InvalidOptions("-o RUN/: the run directory is required"));
  }
  if (a.jobs < 1) return ReportError(cmd, Status::InvalidOptions("--jobs must be at least 1"));
  BatchRunOptions o;
  o.job_file = Absolute(a.job_file);
  o.run_dir = StripSlash(a.run_dir);
  o.max_jobs = a.jobs;
  o.retry_failed = a.retry_failed;
  o.dry_run = a.dry_run;
  o.verify_inputs = a.verify_inputs;
  o.show_progress = !a.quiet && StderrIsTerminal();
  if (!a.shard.empty()) {
    const Status s = ParseShard(a.shard, &o.shard_index, &o.shard_count);
    if (!s.ok()) return ReportError(cmd, s);
  }
  std::vector<BatchJob> jobs;
  const Status s = LoadJobs(app, a.job_file, a.device, &jobs);
  if (!s.ok()) return ReportError(cmd, s);
  return RunBatch(o, std::move(jobs));
}

int RunSummarize(const BatchArgs& a) {
  const char* cmd = "batch summarize";
  const std::string run_dir = StripSlash(a.summarize_dir);
  nlohmann::json summary;
  Status s = CollectRunSummary(run_dir, &summary);
  if (s.ok()) s = WriteRunSummary(run_dir, summary);
  if (!s.ok()) return ReportError(cmd, s);
  std::printf("%s", FormatSummaryTable(summary).c_str());
  std::printf("summary: %s/summary.json, %s/summary.svg\n", run_dir.c_str(), run_dir.c_str());
  return SummaryExitCode(summary);
}

int RunSlurm(CLI::App& app, const BatchArgs& a) {
  const char* cmd = "batch slurm";
  if (a.shards < 1) return ReportError(cmd, Status::InvalidOptions("--shards must be at least 1"));
  if (a.slurm_jobs < 1) return ReportError(cmd, Status::InvalidOptions("--jobs must be at least 1"));
  std::vector<BatchJob> jobs;
  const Status s = LoadJobs(app, a.slurm_job_file, a.slurm_device, &jobs);
  if (!s.ok()) return ReportError(cmd, s);
  char exe_buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe_buf, sizeof(exe_buf) - 1);
  const std::string exe = n > 0 ? std::string(exe_buf, static_cast<size_t>(n)) : "tiepoint";
  const std::string jobs_file = Absolute(a.slurm_job_file);
  const std::string run = StripSlash(Absolute(a.slurm_run_dir));
  const std::string q_exe = ShellQuote(exe), q_jobs = ShellQuote(jobs_file), q_run = ShellQuote(run);
  const int n_shards = a.shards;
  int gpu_jobs = 0;
  for (const BatchJob& j : jobs) gpu_jobs += j.uses_gpu;

  std::string shard_cmd = "exec " + q_exe + " batch " + q_jobs + " -o " + q_run +
                          " --shard \"$SLURM_ARRAY_TASK_ID/${SLURM_ARRAY_TASK_COUNT:-" +
                          std::to_string(n_shards) + "}\" --jobs " + std::to_string(a.slurm_jobs);
  if (!a.slurm_device.empty()) shard_cmd += " --device " + a.slurm_device;
  if (a.slurm_retry_failed) shard_cmd += " --retry-failed";
  if (a.slurm_verify_inputs) shard_cmd += " --verify-inputs";

  std::printf("#!/bin/bash\n");
  std::printf("# tiepoint batch on Slurm: %zu job%s of %s in %d array task%s (shards), then one job that\n"
              "# runs `tiepoint batch summarize` when they have all ended (afterany).\n",
              jobs.size(), jobs.size() == 1 ? "" : "s", jobs_file.c_str(), n_shards, n_shards == 1 ? "" : "s");
  std::printf("# Submit: bash THIS_SCRIPT [sbatch options for the summary job, e.g. --wait]\n");
  std::printf("# Re-submitting after a failure or a time limit goes on where the run stopped.\n");
  std::printf("set -euo pipefail\n");
  std::printf("mkdir -p %s/slurm\n", q_run.c_str());
  std::printf("array_job=$(sbatch --parsable <<'TIEPOINT_ARRAY'\n");
  std::printf("#!/bin/bash\n");
  std::printf("#SBATCH --job-name=tiepoint-batch\n");
  std::printf("#SBATCH --array=0-%d\n", n_shards - 1);
  std::printf("#SBATCH --ntasks=1\n");
  std::printf("#SBATCH --output=%s/slurm/shard-%%a-%%A.out\n", run.c_str());
  if (!a.partition.empty()) std::printf("#SBATCH --partition=%s\n", a.partition.c_str());
  if (a.cpus_per_task > 0) std::printf("#SBATCH --cpus-per-task=%d\n", a.cpus_per_task);
  if (a.gpus_per_task > 0) std::printf("#SBATCH --gpus-per-task=%d\n", a.gpus_per_task);
  if (!a.time_limit.empty()) std::printf("#SBATCH --time=%s\n", a.time_limit.c_str());
  std::printf("# Each task runs the jobs whose index %% %d is its task id; signals from Slurm (scancel,\n"
              "# time limit) stop the running jobs cleanly and the next submission resumes them.\n",
              n_shards);
  std::printf("%s\n", shard_cmd.c_str());
  std::printf("TIEPOINT_ARRAY\n)\n");
  std::printf("array_job=${array_job%%%%;*}\n");
  std::printf("echo \"tiepoint batch: array job $array_job (%d shards) -> %s\" >&2\n", n_shards, run.c_str());
  std::printf("sbatch --parsable --job-name=tiepoint-batch-summary --dependency=afterany:$array_job \\\n"
              "  --ntasks=1 --output=%s/slurm/summary-%%j.out%s \"$@\" \\\n"
              "  --wrap=%s\n",
              run.c_str(), a.partition.empty() ? "" : (" --partition=" + a.partition).c_str(),
              ShellQuote("exec " + q_exe + " batch summarize " + q_run).c_str());
  if (gpu_jobs > 0 && a.gpus_per_task == 0) {
    std::fprintf(stderr, "tiepoint batch slurm: warning: %d job%s use a GPU but --gpus-per-task is 0\n",
                 gpu_jobs, gpu_jobs == 1 ? "" : "s");
  }
  return 0;
}

}  // namespace

Runner RegisterBatch(CLI::App& app) {
  auto a = std::make_shared<BatchArgs>();
  app.require_subcommand(0, 1);
  app.add_option("jobs_file", a->job_file, "Job file (JSON: jobs, matrix, defaults; see README 'Batch jobs')");
  app.add_option("-o,--output", a->run_dir, "Run directory: jobs/<name>/ per job, summary.json, summary.svg");
  app.add_option("--jobs,-j", a->jobs, "CPU jobs at once (GPU jobs: one per device)")->capture_default_str();
  app.add_option("--device", a->device, "cpu | cuda: --device for every job whose command has it and leaves it unset");
  app.add_option("--shard", a->shard, "I/N: run the jobs whose index % N == I (Slurm array tasks)");
  app.add_flag("--retry-failed", a->retry_failed, "Run jobs that failed in an earlier run again");
  app.add_flag("--dry-run", a->dry_run, "Print the expanded job list and what is already done; run nothing");
  app.add_flag("--verify-inputs", a->verify_inputs,
               "Key jobs by the inputs' content hashes instead of their sizes and modification times");
  app.add_flag("--quiet", a->quiet, "No progress line on the terminal");

  CLI::App* summarize = app.add_subcommand("summarize", "Merge what every shard wrote: summary.json, summary.svg, a table");
  summarize->add_option("run_dir", a->summarize_dir, "Run directory")->required();

  CLI::App* slurm = app.add_subcommand("slurm", "Print a script that submits the run as a Slurm job array + summary job");
  slurm->add_option("jobs_file", a->slurm_job_file, "Job file")->required();
  slurm->add_option("-o,--output", a->slurm_run_dir, "Run directory, on a file system every node sees")->required();
  slurm->add_option("--shards", a->shards, "Array tasks (shards)")->required();
  slurm->add_option("--partition", a->partition, "Slurm partition");
  slurm->add_option("--gpus-per-task", a->gpus_per_task, "GPUs per array task");
  slurm->add_option("--cpus-per-task", a->cpus_per_task, "CPUs per array task");
  slurm->add_option("--time", a->time_limit, "Time limit per array task (Slurm format, e.g. 4:00:00)");
  slurm->add_option("--jobs,-j", a->slurm_jobs, "Jobs at once within each task")->capture_default_str();
  slurm->add_option("--device", a->slurm_device, "cpu | cuda, as for `tiepoint batch`");
  slurm->add_flag("--retry-failed", a->slurm_retry_failed, "As for `tiepoint batch`");
  slurm->add_flag("--verify-inputs", a->slurm_verify_inputs, "As for `tiepoint batch`");

  CLI::App* self = &app;
  return [a, self, summarize, slurm]() -> int {
    if (summarize->parsed()) return RunSummarize(*a);
    if (slurm->parsed()) return RunSlurm(*self, *a);
    return RunMain(*self, *a);
  };
}

}  // namespace tiepoint::cli
