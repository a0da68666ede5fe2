#include "io/bal.h"
#include "tests/common/scratch_dir.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

namespace tiepoint {
namespace {

namespace fs = std::filesystem;

uint64_t Bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof(b));
  return b;
}

std::string SharedDataDir() {
  const char* env = std::getenv("TIEPOINT_SHARED_DATA");
  if (env != nullptr && env[0] != '\0') return env;
  return TIEPOINT_DEFAULT_SHARED_DATA;
}

std::string MalformedDir() { return std::string(TIEPOINT_TEST_DATA_DIR) + "/malformed"; }

using testing::ScratchDir;

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void ExpectBitwiseEqual(const Scene& a, const Scene& b) {
  ASSERT_EQ(a.num_cameras(), b.num_cameras());
  ASSERT_EQ(a.num_points(), b.num_points());
  ASSERT_EQ(a.num_observations(), b.num_observations());
  ASSERT_EQ(a.cameras.size(), b.cameras.size());
  ASSERT_EQ(a.points.size(), b.points.size());
  ASSERT_EQ(a.obs_xy.size(), b.obs_xy.size());
  EXPECT_EQ(a.obs_camera, b.obs_camera);
  EXPECT_EQ(a.obs_point, b.obs_point);
  for (size_t i = 0; i < a.cameras.size(); ++i) {
    ASSERT_EQ(Bits(a.cameras[i]), Bits(b.cameras[i])) << "camera value " << i << ": "
                                                      << a.cameras[i] << " vs " << b.cameras[i];
  }
  for (size_t i = 0; i < a.points.size(); ++i) {
    ASSERT_EQ(Bits(a.points[i]), Bits(b.points[i])) << "point value " << i;
  }
  for (size_t i = 0; i < a.obs_xy.size(); ++i) {
    ASSERT_EQ(Bits(a.obs_xy[i]), Bits(b.obs_xy[i])) << "observation value " << i;
  }
}

// A random scene whose doubles cover awkward cases: subnormals, extremes, negative zero,
// values with 17 significant digits.
Scene RandomScene(int num_cameras, int num_points, int obs_per_point, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::uniform_int_distribution<int> exp_dist(-300, 300);
  auto value = [&]() {
    return std::ldexp(uni(rng), exp_dist(rng) / 10);  // mostly moderate magnitudes
  };
  Scene s;
  for (int i = 0; i < num_cameras * kCameraParams; ++i) s.cameras.push_back(value());
  for (int j = 0; j < num_points * kPointParams; ++j) s.points.push_back(value() * 100.0);
  for (int j = 0; j < num_points; ++j) {
    for (int k = 0; k < obs_per_point; ++k) {
      s.obs_camera.push_back(static_cast<int32_t>((j + k * 7) % num_cameras));
      s.obs_point.push_back(j);
      s.obs_xy.push_back(uni(rng) * 1000.0);
      s.obs_xy.push_back(uni(rng) * 1000.0);
    }
  }
  const double specials[] = {0.0,
                             -0.0,
                             std::numeric_limits<double>::denorm_min(),
                             -std::numeric_limits<double>::denorm_min(),
                             std::numeric_limits<double>::min(),
                             std::numeric_limits<double>::max(),
                             -std::numeric_limits<double>::max(),
                             std::numeric_limits<double>::epsilon(),
                             1e-310,
                             0.1,
                             1.0 / 3.0,
                             123456789012345678.0,
                             -7.5572758535864072e-08};
  size_t k = 0;
  for (double v : specials) {
    if (k < s.cameras.size()) s.cameras[k] = v;
    if (k < s.points.size()) s.points[k] = v;
    if (k < s.obs_xy.size()) s.obs_xy[k] = v;
    ++k;
  }
  return s;
}

// ---------------------------------------------------------------------------------------

