// sift_bench: tiepoint's SIFT (CPU, and CUDA where a GPU is usable) side by side with
// OpenCV 4.6's SIFT, in one run, on the same decoded images.
//
// Accuracy, on image pairs with ground-truth homographies H (mapping image 1 to image N):
// Oxford boat 1 -> 2..6 and graf 1 -> 3 (under --data, default $TIEPOINT_SHARED_DATA or
// ../shared/data). Both extractors see the same 8-bit grey values (tiepoint's decoder,
// rounded to 8 bit for OpenCV) and run with their defaults for this comparison: 3 layers per
// octave, contrast threshold 0.04, edge threshold 10, sigma 1.6, first octave upsampled 2x
// (OpenCV's default; tiepoint's --upsample). Only keypoints in the common area count: those
// of image 1 whose H-image lies inside image 2, and those of image 2 whose H^-1-image lies
// inside image 1; n1 is the number of image-1 keypoints in the common area.
//   repeatability  = (image-1 keypoints p with an image-2 keypoint within 3 px of H p) / n1
//   matching score = (mutual nearest neighbours in descriptor space, L2, whose positions
//                     agree within 3 px through H) / n1
// (the same 3 px rule as tests/features/sift_test.cc's repeatability test).
//
// Speed: `--speed-images` (default 100) images of 1920 x 1080, each a mosaic of six crops
// of the shared images (bilinear scaling), decoded and held in host memory; every extractor
// keeps the `--speed-features` (default 4000) strongest keypoints per image:
//   tiepoint CUDA: ExtractBatch over the whole batch (upload from host memory included,
//                  `--cuda-streams` in flight), wall clock, `--repeats` (default 3) timed
//                  batches after a warm-up batch: the best, the median and every batch's
//                  rate, and the process's CPU time per image over them (host cost);
//   OpenCV: detectAndCompute on all hardware threads, one image per thread at a time
//           (cv::setNumThreads(1) inside, so threads are not oversubscribed), best of 2;
//           OpenCV 4.6 always upsamples the first octave;
//   tiepoint CUDA without upsampling (as CudaSift) and with it (the work OpenCV does);
//   with --cpu-speed also tiepoint's CPU extractor (all threads on one image at a time);
// and each one's ratio to OpenCV. Two ceilings for the CUDA figures: pinned host-to-device
// copies on one stream (GB/s), and the extractor's input path without kernels (16 threads
// copying each image into pinned memory and uploading it, images/s).
//
// `--no-opencv` leaves OpenCV out (no ratio), `--no-upsample-speed` the upsampled runs.
// The environment's CUDA_DEVICE_MAX_CONNECTIONS goes into the JSON.
// Output: a table on stdout and, with --out, JSON with the machine (CPU, cores, GPU), date,
// commit, build flags and every figure.
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/features2d.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>
#include <sstream>
#include <sys/resource.h>
#include <string>
#include <thread>
#include <vector>

#ifdef TIEPOINT_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include "features/sift.h"
#include "io/base/atomic_file.h"
#include "io/base/cuda_device.h"
#include "io/base/timer.h"
#include "io/image.h"
#include "bench/bench_common.h"
#include "bench/opencv_common.h"
#include "tiepoint/build_info.h"

