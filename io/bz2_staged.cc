// The CPU run of the GPU's staged bzip2 algorithm, and the GPU decoder's host helpers.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <memory>
#include <new>

#include "io/bz2_block.h"
#include "io/bz2_cuda.h"

namespace tiepoint {
namespace {

bool Fail(const std::string& reason, std::string* why) {
  if (why != nullptr) *why = reason;
  return false;
}

}  // namespace

bool DecompressBz2StagedOnCpu(const char* data, size_t size, int segments, Bz2Decoded* out,
                              std::string* why) {
  *out = Bz2Decoded();
  const auto* d = reinterpret_cast<const unsigned char*>(data);
  Bz2BlockPlan plan;
  if (!PlanBz2Blocks(d, size, FindBz2Magics(d, size, 1), &plan, why)) return false;
  auto tables = std::make_unique<bz2::Bz2Tables>();
  std::vector<uint8_t> selectors(bz2::kMaxSelectors), ll, walked;
  std::vector<uint32_t> tt;
  std::vector<int32_t> heads(segments), lengths(segments), offsets(segments);
  std::vector<int> next(segments);
  for (size_t i = 0; i < plan.blocks.size(); ++i) {
    const Bz2BlockPlan::Block& b = plan.blocks[i];
    const std::string where = "block at bit " + std::to_string(b.begin);
    ll.assign(static_cast<size_t>(b.level) * 100000, 0);
    bz2::Bz2BlockInfo info;
    int32_t err = bz2::DecodeBlockSymbols(d, size, b.begin, b.end, b.level, tables.get(),
                                          selectors.data(), ll.data(), &info);
    if (err != bz2::kOk) return Fail(where + ": stage 1 error " + std::to_string(err), why);
    if (info.stored_crc != b.crc) return Fail(where + ": CRC read twice differs", why);
    tt.assign(static_cast<size_t>(info.n), 0);
    int32_t starts[256];
    bz2::ByteStarts(ll.data(), info.n, starts);
    bz2::ScatterNext(ll.data(), info.n, starts, tt.data());
    const int32_t p0 = static_cast<int32_t>(bz2::FirstPosition(tt.data(), info.orig_ptr));
    const int32_t step = bz2::SegmentStep(info.n, segments);
    for (int32_t j = 0; j < info.n; ++j) {
      tt[j] = bz2::CompleteEntry(tt[j], ll[j], bz2::IsSegmentHead(j, step, p0, segments));
    }
    for (int s = 0; s < segments; ++s) {
      heads[s] = bz2::SegmentHead(s, step, info.n, p0);
      if (heads[s] >= 0) {
        bz2::WalkSegment(tt.data(), info.n, p0, step, heads[s], nullptr, &lengths[s], &next[s]);
      }
    }
    err = bz2::ChainSegments(lengths.data(), next.data(), heads.data(), segments, info.n,
                             offsets.data());
    if (err != bz2::kOk) return Fail(where + ": stage 3 error " + std::to_string(err), why);
    walked.assign(static_cast<size_t>(info.n), 0);
    for (int s = 0; s < segments; ++s) {
      if (heads[s] < 0) continue;
      int32_t len = 0;
      int nx = 0;
      bz2::WalkSegment(tt.data(), info.n, p0, step, heads[s], walked.data() + offsets[s], &len,
                       &nx);
    }
    std::string block;
    err = bz2_detail::UndoInitialRuns(walked.data(), info.n, b.crc, &block);
    if (err != bz2::kOk) return Fail(where + ": stage 4 error " + std::to_string(err), why);
    out->size += block.size();
    out->blocks.push_back(std::move(block));
  }
  out->streams = plan.streams;
  return true;
}

namespace bz2_detail {

namespace {

// bzip2's CRC eight bytes at a time: table[k][x] is the CRC state change of byte x
// followed by k zero bytes.
struct CrcTables {
  uint32_t t[8][256];
  CrcTables() {
    for (uint32_t i = 0; i < 256; ++i) t[0][i] = bz2::Bz2CrcEntry(i);
    for (int k = 1; k < 8; ++k) {
      for (int i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] << 8) ^ t[0][t[k - 1][i] >> 24];
    }
  }
};

const CrcTables& Crc() {
  static const CrcTables tables;
  return tables;
}

}  // namespace

uint32_t Bz2Crc(const uint8_t* p, size_t n) {
  const auto& T = Crc().t;
  uint32_t crc = 0xffffffffu;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint32_t hi = crc ^ ((uint32_t{p[i]} << 24) | (uint32_t{p[i + 1]} << 16) |
                               (uint32_t{p[i + 2]} << 8) | p[i + 3]);
    crc = T[7][hi >> 24] ^ T[6][(hi >> 16) & 0xff] ^ T[5][(hi >> 8) & 0xff] ^ T[4][hi & 0xff] ^
          T[3][p[i + 4]] ^ T[2][p[i + 5]] ^ T[1][p[i + 6]] ^ T[0][p[i + 7]];
  }
  for (; i < n; ++i) crc = (crc << 8) ^ T[0][(crc >> 24) ^ p[i]];
  return ~crc;
}

