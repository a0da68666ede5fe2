// bal_read_bench: BAL reading speed (issue 18), parallel against serial, in one run.
//
//   bal_read_bench FILE [FILE...] [--threads 1,2,4,8,16] [--repeat N] [--json OUT]
//                  [--no-serial]   (skip the serial reader and libbz2: for huge files)
//                  [--gpu]         (.bz2 also decoded on the GPU, io/bz2_cuda.h, and read
//                                   with it; compared with libbz2's bytes)
//   bal_read_bench --make-bal OBSERVATIONS PREFIX [--pbzip2]
//
// --make-bal writes PREFIX.txt, a random BAL problem laid out as the BAL site's files are
// ("<c> <p>     %e %e" observations, %.16e parameters; cameras and points in
// Final-13682's proportions: 2,100 observations per camera, 6.5 per point; 29000000
// gives a Final-13682-size text of about 1.7 GB), and PREFIX.txt.bz2: one bzip2 stream
// at level 9 as bzip2(1) writes it, or with --pbzip2 one stream per 900 kB compressed on
// all threads as pbzip2 writes it (same decoding work, much faster to make). On a machine
// without tiepoint's other dependencies this makes the input the benchmark needs.
//
// For each file (BAL text, or .bz2):
//   serial      ReadBal with the serial streaming reader (what ReadBal did before)
//   libbz2      (.bz2) DecompressBz2Serial: single-thread libbz2 on the bytes in memory
//   per thread count t:
//     read      ReadBal, parallel, t threads: the whole read (file, decode, parse)
//     bz2       (.bz2) TryDecompressBz2Parallel alone, on the bytes in memory
//     parse     the text alone, in memory (ReadBalFromMemory)
// Rates are MB/s (10^6 bytes) of BAL text and, for .bz2, of compressed input; "speedup"
// compares with the serial reader (read) or with single-thread libbz2 (bz2). Times are
// the best of --repeat runs (default 3) with the file in the page cache. Every parallel
// scene is compared bit for bit with the serial one ("identical").
// Self-contained: needs only the file; --threads defaults to 1, 2, 4, ... up to the
// cores OpenMP sees.
#include <bzlib.h>
#include <omp.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <random>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_common.h"
#include "io/bal.h"
#include "io/base/file_bytes.h"
#include "io/base/cuda_device.h"
#include "io/bz2_cuda.h"
#include "io/bz2_parallel.h"
#include "io/report.h"

namespace tiepoint {
namespace {

bool g_gpu = false;  // --gpu

bool SameBits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

bool SameScene(const Scene& a, const Scene& b) {
  return a.obs_camera == b.obs_camera && a.obs_point == b.obs_point &&
         SameBits(a.obs_xy, b.obs_xy) && SameBits(a.cameras, b.cameras) &&
         SameBits(a.points, b.points);
}

double Mbps(int64_t bytes, double seconds) { return seconds > 0 ? bytes / seconds / 1e6 : 0; }

int Usage(const char* tool, int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: %s FILE [FILE...] [--threads 1,2,4] [--repeat N] [--json OUT] [--no-serial] [--gpu]\n"
               "       %s --make-bal OBSERVATIONS PREFIX [--pbzip2]\n"
               "  FILE: a BAL problem, text or .bz2\n",
               tool, tool);
  return code;
}

std::vector<int> ParseThreads(const std::string& list) {
  std::vector<int> out;
  size_t at = 0;
  while (at <= list.size()) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const int t = std::atoi(list.substr(at, comma - at).c_str());
    if (t <= 0) return {};
    out.push_back(t);
    at = comma + 1;
  }
  return out;
}

bool EndsWithBz2(const std::string& s) {
  return s.size() > 4 && s.compare(s.size() - 4, 4, ".bz2") == 0;
}

// The fastest of `repeat` ReadBal runs (its summary in *best); *identical: every run gave
// `reference`.
double BestRead(const std::string& path, const BalReadOptions& options, int repeat,
                const Scene& reference, BalReadSummary* best, bool* identical) {
  double best_s = 1e300;
  for (int k = 0; k < repeat; ++k) {
    Scene scene;
    BalReadSummary summary;
    const Status s = ReadBal(path, options, &scene, &summary);
    *identical = *identical && s.ok() && SameScene(scene, reference);
    if (summary.total_seconds < best_s) {
      best_s = summary.total_seconds;
      *best = summary;
    }
  }
  return best_s;
}

