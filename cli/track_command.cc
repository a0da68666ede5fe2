// tiepoint track FRAME... -o TRACKS.txt [--svg DIR]: FAST + grid suppression on the first
// frame, pyramidal LK through the sequence, re-detection in emptied cells
// (features/frontend.h: SequenceTracker). Writes one line per track point,
// "track_id frame x y" (frame counted from 0, pixels with (0,0) the centre of the top-left
// pixel), ordered by frame then track id; with --camera-mask, the points on its black pixels
// are left out (the tracker still follows them). With --svg, DIR/<frame file name>.svg shows each
// frame (embedded as a PNG data URI) with the live tracks' last positions drawn over it.
// Nothing is written unless every frame was read and tracked (outputs go through
// temporaries renamed into place at the end); a bad frame is named and exits 2.
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli/progress.h"
#include "features/frontend.h"
#include "io/base/atomic_file.h"
#include "io/base/device.h"
#include "io/base/timer.h"
#include "io/image.h"
#include "io/mask.h"

namespace tiepoint::cli {
namespace {

namespace fs = std::filesystem;

struct TrackArgs {
  std::vector<std::string> frames;
  std::string output;
  std::string svg_dir;
  std::string device = "cpu";
  int threshold = 40;
  int arc = 9;
  std::string cell = "32x32";
  int levels = 3;
  std::string score = "max-threshold";
  int lk_levels = 4;
  int lk_coarse_level = 3;
  float fb_threshold = 1.0f;
  bool no_gain_bias = false;
  std::string affine_prediction = "on";
  int trail = 10;
  int threads = 0;
  std::string camera_mask;  // io/mask.h: one mask for every frame
  bool quiet = false;
};

// ---- A PNG (8-bit grey, zlib through Debian's zlib) for the SVG data URI --------------

void PutU32(std::string* out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out->push_back(static_cast<char>((v >> s) & 0xff));
}

void PutChunk(std::string* png, const char* type, const std::string& data) {
  PutU32(png, static_cast<uint32_t>(data.size()));
  const std::string body = std::string(type, 4) + data;
  png->append(body);
  PutU32(png, static_cast<uint32_t>(
                  crc32(0, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size()))));
}

Status EncodePng(const ImageU8& img, std::string* png) {
  std::string raw;
  raw.reserve(static_cast<size_t>(img.width + 1) * img.height);
  for (int y = 0; y < img.height; ++y) {
    raw.push_back('\0');  // filter: none
    raw.append(reinterpret_cast<const char*>(&img.data[static_cast<size_t>(y) * img.width]), img.width);
  }
  uLongf size = compressBound(static_cast<uLong>(raw.size()));
  std::string z(size, '\0');
  if (compress2(reinterpret_cast<Bytef*>(&z[0]), &size, reinterpret_cast<const Bytef*>(raw.data()),
                static_cast<uLong>(raw.size()), 6) != Z_OK) {
    return Status::Internal("zlib could not compress the frame for the SVG");
  }
  z.resize(size);
  png->assign("\x89PNG\r\n\x1a\n", 8);
  std::string ihdr;
  PutU32(&ihdr, static_cast<uint32_t>(img.width));
  PutU32(&ihdr, static_cast<uint32_t>(img.height));
  ihdr += std::string("\x08\x00\x00\x00\x00", 5);  // 8 bit, grey, deflate, no filter, no interlace
  PutChunk(png, "IHDR", ihdr);
  PutChunk(png, "IDAT", z);
  PutChunk(png, "IEND", "");
  return Status::Ok();
}

std::string Base64(const std::string& in) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  for (size_t i = 0; i < in.size(); i += 3) {
    uint32_t v = static_cast<uint8_t>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<uint8_t>(in[i + 1]) << 8;
    if (i + 2 < in.size()) v |= static_cast<uint8_t>(in[i + 2]);
    out.push_back(k[(v >> 18) & 63]);
    out.push_back(k[(v >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? k[(v >> 6) & 63] : '=');
    out.push_back(i + 2 < in.size() ? k[v & 63] : '=');
  }
  return out;
}

std::string XmlEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// The SVG of frame `f`: the frame, then per live track its trail (up to `trail` earlier
// positions) and a circle at its position, coloured by track id.
Status WriteFrameSvg(const std::string& path, const ImageU8& frame, int f,
                     const std::vector<std::vector<TrackPoint>>& per_frame, int trail,
                     AtomicFile* file) {
  std::string png;
  TIEPOINT_RETURN_IF_ERROR(EncodePng(frame, &png));
  TIEPOINT_RETURN_IF_ERROR(file->Open());
  std::ostream& out = file->stream();
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << frame.width << "\" height=\""
      << frame.height << "\" viewBox=\"-0.5 -0.5 " << frame.width << " " << frame.height << "\">\n"
      << "<title>" << XmlEscape(path) << ": frame " << f << ", " << per_frame[f].size() << " tracks</title>\n"
      << "<image x=\"-0.5\" y=\"-0.5\" width=\"" << frame.width << "\" height=\"" << frame.height
      << "\" href=\"data:image/png;base64," << Base64(png) << "\"/>\n"
      << "<g fill=\"none\" stroke-width=\"1.2\">\n";
  // Earlier positions of each track, newest last.
  std::map<int64_t, std::vector<std::pair<float, float>>> history;
  for (int g = std::max(0, f - trail); g <= f; ++g) {
    for (const TrackPoint& t : per_frame[g]) history[t.track_id].emplace_back(t.x, t.y);
  }
  char buf[160];
  for (const TrackPoint& t : per_frame[f]) {
    const int hue = static_cast<int>((t.track_id * 47) % 360);
    const auto& h = history[t.track_id];
    if (h.size() > 1) {
      out << "<polyline stroke=\"hsl(" << hue << ",100%,50%)\" points=\"";
      for (const auto& [x, y] : h) {
        std::snprintf(buf, sizeof(buf), "%.2f,%.2f ", x, y);
        out << buf;
      }
      out << "\"/>\n";
    }
    std::snprintf(buf, sizeof(buf), "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"2.5\" stroke=\"hsl(%d,100%%,50%%)\"/>\n",
                  t.x, t.y, hue);
    out << buf;
  }
  out << "</g>\n</svg>\n";
  return Status::Ok();
}

Status ParseCell(const std::string& text, int* w, int* h) {
  const size_t x = text.find('x');
  try {
    if (x == std::string::npos) throw std::invalid_argument(text);
    size_t used = 0;
    *w = std::stoi(text.substr(0, x), &used);
    if (used != x) throw std::invalid_argument(text);
    const std::string hs = text.substr(x + 1);
    *h = std::stoi(hs, &used);
    if (used != hs.size()) throw std::invalid_argument(text);
  } catch (const std::exception&) {
    return Status::InvalidOptions("--cell '" + text + "': expected WIDTHxHEIGHT in pixels, e.g. 32x32");
  }
  return Status::Ok();
}

int RunTrack(const TrackArgs& a) {
  const char* cmd = "track";
  Device device = Device::kCpu;
  Status s = DeviceFromString(a.device, &device);
  if (!s.ok()) return ReportError(cmd, Status::InvalidOptions("--" + s.message()));
  FrontEndOptions options;
  options.fast.threshold = a.threshold;
  options.fast.arc_length = a.arc;
  options.fast.levels = a.levels;
  options.fast.num_threads = a.threads;
  if (!(s = ParseCell(a.cell, &options.fast.cell_width, &options.fast.cell_height)).ok() ||
      !(s = FastScoreFromString(a.score, &options.fast.score)).ok()) {
    return ReportError(cmd, s);
  }
  options.lk.levels = a.lk_levels;
  options.lk.coarse_level = a.lk_coarse_level;
  options.lk.fb_threshold = a.fb_threshold;
  options.lk.gain_bias = !a.no_gain_bias;
  options.lk.num_threads = a.threads;
  if (a.affine_prediction != "on" && a.affine_prediction != "off") {
    return ReportError(cmd, Status::InvalidOptions("--lk-affine-prediction '" +
                                                   a.affine_prediction + "': expected on or off"));
  }
  options.linear_prediction.enabled = a.affine_prediction == "on";
  if (a.trail < 0) return ReportError(cmd, Status::InvalidOptions("--trail must be >= 0"));
  if (!(s = options.Check()).ok()) return ReportError(cmd, s);
  if (!(s = CheckOutputDirectory("--output", a.output)).ok()) return ReportError(cmd, s);
  // --camera-mask: read before any frame; the track points on its black pixels are left out.
  FeatureMask camera_mask;
  if (!a.camera_mask.empty() && !(s = ReadFeatureMask(a.camera_mask, &camera_mask)).ok()) return ReportError(cmd, s);
  int64_t masked_points = 0;
  std::unique_ptr<FastLkFrontEnd> frontend;
  if (!(s = FastLkFrontEnd::Create(options, device, &frontend)).ok()) return ReportError(cmd, s);
  SequenceTracker tracker(frontend.get(), options);

  const bool show = !a.quiet && StderrIsTerminal();
  const bool svg = !a.svg_dir.empty();
  std::vector<std::vector<TrackPoint>> per_frame;
  std::vector<ImageU8> frames_u8;  // kept for the SVGs only
  const Timer total;
  double read_s = 0, track_s = 0;
  for (size_t f = 0; f < a.frames.size(); ++f) {
    const std::string& path = a.frames[f];
    ProgressLine progress(show);
    progress.Update("[" + std::to_string(f + 1) + "/" + std::to_string(a.frames.size()) +
                    "] tracking " + path + " ...");
    GrayImage gray;
    const Timer read_timer;
    if (!(s = ReadImageGray(path, &gray)).ok()) return ReportError(cmd, s);
    read_s += read_timer.Seconds();
    if (!camera_mask.empty() && !(s = FeatureMaskFits(camera_mask, a.camera_mask, gray.width, gray.height, path)).ok())
      return ReportError(cmd, s);
    ImageU8 frame = QuantizeImage(gray);
    std::vector<TrackPoint> points;
    const Timer track_timer;
    s = tracker.AddFrame(frame, &points);
    track_s += track_timer.Seconds();
    if (!s.ok()) return ReportError(cmd, Status(s.code(), path + ": " + s.message()));
    if (!camera_mask.empty()) {
      // The tracker follows them still; they are only left out of the outputs.
      const size_t before = points.size();
      points.erase(std::remove_if(points.begin(), points.end(),
                                  [&](const TrackPoint& t) { return !FeatureMaskKeeps(camera_mask, t.x, t.y); }),
                   points.end());
      masked_points += static_cast<int64_t>(before - points.size());
    }
    std::sort(points.begin(), points.end(),
              [](const TrackPoint& x, const TrackPoint& y) { return x.track_id < y.track_id; });
    per_frame.push_back(std::move(points));
    if (svg) frames_u8.push_back(std::move(frame));
  }

  // All frames tracked: write the outputs to temporaries, then rename them all.
  AtomicFile tracks_file(a.output);
  if (!(s = tracks_file.Open()).ok()) return ReportError(cmd, s);
  {
    std::ostream& out = tracks_file.stream();
    out << "# tiepoint track: track_id frame x y (pixels; (0,0) is the centre of the top-left "
           "pixel)\n";
    char buf[96];
    for (size_t f = 0; f < per_frame.size(); ++f) {
      for (const TrackPoint& t : per_frame[f]) {
        std::snprintf(buf, sizeof(buf), "%lld %zu %.3f %.3f\n", static_cast<long long>(t.track_id), f,
                      t.x, t.y);
        out << buf;
      }
    }
  }
  std::vector<std::unique_ptr<AtomicFile>> svg_files;
  if (svg) {
    std::error_code ec;
    fs::create_directories(a.svg_dir, ec);
    if (ec || !fs::is_directory(a.svg_dir)) {
      return ReportError(cmd, Status::IoError(a.svg_dir + ": cannot create the SVG directory (" +
                                              (ec ? ec.message() : "not a directory") + ")"));
    }
    std::map<std::string, std::string> written_by;
    for (size_t f = 0; f < per_frame.size(); ++f) {
      const std::string name = fs::path(a.frames[f]).filename().string() + ".svg";
      const std::string out = (fs::path(a.svg_dir) / name).string();
      const auto [it, fresh] = written_by.emplace(out, a.frames[f]);
      if (!fresh) {
        return ReportError(cmd, Status::InvalidInput(a.frames[f] + ": its SVG " + out +
                                                     " would overwrite that of " + it->second +
                                                     " (same file name)"));
      }
      svg_files.push_back(std::make_unique<AtomicFile>(out));
      if (!(s = WriteFrameSvg(a.frames[f], frames_u8[f], static_cast<int>(f), per_frame, a.trail,
                              svg_files.back().get()))
               .ok()) {
        return ReportError(cmd, s);
      }
    }
  }
  if (!(s = tracks_file.Commit()).ok()) return ReportError(cmd, s);
  for (auto& file : svg_files) {
    if (!(s = file->Commit()).ok()) return ReportError(cmd, s);
  }

  const SequenceTrackerSummary& sum = tracker.summary();
  long long points = 0;
  for (const auto& p : per_frame) points += static_cast<long long>(p.size());
  int in = 0, survived = 0, leaving = 0;
  double worst_step = 1.0, worst_step_in_view = 1.0;
  for (size_t i = 0; i < sum.tracks_in.size(); ++i) {
    in += sum.tracks_in[i];
    survived += sum.tracks_survived[i];
    leaving += sum.tracks_lost_leaving[i];
    if (sum.tracks_in[i] > 0) {
      worst_step = std::min(worst_step, static_cast<double>(sum.tracks_survived[i]) / sum.tracks_in[i]);
    }
    if (sum.tracks_in[i] > sum.tracks_lost_leaving[i]) {
      worst_step_in_view = std::min(worst_step_in_view,
                                    static_cast<double>(sum.tracks_survived[i]) /
                                        (sum.tracks_in[i] - sum.tracks_lost_leaving[i]));
    }
  }
  std::vector<float> fb = sum.fb_errors;
  float median_fb = 0;
  if (!fb.empty()) {
    std::nth_element(fb.begin(), fb.begin() + fb.size() / 2, fb.end());
    median_fb = fb[fb.size() / 2];
  }
  std::printf("tiepoint track: %d frames, %lld tracks, %lld track points -> %s%s\n", sum.frames,
              static_cast<long long>(sum.tracks_started), points, a.output.c_str(),
              svg ? (" (SVGs in " + a.svg_dir + ")").c_str() : "");
  if (in > 0) {
    std::printf("  %.1f%% of tracks survive a frame step, median forward-backward error %.3f px; "
                "lost: %lld left the frame or diverged, %lld failed the forward-backward check, "
                "%lld on flat patches\n",
                100.0 * survived / in, median_fb, static_cast<long long>(sum.lost_outside),
                static_cast<long long>(sum.lost_forward_backward),
                static_cast<long long>(sum.lost_flat));
    // A track whose constant-velocity prediction lies outside the frame left the field of
    // view: motion, not a tracking failure.
    std::printf("  worst step %.1f%%; %d lost tracks had left the field of view (prediction "
                "outside the frame): %.1f%% of the tracks that stay in view survive (worst step "
                "%.1f%%)\n",
                100.0 * worst_step, leaving,
                in > leaving ? 100.0 * survived / (in - leaving) : 100.0, 100.0 * worst_step_in_view);
  }
  int turned = 0;
  double max_turn = 0;
  for (size_t i = 0; i < sum.second_pass.size(); ++i) {
    turned += sum.second_pass[i];
    if (sum.second_pass[i]) max_turn = std::max(max_turn, std::fabs(sum.map_rotation_deg[i]));
  }
  if (turned > 0) {
    std::printf("  affine prediction: patches turned in %d of %zu frame steps (up to %.1f deg)\n",
                turned, sum.second_pass.size(), max_turn);
  }
  if (!camera_mask.empty())
    std::printf("  %lld track points on the black pixels of %s left out\n", static_cast<long long>(masked_points),
                a.camera_mask.c_str());
  std::printf("  %.2f s (read %.2f s, track %.2f s, %.1f frames/s; device %s)\n", total.Seconds(),
              read_s, track_s, track_s > 0 ? sum.frames / track_s : 0.0, ToString(device));
  return 0;
}

}  // namespace

Runner RegisterTrack(CLI::App& app) {
  auto a = std::make_shared<TrackArgs>();
  app.add_option("frames", a->frames, "Frames in order: PNG, JPEG, TIFF, PGM or PPM, all the same size; a folder: the image files in it and its subfolders, in name order")
      ->required();
  app.add_option("-o,--output", a->output, "Tracks file: lines 'track_id frame x y'")->required();
  app.add_option("--svg", a->svg_dir, "Also draw the tracks over each frame: DIR/<frame>.svg");
  app.add_option("--device", a->device, "cpu | cuda")->capture_default_str();
  app.add_option("--fast-threshold", a->threshold, "FAST threshold on 8-bit intensities (1..254)")
      ->capture_default_str();
  app.add_option("--fast-arc", a->arc, "FAST arc length (9..12)")->capture_default_str();
  app.add_option("--fast-score", a->score, "max-threshold | sad | harris | shi-tomasi")
      ->capture_default_str();
  app.add_option("--cell", a->cell, "Grid cell WxH in pixels (W a multiple of 32): one corner each")
      ->capture_default_str();
  app.add_option("--levels", a->levels, "Pyramid levels searched by FAST (1..8)")->capture_default_str();
  app.add_option("--lk-levels", a->lk_levels, "Pyramid levels used by LK (1..8)")->capture_default_str();
  app.add_option("--lk-coarse-level", a->lk_coarse_level,
                 "LK uses 8x8 patches (no gain) from this level up, 16x16 below; 0: 8x8 on every "
                 "level, which follows rotation and zoom better")
      ->capture_default_str();
  app.add_option("--fb-threshold", a->fb_threshold,
                 "Forward-backward check in pixels (<= 0: off)")
      ->capture_default_str();
  app.add_flag("--no-gain-bias", a->no_gain_bias, "LK without gain/bias estimation");
  app.add_option("--lk-affine-prediction", a->affine_prediction,
                 "on | off: when a similarity fitted to a frame pair's tracks turns by > 2 deg "
                 "(or zooms by > 15%), track the pair again with the patches turned and zoomed "
                 "by it, carried to the next pair")
      ->capture_default_str();
  app.add_option("--trail", a->trail, "SVG: earlier positions drawn per track")->capture_default_str();
  app.add_option("--threads", a->threads, "CPU threads (0 = all hardware threads)")->capture_default_str();
  app.add_option("--camera-mask", a->camera_mask,
                 "One mask for every frame (COLMAP's camera_mask_path): an image of the frames' size; the track "
                 "points on its black pixels (a burned-in timestamp, the car's hood) are left out of the outputs");
  app.add_flag("-q,--quiet", a->quiet, "No progress line");
  return [a] {  // a folder among the frames stands for the images in it
    if (Status s = ExpandImageArguments(a->frames, &a->frames); !s.ok()) return ReportError("track", s);
    return RunTrack(*a);
  };
}

}  // namespace tiepoint::cli
