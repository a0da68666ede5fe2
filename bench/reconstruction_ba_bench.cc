// reconstruction_ba_bench: the reconstruction bundle adjuster (solver/reconstruction_ba.h,
// what `tiepoint reconstruct` runs) on a BAL problem, with each of its linear solvers in
// one run: sparse (CHOLMOD, the exact reference), iterative (PCG on the CPU) and
// iterative-cuda (the same PCG on the GPU), and dense where the reduced system is small.
//
//   reconstruction_ba_bench FILE.bal [--single-camera] [--solvers sparse,iterative,...]
//                           [--threads N] [--max-iterations N] [--pcg-tolerance T] [--json OUT]
//
// The BAL file becomes a reconstruction (io/reconstruction_export.h,
// BalSceneToReconstruction): an image per BAL camera, RADIAL intrinsics per image (pose 6 +
// f, k1, k2 free, the principal point fixed: BAL's 9 parameters), or with --single-camera
// one intrinsics block shared by every image (problems made by `tiepoint synth
// --shared-intrinsics`). Every pose, intrinsics block and point is free, as in `tiepoint
// ba`. For each solver: wall seconds of BundleAdjustReconstruction, LM and CG iterations,
// initial and final cost, and the final cost relative to the first solver's. Without a GPU
// iterative-cuda is reported as unavailable, not as a failure.
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/bal.h"
#include "io/reconstruction_export.h"
#include "solver/reconstruction_ba.h"

using namespace tiepoint;

int main(int argc, char** argv) {
  std::string path, json_out, solvers_arg = "sparse,iterative,iterative-cuda";
  bool single_camera = false;
  int threads = omp_get_max_threads(), max_iterations = 50;
  double pcg_tolerance = ReconstructionBAOptions().pcg_relative_tolerance;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", a.c_str()); std::exit(2); }
      return argv[++i];
    };
    if (a == "--single-camera") single_camera = true;
    else if (a == "--solvers") solvers_arg = next();
    else if (a == "--threads") threads = std::atoi(next().c_str());
    else if (a == "--max-iterations") max_iterations = std::atoi(next().c_str());
    else if (a == "--json") json_out = next();
    else if (a == "--pcg-tolerance") pcg_tolerance = std::atof(next().c_str());
    else if (!a.empty() && a[0] == '-') { std::fprintf(stderr, "unknown option %s\n", a.c_str()); return 2; }
    else path = a;
  }
  if (path.empty() || threads < 1 || max_iterations < 1) {
    std::fprintf(stderr, "usage: reconstruction_ba_bench FILE.bal [--single-camera] [--solvers LIST] "
                         "[--threads N] [--max-iterations N] [--pcg-tolerance T] [--json OUT]\n");
    return 2;
  }
  Scene scene;
  Status s = ReadBal(path, &scene);
  if (!s.ok()) { std::fprintf(stderr, "reconstruction_ba_bench: %s\n", s.message().c_str()); return 2; }
  Reconstruction start;
  s = BalSceneToReconstruction(scene, single_camera, &start);
  if (!s.ok()) { std::fprintf(stderr, "reconstruction_ba_bench: %s: %s\n", path.c_str(), s.message().c_str()); return 2; }

  ReconstructionBAConfig config;
  for (const auto& [id, im] : start.images) config.variable_images.insert(id);
  config.only_points_of_variable_images = false;

  nlohmann::json out;
  out["file"] = path;
  out["images"] = start.images.size();
  out["cameras"] = start.cameras.size();
  out["points"] = start.points3D.size();
  out["observations"] = start.NumObservations();
  out["threads"] = threads;
  out["max_iterations"] = max_iterations;
  out["pcg_relative_tolerance"] = pcg_tolerance;
  out["runs"] = nlohmann::json::array();
  double reference_cost = -1;
  std::stringstream list(solvers_arg);
  for (std::string name; std::getline(list, name, ',');) {
    ReconstructionLinearSolver solver;
    if (!(s = ReconstructionLinearSolverFromName(name, &solver)).ok()) {
      std::fprintf(stderr, "reconstruction_ba_bench: --solvers: %s\n", s.message().c_str());
      return 2;
    }
    ReconstructionBAOptions options;
    options.linear_solver = solver;
    options.num_threads = threads;
    options.max_iterations = max_iterations;
    options.pcg_relative_tolerance = pcg_tolerance;
    options.cuda_min_observations = 0;  // iterative-cuda always on the GPU here
    Reconstruction rec = start;
    ReconstructionBASummary summary;
    s = BundleAdjustReconstruction(options, config, &rec, &summary);
    nlohmann::json run;
    run["solver"] = name;
    if (!s.ok()) {
      run["error"] = s.message();
      std::fprintf(stderr, "%-15s %s\n", name.c_str(), s.message().c_str());
      out["runs"].push_back(run);
      if (s.code() != StatusCode::kUnavailable) return 1;
      continue;
    }
    if (reference_cost < 0) reference_cost = summary.final_cost;
    run["seconds"] = summary.seconds;
    run["iterations"] = summary.iterations;
    run["cg_iterations"] = summary.linear_iterations;
    run["initial_cost"] = summary.initial_cost;
    run["final_cost"] = summary.final_cost;
    run["final_cost_relative_to_first"] = summary.final_cost / reference_cost - 1.0;
    run["termination"] = summary.termination;
    std::fprintf(stderr, "%-15s %8.3f s  %3d LM iterations  %6d CG  cost %.6e -> %.9e  (%+.2e vs first)  %s\n",
                 name.c_str(), summary.seconds, summary.iterations, summary.linear_iterations,
                 summary.initial_cost, summary.final_cost, summary.final_cost / reference_cost - 1.0,
                 summary.termination.c_str());
    out["runs"].push_back(run);
  }
  const std::string text = out.dump(2);
  if (json_out.empty()) {
    std::printf("%s\n", text.c_str());
  } else {
    FILE* f = std::fopen(json_out.c_str(), "w");
    if (!f) { std::fprintf(stderr, "reconstruction_ba_bench: cannot write %s\n", json_out.c_str()); return 2; }
    std::fprintf(f, "%s\n", text.c_str());
    std::fclose(f);
  }
  return 0;
}
