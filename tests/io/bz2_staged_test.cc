// The GPU's staged bzip2 algorithm (io/bz2_block.h), run on the CPU (and, where a GPU is
// present, on it: io/bz2_cuda.h), against libbz2: the same bytes for every input libbz2
// decodes, and a decline (never other bytes) for corrupted ones.
#include <bzlib.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "io/base/cuda_device.h"
#include "io/bz2_block.h"
#include "io/bz2_cuda.h"
#include "io/bz2_parallel.h"
#include "tests/common/bz2_compress.h"
#include "tests/common/shared_data.h"

namespace tiepoint {
namespace {

namespace fs = std::filesystem;

std::string Compress(const std::string& text, int level) {
  return testing::Bz2Compress(text, level);
}

std::string FileBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string SerialText(const std::string& bz2, bool* ok) {
  std::string out;
  *ok = DecompressBz2Serial(bz2.data(), bz2.size(), "x.bz2", &out).ok();
  return out;
}

// Inputs that reach every path: text with all byte values, long runs (RUNA/RUNB and the
// first run-length stage's counts up to 255), one byte repeated, random bytes, BAL-like
// text, a single byte.
std::vector<std::string> Inputs() {
  std::mt19937 rng(7);
  std::vector<std::string> in;
  std::string bal;
  for (int i = 0; bal.size() < 700000; ++i) {
    bal += std::to_string(i % 97) + " " + std::to_string(i) + "     " +
           std::to_string((rng() % 200000) / 1000.0 - 100.0) + " -1.000000000000000e+00\n";
  }
  in.push_back(bal);
  std::string runs;
  for (int i = 0; runs.size() < 400000; ++i) runs.append(1 + rng() % 700, char('a' + rng() % 3));
  in.push_back(runs);
  in.push_back(std::string(300000, 'z'));
  std::string random(200000, '\0');
  for (char& c : random) c = static_cast<char>(rng());
  in.push_back(random);
  std::string mixed;
  for (int i = 0; i < 5000; ++i) {
    mixed += "line " + std::to_string(rng() % 1000);
    mixed.append(rng() % 9, static_cast<char>(rng() % 256));
  }
  in.push_back(mixed);
  in.push_back("x");
  in.push_back("abcd");
  in.push_back("aaaa");
  in.push_back("aaaaa");
  return in;
}

TEST(Bz2Staged, CpuRunMatchesLibbz2) {
  int cases = 0;
  for (const std::string& text : Inputs()) {
    for (int level : {1, 9}) {
      const std::string bz2 = Compress(text, level);
      for (int segments : {1, 7, 1024}) {
        Bz2Decoded out;
        std::string why;
        ASSERT_TRUE(DecompressBz2StagedOnCpu(bz2.data(), bz2.size(), segments, &out, &why))
            << why << " (" << text.size() << " bytes, level " << level << ", " << segments
            << " segments)";
        EXPECT_EQ(out.Concatenate(), text) << text.size() << " bytes, level " << level;
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 9 * 2 * 3);
}

TEST(Bz2Staged, ConcatenatedStreamsAndEmptyInput) {
  const std::string a = Compress(std::string(250000, 'q') + "tail", 1);
  const std::string b = Compress("", 9);  // a stream with no block
  const std::string c = Compress("third stream\n", 5);
  const std::string all = a + b + c;
  Bz2Decoded out;
  std::string why;
  ASSERT_TRUE(DecompressBz2StagedOnCpu(all.data(), all.size(), 64, &out, &why)) << why;
  EXPECT_EQ(out.streams, 3);
  EXPECT_EQ(out.Concatenate(), std::string(250000, 'q') + "tail" + "third stream\n");
}

// A flipped bit or a cut anywhere: the staged decoder declines, or (where the damage
// misses everything checked, e.g. padding) gives exactly libbz2's bytes.
TEST(Bz2Staged, CorruptedInputsDeclineOrMatch) {
  std::mt19937 rng(11);
  std::string text;
  for (int i = 0; text.size() < 250000; ++i) text += std::to_string(rng() % 100000) + " ";
  const std::string bz2 = Compress(text, 1);
  int declined = 0, matched = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::string bad = bz2;
    if (trial % 3 == 0) {
      bad.resize(rng() % bad.size());
    } else {
      const size_t bit = rng() % (8 * bad.size());
      bad[bit / 8] = static_cast<char>(bad[bit / 8] ^ (1 << (bit % 8)));
    }
    Bz2Decoded out;
    std::string why;
    if (!DecompressBz2StagedOnCpu(bad.data(), bad.size(), 32, &out, &why)) {
      ++declined;
      continue;
    }
    bool ok = false;
    const std::string ref = SerialText(bad, &ok);
    ASSERT_TRUE(ok) << "staged decoder accepted a file libbz2 rejects (trial " << trial << ")";
    EXPECT_EQ(out.Concatenate(), ref);
    ++matched;
  }
  EXPECT_GT(declined, 250);
}

// bzip2's first run-length stage, decoded the plain way (runs of up to 4 from each reset
// point, a count byte after 4), with the CRC byte by byte: the reference for
// bz2_detail::UndoInitialRuns and Bz2Crc.
bool ReferenceRuns(const std::vector<uint8_t>& b, std::string* out) {
  out->clear();
  size_t i = 0;
  while (i < b.size()) {
    size_t r = 1;
    while (r < 4 && i + r < b.size() && b[i + r] == b[i]) ++r;
    out->append(r, static_cast<char>(b[i]));
    i += r;
    if (r == 4) {
      if (i == b.size()) return false;
      out->append(b[i], static_cast<char>(b[i - 1]));
      ++i;
    }
  }
  return true;
}

uint32_t ReferenceCrc(const std::string& s) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char c : s) crc = (crc << 8) ^ bz2::Bz2CrcEntry((crc >> 24) ^ c);
  return ~crc;
}

TEST(Bz2Staged, RunLengthStageAndCrcMatchTheReference) {
  std::mt19937 rng(3);
  int checked = 0, bad = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    // Few symbols, so that runs of 4 (and count bytes equal to the run byte) are common.
    std::vector<uint8_t> b(1 + rng() % (trial < 2000 ? 40 : 3000));
    const int symbols = 1 + static_cast<int>(rng() % 4);
    for (uint8_t& c : b) c = static_cast<uint8_t>(rng() % symbols);
    std::string expected;
    const bool valid = ReferenceRuns(b, &expected);
    std::string out;
    const uint32_t crc = valid ? ReferenceCrc(expected) : 0;
    const int32_t err =
        bz2_detail::UndoInitialRuns(b.data(), static_cast<int32_t>(b.size()), crc, &out);
    if (!valid) {
      EXPECT_EQ(err, bz2::kBadRuns) << "trial " << trial;
      ++bad;
      continue;
    }
    ASSERT_EQ(err, bz2::kOk) << "trial " << trial;
    ASSERT_EQ(out, expected) << "trial " << trial;
    EXPECT_EQ(bz2_detail::Bz2Crc(reinterpret_cast<const uint8_t*>(out.data()), out.size()), crc);
    EXPECT_EQ(bz2_detail::UndoInitialRuns(b.data(), static_cast<int32_t>(b.size()), crc ^ 1, &out),
              bz2::kCrcMismatch);
    ++checked;
  }
  EXPECT_GT(checked, 1000);
  EXPECT_GT(bad, 100);
  // The cases by hand: a count byte after 4; 4 equal bytes at the end with no count.
  std::string out;
  const std::vector<uint8_t> counted = {'a', 'a', 'a', 'a', 3, 'b'};
  ASSERT_EQ(bz2_detail::UndoInitialRuns(counted.data(), 6, ReferenceCrc("aaaaaaab"), &out),
            bz2::kOk);
  EXPECT_EQ(out, "aaaaaaab");
  const std::vector<uint8_t> cut = {'b', 'a', 'a', 'a', 'a'};
  EXPECT_EQ(bz2_detail::UndoInitialRuns(cut.data(), 5, 0, &out), bz2::kBadRuns);
}

