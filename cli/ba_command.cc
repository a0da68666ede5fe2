// tiepoint ba INPUT [options]: read a BAL problem, or a COLMAP sparse model (a folder),
// bundle-adjust it, print and write results.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output_dir.h"
#include "cli/progress.h"
#include "io/bal.h"
#include "io/base/atomic_file.h"
#include "io/base/cuda_device.h"
#include "io/base/timer.h"
#include "io/colmap_model.h"
#include "io/ply.h"
#include "io/reconstruction_export.h"
#include "io/report.h"
#include "solver/bundle_adjuster.h"
#include "solver/reconstruction_ba.h"

namespace tiepoint::cli {
namespace {

struct BaArgs {
  std::string input;
  std::string solver = "pcg-schur";
  std::string precision = "float";
  std::string jacobian = "stored";
  std::string device = "cpu";
  int cg_min_iterations = 1;
  int cg_max_iterations = 100;
  double cg_eta = 0.1;
  std::string cg_stop = "quadratic";
  int max_iterations = 50;
  int threads = 0;
  std::string output;
  std::string ply;
  std::string report;
  std::string loss = "none";
  std::string fix_cameras;
  bool fix_intrinsics = false;
  double function_tolerance = 1e-6;
  bool quiet = false;
  // A COLMAP model (INPUT a folder) only:
  bool refine_principal_point = false;
  bool fix_focal = false;       // COLMAP's BundleAdjustment.refine_focal_length 0
  bool fix_distortion = false;  // COLMAP's BundleAdjustment.refine_extra_params 0
  std::string fix_poses;        // image ids (or "all": refine_extrinsics 0) whose poses are held
  std::string format = "both";
  // Which options the command line gave (CLI11's counts, set before RunBa).
  bool solver_given = false;
  bool format_given = false;
  std::vector<std::string> bal_only_given;  // BAL-only options given, by spelling
};

// Parses "0,3,7-9" into ranges [first, last] of numbers in [0, max_value]; names the option
// and the offending item.
Status ParseIndexRanges(const std::string& text, const char* option, const char* what, long max_value,
                        std::vector<std::pair<long, long>>* out) {
  out->clear();
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) {
      if (comma == text.size()) break;
      continue;
    }
    long first = 0, last = 0;
    char* end = nullptr;
    const auto dash = item.find('-', 1);
    first = std::strtol(item.c_str(), &end, 10);
    bool ok = end != item.c_str();
    if (dash != std::string::npos) {
      ok = ok && end == item.c_str() + dash;
      const char* rest = item.c_str() + dash + 1;
      last = std::strtol(rest, &end, 10);
      ok = ok && end != rest && *end == '\0';
    } else {
      last = first;
      ok = ok && *end == '\0';
    }
    if (!ok || first < 0 || last < first || last > max_value) {
      return Status::InvalidOptions(std::string(option) + ": '" + item + "' is not " + what +
                                    " or range like 3 or 5-9");
    }
    out->push_back({first, last});
  }
  return Status::Ok();
}

// Parses "0,3,7-9" into camera indices.
Status ParseIndexList(const std::string& text, std::vector<int>* out) {
  std::vector<std::pair<long, long>> ranges;
  TIEPOINT_RETURN_IF_ERROR(ParseIndexRanges(text, "--fix-cameras", "a camera index", 100000000, &ranges));
  out->clear();
  for (const auto& [first, last] : ranges)
    for (long c = first; c <= last; ++c) out->push_back(static_cast<int>(c));
  return Status::Ok();
}

nlohmann::json TraceToJson(const std::vector<IterationSummary>& trace) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& it : trace) {
    rows.push_back({{"iteration", it.iteration},
                    {"cost", it.cost},
                    {"cost_change", it.cost_change},
                    {"relative_decrease", it.relative_decrease},
                    {"time_s", it.time_s},
                    {"iteration_time_s", it.iteration_time_s},
                    {"linear_iterations", it.linear_iterations},
                    {"lambda", it.lambda},
                    {"trust_region_radius", it.trust_region_radius},
                    {"step_norm", it.step_norm},
                    {"gradient_max_norm", it.gradient_max_norm},
                    {"step_accepted", it.step_accepted}});
  }
  return rows;
}