TEST(BalRead, ParsesSmallStreamWithBlankLines) {
  // Blank lines between sections (like GTSAM's test files), CRLF line ends, tabs,
  // a '+' sign and an exponent.
  const std::string text =
      "2 3 4\r\n"
      "\n"
      "0 0     -3.859900e+02 3.871200e+02\r\n"
      "1 0\t-38.44 492.12\n"
      "1 2 +5.5 -0\n"
      "0 1 1e-3 -2E2\n"
      "\n"
      "0.1\n0.2\n0.3\n0.4\n0.5\n0.6\n1000\n-1e-07\n2e-13\n"
      "\n"
      "-0.1\n-0.2\n-0.3\n-0.4\n-0.5\n-0.6\n900.5\n0\n0\n"
      "\n"
      "1 2 3\n"
      "4 5 6\n"
      "-7.25 8.5 -9e10\n"
      "\n";
  std::istringstream in(text);
  Scene scene;
  Status s = ReadBal(in, "small", &scene);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(scene.num_cameras(), 2);
  ASSERT_EQ(scene.num_points(), 3);
  ASSERT_EQ(scene.num_observations(), 4);
  EXPECT_EQ(scene.obs_camera, (std::vector<int32_t>{0, 1, 1, 0}));
  EXPECT_EQ(scene.obs_point, (std::vector<int32_t>{0, 0, 2, 1}));
  EXPECT_EQ(scene.obs_xy, (std::vector<double>{-385.99, 387.12, -38.44, 492.12, 5.5, -0.0,
                                               1e-3, -200.0}));
  EXPECT_TRUE(std::signbit(scene.obs_xy[5]));
  EXPECT_EQ(scene.cameras, (std::vector<double>{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 1000, -1e-07,
                                                2e-13, -0.1, -0.2, -0.3, -0.4, -0.5, -0.6,
                                                900.5, 0, 0}));
  EXPECT_EQ(scene.points, (std::vector<double>{1, 2, 3, 4, 5, 6, -7.25, 8.5, -9e10}));
  EXPECT_EQ(scene.camera(1)[6], 900.5);
  EXPECT_EQ(scene.point(2)[2], -9e10);
}

TEST(BalRead, EmptySceneAndCameraWithoutObservations) {
  {
    std::istringstream in("0 0 0\n");
    Scene scene;
    Status s = ReadBal(in, "zero", &scene);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(scene.num_cameras(), 0);
  }
  {
    // Camera 1 has no observations: degenerate but legal.
    Scene scene;
    std::string text = "2 1 1\n0 0 1 2\n";
    for (int i = 0; i < 18; ++i) text += "0.5\n";
    text += "1 2 3\n";
    std::istringstream in2(text);
    Status s = ReadBal(in2, "lonely", &scene);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(scene.num_cameras(), 2);
    EXPECT_EQ(scene.num_observations(), 1);
  }
}

TEST(BalRead, FailedReadLeavesSceneUntouched) {
  Scene scene;
  scene.points = {1, 2, 3};
  std::istringstream in("1 1 1\n0 0 1 nan\n");
  Status s = ReadBal(in, "bad", &scene);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(scene.points, (std::vector<double>{1, 2, 3}));
}

TEST(BalRead, MissingFileIsIoErrorNamingPathAndReason) {
  Scene scene;
  const std::string path = "/nonexistent-dir/problem.txt";
  Status s = ReadBal(path, &scene);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("No such file or directory"), std::string::npos) << s.message();
  s = ReadBal(path + ".bz2", &scene);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
}

TEST(BalRead, DirectoryIsIoError) {
  Scene scene;
  const ScratchDir scratch("dir_read");
  const std::string& dir = scratch.path();
  Status s = ReadBal(dir, &scene);
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
  EXPECT_NE(s.message().find(dir), std::string::npos) << s.message();
}

// Line numbers stay right across the reader's internal chunk boundaries (1 MiB), and
// tokens that straddle a boundary parse correctly (the round trip below covers values).
TEST(BalRead, LineNumbersAcrossChunks) {
  const Scene scene = RandomScene(50, 40000, 3, 11);
  std::ostringstream out;
  ASSERT_TRUE(WriteBal(out, scene).ok());
  std::string text = out.str();
  ASSERT_GT(text.size(), size_t{3} << 20);
  // Replace the y coordinate on line 100001 (observation 100000) by "inf".
  size_t pos = 0;
  for (int line = 1; line < 100001; ++line) pos = text.find('\n', pos) + 1;
  const size_t eol = text.find('\n', pos);
  const size_t last_space = text.rfind(' ', eol);
  text.replace(last_space + 1, eol - last_space - 1, "inf");
  std::istringstream in(text);
  Scene back;
  Status s = ReadBal(in, "big", &back);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find("big:100001: expected finite number for y of observation 100000 "
                             "of 120000, found 'inf'"),
            std::string::npos)
      << s.message();
}

