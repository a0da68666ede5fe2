// FAST + suppression (features/fast.h) and the pyramid (features/pyramid.h), against
// brute-force references written independently here (no lookup table, no shared code):
// the table, the segment test, the max-threshold score, grid suppression (at most one
// corner per cell, the best local maximum of its cell, blocked cells empty) and plain
// suppression. Then the CUDA frontend against the CPU reference: identical pyramids,
// identical corner sets at each level and identical suppressed corners, for every score;
// those tests skip when no GPU is usable (CI has none).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "features/fast.h"
#include "features/frontend.h"
#include "features/pyramid.h"
#include "io/image.h"
#include "tests/common/gpu.h"
#include "tests/common/shared_data.h"

namespace tiepoint {
namespace {

// A textured test image: blurred random noise plus bright and dark rectangles (corners).
ImageU8 TestImage(int w, int h, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(0, 255);
  std::vector<int> noise(static_cast<size_t>(w) * h);
  for (int& v : noise) v = u(rng);
  ImageU8 img;
  img.width = w;
  img.height = h;
  img.data.resize(noise.size());
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      int s = 0, n = 0;
      for (int dy = -1; dy <= 1; ++dy) {
        for (int dx = -1; dx <= 1; ++dx) {
          const int xx = std::clamp(x + dx, 0, w - 1), yy = std::clamp(y + dy, 0, h - 1);
          s += noise[static_cast<size_t>(yy) * w + xx];
          ++n;
        }
      }
      img.data[static_cast<size_t>(y) * w + x] = static_cast<uint8_t>(40 + (s / n) / 3);
    }
  }
  std::uniform_int_distribution<int> px(0, w - 1), py(0, h - 1), size(6, 40);
  for (int r = 0; r < 40; ++r) {
    const int x0 = px(rng), y0 = py(rng), rw = size(rng), rh = size(rng);
    const uint8_t v = (r % 2) ? 230 : 5;
    for (int y = y0; y < std::min(h, y0 + rh); ++y) {
      for (int x = x0; x < std::min(w, x0 + rw); ++x) img.data[static_cast<size_t>(y) * w + x] = v;
    }
  }
  return img;
}

const int kCx[16] = {0, 1, 2, 3, 3, 3, 2, 1, 0, -1, -2, -3, -3, -3, -2, -1};
const int kCy[16] = {-3, -3, -2, -1, 0, 1, 2, 3, 3, 3, 2, 1, 0, -1, -2, -3};

// Brute-force segment test: walk every start of the circle.
bool BruteCorner(const ImageU8& img, int x, int y, int t, int n) {
  const int c = img.at(x, y);
  for (int sign = -1; sign <= 1; sign += 2) {
    for (int s = 0; s < 16; ++s) {
      bool ok = true;
      for (int k = 0; k < n && ok; ++k) {
        const int p = img.at(x + kCx[(s + k) % 16], y + kCy[(s + k) % 16]);
        ok = sign > 0 ? p > c + t : p < c - t;
      }
      if (ok) return true;
    }
  }
  return false;
}

TEST(FastTest, LookupTableIsEightKibAndMatchesRuns) {
  for (int n = 9; n <= 12; ++n) {
    const auto table = FastLookupTable(n);
    EXPECT_EQ(sizeof(table), 8192u);
    for (uint32_t m = 0; m < 65536; m += 7) {
      // Longest circular run of ones, counted directly.
      int best = 0;
      for (int s = 0; s < 16; ++s) {
        int run = 0;
        while (run < 16 && ((m >> ((s + run) % 16)) & 1u)) ++run;
        best = std::max(best, run);
      }
      const bool bit = (table[m >> 5] >> (m & 31)) & 1u;
      ASSERT_EQ(bit, best >= n) << "mask " << m << " n " << n;
    }
  }
}

