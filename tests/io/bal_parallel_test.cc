// The parallel BAL reader and bzip2 decoder against the serial ones: same scenes bit for
// bit, same messages, whatever the thread count and wherever the chunks are cut.
#include <bzlib.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "io/bal.h"
#include "io/bal_internal.h"
#include "io/bz2_parallel.h"
#include "tests/common/bz2_compress.h"

namespace tiepoint {
namespace {

namespace fs = std::filesystem;

std::string SharedDataDir() {
  const char* env = std::getenv("TIEPOINT_SHARED_DATA");
  if (env != nullptr && env[0] != '\0') return env;
  return TIEPOINT_DEFAULT_SHARED_DATA;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

uint64_t Bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof(b));
  return b;
}

// Bitwise equality (so -0.0 differs from 0.0).
::testing::AssertionResult SameScene(const Scene& a, const Scene& b) {
  if (a.obs_camera != b.obs_camera) return ::testing::AssertionFailure() << "obs_camera differ";
  if (a.obs_point != b.obs_point) return ::testing::AssertionFailure() << "obs_point differ";
  auto same = [](const std::vector<double>& x, const std::vector<double>& y, const char* what)
      -> ::testing::AssertionResult {
    if (x.size() != y.size()) {
      return ::testing::AssertionFailure() << what << " sizes " << x.size() << " vs " << y.size();
    }
    for (size_t i = 0; i < x.size(); ++i) {
      if (Bits(x[i]) != Bits(y[i])) {
        return ::testing::AssertionFailure() << what << "[" << i << "] " << x[i] << " vs " << y[i];
      }
    }
    return ::testing::AssertionSuccess();
  };
  auto r = same(a.obs_xy, b.obs_xy, "obs_xy");
  if (!r) return r;
  r = same(a.cameras, b.cameras, "cameras");
  if (!r) return r;
  return same(a.points, b.points, "points");
}

BalReadOptions Serial() {
  BalReadOptions o;
  o.parallel = false;
  return o;
}

BalReadOptions Parallel(int threads, size_t chunk_bytes) {
  BalReadOptions o;
  o.num_threads = threads;
  o.chunk_bytes = chunk_bytes;
  return o;
}

// Reads `bytes` named `name` serially and with several thread counts and chunk sizes;
// expects the same status (code and message) and, on success, the same scene. Returns
// the serial status.
Status ExpectParallelMatchesSerial(const std::string& bytes, const std::string& name,
                                   bool expect_parallel_path = false) {
  Scene serial;
  const Status s = ReadBalFromMemory(bytes.data(), bytes.size(), name, Serial(), &serial);
  // bzip2 input: the decoder does not depend on the chunk size, and each read decodes.
  const bool bz2 = name.size() > 4 && name.substr(name.size() - 4) == ".bz2";
  const std::vector<int> threads = bz2 ? std::vector<int>{1, 3} : std::vector<int>{1, 2, 3, 8};
  const std::vector<size_t> chunks =
      bz2 ? std::vector<size_t>{0, 7} : std::vector<size_t>{0, 1, 2, 7, 64, 1000};
  for (int t : threads) {
    for (size_t c : chunks) {
      Scene parallel;
      BalReadSummary summary;
      const Status p = ReadBalFromMemory(bytes.data(), bytes.size(), name, Parallel(t, c),
                                         &parallel, &summary);
      EXPECT_EQ(p.code(), s.code()) << name << " threads " << t << " chunk " << c;
      EXPECT_EQ(p.message(), s.message()) << name << " threads " << t << " chunk " << c;
      if (s.ok() && p.ok()) {
        EXPECT_TRUE(SameScene(serial, parallel)) << name << " threads " << t << " chunk " << c;
        if (expect_parallel_path && (t > 1 || c > 0 || bz2)) {  // else serial by design
          EXPECT_TRUE(summary.parallel) << name << ": fell back (" << summary.fallback_reason
                                        << ")";
        }
      }
    }
  }
  return s;
}

std::string Compress(const std::string& text, int level) {
  return testing::Bz2Compress(text, level);
}

std::string SerialDecode(const std::string& bz2, const std::string& name = "x.bz2") {
  std::string out;
  const Status s = DecompressBz2Serial(bz2.data(), bz2.size(), name, &out);
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

// A BAL text of the given size class with awkward but valid layout choices.
std::string SyntheticBal(int cameras, int points, int obs_per_point, uint32_t seed,
                         bool awkward) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> uni(-1000.0, 1000.0);
  std::ostringstream out;
  out.precision(17);
  const int64_t nobs = static_cast<int64_t>(points) * obs_per_point;
  out << cameras << ' ' << points << ' ' << nobs << (awkward ? " \r\n\n" : "\n");
  int64_t i = 0;
  for (int j = 0; j < points; ++j) {
    for (int k = 0; k < obs_per_point; ++k, ++i) {
      const int c = (j + 3 * k) % cameras;
      if (awkward && i % 17 == 5) {
        out << "+" << c << "\t" << j << "  " << uni(rng) << " " << "1e-400";  // slow paths
      } else {
        out << c << ' ' << j << ' ' << uni(rng) << ' ' << uni(rng);
      }
      // Two observations on one line are legal (each on one line is what is checked).
      out << (awkward && i % 13 == 4 && i + 1 < nobs ? " " : (awkward && i % 11 == 0 ? "\r\n" : "\n"));
      if (awkward && i % 29 == 0) out << "\n\n";
    }
  }
  for (int k = 0; k < 9 * cameras; ++k) {
    out << (k % 7 == 3 && awkward ? "1.5e-310" : std::to_string(uni(rng)));
    out << (awkward ? (k % 5 == 0 ? "\n\n" : (k % 3 == 0 ? " " : "\n")) : "\n");
  }
  for (int k = 0; k < 3 * points; ++k) {
    out << uni(rng) << (awkward && k % 4 == 1 ? "\t" : "\n");
  }
  if (awkward) out << "\n\n  \n";
  return out.str();
}

// ---------------------------------------------------------------------------------------
// BAL text.

TEST(BalParallel, SharedFilesMatchSerial) {
  const std::string root = SharedDataDir() + "/bal";
  if (!fs::is_directory(root)) GTEST_SKIP() << "shared BAL data not found under " << root;
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string path = e.path().string();
    const bool bz2 = path.size() > 4 && path.substr(path.size() - 4) == ".bz2";
    if (!e.is_regular_file() || (!bz2 && path.find("-pre.txt") == std::string::npos)) continue;
    ++files;
    Scene serial, parallel;
    BalReadSummary summary;
    ASSERT_TRUE(ReadBal(path, Serial(), &serial).ok()) << path;
    for (int threads : {1, 2, 4}) {
      ASSERT_TRUE(ReadBal(path, Parallel(threads, 0), &parallel, &summary).ok()) << path;
      // One thread on text: the serial reader by design.
      EXPECT_EQ(summary.parallel, threads > 1 || bz2) << path << ": " << summary.fallback_reason;
      EXPECT_TRUE(SameScene(serial, parallel)) << path << " threads " << threads;
    }
    const std::string bytes = ReadAll(path);
    if (bytes.size() < 3'000'000 && !bz2) {
      // Every chunk size (to one line per chunk) on the smaller text files.
      for (size_t c : {size_t{1}, size_t{100}, size_t{4096}, size_t{100'000}}) {
        ASSERT_TRUE(ReadBalFromMemory(bytes.data(), bytes.size(), path, Parallel(3, c),
                                      &parallel, &summary).ok());
        EXPECT_TRUE(summary.parallel);
        EXPECT_TRUE(SameScene(serial, parallel)) << path << " chunk " << c;
      }
    }
    if (bz2) {
      std::string text;
      ASSERT_TRUE(DecompressBz2Serial(bytes.data(), bytes.size(), path, &text).ok());
      Bz2Decoded decoded;
      std::string why;
      ASSERT_TRUE(TryDecompressBz2Parallel(bytes.data(), bytes.size(), {}, &decoded, &why))
          << why;
      EXPECT_EQ(decoded.Concatenate(), text);
      EXPECT_EQ(decoded.streams, 1);
      EXPECT_EQ(decoded.false_magics, 0);
      EXPECT_GT(decoded.blocks.size(), 1u);
    }
  }
  EXPECT_GE(files, 6);
}

TEST(BalParallel, TinyGtsamWithBlankLines) {
  const std::string dir = SharedDataDir() + "/bal/tiny_gtsam";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "shared BAL data not found under " << dir;
  for (const char* name : {"dubrovnik-1-1-pre.txt", "dubrovnik-3-7-pre.txt",
                           "dubrovnik-3-7-18-pre.txt"}) {
    const Status s = ExpectParallelMatchesSerial(ReadAll(dir + "/" + name), name, true);
    EXPECT_TRUE(s.ok()) << s.message();
  }
}

TEST(BalParallel, MalformedCorpusFailsWithTheSameMessages) {
  const std::string dir = std::string(TIEPOINT_TEST_DATA_DIR) + "/malformed";
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name == "README.md") continue;
    ++files;
    const std::string path = e.path().string();
    Scene serial, parallel;
    const Status s = ReadBal(path, Serial(), &serial);
    ASSERT_FALSE(s.ok()) << path;
    for (int threads : {1, 2, 3}) {
      const Status p = ReadBal(path, Parallel(threads, 0), &parallel);
      EXPECT_EQ(p.code(), s.code()) << path;
      EXPECT_EQ(p.message(), s.message()) << path;
    }
    EXPECT_FALSE(ExpectParallelMatchesSerial(ReadAll(path), path).ok());
  }
  EXPECT_GE(files, 20);
}