namespace tiepoint {
namespace {

using bench::BestOf;
using bench::MapHomography;
using bench::Quantize8;
using bench::ToMat8;
using bench::UtcNow;

using json = nlohmann::json;

struct Args {
  std::string data;
  std::string out;
  int speed_images = 100;
  int speed_features = 4000;
  std::vector<int> cuda_streams = {4};
  bool cuda = true;
  bool accuracy = true;
  bool speed = true;
  bool cpu_speed = false;
  bool opencv = true;
  bool upsample_speed = true;
  int repeats = 3;
  std::string dump_image;
};


void Invert3x3(const double m[9], double inv[9]) {
  const double c00 = m[4] * m[8] - m[5] * m[7], c01 = m[5] * m[6] - m[3] * m[8],
               c02 = m[3] * m[7] - m[4] * m[6];
  const double det = m[0] * c00 + m[1] * c01 + m[2] * c02;
  inv[0] = c00 / det;
  inv[1] = (m[2] * m[7] - m[1] * m[8]) / det;
  inv[2] = (m[1] * m[5] - m[2] * m[4]) / det;
  inv[3] = c01 / det;
  inv[4] = (m[0] * m[8] - m[2] * m[6]) / det;
  inv[5] = (m[2] * m[3] - m[0] * m[5]) / det;
  inv[6] = c02 / det;
  inv[7] = (m[1] * m[6] - m[0] * m[7]) / det;
  inv[8] = (m[0] * m[4] - m[1] * m[3]) / det;
}


// Keypoint positions and float descriptors (one row each), whatever the extractor.
struct PointSet {
  std::vector<cv::Point2f> points;
  cv::Mat descriptors;  // CV_32F, n x 128
  double seconds = 0;
};

PointSet FromTiepoint(const Features& f) {
  PointSet s;
  s.descriptors = cv::Mat(static_cast<int>(f.size()), kSiftDescriptorDim, CV_32F);
  for (size_t i = 0; i < f.size(); ++i) {
    s.points.emplace_back(f.keypoints[i].x, f.keypoints[i].y);
    for (int j = 0; j < kSiftDescriptorDim; ++j) {
      s.descriptors.at<float>(static_cast<int>(i), j) = f.descriptor(i)[j];
    }
  }
  return s;
}



struct PairScore {
  int n1 = 0, n2 = 0;  // keypoints in the common area
  int keypoints1 = 0, keypoints2 = 0;
  int repeated = 0, matches = 0, correct = 0;
  double repeatability() const { return n1 ? double(repeated) / n1 : 0; }
  double matching_score() const { return n1 ? double(correct) / n1 : 0; }
};

PairScore Score(const PointSet& a, const PointSet& b, const double H[9], int w1, int h1, int w2,
                int h2) {
  double Hinv[9];
  Invert3x3(H, Hinv);
  PairScore s;
  s.keypoints1 = static_cast<int>(a.points.size());
  s.keypoints2 = static_cast<int>(b.points.size());
  std::vector<int> ia, ib;
  std::vector<cv::Point2d> mapped;  // H p of the common image-1 keypoints
  for (size_t i = 0; i < a.points.size(); ++i) {
    double x, y;
    MapHomography(H, a.points[i].x, a.points[i].y, &x, &y);
    if (x < 0 || y < 0 || x > w2 - 1 || y > h2 - 1) continue;
    ia.push_back(static_cast<int>(i));
    mapped.emplace_back(x, y);
  }
  for (size_t i = 0; i < b.points.size(); ++i) {
    double x, y;
    MapHomography(Hinv, b.points[i].x, b.points[i].y, &x, &y);
    if (x < 0 || y < 0 || x > w1 - 1 || y > h1 - 1) continue;
    ib.push_back(static_cast<int>(i));
  }
  s.n1 = static_cast<int>(ia.size());
  s.n2 = static_cast<int>(ib.size());
  // Repeatability through a grid of 3 px cells over image 2.
  const int gw = w2 / 3 + 2, gh = h2 / 3 + 2;
  std::vector<std::vector<int>> grid(static_cast<size_t>(gw) * gh);
  for (int j : ib) {
    const int cx = std::clamp(static_cast<int>(b.points[j].x / 3), 0, gw - 1);
    const int cy = std::clamp(static_cast<int>(b.points[j].y / 3), 0, gh - 1);
    grid[static_cast<size_t>(cy) * gw + cx].push_back(j);
  }
  for (const cv::Point2d& p : mapped) {
    const int cx = static_cast<int>(p.x / 3), cy = static_cast<int>(p.y / 3);
    bool found = false;
    for (int gy = std::max(0, cy - 1); gy <= std::min(gh - 1, cy + 1) && !found; ++gy) {
      for (int gx = std::max(0, cx - 1); gx <= std::min(gw - 1, cx + 1) && !found; ++gx) {
        for (int j : grid[static_cast<size_t>(gy) * gw + gx]) {
          const double dx = b.points[j].x - p.x, dy = b.points[j].y - p.y;
          if (dx * dx + dy * dy <= 9.0) {
            found = true;
            break;
          }
        }
      }
    }
    s.repeated += found;
  }
  // Mutual nearest neighbours among the common keypoints.
  if (!ia.empty() && !ib.empty()) {
    cv::Mat da(static_cast<int>(ia.size()), kSiftDescriptorDim, CV_32F);
    cv::Mat db(static_cast<int>(ib.size()), kSiftDescriptorDim, CV_32F);
    for (size_t i = 0; i < ia.size(); ++i) a.descriptors.row(ia[i]).copyTo(da.row(static_cast<int>(i)));
    for (size_t i = 0; i < ib.size(); ++i) b.descriptors.row(ib[i]).copyTo(db.row(static_cast<int>(i)));
    cv::BFMatcher matcher(cv::NORM_L2, /*crossCheck=*/true);
    std::vector<cv::DMatch> matches;
    matcher.match(da, db, matches);
    s.matches = static_cast<int>(matches.size());
    for (const cv::DMatch& m : matches) {
      const cv::Point2d& p = mapped[m.queryIdx];
      const cv::Point2f& q = b.points[ib[m.trainIdx]];
      if ((q.x - p.x) * (q.x - p.x) + (q.y - p.y) * (q.y - p.y) <= 9.0) ++s.correct;
    }
  }
  return s;
}


std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

// Bilinear resampling of `src` so that it covers w x h after scaling by `scale`, then a
// crop at (ox, oy) in the scaled image: out(x, y) = src((x + ox + 0.5) / scale - 0.5, ...).
GrayImage ScaleCrop(const GrayImage& src, double scale, double ox, double oy, int w, int h) {
  GrayImage out;
  out.width = w;
  out.height = h;
  out.pixels.resize(static_cast<size_t>(w) * h);
  for (int y = 0; y < h; ++y) {
    const double sy = std::clamp((y + oy + 0.5) / scale - 0.5, 0.0, src.height - 1.0);
    const int y0 = std::min(static_cast<int>(sy), src.height - 2 < 0 ? 0 : src.height - 2);
    const double fy = sy - y0;
    for (int x = 0; x < w; ++x) {
      const double sx = std::clamp((x + ox + 0.5) / scale - 0.5, 0.0, src.width - 1.0);
      const int x0 = std::min(static_cast<int>(sx), src.width - 2 < 0 ? 0 : src.width - 2);
      const double fx = sx - x0;
      const int x1 = std::min(x0 + 1, src.width - 1), y1 = std::min(y0 + 1, src.height - 1);
      const double v = (1 - fy) * ((1 - fx) * src.at(x0, y0) + fx * src.at(x1, y0)) +
                       fy * ((1 - fx) * src.at(x0, y1) + fx * src.at(x1, y1));
      out.at(x, y) = static_cast<float>(std::lround(v * 255.0) / 255.0);  // 8-bit values
    }
  }
  return out;
}

// Host-to-device copy rate from pinned memory (GB/s): `count` copies of `bytes`, one
// stream, after a warm-up copy; 0 when unavailable. The ceiling on images/s for uploads
// of float images is this over the image's bytes.
double PinnedUploadGbPerS(size_t bytes, int count) {
#ifdef TIEPOINT_WITH_CUDA
  void* host = nullptr;
  void* device = nullptr;
  if (cudaHostAlloc(&host, bytes, cudaHostAllocDefault) != cudaSuccess) return 0;
  if (cudaMalloc(&device, bytes) != cudaSuccess) {
    cudaFreeHost(host);
    return 0;
  }
  std::memset(host, 1, bytes);
  double rate = 0;
  if (cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice) == cudaSuccess) {
    const Timer t;
    for (int i = 0; i < count; ++i) {
      (void)cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, nullptr);
    }
    if (cudaDeviceSynchronize() == cudaSuccess) rate = double(bytes) * count / t.Seconds() / 1e9;
  }
  cudaFree(device);
  cudaFreeHost(host);
  return rate;
#else
  (void)bytes;
  (void)count;
  return 0;
#endif
}

