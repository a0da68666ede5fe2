// The batch runner: fork/exec of this binary per job, resume by completion records, signals.
#include "cli/batch_runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>  // renameat2 (glibc >= 2.28)
#include <poll.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "cli/batch_summary.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "io/base/cuda_device.h"
#include "io/report.h"

extern char** environ;

namespace tiepoint::cli {
namespace {

using Clock = std::chrono::steady_clock;

const char* kRecordName = "job.json";

Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0777) == 0 || errno == EEXIST) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return Status::Ok();
    char target[4096];
    const ssize_t n = ::readlink(path.c_str(), target, sizeof(target) - 1);
    if (n >= 0 && ::stat(path.c_str(), &st) != 0) {  // mkdir -p refuses it too
      return Status::IoError(path + ": a symbolic link to '" + std::string(target, static_cast<size_t>(n)) +
                             "', which does not exist (create that directory, or name another)");
    }
    return Status::IoError(path + ": exists and is not a directory");
  }
  return Status::IoError(path + ": cannot create directory (" + std::strerror(errno) + ")");
}

// rm -rf without following symbolic links.
void RemoveTree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    if (DIR* d = ::opendir(path.c_str())) {
      while (dirent* e = ::readdir(d)) {
        if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
        RemoveTree(path + "/" + e->d_name);
      }
      ::closedir(d);
    }
    ::rmdir(path.c_str());
  } else {
    ::unlink(path.c_str());
  }
}

bool ReadJson(const std::string& path, nlohmann::json* out) {
  std::ifstream in(path);
  if (!in) return false;
  try {
    *out = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  return true;
}

std::string LastErrorLine(const std::string& stderr_path) {
  std::ifstream in(stderr_path);
  std::string line, last, last_error;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    const size_t cr = line.find_last_of('\r');  // progress lines
    if (cr != std::string::npos) line = line.substr(cr + 1);
    if (line.empty()) continue;
    last = line;
    if (line.find("error") != std::string::npos) last_error = line;
  }
  std::string out = last_error.empty() ? last : last_error;
  if (out.size() > 400) out = out.substr(0, 397) + "...";
  return out;
}

