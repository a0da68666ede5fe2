// `tiepoint batch` end to end, through the binary: job-file validation, matrix expansion,
// resume after SIGKILL at random moments, a failing job among good ones, changed options,
// shards in parallel, SIGTERM. The jobs are small BAL solves (data/sample-20-2000.bal and
// problems made with `tiepoint synth`), one thread each.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

using json = nlohmann::json;

// The paths compiled in, unless the environment names others (a copy of the build run on
// another machine: TIEPOINT_BINARY, the tiepoint binary; TIEPOINT_SOURCE_DIR, the checkout).
std::string FromEnv(const char* name, const std::string& compiled) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : compiled;
}
const std::string kBinary = FromEnv("TIEPOINT_BINARY", TIEPOINT_BINARY);
const std::string kSourceDir = FromEnv("TIEPOINT_SOURCE_DIR", TIEPOINT_SOURCE_DIR);
const std::string kSample = kSourceDir + "/data/sample-20-2000.bal";
const std::string kMalformed = kSourceDir + "/tests/data/malformed/truncated_points.txt";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") out.push_back(n);
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Result {
  int code = -1;
  std::string out, err;
};

// Starts `tiepoint ARGS...` with stdout/stderr into files; returns the pid.
pid_t Start(const std::vector<std::string>& args, const std::string& out_path, const std::string& err_path) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int o = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    const int e = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    ::dup2(o, 1);
    ::dup2(e, 2);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(kBinary.c_str()));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(kBinary.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

int WaitFor(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

class BatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tiepoint-batch-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!HasFailure()) std::system(("rm -rf '" + dir_ + "'").c_str());
  }

  Result Run(const std::vector<std::string>& args) {
    const std::string out = dir_ + "/.stdout", err = dir_ + "/.stderr";
    Result r;
    r.code = WaitFor(Start(args, out, err));
    r.out = ReadFile(out);
    r.err = ReadFile(err);
    return r;
  }

  // A synthetic problem, small enough for a few tens of milliseconds of solving.
  std::string Synth(const std::string& name, int cameras, int points, int seed) {
    const std::string path = dir_ + "/" + name + ".bal";
    const Result r = Run({"synth", "--cameras", std::to_string(cameras), "--points", std::to_string(points),
                          "--noise", "0.5", "--seed", std::to_string(seed), "-o", path});
    EXPECT_EQ(r.code, 0) << r.err;
    return path;
  }

  // Runs a batch of the one job `job` (named "rec") on junk inputs, into `run`: it must fail
  // with a record; returns the record's text.
  std::string RunJunkJob(json job, const std::string& run) {
    job["name"] = "rec";
    job["threads"] = 1;
    WriteFile(dir_ + "/jobs.json", json({{"jobs", {job}}}).dump());
    const Result r = Run({"batch", dir_ + "/jobs.json", "-o", run});
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    const std::string record = ReadFile(run + "/jobs/rec/job.json");
    EXPECT_FALSE(record.empty()) << r.out << r.err;
    return record;
  }

  json Summary(const std::string& run) {
    return json::parse(ReadFile(run + "/summary.json"));
  }

  std::string dir_;
};

// The six-job run of the resume tests: 2 problems x 3 solvers, writing the refined BAL.
std::string SixJobs(const std::string& a, const std::string& b) {
  json matrix = {{"kind", "ba"},
                 {"input", {a, b}},
                 {"solver", {"cholmod", "pcg-schur", "ceres-sparse"}},
                 {"output", "refined.bal"}};
  json file = {{"defaults", {{"threads", 1}, {"max-iterations", 8}}}, {"matrix", {matrix}}};
  return file.dump(2);
}

