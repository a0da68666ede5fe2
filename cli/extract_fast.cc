#include "cli/extract_fast.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <system_error>
#include <utility>

#include "cli/commands.h"
#include "cli/output_dir.h"
#include "cli/progress.h"
#include "features/frontend.h"
#include "io/base/atomic_file.h"
#include "io/base/device.h"
#include "io/base/input_file.h"
#include "io/base/timer.h"
#include "io/image.h"

namespace tiepoint::cli {
namespace {

namespace fs = std::filesystem;

Status ParseCellSize(const std::string& text, int* w, int* h) {
  const size_t x = text.find('x');
  int a = 0, b = 0;
  char tail = 0;
  if (x == std::string::npos || std::sscanf(text.c_str(), "%dx%d%c", &a, &b, &tail) != 2) {
    return Status::InvalidOptions("--cell '" + text + "': expected WIDTHxHEIGHT in pixels, e.g. 32x32");
  }
  *w = a;
  *h = b;
  return Status::Ok();
}

Status WriteFastText(const std::string& path, const std::vector<FastCorner>& corners) {
  AtomicFile file(path);
  TIEPOINT_RETURN_IF_ERROR(file.Open());
  std::ostream& out = file.stream();
  out << corners.size() << " 0\n";
  char buf[96];
  for (const FastCorner& c : corners) {
    std::snprintf(buf, sizeof(buf), "%.9g %.9g %.9g 0\n", c.x, c.y, 3.0 * (1 << c.level));
    out << buf;
  }
  return file.Commit();
}

}  // namespace

void AddFastExtractOptions(CLI::App& app, FastExtractArgs* a) {
  app.add_option("--fast-threshold", a->threshold, "FAST: threshold on 8-bit intensities (1..254)")
      ->capture_default_str();
  app.add_option("--fast-arc", a->arc, "FAST: arc length (9..12)")->capture_default_str();
  app.add_option("--fast-score", a->score, "FAST: max-threshold | sad | harris | shi-tomasi")
      ->capture_default_str();
  app.add_option("--fast-nms", a->nms, "FAST: grid (one corner per cell) | plain")->capture_default_str();
  app.add_option("--fast-radius", a->nms_radius, "FAST: plain suppression radius (1..16)")
      ->capture_default_str();
  app.add_option("--cell", a->cell, "FAST: grid cell WxH in pixels (W a multiple of 32)")
      ->capture_default_str();
  app.add_option("--levels", a->levels, "FAST: pyramid levels (1..8)")->capture_default_str();
}

int RunExtractFast(const std::vector<std::string>& images, const std::vector<std::string>& names,
                   const std::string& output_dir,
                   const std::string& device_name, int threads, bool quiet,
                   const FastExtractArgs& a) {
  const char* cmd = "extract";
  Device device = Device::kCpu;
  Status s = DeviceFromString(device_name, &device);
  if (!s.ok()) return ReportError(cmd, Status::InvalidOptions("--" + s.message()));
  FrontEndOptions options;
  options.fast.threshold = a.threshold;
  options.fast.arc_length = a.arc;
  options.fast.levels = a.levels;
  options.fast.nms_radius = a.nms_radius;
  options.fast.num_threads = threads;
  options.lk.levels = 1;  // no tracking: the pyramid needs only FAST's levels
  if (!(s = ParseCellSize(a.cell, &options.fast.cell_width, &options.fast.cell_height)).ok() ||
      !(s = FastScoreFromString(a.score, &options.fast.score)).ok() ||
      !(s = FastNmsFromString(a.nms, &options.fast.nms)).ok() || !(s = options.Check()).ok()) {
    return ReportError(cmd, s);
  }
  std::unique_ptr<FastLkFrontEnd> frontend;
  if (!(s = FastLkFrontEnd::Create(options, device, &frontend)).ok()) return ReportError(cmd, s);

  OutputDirectory out_dir;
  if (!(s = out_dir.Create(output_dir)).ok()) return ReportError(cmd, s);
  const bool show = !quiet && StderrIsTerminal();
  std::vector<std::string> failed;
  std::map<std::string, std::string> written_by;
  SeenFiles seen_files;
  long long total = 0;
  int exit_code = 2;
  const Timer timer;
  for (size_t i = 0; i < images.size(); ++i) {
    const std::string& path = images[i];
    const std::string& name = names[i];
    const std::string out = (fs::path(output_dir) / (name + ".txt")).string();
    ProgressLine progress(show);
    progress.Update("[" + std::to_string(i + 1) + "/" + std::to_string(images.size()) +
                    "] FAST " + path + " ...");
    const auto [it, fresh] = written_by.emplace(out, path);
    GrayImage gray;
    std::vector<FastCorner> corners;
    const Timer t;
    if (!(s = seen_files.AddOnce(path, "image file")).ok()) {
      // one file given twice: s names both
    } else if (!fresh) {
      s = Status::InvalidInput(path + ": its output " + out + " would overwrite the corners of " +
                               it->second + " (the same name)");
    } else if ((s = ReadImageGray(path, &gray)).ok() &&
               (s = frontend->SetFrame(0, QuantizeImage(gray))).ok() &&
               (s = frontend->Detect(0, nullptr, &corners)).ok() &&
               (name.find('/') == std::string::npos || (s = out_dir.Create(fs::path(out).parent_path().string())).ok())) {
      s = WriteFastText(out, corners);
    }
    progress.Done();
    if (!s.ok()) {
      if (s.ExitCode() == 3) exit_code = 3;
      std::fprintf(stderr, "tiepoint %s: error: %s\n", cmd, s.ToString().c_str());
      failed.push_back(path);
      continue;
    }
    total += static_cast<long long>(corners.size());
    std::printf("%s: %d x %d, %zu FAST corners, %.3f s -> %s\n", path.c_str(), gray.width,
                gray.height, corners.size(), t.Seconds(), out.c_str());
  }
  std::printf("tiepoint extract: %zu of %zu images, %lld corners, %.2f s (detector fast, device "
              "%s)\n",
              images.size() - failed.size(), images.size(), total, timer.Seconds(),
              ToString(device));
  if (!failed.empty()) {
    std::fprintf(stderr, "tiepoint %s: %zu of %zu images failed:\n", cmd, failed.size(), images.size());
    for (const std::string& p : failed) std::fprintf(stderr, "  %s\n", p.c_str());
    return exit_code;
  }
  out_dir.Keep();
  return 0;
}

}  // namespace tiepoint::cli
