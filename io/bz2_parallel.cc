// Parallel bzip2 decoding: magic scan, single-block streams through libbz2, ordered walk.
#include "io/bz2_parallel.h"

#include <bzlib.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <exception>
#include <new>
#include <cstring>
#include <memory>
#include <utility>

namespace tiepoint {
namespace {

constexpr uint64_t kBlockMagic = 0x314159265359ULL;
constexpr uint64_t kEndMagic = 0x177245385090ULL;
constexpr uint64_t kMask48 = (uint64_t{1} << 48) - 1;
constexpr int kMagicBits = 48;
constexpr int kCrcBits = 32;

// Bytes a block can decode to: the level's limit on the text after bzip2's first
// run-length stage, times that stage's largest expansion (4 equal bytes and a count
// byte give back up to 4 + 255 bytes: under 52 times).
size_t MaxBlockOutput(int level) { return static_cast<size_t>(level) * 100000 * 52 + 4096; }

// Compressed bits one block can take: a block of incompressible bytes grows by the
// Huffman tables and selectors (well under 2% plus a few KB); a merged interval larger
// than this holds more than one block, so merging stops there.
uint64_t MaxBlockBits(int level) {
  return 8 * (static_cast<uint64_t>(level) * 100000 * 102 / 100 + 8192);
}

int Threads(int requested) { return requested > 0 ? requested : omp_get_max_threads(); }

// `n` <= 32 bits starting at bit `bit` (bytes past `size` read as zero).
uint32_t GetBits(const unsigned char* d, size_t size, uint64_t bit, int n) {
  const size_t byte = static_cast<size_t>(bit >> 3);
  uint64_t v = 0;
  for (size_t i = 0; i < 5; ++i) v = (v << 8) | (byte + i < size ? d[byte + i] : 0);
  const int shift = 40 - static_cast<int>(bit & 7) - n;
  return static_cast<uint32_t>((v >> shift) & ((uint64_t{1} << n) - 1));
}

// Big-endian 64 bits from byte p (bytes past `size` read as zero).
uint64_t Load64(const unsigned char* d, size_t size, size_t p) {
  unsigned char b[8] = {};
  std::memcpy(b, d + p, std::min<size_t>(8, size - p));
  uint64_t v;
  std::memcpy(&v, b, 8);
  return __builtin_bswap64(v);
}

// A magic starting at bit s of byte p (s = 0 the most significant) fixes bytes p+1
// and p+2 whatever s is: the table maps those two bytes to the (magic, s) pairs they
// fit, bit 8 * magic + s. Random bytes hit it once in ~4,000 positions, so the scan
// costs a table look-up per byte.
const std::array<uint16_t, 65536>& MagicFilter() {
  static const std::array<uint16_t, 65536> table = [] {
    std::array<uint16_t, 65536> t{};
    const uint64_t magics[2] = {kBlockMagic, kEndMagic};
    for (int m = 0; m < 2; ++m) {
      for (int s = 0; s < 8; ++s) {
        const uint64_t w = magics[m] << (16 - s);  // the pattern at bits 63-s .. 16-s
        const unsigned key = static_cast<unsigned>((w >> 40) & 0xffff);
        t[key] |= static_cast<uint16_t>(1u << (8 * m + s));
      }
    }
    return t;
  }();
  return table;
}

void ScanRange(const unsigned char* d, size_t size, size_t begin, size_t end,
               std::vector<Bz2Magic>* out) {
  const auto& filter = MagicFilter();
  // A magic needs 6 bytes from its first: p <= size - 6.
  end = std::min(end, size - 5);
  for (size_t p = begin; p < end; ++p) {
    const uint16_t hits = filter[(static_cast<unsigned>(d[p + 1]) << 8) | d[p + 2]];
    if (hits == 0) continue;
    const uint64_t w = Load64(d, size, p);
    for (int s = 0; s < 8; ++s) {
      for (int m = 0; m < 2; ++m) {
        if (!(hits & (1u << (8 * m + s)))) continue;
        const uint64_t pattern = (w >> (16 - s)) & kMask48;
        const uint64_t bit = 8 * static_cast<uint64_t>(p) + s;
        if (pattern == (m == 0 ? kBlockMagic : kEndMagic) && bit + kMagicBits <= 8 * size) {
          out->push_back({bit, m == 1});
        }
      }
    }
  }
}

// Appends bits MSB first to a byte string.
class BitWriter {
 public:
  explicit BitWriter(std::string* out) : out_(out) {}
  void Put(uint32_t value, int n) {  // n <= 32
    acc_ = (acc_ << n) | value;
    count_ += n;
    while (count_ >= 8) {
      count_ -= 8;
      out_->push_back(static_cast<char>((acc_ >> count_) & 0xff));
    }
    acc_ &= (uint64_t{1} << count_) - 1;
  }
  void PutMagic(uint64_t magic) {
    Put(static_cast<uint32_t>(magic >> 16), 32);
    Put(static_cast<uint32_t>(magic & 0xffff), 16);
  }
  void Flush() {  // pads the last byte with zero bits
    if (count_ > 0) out_->push_back(static_cast<char>((acc_ << (8 - count_)) & 0xff));
    acc_ = 0;
    count_ = 0;
  }