// The reader works in 1 MiB chunks; the last token ending right at, just before or just
// after a chunk boundary, with and without a final newline, must read the same.
TEST(BalRead, LastTokenAtChunkBoundary) {
  const Scene scene = RandomScene(10, 6000, 2, 12);  // just under 1 MiB of text
  std::ostringstream out;
  ASSERT_TRUE(WriteBal(out, scene).ok());
  std::string text = out.str();
  ASSERT_EQ(text.back(), '\n');
  text.pop_back();
  const size_t last_line = text.rfind('\n') + 1;
  constexpr size_t kChunk = size_t{1} << 20;
  ASSERT_LT(text.size() + 2, kChunk);
  for (size_t total : {kChunk - 1, kChunk, kChunk + 1, 2 * kChunk}) {
    for (bool final_newline : {false, true}) {
      SCOPED_TRACE("size " + std::to_string(total) + (final_newline ? " +newline" : ""));
      std::string padded = text;
      const size_t want = total - (final_newline ? 1 : 0);
      padded.insert(last_line, want - text.size(), ' ');
      if (final_newline) padded += '\n';
      ASSERT_EQ(padded.size(), total);
      std::istringstream in(padded);
      Scene back;
      Status s = ReadBal(in, "boundary", &back);
      ASSERT_TRUE(s.ok()) << s.ToString();
      ExpectBitwiseEqual(scene, back);
      // And one stray byte at the very end is trailing garbage on the right line.
      std::istringstream in2(padded + (final_newline ? "x" : " x"));
      s = ReadBal(in2, "boundary", &back);
      const std::string line =
          std::to_string(1 + std::count(padded.begin(), padded.end(), '\n'));
      EXPECT_NE(s.message().find("boundary:" + line + ": expected end of file"),
                std::string::npos)
          << s.message();
    }
  }
}

// ---------------------------------------------------------------------------------------

TEST(BalRoundTrip, StreamIsBitExact) {
  const Scene scene = RandomScene(20, 30000, 3, 1);  // > 1 MiB of text: straddles chunks
  std::ostringstream out;
  Status s = WriteBal(out, scene);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::istringstream in(out.str());
  Scene back;
  s = ReadBal(in, "roundtrip", &back);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectBitwiseEqual(scene, back);
}

TEST(BalRoundTrip, TextAndBz2FilesAreBitExact) {
  const ScratchDir scratch("roundtrip");
  const std::string& dir = scratch.path();
  const Scene scene = RandomScene(7, 5000, 4, 2);
  for (const char* name : {"scene.txt", "scene.txt.bz2"}) {
    const std::string path = dir + "/" + name;
    Status s = WriteBal(path, scene);
    ASSERT_TRUE(s.ok()) << s.ToString();
    Scene back;
    s = ReadBal(path, &back);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ExpectBitwiseEqual(scene, back);
  }
  // The .bz2 really is compressed, and no temporaries are left.
  std::ifstream bz(dir + "/scene.txt.bz2", std::ios::binary);
  char magic[3] = {};
  bz.read(magic, 3);
  EXPECT_EQ(std::string(magic, 3), "BZh");
  EXPECT_LT(fs::file_size(dir + "/scene.txt.bz2"), fs::file_size(dir + "/scene.txt"));
  EXPECT_EQ(ListDir(dir), (std::vector<std::string>{"scene.txt", "scene.txt.bz2"}));
}

TEST(BalRoundTrip, WriterLayoutMatchesBal) {
  Scene scene;
  scene.cameras.assign(9, 0.5);
  scene.cameras[6] = 1430.0319432711681;
  scene.points = {1, -2.5, 3};
  scene.obs_camera = {0};
  scene.obs_point = {0};
  scene.obs_xy = {-385.99, 0.1};
  std::ostringstream out;
  ASSERT_TRUE(WriteBal(out, scene).ok());
  EXPECT_EQ(out.str(),
            "1 1 1\n"
            "0 0 -385.99 0.1\n"
            "0.5\n0.5\n0.5\n0.5\n0.5\n0.5\n1430.031943271168\n0.5\n0.5\n"
            "1\n-2.5\n3\n");
}