TEST_F(BatchTest, ValidationErrorsNameJobAndField) {
  WriteFile(dir_ + "/jobs.json", R"({
  "defaults": {"threads": 1, "colour": "red"},
  "jobs": [
    {"name": "missing-input", "kind": "ba", "input": "no-such-problem.bal"},
    {"name": "typo", "kind": "ba", "input": ")" + kSample + R"(", "slover": "cholmod"},
    {"name": "typo", "kind": "ba", "input": ")" + kSample + R"("},
    {"name": "wrong-type", "kind": "ba", "input": ")" + kSample + R"(", "max-iterations": "ten"},
    {"name": "negative", "kind": "ba", "input": ")" + kSample + R"(", "threads": -2},
    {"name": "flag", "kind": "ba", "input": ")" + kSample + R"(", "fix-intrinsics": "yes"},
    {"name": "managed", "kind": "ba", "input": ")" + kSample + R"(", "report": "r.json"},
    {"name": "no-input", "kind": "ba"},
    {"name": "bad/name", "kind": "ba", "input": ")" + kSample + R"("},
    {"name": "strange", "kind": "paint", "input": "x"},
    {"kind": "ba", "input": "x"}
  ]
})");
  const Result r = Run({"batch", dir_ + "/jobs.json", "-o", dir_ + "/run"});
  EXPECT_EQ(r.code, 2);
  const std::string file = dir_ + "/jobs.json: ";
  for (const std::string& expected : {
           "job 'missing-input' (jobs[0]): field 'input': input '" + dir_ + "/no-such-problem.bal': No such file",
           std::string("job 'typo' (jobs[1]): field 'slover': not an option of `tiepoint ba` (did you mean 'solver'?)"),
           std::string("job 'typo' (jobs[2]): field 'name': duplicate: jobs[1] has the same name"),
           std::string("job 'wrong-type' (jobs[3]): field 'max-iterations': expected an integer, got string \"ten\""),
           std::string("job 'flag' (jobs[5]): field 'fix-intrinsics': expected true or false"),
           std::string("job 'managed' (jobs[6]): field 'report': set by tiepoint batch"),
           std::string("job 'no-input' (jobs[7]): field 'input': missing"),
           std::string("job 'bad/name' (jobs[8]): field 'name': 'bad/name' has '/'"),
           std::string("job 'strange' (jobs[9]): field 'kind': 'paint' is not a job kind"),
           std::string("jobs[10]: field 'name': missing"),
           std::string("defaults: field 'colour': not an option of any job's command"),
       }) {
    EXPECT_NE(r.err.find(file + expected), std::string::npos) << "missing: " << expected << "\n--- stderr:\n" << r.err;
  }
  // The job's own negative value is checked by the command's validator (NonNegativeNumber).
  EXPECT_NE(r.err.find("job 'negative' (jobs[4]): field 'threads': "), std::string::npos) << r.err;
  EXPECT_FALSE(Exists(dir_ + "/run")) << "nothing may run (or be created) when the job file is invalid";

  // Not JSON at all: the parser's line and column.
  WriteFile(dir_ + "/broken.json", "{\"jobs\": [\n  {\"name\": 1,}\n]}\n");
  const Result b = Run({"batch", dir_ + "/broken.json", "-o", dir_ + "/run"});
  EXPECT_EQ(b.code, 2);
  EXPECT_NE(b.err.find("broken.json: not valid JSON"), std::string::npos) << b.err;
  EXPECT_NE(b.err.find("line 2"), std::string::npos) << b.err;
}

// Job files the fuzzer (tests/fuzz/batch_jobs_fuzz.cc) or reading the reader found: each is
// a message and exit code 2, never a crash, a stack overflow or an absurd expansion.
TEST_F(BatchTest, MalformedJobFilesFromFuzzing) {
  struct Case {
    const char* name;
    std::string text;
    const char* expected;
  };
  std::string deep(100, '[');
  deep += std::string(100, ']');
  // 16 axes of 16 values: 2^64 jobs, a product that wrapped to 0 (no job, no error) once.
  std::string wrap = R"({"matrix": {"kind": "ba")";
  for (const char* axis : {"input", "solver", "device", "precision", "jacobian", "cg-min-iterations",
                           "cg-max-iterations", "cg-eta", "cg-stop", "max-iterations", "threads", "loss",
                           "fix-cameras", "function-tolerance", "ply", "output"}) {
    wrap += std::string(", \"") + axis + "\": [";
    for (int i = 0; i < 16; ++i) wrap += std::string(i ? "," : "") + "\"v" + std::to_string(i) + "\"";
    wrap += "]";
  }
  wrap += "}}";
  std::string many = R"({"matrix": {"kind": "ba", "input": ")" + kSample + R"(", "solver": [)";
  for (int i = 0; i < 400; ++i) many += std::string(i ? "," : "") + "\"s" + std::to_string(i) + "\"";
  many += R"(], "max-iterations": [)";
  for (int i = 0; i < 400; ++i) many += std::string(i ? "," : "") + std::to_string(i);
  many += "]}}";
  const Case cases[] = {
      {"number.json", R"({"jobs": [{"name": "x", "kind": "ba", "max-iterations": 1e400}]})",
       "number.json: not valid JSON"},
      {"deep.json", R"({"jobs": )" + deep + "}", "deep.json: arrays and objects nested deeper than 64"},
      {"many.json", many, "expands into 400 x 400 jobs (more than 100000)"},
      {"wrap.json", wrap, "expands into 16 x 16 x 16"},
  };
  for (const Case& c : cases) {
    WriteFile(dir_ + "/" + c.name, c.text);
    const Result r = Run({"batch", dir_ + "/" + c.name, "-o", dir_ + "/run"});
    EXPECT_EQ(r.code, 2) << c.name << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << c.name << "\n" << r.err;
  }
  EXPECT_FALSE(Exists(dir_ + "/run"));
}