std::string SignalName(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string FormatDuration(double s) {
  char buf[64];
  if (s < 60) std::snprintf(buf, sizeof(buf), "%.0fs", s);
  else if (s < 3600) std::snprintf(buf, sizeof(buf), "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  else std::snprintf(buf, sizeof(buf), "%dh%02dm", static_cast<int>(s) / 3600, static_cast<int>(s) / 60 % 60);
  return buf;
}

enum class JobState { kNew, kDone, kFailed, kChanged, kUnverified };

const char* ToString(JobState s) {
  switch (s) {
    case JobState::kNew: return "new";
    case JobState::kDone: return "done";
    case JobState::kFailed: return "failed";
    case JobState::kChanged: return "changed";
    case JobState::kUnverified: return "unverified";
  }
  return "?";
}

struct PlannedJob {
  BatchJob job;
  std::string key_stat;
  std::string key_content;  // with --verify-inputs
  JobState state = JobState::kNew;
  bool mine = false;
  bool run = false;  // to be run by this shard now
};

JobState StateFromRecord(const std::string& run_dir, const PlannedJob& p, bool verify) {
  nlohmann::json rec;
  if (!ReadJson(JobDirectory(run_dir, p.job.name) + "/" + kRecordName, &rec)) return JobState::kNew;
  const std::string key_stat = rec.value("key", "");
  const std::string key_content = rec.value("key_content", "");
  bool same;
  if (verify) {
    if (key_content.empty()) return JobState::kUnverified;
    same = key_content == p.key_content;
  } else {
    same = key_stat == p.key_stat;
  }
  if (!same) return JobState::kChanged;
  return rec.value("status", "") == "done" ? JobState::kDone : JobState::kFailed;
}

// Which CUDA devices GPU jobs take turns on: CUDA_VISIBLE_DEVICES's list when set, else the
// devices found; one slot with no pinning when none is known (the job reports the error).
std::vector<std::string> GpuSlots() {
  std::vector<std::string> slots;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v != nullptr && *v != '\0') {
    std::stringstream ss(v);
    for (std::string item; std::getline(ss, item, ',');) {
      if (!item.empty()) slots.push_back(item);
    }
    return slots;
  }
  std::vector<CudaDeviceInfo> devices;
  if (QueryCudaDevices(&devices).ok()) {
    for (const auto& d : devices) slots.push_back(std::to_string(d.index));
  }
  if (slots.empty()) slots.push_back("");
  return slots;
}

struct Running {
  size_t plan_index = 0;
  pid_t pid = -1;
  std::string tmp_dir;
  Clock::time_point start;
  std::string started_utc;
  int gpu_slot = -1;
};

// Everything the child needs, built before fork() (the child calls only async-signal-safe
// functions: the parent may have library threads).
struct SpawnPlan {
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::string stdout_path, stderr_path;
};

pid_t Spawn(const SpawnPlan& plan, std::string* error) {
  std::vector<char*> argv;
  for (const std::string& a : plan.args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : plan.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const int out = ::open(plan.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  const int err = ::open(plan.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  const int null_in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (out < 0 || err < 0 || null_in < 0) {
    *error = plan.stdout_path + ": cannot create (" + std::strerror(errno) + ")";
    if (out >= 0) ::close(out);
    if (err >= 0) ::close(err);
    if (null_in >= 0) ::close(null_in);
    return -1;
  }
  const pid_t parent = ::getpid();
  // No handler of the batch may run in the child between fork and exec: signals are blocked
  // across fork and the child resets the dispositions before it unblocks them.
  sigset_t all, old_mask;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old_mask);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);  // its own group: signals reach the job and its workers, not the batch
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the batch died before prctl
    for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE}) ::signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(null_in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::execve("/proc/self/exe", argv.data(), envp.data());
    const char msg[] = "tiepoint batch: error: cannot execute /proc/self/exe\n";
    (void)!::write(2, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ::close(out);
  ::close(err);
  ::close(null_in);
  if (pid < 0) {
    *error = std::string("fork failed: ") + std::strerror(fork_errno);
    return -1;
  }
  ::setpgid(pid, pid);  // also here, so a signal forwarded at once finds the group
  return pid;
}

// Moves the finished temporary directory onto jobs/<name>: atomically swapped with an older
// result when there is one (renameat2 RENAME_EXCHANGE; where the file system lacks it, the
// old result is moved aside first, so for a moment there is no result: never a wrong one).
Status MoveIntoPlace(const std::string& tmp, const std::string& final_dir, const std::string& aside) {
  if (::rename(tmp.c_str(), final_dir.c_str()) == 0) return Status::Ok();
  if (errno != ENOTEMPTY && errno != EEXIST) {
    return Status::IoError(final_dir + ": cannot rename the job's outputs into place (" +
                           std::strerror(errno) + ")");
  }
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) == 0) {
    RemoveTree(tmp);  // now holds the old result
    return Status::Ok();
  }
  if (::rename(final_dir.c_str(), aside.c_str()) != 0 || ::rename(tmp.c_str(), final_dir.c_str()) != 0) {
    return Status::IoError(final_dir + ": cannot replace the older result (" + std::strerror(errno) + ")");
  }
  RemoveTree(aside);
  return Status::Ok();
}

// Signals reach the loop through a pipe: the handlers (which may run on any thread of the
// process) only write the signal number; the loop polls the pipe. The write end is the one
// mutable global here: a signal handler can reach nothing else.
int g_signal_pipe_write = -1;

extern "C" void OnBatchSignal(int sig) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  if (::write(g_signal_pipe_write, &byte, 1) < 0) {
  }
  errno = saved;
}

