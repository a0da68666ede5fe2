// Match files (io/matches.h): binary round trip with and without a model, the text
// export, malformed files (each error names the file and the field), and the intrinsics
// table (Middlebury *_par.txt lines and NAME fx fy cx cy lines).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "io/matches.h"
#include "tests/common/scratch_dir.h"

namespace tiepoint {
namespace {

using testing::ScratchDir;

PairMatches Sample(bool with_model) {
  PairMatches m;
  m.name1 = "img1.pgm.tpfeat";
  m.name2 = "img2.pgm.tpfeat";
  m.num_keypoints1 = 100;
  m.num_keypoints2 = 80;
  for (uint32_t i = 0; i < 30; ++i) m.matches.push_back({i * 3, 79 - 2 * i, 1000 + i * 77});
  if (with_model) {
    m.model = MatchModel::kEssential;
    m.verified = true;
    m.ransac_iterations = 1234;
    for (int i = 0; i < 9; ++i) m.matrix[i] = 0.1 * i - 0.33;
    const double r[9] = {0, -1, 0, 1, 0, 0, 0, 0, 1};
    std::memcpy(m.rotation, r, sizeof(r));
    m.translation[0] = 0.6;
    m.translation[1] = -0.8;
    m.inlier_rms_error_px = 0.73;
    m.inliers.resize(30);
    for (int i = 0; i < 30; ++i) m.inliers[i] = i % 3 != 0;
  }
  return m;
}

std::vector<unsigned char> Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void Put(const std::string& path, const std::vector<unsigned char>& b) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), b.size());
}

TEST(Matches, RoundTripWithModel) {
  ScratchDir dir("matches_rt");
  const PairMatches m = Sample(true);
  const std::string path = dir.File("a.tpmatch");
  ASSERT_TRUE(WriteMatches(path, m).ok());
  EXPECT_EQ(Bytes(path).size(), 240u + m.name1.size() + m.name2.size() + 13u * 30u);
  PairMatches r;
  const Status s = ReadMatches(path, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.name1, m.name1);
  EXPECT_EQ(r.name2, m.name2);
  EXPECT_EQ(r.num_keypoints1, 100u);
  EXPECT_EQ(r.num_keypoints2, 80u);
  EXPECT_EQ(r.matches, m.matches);
  EXPECT_EQ(r.inliers, m.inliers);
  EXPECT_EQ(r.model, MatchModel::kEssential);
  EXPECT_TRUE(r.verified);
  EXPECT_EQ(r.ransac_iterations, 1234u);
  EXPECT_EQ(r.NumInliers(), 20u);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(r.matrix[i], m.matrix[i]);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(r.rotation[i], m.rotation[i]);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r.translation[i], m.translation[i]);
  EXPECT_EQ(r.inlier_rms_error_px, 0.73);
  EXPECT_TRUE(dir.List().size() == 1) << "no temporary left behind";
}

TEST(Matches, RoundTripWithoutModel) {
  ScratchDir dir("matches_none");
  const PairMatches m = Sample(false);
  const std::string path = dir.File("b.tpmatch");
  ASSERT_TRUE(WriteMatches(path, m).ok());
  PairMatches r;
  ASSERT_TRUE(ReadMatches(path, &r).ok());
  EXPECT_EQ(r.matches, m.matches);
  EXPECT_EQ(r.model, MatchModel::kNone);
  EXPECT_FALSE(r.verified);
  EXPECT_EQ(r.NumInliers(), 0u);
  // Empty: no matches at all.
  PairMatches empty;
  empty.name1 = "x";
  ASSERT_TRUE(WriteMatches(dir.File("e.tpmatch"), empty).ok());
  ASSERT_TRUE(ReadMatches(dir.File("e.tpmatch"), &r).ok());
  EXPECT_TRUE(r.matches.empty());
}

TEST(Matches, TextExport) {
  ScratchDir dir("matches_txt");
  ASSERT_TRUE(WriteMatchesText(dir.File("m.txt"), Sample(true)).ok());
  std::ifstream in(dir.File("m.txt"));
  std::string l1, l2, l3;
  std::getline(in, l1);
  std::getline(in, l2);
  std::getline(in, l3);
  EXPECT_EQ(l1, "# tiepoint matches img1.pgm.tpfeat img2.pgm.tpfeat");
  EXPECT_NE(l2.find("matches 30 model essential verified 1 inliers 20"), std::string::npos) << l2;
  EXPECT_EQ(l3.rfind("# matrix ", 0), 0u);
  std::string line, last;
  int rows = 0;
  while (std::getline(in, line)) {
    if (line[0] != '#') ++rows, last = line;
  }
  EXPECT_EQ(rows, 30);
  EXPECT_EQ(last, "87 21 3233 1");  // i = 29: 87, 79 - 58, 1000 + 29 * 77, inlier
}

TEST(Matches, InconsistentMatchesAreNotWritten) {
  ScratchDir dir("matches_bad_write");
  PairMatches m = Sample(true);
  m.matches[4].index2 = 80;  // == num_keypoints2
  const Status s = WriteMatches(dir.File("x.tpmatch"), m);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find("match 4"), std::string::npos) << s.message();
  EXPECT_TRUE(dir.List().empty());
  m = Sample(true);
  m.inliers.pop_back();
  EXPECT_EQ(WriteMatches(dir.File("x.tpmatch"), m).code(), StatusCode::kInvalidInput);
}