TEST(FastTest, PyramidSizesAndValues) {
  const ImageU8 img = TestImage(101, 67, 3);
  ImagePyramid pyr;
  ASSERT_TRUE(BuildPyramid(img, 4, 0, &pyr).ok());
  ASSERT_EQ(pyr.num_levels(), 3);  // 101x67 -> 51x34 -> 26x17 -> (13x9 too small)
  EXPECT_EQ(pyr.levels[1].width, 51);
  EXPECT_EQ(pyr.levels[1].height, 34);
  EXPECT_EQ(pyr.levels[2].width, 26);
  EXPECT_EQ(pyr.levels[2].height, 17);
  // Direct 5x5 binomial with mirrored borders at a few pixels, including the edges.
  const int k[5] = {1, 4, 6, 4, 1};
  auto mirror = [](int i, int n) { return i < 0 ? -i : (i >= n ? 2 * n - 2 - i : i); };
  for (auto [x, y] : std::vector<std::pair<int, int>>{{0, 0}, {50, 33}, {25, 10}, {50, 0}}) {
    int s = 0;
    for (int j = 0; j < 5; ++j) {
      for (int i = 0; i < 5; ++i) {
        s += k[i] * k[j] * img.at(mirror(2 * x + i - 2, 101), mirror(2 * y + j - 2, 67));
      }
    }
    EXPECT_EQ(pyr.levels[1].at(x, y), (s + 128) >> 8) << x << "," << y;
  }
  ImageU8 flat{40, 40, std::vector<uint8_t>(1600, 77)};
  ASSERT_TRUE(BuildPyramid(flat, 3, 0, &pyr).ok());
  ASSERT_EQ(pyr.num_levels(), 2);  // 40 -> 20 -> (10: too small)
  for (uint8_t v : pyr.levels[1].data) EXPECT_EQ(v, 77);
  ImageU8 bad{10, 10, std::vector<uint8_t>(5)};
  EXPECT_EQ(BuildPyramid(bad, 3, 0, &pyr).code(), StatusCode::kInvalidInput);
}

TEST(FastTest, SegmentTestAndScoreMatchBruteForce) {
  const ImageU8 img = TestImage(160, 120, 7);
  ImagePyramid pyr;
  ASSERT_TRUE(BuildPyramid(img, 1, 0, &pyr).ok());
  for (int n = 9; n <= 12; ++n) {
    for (int t : {10, 25}) {
      FastOptions o;
      o.threshold = t;
      o.arc_length = n;
      o.levels = 1;
      std::vector<std::vector<FastCorner>> raw;
      ASSERT_TRUE(DetectFastRaw(pyr, o, &raw).ok());
      std::set<std::pair<int, int>> found;
      for (const FastCorner& c : raw[0]) found.insert({c.level_x, c.level_y});
      int expected = 0;
      for (int y = 3; y < img.height - 3; ++y) {
        for (int x = 3; x < img.width - 3; ++x) {
          const bool corner = BruteCorner(img, x, y, t, n);
          expected += corner;
          ASSERT_EQ(corner, found.count({x, y}) == 1) << x << "," << y << " t " << t << " n " << n;
        }
      }
      ASSERT_EQ(static_cast<int>(found.size()), expected);
      ASSERT_GT(expected, 10) << "the test image must have corners";
      // Max-threshold score: the largest t' that still passes, for every corner.
      for (size_t i = 0; i < raw[0].size(); ++i) {
        const FastCorner& c = raw[0][i];
        int largest = t;
        while (largest < 255 && BruteCorner(img, c.level_x, c.level_y, largest + 1, n)) ++largest;
        ASSERT_EQ(static_cast<int>(c.score), largest);
      }
    }
  }
}

