// tiepoint synth: write a synthetic BAL problem (and its ground truth).
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/progress.h"
#include "io/bal.h"
#include "io/base/timer.h"
#include "solver/synthetic.h"

namespace tiepoint::cli {
namespace {

struct SynthArgs {
  SyntheticOptions options;
  std::string output;
  std::string truth;
  bool quiet = false;
};

int RunSynth(const SynthArgs& a) {
  const char* cmd = "synth";
  Status s = a.options.Check();
  if (!s.ok()) return ReportError(cmd, s);
  if (!(s = CheckOutputDirectory("--output", a.output)).ok() ||
      !(s = CheckOutputDirectory("--truth", a.truth)).ok()) {
    return ReportError(cmd, s);
  }
  ProgressLine progress(!a.quiet && StderrIsTerminal());
  Scene initial, truth;
  progress.Update("generating ...");
  const Timer timer;
  if (!(s = MakeSyntheticProblem(a.options, &initial, a.truth.empty() ? nullptr : &truth)).ok()) {
    return ReportError(cmd, s);
  }
  const double generate_s = timer.Seconds();
  progress.Update("writing " + a.output + " ...");
  if (!(s = WriteBal(a.output, initial)).ok()) return ReportError(cmd, s);
  if (!a.truth.empty()) {
    progress.Update("writing " + a.truth + " ...");
    if (!(s = WriteBal(a.truth, truth)).ok()) return ReportError(cmd, s);
  }
  progress.Done();
  std::printf("tiepoint synth: %s: %d cameras, %d points, %lld observations "
              "(generated in %.2f s, total %.2f s)\n",
              a.output.c_str(), initial.num_cameras(), initial.num_points(),
              static_cast<long long>(initial.num_observations()), generate_s, timer.Seconds());
  return 0;
}

}  // namespace

Runner RegisterSynth(CLI::App& app) {
  auto a = std::make_shared<SynthArgs>();
  SyntheticOptions& o = a->options;
  app.add_option("--cameras", o.num_cameras, "Number of cameras")->capture_default_str();
  app.add_option("--points", o.num_points, "Number of points")->capture_default_str();
  app.add_option("--observations-per-point", o.observations_per_point,
                 "Mean number of cameras observing a point")->capture_default_str();
  app.add_option("--noise", o.noise_px, "Pixel noise standard deviation")->capture_default_str();
  app.add_option("--seed", o.seed, "Random seed")->capture_default_str();
  app.add_flag("--shared-intrinsics", o.shared_intrinsics,
               "One physical camera: every camera gets the same focal length and distortion");
  app.add_option("--threads", o.num_threads, "Worker threads (0 = all)")->capture_default_str();
  app.add_option("-o,--output", a->output, "Output BAL file (.bz2 compresses)")->required();
  app.add_option("--truth", a->truth, "Also write the ground truth as a BAL file");
  app.add_flag("--quiet", a->quiet, "No progress on the terminal");
  return [a] { return RunSynth(*a); };
}

}  // namespace tiepoint::cli