TEST(BalParallel, SyntheticTextAtEveryChunkBoundary) {
  for (bool awkward : {false, true}) {
    const std::string text = SyntheticBal(5, 60, 3, awkward ? 7 : 8, awkward);
    const Status s = ExpectParallelMatchesSerial(text, awkward ? "awkward.txt" : "plain.txt",
                                                 true);
    ASSERT_TRUE(s.ok()) << s.message();
    // Every chunk size from one byte to past the whole file, 2 threads.
    Scene serial;
    ASSERT_TRUE(ReadBalFromMemory(text.data(), text.size(), "t", Serial(), &serial).ok());
    for (size_t c = 1; c < text.size() + 10; c += (c < 200 ? 1 : 97)) {
      Scene parallel;
      BalReadSummary summary;
      ASSERT_TRUE(ReadBalFromMemory(text.data(), text.size(), "t", Parallel(2, c), &parallel,
                                    &summary).ok());
      ASSERT_TRUE(summary.parallel) << summary.fallback_reason;
      ASSERT_TRUE(SameScene(serial, parallel)) << "chunk " << c;
    }
  }
}

// A scene sized ahead from the header (as the .bz2 path does while the GPU decodes) gives
// the same scene; one sized for another header is not used; bad headers size nothing.
TEST(BalParallel, PresizedSceneGivesTheSameScene) {
  const std::string text = SyntheticBal(5, 60, 3, 8, false);
  Scene serial;
  ASSERT_TRUE(ReadBalFromMemory(text.data(), text.size(), "t", Serial(), &serial).ok());
  const std::vector<bal_internal::TextPiece> pieces = {{text.data(), text.size()}};
  Scene presized;
  ASSERT_TRUE(bal_internal::SizeSceneForHeader(text.substr(0, 200), text.size(), &presized));
  EXPECT_EQ(presized.obs_xy.size(), serial.obs_xy.size());
  EXPECT_EQ(presized.points.size(), serial.points.size());
  Scene parsed;
  std::string why;
  ASSERT_TRUE(bal_internal::ParseBalText(pieces, 2, 0, &parsed, &why, &presized)) << why;
  EXPECT_TRUE(SameScene(serial, parsed));
  EXPECT_TRUE(presized.obs_xy.empty());  // moved into the result

  Scene other;
  const std::string other_text = SyntheticBal(4, 50, 3, 8, false);
  ASSERT_TRUE(bal_internal::SizeSceneForHeader(other_text, other_text.size(), &other));
  Scene parsed2;
  ASSERT_TRUE(bal_internal::ParseBalText(pieces, 2, 0, &parsed2, &why, &other)) << why;
  EXPECT_TRUE(SameScene(serial, parsed2));
  EXPECT_FALSE(other.obs_xy.empty());  // not used

  Scene none;
  EXPECT_FALSE(bal_internal::SizeSceneForHeader("5 60 3", 1000, &none));         // no line end
  EXPECT_FALSE(bal_internal::SizeSceneForHeader("5 60\n3\n", 1000, &none));      // split header
  EXPECT_FALSE(bal_internal::SizeSceneForHeader("5 60 3\n", 10, &none));         // text too short
  EXPECT_FALSE(bal_internal::SizeSceneForHeader("5 60 999999\n", 1 << 30, &none));  // > c * p
  EXPECT_TRUE(none.obs_xy.empty() && none.points.empty());
}