// Installs the handlers for the life of the object; restores the old ones after.
class SignalPipe {
 public:
  SignalPipe() {
    if (::pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) return;
    g_signal_pipe_write = fds_[1];
    for (size_t i = 0; i < kSignals.size(); ++i) {
      struct sigaction sa {};
      sa.sa_handler = OnBatchSignal;
      sigemptyset(&sa.sa_mask);
      sa.sa_flags = SA_RESTART | (kSignals[i] == SIGCHLD ? SA_NOCLDSTOP : 0);
      ::sigaction(kSignals[i], &sa, &old_[i]);
    }
  }
  ~SignalPipe() {
    for (size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
    g_signal_pipe_write = -1;
    if (fds_[0] >= 0) ::close(fds_[0]);
    if (fds_[1] >= 0) ::close(fds_[1]);
  }
  bool ok() const { return fds_[0] >= 0; }
  // Waits up to timeout_ms; returns the first stop signal received (0 if none).
  int Wait(int timeout_ms) {
    pollfd p{fds_[0], POLLIN, 0};
    ::poll(&p, 1, timeout_ms);
    int stop = 0;
    unsigned char buf[64];
    for (ssize_t n; (n = ::read(fds_[0], buf, sizeof(buf))) > 0;) {
      for (ssize_t i = 0; i < n; ++i) {
        if (buf[i] != SIGCHLD && stop == 0) stop = buf[i];
      }
    }
    return stop;
  }

 private:
  static constexpr std::array<int, 4> kSignals = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};
  int fds_[2] = {-1, -1};
  struct sigaction old_[4] = {};
};

class ShardLock {
 public:
  ~ShardLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  Status Acquire(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd_ < 0) return Status::IoError(path + ": cannot open (" + std::strerror(errno) + ")");
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      return Status::InvalidOptions(path + ": another `tiepoint batch` is running this shard of the run");
    }
    return Status::Ok();
  }

 private:
  int fd_ = -1;
};

class BatchRun {
 public:
  BatchRun(const BatchRunOptions& o, std::vector<BatchJob> jobs) : o_(o) {
    for (BatchJob& j : jobs) {
      PlannedJob p;
      p.job = std::move(j);
      plan_.push_back(std::move(p));
    }
  }

  int Run();

 private:
  Status Prepare();
  int DryRun();
  void StartJob(size_t i, int gpu_slot);
  void FinishJob(const Running& r, int wait_status, const rusage& usage);
  void WriteShardFile(const std::string& state);
  void UpdateProgress();
  int Finish(int signal_received);

  BatchRunOptions o_;
  std::vector<PlannedJob> plan_;
  std::string host_;
  std::string shard_name_;
  std::string started_utc_;
  long long started_ns_ = 0;
  std::vector<size_t> queue_;  // plan indices to run, in order
  std::map<pid_t, Running> running_;
  std::vector<std::string> gpu_slots_;
  std::vector<bool> gpu_busy_;
  int done_now_ = 0, failed_now_ = 0, skipped_done_ = 0, skipped_failed_ = 0, stopped_ = 0;
  double finished_wall_sum_ = 0;
  bool stopping_ = false;
  Clock::time_point run_start_;
  ProgressLine* progress_ = nullptr;
  std::vector<std::string> env_;
};

Status BatchRun::Prepare() {
  host_ = HostName();
  shard_name_ = std::to_string(o_.shard_index) + "-of-" + std::to_string(o_.shard_count);
  started_utc_ = UtcNow();
  started_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
  for (PlannedJob& p : plan_) {
    TIEPOINT_RETURN_IF_ERROR(FingerprintInputs(o_.verify_inputs, &p.job));
    p.key_stat = JobKey(p.job, false);
    if (o_.verify_inputs) p.key_content = JobKey(p.job, true);
    p.mine = p.job.index % o_.shard_count == o_.shard_index;
    p.state = StateFromRecord(o_.run_dir, p, o_.verify_inputs);
    if (!p.mine) continue;
    switch (p.state) {
      case JobState::kDone: ++skipped_done_; break;
      case JobState::kFailed:
        if (o_.retry_failed) p.run = true;
        else ++skipped_failed_;
        break;
      default: p.run = true;
    }
    if (p.run) queue_.push_back(static_cast<size_t>(&p - plan_.data()));
  }
  return Status::Ok();
}