nlohmann::json BenchFile(const std::string& path, const std::vector<int>& threads, int repeat,
                         bool with_serial, bool* ok) {
  nlohmann::json r = {{"file", path}};
  const bool bz2 = EndsWithBz2(path);
  FileBytes bytes;
  Status s = ReadFileBytes(path, 0, &bytes);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    *ok = false;
    return r;
  }
  const int64_t input_bytes = static_cast<int64_t>(bytes.size);
  r["input_bytes"] = input_bytes;

  // Serial reader (and the reference scene).
  // Serial reader (and the reference scene; with --no-serial the parallel read on all
  // threads gives the reference, and the serial timings are left out).
  BalReadOptions serial_options;
  serial_options.parallel = with_serial ? false : true;
  Scene reference;
  Timer first_serial;
  s = ReadBal(path, serial_options, &reference);
  double serial_s = first_serial.Seconds();  // the first run counts as one of `repeat`
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    *ok = false;
    return r;
  }
  r["cameras"] = reference.num_cameras();
  r["points"] = reference.num_points();
  r["observations"] = reference.num_observations();
  if (with_serial) serial_s = std::min(serial_s, bench::BestOf(repeat - 1, [&] {
    Scene scene;
    (void)ReadBal(path, serial_options, &scene);
  }));

  // The text, for the parse-only runs; for .bz2 single-thread libbz2 first.
  std::string text;
  double libbz2_s = 0;
  if (bz2 && !with_serial) {
    Bz2Decoded decoded;
    s = DecompressBz2(bytes.data.get(), bytes.size, path, {}, &decoded);
    text = decoded.Concatenate();
  } else if (bz2) {
    libbz2_s = bench::BestOf(repeat, [&] {
      std::string out;
      (void)DecompressBz2Serial(bytes.data.get(), bytes.size, path, &out);
      text = std::move(out);
    });
  } else {
    text.assign(bytes.data.get(), bytes.size);
  }
  const int64_t text_bytes = static_cast<int64_t>(text.size());
  r["text_bytes"] = text_bytes;
  if (with_serial) {
    r["serial"] = {{"seconds", serial_s},
                   {"text_MBps", Mbps(text_bytes, serial_s)},
                   {"input_MBps", Mbps(input_bytes, serial_s)}};
  } else {
    serial_s = 0;  // not measured: no speedups
  }
  std::printf("%s: %.1f MB text%s, %d cameras, %d points, %lld observations\n", path.c_str(),
              text_bytes / 1e6,
              bz2 ? (" (" + std::to_string(input_bytes / 1000000) + " MB bzip2)").c_str() : "",
              reference.num_cameras(), reference.num_points(),
              static_cast<long long>(reference.num_observations()));
  std::printf("  serial reader      %8.3f s  %8.1f MB/s text\n", serial_s,
              Mbps(text_bytes, serial_s));
  if (bz2 && with_serial) {
    r["libbz2"] = {{"seconds", libbz2_s},
                   {"text_MBps", Mbps(text_bytes, libbz2_s)},
                   {"input_MBps", Mbps(input_bytes, libbz2_s)}};
    std::printf("  libbz2 1 thread    %8.3f s  %8.1f MB/s text  %6.1f MB/s compressed\n",
                libbz2_s, Mbps(text_bytes, libbz2_s), Mbps(input_bytes, libbz2_s));
  }

  const std::string text_name = bz2 ? path.substr(0, path.size() - 4) : path;
  nlohmann::json rows = nlohmann::json::array();
  for (int t : threads) {
    BalReadOptions options;
    options.num_threads = t;
    BalReadSummary best_summary;
    bool identical = true;
    const double read_s = BestRead(path, options, repeat, reference, &best_summary, &identical);
    const double parse_s = bench::BestOf(repeat, [&] {
      Scene scene;
      (void)ReadBalFromMemory(text.data(), text.size(), text_name, options, &scene);
    });
    nlohmann::json row = {
        {"threads", t},
        {"identical", identical},
        // "serial": ReadBal chose the serial reader (text on one thread).
        {"path", best_summary.parallel ? "parallel" : "serial"},
        {"read_seconds", read_s},
        {"read_text_MBps", Mbps(text_bytes, read_s)},
        {"read_input_MBps", Mbps(input_bytes, read_s)},
        {"read_speedup_vs_serial", serial_s / read_s},
        {"read_parts_seconds",
         {{"file", best_summary.read_seconds},
          {"decompress", best_summary.decompress_seconds},
          {"parse", best_summary.parse_seconds}}},
        {"parse_seconds", parse_s},
        {"parse_text_MBps", Mbps(text_bytes, parse_s)},
    };
    std::printf("  %2d threads: read %8.3f s %8.1f MB/s text (x%.2f serial)  parse %8.1f MB/s",
                t, read_s, Mbps(text_bytes, read_s), serial_s / read_s,
                Mbps(text_bytes, parse_s));
    if (bz2) {
      Bz2ParallelOptions bz2_options;
      bz2_options.num_threads = t;
      bool same = true;
      const double bz2_s = bench::BestOf(repeat, [&] {
        Bz2Decoded decoded;
        same = same && TryDecompressBz2Parallel(bytes.data.get(), bytes.size, bz2_options,
                                                &decoded) &&
               decoded.size == text.size();
      });
      row["bz2_seconds"] = bz2_s;
      row["bz2_text_MBps"] = Mbps(text_bytes, bz2_s);
      row["bz2_input_MBps"] = Mbps(input_bytes, bz2_s);
      row["bz2_speedup_vs_libbz2"] = libbz2_s / bz2_s;
      row["bz2_decoded_in_parallel"] = same;
      std::printf("  bzip2 %6.1f MB/s compressed (x%.2f libbz2)", Mbps(input_bytes, bz2_s),
                  libbz2_s / bz2_s);
    }
    if (!with_serial) {  // no baseline measured
      row.erase("read_speedup_vs_serial");
      row.erase("bz2_speedup_vs_libbz2");
    }
    std::printf("%s\n", identical ? "" : "  NOT IDENTICAL");
    if (!identical) *ok = false;
    rows.push_back(row);
  }
  r["parallel"] = rows;
  if (g_gpu && bz2) {
    // The GPU decoder (io/bz2_cuda.h) on the bytes in memory, and ReadBal with it.
    Bz2CudaOptions gpu_options;
    Bz2CudaTiming timing, best_timing;
    bool same = true;
    std::string why;
    double gpu_s = 1e300;
    for (int k = 0; k < repeat; ++k) {
      Bz2Decoded decoded;
      Timer timer;
      const bool ok_gpu = TryDecompressBz2Cuda(bytes.data.get(), bytes.size, gpu_options,
                                               &decoded, &why, &timing);
      const double t = timer.Seconds();
      same = same && ok_gpu && decoded.Concatenate() == text;
      if (t < gpu_s) {
        gpu_s = t;
        best_timing = timing;
      }
    }
    BalReadOptions options;
    options.bz2_on_gpu = true;
    BalReadSummary best_summary;
    bool identical = true;
    const double read_s = BestRead(path, options, repeat, reference, &best_summary, &identical);
    r["gpu"] = {{"bz2_seconds", gpu_s},
                {"bz2_identical_to_libbz2", same},
                {"decline_reason", same ? "" : why},
                {"bz2_parts_seconds",
                 {{"scan_and_plan", best_timing.scan_seconds},
                  {"presize", best_timing.presize_seconds},
                  {"context", best_timing.context_seconds},
                  {"upload", best_timing.upload_seconds},
                  {"allocate", best_timing.allocate_seconds},
                  {"kernels", best_timing.kernels_seconds},
                  {"download_and_runs", best_timing.download_seconds}}},
                {"kernel_ms", best_timing.stage_ms},
                {"bz2_text_MBps", Mbps(text_bytes, gpu_s)},
                {"bz2_speedup_vs_libbz2", libbz2_s > 0 ? libbz2_s / gpu_s : 0.0},
                {"read_seconds", read_s},
                {"read_identical", identical},
                // false below 4.5 MB of bzip2 per thread: ReadBal keeps those on the CPU
                {"read_decoded_on_gpu", best_summary.bz2_on_gpu},
                {"read_parts_seconds",
                 {{"file", best_summary.read_seconds},
                  {"decompress", best_summary.decompress_seconds},
                  {"parse", best_summary.parse_seconds}}}};
    std::printf("  GPU bzip2 %8.3f s (scan %.3f, presize %.3f, upload %.3f, kernels %.3f, "
                "download %.3f) %8.1f MB/s text%s; read with it %8.3f s%s\n",
                gpu_s, best_timing.scan_seconds, best_timing.presize_seconds,
                best_timing.upload_seconds,
                best_timing.kernels_seconds, best_timing.download_seconds,
                Mbps(text_bytes, gpu_s), same ? "" : ("  DECLINED OR DIFFERENT: " + why).c_str(),
                read_s, identical ? "" : "  NOT IDENTICAL");
    if (!same || !identical) *ok = false;
  }
  r["peak_rss_bytes_so_far"] = PeakRssBytes();  // the process's peak up to here
  return r;
}

