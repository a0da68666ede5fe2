// One bzip2 block decoded in stages that a GPU can run for many blocks at once
// (io/bz2_cuda.cu), written as plain functions that the CPU tests run too
// (tests/io/bz2_block_test.cc compares them with libbz2).
//
// The stages, for the block whose bits are [begin, end) of the file (begin at its 48-bit
// block magic, end at the next magic), as libbz2's decompress.c reads it:
//  1. DecodeBlockSymbols: the header (CRC, randomised bit, origPtr, the used-byte map,
//     Huffman groups, MTF-coded selectors, delta-coded code lengths), then the Huffman
//     symbols, RUNA/RUNB zero runs and move-to-front: the Burrows-Wheeler-transformed
//     bytes `ll`. Every check libbz2 makes fails it too; it also fails
//     unless the block ends exactly at `end` (what libbz2 sees as the next magic).
//  2. ScatterNext and CompleteEntry: the inverse-BWT vector tt (tt[i] low byte: ll[i];
//     bits 8-27: the next position), as libbz2's "fast" mode builds it.
//  3. The walk p_0 = tt[origPtr] >> 8, p_{k+1} = tt[p_k] >> 8 gives byte k = tt[p_k] & 0xff.
//     It is one cycle over all n positions, cut into segments at fixed positions (bit 31
//     of tt marks a segment's first position: IsSegmentHead); WalkSegment measures or
//     writes one segment, ChainSegments orders them from p_0 and places each: segments
//     walk concurrently where libbz2 walks the n steps one after the other.
//  4. bzip2's first run-length stage (4 equal bytes and a count byte) undone and the
//     block CRC checked: on the CPU (bz2_detail::UndoInitialRuns in io/bz2_cuda.h), which
//     writes the host's blocks anyway.
// A function returns a Bz2BlockError; anything but kOk means "decline": the caller
// decodes the file with libbz2, which gives the authoritative bytes or message.
#pragma once

#include <cstdint>

#include "io/base/host_device.h"