// Concatenated bzip2 streams (pbzip2, `cat a.bz2 b.bz2`) decode as one: proven here by the
// second stream's content showing up as trailing data at the right line.
TEST(BalRead, ConcatenatedBz2StreamsAreDecoded) {
  const ScratchDir scratch("concat");
  const std::string& dir = scratch.path();
  Scene a;
  a.cameras.assign(9, 0.25);
  a.points = {1, 2, 3};
  a.obs_camera = {0};
  a.obs_point = {0};
  a.obs_xy = {1, 2};
  Scene b;  // "0 0 0\n"
  ASSERT_TRUE(WriteBal(dir + "/a.bz2", a).ok());
  ASSERT_TRUE(WriteBal(dir + "/b.bz2", b).ok());
  const std::string both = dir + "/both.bz2";
  {
    std::ofstream out(both, std::ios::binary);
    for (const char* part : {"/a.bz2", "/b.bz2"}) {
      std::ifstream in(dir + part, std::ios::binary);
      out << in.rdbuf();
    }
  }
  Scene back;
  Status s = ReadBal(both, &back);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  // a has 1 + 1 + 9 + 3 = 14 lines; b's header "0 0 0" is line 15.
  EXPECT_NE(s.message().find(both + ":15: expected end of file after 3*1=3 point "
                                    "coordinates, found '0'"),
            std::string::npos)
      << s.message();
  // And b alone is a valid (empty) problem.
  s = ReadBal(dir + "/b.bz2", &back);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

// ---------------------------------------------------------------------------------------

TEST(BalWrite, UnwritablePathFailsAndLeavesNothing) {
  const Scene scene = RandomScene(2, 10, 2, 3);
  for (const char* path : {"/nonexistent-dir/x.bal", "/nonexistent-dir/x.bal.bz2"}) {
    Status s = WriteBal(path, scene);
    EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
    EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
    EXPECT_FALSE(fs::exists(path));
  }
}

TEST(BalWrite, FailedWritesLeaveNoTemporaries) {
  const ScratchDir scratch("failed_write");
  const std::string& dir = scratch.path();
  const Scene good = RandomScene(2, 10, 2, 4);

  // Renaming onto an existing directory fails after the temporary was fully written.
  fs::create_directory(dir + "/taken");
  Status s = WriteBal(dir + "/taken", good);
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
  s = WriteBal(dir + "/taken.bz2", good);  // a plain file: works
  EXPECT_TRUE(s.ok()) << s.ToString();
  fs::remove(dir + "/taken.bz2");

  // Scenes the reader would reject are refused before any file is created.
  Scene nan_scene = good;
  nan_scene.points[4] = std::nan("");
  s = WriteBal(dir + "/nan.txt", nan_scene);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find("point 1 coordinate Y is not finite"), std::string::npos)
      << s.message();
  Scene bad_index = good;
  bad_index.obs_point[0] = 10;
  s = WriteBal(dir + "/bad_index.txt.bz2", bad_index);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find("refers to point 10"), std::string::npos) << s.message();
  Scene ragged = good;
  ragged.obs_xy.pop_back();
  s = WriteBal(dir + "/ragged.txt", ragged);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);

  EXPECT_EQ(ListDir(dir), (std::vector<std::string>{"taken"}));
  EXPECT_TRUE(fs::is_empty(dir + "/taken"));
}

TEST(BalWrite, WritesOverExistingFile) {
  const ScratchDir scratch("overwrite");
  const std::string& dir = scratch.path();
  const std::string path = dir + "/p.txt";
  { std::ofstream(path) << "old"; }
  const Scene scene = RandomScene(2, 5, 1, 5);
  ASSERT_TRUE(WriteBal(path, scene).ok());
  Scene back;
  ASSERT_TRUE(ReadBal(path, &back).ok());
  ExpectBitwiseEqual(scene, back);
  EXPECT_EQ(ListDir(dir), (std::vector<std::string>{"p.txt"}));
}

// ---------------------------------------------------------------------------------------
// Real BAL files.