// The host side of the CUDA extractor's input path alone: `threads` threads take the images
// in turn, copy each into their own pinned buffer (memcpy) and upload it on their own
// stream (cudaMemcpyAsync, then wait), no kernels; images/s, best of 3 after a warm-up
// pass; 0 when unavailable. A ceiling for the extractor's throughput from host memory.
double StagedUploadImagesPerS(const std::vector<const GrayImage*>& images, int threads) {
#ifdef TIEPOINT_WITH_CUDA
  size_t bytes = 0;
  for (const GrayImage* img : images) bytes = std::max(bytes, img->pixels.size() * sizeof(float));
  struct Slot {
    void* host = nullptr;
    void* device = nullptr;
    cudaStream_t stream = nullptr;
  };
  std::vector<Slot> slots(threads);
  bool ok = bytes > 0;
  for (Slot& s : slots) {
    ok = ok && cudaHostAlloc(&s.host, bytes, cudaHostAllocDefault) == cudaSuccess &&
         cudaMalloc(&s.device, bytes) == cudaSuccess &&
         cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking) == cudaSuccess;
  }
  double best = 0;
  if (ok) {
    auto pass = [&] {
      std::atomic<size_t> next{0};
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
          Slot& s = slots[t];
          for (size_t i = next++; i < images.size(); i = next++) {
            const size_t n = images[i]->pixels.size() * sizeof(float);
            std::memcpy(s.host, images[i]->pixels.data(), n);
            (void)cudaMemcpyAsync(s.device, s.host, n, cudaMemcpyHostToDevice, s.stream);
            (void)cudaStreamSynchronize(s.stream);
          }
        });
      }
      for (std::thread& th : pool) th.join();
    };
    pass();
    for (int r = 0; r < 3; ++r) {
      const Timer t;
      pass();
      best = std::max(best, images.size() / t.Seconds());
    }
  }
  for (Slot& s : slots) {
    if (s.stream != nullptr) cudaStreamDestroy(s.stream);
    if (s.device != nullptr) cudaFree(s.device);
    if (s.host != nullptr) cudaFreeHost(s.host);
  }
  return best;