TEST_F(BatchTest, MatrixExpandsInFileOrderAndShardsByIndex) {
  ::mkdir((dir_ + "/p").c_str(), 0777);
  WriteFile(dir_ + "/p/beta.txt", ReadFile(kSample));
  WriteFile(dir_ + "/p/alpha.bal", ReadFile(kSample));
  WriteFile(dir_ + "/jobs.json", R"({
  "defaults": {"threads": 1},
  "jobs": [{"name": "first", "kind": "ba", "input": "p/alpha.bal", "max-iterations": 3}],
  "matrix": [
    {"kind": "ba", "input": ["p/*"], "solver": ["cholmod", "pcg-schur"], "loss": "huber:1"},
    {"kind": "ba", "name": "{solver}-on-{input}-{max-iterations}", "input": "p/beta.txt",
     "solver": ["cholmod"], "max-iterations": [2, 4]},
    {"kind": "bench", "name": "bench-{solvers}", "problems": [["p/*"]], "solvers": ["cholmod,pcg-schur"]}
  ]
})");
  const Result r = Run({"batch", dir_ + "/jobs.json", "-o", dir_ + "/run", "--dry-run"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> names;
  std::istringstream lines(r.out);
  std::string line;
  std::getline(lines, line);
  EXPECT_NE(line.find("8 jobs"), std::string::npos) << r.out;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    int index;
    std::string name;
    words >> index >> name;
    EXPECT_EQ(index, static_cast<int>(names.size())) << line;
    names.push_back(name);
  }
  const std::vector<std::string> expected = {
      "first", "alpha-cholmod", "alpha-pcg-schur", "beta-cholmod", "beta-pcg-schur",
      "cholmod-on-beta-2", "cholmod-on-beta-4", "bench-cholmod_pcg-schur"};
  EXPECT_EQ(names, expected) << r.out;
  // Options become flags of the command; the matrix's fixed fields and the defaults apply to each.
  EXPECT_NE(r.out.find("tiepoint ba --threads 1 --solver pcg-schur --loss huber:1 --report " + dir_ +
                       "/run/jobs/beta-pcg-schur/report.json --quiet -- " + dir_ + "/p/beta.txt"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--solvers cholmod,pcg-schur --out " + dir_ + "/run/jobs/bench-cholmod_pcg-schur/bench.json"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-- " + dir_ + "/p/alpha.bal " + dir_ + "/p/beta.txt"), std::string::npos) << r.out;
  EXPECT_FALSE(Exists(dir_ + "/run")) << "--dry-run writes nothing";

  // Shard 1/3 lists the jobs whose index % 3 == 1.
  const Result s = Run({"batch", dir_ + "/jobs.json", "-o", dir_ + "/run", "--dry-run", "--shard", "1/3"});
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_NE(s.out.find("shard 1/3 runs 3"), std::string::npos) << s.out;
  for (int i = 0; i < 8; ++i) {
    const bool listed = s.out.find("\n   " + std::to_string(i) + "  ") != std::string::npos;
    EXPECT_EQ(listed, i % 3 == 1) << i << "\n" << s.out;
  }
  EXPECT_EQ(Run({"batch", dir_ + "/jobs.json", "-o", dir_ + "/run", "--shard", "3/3"}).code, 2);
}