struct RealFile {
  const char* path;  // relative to the shared data directory
  int cameras;
  int points;
  int64_t observations;
};

TEST(BalRead, RealFiles) {
  const std::string root = SharedDataDir();
  if (!fs::exists(root + "/bal")) {
    GTEST_SKIP() << "shared BAL data not found under " << root
                 << " (set TIEPOINT_SHARED_DATA to the directory holding bal/)";
  }
  const RealFile files[] = {
      {"bal/problem-49-7776-pre.txt", 49, 7776, 31843},
      {"bal/problem-21-11315-pre.txt", 21, 11315, 36455},
      {"bal/problem-16-22106-pre.txt.bz2", 16, 22106, 83718},
      {"bal/tiny_gtsam/dubrovnik-3-7-pre.txt", 3, 7, 19},
      {"bal/tiny_gtsam/dubrovnik-1-1-pre.txt", 1, 1, 1},
  };
  for (const RealFile& f : files) {
    SCOPED_TRACE(f.path);
    const std::string path = root + "/" + f.path;
    if (!fs::exists(path)) {
      ADD_FAILURE() << "missing shared file " << path;
      continue;
    }
    Scene scene;
    Status s = ReadBal(path, &scene);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(scene.num_cameras(), f.cameras);
    EXPECT_EQ(scene.num_points(), f.points);
    EXPECT_EQ(scene.num_observations(), f.observations);
    EXPECT_EQ(scene.obs_xy.size(), static_cast<size_t>(2 * f.observations));
  }

  // Spot values from the files.
  Scene scene;
  ASSERT_TRUE(ReadBal(root + "/bal/problem-49-7776-pre.txt", &scene).ok());
  EXPECT_EQ(scene.obs_camera[0], 0);
  EXPECT_EQ(scene.obs_point[0], 0);
  EXPECT_EQ(scene.obs_xy[0], -3.326500e+02);
  EXPECT_EQ(scene.obs_xy[1], 2.620900e+02);
  EXPECT_EQ(scene.points.back(), -4.8131692986768098e+00);
  ASSERT_TRUE(ReadBal(root + "/bal/tiny_gtsam/dubrovnik-1-1-pre.txt", &scene).ok());
  EXPECT_EQ(scene.obs_xy, (std::vector<double>{-3.859900e+02, 3.871200e+02}));
  EXPECT_EQ(scene.cameras[0], -1.6943983532198115e-02);
  EXPECT_EQ(scene.cameras[8], 3.2377569465570913e-14);
  EXPECT_EQ(scene.points, (std::vector<double>{-1.2055995050700867e+01, 1.2838775976205760e+01,
                                               -4.1099369264082803e+01}));

  // A real file survives write -> read bit-exactly, also through bzip2.
  ASSERT_TRUE(ReadBal(root + "/bal/problem-16-22106-pre.txt.bz2", &scene).ok());
  const ScratchDir scratch("real");
  const std::string& dir = scratch.path();
  ASSERT_TRUE(WriteBal(dir + "/p16.txt.bz2", scene).ok());
  Scene back;
  ASSERT_TRUE(ReadBal(dir + "/p16.txt.bz2", &back).ok());
  ExpectBitwiseEqual(scene, back);
}

// ---------------------------------------------------------------------------------------
// The malformed corpus: every file fails with a message naming the file and line.

struct Expected {
  StatusCode code;
  int line;  // 0: no line applies (decompression errors)
  const char* fragment;
};

