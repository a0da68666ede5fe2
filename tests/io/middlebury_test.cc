// io/middlebury.h: the ring cameras of a *_par.txt file, errors naming file and line, and
// the neighbouring views by camera centre.
#include "io/middlebury.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/common/scratch_dir.h"
#include "tests/common/shared_data.h"

namespace tiepoint {
namespace {

// Camera i of n on a circle of radius 1 around the origin, looking at it, t = -R C.
std::string RingLine(int i, int n, double angle_offset = 0) {
  const double a = 2 * 3.14159265358979323846 * i / n + angle_offset;
  const double c = std::cos(a), s = std::sin(a);
  // Rows of R: x axis (tangent), y axis (down), z axis (towards the origin).
  const double R[9] = {-s, c, 0, 0, 0, -1, -c, -s, 0};
  const double C[3] = {c, s, 0};
  double t[3];
  for (int r = 0; r < 3; ++r) t[r] = -(R[3 * r] * C[0] + R[3 * r + 1] * C[1] + R[3 * r + 2] * C[2]);
  std::string line = "view" + std::to_string(i) + ".png 1000 0 320 0 1000 240 0 0 1";
  for (double v : R) line += " " + std::to_string(v);
  for (double v : t) line += " " + std::to_string(v);
  return line;
}

std::string Write(const testing::ScratchDir& dir, const std::string& text) {
  const std::string path = dir.path() + "/ring_par.txt";
  std::ofstream(path) << text;
  return path;
}

TEST(Middlebury, ReadsCamerasAndFindsRingNeighbours) {
  testing::ScratchDir dir("middlebury_ring");
  // File order is not ring order: 0, 2, 4, 1, 3, 5 around the circle.
  const int order[6] = {0, 2, 4, 1, 3, 5};
  std::string text = "6\n";
  for (int k : order) text += RingLine(k, 6) + "\n";
  std::vector<MiddleburyCamera> cameras;
  ASSERT_TRUE(ReadMiddleburyCameras(Write(dir, text), &cameras).ok());
  ASSERT_EQ(cameras.size(), 6u);
  EXPECT_EQ(cameras[1].name, "view2.png");
  EXPECT_EQ(cameras[0].K[0], 1000);
  EXPECT_EQ(cameras[0].K[5], 240);
  const auto centre = cameras[3].Centre();  // view1: angle 60 degrees
  EXPECT_NEAR(centre[0], 0.5, 1e-5);
  EXPECT_NEAR(centre[1], std::sqrt(3.0) / 2, 1e-5);
  EXPECT_NEAR(centre[2], 0.0, 1e-5);
  // Ring neighbours (k, k+1 mod 6) as file indices: 6 pairs.
  const std::vector<std::pair<int, int>> expected = {{0, 3}, {0, 5}, {1, 3}, {1, 4}, {2, 4}, {2, 5}};
  EXPECT_EQ(MiddleburyNeighbourPairs(cameras), expected);
}

TEST(Middlebury, ViewsAtTheSamePlaceAreNotNeighbours) {
  testing::ScratchDir dir("middlebury_same");
  std::string text = "5\n";
  for (int k : {0, 1, 2, 3}) text += RingLine(k, 4) + "\n";
  text += RingLine(0, 4) + "\n";  // a second photo from view 0's place
  std::vector<MiddleburyCamera> cameras;
  ASSERT_TRUE(ReadMiddleburyCameras(Write(dir, text), &cameras).ok());
  for (const auto& [i, j] : MiddleburyNeighbourPairs(cameras)) {
    EXPECT_FALSE(i == 0 && j == 4) << "views 0 and 4 share a centre";
  }
}

TEST(Middlebury, BadFilesNameTheLine) {
  testing::ScratchDir dir("middlebury_bad");
  struct Case {
    std::string text, expect;
  };
  const std::vector<Case> cases = {
      {"", "no view count"},
      {"two\n", ":1: expected the view count"},
      {"2\n" + RingLine(0, 2) + "\n", "the count says 2 views, the file has 1"},
      {"1\n" + RingLine(0, 2) + "\n" + RingLine(1, 2) + "\n", ":3: more views than the count"},
      {"1\nview0.png 1 2 3\n", ":2: expected 'name k11..k33 r11..r33 t1 t2 t3' (21 numbers), found 3"},
      {"1\n" + RingLine(0, 2).replace(RingLine(0, 2).find(" 320 "), 5, " nan ") + "\n",
       ":2: 'nan' is not a finite number"},
  };
  for (const Case& c : cases) {
    std::vector<MiddleburyCamera> cameras;
    const Status s = ReadMiddleburyCameras(Write(dir, c.text), &cameras);
    EXPECT_FALSE(s.ok()) << c.text;
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << s.message();
    EXPECT_TRUE(cameras.empty());
  }
  std::vector<MiddleburyCamera> cameras;
  const Status missing = ReadMiddleburyCameras(dir.path() + "/absent_par.txt", &cameras);
  EXPECT_NE(missing.message().find("absent_par.txt: cannot open"), std::string::npos) << missing.message();
}

TEST(Middlebury, SharedTempleRing) {
  TIEPOINT_REQUIRE_SHARED(path, "multiview/middlebury/templeSparseRing/templeSR_par.txt");
  std::vector<MiddleburyCamera> cameras;
  const Status s = ReadMiddleburyCameras(path, &cameras);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(cameras.size(), 16u);
  EXPECT_EQ(cameras[0].name, "templeSR0001.png");
  // 16 views, 2 nearest each; views 1 and 11 share a place: 17 pairs.
  EXPECT_EQ(MiddleburyNeighbourPairs(cameras).size(), 17u);
}

}  // namespace
}  // namespace tiepoint