// Kills the batch with SIGKILL at random moments and resumes it until it finishes; every
// finished job's outputs must equal an uninterrupted run's, and no finished job is redone.
TEST_F(BatchTest, ResumeAfterSigkillAtRandomMoments) {
  const std::string a = Synth("a", 12, 1500, 1), b = Synth("b", 16, 2500, 2);
  WriteFile(dir_ + "/jobs.json", SixJobs(a, b));
  const std::string ref = dir_ + "/ref";
  const auto t0 = std::chrono::steady_clock::now();
  const Result full = Run({"batch", dir_ + "/jobs.json", "-o", ref, "--jobs", "2"});
  const double full_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(full.code, 0) << full.out << full.err;
  const std::vector<std::string> names = {"a-cholmod", "a-pcg-schur", "a-ceres-sparse",
                                          "b-cholmod", "b-pcg-schur", "b-ceres-sparse"};
  std::map<std::string, std::string> ref_output;
  for (const std::string& n : names) {
    ref_output[n] = ReadFile(ref + "/jobs/" + n + "/refined.bal");
    ASSERT_FALSE(ref_output[n].empty()) << n;
  }

  std::mt19937 rng(17);
  int kills = 0;
  for (int repetition = 0; repetition < 4; ++repetition) {
    const std::string run = dir_ + "/run" + std::to_string(repetition);
    std::map<std::string, std::string> finished_records;  // name -> job.json when first seen
    for (int attempt = 0;; ++attempt) {
      ASSERT_LT(attempt, 40) << "the run never finished";
      const pid_t pid = Start({"batch", dir_ + "/jobs.json", "-o", run, "--jobs", "2"},
                              dir_ + "/.out", dir_ + "/.err");
      // Kill within the run's length (not on the last attempts, so that it ends).
      const int delay_ms = attempt < 8 ? std::uniform_int_distribution<int>(0, static_cast<int>(full_s * 800))(rng) : -1;
      bool killed = false;
      if (delay_ms >= 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
        killed = ::kill(pid, SIGKILL) == 0;
      }
      const int code = WaitFor(pid);
      if (code == 128 + SIGKILL) ++kills;
      // Whatever looks finished is finished, intact and never redone.
      for (const std::string& n : names) {
        const std::string dir = run + "/jobs/" + n;
        if (!Exists(dir + "/job.json")) continue;
        const std::string record = ReadFile(dir + "/job.json");
        ASSERT_EQ(json::parse(record)["status"], "done") << n;
        EXPECT_EQ(ReadFile(dir + "/refined.bal"), ref_output[n]) << n << " after attempt " << attempt;
        EXPECT_TRUE(Exists(dir + "/report.json")) << n;
        if (finished_records.count(n) != 0) {
          EXPECT_EQ(record, finished_records[n]) << n << " was run again";
        } else {
          finished_records[n] = record;
        }
      }
      if (code == 0) break;
      ASSERT_TRUE(killed && code == 128 + SIGKILL) << "exit " << code << ": " << ReadFile(dir_ + "/.err");
    }
    EXPECT_EQ(finished_records.size(), names.size());
    // No temporary or half-finished directory is left.
    for (const std::string& entry : ListDir(run + "/jobs")) {
      EXPECT_NE(entry[0], '.') << "left behind: " << entry;
      EXPECT_TRUE(Exists(run + "/jobs/" + entry + "/job.json")) << entry;
    }
    const json summary = Summary(run);
    EXPECT_EQ(summary["totals"]["done"], 6) << summary.dump(1);
  }
  EXPECT_GE(kills, 4) << "too few kills landed inside runs";
}

TEST_F(BatchTest, FailingJobAmongGoodOnes) {
  WriteFile(dir_ + "/jobs.json", json({{"defaults", {{"threads", 1}, {"max-iterations", 4}}},
                                       {"jobs", {{{"name", "good-1"}, {"kind", "ba"}, {"input", kSample}},
                                                 {{"name", "broken"}, {"kind", "ba"}, {"input", kMalformed}},
                                                 {{"name", "good-2"}, {"kind", "ba"}, {"input", kSample},
                                                  {"solver", "cholmod"}}}}})
                                         .dump());
  const std::string run = dir_ + "/run";
  const Result r = Run({"batch", dir_ + "/jobs.json", "-o", run, "--jobs", "2"});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  json s = Summary(run);
  std::map<std::string, json> by_name;
  for (const json& j : s["jobs"]) by_name[j["name"]] = j;
  EXPECT_EQ(by_name["good-1"]["status"], "done");
  EXPECT_EQ(by_name["good-2"]["status"], "done");
  EXPECT_EQ(by_name["broken"]["status"], "failed");
  EXPECT_EQ(by_name["broken"]["exit_code"], 2);
  EXPECT_NE(by_name["broken"]["error"].get<std::string>().find("truncated_points.txt"), std::string::npos)
      << by_name["broken"].dump();
  EXPECT_GT(by_name["good-1"]["result"]["final_cost"].get<double>(), 0.0);
  EXPECT_GT(by_name["good-1"]["peak_rss_bytes"].get<double>(), 1e6);
  EXPECT_NE(r.out.find("broken"), std::string::npos);
  EXPECT_TRUE(Exists(run + "/summary.svg"));
  EXPECT_NE(ReadFile(run + "/summary.svg").find("<svg"), std::string::npos);

  // Again: nothing runs (the failure is kept), still exit 1. With --retry-failed it runs.
  const std::string record = ReadFile(run + "/jobs/broken/job.json");
  const Result again = Run({"batch", dir_ + "/jobs.json", "-o", run});
  EXPECT_EQ(again.code, 1);
  EXPECT_EQ(ReadFile(run + "/jobs/broken/job.json"), record);
  EXPECT_NE(again.out.find("--retry-failed"), std::string::npos) << again.out;
  const Result retry = Run({"batch", dir_ + "/jobs.json", "-o", run, "--retry-failed"});
  EXPECT_EQ(retry.code, 1);
  EXPECT_NE(ReadFile(run + "/jobs/broken/job.json"), record);
  EXPECT_NE(retry.out.find("FAILED broken"), std::string::npos) << retry.out;
  EXPECT_EQ(retry.out.find("done   good"), std::string::npos) << "good jobs were run again:\n" << retry.out;
}