int BatchRun::DryRun() {
  int mine = 0;
  std::map<std::string, int> counts;
  for (const PlannedJob& p : plan_) {
    if (!p.mine) continue;
    ++mine;
    ++counts[p.run ? (p.state == JobState::kFailed ? "retry" : "run") : ToString(p.state)];
  }
  std::printf("tiepoint batch: %zu jobs in %s", plan_.size(), o_.job_file.c_str());
  if (o_.shard_count > 1) std::printf(", shard %d/%d runs %d", o_.shard_index, o_.shard_count, mine);
  std::printf("; in %s: %d done, %d failed (%s), %d to run\n", o_.run_dir.c_str(), counts["done"],
              counts["failed"] + counts["retry"], o_.retry_failed ? "retried" : "kept; --retry-failed reruns them",
              counts["run"] + counts["retry"]);
  for (const PlannedJob& p : plan_) {
    if (!p.mine) continue;
    const char* what = !p.run ? ToString(p.state)
                       : p.state == JobState::kFailed ? "retry"
                       : p.state == JobState::kNew ? "run"
                       : p.state == JobState::kChanged ? "rerun (changed)"
                       : "rerun (unverified)";
    std::string cmd = "tiepoint";
    for (const std::string& a : p.job.args) {
      std::string shown = a;
      if (shown.rfind(kJobDirToken, 0) == 0) {
        shown = JobDirectory(o_.run_dir, p.job.name) + shown.substr(std::strlen(kJobDirToken));
      }
      cmd += " " + ShellQuote(shown);
    }
    std::printf("%4d  %-32s %-11s %-18s %s%s\n", p.job.index, p.job.name.c_str(), p.job.kind.c_str(),
                what, cmd.c_str(), p.job.uses_gpu ? "  [gpu]" : "");
  }
  return 0;
}

void BatchRun::WriteShardFile(const std::string& state) {
  nlohmann::json jobs = nlohmann::json::array();
  for (const PlannedJob& p : plan_) {
    nlohmann::json j = {{"index", p.job.index}, {"name", p.job.name}, {"kind", p.job.kind},
                        {"key", p.key_stat}};
    if (!p.key_content.empty()) j["key_content"] = p.key_content;
    jobs.push_back(j);
  }
  const nlohmann::json shard = {
      {"shard", std::to_string(o_.shard_index) + "/" + std::to_string(o_.shard_count)},
      {"state", state},
      {"host", host_},
      {"pid", static_cast<long>(::getpid())},
      {"job_file", o_.job_file},
      {"started_utc", started_utc_},
      {"started_unix_ns", started_ns_},
      {"updated_utc", UtcNow()},
      {"build", BuildIdentity()},
      {"done_this_run", done_now_},
      {"failed_this_run", failed_now_},
      {"jobs", jobs},
  };
  const Status s = WriteJson(o_.run_dir + "/shards/" + shard_name_ + ".json", shard);
  if (!s.ok()) std::fprintf(stderr, "tiepoint batch: warning: %s\n", s.ToString().c_str());
}