TEST(FastTest, GridKeepsAtMostOneCornerPerCellAndItsBest) {
  const ImageU8 img = TestImage(300, 200, 11);
  ImagePyramid pyr;
  ASSERT_TRUE(BuildPyramid(img, 3, 0, &pyr).ok());
  for (FastScore score : {FastScore::kMaxThreshold, FastScore::kSad, FastScore::kHarris,
                          FastScore::kShiTomasi}) {
    FastOptions o;
    o.score = score;
    o.threshold = 12;
    o.cell_width = 64;
    o.cell_height = 40;
    std::vector<std::vector<FastCorner>> raw;
    std::vector<FastCorner> corners;
    ASSERT_TRUE(DetectFastRaw(pyr, o, &raw).ok());
    ASSERT_TRUE(DetectFast(pyr, o, nullptr, &corners).ok());
    const int gx = FastGridColumns(300, 64), gy = FastGridRows(200, 40);
    ASSERT_LE(static_cast<int>(corners.size()), gx * gy);
    // Brute force: per cell, the best raw corner that beats its 8 neighbours.
    std::map<std::tuple<int, int, int>, float> all;
    for (const auto& level : raw) {
      for (const FastCorner& c : level) all[{c.level, c.level_y, c.level_x}] = c.score;
    }
    std::map<int, FastCorner> best;
    for (const auto& level : raw) {
      for (const FastCorner& c : level) {
        bool local_max = true;
        for (int dy = -1; dy <= 1; ++dy) {
          for (int dx = -1; dx <= 1; ++dx) {
            if (!dx && !dy) continue;
            auto it = all.find({c.level, c.level_y + dy, c.level_x + dx});
            if (it != all.end() && !FastBeats(c.score, c.level, c.level_y, c.level_x, it->second,
                                              c.level, c.level_y + dy, c.level_x + dx)) {
              local_max = false;
            }
          }
        }
        if (!local_max) continue;
        const int cell = (static_cast<int>(c.y) / 40) * gx + static_cast<int>(c.x) / 64;
        auto it = best.find(cell);
        if (it == best.end() || FastBeats(c.score, c.level, c.level_y, c.level_x, it->second.score,
                                          it->second.level, it->second.level_y, it->second.level_x)) {
          best[cell] = c;
        }
      }
    }
    ASSERT_EQ(corners.size(), best.size()) << ToString(score);
    std::set<int> cells;
    for (const FastCorner& c : corners) {
      const int cell = (static_cast<int>(c.y) / 40) * gx + static_cast<int>(c.x) / 64;
      EXPECT_TRUE(cells.insert(cell).second) << "two corners in cell " << cell;
      const FastCorner& b = best[cell];
      EXPECT_EQ(c.level, b.level);
      EXPECT_EQ(c.level_x, b.level_x);
      EXPECT_EQ(c.level_y, b.level_y);
      EXPECT_EQ(c.x, static_cast<float>(c.level_x << c.level));
    }
    EXPECT_GT(corners.size(), static_cast<size_t>(gx * gy / 2));
    // Blocked cells receive nothing; the others keep their corner.
    std::vector<uint8_t> blocked(gx * gy, 0);
    for (int i = 0; i < gx * gy; i += 3) blocked[i] = 1;
    std::vector<FastCorner> rest;
    ASSERT_TRUE(DetectFast(pyr, o, &blocked, &rest).ok());
    size_t expected = 0;
    for (const auto& kv : best) expected += blocked[kv.first] == 0;
    EXPECT_EQ(rest.size(), expected);
    for (const FastCorner& c : rest) {
      EXPECT_EQ(blocked[(static_cast<int>(c.y) / 40) * gx + static_cast<int>(c.x) / 64], 0);
    }
    std::vector<uint8_t> wrong(3, 0);
    EXPECT_EQ(DetectFast(pyr, o, &wrong, &rest).code(), StatusCode::kInvalidInput);
  }
}

TEST(FastTest, PlainSuppressionKeepsStrictLocalMaxima) {
  const ImageU8 img = TestImage(200, 150, 5);
  ImagePyramid pyr;
  ASSERT_TRUE(BuildPyramid(img, 2, 0, &pyr).ok());
  FastOptions o;
  o.nms = FastNms::kPlain;
  o.nms_radius = 3;
  o.levels = 2;
  o.threshold = 15;
  std::vector<std::vector<FastCorner>> raw;
  std::vector<FastCorner> corners;
  ASSERT_TRUE(DetectFastRaw(pyr, o, &raw).ok());
  ASSERT_TRUE(DetectFast(pyr, o, nullptr, &corners).ok());
  std::set<std::tuple<int, int, int>> kept;
  for (const FastCorner& c : corners) kept.insert({c.level, c.level_y, c.level_x});
  size_t expected = 0;
  for (const auto& level : raw) {
    for (const FastCorner& c : level) {
      bool beats_all = true;
      for (const FastCorner& q : level) {
        if (&q == &c || std::abs(q.level_x - c.level_x) > 3 || std::abs(q.level_y - c.level_y) > 3) continue;
        if (!FastBeats(c.score, c.level, c.level_y, c.level_x, q.score, q.level, q.level_y, q.level_x)) {
          beats_all = false;
        }
      }
      expected += beats_all;
      EXPECT_EQ(beats_all, kept.count({c.level, c.level_y, c.level_x}) == 1);
    }
  }
  EXPECT_EQ(corners.size(), expected);
  EXPECT_GT(expected, 20u);
  for (size_t i = 1; i < corners.size(); ++i) {
    const auto a = std::make_tuple(corners[i - 1].level, corners[i - 1].level_y, corners[i - 1].level_x);
    const auto b = std::make_tuple(corners[i].level, corners[i].level_y, corners[i].level_x);
    EXPECT_LT(a, b) << "output in (level, y, x) order";
  }
}

