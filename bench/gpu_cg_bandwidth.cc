// Memory bandwidth of the CUDA pcg-schur CG iteration on a synthetic problem, against the
// device's copy bandwidth measured in the same run; prints JSON.
//   gpu_cg_bandwidth [CAMERAS POINTS OBS_PER_POINT [REPETITIONS]]   (default 1778 2000000 5.03 50)
#include <cstdio>
#include <cstdlib>

#include "io/base/status.h"
#include "solver/ba_problem.h"
#include "solver/pcg_cuda.h"
#include "solver/synthetic.h"

int main(int argc, char** argv) {
  using namespace tiepoint;
  SyntheticOptions o;
  o.num_cameras = argc > 1 ? std::atoi(argv[1]) : 1778;
  o.num_points = argc > 2 ? std::atoi(argv[2]) : 2000000;
  o.observations_per_point = argc > 3 ? std::atof(argv[3]) : 5.03;
  const int repetitions = argc > 4 ? std::atoi(argv[4]) : 50;
  Scene scene;
  Status s = MakeSyntheticProblem(o, &scene, nullptr);
  BAProblem problem;
  if (s.ok()) s = BAProblem::Build(scene, {}, false, 0, &problem);
  CudaBandwidthReport r;
  if (s.ok()) s = MeasureCudaCgBandwidth(problem, scene.cameras.data(), scene.points.data(), repetitions, &r);
  if (!s.ok()) {
    std::fprintf(stderr, "gpu_cg_bandwidth: %s\n", s.ToString().c_str());
    return s.ExitCode();
  }
  std::printf("{\"cameras\": %d, \"points\": %d, \"observations\": %lld, \"repetitions\": %d,\n"
              " \"copy_gb_per_s\": %.1f, \"cg_iteration_ms\": %.4f, \"schur_ms\": %.4f,\n"
              " \"bytes_per_observation\": %.0f, \"bytes_per_iteration\": %.0f,\n"
              " \"achieved_gb_per_s\": %.1f, \"fraction_of_copy\": %.3f,\n"
              " \"shared_camera_sums\": %s, \"streaming_product\": %s, \"blocks\": %d,\n"
              " \"camera_groups\": %d, \"cameras_per_group\": %d}\n",
              scene.num_cameras(), scene.num_points(), static_cast<long long>(scene.num_observations()),
              repetitions, r.copy_gb_per_s, r.cg_iteration_ms, r.schur_ms, r.bytes_per_observation,
              r.bytes_per_iteration, r.achieved_gb_per_s, r.fraction_of_copy,
              r.shared_camera_sums ? "true" : "false", r.streaming ? "true" : "false", r.blocks,
              r.camera_groups, r.cameras_per_group);
  return 0;
}