#else
  (void)images;
  (void)threads;
  return 0;
#endif
}


int Main(const Args& args) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  json result;
  result["tool"] = "bench/sift_bench";
  result["date"] = UtcNow();
  result["commit"] = kGitCommit;
  result["build_flags"] = kBuildFlags;
  result["opencv_version"] = CV_VERSION;
  result["cpu"] = CpuModel();
  result["hardware_threads"] = cores;
  // The CUDA driver's hardware work queues per context (default 8): with more streams than
  // queues, streams share a queue, and work behind a waiting stream waits too.
  const char* connections = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  result["cuda_device_max_connections"] = connections ? connections : "unset (driver default 8)";
  std::vector<CudaDeviceInfo> devices;
  const bool have_gpu = args.cuda && QueryCudaDevices(&devices).ok() && !devices.empty();
  result["gpu"] = have_gpu ? devices.front().name : "none";
  std::printf("sift_bench: %s, %u hardware threads, GPU: %s; OpenCV %s; commit %s\n",
              CpuModel().c_str(), cores, have_gpu ? devices.front().name.c_str() : "none",
              CV_VERSION, kGitCommit);

  // --- accuracy ----------------------------------------------------------------------
  if (args.accuracy) {
    const std::vector<bench::HomographyPair> pairs = bench::OxfordHomographyPairs();
    SiftOptions options;
    options.upsample = true;
    std::vector<std::pair<std::string, std::unique_ptr<FeatureExtractor>>> extractors;
    {
      std::unique_ptr<FeatureExtractor> e;
      if (FeatureExtractor::Create(options, Device::kCpu, &e).ok()) {
        extractors.emplace_back("tiepoint-cpu", std::move(e));
      }
      if (have_gpu) {
        const Status s = FeatureExtractor::Create(options, Device::kCuda, &e);
        if (s.ok()) {
          extractors.emplace_back("tiepoint-cuda", std::move(e));
        } else {
          std::printf("tiepoint-cuda: %s\n", s.ToString().c_str());
        }
      }
    }
    cv::Ptr<cv::SIFT> opencv = cv::SIFT::create();
    json rows = json::array();
    std::printf("\n%-10s %-14s %7s %7s %8s %8s %8s %8s\n", "pair", "extractor", "kp1", "kp2",
                "n1", "repeat", "matches", "m.score");
    for (const bench::HomographyPair& pair : pairs) {
      GrayImage im1, im2;
      double H[9];
      if (!bench::ReadHomographyPair(args.data, pair, 10, &im1, &im2, H)) {
        continue;
      }
      im1 = Quantize8(im1);
      im2 = Quantize8(im2);
      json row;
      row["pair"] = pair.name;
      auto report = [&](const std::string& name, const PairScore& s, double seconds) {
        std::printf("%-10s %-14s %7d %7d %8d %8.3f %8d %8.3f\n", pair.name.c_str(), name.c_str(),
                    s.keypoints1, s.keypoints2, s.n1, s.repeatability(), s.matches,
                    s.matching_score());
        row[name] = {{"keypoints1", s.keypoints1},       {"keypoints2", s.keypoints2},
                     {"common1", s.n1},                  {"common2", s.n2},
                     {"repeated", s.repeated},           {"repeatability", s.repeatability()},
                     {"mutual_nn_matches", s.matches},   {"correct_matches", s.correct},
                     {"matching_score", s.matching_score()}, {"extract_seconds_pair", seconds}};
      };
      for (auto& [name, extractor] : extractors) {
        Features f1, f2;
        const Timer t;
        Status s = extractor->Extract(im1, &f1);
        if (s.ok()) s = extractor->Extract(im2, &f2);
        const double seconds = t.Seconds();
        if (!s.ok()) {
          std::printf("%s: %s\n", name.c_str(), s.ToString().c_str());
          continue;
        }
        report(name, Score(FromTiepoint(f1), FromTiepoint(f2), H, im1.width, im1.height,
                           im2.width, im2.height), seconds);
      }
      {
        PointSet a, b;
        std::vector<cv::KeyPoint> k1, k2;
        const Timer t;
        opencv->detectAndCompute(ToMat8(im1), cv::noArray(), k1, a.descriptors);
        opencv->detectAndCompute(ToMat8(im2), cv::noArray(), k2, b.descriptors);
        const double seconds = t.Seconds();
        for (const auto& k : k1) a.points.push_back(k.pt);
        for (const auto& k : k2) b.points.push_back(k.pt);
        report("opencv", Score(a, b, H, im1.width, im1.height, im2.width, im2.height), seconds);
      }
      rows.push_back(row);
      std::fflush(stdout);
    }
    result["accuracy"] = {{"settings", "first octave upsampled 2x (OpenCV default), 3 layers, "
                                       "contrast 0.04, edge 10, sigma 1.6; 3 px; scores over "
                                       "image-1 keypoints in the common area"},
                          {"pairs", rows}};
  }

  // --- speed -------------------------------------------------------------------------
  if (args.speed && args.speed_images > 0) {
    const std::vector<std::string> sources = {
        "multiview/strecha_fountain_pair/fountain1.jpg",
        "multiview/strecha_fountain_pair/fountain2.jpg",
        "features/oxford_boat/img1.pgm", "features/oxford_boat/img3.pgm",
        "features/oxford_boat/img5.pgm", "features/opencv_samples/graf1.png",
        "features/opencv_samples/graf3.png", "features/opencv_samples/leuvenA.jpg",
        "features/opencv_samples/leuvenB.jpg", "features/opencv_samples/aero1.jpg",
        "features/opencv_samples/aero3.jpg",
        "multiview/gtsam_balbianello/BalbianelloMedium-1.jpg",
        "multiview/gtsam_balbianello/BalbianelloMedium-3.jpg"};
    std::vector<GrayImage> originals;
    for (const std::string& s : sources) {
      GrayImage img;
      if (ReadImageGray(args.data + "/" + s, &img).ok()) originals.push_back(std::move(img));
    }
    if (originals.empty()) {
      std::printf("speed: no source images under %s: skipped\n", args.data.c_str());
    } else {
      constexpr int kW = 1920, kH = 1080;
      std::vector<GrayImage> images;
      std::vector<cv::Mat> mats;
      // Each image a 3 x 2 mosaic of 640 x 540 crops of the sources near their native
      // resolution (scaled only to cover a tile, or down to 0.4 for the 3072 x 2048
      // fountain images), so that every image has natural feature density (> 4000).
      constexpr int kTileW = kW / 3, kTileH = kH / 2;
      const int nsrc = static_cast<int>(originals.size());
      images.resize(args.speed_images);
      mats.resize(args.speed_images);
      auto make_image = [&](int k) {
        GrayImage img;
        img.width = kW;
        img.height = kH;
        img.pixels.assign(static_cast<size_t>(kW) * kH, 0.0f);
        for (int t = 0; t < 6; ++t) {
          const GrayImage& src = originals[(k + 5 * t) % nsrc];
          const int variant = (k * 6 + t) / nsrc;
          const double cover = std::max(double(kTileW) / src.width, double(kTileH) / src.height);
          const double scale = std::max(cover, 0.4) * (1.0 + 0.1 * (variant % 3));
          const double ox = (src.width * scale - kTileW) * ((variant * 37 + t * 13) % 11) / 10.0;
          const double oy = (src.height * scale - kTileH) * ((variant * 53 + t * 7) % 7) / 6.0;
          const GrayImage tile = ScaleCrop(src, scale, ox, oy, kTileW, kTileH);
          const int tx = (t % 3) * kTileW, ty = (t / 3) * kTileH;
          for (int y = 0; y < kTileH; ++y) {
            std::copy(&tile.pixels[static_cast<size_t>(y) * kTileW],
                      &tile.pixels[static_cast<size_t>(y) * kTileW] + kTileW,
                      &img.pixels[static_cast<size_t>(ty + y) * kW + tx]);
          }
        }
        mats[k] = ToMat8(img);
        images[k] = std::move(img);
      };
      {
        std::atomic<int> next_image{0};
        std::vector<std::thread> makers;
        for (unsigned t = 0; t < cores; ++t) {
          makers.emplace_back([&] {
            for (int k = next_image++; k < args.speed_images; k = next_image++) make_image(k);
          });
        }
        for (std::thread& t : makers) t.join();
      }
      if (!args.dump_image.empty()) {
        const Status s = WritePgm(args.dump_image, images.front());
        std::printf("  first speed image written to %s: %s\n", args.dump_image.c_str(),
                    s.ToString().c_str());
      }
      std::vector<const GrayImage*> batch;
      for (const GrayImage& img : images) batch.push_back(&img);
      json speed;
      speed["images"] = args.speed_images;
      speed["width"] = kW;
      speed["height"] = kH;
      speed["max_features"] = args.speed_features;
      speed["source_images"] = originals.size();
      std::printf("\nspeed: %d images of %d x %d from %zu sources, %d features kept per image\n",
                  args.speed_images, kW, kH, originals.size(), args.speed_features);

      // OpenCV, one image per thread.
      cv::setNumThreads(1);
      cv::Ptr<cv::SIFT> opencv = cv::SIFT::create(args.speed_features);
      std::vector<size_t> cv_counts(mats.size());
      auto run_opencv = [&] {
        std::atomic<size_t> next{0};
        std::vector<std::thread> threads;
        for (unsigned t = 0; t < cores; ++t) {
          threads.emplace_back([&] {
            cv::Ptr<cv::SIFT> sift = cv::SIFT::create(args.speed_features);
            for (size_t i = next++; i < mats.size(); i = next++) {
              std::vector<cv::KeyPoint> k;
              cv::Mat d;
              sift->detectAndCompute(mats[i], cv::noArray(), k, d);
              cv_counts[i] = k.size();
            }
          });
        }
        for (auto& t : threads) t.join();
      };
      double cv_rate = 0;
      if (args.opencv) {
        const double cv_s = BestOf(args.speed_images >= 50 ? 2 : 1, run_opencv);
        double cv_mean = 0;
        for (size_t c : cv_counts) cv_mean += double(c) / cv_counts.size();
        cv_rate = args.speed_images / cv_s;
        speed["opencv"] = {{"threads", cores}, {"seconds", cv_s}, {"images_per_s", cv_rate},
                           {"mean_features", cv_mean}};
        std::printf("  opencv SIFT, %u threads (one image each): %.3f s, %.1f images/s, %.0f "
                    "features/image\n",
                    cores, cv_s, cv_rate, cv_mean);
        std::fflush(stdout);
      }

      auto run_tiepoint = [&](Device device, const std::string& name, bool upsample,
                              int streams) {
        SiftOptions options;
        options.max_features = args.speed_features;
        options.cuda_streams = streams;
        options.upsample = upsample;
        std::unique_ptr<FeatureExtractor> e;
        const Status s = FeatureExtractor::Create(options, device, &e);
        if (!s.ok()) {
          std::printf("  %s: %s\n", name.c_str(), s.ToString().c_str());
          return;
        }
        std::vector<Features> features;
        std::vector<Status> statuses;
        e->ExtractBatch(batch, &features, &statuses);  // warm-up: context, workspaces
        for (const Status& st : statuses) {
          if (!st.ok()) {
            std::printf("  %s: %s\n", name.c_str(), st.ToString().c_str());
            return;
          }
        }
        // Every timed batch, its best and median, and the process's CPU time (user +
        // system, all threads) per image over the timed batches: how much of the machine's
        // cores the host side of the extractor takes.
        const int repeats = device == Device::kCuda ? std::max(1, args.repeats) : 1;
        std::vector<double> times;
        auto cpu_seconds = [] {
          rusage u{};
          getrusage(RUSAGE_SELF, &u);
          return u.ru_utime.tv_sec + u.ru_stime.tv_sec +
                 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
        };
        const double cpu0 = cpu_seconds();
        for (int r = 0; r < repeats; ++r) {
          const Timer t;
          e->ExtractBatch(batch, &features, &statuses);
          times.push_back(t.Seconds());
        }
        const double cpu_us_per_image =
            (cpu_seconds() - cpu0) / (double(repeats) * args.speed_images) * 1e6;
        std::vector<double> sorted_times = times;
        std::sort(sorted_times.begin(), sorted_times.end());
        const double sec = sorted_times.front();
        const double median = sorted_times[sorted_times.size() / 2];
        double mean = 0;
        for (const Features& f : features) mean += double(f.size()) / features.size();
        const double rate = args.speed_images / sec;
        json rates = json::array();
        for (double t : times) rates.push_back(args.speed_images / t);
        json entry = {{"device", ToString(device)},
                      {"upsample", upsample},
                      {"seconds", sec},
                      {"images_per_s", rate},
                      {"median_images_per_s", args.speed_images / median},
                      {"images_per_s_every_batch", rates},
                      {"host_cpu_us_per_image", cpu_us_per_image},
                      {"mean_features", mean}};
        if (cv_rate > 0) entry["ratio_to_opencv"] = rate / cv_rate;
        if (device == Device::kCuda) entry["cuda_streams"] = streams;
        speed["tiepoint"].push_back(entry);
        std::printf("  %s%s%s: best %.4f s, %.1f images/s (median %.1f of %d), %.0f "
                    "features/image, host CPU %.0f us/image, %.2fx OpenCV\n",
                    name.c_str(), upsample ? " (upsampled, as OpenCV)" : "",
                    device == Device::kCuda ? (", " + std::to_string(streams) + " streams").c_str()
                                            : "",
                    sec, rate,
                    args.speed_images / median, repeats, mean, cpu_us_per_image,
                    cv_rate > 0 ? rate / cv_rate : 0.0);
        std::fflush(stdout);
      };
      if (have_gpu) {
        const size_t bytes = sizeof(float) * kW * kH;
        const double gbs = PinnedUploadGbPerS(bytes, 100);
        speed["pinned_upload_gb_per_s"] = gbs;
        speed["upload_bound_images_per_s"] = gbs * 1e9 / bytes;
        std::printf("  pinned host-to-device copies: %.1f GB/s, so at most %.0f float images/s "
                    "through the upload alone\n", gbs, gbs * 1e9 / bytes);
        const int staged_threads = 16;
        const double staged = StagedUploadImagesPerS(batch, staged_threads);
        speed["staged_upload_images_per_s"] = staged;
        speed["staged_upload_threads"] = staged_threads;
        std::printf("  copy into pinned memory + upload, %d threads, no kernels: %.0f images/s\n",
                    staged_threads, staged);
      }
      speed["tiepoint"] = json::array();
      for (bool upsample : {false, true}) {
        if (upsample && !args.upsample_speed) continue;
        if (have_gpu) {
          for (int streams : args.cuda_streams) {
            run_tiepoint(Device::kCuda, "tiepoint-cuda", upsample, streams);
          }
        }
        if (args.cpu_speed) run_tiepoint(Device::kCpu, "tiepoint-cpu", upsample, 1);
      }
      result["speed"] = speed;
    }
  }

  if (!args.out.empty()) {
    AtomicFile file(args.out);
    Status s = file.Open();
    if (s.ok()) {
      file.stream() << result.dump(2) << "\n";
      s = file.Commit();
    }
    if (!s.ok()) {
      std::fprintf(stderr, "sift_bench: %s\n", s.ToString().c_str());
      return 2;
    }
    std::printf("\nwrote %s\n", args.out.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace tiepoint

int main(int argc, char** argv) {
  tiepoint::Args args;
  const char* env = std::getenv("TIEPOINT_SHARED_DATA");
  args.data = env ? env : "../shared/data";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "sift_bench: %s needs a value\n", name);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--data") {
      args.data = value("--data");
    } else if (a == "--out") {
      args.out = value("--out");
    } else if (a == "--speed-images") {
      args.speed_images = std::atoi(value("--speed-images").c_str());
    } else if (a == "--speed-features") {
      args.speed_features = std::atoi(value("--speed-features").c_str());
    } else if (a == "--cuda-streams") {
      args.cuda_streams.clear();
      std::stringstream list(value("--cuda-streams"));
      for (std::string item; std::getline(list, item, ',');) {
        args.cuda_streams.push_back(std::atoi(item.c_str()));
      }
    } else if (a == "--no-cuda") {
      args.cuda = false;
    } else if (a == "--no-accuracy") {
      args.accuracy = false;
    } else if (a == "--no-speed") {
      args.speed = false;
    } else if (a == "--dump-image") {
      args.dump_image = value("--dump-image");
    } else if (a == "--cpu-speed") {
      args.cpu_speed = true;
    } else if (a == "--no-opencv") {
      args.opencv = false;
    } else if (a == "--repeats") {
      args.repeats = std::atoi(value("--repeats").c_str());
    } else if (a == "--no-upsample-speed") {
      args.upsample_speed = false;

    } else {
      std::fprintf(stderr,
                   "usage: sift_bench [--data DIR] [--out RESULT.json] [--speed-images N] "
                   "[--speed-features N] [--cuda-streams N[,N...]] [--repeats N] [--no-cuda] "
                   "[--no-accuracy] [--no-speed] [--no-opencv] [--no-upsample-speed] "
                   "[--cpu-speed] [--dump-image FIRST.pgm]\n");
      return a == "--help" ? 0 : 2;
    }
  }
  return tiepoint::Main(args);
}