void BatchRun::StartJob(size_t i, int gpu_slot) {
  PlannedJob& p = plan_[i];
  Running r;
  r.plan_index = i;
  r.gpu_slot = gpu_slot;
  r.tmp_dir = o_.run_dir + "/jobs/." + p.job.name + ".tmp-" + host_ + "-" + std::to_string(::getpid());
  RemoveTree(r.tmp_dir);
  SpawnPlan sp;
  std::string error;
  Status s = MakeDir(r.tmp_dir);
  if (s.ok()) {
    sp.args.push_back("tiepoint");
    for (const std::string& a : p.job.args) {
      sp.args.push_back(a.rfind(kJobDirToken, 0) == 0 ? r.tmp_dir + a.substr(std::strlen(kJobDirToken)) : a);
    }
    sp.env = env_;
    if (gpu_slot >= 0 && !gpu_slots_[static_cast<size_t>(gpu_slot)].empty()) {
      sp.env.push_back("CUDA_VISIBLE_DEVICES=" + gpu_slots_[static_cast<size_t>(gpu_slot)]);
    }
    sp.stdout_path = r.tmp_dir + "/stdout.txt";
    sp.stderr_path = r.tmp_dir + "/stderr.txt";
    r.start = Clock::now();
    r.started_utc = UtcNow();
    r.pid = Spawn(sp, &error);
  } else {
    error = s.message();
  }
  if (r.pid < 0) {
    // Recorded as a failed job (exit code 127), like a command that cannot start.
    std::fprintf(stderr, "tiepoint batch: job '%s': %s\n", p.job.name.c_str(), error.c_str());
    r.start = Clock::now();
    r.started_utc = UtcNow();
    rusage none{};
    if (MakeDir(r.tmp_dir).ok()) {
      std::ofstream(r.tmp_dir + "/stderr.txt") << "tiepoint batch: error: " << error << "\n";
      FinishJob(r, 127 << 8, none);
    }
    return;
  }
  if (gpu_slot >= 0) gpu_busy_[static_cast<size_t>(gpu_slot)] = true;
  running_[r.pid] = r;
}

void BatchRun::FinishJob(const Running& r, int wait_status, const rusage& usage) {
  PlannedJob& p = plan_[r.plan_index];
  const double wall = std::chrono::duration<double>(Clock::now() - r.start).count();
  if (r.gpu_slot >= 0) gpu_busy_[static_cast<size_t>(r.gpu_slot)] = false;
  const bool exited = WIFEXITED(wait_status);
  const int code = exited ? WEXITSTATUS(wait_status) : -1;
  const int sig = WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : 0;
  if (stopping_ && !(exited && code == 0)) {
    // Stopped by this batch: not a result. Its partial outputs go; it runs again next time.
    RemoveTree(r.tmp_dir);
    ++stopped_;
    return;
  }
  const bool ok = exited && code == 0;
  std::string error;
  if (!ok) {
    error = LastErrorLine(r.tmp_dir + "/stderr.txt");
    if (sig != 0) {
      error = "killed by " + SignalName(sig) + (sig == SIGKILL ? " (out of memory?)" : "") +
              (error.empty() ? "" : "; last line of stderr: " + error);
    } else if (error.empty()) {
      error = "exit code " + std::to_string(code);
    }
  }
  const double cpu = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec * 1e-6 + usage.ru_stime.tv_sec +
                     usage.ru_stime.tv_usec * 1e-6;
  nlohmann::json inputs = nlohmann::json::array();
  for (const JobInput& in : p.job.inputs) {
    nlohmann::json e = {{"path", in.path}, {"size", in.size}, {"mtime_ns", in.mtime_ns}};
    if (!in.content_hash.empty()) e["content_hash"] = in.content_hash;
    if (!in.listing_hash.empty()) e["listing_hash"] = in.listing_hash;
    inputs.push_back(e);
  }
  std::vector<std::string> shown_args;
  for (const std::string& a : p.job.args) {
    shown_args.push_back(a.rfind(kJobDirToken, 0) == 0 ? "." + a.substr(std::strlen(kJobDirToken)) : a);
  }
  nlohmann::json record = {
      {"name", p.job.name},
      {"kind", p.job.kind},
      {"index", p.job.index},
      {"status", ok ? "done" : "failed"},
      {"exit_code", exited ? nlohmann::json(code) : nlohmann::json(nullptr)},
      {"signal", sig != 0 ? nlohmann::json(SignalName(sig)) : nlohmann::json(nullptr)},
      {"error", ok ? nlohmann::json(nullptr) : nlohmann::json(error)},
      {"command", shown_args},
      {"options", p.job.options},
      {"key", p.key_stat},
      {"inputs", inputs},
      {"build", BuildIdentity()},
      {"host", host_},
      {"shard", std::to_string(o_.shard_index) + "/" + std::to_string(o_.shard_count)},
      {"gpu", r.gpu_slot >= 0 ? nlohmann::json(gpu_slots_[static_cast<size_t>(r.gpu_slot)]) : nlohmann::json(nullptr)},
      {"started_utc", r.started_utc},
      {"finished_utc", UtcNow()},
      {"wall_s", wall},
      {"cpu_s", cpu},
      {"peak_rss_bytes", static_cast<long long>(usage.ru_maxrss) * 1024},
      {"job_file", o_.job_file},
  };
  if (o_.verify_inputs) record["key_content"] = p.key_content;
  const std::string final_dir = JobDirectory(o_.run_dir, p.job.name);
  const std::string aside = o_.run_dir + "/jobs/." + p.job.name + ".old-" + host_ + "-" + std::to_string(::getpid());
  Status s = MoveIntoPlace(r.tmp_dir, final_dir, aside);
  if (s.ok()) s = WriteJson(final_dir + "/" + kRecordName, record);
  if (!s.ok()) {
    std::fprintf(stderr, "tiepoint batch: job '%s': %s\n", p.job.name.c_str(), s.ToString().c_str());
    RemoveTree(r.tmp_dir);
    ++failed_now_;
    return;
  }
  ok ? ++done_now_ : ++failed_now_;
  finished_wall_sum_ += wall;
  if (progress_ != nullptr) progress_->Done();
  const nlohmann::json result = ok ? ReadJobResult(final_dir, p.job.kind) : nlohmann::json::object();
  std::string detail;
  if (!ok) {
    detail = error;
  } else if (result.contains("final_cost") && result["final_cost"].is_number()) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "final cost %.6e", result["final_cost"].get<double>());
    detail = buf;
  }
  std::printf("%-6s %-32s %8.2f s %8.1f MB  %s\n", ok ? "done" : "FAILED", p.job.name.c_str(), wall,
              usage.ru_maxrss / 1024.0, detail.c_str());
  std::fflush(stdout);
}