TEST(BalParallel, ErrorsKeepFileAndLine) {
  const std::string good = SyntheticBal(3, 20, 2, 3, false);
  // Each: a replacement in the good text, and a fragment the message must hold.
  struct Case {
    std::string find, replace, fragment;
  };
  // Line 10 holds observation 9 ("<c> <p> <x> <y>").
  std::istringstream lines(good);
  std::vector<std::string> all;
  for (std::string l; std::getline(lines, l);) all.push_back(l);
  auto with_line = [&](size_t line, const std::string& text) {
    std::string out;
    for (size_t i = 0; i < all.size(); ++i) out += (i + 1 == line ? text : all[i]) + "\n";
    return out;
  };
  const std::string last_line_cut = good.substr(0, good.rfind('\n', good.size() - 2) + 1);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {with_line(10, "0 4 1.0\n2.0"), "t.txt:10: expected 4 values"},   // split observation
      {with_line(12, "7 5 1.0 2.0"), "t.txt:12: expected camera index"},  // out of range
      {with_line(30, "0 5 1.0"), "t.txt:30: expected 4 values"},          // short line
      {with_line(50, "nan"), "t.txt:50: expected finite number"},
      {with_line(61, "1e999"), "t.txt:61: expected finite number"},
      {good + "junk\n", "trailing data"},
      {last_line_cut, "file ends after 59"},
      {with_line(20, std::string(5000, '7')), "t.txt:20: expected"},     // overlong token
      {"\n\n3 20\n40\n", "t.txt:3: expected header"},
  };
  for (const auto& [text, fragment] : cases) {
    const Status s = ExpectParallelMatchesSerial(text, "t.txt");
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
  }
}