// Writes PREFIX.txt and PREFIX.txt.bz2 (see the top of the file).
int MakeBal(int64_t observations, const std::string& prefix, bool pbzip2) {
  const int64_t cameras = std::max<int64_t>(2, observations / 2100);
  const int64_t points = std::max<int64_t>(1, observations * 2 / 13);
  // Formatted in parallel, 64 pieces each with its own seeded generator (std::to_chars
  // writes "%e" and "%.16e" exactly as printf does, many times faster).
  constexpr int kPieces = 64;
  std::vector<std::string> parts(2 * kPieces);  // observations, then parameters
  const int64_t values = 9 * cameras + 3 * points;
#pragma omp parallel for schedule(dynamic, 1)
  for (int part = 0; part < 2 * kPieces; ++part) {
    const int piece = part % kPieces;
    const bool params = part >= kPieces;
    std::mt19937_64 rng(18 + part);
    std::uniform_real_distribution<double> pixel(-600.0, 600.0), unit(-1.0, 1.0);
    std::string& out = parts[static_cast<size_t>(part)];
    char line[128];
    auto put_double = [&](char* at, double v, int precision) {
      return std::to_chars(at, line + sizeof(line), v, std::chars_format::scientific, precision).ptr;
    };
    // Each point is seen by consecutive observations of random cameras.
    for (int64_t i = observations * piece / kPieces;
         !params && i < observations * (piece + 1) / kPieces; ++i) {
      char* q = std::to_chars(line, line + 32, static_cast<long long>(rng() % static_cast<uint64_t>(cameras))).ptr;
      *q++ = ' ';
      q = std::to_chars(q, q + 32, static_cast<long long>(i * points / observations)).ptr;
      for (int k = 0; k < 5; ++k) *q++ = ' ';
      q = put_double(q, pixel(rng), 6);
      *q++ = ' ';
      q = put_double(q, pixel(rng), 6);
      *q++ = '\n';
      out.append(line, static_cast<size_t>(q - line));
    }
    for (int64_t k = values * piece / kPieces; params && k < values * (piece + 1) / kPieces;
         ++k) {
      char* q = put_double(line, unit(rng) * 10.0, 16);
      *q++ = '\n';
      out.append(line, static_cast<size_t>(q - line));
    }
  }
  std::string text = std::to_string(cameras) + " " + std::to_string(points) + " " +
                     std::to_string(observations) + "\n";
  size_t total = text.size();
  for (const std::string& part : parts) total += part.size();
  text.reserve(total);
  for (std::string& part : parts) {
    text += part;
    std::string().swap(part);
  }
  const std::string txt = prefix + ".txt";
  {
    std::ofstream out(txt, std::ios::binary);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!out) {
      std::fprintf(stderr, "%s: write failed\n", txt.c_str());
      return 2;
    }
  }
  // Compress: pieces of 900 kB, each its own stream (pbzip2), or one stream.
  const size_t piece = pbzip2 ? 900000 : text.size();
  const size_t pieces = (text.size() + piece - 1) / piece;
  std::vector<std::string> compressed(pieces);
  bool failed = false;