void BatchRun::UpdateProgress() {
  if (progress_ == nullptr) return;
  size_t left = 0;
  for (size_t i : queue_) left += i != SIZE_MAX;
  const int finished = done_now_ + failed_now_;
  std::string text = "batch: " + std::to_string(done_now_ + skipped_done_) + " done, " +
                     std::to_string(running_.size()) + " running, " +
                     std::to_string(failed_now_ + skipped_failed_) + " failed, " + std::to_string(left) + " left";
  if (finished > 0 && (left > 0 || !running_.empty())) {
    const double mean = finished_wall_sum_ / finished;
    const double slots = std::max<double>(1.0, std::min<double>(o_.max_jobs, left + running_.size()));
    double eta = mean * (left + 0.5 * running_.size()) / slots;
    text += ", about " + FormatDuration(eta) + " to go";
  }
  text += "  (" + FormatDuration(std::chrono::duration<double>(Clock::now() - run_start_).count()) + ")";
  progress_->Update(text);
}

int BatchRun::Run() {
  Status s = Prepare();
  if (!s.ok()) return ReportError("batch", s);
  if (o_.dry_run) return DryRun();
  for (const std::string& dir : {o_.run_dir, o_.run_dir + "/jobs", o_.run_dir + "/shards"}) {
    if (!(s = MakeDir(dir)).ok()) return ReportError("batch", s);
  }
  ShardLock lock;
  if (!(s = lock.Acquire(o_.run_dir + "/shards/" + shard_name_ + ".lock")).ok()) return ReportError("batch", s);

  // Leftovers of this shard's jobs from a run that was killed: temporaries and set-aside results.
  std::set<std::string> my_names;
  for (const PlannedJob& p : plan_) {
    if (p.mine) my_names.insert(p.job.name);
  }
  if (DIR* d = ::opendir((o_.run_dir + "/jobs").c_str())) {
    std::vector<std::string> stale;
    while (dirent* e = ::readdir(d)) {
      const std::string entry = e->d_name;
      if (entry.size() < 2 || entry[0] != '.' || entry == "..") continue;
      size_t cut = entry.rfind(".tmp-");
      if (cut == std::string::npos) cut = entry.rfind(".old-");
      if (cut == std::string::npos || my_names.count(entry.substr(1, cut - 1)) == 0) continue;
      // ".<name>.tmp-<host>-<pid>": keep one that a live process on this machine still owns.
      const std::string owner = entry.substr(cut + 5);
      const size_t dash = owner.rfind('-');
      if (dash != std::string::npos && owner.substr(0, dash) == host_) {
        const long pid = std::strtol(owner.c_str() + dash + 1, nullptr, 10);
        if (pid != ::getpid() && ProcessAlive(pid)) continue;
      }
      stale.push_back(o_.run_dir + "/jobs/" + entry);
    }
    ::closedir(d);
    for (const std::string& path : stale) RemoveTree(path);
  }

  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) != 0) env_.push_back(*e);
  }
  bool any_gpu = false;
  for (size_t i : queue_) any_gpu |= plan_[i].job.uses_gpu;
  if (any_gpu) {
    gpu_slots_ = GpuSlots();
    gpu_busy_.assign(gpu_slots_.size(), false);
  }

  SignalPipe signals;
  if (!signals.ok()) return ReportError("batch", Status::Internal(std::string("pipe: ") + std::strerror(errno)));

  WriteShardFile("running");
  run_start_ = Clock::now();
  ProgressLine progress(o_.show_progress);
  if (o_.show_progress) progress_ = &progress;

  int signal_received = 0;
  Clock::time_point stop_deadline;
  size_t next = 0;  // queue_ before `next` is started (or skipped as SIZE_MAX)
  for (;;) {
    // Start what fits: CPU jobs up to --jobs, GPU jobs one per device.
    if (!stopping_) {
      int cpu_running = 0;
      for (const auto& [pid, r] : running_) cpu_running += r.gpu_slot < 0;
      for (size_t q = next; q < queue_.size(); ++q) {
        const size_t i = queue_[q];
        if (i == SIZE_MAX) continue;
        int slot = -1;
        if (plan_[i].job.uses_gpu) {
          for (size_t g = 0; g < gpu_busy_.size(); ++g) {
            if (!gpu_busy_[g]) {
              slot = static_cast<int>(g);
              break;
            }
          }
          if (slot < 0) continue;
        } else if (cpu_running >= o_.max_jobs) {
          continue;
        } else {
          ++cpu_running;
        }
        queue_[q] = SIZE_MAX;
        StartJob(i, slot);
        WriteShardFile("running");
      }
      while (next < queue_.size() && queue_[next] == SIZE_MAX) ++next;
    }
    if (running_.empty() && (stopping_ || next >= queue_.size())) break;
    UpdateProgress();

    const int sig = signals.Wait(1000);
    if (sig != 0) {
      if (!stopping_) {
        stopping_ = true;
        signal_received = sig;
        stop_deadline = Clock::now() + std::chrono::seconds(10);
        progress.Done();
        std::fprintf(stderr, "tiepoint batch: %s: stopping %zu running job%s\n", SignalName(sig).c_str(),
                     running_.size(), running_.size() == 1 ? "" : "s");
        for (const auto& [pid, r] : running_) ::kill(-pid, sig);
      } else {
        for (const auto& [pid, r] : running_) ::kill(-pid, SIGKILL);  // asked twice
      }
    }
    if (stopping_ && Clock::now() > stop_deadline) {
      for (const auto& [pid, r] : running_) ::kill(-pid, SIGKILL);
    }
    // Reap every job that ended.
    for (;;) {
      int status = 0;
      rusage usage{};
      const pid_t pid = ::wait4(-1, &status, WNOHANG, &usage);
      if (pid <= 0) break;
      const auto it = running_.find(pid);
      if (it == running_.end()) continue;
      const Running r = it->second;
      running_.erase(it);
      ::kill(-pid, SIGKILL);  // workers it left behind, if any
      FinishJob(r, status, usage);
      if (!stopping_) WriteShardFile("running");
    }
  }
  progress.Done();
  progress_ = nullptr;
  return Finish(signal_received);
}