// Seconds since this process started (for the TIEPOINT_TIMING timeline; 10 ms steps).
double ProcessAgeSeconds() {
  FILE* f = std::fopen("/proc/self/stat", "r");
  if (f == nullptr) return 0.0;
  char buf[1024];
  const size_t len = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[len] = '\0';
  const char* p = std::strrchr(buf, ')');  // the command name may hold spaces
  if (p == nullptr) return 0.0;
  unsigned long long start_ticks = 0;
  int field = 2;
  for (const char* q = p + 1; *q != '\0'; ++q) {
    if (*q == ' ' && ++field == 22) {
      start_ticks = std::strtoull(q + 1, nullptr, 10);
      break;
    }
  }
  timespec now{};
  clock_gettime(CLOCK_BOOTTIME, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec) -
         static_cast<double>(start_ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// tiepoint ba MODEL_DIR: a COLMAP sparse model (binary or text, io/colmap_model.h) adjusted by
// the reconstruction bundle adjuster (solver/reconstruction_ba.h: shared intrinsics, every
// camera model), as COLMAP's `bundle_adjuster`: every pose and point free, the first image's
// pose held (the gauge; LM's damping holds the scale), focal lengths and distortion refined
// unless --fix-intrinsics, the principal point only with --refine-principal-point. As
// COLMAP's BundleAdjustment.refine_* options: --fix-focal and --fix-distortion hold those
// parameters, and --fix-poses IDS|all the poses of those images (all: the points alone move,
// as refine_extrinsics 0). The model
// goes to -o DIR (text and binary, --format) in one step: every file is written under a
// temporary folder and renamed into place at the end.
int RunBaOnModel(const BaArgs& a) {
  const char* cmd = "ba";
  namespace fs = std::filesystem;
  if (!a.bal_only_given.empty())
    return ReportError(cmd, Status::InvalidOptions(a.bal_only_given.front() +
                                                   " applies to BAL problems, not to the COLMAP model in " + a.input));
  ReconstructionBAOptions options;
  options.max_iterations = a.max_iterations;
  options.function_tolerance = a.function_tolerance;
  options.fix_intrinsics = a.fix_intrinsics;
  options.refine_principal_point = a.refine_principal_point && !a.fix_intrinsics;
  options.refine_focal = !a.fix_focal;
  options.refine_extra = !a.fix_distortion;
  options.num_threads = a.threads > 0 ? a.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  Status s;
  if (!(s = ParseLoss(a.loss, &options.loss)).ok()) return ReportError(cmd, s);
  Device device;
  if (!(s = DeviceFromString(a.device, &device)).ok()) return ReportError(cmd, s);
  // --solver: auto (dense below 150 images, CHOLMOD from there, as reconstruct's auto), dense,
  // cholmod, or pcg-schur (matrix-free PCG on the reduced system; on the GPU with --device cuda).
  const std::string solver = a.solver_given ? a.solver : (device == Device::kCuda ? "pcg-schur" : "auto");
  if (solver == "dense" || solver == "auto") {
    options.linear_solver = ReconstructionLinearSolver::kDenseSchur;
  } else if (solver == "cholmod") {
    options.linear_solver = ReconstructionLinearSolver::kSparseSchur;
  } else if (solver == "pcg-schur") {
    options.linear_solver = device == Device::kCuda ? ReconstructionLinearSolver::kIterativeSchurCuda
                                                    : ReconstructionLinearSolver::kIterativeSchur;
  } else {
    return ReportError(cmd, Status::InvalidOptions("--solver '" + a.solver +
                                                   "': a COLMAP model takes auto, dense, cholmod or pcg-schur"));
  }
  if (device == Device::kCuda && solver != "pcg-schur")
    return ReportError(cmd, Status::InvalidOptions("--device cuda runs --solver pcg-schur, not " + solver));
  bool text = true, binary = true;
  if (a.format == "text") binary = false;
  else if (a.format == "binary") text = false;
  else if (a.format != "both")
    return ReportError(cmd, Status::InvalidOptions("--format '" + a.format + "': expected text, binary or both"));
  if (a.output.empty() && a.format_given)
    return ReportError(cmd, Status::InvalidOptions("--format applies to the model written with -o DIR"));
  if (!(s = options.Check()).ok()) return ReportError(cmd, s);
  if (!(s = CheckOutputDirectory("--ply", a.ply)).ok() || !(s = CheckOutputDirectory("--report", a.report)).ok())
    return ReportError(cmd, s);
  if (device == Device::kCuda) {
    std::vector<CudaDeviceInfo> gpus;
    if (!(s = QueryCudaDevices(&gpus)).ok())
      return ReportError(cmd, Status::Unavailable("--device cuda: " + s.message() + "; use --device cpu"));
    options.cuda_min_observations = 0;  // asked for: the GPU, whatever the size
  }

  const bool show = !a.quiet && StderrIsTerminal();
  Reconstruction rec;
  {
    ProgressLine progress(show);
    progress.Update("reading " + a.input + " ...");
    if (!(s = ReadColmapModel(a.input, &rec)).ok()) return ReportError(cmd, s);
  }
  if (rec.images.empty() || rec.points3D.empty())
    return ReportError(cmd, Status::InvalidInput(a.input + ": the model has " + std::to_string(rec.images.size()) +
                                                 " images and " + std::to_string(rec.points3D.size()) +
                                                 " points: nothing to adjust"));
  if (solver == "auto" && rec.images.size() >= static_cast<size_t>(kAutoSparseFromImages))
    options.linear_solver = ReconstructionLinearSolver::kSparseSchur;
  ReconstructionBAConfig config;
  for (const auto& [id, im] : rec.images) config.variable_images.insert(id);
  config.fixed_pose_images.insert(rec.images.begin()->first);
  config.only_points_of_variable_images = false;
  if (a.fix_poses == "all") {
    config.fixed_pose_images = config.variable_images;
  } else if (!a.fix_poses.empty()) {
    // Every id named alone must be an image of the model; a range holds those it covers.
    std::vector<std::pair<long, long>> ranges;
    if (!(s = ParseIndexRanges(a.fix_poses, "--fix-poses", "an image id", 4294967295L, &ranges)).ok())
      return ReportError(cmd, s);
    for (const auto& [first, last] : ranges) {
      if (first == last && !rec.images.count(static_cast<uint32_t>(first)))
        return ReportError(cmd, Status::InvalidOptions("--fix-poses: image " + std::to_string(first) + " is not in " +
                                                       a.input + " (its image ids run from " +
                                                       std::to_string(rec.images.begin()->first) + " to " +
                                                       std::to_string(rec.images.rbegin()->first) + ")"));
      for (auto it = rec.images.lower_bound(static_cast<uint32_t>(first));
           it != rec.images.end() && it->first <= static_cast<uint64_t>(last); ++it)
        config.fixed_pose_images.insert(it->first);
    }
  }
  const int64_t observations = rec.NumObservations();
  const double initial_error = rec.MeanReprojectionError();
  nlohmann::json trace = nlohmann::json::array();
  const Timer timer;
  if (show) std::fprintf(stderr, "%4s %14s %10s %9s\n", "iter", "cost", "mu", "time_s");
  options.progress = [&](int iteration, double cost, bool accepted, double mu) {
    trace.push_back({{"iteration", iteration}, {"cost", cost}, {"step_accepted", accepted}, {"mu", mu},
                     {"time_s", timer.Seconds()}});
    if (show)
      std::fprintf(stderr, "%4d %14.6e %10.3e %9.3f%s\n", iteration, cost, mu, timer.Seconds(),
                   accepted ? "" : "  (rejected)");
  };
  ReconstructionBASummary summary;
  if (!(s = BundleAdjustReconstruction(options, config, &rec, &summary)).ok()) return ReportError(cmd, s);
  rec.UpdatePointErrors();
  const double final_error = rec.MeanReprojectionError();

  std::printf("tiepoint ba: %s (COLMAP model)\n", a.input.c_str());
  std::printf("  cameras %zu, images %zu, points %zu, observations %lld\n", rec.cameras.size(), rec.images.size(),
              rec.points3D.size(), static_cast<long long>(observations));
  std::printf("  solver %s, threads %d, loss %s\n", ReconstructionLinearSolverName(options.linear_solver),
              options.num_threads, ToString(options.loss).c_str());
  std::printf("  initial cost %.6e  (mean reprojection error %.4f px)\n", summary.initial_cost, initial_error);
  std::printf("  final cost   %.6e  (mean reprojection error %.4f px)\n", summary.final_cost, final_error);
  std::printf("  iterations %d, time %.3f s, termination: %s\n", summary.iterations, summary.seconds,
              summary.termination.c_str());
  if (!std::isfinite(summary.final_cost)) {
    std::fprintf(stderr, "tiepoint ba: error: the final cost is not finite; no output written\n");
    return 1;
  }

  if (!a.output.empty()) {
    OutputDirectory made;
    if (!(s = made.Create(a.output)).ok()) return ReportError(cmd, s);
    const fs::path out(a.output);
    const fs::path tmp = out / (".tmp-ba-" + std::to_string(getpid()));
    std::error_code ec;
    fs::remove_all(tmp, ec);
    const LiveTemporaryDirectory cleanup(tmp.string());
    fs::create_directories(tmp, ec);
    if (ec) return ReportError(cmd, Status::IoError(tmp.string() + ": " + ec.message()));
    std::vector<std::pair<std::string, std::string>> moves;
    for (const auto& [on, format, ext] : {std::tuple{text, ColmapFormat::kText, ".txt"},
                                          std::tuple{binary, ColmapFormat::kBinary, ".bin"}}) {
      if (!on) continue;
      if (!(s = WriteColmapModel(tmp.string(), rec, format)).ok()) return ReportError(cmd, s);
      for (const char* name : {"cameras", "images", "points3D"})
        moves.emplace_back((tmp / (std::string(name) + ext)).string(), (out / (std::string(name) + ext)).string());
    }
    if (!(s = ReplaceOutputs(moves)).ok()) return ReportError(cmd, s);
    made.Keep();
  }
  if (!a.ply.empty() && !(s = WriteReconstructionPly(a.ply, rec)).ok()) return ReportError(cmd, s);
  if (!a.report.empty()) {
    nlohmann::json report = {
        {"input", a.input},
        {"input_kind", "colmap model"},
        {"solver", ReconstructionLinearSolverName(options.linear_solver)},
        {"threads", options.num_threads},
        {"loss", ToString(options.loss)},
        {"fix_intrinsics", options.fix_intrinsics},
        {"refine_principal_point", options.refine_principal_point},
        {"refine_focal", options.refine_focal},
        {"refine_distortion", options.refine_extra},
        {"fixed_pose_images", config.fixed_pose_images.size()},
        {"num_cameras", rec.cameras.size()},
        {"num_images", rec.images.size()},
        {"num_points", rec.points3D.size()},
        {"num_observations", observations},
        {"initial_cost", summary.initial_cost},
        {"final_cost", summary.final_cost},
        {"initial_mean_reprojection_error_px", initial_error},
        {"final_mean_reprojection_error_px", final_error},
        {"iterations", summary.iterations},
        {"linear_iterations", summary.linear_iterations},
        {"total_time_s", summary.seconds},
        {"termination", summary.termination},
        {"peak_rss_bytes", PeakRssBytes()},
        {"trace", trace},
        {"machine", DescribeMachine()},
        {"build", DescribeBuild()},
    };
    if (!a.output.empty()) report["output"] = a.output;
    if (!(s = WriteJson(a.report, report)).ok()) return ReportError(cmd, s);
  }
  return 0;
}

int RunBa(const BaArgs& a) {
  const char* cmd = "ba";
  {
    std::error_code ec;
    if (std::filesystem::is_directory(a.input, ec)) {
      namespace fs = std::filesystem;
      const fs::path dir(a.input);
      if (!fs::exists(dir / "cameras.bin", ec) && !fs::exists(dir / "cameras.txt", ec))
        return ReportError(cmd, Status::InvalidInput(a.input + ": is a directory, not a BAL file, and holds no COLMAP "
                                                     "model (cameras, images and points3D, .bin or .txt)"));
      return RunBaOnModel(a);
    }
  }
  {
    const char* model_only = a.refine_principal_point ? "--refine-principal-point"
                             : a.format_given         ? "--format"
                             : a.fix_focal            ? "--fix-focal"
                             : a.fix_distortion       ? "--fix-distortion"
                             : !a.fix_poses.empty()   ? "--fix-poses"
                                                      : nullptr;
    if (model_only != nullptr)
      return ReportError(cmd, Status::InvalidOptions(std::string(model_only) +
                                                     " applies to a COLMAP model (a folder), not to the BAL problem " + a.input));
  }
  // TIEPOINT_TIMING: a timeline of the command, in seconds since the process started.
  const bool timing = std::getenv("TIEPOINT_TIMING") != nullptr;
  const double age_at_start = timing ? ProcessAgeSeconds() : 0.0;
  const Timer command_timer;
  auto mark = [&](const char* what) {
    if (timing) {
      std::fprintf(stderr, "[timing] ba at %.3f s: %s\n", age_at_start + command_timer.Seconds(),
                   what);
    }
  };
  mark("command starts");
  BundleAdjusterOptions options;
  Status s = SolverTypeFromString(a.solver, &options.solver);
  if (!s.ok()) return ReportError(cmd, s);
  options.max_iterations = a.max_iterations;
  if (!(s = DeviceFromString(a.device, &options.device)).ok()) return ReportError(cmd, s);
  if (a.precision != "float" && a.precision != "double") {
    return ReportError(cmd, Status::InvalidOptions("--precision '" + a.precision +
                                                   "': expected float or double"));
  }
  options.single_precision = a.precision == "float";
  if (a.jacobian != "stored" && a.jacobian != "recompute") {
    return ReportError(cmd, Status::InvalidOptions("--jacobian '" + a.jacobian +
                                                   "': expected stored or recompute"));
  }
  options.recompute_jacobian = a.jacobian == "recompute";
  options.cg_min_iterations = a.cg_min_iterations;
  options.cg_max_iterations = a.cg_max_iterations;
  options.cg_eta = a.cg_eta;
  if (a.cg_stop != "residual" && a.cg_stop != "quadratic") {
    return ReportError(cmd, Status::InvalidOptions("--cg-stop '" + a.cg_stop +
                                                   "': expected residual or quadratic"));
  }
  options.cg_quadratic_termination = a.cg_stop == "quadratic";
  options.num_threads = a.threads;
  options.function_tolerance = a.function_tolerance;
  options.fix_intrinsics = a.fix_intrinsics;
  if (!(s = ParseLoss(a.loss, &options.loss)).ok()) return ReportError(cmd, s);
  if (!(s = ParseIndexList(a.fix_cameras, &options.fixed_cameras)).ok()) return ReportError(cmd, s);
  if (!(s = CheckOutputDirectory("--output", a.output)).ok() ||
      !(s = CheckOutputDirectory("--ply", a.ply)).ok() ||
      !(s = CheckOutputDirectory("--report", a.report)).ok()) {
    return ReportError(cmd, s);
  }

  const bool show = !a.quiet && StderrIsTerminal();
  // The CUDA context is created while the file is read.
  std::thread warm_up;
  if (options.device == Device::kCuda) warm_up = std::thread(WarmUpCuda);
  struct Joiner {
    std::thread& t;
    ~Joiner() { if (t.joinable()) t.join(); }
  } joiner{warm_up};
  Scene scene;
  {
    ProgressLine progress(show);
    progress.Update("reading " + a.input + " ...");
    const Timer read_timer;
    BalReadOptions read_options;
    read_options.num_threads = a.threads;  // --threads bounds the reading too
    // A .bz2 is decoded on the GPU too (io/bz2_cuda.h), falling back to the CPU.
    read_options.bz2_on_gpu = options.device == Device::kCuda;
    BalReadSummary read_summary;
    if (!(s = ReadBal(a.input, read_options, &scene, &read_summary)).ok()) {
      return ReportError(cmd, s);
    }
    if (std::getenv("TIEPOINT_TIMING")) {
      std::fprintf(stderr,
                   "[timing] read %s: %.3f s (file %.3f, bzip2 %.3f%s, parse %.3f)%s%s\n",
                   a.input.c_str(), read_timer.Seconds(), read_summary.read_seconds,
                   read_summary.decompress_seconds, read_summary.bz2_on_gpu ? " on the GPU" : "",
                   read_summary.parse_seconds,
                   read_summary.gpu_decline_reason.empty() ? "" : "; GPU declined: ",
                   read_summary.gpu_decline_reason.c_str());
    }
  }
  if (!(s = options.Check(scene.num_cameras())).ok()) return ReportError(cmd, s);

  if (show) {
    std::fprintf(stderr, "%4s %14s %12s %10s %10s %6s %9s\n", "iter", "cost", "cost_change",
                 "|gradient|", "lambda", "lin_it", "time_s");
  }
  mark("read");
  options.callback = [show](const IterationSummary& it) {
    if (!show) return;
    std::fprintf(stderr, "%4d %14.6e %12.4e %10.3e %10.3e %6d %9.3f%s\n", it.iteration, it.cost,
                 it.cost_change, it.gradient_max_norm, it.lambda, it.linear_iterations, it.time_s,
                 it.step_accepted ? "" : "  (rejected)");
  };
  std::unique_ptr<BundleAdjuster> adjuster;
  if (!(s = BundleAdjuster::Create(options, &adjuster)).ok()) return ReportError(cmd, s);
  const double initial_rms = ReprojectionRms(scene, a.threads);
  mark("solve starts");
  BundleAdjusterSummary summary;
  if (!(s = adjuster->Solve(&scene, &summary)).ok()) return ReportError(cmd, s);
  mark("solve returns");
  const double final_rms = ReprojectionRms(scene, a.threads);
  mark("final RMS");
  if (timing) {
    std::fprintf(stderr, "[timing] ba: solver's own time %.3f s\n", summary.total_time_s);
  }

  std::printf("tiepoint ba: %s\n", a.input.c_str());
  std::printf("  cameras %d, points %d, observations %lld\n", summary.num_cameras,
              summary.num_points, summary.num_observations);
  std::printf("  solver %s, threads %d, loss %s\n", summary.solver.c_str(), summary.num_threads,
              ToString(options.loss).c_str());
  std::printf("  initial cost %.6e  (RMS reprojection error %.4f px)\n", summary.initial_cost,
              initial_rms);
  std::printf("  final cost   %.6e  (RMS reprojection error %.4f px)\n", summary.final_cost,
              final_rms);
  std::printf("  iterations %d (%d successful), time %.3f s (linear solver %.3f s)\n",
              summary.iterations, summary.successful_iterations, summary.total_time_s,
              summary.linear_solver_time_s);
  std::printf("  termination: %s: %s\n", ToString(summary.termination), summary.message.c_str());

  if (!summary.IsSolutionUsable()) {
    std::fprintf(stderr, "tiepoint ba: error: %s; no output written\n", summary.message.c_str());
    return 1;
  }
  if (!a.output.empty() && !(s = WriteBal(a.output, scene)).ok()) return ReportError(cmd, s);
  if (!a.ply.empty() && !(s = WritePly(a.ply, scene)).ok()) return ReportError(cmd, s);
  if (!a.report.empty()) {
    nlohmann::json report = {
        {"input", a.input},
        {"solver", summary.solver},
        {"threads", summary.num_threads},
        {"loss", ToString(options.loss)},
        {"fixed_cameras", options.fixed_cameras},
        {"fix_intrinsics", options.fix_intrinsics},
        {"num_cameras", summary.num_cameras},
        {"num_points", summary.num_points},
        {"num_observations", summary.num_observations},
        {"initial_cost", summary.initial_cost},
        {"final_cost", summary.final_cost},
        {"initial_rms_px", initial_rms},
        {"final_rms_px", final_rms},
        {"iterations", summary.iterations},
        {"successful_iterations", summary.successful_iterations},
        {"total_time_s", summary.total_time_s},
        {"linear_solver_time_s", summary.linear_solver_time_s},
        {"evaluation_time_s", summary.evaluation_time_s},
        {"peak_rss_bytes", PeakRssBytes()},
        {"termination", ToString(summary.termination)},
        {"message", summary.message},
        {"trace", TraceToJson(summary.trace)},
        {"machine", DescribeMachine()},
        {"build", DescribeBuild()},
    };
    if (!(s = WriteJson(a.report, report)).ok()) return ReportError(cmd, s);
  }
  mark("results written");
  return 0;
}

}  // namespace

Runner RegisterBa(CLI::App& app) {
  auto a = std::make_shared<BaArgs>();
  app.add_option("input", a->input,
                 "BAL problem file (.txt or .txt.bz2), or a COLMAP sparse model folder (cameras, images, "
                 "points3D; .bin or .txt)")
      ->required();
  auto* solver_opt = app.add_option("--solver", a->solver,
                 "pcg-schur | pcg-hessian | cholmod | ceres-sparse | ceres-iterative; a COLMAP model: "
                 "auto (its default: dense, cholmod from 150 images) | dense | cholmod | pcg-schur")
      ->capture_default_str();
  app.add_option("--device", a->device, "cpu | cuda (pcg-schur on an NVIDIA GPU)")
      ->capture_default_str();
  std::vector<CLI::Option*> bal_only;
  bal_only.push_back(app.add_option("--precision", a->precision, "PCG arithmetic: float | double")
      ->capture_default_str());
  bal_only.push_back(app.add_option("--jacobian", a->jacobian,
                 "PCG: stored | recompute (re-evaluate J in every product, for memory)")
      ->capture_default_str());
  bal_only.push_back(app.add_option("--cg-min-iterations", a->cg_min_iterations,
                 "PCG: minimum CG iterations per LM step (before any stopping rule)")
      ->capture_default_str());
  bal_only.push_back(app.add_option("--cg-max-iterations", a->cg_max_iterations, "PCG: maximum CG iterations per LM step")
      ->capture_default_str());
  bal_only.push_back(app.add_option("--cg-eta", a->cg_eta, "PCG: forcing term, CG stops at |r| <= eta |r0|")
      ->capture_default_str());
  bal_only.push_back(app.add_option("--cg-stop", a->cg_stop,
                 "PCG: residual (|r| <= eta |r0|) | quadratic (Nash-Sofer model decrease)")
      ->capture_default_str());
  app.add_option("--max-iterations", a->max_iterations, "Maximum LM iterations")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--threads", a->threads, "Worker threads (0 = all hardware threads)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("-o,--output", a->output,
                 "Write the optimized problem (BAL; .bz2 compresses), or for a COLMAP model the folder of the "
                 "adjusted model (made if missing; its files replaced in one step)");
  auto* format_opt = app.add_option("--format", a->format, "A COLMAP model's output: text | binary | both")
      ->capture_default_str();
  app.add_flag("--refine-principal-point", a->refine_principal_point,
               "A COLMAP model: refine the principal point too (held by default, as COLMAP's bundle_adjuster)");
  app.add_flag("--fix-focal", a->fix_focal,
               "A COLMAP model: hold the focal lengths (COLMAP's BundleAdjustment.refine_focal_length 0)");
  app.add_flag("--fix-distortion", a->fix_distortion,
               "A COLMAP model: hold the distortion parameters (COLMAP's BundleAdjustment.refine_extra_params 0)");
  app.add_option("--fix-poses", a->fix_poses,
                 "A COLMAP model: image ids whose poses are held, e.g. 1,4,7-9, or all (only the points and "
                 "intrinsics move: COLMAP's BundleAdjustment.refine_extrinsics 0); the first image's is always");
  app.add_option("--ply", a->ply, "Write points and camera centres as PLY");
  app.add_option("--report", a->report, "Write a JSON report with the per-iteration trace");
  app.add_option("--loss", a->loss, "Robust loss: none | huber:SCALE | cauchy:SCALE (pixels)")
      ->capture_default_str();
  bal_only.push_back(app.add_option("--fix-cameras", a->fix_cameras, "Cameras held constant, e.g. 0,3,7-9"));
  app.add_flag("--fix-intrinsics", a->fix_intrinsics,
               "Hold f, k1, k2 of every camera constant (a COLMAP model: every camera's parameters)");
  app.add_option("--function-tolerance", a->function_tolerance,
                 "Stop when |cost change| <= tolerance * cost")
      ->capture_default_str();
  app.add_flag("-q,--quiet", a->quiet, "No per-iteration progress on the terminal");
  return [a, solver_opt, format_opt, bal_only] {
    a->solver_given = solver_opt->count() > 0;
    a->format_given = format_opt->count() > 0;
    a->bal_only_given.clear();
    for (const CLI::Option* o : bal_only)
      if (o->count() > 0) a->bal_only_given.push_back("--" + o->get_lnames()[0]);
    return RunBa(*a);
  };
}

}  // namespace tiepoint::cli