const std::map<std::string, Expected>& MalformedTable() {
  static const auto* table = new std::map<std::string, Expected>{
      {"empty.txt",
       {StatusCode::kInvalidInput, 1,
        "expected header '<num_cameras> <num_points> <num_observations>', found an empty "
        "file"}},
      {"header_not_numbers.txt",
       {StatusCode::kInvalidInput, 1,
        "expected integer number of cameras in header, found 'two'"}},
      {"header_too_few.txt",
       {StatusCode::kInvalidInput, 1,
        "expected header '<num_cameras> <num_points> <num_observations>' on one line, found "
        "only 2 numbers"}},
      {"header_negative.txt",
       {StatusCode::kInvalidInput, 1,
        "expected non-negative number of points in header, found '-3'"}},
      {"header_absurd.txt",
       {StatusCode::kInvalidInput, 1,
        "expected at most 10000000 cameras in header (is the header corrupt?), found "
        "'100000000'"}},
      {"header_obs_exceed_pairs.txt",
       {StatusCode::kInvalidInput, 1,
        "expected at most 2*3=6 observations in header (one per camera and point), found "
        "'7'"}},
      {"count_mismatch_obs.txt",
       {StatusCode::kInvalidInput, 7,
        "expected integer camera index for observation 6 of 6, found '-0.016943983532198115' "
        "(the header says 6 observations; does the file list fewer?)"}},
      {"camera_index_out_of_range.txt",
       {StatusCode::kInvalidInput, 4,
        "expected camera index in [0, 2) for observation 3 of 5, found '2'"}},
      {"camera_index_out_of_range.bz2",
       {StatusCode::kInvalidInput, 4,
        "expected camera index in [0, 2) for observation 3 of 5, found '2'"}},
      {"camera_index_negative.txt",
       {StatusCode::kInvalidInput, 3,
        "expected camera index in [0, 2) for observation 2 of 5, found '-1'"}},
      {"point_index_out_of_range.txt",
       {StatusCode::kInvalidInput, 6,
        "expected point index in [0, 3) for observation 5 of 5, found '3'"}},
      {"index_not_integer.txt",
       {StatusCode::kInvalidInput, 5,
        "expected integer point index for observation 4 of 5, found '1.5'"}},
      {"nan_observation.txt",
       {StatusCode::kInvalidInput, 4,
        "expected finite number for x of observation 3 of 5, found 'nan'"}},
      {"inf_camera.txt",
       {StatusCode::kInvalidInput, 19,
        "expected finite number for camera 1 parameter 4 of 9 (translation t0), found "
        "'inf'"}},
      {"nan_point.txt",
       {StatusCode::kInvalidInput, 29,
        "expected finite number for point 1 coordinate Y, found 'NaN'"}},
      {"value_out_of_range.txt",
       {StatusCode::kInvalidInput, 25,
        "expected finite number for point 0 coordinate X, found '1e400' (out of double "
        "range)"}},
      {"non_numeric_value.txt",
       {StatusCode::kInvalidInput, 8,
        "expected number for camera 0 parameter 2 of 9 (rotation r1), found '0.01117x'"}},
      {"observation_split_line.txt",
       {StatusCode::kInvalidInput, 4,
        "expected 4 values '<camera> <point> <x> <y>' on one line for observation 3 of 5, "
        "found 3"}},
      {"truncated_observations.txt",
       {StatusCode::kInvalidInput, 4,
        "expected 5 observations, file ends after 2 (observation 3 of 5 is incomplete)"}},
      {"truncated_cameras.txt",
       {StatusCode::kInvalidInput, 18, "expected 9*2=18 camera parameters, file ends after 12"}},
      {"truncated_points.txt",
       {StatusCode::kInvalidInput, 28, "expected 3*3=9 point coordinates, file ends after 4"}},
      {"trailing_garbage.txt",
       {StatusCode::kInvalidInput, 34,
        "expected end of file after 3*3=9 point coordinates, found 'garbage'"}},
      {"truncated.bz2",
       {StatusCode::kInvalidInput, 0, "bzip2 data ends unexpectedly (the file is truncated)"}},
      {"corrupt.bz2",
       {StatusCode::kInvalidInput, 0, "corrupt bzip2 data (checksum or format error)"}},
      {"not_bzip2.bz2", {StatusCode::kInvalidInput, 0, "not a bzip2 file (bad magic bytes)"}},
  };
  return *table;
}