 private:
  std::string* out_;
  uint64_t acc_ = 0;
  int count_ = 0;
};

// The block in bits [begin, end) of d as a stream of its own: header, the block shifted
// to a byte boundary, end-of-stream magic, the block's CRC as the combined CRC.
void SingleBlockStream(const unsigned char* d, size_t size, uint64_t begin, uint64_t end,
                       int level, std::string* s) {
  const uint64_t nbits = end - begin;
  const size_t full = static_cast<size_t>(nbits / 8);
  const size_t byte = static_cast<size_t>(begin >> 3);
  const int sh = static_cast<int>(begin & 7);
  s->clear();
  s->reserve(full + 32);
  s->append("BZh");
  s->push_back(static_cast<char>('0' + level));
  const size_t base = s->size();
  s->resize(base + full);
  unsigned char* o = reinterpret_cast<unsigned char*>(&(*s)[base]);
  if (sh == 0) {
    std::memcpy(o, d + byte, full);
  } else {
    // Bits up to end - 1 < 8 * size: byte + i + 1 stays inside while i < full.
    for (size_t i = 0; i < full; ++i) {
      o[i] = static_cast<unsigned char>((d[byte + i] << sh) | (d[byte + i + 1] >> (8 - sh)));
    }
  }
  BitWriter w(s);
  const int rest = static_cast<int>(nbits % 8);
  if (rest > 0) w.Put(GetBits(d, size, begin + 8 * full, rest), rest);
  w.PutMagic(kEndMagic);
  w.Put(GetBits(d, size, begin + kMagicBits, kCrcBits), kCrcBits);
  w.Flush();
}

// Decodes one complete bzip2 stream held in `in`; true when libbz2 reaches its end
// having used every byte (so both CRCs verified).
bool DecodeStream(const std::string& in, int level, std::string* out) {
  bz_stream strm;
  std::memset(&strm, 0, sizeof(strm));
  if (BZ2_bzDecompressInit(&strm, /*verbosity=*/0, /*small=*/0) != BZ_OK) return false;
  const size_t limit = MaxBlockOutput(level);
  // Text decodes to at most the block size (only runs of 4+ equal bytes expand).
  out->resize(static_cast<size_t>(level) * 100000 + 64);
  strm.next_in = const_cast<char*>(in.data());  // bzlib's API is not const-correct
  strm.avail_in = static_cast<unsigned int>(in.size());
  size_t done = 0;
  bool ok = false;
  for (;;) {
    if (done == out->size()) {
      if (out->size() >= limit) break;
      out->resize(std::min(limit, 2 * out->size()));
    }
    strm.next_out = &(*out)[done];
    strm.avail_out = static_cast<unsigned int>(out->size() - done);
    const int rc = BZ2_bzDecompress(&strm);
    done = out->size() - strm.avail_out;
    if (rc == BZ_STREAM_END) {
      ok = strm.avail_in == 0;
      break;
    }
    if (rc != BZ_OK) break;
    if (strm.avail_out > 0 && strm.avail_in == 0) break;  // wants more than the block has
  }
  BZ2_bzDecompressEnd(&strm);
  out->resize(ok ? done : 0);
  return ok;
}

bool Decline(const std::string& reason, Bz2Decoded* out, std::string* why) {
  *out = Bz2Decoded();
  if (why != nullptr) *why = reason;
  return false;
}

bool IsStreamHeader(const unsigned char* d, size_t size, size_t pos) {
  return pos + 4 <= size && d[pos] == 'B' && d[pos + 1] == 'Z' && d[pos + 2] == 'h' &&
         d[pos + 3] >= '1' && d[pos + 3] <= '9';
}

}  // namespace

Status Bz2ParallelOptions::Check() const {
  if (num_threads < 0) {
    return Status::InvalidOptions("bzip2: num_threads must be >= 0 (0: all), got " +
                                  std::to_string(num_threads));
  }
  if (max_merges_per_block < 0) {
    return Status::InvalidOptions("bzip2: max_merges_per_block must be >= 0, got " +
                                  std::to_string(max_merges_per_block));
  }
  return Status::Ok();
}

std::string Bz2Decoded::Concatenate() const {
  std::string all;
  all.reserve(size);
  for (const std::string& b : blocks) all += b;
  return all;
}

std::vector<Bz2Magic> FindBz2Magics(const unsigned char* data, size_t size, int num_threads) {
  std::vector<Bz2Magic> all;
  if (size < 6) return all;
  const int threads = Threads(num_threads);
  constexpr size_t kMinRange = size_t{1} << 20;
  const size_t ranges = std::max<size_t>(
      1, std::min<size_t>(static_cast<size_t>(threads) * 4, size / kMinRange));
  std::vector<std::vector<Bz2Magic>> found(ranges);
  std::atomic<int> failed{0};
  const int64_t n = static_cast<int64_t>(ranges);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (threads > 1 && n > 1)
  for (int64_t r = 0; r < n; ++r) {
    const size_t begin = size * static_cast<size_t>(r) / ranges;
    const size_t end = size * static_cast<size_t>(r + 1) / ranges;
    try {  // no exception may leave an OpenMP region
      ScanRange(data, size, begin, end, &found[static_cast<size_t>(r)]);
    } catch (const std::exception&) {
      failed = 1;
    }
  }
  if (failed) throw std::bad_alloc();
  size_t total = 0;
  for (const auto& f : found) total += f.size();
  all.reserve(total);
  for (const auto& f : found) all.insert(all.end(), f.begin(), f.end());
  return all;
}

bool TryDecompressBz2Parallel(const char* data, size_t size, const Bz2ParallelOptions& options,
                              Bz2Decoded* out, std::string* why) {
  try {
    const std::vector<Bz2Magic> magics =
        FindBz2Magics(reinterpret_cast<const unsigned char*>(data), size, options.num_threads);
    return TryDecompressBz2ParallelWithMagics(data, size, magics, options, out, why);
  } catch (const std::bad_alloc&) {
    return Decline("out of memory", out, why);
  }
}

bool TryDecompressBz2ParallelWithMagics(const char* data, size_t size,
                                        const std::vector<Bz2Magic>& magics,
                                        const Bz2ParallelOptions& options, Bz2Decoded* out,
                                        std::string* why) {
  *out = Bz2Decoded();
  if (!options.Check().ok()) return Decline(options.Check().message(), out, why);
  const auto* d = reinterpret_cast<const unsigned char*>(data);
  if (!IsStreamHeader(d, size, 0)) return Decline("no bzip2 stream header at byte 0", out, why);
  const size_t n = magics.size();
  for (size_t k = 1; k < n; ++k) {
    if (magics[k].bit <= magics[k - 1].bit) return Decline("magics not sorted", out, why);
  }

  // The level each interval is decoded with: that of the stream header following the
  // last end-of-stream magic before it (a false end magic may make it wrong; the walk
  // then decodes again with the right one).
  std::vector<int> level(n);
  int current = d[3] - '0';
  for (size_t k = 0; k < n; ++k) {
    level[k] = current;
    if (magics[k].end_of_stream) {
      const size_t next = static_cast<size_t>((magics[k].bit + kMagicBits + kCrcBits + 7) / 8);
      if (IsStreamHeader(d, size, next)) current = d[next + 3] - '0';
    }
  }

  // Decode every interval that opens with a block magic, concurrently.
  std::vector<std::string> decoded(n);
  std::vector<char> decoded_ok(n, 0);
  const int threads = Threads(options.num_threads);
  const int64_t intervals = n > 0 ? static_cast<int64_t>(n) - 1 : 0;
#pragma omp parallel num_threads(threads) if (threads > 1 && intervals > 1)
  {
    std::string stream;
#pragma omp for schedule(dynamic, 1)
    for (int64_t k = 0; k < intervals; ++k) {
      const size_t i = static_cast<size_t>(k);
      if (magics[i].end_of_stream) continue;
      if (magics[i + 1].bit - magics[i].bit > MaxBlockBits(level[i])) continue;
      try {  // no exception may leave an OpenMP region
        SingleBlockStream(d, size, magics[i].bit, magics[i + 1].bit, level[i], &stream);
        decoded_ok[i] = DecodeStream(stream, level[i], &decoded[i]);
      } catch (const std::exception&) {
        decoded_ok[i] = 0;  // out of memory: the walk retries this block, or declines
      }
    }
  }

  // Walk the streams in order.
  auto find = [&](uint64_t bit) -> size_t {
    const auto it = std::lower_bound(magics.begin(), magics.end(), bit,
                                     [](const Bz2Magic& m, uint64_t b) { return m.bit < b; });
    return it != magics.end() && it->bit == bit ? static_cast<size_t>(it - magics.begin()) : n;
  };
  std::string stream;
  size_t pos = 0;  // byte where the next stream starts
  while (pos < size) {
    if (!IsStreamHeader(d, size, pos)) {
      return Decline("bytes at " + std::to_string(pos) + " are not a bzip2 stream header", out,
                     why);
    }
    const int lvl = d[pos + 3] - '0';
    size_t k = find(8 * static_cast<uint64_t>(pos + 4));
    if (k == n) {
      return Decline("no magic right after the stream header at byte " + std::to_string(pos),
                     out, why);
    }
    uint32_t combined = 0;
    for (;;) {
      const uint64_t bit = magics[k].bit;
      if (magics[k].end_of_stream) {
        if (bit + kMagicBits + kCrcBits > 8 * static_cast<uint64_t>(size)) {
          return Decline("end-of-stream marker cut short", out, why);
        }
        const uint32_t stored = GetBits(d, size, bit + kMagicBits, kCrcBits);
        if (stored != combined) {
          return Decline("combined CRC of stream " + std::to_string(out->streams + 1) +
                             " does not match its blocks",
                         out, why);
        }
        pos = static_cast<size_t>((bit + kMagicBits + kCrcBits + 7) / 8);
        ++out->streams;
        break;
      }
      // A block: its interval ends at the next magic, or, when that was a false one
      // inside the block, at a later one.
      size_t j = k + 1;
      if (j >= n) {
        return Decline("block at bit " + std::to_string(bit) + " has no end", out, why);
      }
      bool ok = decoded_ok[k] && level[k] == lvl;
      std::string merged;
      if (!ok && level[k] != lvl && magics[j].bit - bit <= MaxBlockBits(lvl)) {
        SingleBlockStream(d, size, bit, magics[j].bit, lvl, &stream);
        ok = DecodeStream(stream, lvl, &merged);
        if (ok) decoded[k] = std::move(merged);
      }
      for (int merges = 1; !ok; ++merges) {
        ++j;
        if (j >= n || merges > options.max_merges_per_block ||
            magics[j].bit - bit > MaxBlockBits(lvl)) {
          return Decline("block at bit " + std::to_string(bit) + " does not decode", out, why);
        }
        SingleBlockStream(d, size, bit, magics[j].bit, lvl, &stream);
        ok = DecodeStream(stream, lvl, &merged);
        if (ok) decoded[k] = std::move(merged);
      }
      const uint32_t crc = GetBits(d, size, bit + kMagicBits, kCrcBits);
      combined = ((combined << 1) | (combined >> 31)) ^ crc;
      out->false_magics += static_cast<int>(j - k - 1);
      out->size += decoded[k].size();
      out->blocks.push_back(std::move(decoded[k]));
      k = j;
    }
  }
  if (out->streams == 0) return Decline("empty input", out, why);
  return true;
}

namespace {
bool PlanFail(const std::string& reason, std::string* why) {
  if (why != nullptr) *why = reason;
  return false;
}
}  // namespace

bool PlanBz2Blocks(const unsigned char* d, size_t size, const std::vector<Bz2Magic>& magics,
                   Bz2BlockPlan* plan, std::string* why) {
  *plan = Bz2BlockPlan();
  const size_t n = magics.size();
  size_t k = 0;
  size_t pos = 0;
  while (pos < size) {
    if (!IsStreamHeader(d, size, pos)) {
      return PlanFail("bytes at " + std::to_string(pos) + " are not a bzip2 stream header", why);
    }
    const int level = d[pos + 3] - '0';
    if (k >= n || magics[k].bit != 8 * static_cast<uint64_t>(pos + 4)) {
      return PlanFail("no magic right after the stream header at byte " + std::to_string(pos), why);
    }
    uint32_t combined = 0;
    for (;; ++k) {
      const uint64_t bit = magics[k].bit;
      if (bit + kMagicBits + kCrcBits > 8 * static_cast<uint64_t>(size)) {
        return PlanFail("magic at bit " + std::to_string(bit) + " cut short", why);
      }
      const uint32_t crc = GetBits(d, size, bit + kMagicBits, kCrcBits);
      if (magics[k].end_of_stream) {
        if (crc != combined) {
          return PlanFail("combined CRC of stream " + std::to_string(plan->streams + 1) +
                              " does not match its blocks",
                          why);
        }
        pos = static_cast<size_t>((bit + kMagicBits + kCrcBits + 7) / 8);
        ++plan->streams;
        ++k;
        break;
      }
      if (k + 1 >= n) return PlanFail("block at bit " + std::to_string(bit) + " has no end", why);
      Bz2BlockPlan::Block b;
      b.begin = bit;
      b.end = magics[k + 1].bit;
      b.level = level;
      b.crc = crc;
      plan->blocks.push_back(b);
      combined = ((combined << 1) | (combined >> 31)) ^ crc;
    }
  }
  if (k != n) return PlanFail("a magic after the last stream", why);
  if (plan->streams == 0) return PlanFail("empty input", why);
  return true;
}

Status DecompressBz2Serial(const char* data, size_t size, const std::string& name,
                           std::string* out) {
  out->clear();
  bz_stream strm;
  std::memset(&strm, 0, sizeof(strm));
  strm.next_in = const_cast<char*>(data);
  constexpr size_t kOutChunk = size_t{1} << 20;
  constexpr size_t kInChunk = size_t{1} << 30;  // avail_in is 32 bits
  size_t in_left = size;
  int streams = 0;
  while (in_left > 0 || strm.avail_in > 0) {
    if (BZ2_bzDecompressInit(&strm, 0, 0) != BZ_OK) {
      return Status::OutOfMemory(name + ": out of memory starting bzip2 decoder");
    }
    ++streams;
    int rc = BZ_OK;
    for (;;) {
      if (strm.avail_in == 0 && in_left > 0) {
        const size_t take = std::min(in_left, kInChunk);
        strm.avail_in = static_cast<unsigned int>(take);
        in_left -= take;
      }
      const size_t done = out->size();
      out->resize(done + kOutChunk);
      strm.next_out = &(*out)[done];
      strm.avail_out = static_cast<unsigned int>(kOutChunk);
      const unsigned int avail_in_before = strm.avail_in;
      rc = BZ2_bzDecompress(&strm);
      out->resize(done + kOutChunk - strm.avail_out);
      if (rc == BZ_STREAM_END) break;
      if (rc != BZ_OK) break;
      if (strm.avail_in == 0 && in_left == 0 && strm.avail_out > 0 && avail_in_before == 0) {
        BZ2_bzDecompressEnd(&strm);
        return Status::InvalidInput(name +
                                    ": bzip2 data ends unexpectedly (the file is truncated)");
      }
    }
    BZ2_bzDecompressEnd(&strm);
    if (rc == BZ_STREAM_END) continue;
    if (rc == BZ_DATA_ERROR_MAGIC) {
      if (streams > 1) {
        return Status::InvalidInput(name + ": data after the end of bzip2 stream " +
                                    std::to_string(streams - 1) +
                                    " is not bzip2 (trailing garbage)");
      }
      return Status::InvalidInput(name + ": not a bzip2 file (bad magic bytes)");
    }
    if (rc == BZ_MEM_ERROR) return Status::OutOfMemory(name + ": out of memory in bzip2 decoder");
    return Status::InvalidInput(name + ": corrupt bzip2 data (checksum or format error)");
  }
  if (streams == 0) return Status::InvalidInput(name + ": not a bzip2 file (empty)");
  return Status::Ok();
}

bool DecompressBz2Prefix(const char* data, size_t size, size_t want, std::string* out) {
  out->assign(want, '\0');
  bz_stream strm;
  std::memset(&strm, 0, sizeof(strm));
  if (BZ2_bzDecompressInit(&strm, 0, 0) != BZ_OK) return false;
  strm.next_in = const_cast<char*>(data);
  strm.avail_in = static_cast<unsigned int>(std::min<size_t>(size, size_t{1} << 30));
  strm.next_out = &(*out)[0];
  strm.avail_out = static_cast<unsigned int>(want);
  int rc = BZ_OK;
  while (strm.avail_out > 0 && rc == BZ_OK) {
    const unsigned int before = strm.avail_out;
    rc = BZ2_bzDecompress(&strm);
    if (rc == BZ_OK && strm.avail_out == before && strm.avail_in == 0) break;
  }
  BZ2_bzDecompressEnd(&strm);
  out->resize(want - strm.avail_out);
  return rc == BZ_OK || rc == BZ_STREAM_END;
}

Status DecompressBz2(const char* data, size_t size, const std::string& name,
                     const Bz2ParallelOptions& options, Bz2Decoded* out) {
  TIEPOINT_RETURN_IF_ERROR(options.Check());
  if (TryDecompressBz2Parallel(data, size, options, out)) return Status::Ok();
  std::string all;
  TIEPOINT_RETURN_IF_ERROR(DecompressBz2Serial(data, size, name, &all));
  *out = Bz2Decoded();
  out->size = all.size();
  out->blocks.push_back(std::move(all));
  out->streams = -1;  // unknown: decoded serially
  return Status::Ok();
}

}  // namespace tiepoint