// ---------------------------------------------------------------------------------------
// bzip2.

TEST(Bz2Parallel, ScannerFindsMagicsAtEveryBitOffset) {
  for (int shift = 0; shift < 8; ++shift) {
    for (bool eos : {false, true}) {
      std::vector<unsigned char> buf(64, 0xA5);
      const uint64_t magic = eos ? 0x177245385090ULL : 0x314159265359ULL;
      const uint64_t at = 8 * 20 + shift;
      for (int b = 0; b < 48; ++b) {
        const uint64_t bit = at + b;
        const bool one = (magic >> (47 - b)) & 1;
        unsigned char& byte = buf[bit / 8];
        const unsigned char mask = static_cast<unsigned char>(0x80u >> (bit % 8));
        byte = one ? (byte | mask) : (byte & ~mask);
      }
      const std::vector<Bz2Magic> found = FindBz2Magics(buf.data(), buf.size(), 2);
      ASSERT_EQ(found.size(), 1u) << "shift " << shift;
      EXPECT_EQ(found[0].bit, at);
      EXPECT_EQ(found[0].end_of_stream, eos);
    }
  }
  // At the very end of the data, and cut short by it.
  const unsigned char tail[] = {0x00, 0x31, 0x41, 0x59, 0x26, 0x53, 0x59};
  EXPECT_EQ(FindBz2Magics(tail, sizeof(tail), 1).size(), 1u);
  EXPECT_EQ(FindBz2Magics(tail, sizeof(tail) - 1, 1).size(), 0u);
}