TEST(FastTest, BrightSquareCornersAreFound) {
  ImageU8 img{64, 64, std::vector<uint8_t>(64 * 64, 20)};
  for (int y = 20; y < 44; ++y) {
    for (int x = 20; x < 44; ++x) img.data[y * 64 + x] = 200;
  }
  ImagePyramid pyr;
  ASSERT_TRUE(BuildPyramid(img, 1, 0, &pyr).ok());
  FastOptions o;
  o.levels = 1;
  o.nms = FastNms::kPlain;
  o.nms_radius = 3;
  std::vector<FastCorner> corners;
  ASSERT_TRUE(DetectFast(pyr, o, nullptr, &corners).ok());
  ASSERT_EQ(corners.size(), 4u);
  for (const FastCorner& c : corners) {
    // Within 2 px of a square corner (equal scores around it: the tie-break picks one).
    EXPECT_TRUE(std::abs(c.level_x - 20) <= 2 || std::abs(c.level_x - 43) <= 2) << c.level_x;
    EXPECT_TRUE(std::abs(c.level_y - 20) <= 2 || std::abs(c.level_y - 43) <= 2) << c.level_y;
  }
}

TEST(FastTest, OptionsAreChecked) {
  FastOptions o;
  EXPECT_TRUE(o.Check().ok());
  o.arc_length = 8;
  EXPECT_NE(o.Check().message().find("arc length"), std::string::npos);
  o = FastOptions();
  o.cell_width = 48;
  EXPECT_NE(o.Check().message().find("multiple of 32"), std::string::npos);
  o = FastOptions();
  o.threshold = 0;
  EXPECT_EQ(o.Check().code(), StatusCode::kInvalidOptions);
  FastScore s;
  EXPECT_TRUE(FastScoreFromString("shi-tomasi", &s).ok());
  EXPECT_EQ(s, FastScore::kShiTomasi);
  EXPECT_FALSE(FastScoreFromString("orb", &s).ok());
}

// ---- CUDA against the CPU reference -------------------------------------------------

void ExpectSameCorners(const std::vector<FastCorner>& a, const std::vector<FastCorner>& b,
                       const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].level, b[i].level) << what << " #" << i;
    ASSERT_EQ(a[i].level_x, b[i].level_x) << what << " #" << i;
    ASSERT_EQ(a[i].level_y, b[i].level_y) << what << " #" << i;
    ASSERT_EQ(a[i].score, b[i].score) << what << " #" << i;
  }
}

void CompareBackends(const ImageU8& img, const FrontEndOptions& options) {
  std::unique_ptr<FastLkFrontEnd> cpu, gpu;
  ASSERT_TRUE(FastLkFrontEnd::Create(options, Device::kCpu, &cpu).ok());
  const Status s = FastLkFrontEnd::Create(options, Device::kCuda, &gpu);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(cpu->SetFrame(0, img).ok());
  ASSERT_TRUE(gpu->SetFrame(0, img).ok());
  ImagePyramid pc, pg;
  ASSERT_TRUE(cpu->GetPyramid(0, &pc).ok());
  ASSERT_TRUE(gpu->GetPyramid(0, &pg).ok());
  ASSERT_EQ(pc.num_levels(), pg.num_levels());
  for (int l = 0; l < pc.num_levels(); ++l) ASSERT_EQ(pc.levels[l].data, pg.levels[l].data) << "level " << l;
  std::vector<std::vector<FastCorner>> rc, rg;
  ASSERT_TRUE(cpu->DetectRaw(0, &rc).ok());
  ASSERT_TRUE(gpu->DetectRaw(0, &rg).ok());
  ASSERT_EQ(rc.size(), rg.size());
  for (size_t l = 0; l < rc.size(); ++l) ExpectSameCorners(rc[l], rg[l], "raw level");
  std::vector<FastCorner> cc, cg;
  ASSERT_TRUE(cpu->Detect(0, nullptr, &cc).ok());
  ASSERT_TRUE(gpu->Detect(0, nullptr, &cg).ok());
  ExpectSameCorners(cc, cg, "suppressed");
  EXPECT_GT(cc.size(), 10u);
  if (options.fast.nms == FastNms::kGrid) {
    const int cells = FastGridColumns(img.width, options.fast.cell_width) *
                      FastGridRows(img.height, options.fast.cell_height);
    std::vector<uint8_t> blocked(cells, 0);
    for (int i = 1; i < cells; i += 2) blocked[i] = 1;
    ASSERT_TRUE(cpu->Detect(0, &blocked, &cc).ok());
    ASSERT_TRUE(gpu->Detect(0, &blocked, &cg).ok());
    ExpectSameCorners(cc, cg, "blocked");
  }
}

