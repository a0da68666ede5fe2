// tiepoint render-scene: render the synthetic scene (sfm/synthetic_scene.h) from a ring of
// cameras: photos with known cameras for `tiepoint reconstruct`, the demo and the tests.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include "cli/commands.h"
#include "cli/progress.h"
#include "io/base/timer.h"
#include "io/image.h"
#include "io/middlebury.h"
#include "sfm/synthetic_scene.h"

namespace tiepoint::cli {
namespace {

namespace fs = std::filesystem;

struct RenderArgs {
  SyntheticSceneOptions options;
  std::string output_dir;
  bool quiet = false;
};

int RunRender(const RenderArgs& a) {
  const char* cmd = "render-scene";
  Status s = a.options.Check();
  if (!s.ok()) return ReportError(cmd, s);
  std::unique_ptr<SyntheticScene> scene;
  if (!(s = SyntheticScene::Create(a.options, &scene)).ok()) return ReportError(cmd, s);

  std::error_code ec;
  fs::create_directories(a.output_dir, ec);
  if (ec || !fs::is_directory(a.output_dir)) {
    return ReportError(cmd, Status::IoError(a.output_dir + ": cannot create output directory (" +
                                            (ec ? ec.message() : "not a directory") + ")"));
  }
  const std::string dir = a.output_dir.back() == '/' ? a.output_dir : a.output_dir + "/";

  ProgressLine progress(!a.quiet && StderrIsTerminal());
  const Timer total;
  double render_s = 0.0;
  for (int i = 0; i < scene->num_views(); ++i) {
    const std::string& name = scene->cameras()[i].name;
    progress.Update("rendering " + name + " (" + std::to_string(i + 1) + " of " +
                    std::to_string(scene->num_views()) + ") ...");
    Image8 image;
    const Timer timer;
    if (!(s = scene->Render(i, &image)).ok()) return ReportError(cmd, s);
    render_s += timer.Seconds();
    if (!(s = WritePng(dir + name, image)).ok()) return ReportError(cmd, s);
  }
  // The cameras last: a complete scene_par.txt means every image before it was written.
  const std::string par = dir + "scene_par.txt";
  if (!(s = WriteMiddleburyCameras(par, scene->cameras())).ok()) return ReportError(cmd, s);
  progress.Done();
  const SyntheticSceneOptions& o = a.options;
  std::printf("tiepoint render-scene: %s: %d views of %d x %d, focal %.1f px, seed %llu; "
              "cameras in %s (rendered in %.2f s, total %.2f s)\n",
              a.output_dir.c_str(), scene->num_views(), o.width, o.height, scene->cameras()[0].K[0],
              static_cast<unsigned long long>(o.seed), par.c_str(), render_s, total.Seconds());
  return 0;
}

}  // namespace

Runner RegisterRender(CLI::App& app) {
  auto a = std::make_shared<RenderArgs>();
  SyntheticSceneOptions& o = a->options;
  app.add_option("-o,--output", a->output_dir,
                 "Output directory (created if missing): view_000.png ... and scene_par.txt")
      ->required();
  app.add_option("--views", o.num_views, "Number of views on the ring")->capture_default_str();
  app.add_option("--width", o.width, "Image width in pixels")->capture_default_str();
  app.add_option("--height", o.height, "Image height in pixels")->capture_default_str();
  app.add_option("--seed", o.seed, "Seed of the scene's layout and textures")->capture_default_str();
  app.add_option("--focal-factor", o.focal_factor, "Focal length as a multiple of max(width, height)")
      ->capture_default_str();
  app.add_option("--arc", o.arc_degrees, "Degrees of the ring the views spread over (360: all round)")
      ->capture_default_str();
  app.add_option("--supersampling", o.supersampling, "Rays per pixel along each axis (anti-aliasing)")
      ->capture_default_str();
  app.add_option("--contrast", o.contrast,
                 "Image contrast in (0, 1]: 0.5 + C (v - 0.5); below 1 a low-contrast scene, as the Middlebury dino")
      ->capture_default_str();
  app.add_option("--threads", o.num_threads, "Worker threads (0 = all)")->capture_default_str();
  app.add_flag("-q,--quiet", a->quiet, "No progress on the terminal");
  return [a] { return RunRender(*a); };
}

}  // namespace tiepoint::cli