namespace tiepoint {
namespace bz2 {

constexpr int kMaxGroups = 6;
constexpr int kMaxAlphabet = 258;
constexpr int kMaxCodeLength = 20;  // libbz2 rejects longer codes
constexpr int kTableLength = 23;    // libbz2's BZ_MAX_CODE_LEN: limit/base array length
constexpr int kMaxSelectors = 18002;
constexpr int kGroupSize = 50;
constexpr uint32_t kHeadFlag = 0x80000000u;
constexpr uint32_t kNextMask = 0x0fffff00u;  // positions < 2^20 > 900,000

enum Bz2BlockError : int32_t {
  kOk = 0,
  kRandomised = 1,   // a block of bzip2 0.9.0's randomised mode: libbz2 decodes it
  kBadHeader = 2,    // origPtr, map, group or selector fields out of range
  kBadCodeLengths = 3,
  kBadSymbol = 4,    // a code no table holds, or a run too long
  kTooLong = 5,      // more bytes than the level allows
  kBadCounts = 6,    // origPtr past the block, or counts that do not add up
  kNotAtEnd = 7,     // the block does not end where the next magic starts
  kBrokenCycle = 8,  // the inverse BWT is not one cycle
  kBadRuns = 9,      // the first run-length stage reads past the block
  kCrcMismatch = 10,
  kNotRun = 11,      // set by the caller for blocks it did not decode
};

// Codes of up to kFastBits bits decode with one look-up (Huffman codes of text are short).
constexpr int kFastBits = 9;

// The per-block tables DecodeBlockSymbols works in (about 12 KB: shared memory on the GPU).
struct Bz2Tables {
  int32_t limit[kMaxGroups][kTableLength];
  int32_t base[kMaxGroups][kTableLength];
  uint16_t perm[kMaxGroups][kMaxAlphabet];
  uint8_t length[kMaxGroups][kMaxAlphabet];
  // Per group and next kFastBits bits: symbol << 5 | code length; 0: a longer code;
  // kFastError: no code (the data is corrupt).
  uint16_t fast[kMaxGroups][1 << kFastBits];
  int32_t min_length[kMaxGroups];
  // The move-to-front list of byte values, four to a word: entry k is byte k % 4 (from
  // the low end) of mtf[k / 4], so that a move shifts words, not bytes.
  uint32_t mtf[64];
  uint8_t seq_to_unseq[256];
};
constexpr uint16_t kFastError = 31;

// What stage 1 learns about a block.
struct Bz2BlockInfo {
  uint32_t stored_crc = 0;
  int32_t orig_ptr = 0;
  int32_t n = 0;  // bytes of ll
};

// Reads bits MSB first from a byte array, bytes past `size` as zero.
class Bz2BitReader {
 public:
  TIEPOINT_HOST_DEVICE Bz2BitReader(const uint8_t* data, uint64_t size, uint64_t bit)
      : data_(data), size_(size), byte_(bit >> 3), consumed_(bit) {
    const int skip = static_cast<int>(bit & 7);
    buffer_ = byte_ < size_ ? (data_[byte_] & (0xffu >> skip)) : 0;
    count_ = 8 - skip;
    ++byte_;
  }
  // 32 more bits (count_ < 32 before): four loads issued together, not one after another.
  TIEPOINT_HOST_DEVICE void Refill() {
    uint32_t word;
    if (byte_ + 4 <= size_) {
      const uint32_t b0 = data_[byte_], b1 = data_[byte_ + 1], b2 = data_[byte_ + 2],
                     b3 = data_[byte_ + 3];
      word = b0 << 24 | b1 << 16 | b2 << 8 | b3;
    } else {
      word = 0;
      for (int k = 0; k < 4; ++k) {
        word = word << 8 | (byte_ + k < size_ ? data_[byte_ + k] : 0u);
      }
    }
    buffer_ = buffer_ << 32 | word;
    byte_ += 4;
    count_ += 32;
  }
  // The next n <= 32 bits, not consumed.
  TIEPOINT_HOST_DEVICE uint32_t Peek(int n) {
    if (count_ < n) Refill();
    return static_cast<uint32_t>((buffer_ >> (count_ - n)) & ((uint64_t{1} << n) - 1));
  }
  TIEPOINT_HOST_DEVICE void Skip(int n) {
    count_ -= n;
    consumed_ += static_cast<uint64_t>(n);
  }
  TIEPOINT_HOST_DEVICE uint32_t Get(int n) {
    const uint32_t v = Peek(n);
    Skip(n);
    return v;
  }
  TIEPOINT_HOST_DEVICE uint64_t position() const { return consumed_; }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t byte_;      // next byte to load
  uint64_t buffer_ = 0;
  int count_ = 0;      // valid bits at the bottom of buffer_
  uint64_t consumed_;  // absolute bit position of the next bit
};

// bzip2's CRC-32 (polynomial 0x04c11db7, MSB first) table entry.
TIEPOINT_HOST_DEVICE inline uint32_t Bz2CrcEntry(uint32_t i) {
  uint32_t c = i << 24;
  for (int k = 0; k < 8; ++k) c = (c & 0x80000000u) ? (c << 1) ^ 0x04c11db7u : (c << 1);
  return c;
}

// libbz2's hbCreateDecodeTables for one group.
TIEPOINT_HOST_DEVICE inline void MakeDecodeTable(const uint8_t* length, int alphabet,
                                                 int min_len, int max_len, int32_t* limit,
                                                 int32_t* base, uint16_t* perm) {
  int pp = 0;
  for (int i = min_len; i <= max_len; ++i) {
    for (int j = 0; j < alphabet; ++j) {
      if (length[j] == i) perm[pp++] = static_cast<uint16_t>(j);
    }
  }
  for (int j = pp; j < kMaxAlphabet; ++j) perm[j] = 0xffff;  // no symbol: rejected below
  for (int i = 0; i < kTableLength; ++i) base[i] = 0;
  for (int i = 0; i < alphabet; ++i) base[length[i] + 1]++;
  for (int i = 1; i < kTableLength; ++i) base[i] += base[i - 1];
  for (int i = 0; i < kTableLength; ++i) limit[i] = 0;
  int32_t vec = 0;
  for (int i = min_len; i <= max_len; ++i) {
    vec += base[i + 1] - base[i];
    limit[i] = vec - 1;
    vec <<= 1;
  }
  for (int i = min_len + 1; i <= max_len; ++i) base[i] = ((limit[i - 1] + 1) << 1) - base[i];
}

// The canonical decode of libbz2 (GET_MTF_VAL) for the code at the top of the 20 bits
// `w`, trying lengths from `from`: the symbol and *length, kFastError as *length where no
// code matches, -1 where every length up to `to` was tried without a match.
TIEPOINT_HOST_DEVICE inline int CanonicalDecode(const Bz2Tables* t, int g, uint32_t w,
                                                int from, int to, int* length) {
  for (int len = from; len <= to; ++len) {
    const int32_t code = static_cast<int32_t>(w >> (kMaxCodeLength - len));
    if (code <= t->limit[g][len]) {
      const int32_t k = code - t->base[g][len];
      if (k < 0 || k >= kMaxAlphabet || t->perm[g][k] == 0xffff) {
        *length = kFastError;
        return 0;
      }
      *length = len;
      return t->perm[g][k];
    }
  }
  *length = to == kMaxCodeLength ? static_cast<int>(kFastError) : -1;
  return 0;
}

// Fills t->fast[g] from the canonical decode, so that both give the same symbols.
TIEPOINT_HOST_DEVICE inline void MakeFastTable(Bz2Tables* t, int g) {
  for (uint32_t prefix = 0; prefix < (1u << kFastBits); ++prefix) {
    int length = 0;
    const int sym = CanonicalDecode(t, g, prefix << (kMaxCodeLength - kFastBits),
                                    t->min_length[g], kFastBits, &length);
    t->fast[g][prefix] = length < 0 ? uint16_t{0}
                         : length == kFastError ? kFastError
                                                : static_cast<uint16_t>((sym << 5) | length);
  }
}

// Moves entry nn of the move-to-front list (Bz2Tables::mtf) to the front; returns it.
TIEPOINT_HOST_DEVICE inline uint8_t MoveToFront(uint32_t* list, int nn) {
  const int w = nn >> 2;
  const int r = nn & 3;
  const uint32_t word = list[w];
  const uint32_t v = (word >> (8 * r)) & 0xffu;
  // Bytes 0..r of word w move up one; into byte 0 comes the last byte of the word below.
  const uint32_t carry = w > 0 ? list[w - 1] >> 24 : v;
  const uint32_t keep = r == 3 ? 0u : 0xffffffffu << (8 * (r + 1));
  list[w] = (word & keep) | ((word << 8 | carry) & ~keep);
  for (int k = w - 1; k > 0; --k) list[k] = list[k] << 8 | list[k - 1] >> 24;
  if (w > 0) list[0] = list[0] << 8 | v;
  return static_cast<uint8_t>(v);
}

// Writes `count` copies of `byte` from `out`: words where aligned (GPU global stores of
// one byte each are the slow part of long runs).
TIEPOINT_HOST_DEVICE inline void FillRun(uint8_t* out, int32_t count, uint8_t byte) {
#ifdef __CUDA_ARCH__
  int32_t k = 0;
  for (; k < count && (reinterpret_cast<uintptr_t>(out + k) & 3) != 0; ++k) out[k] = byte;
  const uint32_t quad = 0x01010101u * byte;
  for (; k + 4 <= count; k += 4) *reinterpret_cast<uint32_t*>(out + k) = quad;
  for (; k < count; ++k) out[k] = byte;
#else
  for (int32_t k = 0; k < count; ++k) out[k] = byte;
#endif
}

// Stage 1. `selectors` holds kMaxSelectors bytes of scratch; `ll` room for level x
// 100,000 bytes. On kOk, info is filled.
TIEPOINT_HOST_DEVICE inline int32_t DecodeBlockSymbols(const uint8_t* data, uint64_t size,
                                                       uint64_t begin, uint64_t end, int level,
                                                       Bz2Tables* t, uint8_t* selectors,
                                                       uint8_t* ll, Bz2BlockInfo* info) {
  Bz2BitReader in(data, size, begin + 48);
  info->stored_crc = in.Get(32);
  if (in.Get(1) != 0) return kRandomised;
  const int32_t orig_ptr = static_cast<int32_t>(in.Get(24));
  if (orig_ptr > 10 + 100000 * level) return kBadHeader;
  info->orig_ptr = orig_ptr;

  // The map of the bytes used.
  const uint32_t used16 = in.Get(16);
  int in_use = 0;
  for (int i = 0; i < 16; ++i) {
    if (!(used16 & (0x8000u >> i))) continue;
    const uint32_t used = in.Get(16);
    for (int j = 0; j < 16; ++j) {
      if (used & (0x8000u >> j)) t->seq_to_unseq[in_use++] = static_cast<uint8_t>(16 * i + j);
    }
  }
  if (in_use == 0) return kBadHeader;
  const int alphabet = in_use + 2;

  const int groups = static_cast<int>(in.Get(3));
  if (groups < 2 || groups > kMaxGroups) return kBadHeader;
  int num_selectors = static_cast<int>(in.Get(15));
  if (num_selectors < 1) return kBadHeader;
  {
    uint8_t order[kMaxGroups];
    for (int g = 0; g < groups; ++g) order[g] = static_cast<uint8_t>(g);
    for (int i = 0; i < num_selectors; ++i) {
      int j = 0;
      while (in.Get(1) != 0) {
        if (++j >= groups) return kBadHeader;
      }
      // Selectors past libbz2's limit are read and dropped, as libbz2 does.
      if (i < kMaxSelectors) {
        const uint8_t v = order[j];
        for (; j > 0; --j) order[j] = order[j - 1];
        order[0] = v;
        selectors[i] = v;
      }
    }
    if (num_selectors > kMaxSelectors) num_selectors = kMaxSelectors;
  }

  // Code lengths, then the decode tables.
  for (int g = 0; g < groups; ++g) {
    int curr = static_cast<int>(in.Get(5));
    int min_len = 32, max_len = 0;
    for (int i = 0; i < alphabet; ++i) {
      for (;;) {
        if (curr < 1 || curr > kMaxCodeLength) return kBadCodeLengths;
        if (in.Get(1) == 0) break;
        curr += in.Get(1) == 0 ? 1 : -1;
      }
      t->length[g][i] = static_cast<uint8_t>(curr);
      if (curr > max_len) max_len = curr;
      if (curr < min_len) min_len = curr;
    }
    MakeDecodeTable(t->length[g], alphabet, min_len, max_len, t->limit[g], t->base[g],
                    t->perm[g]);
    t->min_length[g] = min_len;
    MakeFastTable(t, g);
  }

  // The symbols.
  const int eob = in_use + 1;
  const int32_t max_n = 100000 * level;
  for (int i = 0; i < 64; ++i) {
    uint32_t word = 0;
    for (int k = 3; k >= 0; --k) {
      word = word << 8 | t->seq_to_unseq[4 * i + k < in_use ? 4 * i + k : 0];
    }
    t->mtf[i] = word;
  }
  int32_t n = 0;
  int group_no = -1, group_pos = 0, sel = 0;
  // The next Huffman symbol.
  auto next_symbol = [&](int* sym) -> int32_t {
    if (group_pos == 0) {
      if (++group_no >= num_selectors) return kBadSymbol;
      group_pos = kGroupSize;
      sel = selectors[group_no];
    }
    --group_pos;
    const uint32_t w = in.Peek(kMaxCodeLength);
    const uint16_t e = t->fast[sel][w >> (kMaxCodeLength - kFastBits)];
    int len = e & 31;
    if (e != 0) {
      *sym = e >> 5;
    } else {
      *sym = CanonicalDecode(t, sel, w, t->min_length[sel] > kFastBits ? t->min_length[sel]
                                                                       : kFastBits + 1,
                             kMaxCodeLength, &len);
    }
    if (len == kFastError) return kBadSymbol;
    in.Skip(len);
    return kOk;
  };
  int sym = 0;
  int32_t err = next_symbol(&sym);
  if (err != kOk) return err;
  for (;;) {
    if (sym == eob) break;
    if (sym > eob) return kBadSymbol;
    if (sym <= 1) {  // RUNA / RUNB: a run of the front byte
      int32_t es = -1;
      int32_t weight = 1;
      do {
        if (weight >= 2 * 1024 * 1024) return kBadSymbol;
        es += (sym + 1) * weight;
        weight <<= 1;
        if ((err = next_symbol(&sym)) != kOk) return err;
      } while (sym <= 1);
      ++es;
      const uint8_t uc = static_cast<uint8_t>(t->mtf[0] & 0xffu);
      if (es > max_n - n) return kTooLong;
      FillRun(ll + n, es, uc);
      n += es;
      continue;
    }
    if (n >= max_n) return kTooLong;
    const int nn = sym - 1;
    // The next symbol's decode first: it does not depend on the list, so its loads and
    // the list's overlap (the GPU issues in order and waits only where a value is used).
    err = next_symbol(&sym);
    ll[n++] = MoveToFront(t->mtf, nn);
    if (err != kOk) return err;
  }
  if (in.position() != end) return kNotAtEnd;
  if (orig_ptr >= n) return kBadCounts;
  info->n = n;
  return kOk;
}

// The start of each byte value's run in sorted order (libbz2's cftab): starts[c] = the
// number of bytes below c.
TIEPOINT_HOST_DEVICE inline void ByteStarts(const uint8_t* ll, int32_t n, int32_t* starts) {
  for (int c = 0; c < 256; ++c) starts[c] = 0;
  for (int32_t i = 0; i < n; ++i) starts[ll[i]]++;
  int32_t sum = 0;
  for (int c = 0; c < 256; ++c) {
    const int32_t k = starts[c];
    starts[c] = sum;
    sum += k;
  }
}

// Stage 2, in two parts. ScatterNext: bits 8-27 of tt (the next position), as libbz2's
// "fast" mode builds them (advancing the starts); stores only, so that one GPU thread
// never waits on a load of tt. CompleteEntry then adds the byte (and the segment-head
// flag, see stage 3) to each entry: independent positions, all threads.
TIEPOINT_HOST_DEVICE inline void ScatterNext(const uint8_t* ll, int32_t n, int32_t* starts,
                                             uint32_t* tt) {
  for (int32_t i = 0; i < n; ++i) tt[starts[ll[i]]++] = static_cast<uint32_t>(i) << 8;
}
TIEPOINT_HOST_DEVICE inline uint32_t CompleteEntry(uint32_t next, uint8_t byte, bool head) {
  return next | byte | (head ? kHeadFlag : 0u);
}

// Stage 3. Segment s (0 <= s < segments) starts at position s * step (s > 0) or at p_0
// (s == 0, the cycle's start); the step is n / segments rounded up.
TIEPOINT_HOST_DEVICE inline int32_t SegmentStep(int32_t n, int segments) {
  return (n + segments - 1) / segments;
}
// The first position of segment s, -1 where it has none (past n, or the same as p_0).
TIEPOINT_HOST_DEVICE inline int32_t SegmentHead(int s, int32_t step, int32_t n, int32_t p0) {
  if (s == 0) return p0;
  const int64_t h = static_cast<int64_t>(s) * step;
  if (h >= n || h == p0) return -1;
  return static_cast<int32_t>(h);
}
// p_0: valid once ScatterNext has run.
TIEPOINT_HOST_DEVICE inline uint32_t FirstPosition(const uint32_t* tt, int32_t orig_ptr) {
  return (tt[orig_ptr] & kNextMask) >> 8;
}
// Whether position j (< n) heads a segment: p_0, or s * step for 0 < s < segments.
TIEPOINT_HOST_DEVICE inline bool IsSegmentHead(int32_t j, int32_t step, int32_t p0,
                                               int segments) {
  if (j == p0) return true;
  if (j % step != 0) return false;
  const int32_t s = j / step;
  return s >= 1 && s < segments;
}
// The segment a marked position heads.
TIEPOINT_HOST_DEVICE inline int SegmentOf(int32_t position, int32_t step, int32_t p0) {
  return position == p0 ? 0 : static_cast<int>(position / step);
}
// Walks segment s from its head up to the next marked position: *length bytes, and
// *next the segment that follows (-1 if the walk ran n steps without meeting one). With
// `out`, writes the segment's bytes to out[0, length).
TIEPOINT_HOST_DEVICE inline void WalkSegment(const uint32_t* tt, int32_t n, int32_t p0,
                                             int32_t step, int32_t head, uint8_t* out,
                                             int32_t* length, int* next) {
  uint32_t p = static_cast<uint32_t>(head);
  int32_t k = 0;
  for (;;) {
    const uint32_t v = tt[p];
    if (out != nullptr) out[k] = static_cast<uint8_t>(v);
    ++k;
    p = (v & kNextMask) >> 8;
    if (tt[p] & kHeadFlag) {
      *next = SegmentOf(static_cast<int32_t>(p), step, p0);
      break;
    }
    if (k >= n) {
      *next = -1;
      break;
    }
  }
  *length = k;
}
// Orders the segments from segment 0: offset[s] is where segment s's bytes go. kOk when
// the chain from segment 0 returns to it after visiting every segment once, covering n.
TIEPOINT_HOST_DEVICE inline int32_t ChainSegments(const int32_t* length, const int* next,
                                                  const int32_t* heads, int segments,
                                                  int32_t n, int32_t* offset) {
  int used = 0;
  for (int s = 0; s < segments; ++s) {
    offset[s] = -1;
    if (heads[s] >= 0) ++used;
  }
  int s = 0;
  int32_t at = 0;
  for (int visited = 0; visited < used; ++visited) {
    if (s < 0 || s >= segments || heads[s] < 0 || offset[s] >= 0) return kBrokenCycle;
    offset[s] = at;
    at += length[s];
    if (at > n) return kBrokenCycle;
    s = next[s];
  }
  if (s != 0 || at != n) return kBrokenCycle;
  return kOk;
}

}  // namespace bz2
}  // namespace tiepoint