TEST(Bz2Parallel, ManyBlocksAndLevelsMatchLibbz2) {
  const std::string text = SyntheticBal(40, 2500, 4, 11, true);  // ~600 KB
  for (int level : {1, 2, 9}) {
    const std::string bz2 = Compress(text, level);
    for (int threads : {1, 2, 5}) {
      Bz2ParallelOptions options;
      options.num_threads = threads;
      Bz2Decoded decoded;
      std::string why;
      ASSERT_TRUE(TryDecompressBz2Parallel(bz2.data(), bz2.size(), options, &decoded, &why))
          << why;
      EXPECT_EQ(decoded.Concatenate(), text) << "level " << level;
      EXPECT_EQ(decoded.streams, 1);
      if (level == 1) EXPECT_GE(decoded.blocks.size(), 5u);
    }
    EXPECT_TRUE(ExpectParallelMatchesSerial(bz2, "many.bz2", true).ok());
  }
}

TEST(Bz2Parallel, ConcatenatedStreamsOfMixedLevels) {
  const std::string text = SyntheticBal(10, 2000, 3, 12, false);
  // Three streams cut mid-line, of levels 1, 9 and 3, and an empty stream.
  const size_t a = text.size() / 3 + 5, b = 2 * text.size() / 3 + 11;
  const std::string bz2 = Compress(text.substr(0, a), 1) + Compress("", 5) +
                          Compress(text.substr(a, b - a), 9) + Compress(text.substr(b), 3);
  EXPECT_EQ(SerialDecode(bz2), text);
  Bz2Decoded decoded;
  std::string why;
  ASSERT_TRUE(TryDecompressBz2Parallel(bz2.data(), bz2.size(), {}, &decoded, &why)) << why;
  EXPECT_EQ(decoded.streams, 4);
  EXPECT_EQ(decoded.Concatenate(), text);
  const Status s = ExpectParallelMatchesSerial(bz2, "multi.bz2", true);
  EXPECT_TRUE(s.ok()) << s.message();
}

TEST(Bz2Parallel, PlantedFalseMagicsAreMergedAway) {
  const std::string text = SyntheticBal(20, 4000, 3, 13, false);
  const std::string bz2 = Compress(text, 1);
  const auto* d = reinterpret_cast<const unsigned char*>(bz2.data());
  std::vector<Bz2Magic> magics = FindBz2Magics(d, bz2.size(), 2);
  ASSERT_GE(magics.size(), 4u);
  // False candidates inside blocks 0, 1 and 2 (one of them an end-of-stream magic), and
  // two in a row inside block 3.
  std::vector<Bz2Magic> planted = magics;
  for (int k = 0; k < 3; ++k) {
    const uint64_t mid = (magics[k].bit + magics[k + 1].bit) / 2 + 3;
    planted.push_back({mid, k == 1});
  }
  planted.push_back({magics[3].bit + 1000, false});
  planted.push_back({magics[3].bit + 2001, false});
  std::sort(planted.begin(), planted.end(),
            [](const Bz2Magic& x, const Bz2Magic& y) { return x.bit < y.bit; });
  for (int threads : {1, 3}) {
    Bz2ParallelOptions options;
    options.num_threads = threads;
    Bz2Decoded decoded;
    std::string why;
    ASSERT_TRUE(TryDecompressBz2ParallelWithMagics(bz2.data(), bz2.size(), planted, options,
                                                   &decoded, &why))
        << why;
    EXPECT_EQ(decoded.false_magics, 5);
    EXPECT_EQ(decoded.Concatenate(), text);
  }
  // The block magic's bytes ("1AY&SY") in the text itself are no trouble: compressed,
  // they are gone.
  const std::string planted_text = text + "1AY&SY1AY&SY\n";
  const std::string bz2_planted = Compress(planted_text, 1);
  Bz2Decoded decoded;
  ASSERT_TRUE(TryDecompressBz2Parallel(bz2_planted.data(), bz2_planted.size(), {}, &decoded));
  EXPECT_EQ(decoded.Concatenate(), planted_text);
}

