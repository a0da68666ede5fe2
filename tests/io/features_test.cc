#include "io/features.h"
#include "io/image.h"
#include "io/mask.h"
#include "io/matches.h"
#include "tests/common/scratch_dir.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

namespace tiepoint {
namespace {

namespace fs = std::filesystem;

using testing::ScratchDir;

Features RandomFeatures(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> pos(-0.5f, 4000.0f), scale(0.8f, 60.0f),
      angle(0.0f, 6.2831853f);
  Features f;
  for (size_t i = 0; i < n; ++i) {
    f.keypoints.push_back({pos(rng), pos(rng), scale(rng), angle(rng)});
  }
  for (size_t i = 0; i < n * kSiftDescriptorDim; ++i) f.descriptors.push_back(rng() & 0xff);
  return f;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteText(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

uint32_t FloatBits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

TEST(FeaturesTest, FileNamesFollowTheImageFileName) {
  EXPECT_EQ(FeaturesFileName("a.png"), "a.png.tpfeat");
  EXPECT_EQ(FeaturesFileStem("a.png.tpfeat"), "a.png");
  EXPECT_EQ(FeaturesFileStem(FeaturesFileName("x.tpfeat")), "x.tpfeat");
  EXPECT_EQ(FeaturesFileStem("a.png"), "a.png");      // not a features file name
  EXPECT_EQ(FeaturesFileStem(".tpfeat"), ".tpfeat");  // no stem
  EXPECT_EQ(MatchesFileName("a.png", "b.png"), "a.png--b.png.tpmatch");
  EXPECT_EQ(MatchesFileName("a.png", "b.png", ".svg"), "a.png--b.png.svg");
  // Images of subfolders, by their paths in the folder: one file per pair in one folder.
  EXPECT_EQ(MatchesFileName("cam0/1.png", "cam1/a/1.png"), "cam0%2F1.png--cam1%2Fa%2F1.png.tpmatch");
  EXPECT_EQ(MatchesFileNamePart("100%.png"), "100%.png");
}

TEST(FeaturesTest, BinaryRoundTripIsBitExact) {
  ScratchDir dir("roundtrip");
  for (size_t n : {0, 1, 1000}) {
    const Features f = RandomFeatures(n, 11 + static_cast<uint32_t>(n));
    const std::string path = dir.File("f" + std::to_string(n) + ".tpfeat");
    ASSERT_TRUE(WriteFeatures(path, f).ok());
    EXPECT_EQ(fs::file_size(path), 24 + n * (16 + kSiftDescriptorDim));
    Features back;
    const Status s = ReadFeatures(path, &back);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(back.keypoints.size(), n);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(FloatBits(back.keypoints[i].x), FloatBits(f.keypoints[i].x));
      EXPECT_EQ(FloatBits(back.keypoints[i].y), FloatBits(f.keypoints[i].y));
      EXPECT_EQ(FloatBits(back.keypoints[i].scale), FloatBits(f.keypoints[i].scale));
      EXPECT_EQ(FloatBits(back.keypoints[i].orientation), FloatBits(f.keypoints[i].orientation));
    }
    EXPECT_EQ(back.descriptors, f.descriptors);
  }
  // No temporaries left behind.
  for (const std::string& name : dir.List()) EXPECT_EQ(name.find(".tmp-"), std::string::npos);
}

TEST(FeaturesTest, LayoutIsLittleEndianAsDocumented) {
  ScratchDir dir("layout");
  Features f;
  f.keypoints.push_back({1.5f, -0.5f, 2.0f, 3.0f});
  f.descriptors.assign(kSiftDescriptorDim, 0);
  f.descriptors[0] = 7;
  f.descriptors[127] = 255;
  ASSERT_TRUE(WriteFeatures(dir.File("one.tpfeat"), f).ok());
  const std::string b = ReadText(dir.File("one.tpfeat"));
  ASSERT_EQ(b.size(), 24u + 16u + 128u);
  EXPECT_EQ(b.substr(0, 8), "TPFEAT01");
  EXPECT_EQ(std::string(b.data() + 8, 4), std::string("\x01\x00\x00\x00", 4));      // version
  EXPECT_EQ(std::string(b.data() + 12, 4), std::string("\x80\x00\x00\x00", 4));     // 128
  EXPECT_EQ(std::string(b.data() + 16, 8), std::string("\x01\0\0\0\0\0\0\0", 8));  // N
  EXPECT_EQ(std::string(b.data() + 24, 4), std::string("\x00\x00\xc0\x3f", 4));     // 1.5f
  EXPECT_EQ(static_cast<unsigned char>(b[40]), 7);
  EXPECT_EQ(static_cast<unsigned char>(b[167]), 255);
}

TEST(FeaturesTest, ReaderRejectsBadFilesNamingThem) {
  ScratchDir dir("bad");
  const std::string good_path = dir.File("good.tpfeat");
  ASSERT_TRUE(WriteFeatures(good_path, RandomFeatures(3, 5)).ok());
  const std::string good = ReadText(good_path);

  auto with = [&](size_t offset, const std::string& bytes) {
    std::string b = good;
    b.replace(offset, bytes.size(), bytes);
    return b;
  };
  struct Case {
    std::string name, bytes, fragment;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::string nan_bytes(4, '\0');
  std::memcpy(&nan_bytes[0], &nan, 4);
  const std::vector<Case> cases = {
      {"empty", "", "truncated feature file: 0 bytes"},
      {"short_header", good.substr(0, 20), "truncated feature file: 20 bytes"},
      {"magic", with(0, "TPFEAT02"), "no TPFEAT01 magic"},
      {"text", "hello, this is not a feature file at all", "no TPFEAT01 magic"},
      {"version", with(8, std::string("\x02\0\0\0", 4)), "version 2 is not supported"},
      {"dimension", with(12, std::string("\x40\0\0\0", 4)), "descriptor dimension 64"},
      {"truncated", good.substr(0, good.size() - 1), "truncated feature file"},
      {"trailing", good + "x", "trailing bytes"},
      {"absurd_count", with(16, std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8)),
       "truncated feature file: the header says 9223372036854775807 keypoints"},
      {"nan_x", with(24 + 16, nan_bytes), "keypoint 1 has a non-finite coordinate"},
      {"zero_scale", with(24 + 32 + 8, std::string(4, '\0')), "keypoint 2"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.File(c.name + ".tpfeat");
    WriteText(path, c.bytes);
    Features f = RandomFeatures(2, 1);
    const Features before = f;
    const Status s = ReadFeatures(path, &f);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
    EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(c.fragment), std::string::npos) << s.message();
    EXPECT_EQ(f.descriptors, before.descriptors) << "output must be untouched on failure";
  }
  Features f;
  const Status s = ReadFeatures(dir.File("missing.tpfeat"), &f);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("missing.tpfeat"), std::string::npos);
}

TEST(FeaturesTest, WritersRefuseInconsistentFeaturesAndBadPaths) {
  ScratchDir dir("inconsistent");
  Features f = RandomFeatures(2, 3);
  f.descriptors.pop_back();
  EXPECT_EQ(WriteFeatures(dir.File("x.tpfeat"), f).code(), StatusCode::kInvalidInput);
  EXPECT_EQ(WriteFeaturesText(dir.File("x.txt"), f).code(), StatusCode::kInvalidInput);
  EXPECT_TRUE(dir.List().empty());
  const Status s = WriteFeatures(dir.File("no/such/dir/x.tpfeat"), RandomFeatures(1, 1));
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("no/such/dir/x.tpfeat"), std::string::npos);
}

TEST(FeaturesTest, TextFormat) {
  ScratchDir dir("text");
  const Features f = RandomFeatures(4, 9);
  ASSERT_TRUE(WriteFeaturesText(dir.File("f.txt"), f).ok());
  std::istringstream in(ReadText(dir.File("f.txt")));
  size_t n = 0;
  int dim = 0;
  in >> n >> dim;
  ASSERT_EQ(n, 4u);
  ASSERT_EQ(dim, 128);
  for (size_t i = 0; i < n; ++i) {
    float x, y, s, o;
    in >> x >> y >> s >> o;
    EXPECT_EQ(FloatBits(x), FloatBits(f.keypoints[i].x)) << "floats must round-trip";
    EXPECT_EQ(FloatBits(y), FloatBits(f.keypoints[i].y));
    EXPECT_EQ(FloatBits(s), FloatBits(f.keypoints[i].scale));
    EXPECT_EQ(FloatBits(o), FloatBits(f.keypoints[i].orientation));
    for (int j = 0; j < dim; ++j) {
      int d = -1;
      in >> d;
      ASSERT_EQ(d, f.descriptors[i * 128 + j]);
    }
  }
  std::string rest;
  in >> rest;
  EXPECT_TRUE(rest.empty()) << "unexpected trailing text '" << rest << "'";
}

// COLMAP's mask_path: MASK_DIR/NAME.png; a feature rounding to a black pixel is dropped
// with its descriptor, the others keep their order.
TEST(FeatureMaskTest, BlackPixelsDropTheirFeatures) {
  ScratchDir dir("mask");
  EXPECT_EQ(FeatureMaskPath(dir.path(), "cam0/a.png"), dir.path() + "/cam0/a.png.png");
  GrayImage m;
  m.width = 8;
  m.height = 4;
  m.pixels.assign(32, 1.0f);
  m.at(2, 1) = 0.0f;  // black: masked
  m.at(5, 3) = 0.2f;  // grey: kept
  m.at(6, 0) = 1.0f / 1024;  // 0 in 8 bits, as COLMAP reads masks: masked
  const std::string path = dir.File("a.png.pgm");
  ASSERT_TRUE(WritePgm(path, m, 65535).ok());  // 16 bits: 1/1024 is 64, not 0
  FeatureMask mask;
  ASSERT_TRUE(ReadFeatureMask(path, 8, 4, &mask).ok());
  Features f;
  // (2.4, 0.6) rounds to (2, 1): masked; (1.6, 1.0) to (2, 1) too; (2.6, 1.0) to (3, 1);
  // (5.0, 3.0) grey, kept; (7.6, 0) outside; (-0.4, 0) rounds to 0, kept; (7.5, 3.5), on the
  // image's corner, to the last pixel, kept; (6, 0) on the pixel 0 in 8 bits, masked.
  for (const auto& [x, y] : std::vector<std::pair<float, float>>{
           {2.4f, 0.6f}, {1.6f, 1.0f}, {2.6f, 1.0f}, {5.0f, 3.0f}, {7.6f, 0.0f}, {-0.4f, 0.0f}, {7.5f, 3.5f}, {6.0f, 0.0f}}) {
    Keypoint k;
    k.x = x;
    k.y = y;
    f.keypoints.push_back(k);
    f.descriptors.insert(f.descriptors.end(), kSiftDescriptorDim, static_cast<uint8_t>(f.keypoints.size()));
  }
  EXPECT_EQ(ApplyFeatureMask(mask, &f), 4u);
  ASSERT_EQ(f.size(), 4u);
  ASSERT_TRUE(f.CheckConsistent().ok());
  EXPECT_FLOAT_EQ(f.keypoints[0].x, 2.6f);
  EXPECT_FLOAT_EQ(f.keypoints[1].x, 5.0f);
  EXPECT_FLOAT_EQ(f.keypoints[2].x, -0.4f);
  EXPECT_EQ(f.descriptor(0)[0], 3);
  EXPECT_EQ(f.descriptor(1)[127], 4);
  EXPECT_EQ(f.descriptor(2)[5], 6);
  EXPECT_FLOAT_EQ(f.keypoints[3].x, 7.5f);
  // An empty mask drops nothing.
  EXPECT_EQ(ApplyFeatureMask(FeatureMask(), &f), 0u);
  // A mask of another size, or not an image, is named.
  Status s = ReadFeatureMask(path, 8, 5, &mask);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find("a.png.pgm: mask of 8 x 4 pixels for an image of 8 x 5"), std::string::npos) << s.message();
  {
    std::ofstream junk(dir.File("junk.png"));
    junk << "not an image";
  }
  s = ReadFeatureMask(dir.File("junk.png"), 8, 4, &mask);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("junk.png"), std::string::npos) << s.message();
  // One mask for every image (--camera-mask): read at its own size, checked per image.
  ASSERT_TRUE(ReadFeatureMask(path, &mask).ok());
  EXPECT_EQ(mask.width, 8);
  EXPECT_EQ(mask.height, 4);
  EXPECT_TRUE(FeatureMaskFits(mask, path, 8, 4).ok());
  s = FeatureMaskFits(mask, path, 4, 8, "b.png");
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find("a.png.pgm: mask of 8 x 4 pixels for an image of 4 x 8 (b.png)"), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace tiepoint
