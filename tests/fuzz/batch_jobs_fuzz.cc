// The job file of `tiepoint batch`: ParseJobFile (cli/batch_jobs.h) against a catalog of the
// job kinds with the options of `tiepoint ba`, `bench` and `reconstruct` (their names, types,
// validators, flags, lists, positionals and required options as those commands register
// them). Input paths resolve inside a small fixture directory made once per process; inputs
// that could name a file outside it (a string starting with '/', "..", or their escapes) are
// skipped, so a run never globs the machine's file system. A matrix may expand into at most
// 64 jobs here (the limit is the reader's option; the real one is 100000).
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/batch_jobs.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

// Options as the three commands register them (cli/ba_command.cc, bench_command.cc,
// reconstruct_command.cc); the values are never used.
struct Catalog {
  CLI::App root{"tiepoint"};
  std::string s[32];
  std::vector<std::string> list[4];
  int i[16] = {};
  double d[4] = {};
  uint64_t u = 0;
  bool b[8] = {};

  Catalog() {
    CLI::App* ba = root.add_subcommand("ba");
    ba->add_option("input", s[0])->required();
    ba->add_option("--solver", s[1]);
    ba->add_option("--device", s[2]);
    ba->add_option("--precision", s[3]);
    ba->add_option("--jacobian", s[4]);
    ba->add_option("--cg-min-iterations", i[0]);
    ba->add_option("--cg-max-iterations", i[1]);
    ba->add_option("--cg-eta", d[0]);
    ba->add_option("--cg-stop", s[5]);
    ba->add_option("--max-iterations", i[2])->check(CLI::NonNegativeNumber);
    ba->add_option("--threads", i[3])->check(CLI::NonNegativeNumber);
    ba->add_option("-o,--output", s[6]);
    ba->add_option("--ply", s[7]);
    ba->add_option("--report", s[8]);
    ba->add_option("--loss", s[9]);
    ba->add_option("--fix-cameras", s[10]);
    ba->add_flag("--fix-intrinsics", b[0]);
    ba->add_option("--function-tolerance", d[1]);
    ba->add_flag("--quiet", b[1]);

    CLI::App* bench = root.add_subcommand("bench");
    bench->add_option("problems", list[0])->required();
    bench->add_option("--solvers", s[11])->required();
    bench->add_option("--threads", i[4])->check(CLI::NonNegativeNumber);
    bench->add_option("--max-iterations", i[5])->check(CLI::PositiveNumber);
    bench->add_option("--repetitions", i[6])->check(CLI::PositiveNumber);
    bench->add_option("--out", s[12]);
    bench->add_option("--plot", s[13]);
    bench->add_flag("--quiet", b[2]);

    CLI::App* rec = root.add_subcommand("reconstruct");
    rec->add_option("images", list[1])->required();
    rec->add_option("-o,--output", s[14])->required();
    rec->add_option("--device", s[15]);
    rec->add_option("--camera-model", s[16]);
    rec->add_flag("--single-camera", b[3]);
    rec->add_option("--intrinsics", s[17]);
    rec->add_option("--pairs", s[18]);
    rec->add_option("--tracks", s[19]);
    rec->add_option("--format", s[20]);
    rec->add_option("--threads", i[7])->check(CLI::NonNegativeNumber);
    rec->add_option("--max-features", i[8]);
    rec->add_flag("--no-upsample", b[4]);
    rec->add_option("--cuda-streams", i[9]);
    rec->add_option("--seed", u);
    rec->add_flag("-q,--quiet", b[5]);

    root.add_subcommand("synth");  // a command that is not a job kind
  }
};

std::string g_fixture;

void RemoveFixture() {
  if (g_fixture.empty()) return;
  for (const char* f : {"a.txt", "b.txt.bz2", "problem-1.txt", "img1.png", "img2.png",
                        "par.txt", "pairs.txt", "tracks.txt", "sub/c.txt", "sub/d.png", "sub", ""}) {
    const std::string path = g_fixture + "/" + f;
    if (::unlink(path.c_str()) != 0) ::rmdir(path.c_str());
  }
}

// A directory of small files for the job file's inputs and globs to find.
const std::string& Fixture() {
  if (!g_fixture.empty()) return g_fixture;
  char tmpl[] = "/tmp/tiepoint-fuzz-batch-XXXXXX";
  TIEPOINT_FUZZ_CHECK(::mkdtemp(tmpl) != nullptr);
  g_fixture = tmpl;
  ::mkdir((g_fixture + "/sub").c_str(), 0755);
  for (const char* f : {"a.txt", "b.txt.bz2", "problem-1.txt", "img1.png", "img2.png", "par.txt",
                        "pairs.txt", "tracks.txt", "sub/c.txt", "sub/d.png"}) {
    std::ofstream(g_fixture + "/" + f) << "x\n";
  }
  std::atexit(RemoveFixture);
  return g_fixture;
}

// Could a string of this JSON text name a path outside the fixture?
bool MayLeaveFixture(const std::string& text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* bad : {"\"/", "\\/", "..", "\\u002f", "\\u002e"}) {
    if (lower.find(bad) != std::string::npos) return true;
  }
  return false;
}

bool NameOk(const std::string& name) {
  if (name.empty() || name[0] == '.' || name.size() > 200) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && std::string("._+=@-").find(c) == std::string::npos) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tiepoint;
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (MayLeaveFixture(text)) return 0;
  static Catalog* catalog = new Catalog();  // never freed: one per process
  cli::JobFileOptions options;
  options.path = Fixture() + "/jobs.json";
  options.default_device = size % 2 ? "cpu" : "";
  options.max_matrix_jobs = 64;
  cli::CommandCatalog commands;
  commands.root = &catalog->root;
  std::vector<cli::BatchJob> jobs;
  const Status s = cli::ParseJobFile(text, options, commands, &jobs);
  fuzz::CheckFailure(s, "jobs.json");
  if (!s.ok()) {
    TIEPOINT_FUZZ_CHECK(jobs.empty());
    return 0;
  }
  std::set<std::string> names;
  for (size_t k = 0; k < jobs.size(); ++k) {
    const cli::BatchJob& job = jobs[k];
    TIEPOINT_FUZZ_CHECK(job.index == static_cast<int>(k));
    TIEPOINT_FUZZ_CHECK(NameOk(job.name) && names.insert(job.name).second);
    TIEPOINT_FUZZ_CHECK(job.kind == "ba" || job.kind == "bench" || job.kind == "reconstruct");
    TIEPOINT_FUZZ_CHECK(!job.args.empty() && job.args[0] == job.kind);
    for (const cli::JobInput& in : job.inputs) {
      TIEPOINT_FUZZ_CHECK(in.path.rfind(Fixture() + "/", 0) == 0);
    }
    for (const std::string& a : job.args) cli::ShellQuote(a);
  }
  return 0;
}