#pragma omp parallel for schedule(dynamic, 1) if (pbzip2)
  for (int64_t k = 0; k < static_cast<int64_t>(pieces); ++k) {
    const size_t at = static_cast<size_t>(k) * piece;
    const size_t len = std::min(piece, text.size() - at);
    unsigned int size = static_cast<unsigned int>(len + len / 50 + 4096);
    std::string& out = compressed[static_cast<size_t>(k)];
    out.resize(size);
    if (len > (size_t{1} << 31) ||
        BZ2_bzBuffToBuffCompress(out.data(), &size, text.data() + at,
                                 static_cast<unsigned int>(len), 9, 0, 0) != BZ_OK) {
#pragma omp critical
      failed = true;
    }
    out.resize(size);
  }
  if (failed) {
    std::fprintf(stderr, "bzip2 compression failed (one stream holds at most 2 GB here)\n");
    return 2;
  }
  std::ofstream out(txt + ".bz2", std::ios::binary);
  for (const std::string& c : compressed) out.write(c.data(), static_cast<std::streamsize>(c.size()));
  if (!out) {
    std::fprintf(stderr, "%s.bz2: write failed\n", txt.c_str());
    return 2;
  }
  std::printf("wrote %s (%.1f MB; %lld cameras, %lld points, %lld observations) and %s.bz2\n",
              txt.c_str(), text.size() / 1e6, static_cast<long long>(cameras),
              static_cast<long long>(points), static_cast<long long>(observations),
              txt.c_str());
  return 0;
}

}  // namespace
}  // namespace tiepoint