int BatchRun::Finish(int signal_received) {
  size_t not_started = 0;
  for (size_t i : queue_) not_started += i != SIZE_MAX;
  WriteShardFile(signal_received != 0 ? "interrupted" : "finished");
  int mine = 0, done = 0, failed = 0;
  for (const PlannedJob& p : plan_) {
    if (!p.mine) continue;
    ++mine;
    const JobState st = StateFromRecord(o_.run_dir, p, o_.verify_inputs);
    if (st == JobState::kDone) ++done;
    if (st == JobState::kFailed) ++failed;
  }
  if (o_.shard_count == 1) {
    nlohmann::json summary;
    Status s = CollectRunSummary(o_.run_dir, &summary);
    if (s.ok()) s = WriteRunSummary(o_.run_dir, summary);
    if (s.ok()) {
      std::printf("\n%s", FormatSummaryTable(summary).c_str());
    } else {
      std::fprintf(stderr, "tiepoint batch: warning: summary: %s\n", s.ToString().c_str());
    }
  }
  std::printf("tiepoint batch: %s%d of %d jobs done (%d this run, %d already), %d failed",
              o_.shard_count > 1 ? ("shard " + std::to_string(o_.shard_index) + "/" +
                                    std::to_string(o_.shard_count) + ": ").c_str() : "",
              done, mine, done_now_, skipped_done_, failed);
  if (skipped_failed_ > 0 && !o_.retry_failed) {
    std::printf(" (%d from an earlier run: --retry-failed runs them again)", skipped_failed_);
  }
  std::printf("\n");
  std::fflush(stdout);
  if (signal_received != 0) {
    std::fprintf(stderr,
                 "tiepoint batch: stopped by %s: %d job%s finished in this run, %d stopped (partial outputs "
                 "removed), %zu not started; %d of %d left: run the same command again to go on\n",
                 SignalName(signal_received).c_str(), done_now_ + failed_now_,
                 done_now_ + failed_now_ == 1 ? "" : "s", stopped_, not_started, mine - done - failed, mine);
    return 128 + signal_received;
  }
  if (failed > 0) {
    std::fprintf(stderr, "tiepoint batch: error: %d job%s failed (see RUN/jobs/<name>/stderr.txt)\n", failed,
                 failed == 1 ? "" : "s");
    return 1;
  }
  if (done < mine) {  // jobs that ran but could not be recorded (a full disk): say so
    std::fprintf(stderr,
                 "tiepoint batch: error: %d job%s not recorded as done (see the messages above); run the "
                 "same command again to go on\n",
                 mine - done, mine - done == 1 ? "" : "s");
  }
  return done == mine ? 0 : 1;
}

}  // namespace

std::string JobDirectory(const std::string& run_dir, const std::string& name) {
  return run_dir + "/jobs/" + name;
}

std::string HostName() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "host";
  std::string out;
  for (const char* c = host; *c; ++c) out += (*c == '/' || *c == '-') ? '_' : *c;  // '-' separates the pid
  return out;
}

bool ProcessAlive(long pid) {
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) == 0) return true;
  return errno == EPERM;
}

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int RunBatch(const BatchRunOptions& options, std::vector<BatchJob> jobs) {
  BatchRun runner(options, std::move(jobs));
  return runner.Run();
}

}  // namespace tiepoint::cli
