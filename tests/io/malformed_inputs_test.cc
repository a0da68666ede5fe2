// Readers against inputs that promise more than they hold, and the memory/stream entry
// points the fuzz targets use (issue 19). Every case here failed before its fix: an
// allocation sized by a header before the data was seen, or a temporary left behind.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "io/bal.h"
#include "io/base/atomic_file.h"
#include "io/features.h"
#include "io/image.h"
#include "io/matches.h"
#include "io/middlebury.h"
#include "io/track_file.h"
#include "tests/common/image_encoders.h"
#include "tests/common/scratch_dir.h"

namespace tiepoint {
namespace {

using testing::ScratchDir;

std::string Corpus(const std::string& target, const std::string& name) {
  return std::string(TIEPOINT_TEST_DATA_DIR) + "/../fuzz/corpus/" + target + "/" + name;
}

std::vector<unsigned char> Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<unsigned char>((std::istreambuf_iterator<char>(in)),
                                    std::istreambuf_iterator<char>());
}

bool Contains(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

// --- BAL -------------------------------------------------------------------------------

// 3 cameras, 10^6 points, 3*10^6 observations in a 22-byte file: refused from the header,
// (it used to reserve 16 M elements per array, about 400 MB, before failing).
TEST(MalformedInputs, BalHeaderLargerThanFileIsRefusedBeforeAllocating) {
  const std::string text = "3 1000000 3000000\n0 0 1 2\n";
  Scene scene;
  const Status s = ReadBalFromMemory(text.data(), text.size(), "liar.txt", &scene);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_TRUE(Contains(s, "liar.txt:1: the header promises 3 cameras, 1000000 points and "
                          "3000000 observations, which take at least"))
      << s.message();
  EXPECT_TRUE(Contains(s, "but the file has 26")) << s.message();
  // The same through a file.
  ScratchDir dir("bal_liar");
  std::ofstream(dir.File("liar.txt")) << text;
  const Status f = ReadBal(dir.File("liar.txt"), &scene);
  EXPECT_TRUE(Contains(f, "the header promises")) << f.message();
}

// The smallest file the header allows is accepted (the bound is exact, not a guess).
TEST(MalformedInputs, BalSizeBoundIsExact) {
  const std::string text = "1 1 1\n0 0 1 2\n1\n2\n3\n4\n5\n6\n7\n8\n9\n1\n2\n3";
  Scene scene;
  ASSERT_TRUE(ReadBalFromMemory(text.data(), text.size(), "tight.txt", &scene).ok());
  EXPECT_EQ(scene.num_observations(), 1);
}

TEST(MalformedInputs, BalFromMemoryMatchesFileReader) {
  for (const std::string& name : {"minimal.bz2", "two_streams.bz2", "problem-49-slice.bz2"}) {
    SCOPED_TRACE(name);
    const std::string path = Corpus("bal_bz2", name);
    Scene from_file, from_memory;
    ASSERT_TRUE(ReadBal(path, &from_file).ok());
    const std::vector<unsigned char> bytes = Bytes(path);
    ASSERT_TRUE(ReadBalFromMemory(reinterpret_cast<const char*>(bytes.data()), bytes.size(),
                                  path, &from_memory)
                    .ok());
    EXPECT_EQ(from_file.cameras, from_memory.cameras);
    EXPECT_EQ(from_file.points, from_memory.points);
    EXPECT_EQ(from_file.obs_xy, from_memory.obs_xy);
    // Cut in half: a truncation message, not a crash.
    Scene cut;
    const Status s = ReadBalFromMemory(reinterpret_cast<const char*>(bytes.data()),
                                       bytes.size() / 2, "cut.bz2", &cut);
    EXPECT_FALSE(s.ok());
    EXPECT_TRUE(Contains(s, "cut.bz2")) << s.message();
  }
}

// --- images ----------------------------------------------------------------------------

// An ASCII PGM header for 65535 x 4096 in 20 bytes: 1 GiB of floats used to be allocated
// before the first sample was read.
TEST(MalformedInputs, AsciiPnmLargerThanFileIsRefusedBeforeAllocating) {
  const std::string pgm = "P2\n65535 4096\n255\n0 1";
  GrayImage image;
  const Status s = DecodeImageGray(reinterpret_cast<const unsigned char*>(pgm.data()),
                                   pgm.size(), "big.pgm", &image);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_TRUE(Contains(s, "big.pgm: truncated PGM (ASCII): 65535 x 4096 needs at least"))
      << s.message();
}

// A PNG whose IHDR promises 20000 x 10000 RGBA16 (1.6 GB of raster) over a few bytes of
// IDAT: more than deflate's 1032:1 can hold, refused before the raster is allocated.
TEST(MalformedInputs, PngRasterLargerThanDeflateCanHoldIsRefused) {
  std::vector<unsigned char> png =
      tiepoint::testing::EncodePng(8, 8, PNG_COLOR_TYPE_RGB_ALPHA, 16,
                                   std::vector<uint16_t>(8 * 8 * 4, 1000));
  ASSERT_GT(png.size(), 33u);
  auto put_be32 = [&](size_t at, uint32_t v) {
    for (int b = 0; b < 4; ++b) png[at + b] = static_cast<unsigned char>(v >> (24 - 8 * b));
  };
  put_be32(16, 20000);
  put_be32(20, 10000);
  // IHDR's CRC over type + 13 data bytes, so libpng reads on to the size check.
  uint32_t crc = 0xffffffffu;
  for (size_t i = 12; i < 29; ++i) {
    crc ^= png[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  put_be32(29, ~crc);
  GrayImage image;
  const Status s = DecodeImageGray(png.data(), png.size(), "huge.png", &image);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_TRUE(Contains(s, "huge.png: corrupt or truncated PNG: the header gives 20000 x 10000"))
      << s.message();
  EXPECT_TRUE(Contains(s, "1032 times")) << s.message();
}

// A baseline JPEG whose SOF promises 16000 x 16000 in a few hundred bytes.
TEST(MalformedInputs, JpegLargerThanFileCanCodeIsRefused) {
  std::vector<unsigned char> jpg =
      tiepoint::testing::EncodeJpeg(16, 16, 1, std::vector<uint8_t>(256, 128));
  size_t sof = 0;
  for (size_t i = 2; i + 9 < jpg.size(); ++i) {
    if (jpg[i] == 0xff && jpg[i + 1] == 0xc0) {
      sof = i;
      break;
    }
  }
  ASSERT_NE(sof, 0u);
  jpg[sof + 5] = 16000 >> 8;  // height
  jpg[sof + 6] = 16000 & 0xff;
  jpg[sof + 7] = 16000 >> 8;  // width
  jpg[sof + 8] = 16000 & 0xff;
  GrayImage image;
  const Status s = DecodeImageGray(jpg.data(), jpg.size(), "huge.jpg", &image);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_TRUE(Contains(s, "huge.jpg: corrupt or truncated JPEG: the header gives 16000 x 16000"))
      << s.message();
}

// --- features, matches, intrinsics, Middlebury: memory/stream entry points ---------------

TEST(MalformedInputs, ParsersAgreeWithFileReaders) {
  const std::string feat = Corpus("features", "balbianello-1-3kp.tpfeat");
  Features a, b;
  ASSERT_TRUE(ReadFeatures(feat, &a).ok());
  const std::vector<unsigned char> fb = Bytes(feat);
  ASSERT_TRUE(ParseFeatures(fb.data(), fb.size(), "mem.tpfeat", &b).ok());
  EXPECT_EQ(a.descriptors, b.descriptors);
  EXPECT_TRUE(Contains(ParseFeatures(fb.data(), fb.size() - 1, "short.tpfeat", &b),
                       "short.tpfeat: truncated feature file"));

  const std::string match = Corpus("matches", "essential.tpmatch");
  PairMatches m1, m2;
  ASSERT_TRUE(ReadMatches(match, &m1).ok());
  const std::vector<unsigned char> mb = Bytes(match);
  ASSERT_TRUE(ParseMatches(mb.data(), mb.size(), "mem.tpmatch", &m2).ok());
  EXPECT_EQ(m1.matches, m2.matches);
  EXPECT_TRUE(Contains(ParseMatches(mb.data(), 100, "short.tpmatch", &m2),
                       "short.tpmatch: truncated match file"));

  std::istringstream k("a.png 500 500 320 240\nb.png 500 -1 320 240\n");
  std::map<std::string, CameraIntrinsics> table;
  EXPECT_TRUE(Contains(ReadIntrinsicsTable(k, "k.txt", &table), "k.txt:2: focal lengths"));

  std::istringstream par("2\nv1.png 1 0 0 0 1 0 0 0 1 1 0 0 0 1 0 0 0 1 0 0 0\n");
  std::vector<MiddleburyCamera> cams;
  EXPECT_TRUE(Contains(ReadMiddleburyCameras(par, "x_par.txt", &cams),
                       "x_par.txt: the count says 2 views, the file has 1"));
}

// --- outputs ---------------------------------------------------------------------------

// A directory opens on Linux as a stream that reads as empty; each reader names it as what
// it is, not as an empty or unparsable file (before: "read error", "no observations", or
// nothing at all from the intrinsics table).
TEST(MalformedInputs, DirectoryIsNamedByEveryReader) {
  ScratchDir dir("input_dir");
  const std::string d = dir.path();
  auto expect = [&](const Status& s, const std::string& what) {
    EXPECT_EQ(s.code(), StatusCode::kIoError) << s.message();
    EXPECT_EQ(s.message(), d + ": is a directory, not " + what);
  };
  Scene scene;
  expect(ReadBal(d, BalReadOptions(), &scene, nullptr), "a BAL file");
  std::vector<TrackObservation> tracks;
  expect(ReadTrackFile(d, &tracks), "a tracks file");
  std::map<std::string, CameraIntrinsics> table;
  expect(ReadIntrinsicsTable(d, &table), "an intrinsics file");
  EXPECT_TRUE(table.empty());
  std::vector<MiddleburyCamera> cameras;
  expect(ReadMiddleburyCameras(d, &cameras), "a camera file");
  Features features;
  expect(ReadFeatures(d, &features), "a feature file");
  PairMatches matches;
  expect(ReadMatches(d, &matches), "a matches file");
  GrayImage gray;
  expect(ReadImageGray(d, &gray), "an image");
  // A missing file is a failed open, with the system's reason.
  const Status missing = ReadTrackFile(dir.File("none.txt"), &tracks);
  EXPECT_EQ(missing.message(), dir.File("none.txt") + ": cannot open for reading (No such file or directory)");
}

TEST(AtomicFileFaults, DanglingLinkIsWrittenThroughAndKept) {
  ScratchDir dir("atomic_link");
  ASSERT_EQ(::symlink("target.txt", dir.File("link.txt").c_str()), 0);
  AtomicFile f(dir.File("link.txt"));
  ASSERT_TRUE(f.Open().ok());
  f.stream() << "new";
  ASSERT_TRUE(f.Commit().ok());
  struct stat st;
  ASSERT_EQ(::lstat(dir.File("link.txt").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  std::ifstream in(dir.File("target.txt"));
  std::string text;
  in >> text;
  EXPECT_EQ(text, "new");
}

TEST(AtomicFileFaults, DirectoryIsRefusedAndModeIsKept) {
  ScratchDir dir("atomic_dir");
  AtomicFile d(dir.path());
  const Status s = d.Open();
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_TRUE(Contains(s, "is a directory")) << s.message();

  std::ofstream(dir.File("private.txt")) << "old";
  ASSERT_EQ(::chmod(dir.File("private.txt").c_str(), 0600), 0);
  AtomicFile f(dir.File("private.txt"));
  ASSERT_TRUE(f.Open().ok());
  f.stream() << "new";
  ASSERT_TRUE(f.Commit().ok());
  struct stat st;
  ASSERT_EQ(::stat(dir.File("private.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// What a signal or a fatal error does before exiting: every live temporary goes.
TEST(AtomicFileFaults, LiveTemporariesAreListedUntilCommitted) {
  ScratchDir dir("atomic_live");
  {
    AtomicFile done(dir.File("done.txt"));
    ASSERT_TRUE(done.Open().ok());
    ASSERT_TRUE(done.Commit().ok());
    AtomicFile a(dir.File("a.txt")), b(dir.File("b.txt"));
    ASSERT_TRUE(a.Open().ok());
    ASSERT_TRUE(b.Open().ok());
    EXPECT_EQ(dir.List().size(), 3u);  // done.txt and two temporaries
    // In a child: RemoveLiveTemporaries never lets the process commit again.
    const pid_t pid = ::fork();
    if (pid == 0) _exit(RemoveLiveTemporaries());
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_EQ(WEXITSTATUS(status), 2);
    EXPECT_EQ(dir.List(), std::vector<std::string>{"done.txt"});
  }
}

std::vector<std::string> Sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::string Text(const std::string& path) {
  const std::vector<unsigned char> b = Bytes(path);
  return std::string(b.begin(), b.end());
}

// `reconstruct` puts four outputs in place in one step: a failed rename undoes the ones
// done, and a signal after success finds the work complete (StopForSignal lets it finish).
TEST(AtomicFileFaults, ReplaceOutputsIsAllOrNothing) {
  ScratchDir dir("atomic_replace");
  ::mkdir(dir.File("out").c_str(), 0755);
  ::mkdir(dir.File("tmp").c_str(), 0755);
  ::mkdir(dir.File("out/sparse").c_str(), 0755);
  ::mkdir(dir.File("tmp/sparse").c_str(), 0755);
  std::ofstream(dir.File("out/a.txt")) << "old";
  std::ofstream(dir.File("out/sparse/m.txt")) << "old";
  std::ofstream(dir.File("tmp/a.txt")) << "new";
  std::ofstream(dir.File("tmp/sparse/m.txt")) << "new";
  // The third move has nothing to move: the first two are undone, the old outputs stay.
  const Status s = ReplaceOutputs({{dir.File("tmp/a.txt"), dir.File("out/a.txt")},
                                   {dir.File("tmp/sparse"), dir.File("out/sparse")},
                                   {dir.File("tmp/gone.txt"), dir.File("out/gone.txt")}});
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_TRUE(Contains(s, "out/gone.txt: cannot move the new output into place")) << s.message();
  EXPECT_FALSE(OutputsComplete());
  EXPECT_EQ(Text(dir.File("out/a.txt")), "old");
  EXPECT_EQ(Text(dir.File("out/sparse/m.txt")), "old");
  EXPECT_EQ(Text(dir.File("tmp/a.txt")), "new");
  EXPECT_EQ(Text(dir.File("tmp/sparse/m.txt")), "new");
  EXPECT_EQ(Sorted(dir.List()), (std::vector<std::string>{"out", "tmp"}));
  auto out_list = [&dir] {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir.File("out")))
      names.push_back(e.path().filename().string());
    return Sorted(names);
  };
  EXPECT_EQ(out_list(), (std::vector<std::string>{"a.txt", "sparse"}));  // nothing set aside

  // In children (the completion is process-wide). Before the outputs are in place a signal
  // removes the temporary directory (exit 10 + removed); after, it changes nothing (exit 20).
  const LiveTemporaryDirectory live(dir.File("tmp"));
  for (const bool replace_first : {false, true}) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (replace_first &&
          !ReplaceOutputs({{dir.File("tmp/a.txt"), dir.File("out/a.txt")},
                           {dir.File("tmp/sparse"), dir.File("out/sparse")}}).ok()) {
        _exit(1);
      }
      int removed = -1;
      const bool stop = StopForSignal(&removed);
      _exit(stop ? 10 + removed : OutputsComplete() && removed == 0 ? 20 : 2);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    if (!replace_first) {
      EXPECT_EQ(WEXITSTATUS(status), 11);
      EXPECT_EQ(dir.List(), std::vector<std::string>{"out"});  // tmp/ removed
      EXPECT_EQ(Text(dir.File("out/a.txt")), "old");
      ::mkdir(dir.File("tmp").c_str(), 0755);
      ::mkdir(dir.File("tmp/sparse").c_str(), 0755);
      std::ofstream(dir.File("tmp/a.txt")) << "new";
      std::ofstream(dir.File("tmp/sparse/m.txt")) << "new";
    } else {
      EXPECT_EQ(WEXITSTATUS(status), 20);
      EXPECT_EQ(Text(dir.File("out/a.txt")), "new");
      EXPECT_EQ(Text(dir.File("out/sparse/m.txt")), "new");
      EXPECT_EQ(Sorted(dir.List()), (std::vector<std::string>{"out", "tmp"}));
      EXPECT_EQ(out_list(), (std::vector<std::string>{"a.txt", "sparse"}));  // set-aside ones gone
    }
  }
}

}  // namespace
}  // namespace tiepoint