TEST(BalMalformed, EveryCorpusFileFailsWithAClearMessage) {
  const std::string dir = MalformedDir();
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  const auto& table = MalformedTable();
  int checked = 0;
  for (const std::string& name : ListDir(dir)) {
    if (name == "README.md") continue;
    SCOPED_TRACE(name);
    const auto it = table.find(name);
    if (it == table.end()) {
      ADD_FAILURE() << "corpus file " << name << " has no row in MalformedTable()";
      continue;
    }
    const Expected& want = it->second;
    const std::string path = dir + "/" + name;
    Scene scene;
    const Status s = ReadBal(path, &scene);
    ASSERT_FALSE(s.ok()) << "ReadBal accepted " << path;
    EXPECT_EQ(s.code(), want.code) << s.ToString();
    // The message starts with the path, then ":<line>: " where a line applies.
    const std::string prefix =
        want.line > 0 ? path + ":" + std::to_string(want.line) + ": " : path + ": ";
    EXPECT_EQ(s.message().rfind(prefix, 0), 0u)
        << "message should start with '" << prefix << "': " << s.message();
    EXPECT_NE(s.message().find(want.fragment), std::string::npos)
        << "message lacks '" << want.fragment << "': " << s.message();
    EXPECT_EQ(scene.num_observations(), 0);  // untouched on failure
    ++checked;
  }
  for (const auto& [name, want] : table) {
    EXPECT_TRUE(fs::exists(dir + "/" + name)) << "table row without corpus file: " << name;
  }
  EXPECT_EQ(checked, static_cast<int>(table.size()));
}

// The same defects through the stream reader name the stream.
TEST(BalMalformed, StreamFormNamesTheStream) {
  std::ifstream in(MalformedDir() + "/nan_point.txt");
  ASSERT_TRUE(in) << "missing corpus file";
  Scene scene;
  const Status s = ReadBal(in, "from-stdin", &scene);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_EQ(s.message().rfind("from-stdin:29: expected finite number", 0), 0u) << s.message();
}

TEST(BalMalformed, MoreCases) {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"   \n\n", "t:1: expected header '<num_cameras> <num_points> <num_observations>', found "
                  "an empty file"},
      {"1 1", "t:1: expected header '<num_cameras> <num_points> <num_observations>', file ends "
              "after 2 numbers"},
      {"1 1 1.0\n", "t:1: expected integer number of observations in header, found '1.0'"},
      {"1 1 99999999999999999999999\n",
       "t:1: expected integer number of observations in header, found "
       "'99999999999999999999999'"},
      {"1 1 1\n0 0 1 -inf\n", "t:2: expected finite number for y of observation 1 of 1, "
                              "found '-inf'"},
      {"1 1 1\n0 0 1 infinity\n", "found 'infinity'"},
      {"1 1 1\n0 0 nan(0x1) 2\n", "expected finite number for x"},
      {"1 1 1\n0 0 0x10 2\n", "t:2: expected number for x of observation 1 of 1, found '0x10'"},
      {"1 1 1\n0 1e0 1 2\n", "t:2: expected integer point index"},
      {"1 1 1\n0 0 1 2\n1 2 3\n", "t:3: expected 9*1=9 camera parameters, file ends after 3"},
      {"1 1 1\n0 0 1 2\n\x01\x02\n",
       "t:3: expected number for camera 0 parameter 1 of 9 (rotation r0), found '\\x01\\x02'"},
      {"1 2 3\n", "t:1: expected at most 1*2=2 observations in header"},
      {"1 1000000001 1\n", "t:1: expected at most 1000000000 points in header"},
      {"1 1 2147483648\n", "t:1: expected at most 2147483647 observations in header"},
      {"BZh91AY&SY\n", "t:1: expected integer number of cameras in header, found 'BZh91AY&SY' "
                       "(the file looks bzip2-compressed; name it *.bz2)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    std::istringstream in(c.text);
    Scene scene;
    const Status s = ReadBal(in, "t", &scene);
    EXPECT_EQ(s.code(), StatusCode::kInvalidInput) << s.ToString();
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s.message();
  }
}

// A header that lies about huge sizes fails at truncation without allocating for them.
TEST(BalMalformed, LyingHeaderFailsAtTruncationNotAllocation) {
  std::istringstream in("10000000 1000000000 2147483647\n0 0 1 2\n");
  Scene scene;
  const Status s = ReadBal(in, "liar", &scene);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find("liar:2: expected 2147483647 observations, file ends after 1"),
            std::string::npos)
      << s.message();
}

TEST(BalMalformed, OverlongTokenIsRejected) {
  std::string text = "1 1 1\n0 0 1 ";
  text += std::string(3u << 20, '7');
  std::istringstream in(text);
  Scene scene;
  const Status s = ReadBal(in, "long", &scene);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find("long:2: expected a value, found a token longer than"),
            std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace tiepoint