// The first j >= i with b[j] == b[j + 1] == b[j + 2] == b[j + 3] (j + 3 < n), or n.
// Eight windows at a time: byte m of v is zero exactly where window k + m is one.
int32_t FirstRunOfFour(const uint8_t* b, int32_t i, int32_t n) {
  constexpr uint64_t kLow7 = 0x7f7f7f7f7f7f7f7fULL;
  int32_t k = i;
  for (; k + 11 <= n; k += 8) {
    uint64_t x, y, z, w;
    std::memcpy(&x, b + k, 8);
    std::memcpy(&y, b + k + 1, 8);
    std::memcpy(&z, b + k + 2, 8);
    std::memcpy(&w, b + k + 3, 8);
    const uint64_t v = (x ^ y) | (x ^ z) | (x ^ w);
    const uint64_t zero = ~(((v & kLow7) + kLow7) | v | kLow7);  // 0x80 where a byte is 0
    if (zero != 0) return k + (__builtin_ctzll(zero) >> 3);    // little-endian: lowest first
  }
  for (; k + 3 < n; ++k) {
    if (b[k] == b[k + 1] && b[k] == b[k + 2] && b[k] == b[k + 3]) return k;
  }
  return n;
}

int32_t UndoInitialRuns(const uint8_t* b, int32_t n, uint32_t stored_crc, std::string* out) {
  // libbz2's unRLE_obuf_to_output_FAST reads runs of up to 4 equal bytes from each reset
  // point and, after 4, a count byte, then resets; 4 equal bytes with no count byte after
  // them make it fail. The first window of 4 equal bytes from a reset point starts a run
  // (a window starting inside an earlier run would make that run reach 4 first), so the
  // bytes before it are copied as they are.
  // BAL text has a run of 4 spaces on every observation line, so spans between runs are
  // short: they are copied 8 bytes at a time into a buffer with room to spare.
  size_t cap = RunsCapacity(n);
  out->resize(cap);
  size_t o = 0;
  auto room = [&](size_t need) {
    if (o + need + 8 > cap) {
      cap = 2 * cap + need + 8;
      out->resize(cap);
    }
  };
  int32_t i = 0;
  while (i < n) {
    const int32_t j = FirstRunOfFour(b, i, n);
    const int32_t end = j == n ? n : j + 4;
    const size_t span = static_cast<size_t>(end - i);
    room(span);
    char* dst = &(*out)[o];
    if (end + 8 <= n) {  // whole words, the last one past the span (overwritten later)
      for (size_t k = 0; k < span; k += 8) std::memcpy(dst + k, b + i + k, 8);
    } else {
      std::memcpy(dst, b + i, span);
    }
    o += span;
    if (j == n) break;
    if (j + 4 >= n) return bz2::kBadRuns;  // the count byte is missing
    const size_t count = b[j + 4];
    room(count);
    std::memset(&(*out)[o], b[j], count);
    o += count;
    i = j + 5;
  }
  out->resize(o);
  if (Bz2Crc(reinterpret_cast<const uint8_t*>(out->data()), out->size()) != stored_crc) {
    return bz2::kCrcMismatch;
  }
  return bz2::kOk;
}

void ResizeBlocks(std::vector<std::string>* blocks, size_t first, int count, size_t bytes,
                  int threads) {
  std::atomic<bool> failed{false};
#pragma omp parallel for schedule(dynamic, 8) num_threads(threads)
  for (int i = 0; i < count; ++i) {
    try {  // no exception may leave an OpenMP region
      (*blocks)[first + static_cast<size_t>(i)].resize(bytes);
    } catch (const std::exception&) {
      failed = true;
    }
  }
  if (failed) throw std::bad_alloc();
}

int Threads(int requested) { return requested > 0 ? requested : omp_get_max_threads(); }

int32_t UndoBlocks(const uint8_t* walked, size_t slot, const int32_t* n, const int32_t* crcs,
                   int count, int threads, std::string* blocks, int* failed) {
  std::vector<int32_t> errors(static_cast<size_t>(count), bz2::kOk);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int i = 0; i < count; ++i) {
    try {  // no exception may leave an OpenMP region
      errors[i] = UndoInitialRuns(walked + static_cast<size_t>(i) * slot, n[i],
                                  static_cast<uint32_t>(crcs[i]), &blocks[i]);
    } catch (const std::exception&) {
      errors[i] = bz2::kNotRun;
    }
  }
  for (int i = 0; i < count; ++i) {
    if (errors[i] != bz2::kOk) {
      *failed = i;
      return errors[i];
    }
  }
  return bz2::kOk;
}

}  // namespace bz2_detail

}  // namespace tiepoint