TEST(FastCudaTest, SameCornersAsCpuOnSyntheticImages) {
  TIEPOINT_REQUIRE_GPU();
  for (FastScore score : {FastScore::kMaxThreshold, FastScore::kSad, FastScore::kHarris,
                          FastScore::kShiTomasi}) {
    for (FastNms nms : {FastNms::kGrid, FastNms::kPlain}) {
      FrontEndOptions o;
      o.fast.score = score;
      o.fast.nms = nms;
      o.fast.threshold = 12;
      o.fast.arc_length = score == FastScore::kSad ? 12 : 9;
      o.fast.cell_width = 64;
      o.fast.cell_height = 48;
      o.fast.nms_radius = 2;
      SCOPED_TRACE(std::string(ToString(score)) + " " + ToString(nms));
      CompareBackends(TestImage(333, 251, 17), o);
    }
  }
}

// Cells larger than the fused kernel's 128x32 shared-memory sub-tile: several sub-tiles per
// cell and level, in both directions, and a partial one at the image's edge.
TEST(FastCudaTest, SameCornersAsCpuWithCellsLargerThanTheSubTile) {
  TIEPOINT_REQUIRE_GPU();
  for (const auto& [cw, ch] : {std::pair<int, int>{256, 33}, {160, 40}, {32, 1}}) {
    FrontEndOptions o;
    o.fast.threshold = 12;
    o.fast.cell_width = cw;
    o.fast.cell_height = ch;
    SCOPED_TRACE(std::to_string(cw) + "x" + std::to_string(ch));
    CompareBackends(TestImage(333, 251, 23), o);
  }
}

// Pyramids of every depth (levels made two per launch, then one where one remains; odd
// sizes, levels down to the smallest side) are the CPU's bit for bit.
TEST(FastCudaTest, SamePyramidAsCpuAtEveryDepth) {
  TIEPOINT_REQUIRE_GPU();
  for (const auto& [w, h] : {std::pair<int, int>{333, 251}, {752, 480}, {1241, 376}, {131, 67}, {67, 131}}) {
    for (int levels = 1; levels <= 8; ++levels) {
      FrontEndOptions o;
      o.fast.levels = 1;
      o.lk.levels = levels;
      std::unique_ptr<FastLkFrontEnd> cpu, gpu;
      ASSERT_TRUE(FastLkFrontEnd::Create(o, Device::kCpu, &cpu).ok());
      ASSERT_TRUE(FastLkFrontEnd::Create(o, Device::kCuda, &gpu).ok());
      const ImageU8 img = TestImage(w, h, 5 + levels);
      ASSERT_TRUE(cpu->SetFrame(0, img).ok());
      ASSERT_TRUE(gpu->SetFrame(0, img).ok());
      ImagePyramid pc, pg;
      ASSERT_TRUE(cpu->GetPyramid(0, &pc).ok());
      ASSERT_TRUE(gpu->GetPyramid(0, &pg).ok());
      ASSERT_EQ(pc.num_levels(), pg.num_levels()) << w << "x" << h << " levels " << levels;
      for (int l = 0; l < pc.num_levels(); ++l) {
        ASSERT_EQ(pc.levels[l].width, pg.levels[l].width);
        ASSERT_EQ(pc.levels[l].height, pg.levels[l].height);
        ASSERT_EQ(pc.levels[l].data, pg.levels[l].data)
            << w << "x" << h << " levels " << levels << ": level " << l;
      }
    }
  }
}

TEST(FastCudaTest, SameCornersAsCpuOnRealImages) {
  TIEPOINT_REQUIRE_GPU();
  TIEPOINT_REQUIRE_SHARED(boat, "features/oxford_boat/img1.pgm");
  TIEPOINT_REQUIRE_SHARED(kitti, "multiview/kitti_odometry_00_excerpt/sequences/00/image_0/000000.png");
  for (const std::string& path : {boat, kitti}) {
    GrayImage gray;
    ASSERT_TRUE(ReadImageGray(path, &gray).ok());
    FrontEndOptions o;
    o.fast.levels = 3;
    SCOPED_TRACE(path);
    CompareBackends(QuantizeImage(gray), o);
    o.fast.score = FastScore::kHarris;
    CompareBackends(QuantizeImage(gray), o);
  }
}

}  // namespace
}  // namespace tiepoint
