// io/pairs_file.h: the pairs file that `match --pairs` and `reconstruct --pairs` share:
// comments, names resolved by any of an item's names, duplicates, and every error naming
// the file and line.
#include "io/pairs_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/common/scratch_dir.h"

namespace tiepoint {
namespace {

std::string Write(const testing::ScratchDir& dir, const std::string& text) {
  const std::string path = dir.path() + "/pairs.txt";
  std::ofstream(path) << text;
  return path;
}

// Three images, each answering to its path, file name and stem.
const std::vector<std::vector<std::string>> kNames = {
    {"imgs/a.png", "a.png", "a"}, {"imgs/b.jpg", "b.jpg", "b"}, {"other/c.png", "c.png", "c"}};

Status Resolve(const std::string& path, std::vector<std::pair<int, int>>* pairs,
               const std::vector<std::vector<std::string>>& names = kNames) {
  std::vector<NamePair> named;
  TIEPOINT_RETURN_IF_ERROR(ReadPairsFile(path, &named));
  return ResolvePairs(path, named, names, "image", pairs);
}

TEST(PairsFile, CommentsBlankLinesAndAnyOfAnItemsNames) {
  testing::ScratchDir dir("pairs_file");
  const std::string path = Write(dir,
                                 "# pairs of the test\n"
                                 "\n"
                                 "a.png b.jpg\n"
                                 "   c   imgs/a.png   # after a pair\n"
                                 "\tb\tc.png\t\n"
                                 "b.jpg a\n"          // a-b again, reversed: kept once
                                 "c.png b # again\n"  // b-c again
                                 "#a c\n");
  std::vector<NamePair> named;
  ASSERT_TRUE(ReadPairsFile(path, &named).ok());
  ASSERT_EQ(named.size(), 5u);
  EXPECT_EQ(named[1].name1, "c");
  EXPECT_EQ(named[1].name2, "imgs/a.png");
  EXPECT_EQ(named[1].line, 4);
  EXPECT_EQ(named[4].line, 7);
  std::vector<std::pair<int, int>> pairs;
  ASSERT_TRUE(Resolve(path, &pairs).ok());
  const std::vector<std::pair<int, int>> expected = {{0, 1}, {2, 0}, {1, 2}};
  EXPECT_EQ(pairs, expected);  // in their first order, as written
}

TEST(PairsFile, ErrorsNameTheFileAndLine) {
  testing::ScratchDir dir("pairs_file");
  struct Case {
    std::string text, message;
  };
  const std::vector<Case> cases = {
      {"a b\nc\n", ":2: expected two names, found 1"},
      {"a b c d # four\n", ":1: expected two names, found 4"},
      {"a b\n\na nosuch\n", ":3: 'nosuch' is not one of the images given"},
      {"a.PNG b\n", ":1: 'a.PNG' is not one of the images given"},
      {"b b.jpg\n", ":1: pairs 'b' with itself"},
      {"# only comments\n\n   \n", ": no pairs in the file"},
      {"", ": no pairs in the file"},
  };
  for (const Case& c : cases) {
    const std::string path = Write(dir, c.text);
    std::vector<std::pair<int, int>> pairs;
    const Status s = Resolve(path, &pairs);
    EXPECT_FALSE(s.ok()) << c.text;
    EXPECT_EQ(s.message(), path + c.message) << c.text;
  }
}

TEST(PairsFile, ANameTwoItemsAnswerToIsAmbiguous) {
  testing::ScratchDir dir("pairs_file");
  // a.png and a.jpg share the stem "a"; their file names tell them apart.
  const std::vector<std::vector<std::string>> names = {
      {"x/a.png", "a.png", "a"}, {"y/a.jpg", "a.jpg", "a"}, {"b.png", "b.png", "b"}};
  std::vector<std::pair<int, int>> pairs;
  const std::string path = Write(dir, "a.png b\nb a\n");
  const Status s = Resolve(path, &pairs, names);
  EXPECT_EQ(s.message(), path + ":2: 'a' names more than one image (x/a.png and y/a.jpg)");
  ASSERT_TRUE(Resolve(Write(dir, "a.png b\nb a.jpg\na.png y/a.jpg\n"), &pairs, names).ok());
  const std::vector<std::pair<int, int>> expected = {{0, 2}, {2, 1}, {0, 1}};
  EXPECT_EQ(pairs, expected);
}

TEST(PairsFile, MissingFileAndFolderAreNamed) {
  testing::ScratchDir dir("pairs_file");
  std::vector<NamePair> named;
  Status s = ReadPairsFile(dir.path() + "/nosuch.txt", &named);
  EXPECT_EQ(s.message().rfind(dir.path() + "/nosuch.txt: cannot open for reading", 0), 0u) << s.message();
  std::filesystem::create_directory(dir.path() + "/d");
  s = ReadPairsFile(dir.path() + "/d", &named);
  EXPECT_EQ(s.message(), dir.path() + "/d: is a directory, not a pairs file");
}

}  // namespace
}  // namespace tiepoint