TEST_F(BatchTest, ChangedOptionsOrInputsRerunExactlyTheAffectedJobs) {
  const std::string a = Synth("a", 8, 600, 3), b = Synth("b", 8, 600, 4);
  json file = {{"defaults", {{"threads", 1}, {"max-iterations", 5}}},
               {"matrix", {{{"kind", "ba"}, {"input", {a, b}}, {"solver", {"cholmod", "pcg-schur"}}}}}};
  WriteFile(dir_ + "/jobs.json", file.dump());
  const std::string run = dir_ + "/run";
  ASSERT_EQ(Run({"batch", dir_ + "/jobs.json", "-o", run}).code, 0);
  auto records = [&] {
    std::map<std::string, std::string> r;
    for (const char* n : {"a-cholmod", "a-pcg-schur", "b-cholmod", "b-pcg-schur", "a-ceres-sparse"}) {
      r[n] = ReadFile(run + "/jobs/" + n + "/job.json");
    }
    return r;
  };
  const auto before = records();
  // Nothing changed: nothing runs.
  Result r = Run({"batch", dir_ + "/jobs.json", "-o", run});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(records(), before);
  EXPECT_NE(r.out.find("0 this run, 4 already"), std::string::npos) << r.out;

  // One more solver on the axis, and a different loss for the cholmod jobs only.
  json changed = file;
  changed["matrix"][0]["name"] = "{input}-{solver}";
  changed["matrix"][0]["solver"] = {"pcg-schur", "ceres-sparse"};
  changed["matrix"].push_back({{"kind", "ba"}, {"input", {a, b}}, {"solver", {"cholmod"}}, {"loss", "huber:2"}});
  WriteFile(dir_ + "/jobs.json", changed.dump());
  r = Run({"batch", dir_ + "/jobs.json", "-o", run});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  auto after = records();
  EXPECT_EQ(after["a-pcg-schur"], before.at("a-pcg-schur"));
  EXPECT_EQ(after["b-pcg-schur"], before.at("b-pcg-schur"));
  EXPECT_NE(after["a-cholmod"], before.at("a-cholmod"));
  EXPECT_NE(after["b-cholmod"], before.at("b-cholmod"));
  EXPECT_FALSE(after["a-ceres-sparse"].empty());
  EXPECT_NE(r.out.find("4 this run, 2 already"), std::string::npos) << r.out;

  // An input's modification time changes: the jobs on it run again; with --verify-inputs a
  // touch alone does not count, a change of content does.
  const auto mid = records();
  ::utimensat(AT_FDCWD, b.c_str(), nullptr, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ::utimensat(AT_FDCWD, b.c_str(), nullptr, 0);
  r = Run({"batch", dir_ + "/jobs.json", "-o", run});
  EXPECT_NE(r.out.find("3 this run, 3 already"), std::string::npos) << r.out;
  EXPECT_EQ(records()["a-cholmod"], mid.at("a-cholmod"));
  EXPECT_NE(records()["b-cholmod"], mid.at("b-cholmod"));
  r = Run({"batch", dir_ + "/jobs.json", "-o", run, "--verify-inputs"});  // records gain content hashes
  EXPECT_NE(r.out.find("6 this run, 0 already"), std::string::npos) << r.out;
  ::utimensat(AT_FDCWD, a.c_str(), nullptr, 0);
  r = Run({"batch", dir_ + "/jobs.json", "-o", run, "--verify-inputs"});
  EXPECT_NE(r.out.find("0 this run, 6 already"), std::string::npos) << r.out;
}

// A folder of images stands for the image files in it and its subfolders (as reconstruct
// reads it): an image changed, added or removed in a subfolder, which leaves the folder's
// own stat as it was, changes the job's key. The images are junk (the job fails at once,
// which is all a key needs; a changed failed job runs again without --retry-failed).
TEST_F(BatchTest, AFolderOfImagesIsKeyedByTheImagesBelowIt) {
  const std::string photos = dir_ + "/photos";
  ASSERT_EQ(::mkdir(photos.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((photos + "/cam0").c_str(), 0755), 0);
  WriteFile(photos + "/cam0/a.png", "junk a");
  WriteFile(photos + "/cam0/b.png", "junk b");
  const std::string run = dir_ + "/run", record = run + "/jobs/rec/job.json";
  const std::string first = RunJunkJob({{"kind", "reconstruct"}, {"images", photos}}, run);
  ASSERT_FALSE(first.empty());
  Result r;
  // Both images of the subfolder were found (and failed to decode).
  EXPECT_NE(json::parse(first)["error"].get<std::string>().find("(0 of 2 could be read)"), std::string::npos) << first;
  r = Run({"batch", dir_ + "/jobs.json", "-o", run});
  EXPECT_EQ(r.out.find("FAILED rec"), std::string::npos) << "run again:\n" << r.out;
  EXPECT_EQ(ReadFile(record), first);

  struct stat top_before, top_after;
  ASSERT_EQ(::stat(photos.c_str(), &top_before), 0);
  WriteFile(photos + "/cam0/a.png", "junk A");  // in place, the same size
  ASSERT_EQ(::stat(photos.c_str(), &top_after), 0);
  EXPECT_EQ(top_before.st_mtim.tv_nsec, top_after.st_mtim.tv_nsec);  // the folder's own stat stays
  r = Run({"batch", dir_ + "/jobs.json", "-o", run});
  EXPECT_NE(r.out.find("FAILED rec"), std::string::npos) << "not run again:\n" << r.out;
  const std::string second = ReadFile(record);
  EXPECT_NE(second, first);

  ASSERT_EQ(::rename((photos + "/cam0/a.png").c_str(), (photos + "/cam0/d.png").c_str()), 0);  // renamed
  r = Run({"batch", dir_ + "/jobs.json", "-o", run});
  EXPECT_NE(r.out.find("FAILED rec"), std::string::npos) << "not run again:\n" << r.out;
  EXPECT_NE(ReadFile(record), second);
  WriteFile(photos + "/cam0/c.png", "junk c");  // a new image in the subfolder
  r = Run({"batch", dir_ + "/jobs.json", "-o", run});
  EXPECT_NE(r.out.find("FAILED rec"), std::string::npos) << "not run again:\n" << r.out;
  EXPECT_NE(ReadFile(record).find("(0 of 3 could be read)"), std::string::npos) << ReadFile(record);
  WriteFile(photos + "/README.txt", "not an image");  // the folder's own stat changes, its images do not
  r = Run({"batch", dir_ + "/jobs.json", "-o", run});
  EXPECT_EQ(r.out.find("FAILED rec"), std::string::npos) << "run again:\n" << r.out;

  // With --verify-inputs the contents count: a touch does not, a change of content does.
  r = Run({"batch", dir_ + "/jobs.json", "-o", run, "--verify-inputs"});  // the record gains content hashes
  EXPECT_NE(r.out.find("FAILED rec"), std::string::npos) << "not run again:\n" << r.out;
  ::utimensat(AT_FDCWD, (photos + "/cam0/b.png").c_str(), nullptr, 0);
  r = Run({"batch", dir_ + "/jobs.json", "-o", run, "--verify-inputs"});
  EXPECT_EQ(r.out.find("FAILED rec"), std::string::npos) << "run again:\n" << r.out;
  WriteFile(photos + "/cam0/b.png", "junk B");  // same size
  r = Run({"batch", dir_ + "/jobs.json", "-o", run, "--verify-inputs"});
  EXPECT_NE(r.out.find("FAILED rec"), std::string::npos) << "not run again:\n" << r.out;
}

// A folder of other files (reconstruct --features: extract's outputs, in subfolders for the
// images of subfolders) is keyed by every file below it.
TEST_F(BatchTest, AFeaturesFolderIsKeyedByTheFilesBelowIt) {
  const std::string photos = dir_ + "/photos", feat = dir_ + "/feat";
  for (const std::string& d : {photos, photos + "/cam0", feat, feat + "/cam0"}) ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
  WriteFile(photos + "/cam0/a.png", "junk a");
  WriteFile(feat + "/cam0/a.png.tpfeat", "junk features");
  WriteFile(feat + "/cam0/thumbnail.png", "junk image");  // not what --features reads
  ASSERT_EQ(::symlink("nowhere", (feat + "/gone.png.tpfeat").c_str()), 0);  // dangling: no batch error
  ASSERT_EQ(::mkfifo((feat + "/pipe.png.tpfeat").c_str(), 0644), 0);      // never read (it would block)
  const std::string run = dir_ + "/run", record = run + "/jobs/rec/job.json";
  const std::string first = RunJunkJob({{"kind", "reconstruct"}, {"features", feat}, {"image-path", photos}}, run);
  ASSERT_FALSE(first.empty());
  Result r;
  r = Run({"batch", dir_ + "/jobs.json", "-o", run});
  EXPECT_EQ(r.out.find("FAILED rec"), std::string::npos) << "run again:\n" << r.out;
  WriteFile(feat + "/cam0/a.png.tpfeat", "JUNK FEATURES");  // in a subfolder, in place, the same size
  r = Run({"batch", dir_ + "/jobs.json", "-o", run});
  EXPECT_NE(r.out.find("FAILED rec"), std::string::npos) << "not run again:\n" << r.out;
  EXPECT_NE(ReadFile(record), first);
  WriteFile(feat + "/cam0/thumbnail.png", "junk image, changed");  // not a features file: no rerun
  r = Run({"batch", dir_ + "/jobs.json", "-o", run, "--verify-inputs"});  // hashes the contents (not the pipe's)
  EXPECT_NE(r.out.find("FAILED rec"), std::string::npos) << "not run (records gain hashes):\n" << r.out;
  WriteFile(feat + "/cam0/thumbnail.png", "junk image, changed again");
  r = Run({"batch", dir_ + "/jobs.json", "-o", run, "--verify-inputs"});
  EXPECT_EQ(r.out.find("FAILED rec"), std::string::npos) << "run again:\n" << r.out;
}

// --mask-path: a folder keyed by every file below it (the masks, DIR/<image name>.png).
TEST_F(BatchTest, AMaskFolderIsKeyedByTheMasksBelowIt) {
  const std::string photos = dir_ + "/photos", masks = dir_ + "/masks";
  for (const std::string& d : {photos, masks, masks + "/cam0"}) ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
  WriteFile(photos + "/a.png", "junk a");
  WriteFile(masks + "/cam0/a.png.png", "junk mask");
  const std::string run = dir_ + "/run", record = run + "/jobs/rec/job.json";
  const std::string first = RunJunkJob({{"kind", "reconstruct"}, {"images", photos}, {"mask-path", masks}}, run);
  ASSERT_FALSE(first.empty());
  Result r = Run({"batch", dir_ + "/jobs.json", "-o", run});
  EXPECT_EQ(r.out.find("FAILED rec"), std::string::npos) << "run again:\n" << r.out;
  WriteFile(masks + "/cam0/a.png.png", "JUNK MASK");  // in a subfolder, in place, the same size
  r = Run({"batch", dir_ + "/jobs.json", "-o", run});
  EXPECT_NE(r.out.find("FAILED rec"), std::string::npos) << "not run again:\n" << r.out;
  EXPECT_NE(ReadFile(record), first);
}

// --camera-mask: a file input, keyed by its size and time (or contents).
TEST_F(BatchTest, ACameraMaskIsAnInput) {
  const std::string photos = dir_ + "/photos";
  ASSERT_EQ(::mkdir(photos.c_str(), 0755), 0);
  WriteFile(photos + "/a.png", "junk a");
  WriteFile(dir_ + "/mask.png", "junk mask");
  const std::string run = dir_ + "/run";
  ASSERT_FALSE(RunJunkJob({{"kind", "reconstruct"}, {"images", photos}, {"camera-mask", dir_ + "/mask.png"}}, run).empty());
  Result r = Run({"batch", dir_ + "/jobs.json", "-o", run});
  EXPECT_EQ(r.out.find("FAILED rec"), std::string::npos) << "run again:\n" << r.out;
  WriteFile(dir_ + "/mask.png", "JUNK MASK");
  r = Run({"batch", dir_ + "/jobs.json", "-o", run});
  EXPECT_NE(r.out.find("FAILED rec"), std::string::npos) << "not run again:\n" << r.out;
}

TEST_F(BatchTest, TwoShardsInParallelEqualOneRun) {
  const std::string a = Synth("a", 10, 800, 5), b = Synth("b", 10, 900, 6), c = Synth("c", 10, 700, 7);
  json file = {{"defaults", {{"threads", 1}, {"max-iterations", 6}}},
               {"matrix", {{{"kind", "ba"}, {"input", {a, b, c}}, {"solver", {"cholmod", "pcg-schur"}},
                            {"output", "refined.bal"}}}},
               {"jobs", {{{"name", "bench-all"}, {"kind", "bench"}, {"problems", {a, b}},
                          {"solvers", "cholmod,pcg-schur"}, {"max-iterations", 3}}}}};
  WriteFile(dir_ + "/jobs.json", file.dump());
  const std::string one = dir_ + "/one", two = dir_ + "/two";
  ASSERT_EQ(Run({"batch", dir_ + "/jobs.json", "-o", one}).code, 0);
  const pid_t s0 = Start({"batch", dir_ + "/jobs.json", "-o", two, "--shard", "0/2"}, dir_ + "/.o0", dir_ + "/.e0");
  const pid_t s1 = Start({"batch", dir_ + "/jobs.json", "-o", two, "--shard", "1/2"}, dir_ + "/.o1", dir_ + "/.e1");
  EXPECT_EQ(WaitFor(s0), 0) << ReadFile(dir_ + "/.e0");
  EXPECT_EQ(WaitFor(s1), 0) << ReadFile(dir_ + "/.e1");
  EXPECT_FALSE(Exists(two + "/summary.json")) << "a shard writes only its own files";
  const Result sum = Run({"batch", "summarize", two});
  ASSERT_EQ(sum.code, 0) << sum.err;
  const json js1 = Summary(one), js2 = Summary(two);
  ASSERT_EQ(js1["jobs"].size(), 7u);
  ASSERT_EQ(js2["jobs"].size(), 7u);
  for (size_t i = 0; i < 7; ++i) {
    const json& j1 = js1["jobs"][i];
    const json& j2 = js2["jobs"][i];
    EXPECT_EQ(j1["name"], j2["name"]);
    EXPECT_EQ(j1["status"], "done");
    EXPECT_EQ(j2["status"], "done");
    EXPECT_EQ(j2["shard"], std::to_string(i % 2) + "/2");
    const std::string name = j1["name"];
    if (name != "bench-all") {
      EXPECT_EQ(ReadFile(one + "/jobs/" + name + "/refined.bal"), ReadFile(two + "/jobs/" + name + "/refined.bal"))
          << name;
      EXPECT_EQ(j1["result"]["final_cost"], j2["result"]["final_cost"]) << name;
    } else {
      for (size_t k = 0; k < 4; ++k) {
        EXPECT_EQ(j1["result"]["runs"][k]["final_cost"], j2["result"]["runs"][k]["final_cost"]);
      }
    }
  }
  EXPECT_EQ(ListDir(one + "/jobs"), ListDir(two + "/jobs"));
  EXPECT_EQ(ListDir(two + "/shards"), (std::vector<std::string>{"0-of-2.json", "0-of-2.lock", "1-of-2.json", "1-of-2.lock"}));
}

TEST_F(BatchTest, SigtermStopsRunningJobsAndSaysWhatWasLeft) {
  // Jobs that run for seconds (they are stopped long before they end).
  const std::string a = Synth("big", 40, 30000, 8);
  json file = {{"defaults", {{"threads", 1}, {"max-iterations", 200}, {"function-tolerance", 0}}},
               {"matrix", {{{"kind", "ba"}, {"input", {a}}, {"solver", {"ceres-sparse", "ceres-iterative", "cholmod"}}}}}};
  WriteFile(dir_ + "/jobs.json", file.dump());
  const std::string run = dir_ + "/run";
  const pid_t pid = Start({"batch", dir_ + "/jobs.json", "-o", run}, dir_ + "/.out", dir_ + "/.err");
  // Wait until the first job is running, then stop the batch.
  for (int i = 0; i < 200; ++i) {
    bool running = false;
    for (const std::string& e : ListDir(run + "/jobs")) running |= e.find(".tmp-") != std::string::npos;
    if (running) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // summarize works on a run still going: the job at work is "running".
  const Result live = Run({"batch", "summarize", run});
  EXPECT_EQ(live.code, 0) << live.err;
  const json live_summary = Summary(run);
  EXPECT_EQ(live_summary["totals"]["running"], 1) << live.out;
  EXPECT_EQ(live_summary["totals"]["pending"], 2) << live.out;
  EXPECT_EQ(live_summary["jobs"][0]["status"], "running");
  ::kill(pid, SIGTERM);
  EXPECT_EQ(WaitFor(pid), 143);
  const std::string err = ReadFile(dir_ + "/.err");
  EXPECT_NE(err.find("stopped by SIGTERM"), std::string::npos) << err;
  EXPECT_NE(err.find("1 stopped"), std::string::npos) << err;
  EXPECT_NE(err.find("2 not started"), std::string::npos) << err;
  for (const std::string& e : ListDir(run + "/jobs")) EXPECT_NE(e[0], '.') << "left behind: " << e;
  const json shard = json::parse(ReadFile(run + "/shards/0-of-1.json"));
  EXPECT_EQ(shard["state"], "interrupted");
  // summarize on the stopped run reports the jobs as pending, exit 1.
  const Result sum = Run({"batch", "summarize", run});
  EXPECT_EQ(sum.code, 1);
  EXPECT_EQ(Summary(run)["totals"]["pending"], 3);
}

TEST_F(BatchTest, SlurmScriptRunsShardsAndADependentSummary) {
  WriteFile(dir_ + "/jobs.json", json({{"jobs", {{{"name", "one"}, {"kind", "ba"}, {"input", kSample}}}}}).dump());
  const Result r = Run({"batch", "slurm", dir_ + "/jobs.json", "-o", dir_ + "/run", "--shards", "3",
                        "--partition", "debug", "--gpus-per-task", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* expected : {"#SBATCH --array=0-2", "#SBATCH --partition=debug", "#SBATCH --gpus-per-task=1",
                               "--shard \"$SLURM_ARRAY_TASK_ID/${SLURM_ARRAY_TASK_COUNT:-3}\"",
                               "--dependency=afterany:$array_job", "batch summarize"}) {
    EXPECT_NE(r.out.find(expected), std::string::npos) << expected << "\n" << r.out;
  }
  EXPECT_FALSE(Exists(dir_ + "/run")) << "printing the script writes nothing";
  WriteFile(dir_ + "/bad.json", R"({"jobs": [{"name": "x", "kind": "ba", "input": "nope.bal"}]})");
  EXPECT_EQ(Run({"batch", "slurm", dir_ + "/bad.json", "-o", dir_ + "/run", "--shards", "2"}).code, 2);
}

}  // namespace