// Stage 3 alone: a cycle cut into segments in every way gives the serial walk's bytes.
TEST(Bz2Staged, SegmentsReassembleTheWalk) {
  const std::string text = "banana bandana cabana " + std::string(40, 'n') + " panama";
  const std::string bz2 = Compress(text, 1);
  for (int segments = 1; segments <= 70; ++segments) {
    Bz2Decoded out;
    std::string why;
    ASSERT_TRUE(DecompressBz2StagedOnCpu(bz2.data(), bz2.size(), segments, &out, &why)) << why;
    ASSERT_EQ(out.Concatenate(), text) << segments << " segments";
  }
}

// The shared BAL .bz2 files (real, as BAL ships them), where present.
TEST(Bz2Staged, SharedFilesMatchLibbz2) {
  const std::string root = testing::SharedDataDir() + "/bal";
  if (!fs::is_directory(root)) GTEST_SKIP() << "shared BAL data not found under " << root;
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.path().extension() != ".bz2" || e.file_size() > (size_t{8} << 20)) continue;
    const std::string bytes = FileBytes(e.path());
    bool ok = false;
    const std::string ref = SerialText(bytes, &ok);
    ASSERT_TRUE(ok) << e.path();
    Bz2Decoded out;
    std::string why;
    ASSERT_TRUE(DecompressBz2StagedOnCpu(bytes.data(), bytes.size(), 256, &out, &why))
        << e.path() << ": " << why;
    EXPECT_EQ(out.Concatenate(), ref) << e.path();
    if (++files == 3) break;
  }
  if (files == 0) GTEST_SKIP() << "no .bz2 under 8 MB in " << root;
}