TEST(Bz2Parallel, CorruptTruncatedAndTrailingFailLikeLibbz2) {
  const std::string text = SyntheticBal(20, 2000, 3, 14, false);
  const std::string bz2 = Compress(text, 1);
  const auto* d = reinterpret_cast<const unsigned char*>(bz2.data());
  const std::vector<Bz2Magic> magics = FindBz2Magics(d, bz2.size(), 1);
  ASSERT_GE(magics.size(), 5u);
  std::vector<std::pair<std::string, std::string>> bad;
  std::string corrupt = bz2;
  corrupt[static_cast<size_t>((magics[2].bit + magics[3].bit) / 16)] ^= 0x10;  // in block 2
  bad.push_back({corrupt, "corrupt block"});
  std::string crc = bz2;
  crc[static_cast<size_t>(magics[1].bit / 8 + 7)] ^= 0x01;  // block 1's stored CRC
  bad.push_back({crc, "block CRC"});
  std::string combined = bz2;
  combined[static_cast<size_t>(magics.back().bit / 8 + 8)] ^= 0x04;  // stream CRC
  bad.push_back({combined, "combined CRC"});
  bad.push_back({bz2.substr(0, bz2.size() / 2), "truncated"});
  bad.push_back({bz2.substr(0, bz2.size() - 3), "end marker cut"});
  bad.push_back({bz2 + "garbage!", "trailing garbage"});
  bad.push_back({bz2 + std::string(4, '\0'), "trailing zeros"});
  bad.push_back({"BZh9", "header only"});
  bad.push_back({"not bzip2 at all", "not bzip2"});
  for (const auto& [bytes, what] : bad) {
    Bz2Decoded decoded;
    std::string why;
    EXPECT_FALSE(TryDecompressBz2Parallel(bytes.data(), bytes.size(), {}, &decoded, &why))
        << what;
    EXPECT_FALSE(why.empty()) << what;
    std::string serial_out;
    const Status serial = DecompressBz2Serial(bytes.data(), bytes.size(), "bad.bz2", &serial_out);
    EXPECT_FALSE(serial.ok()) << what;
    EXPECT_NE(serial.message().find("bad.bz2"), std::string::npos) << serial.message();
    const Status s = DecompressBz2(bytes.data(), bytes.size(), "bad.bz2", {}, &decoded);
    EXPECT_EQ(s.message(), serial.message()) << what;
    // Through the BAL reader: fails naming the file, as the serial reader does.
    const Status r = ExpectParallelMatchesSerial(bytes, "bad.bz2");
    EXPECT_FALSE(r.ok()) << what;
    EXPECT_NE(r.message().find("bad.bz2"), std::string::npos) << r.message();
  }
}

TEST(Bz2Parallel, EmptyStreamAndEmptyText) {
  const std::string bz2 = Compress("", 9);
  Bz2Decoded decoded;
  ASSERT_TRUE(TryDecompressBz2Parallel(bz2.data(), bz2.size(), {}, &decoded));
  EXPECT_EQ(decoded.size, 0u);
  const Status s = ExpectParallelMatchesSerial(bz2, "empty.bz2");
  EXPECT_NE(s.message().find("empty file"), std::string::npos) << s.message();
}

TEST(BalParallel, OptionsAreChecked) {
  BalReadOptions o;
  o.num_threads = -1;
  Scene scene;
  const Status s = ReadBalFromMemory("0 0 0", 5, "x", o, &scene);
  EXPECT_EQ(s.code(), StatusCode::kInvalidOptions);
  Bz2ParallelOptions b;
  b.num_threads = -2;
  EXPECT_FALSE(b.Check().ok());
}

}  // namespace
}  // namespace tiepoint