int main(int argc, char** argv) {
  using namespace tiepoint;
  std::vector<std::string> files;
  std::vector<int> threads;
  std::string json_out;
  int repeat = 3;
  bool with_serial = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") return Usage(argv[0], 0);
    if (a == "--make-bal" && i + 2 < argc) {
      const long long obs = std::atoll(argv[i + 1]);
      const bool pbzip2 = i + 3 < argc && std::string(argv[i + 3]) == "--pbzip2";
      if (obs <= 0) return Usage(argv[0], 2);
      return MakeBal(obs, argv[i + 2], pbzip2);
    }
    if (a == "--threads" && i + 1 < argc) {
      threads = ParseThreads(argv[++i]);
      if (threads.empty()) return Usage(argv[0], 2);
    } else if (a == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--no-serial") {
      with_serial = false;
    } else if (a == "--gpu") {
      g_gpu = true;
    } else if (a == "--json" && i + 1 < argc) {
      json_out = argv[++i];
    } else if (!a.empty() && a[0] != '-') {
      files.push_back(a);
    } else {
      return Usage(argv[0], 2);
    }
  }
  if (files.empty()) return Usage(argv[0], 2);
  if (g_gpu) WarmUpCuda();  // the context outside the timings
  if (threads.empty()) {
    for (int t = 1; t < omp_get_max_threads(); t *= 2) threads.push_back(t);
    threads.push_back(omp_get_max_threads());
  }
  nlohmann::json result = bench::ResultHeader("bal_read_bench");
  result["omp_max_threads"] = omp_get_max_threads();
  {
    std::ifstream loadavg("/proc/loadavg");
    std::string load;
    std::getline(loadavg, load);
    result["loadavg_at_start"] = load;  // other work on the machine skews the times
  }
  result["repeat"] = repeat;
  result["note"] =
      "MB/s = 1e6 bytes/s of BAL text (text_MBps) or of the file as stored (input_MBps); "
      "best of `repeat` runs, file in the page cache; read = ReadBal parallel (file, "
      "decode, parse), parse = text already in memory, bz2 = TryDecompressBz2Parallel on "
      "the compressed bytes in memory, libbz2 = single-thread BZ2_bzDecompress";
  bool ok = true;
  nlohmann::json runs = nlohmann::json::array();
  for (const std::string& f : files) runs.push_back(BenchFile(f, threads, repeat, with_serial, &ok));
  result["files"] = runs;
  const int w = bench::WriteResult(json_out, result);
  if (w != 0) return w;
  return ok ? 0 : 1;
}