// The GPU decoder against libbz2 (skips without a GPU).
TEST(Bz2Cuda, MatchesLibbz2) {
  std::vector<CudaDeviceInfo> devices;
  if (!QueryCudaDevices(&devices).ok()) GTEST_SKIP() << "no CUDA device";
  std::string all;
  std::string expected;
  for (const std::string& text : Inputs()) {
    all += Compress(text, 1 + static_cast<int>(all.size() % 9));
    expected += text;
  }
  for (int segments : {1, 3, 1024}) {
    Bz2CudaOptions options;
    options.segments = segments;
    Bz2Decoded out;
    std::string why;
    ASSERT_TRUE(TryDecompressBz2Cuda(all.data(), all.size(), options, &out, &why)) << why;
    EXPECT_EQ(out.Concatenate(), expected) << segments << " segments";
  }
  // Small batches: many device passes.
  Bz2CudaOptions small;
  small.memory_bytes = size_t{12} << 20;
  Bz2Decoded out;
  std::string why;
  ASSERT_TRUE(TryDecompressBz2Cuda(all.data(), all.size(), small, &out, &why)) << why;
  EXPECT_EQ(out.Concatenate(), expected);
  // Corrupted: declines, or libbz2's bytes.
  std::mt19937 rng(5);
  int declined = 0;
  for (int trial = 0; trial < 40; ++trial) {
    std::string bad = all;
    const size_t bit = rng() % (8 * bad.size());
    bad[bit / 8] = static_cast<char>(bad[bit / 8] ^ (1 << (bit % 8)));
    Bz2Decoded o;
    if (!TryDecompressBz2Cuda(bad.data(), bad.size(), {}, &o, &why)) {
      ++declined;
      continue;
    }
    bool ok = false;
    const std::string ref = SerialText(bad, &ok);
    ASSERT_TRUE(ok) << "GPU decoder accepted a file libbz2 rejects";
    EXPECT_EQ(o.Concatenate(), ref);
  }
  EXPECT_GT(declined, 30);
}

// The fuzz corpora (tests/fuzz/corpus/bz2_staged and bal_bz2: damaged streams that reached
// new code in the CPU run of the same stages) through the GPU kernels: each declines or
// gives libbz2's bytes. Run under compute-sanitizer on the device machine, this is the
// kernels' bounds check on malformed input.
TEST(Bz2Cuda, FuzzCorporaDeclineOrMatch) {
  std::vector<CudaDeviceInfo> devices;
  if (!QueryCudaDevices(&devices).ok()) GTEST_SKIP() << "no CUDA device";
  int declined = 0, matched = 0;
  for (const char* name : {"bz2_staged", "bal_bz2"}) {
    const fs::path dir = fs::path(TIEPOINT_TEST_DATA_DIR) / ".." / "fuzz" / "corpus" / name;
    ASSERT_TRUE(fs::is_directory(dir)) << dir;
    for (const auto& entry : fs::directory_iterator(dir)) {
      const std::string bytes = FileBytes(entry.path());
      for (int segments : {3, 1024}) {
        Bz2CudaOptions options;
        options.segments = segments;
        Bz2Decoded out;
        std::string why;
        if (!TryDecompressBz2Cuda(bytes.data(), bytes.size(), options, &out, &why)) {
          EXPECT_FALSE(why.empty()) << entry.path();
          ++declined;
          continue;
        }
        bool ok = false;
        const std::string ref = SerialText(bytes, &ok);
        ASSERT_TRUE(ok) << entry.path() << ": the GPU decoder accepted a file libbz2 rejects";
        EXPECT_EQ(out.Concatenate(), ref) << entry.path();
        ++matched;
      }
    }
  }
  std::printf("fuzz corpora on the GPU: %d runs matched libbz2, %d declined\n", matched, declined);
  EXPECT_GT(matched, 0);
  EXPECT_GT(declined, 300);
}

}  // namespace
}  // namespace tiepoint