struct Corruption {
  const char* name;
  void (*apply)(std::vector<unsigned char>*);
  const char* expect;
};

TEST(Matches, MalformedFilesNameTheFileAndField) {
  ScratchDir dir("matches_malformed");
  const std::string good = dir.File("good.tpmatch");
  ASSERT_TRUE(WriteMatches(good, Sample(true)).ok());
  const std::vector<unsigned char> bytes = Bytes(good);
  const size_t names = 2 * std::string("img1.pgm.tpfeat").size();
  const size_t flags = 240 + names + 12 * 30;
  const Corruption cases[] = {
      {"magic", [](std::vector<unsigned char>* b) { (*b)[0] = 'X'; }, "no TPMATCH1 magic"},
      {"version", [](std::vector<unsigned char>* b) { (*b)[8] = 9; }, "version 9"},
      {"model", [](std::vector<unsigned char>* b) { (*b)[12] = 7; }, "model 7"},
      {"truncated", [](std::vector<unsigned char>* b) { b->resize(b->size() - 5); },
       "truncated match file"},
      {"header", [](std::vector<unsigned char>* b) { b->resize(100); }, "truncated match file"},
      {"trailing", [](std::vector<unsigned char>* b) { b->push_back(0); }, "trailing bytes"},
      {"count", [](std::vector<unsigned char>* b) { (*b)[48 + 7] = 0x40; }, "truncated"},
      {"index", [](std::vector<unsigned char>* b) { (*b)[240 + 30 + 12 * 2] = 200; },
       "match 2 pairs keypoints 200"},
      {"nan", [](std::vector<unsigned char>* b) {
         for (int k = 0; k < 8; ++k) (*b)[64 + k] = 0xff;
       }, "non-finite"},
  };
  for (const Corruption& c : cases) {
    std::vector<unsigned char> b = bytes;
    c.apply(&b);
    const std::string path = dir.File(std::string(c.name) + ".tpmatch");
    Put(path, b);
    PairMatches r;
    const Status s = ReadMatches(path, &r);
    EXPECT_EQ(s.code(), StatusCode::kInvalidInput) << c.name;
    EXPECT_NE(s.message().find(path), std::string::npos) << c.name << ": " << s.message();
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << c.name << ": " << s.message();
  }
  {
    std::vector<unsigned char> b = bytes;
    b[flags + 3] = 2;
    Put(dir.File("flag.tpmatch"), b);
    PairMatches r;
    const Status s = ReadMatches(dir.File("flag.tpmatch"), &r);
    EXPECT_NE(s.message().find("inlier flag of match 3"), std::string::npos) << s.message();
    b[flags + 3] = 1 - bytes[flags + 3];  // flip: count disagrees with the header
    Put(dir.File("count.tpmatch"), b);
    EXPECT_NE(ReadMatches(dir.File("count.tpmatch"), &r).message().find("inliers but"),
              std::string::npos);
  }
  PairMatches r;
  EXPECT_EQ(ReadMatches(dir.File("missing.tpmatch"), &r).code(), StatusCode::kIoError);
}

TEST(Intrinsics, MiddleburyAndPlainLines) {
  ScratchDir dir("intrinsics");
  const std::string path = dir.File("par.txt");
  {
    std::ofstream out(path);
    out << "2\n"
        << "templeSR0001.png 1520.4 0 302.32 0 1525.9 246.87 0 0 1 0.02 0.98 -0.18 0.99 -0.01 "
           "0.05 0.04 -0.18 -0.98 -0.07 0.02 0.61\n"
        << "# a comment\n\n"
        << "other.jpg 800 810 320 240  # trailing comment\n"
        << "* 500 500 100 100\n";
  }
  std::map<std::string, CameraIntrinsics> t;
  const Status s = ReadIntrinsicsTable(path, &t);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t["templeSR0001.png"].fx, 1520.4);
  EXPECT_EQ(t["templeSR0001.png"].fy, 1525.9);
  EXPECT_EQ(t["templeSR0001.png"].cx, 302.32);
  EXPECT_EQ(t["templeSR0001.png"].cy, 246.87);
  EXPECT_EQ(t["other.jpg"].fy, 810);
  EXPECT_EQ(t["*"].cx, 100);
}

TEST(Intrinsics, BadLinesNameFileAndLine) {
  ScratchDir dir("intrinsics_bad");
  const std::pair<const char*, const char*> cases[] = {
      {"a.png 1 2 3\n", ":1: expected 'NAME fx fy cx cy'"},
      {"a.png 800 800 x 240\n", ":1: 'x' is not a number"},
      {"\na.png -800 800 320 240\n", ":2: focal lengths must be positive"},
      {"a.png 1 0 3 0 5 6 0 1 1\n", ":1: K must be"},
      {"a.png 8 8 3 2\na.png 8 8 3 2\n", ":2: image 'a.png' is given twice"},
      {"# nothing\n", "no intrinsics"},
  };
  int k = 0;
  for (const auto& [text, expect] : cases) {
    const std::string path = dir.File("bad" + std::to_string(k++) + ".txt");
    std::ofstream(path) << text;
    std::map<std::string, CameraIntrinsics> t;
    const Status s = ReadIntrinsicsTable(path, &t);
    EXPECT_EQ(s.code(), StatusCode::kInvalidInput) << text;
    EXPECT_NE(s.message().find(path + std::string(expect).substr(0, 0)), std::string::npos);
    EXPECT_NE(s.message().find(expect), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace tiepoint
