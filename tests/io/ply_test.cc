#include "io/ply.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

namespace tiepoint {
namespace {

namespace fs = std::filesystem;

constexpr size_t kVertexBytes = 15;  // float x y z, uchar r g b

// A fresh, empty directory under the test temp dir, removed again at scope exit.
struct ScratchDir {
  explicit ScratchDir(const std::string& name)
      : path(fs::path(::testing::TempDir()) / ("tiepoint_ply_test_" + name)) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  const fs::path path;
};

struct PlyFile {
  std::vector<std::string> header;  // lines up to and including "end_header"
  size_t header_bytes = 0;
  std::string body;
};

PlyFile ReadPlyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  PlyFile ply;
  size_t pos = 0;
  while (pos < all.size()) {
    const size_t eol = all.find('\n', pos);
    if (eol == std::string::npos) break;
    ply.header.push_back(all.substr(pos, eol - pos));
    pos = eol + 1;
    if (ply.header.back() == "end_header") break;
  }
  ply.header_bytes = pos;
  ply.body = all.substr(pos);
  return ply;
}

struct Vertex {
  float xyz[3];
  unsigned char rgb[3];
};

Vertex VertexAt(const PlyFile& ply, size_t i) {
  Vertex v;
  const unsigned char* p = reinterpret_cast<const unsigned char*>(ply.body.data()) +
                           i * kVertexBytes;
  for (int k = 0; k < 3; ++k) {
    uint32_t bits = 0;
    for (int b = 0; b < 4; ++b) bits |= static_cast<uint32_t>(p[4 * k + b]) << (8 * b);
    std::memcpy(&v.xyz[k], &bits, sizeof(float));
  }
  for (int k = 0; k < 3; ++k) v.rgb[k] = p[12 + k];
  return v;
}

Scene TinyScene() {
  Scene s;
  // Camera 0: rotation pi/2 about z, t = (1, 2, 3).
  //   R = [0 -1 0; 1 0 0; 0 0 1], R^T t = (2, -1, 3), C = (-2, 1, -3).
  // Camera 1: no rotation (small-angle path), t = (4, -5, 6): C = (-4, 5, -6).
  // Camera 2: rotation pi about x, t = (0, 1, 1): R = diag(1, -1, -1), C = (0, 1, 1).
  // Camera 3: tiny rotation 1e-10 about y (small-angle path), t = (1, 0, 0):
  //   C ~ -(1, 0, 1e-10).
  const double pi = std::acos(-1.0);
  s.cameras = {0, 0, pi / 2, 1, 2, 3, 500, 0, 0,  //
               0, 0, 0, 4, -5, 6, 500, 0, 0,      //
               pi, 0, 0, 0, 1, 1, 500, 0, 0,      //
               0, 1e-10, 0, 1, 0, 0, 500, 0, 0};
  s.points = {1.5, -2.25, 10, 0, 0, 0};
  s.obs_camera = {0, 1};
  s.obs_point = {0, 1};
  s.obs_xy = {0, 0, 0, 0};
  return s;
}

TEST(Ply, HeaderCountsSizeAndCameraCentres) {
  const ScratchDir scratch("scene");
  const fs::path& dir = scratch.path;
  const std::string path = (dir / "scene.ply").string();
  const Scene scene = TinyScene();
  const Status s = WritePly(path, scene);
  ASSERT_TRUE(s.ok()) << s.ToString();

  const PlyFile ply = ReadPlyFile(path);
  ASSERT_FALSE(ply.header.empty());
  EXPECT_EQ(ply.header.front(), "ply");
  EXPECT_EQ(ply.header[1], "format binary_little_endian 1.0");
  EXPECT_EQ(ply.header.back(), "end_header");
  int vertex_count = -1;
  std::vector<std::string> properties;
  for (const std::string& line : ply.header) {
    std::istringstream ls(line);
    std::string word;
    ls >> word;
    if (word == "element") {
      std::string kind;
      ls >> kind >> vertex_count;
      EXPECT_EQ(kind, "vertex");
    } else if (word == "property") {
      properties.push_back(line);
    }
  }
  EXPECT_EQ(vertex_count, 2 + 4);
  EXPECT_EQ(properties, (std::vector<std::string>{
                            "property float x", "property float y", "property float z",
                            "property uchar red", "property uchar green",
                            "property uchar blue"}));
  EXPECT_EQ(fs::file_size(path), ply.header_bytes + 6 * kVertexBytes);
  ASSERT_EQ(ply.body.size(), 6 * kVertexBytes);

  // Points first, grey.
  const Vertex p0 = VertexAt(ply, 0);
  EXPECT_EQ(p0.xyz[0], 1.5f);
  EXPECT_EQ(p0.xyz[1], -2.25f);
  EXPECT_EQ(p0.xyz[2], 10.0f);
  EXPECT_EQ(p0.rgb[0], p0.rgb[1]);
  EXPECT_EQ(p0.rgb[1], p0.rgb[2]);
  EXPECT_GT(p0.rgb[0], 0);
  EXPECT_LT(p0.rgb[0], 255);

  // Then camera centres C = -R^T t, red.
  const float expected[4][3] = {{-2, 1, -3}, {-4, 5, -6}, {0, 1, 1}, {-1, 0, -1e-10f}};
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE("camera " + std::to_string(i));
    const Vertex c = VertexAt(ply, 2 + i);
    for (int k = 0; k < 3; ++k) EXPECT_NEAR(c.xyz[k], expected[i][k], 1e-6f);
    EXPECT_EQ(c.rgb[0], 255);
    EXPECT_EQ(c.rgb[1], 0);
    EXPECT_EQ(c.rgb[2], 0);
  }
  // No temporary left next to the output.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
}

TEST(Ply, GeneralRotationMatchesRodrigues) {
  // Rotation by angle a about the unit axis k: check C = -R^T t against the camera
  // projecting C to the origin of its frame, R C + t = 0, with R built independently
  // from two elementary rotations: a about (0, 0, 1) is Rz(a).
  const double a = 0.7;
  Scene scene;
  scene.cameras = {0, 0, a, 3, -1, 2, 500, 0, 0};
  const ScratchDir scratch("general");
  const fs::path& dir = scratch.path;
  const std::string path = (dir / "cam.ply").string();
  ASSERT_TRUE(WritePly(path, scene).ok());
  const PlyFile ply = ReadPlyFile(path);
  ASSERT_EQ(ply.body.size(), kVertexBytes);
  const Vertex c = VertexAt(ply, 0);
  const double ca = std::cos(a), sa = std::sin(a);
  // R C + t with R = Rz(a).
  const double rc[3] = {ca * c.xyz[0] - sa * c.xyz[1] + 3, sa * c.xyz[0] + ca * c.xyz[1] - 1,
                        c.xyz[2] + 2.0};
  for (double v : rc) EXPECT_NEAR(v, 0.0, 1e-6);
}

TEST(Ply, UnwritablePathFails) {
  const Status s = WritePly("/nonexistent-dir/scene.ply", TinyScene());
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("/nonexistent-dir/scene.ply"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists("/nonexistent-dir/scene.ply"));
}

}  // namespace
}  // namespace tiepoint
