// The CPU reference matcher (definition in matcher.h) and the backend factory.
#include "features/matcher.h"

#include <cstdlib>
#include <omp.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "features/matcher_cuda.h"
#include "features/matcher_inl.h"
#include "io/base/timer.h"

namespace tiepoint {
namespace {

using matcher_internal::kNoSecond;
using matcher_internal::PassesRatioAndDistance;

constexpr int kDim = kSiftDescriptorDim;
// Query rows handled together: each target descriptor is loaded once for this many
// dot products (keeps the inner loop in L1; 8 measured ~2x faster than 1 on 8000 x 8000).
constexpr int kRowBlock = 8;

inline int32_t Dot(const uint8_t* a, const uint8_t* b) {
  int32_t s = 0;
  for (int k = 0; k < kDim; ++k) s += static_cast<int32_t>(a[k]) * static_cast<int32_t>(b[k]);
  return s;
}

void Norms(const uint8_t* d, uint64_t n, std::vector<int32_t>* norms) {
  norms->resize(n);
  for (uint64_t i = 0; i < n; ++i) (*norms)[i] = Dot(d + i * kDim, d + i * kDim);
}

// The nearest and second-nearest distances of up to kRowBlock query rows, updated target by
// target (the lowest index wins among equal distances: targets come in increasing index and
// only a strictly smaller distance replaces the best).
struct NearestTwoRows {
  uint32_t best[kRowBlock], index[kRowBlock], second[kRowBlock];
  NearestTwoRows() {
    for (int r = 0; r < kRowBlock; ++r) {
      best[r] = kNoSecond;
      index[r] = 0;
      second[r] = kNoSecond;
    }
  }
  void Update(int r, uint64_t j, uint32_t d) {
    if (d < best[r]) {
      second[r] = best[r];
      best[r] = d;
      index[r] = static_cast<uint32_t>(j);
    } else if (d < second[r]) {
      second[r] = d;
    }
  }
  void Store(uint64_t i0, int rows, uint32_t* best_index, uint32_t* best_d, uint32_t* second_d) const {
    for (int r = 0; r < rows; ++r) {
      best_index[i0 + r] = index[r];
      best_d[i0 + r] = best[r];
      second_d[i0 + r] = second[r];
    }
  }
};

// The other side of a mutual check, target j against the block's rows i0 .. i0 + rows - 1
// at distances d[]: the nearest query row so far (col_d, col_i; the lowest index among
// equal distances, in whatever order the blocks come), so one scan serves both directions.
inline void UpdateColumn(uint64_t j, uint64_t i0, int rows, const uint32_t* d, uint32_t* col_d, uint32_t* col_i) {
  uint32_t bd = col_d[j], bi = col_i[j];
  for (int r = 0; r < rows; ++r) {
    const uint32_t i = static_cast<uint32_t>(i0 + r);
    if (d[r] < bd || (d[r] == bd && i < bi)) {
      bd = d[r];
      bi = i;
    }
  }
  col_d[j] = bd;
  col_i[j] = bi;
}

// Rows i0 .. i0 + rows - 1 of the query against every target: the nearest, its distance
// and the second-smallest distance over the other targets (kNoSecond when there is a
// single target); with col_d (and col_i), each target's nearest row too (UpdateColumn).
void ScanBlock(const uint8_t* q, uint64_t i0, int rows, const int32_t* qn, const uint8_t* t,
               uint64_t nt, const int32_t* tn, uint32_t* best_index, uint32_t* best_d,
               uint32_t* second_d, uint32_t* col_d, uint32_t* col_i) {
  NearestTwoRows nearest;
  uint32_t d[kRowBlock];
  for (uint64_t j = 0; j < nt; ++j) {
    const uint8_t* tj = t + j * kDim;
    for (int r = 0; r < rows; ++r) {
      const int32_t dot = Dot(q + (i0 + r) * kDim, tj);
      d[r] = static_cast<uint32_t>(qn[i0 + r] + tn[j] - 2 * dot);
      nearest.Update(r, j, d[r]);
    }
    if (col_d) UpdateColumn(j, i0, rows, d, col_d, col_i);
  }
  nearest.Store(i0, rows, best_index, best_d, second_d);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define TIEPOINT_MATCH_SIMD 1
// SIMD scans, chosen at run time by what the CPU has (AVX2: ScanBlockAvx2; AVX-512 VNNI:
// ScanBlockVnni), each target loaded once for a block of eight query rows, whose sums are
// reduced together. Integer arithmetic: the same distances as ScanBlock, bit for bit.
static_assert(kDim == 128 && kRowBlock == 8, "the SIMD scans are written for 8 rows of 128");

// Eight vectors of eight partial sums (one per row) -> the eight rows' sums, in row order.
__attribute__((target("avx2"), always_inline)) inline __m256i RowSums(const __m256i acc[8]) {
  const __m256i h01 = _mm256_hadd_epi32(acc[0], acc[1]);
  const __m256i h23 = _mm256_hadd_epi32(acc[2], acc[3]);
  const __m256i h45 = _mm256_hadd_epi32(acc[4], acc[5]);
  const __m256i h67 = _mm256_hadd_epi32(acc[6], acc[7]);
  const __m256i h0123 = _mm256_hadd_epi32(h01, h23);  // rows 0-3: low half | high half
  const __m256i h4567 = _mm256_hadd_epi32(h45, h67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(h0123, h4567, 0x20),
                          _mm256_permute2x128_si256(h0123, h4567, 0x31));
}

// After a target's distances dv to the block's rows (lanes past `rows` set to all ones by
// `dead`, so that they are never below anything): the scalar updates, only where they can
// change anything.
// A target changes a row's nearest two only where its distance is below the row's
// second-smallest so far: one vector compare finds those rows (none, for most targets);
// likewise the target's nearest row (the mutual check) only where the block's smallest
// distance does not exceed the target's nearest so far (equal: the lower row index may
// win). The same results as updating every row: distances are below 2^31, so the unsigned
// compare is a signed one with the top bits flipped.
__attribute__((target("avx2"), always_inline)) inline void UpdateBlock(
    __m256i dv, __m256i dead, uint64_t j, uint64_t i0, int rows, NearestTwoRows* nearest, uint32_t* col_d,
    uint32_t* col_i) {
  const __m256i top = _mm256_set1_epi32(std::numeric_limits<int32_t>::min());
  const __m256i second = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(nearest->second));
  const __m256i dl = _mm256_or_si256(dv, dead);
  const unsigned closer = static_cast<unsigned>(_mm256_movemask_ps(
      _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_xor_si256(second, top), _mm256_xor_si256(dl, top)))));
  bool column = false;
  if (col_d) {
    __m128i m = _mm_min_epu32(_mm256_castsi256_si128(dl), _mm256_extracti128_si256(dl, 1));
    m = _mm_min_epu32(m, _mm_shuffle_epi32(m, 0x4E));
    m = _mm_min_epu32(m, _mm_shuffle_epi32(m, 0xB1));
    column = static_cast<uint32_t>(_mm_cvtsi128_si32(m)) <= col_d[j];
  }
  if (!closer && !column) return;
  alignas(32) uint32_t d[kRowBlock];
  _mm256_store_si256(reinterpret_cast<__m256i*>(d), dv);
  for (unsigned m = closer; m; m &= m - 1) {
    const int r = __builtin_ctz(m);
    nearest->Update(r, j, d[r]);
  }
  if (column) UpdateColumn(j, i0, rows, d, col_d, col_i);
}

// All ones in the lanes of rows past `rows` (UpdateBlock's `dead`).
__attribute__((target("avx2"), always_inline)) inline __m256i DeadLanes(int rows) {
  return _mm256_cmpgt_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(rows - 1));
}

// AVX2: vpmaddubsw multiplies unsigned bytes by signed bytes, 32 products an instruction,
// adding pairs into 16 bits with saturation. Each query row is split into nibbles, q = 16 h +
// l (h, l in 0..15), and each target byte t (0..255) goes in as it is: a pair t h + t' h'
// is at most 7,650, and a row's four instructions for h (or l) at most 30,600, so nothing
// saturates; one vpmaddwd per half widens to 32 bits and applies the 16. q . t = 16 t . h +
// t . l exactly. On an AVX2 machine without VNNI (AMD Zen 3) this is 1.6x the scan that
// widened both sides to 16 bits for vpmaddwd (16 products an instruction).
__attribute__((target("avx2")))
void ScanBlockAvx2(const uint8_t* q, uint64_t i0, int rows, const int32_t* qn, const uint8_t* t,
                   uint64_t nt, const int32_t* tn, uint32_t* best_index, uint32_t* best_d,
                   uint32_t* second_d, uint32_t* col_d, uint32_t* col_i) {
  alignas(32) int8_t high[kRowBlock][kDim], low[kRowBlock][kDim];  // rows past `rows`: zero
  alignas(32) int32_t norms[kRowBlock];
  for (int r = 0; r < kRowBlock; ++r) {
    for (int k = 0; k < kDim; ++k) {
      const int v = r < rows ? q[(i0 + r) * kDim + k] : 0;
      high[r][k] = static_cast<int8_t>(v >> 4);
      low[r][k] = static_cast<int8_t>(v & 15);
    }
    norms[r] = r < rows ? qn[i0 + r] : 0;
  }
  const __m256i qnv = _mm256_load_si256(reinterpret_cast<const __m256i*>(norms));
  const __m256i sixteen = _mm256_set1_epi16(16), one = _mm256_set1_epi16(1);
  const __m256i dead = DeadLanes(rows);
  NearestTwoRows nearest;
  for (uint64_t j = 0; j < nt; ++j) {
    __m256i tv[4], acc[kRowBlock];
    for (int c = 0; c < 4; ++c) tv[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t + j * kDim) + c);
    for (int r = 0; r < kRowBlock; ++r) {
      const __m256i* hr = reinterpret_cast<const __m256i*>(high[r]);
      const __m256i* lr = reinterpret_cast<const __m256i*>(low[r]);
      __m256i h = _mm256_maddubs_epi16(tv[0], _mm256_load_si256(hr));
      __m256i l = _mm256_maddubs_epi16(tv[0], _mm256_load_si256(lr));
      for (int c = 1; c < 4; ++c) {
        h = _mm256_add_epi16(h, _mm256_maddubs_epi16(tv[c], _mm256_load_si256(hr + c)));
        l = _mm256_add_epi16(l, _mm256_maddubs_epi16(tv[c], _mm256_load_si256(lr + c)));
      }
      acc[r] = _mm256_add_epi32(_mm256_madd_epi16(h, sixteen), _mm256_madd_epi16(l, one));
    }
    const __m256i dv = _mm256_sub_epi32(_mm256_add_epi32(qnv, _mm256_set1_epi32(tn[j])),
                                        _mm256_slli_epi32(RowSums(acc), 1));
    UpdateBlock(dv, dead, j, i0, rows, &nearest, col_d, col_i);
  }
  nearest.Store(i0, rows, best_index, best_d, second_d);
}

// With AVX-512 VNNI: vpdpbusd multiplies unsigned bytes by signed bytes, four products a
// lane, 32 a 256-bit instruction (twice vpmaddwd's 16, and no widening). The query rows go
// in as they are (0..255) and each target as t - 128 (its top bit flipped: -128..127), so
// q . t = q . (t - 128) + 128 sum(q), exactly (each lane at most 4 x 255 x 128, a sum of
// 128 products at most 4.2 million). The scalar updates as in ScanBlockAvx2 (UpdateBlock).
__attribute__((target("avx2,avx512f,avx512vl,avx512vnni")))
void ScanBlockVnni(const uint8_t* q, uint64_t i0, int rows, const int32_t* qn, const uint8_t* t,
                   uint64_t nt, const int32_t* tn, uint32_t* best_index, uint32_t* best_d,
                   uint32_t* second_d, uint32_t* col_d, uint32_t* col_i) {
  alignas(32) uint8_t qb[kRowBlock][kDim];
  alignas(32) int32_t base[kRowBlock];  // |q|^2 - 256 sum(q): d = base + |t|^2 - 2 q . (t - 128)
  for (int r = 0; r < kRowBlock; ++r) {
    int32_t sum = 0;
    for (int k = 0; k < kDim; ++k) {
      qb[r][k] = r < rows ? q[(i0 + r) * kDim + k] : 0;
      sum += qb[r][k];
    }
    base[r] = r < rows ? qn[i0 + r] - 256 * sum : 0;
  }
  const __m256i basev = _mm256_load_si256(reinterpret_cast<const __m256i*>(base));
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i dead = DeadLanes(rows);
  NearestTwoRows nearest;
  for (uint64_t j = 0; j < nt; ++j) {
    __m256i tv[4], acc[kRowBlock];
    for (int c = 0; c < 4; ++c)
      tv[c] = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(t + j * kDim) + c), flip);
    for (int r = 0; r < kRowBlock; ++r) {
      const __m256i* qr = reinterpret_cast<const __m256i*>(qb[r]);
      acc[r] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_load_si256(qr), tv[0]);
      for (int c = 1; c < 4; ++c) acc[r] = _mm256_dpbusd_epi32(acc[r], _mm256_load_si256(qr + c), tv[c]);
    }
    const __m256i dv = _mm256_sub_epi32(_mm256_add_epi32(basev, _mm256_set1_epi32(tn[j])),
                                        _mm256_slli_epi32(RowSums(acc), 1));
    UpdateBlock(dv, dead, j, i0, rows, &nearest, col_d, col_i);
  }
  nearest.Store(i0, rows, best_index, best_d, second_d);
}
#endif

// For every query row: the block scan over blocks of kRowBlock rows, spread over the
// threads. With col_index, also each target's nearest query row (the lowest index among
// equal distances: what a scan the other way gives), from the same distances: each thread
// keeps its own, and they are merged at the end.
void NearestTwo(const uint8_t* q, uint64_t nq, const std::vector<int32_t>& qn, const uint8_t* t,
                uint64_t nt, const std::vector<int32_t>& tn, int threads, uint32_t* best_index,
                uint32_t* best_d, uint32_t* second_d, uint32_t* col_index = nullptr) {
  const int64_t blocks = static_cast<int64_t>((nq + kRowBlock - 1) / kRowBlock);
  std::vector<std::vector<uint32_t>> col_d, col_i;
  if (col_index) {
    col_d.assign(threads, std::vector<uint32_t>(nt, kNoSecond));
    col_i.assign(threads, std::vector<uint32_t>(nt, std::numeric_limits<uint32_t>::max()));
  }
#ifdef TIEPOINT_MATCH_SIMD
  // TIEPOINT_MATCHER_SCAN=scalar|avx2 keeps a narrower scan than the CPU allows (the tests
  // run each).
  static const int scan = [] {
    const char* e = std::getenv("TIEPOINT_MATCHER_SCAN");
    const std::string want = e ? e : "";
    if (want == "scalar" || !__builtin_cpu_supports("avx2")) return 0;
    if (want == "avx2" || !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512vnni")) return 1;
    return 2;
  }();
#endif
#pragma omp parallel for schedule(dynamic, 4) num_threads(threads)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const uint64_t i0 = static_cast<uint64_t>(blk) * kRowBlock;
    const int rows = static_cast<int>(std::min<uint64_t>(kRowBlock, nq - i0));
    const int tid = omp_get_thread_num();
    uint32_t* cd = col_index ? col_d[tid].data() : nullptr;
    uint32_t* ci = col_index ? col_i[tid].data() : nullptr;
#ifdef TIEPOINT_MATCH_SIMD
    if (scan == 2) {
      ScanBlockVnni(q, i0, rows, qn.data(), t, nt, tn.data(), best_index, best_d, second_d, cd, ci);
      continue;
    }
    if (scan == 1) {
      ScanBlockAvx2(q, i0, rows, qn.data(), t, nt, tn.data(), best_index, best_d, second_d, cd, ci);
      continue;
    }
#endif
    ScanBlock(q, i0, rows, qn.data(), t, nt, tn.data(), best_index, best_d, second_d, cd, ci);
  }
  if (!col_index) return;
  for (uint64_t j = 0; j < nt; ++j) {
    uint32_t bd = kNoSecond, bi = std::numeric_limits<uint32_t>::max();
    for (int k = 0; k < threads; ++k)
      if (col_d[k][j] < bd || (col_d[k][j] == bd && col_i[k][j] < bi)) {
        bd = col_d[k][j];
        bi = col_i[k][j];
      }
    col_index[j] = bi;
  }
}

class CpuMatcher : public DescriptorMatcher {
 public:
  explicit CpuMatcher(const MatcherOptions& options) : options_(options) {}

  Status Match(const uint8_t* a, uint64_t n1, const uint8_t* b, uint64_t n2,
               std::vector<FeatureMatch>* matches) override {
    const Timer timer;
    TIEPOINT_RETURN_IF_ERROR(BeginMatch(n1, n2, matches));
    if (n1 == 0 || n2 == 0) return Status::Ok();
    const int threads = options_.num_threads > 0 ? options_.num_threads : omp_get_max_threads();
    std::vector<int32_t> na, nb;
    Norms(a, n1, &na);
    Norms(b, n2, &nb);
    std::vector<uint32_t> row_index(n1), row_d(n1), row_second(n1);
    // The mutual check's other direction comes from the same scan.
    std::vector<uint32_t> col_index(options_.mutual ? n2 : 0);
    NearestTwo(a, n1, na, b, n2, nb, threads, row_index.data(), row_d.data(), row_second.data(),
               options_.mutual ? col_index.data() : nullptr);
    const double ratio_sq = options_.ratio * options_.ratio;
    const double max_sq =
        options_.max_distance < 0 ? -1.0 : options_.max_distance * options_.max_distance;
    for (uint64_t i = 0; i < n1; ++i) {
      if (!PassesRatioAndDistance(ratio_sq, max_sq, row_d[i], row_second[i])) continue;
      if (options_.mutual && col_index[row_index[i]] != i) continue;
      matches->push_back({static_cast<uint32_t>(i), row_index[i], row_d[i]});
    }
    summary_.seconds = timer.Seconds();
    return Status::Ok();
  }

 private:
  MatcherOptions options_;
};

}  // namespace

Status DescriptorMatcher::BeginMatch(uint64_t n1, uint64_t n2, std::vector<FeatureMatch>* matches) {
  TIEPOINT_RETURN_IF_ERROR(CheckMatcherSizes(n1, n2));
  matches->clear();
  summary_ = {};
  summary_.descriptor_pairs = static_cast<double>(n1) * static_cast<double>(n2);
  return Status::Ok();
}

Status CheckMatcherSizes(uint64_t n1, uint64_t n2) {
  if (n1 > kMaxMatcherDescriptors || n2 > kMaxMatcherDescriptors) {
    return Status::InvalidInput("descriptor sets of " + std::to_string(n1) + " and " +
                                std::to_string(n2) + " descriptors: at most " +
                                std::to_string(kMaxMatcherDescriptors) + " per set");
  }
  return Status::Ok();
}

Status MatcherOptions::Check() const {
  if (!(ratio > 0.0 && ratio <= 1.0)) {
    return Status::InvalidOptions("matcher ratio " + std::to_string(ratio) +
                                  ": expected (0, 1] (Lowe uses 0.8; 1 keeps every unique "
                                  "nearest neighbour)");
  }
  if (std::isnan(max_distance)) {
    return Status::InvalidOptions("matcher max_distance is NaN: expected a distance >= 0, or "
                                  "< 0 for no limit");
  }
  if (num_threads < 0) {
    return Status::InvalidOptions("matcher num_threads " + std::to_string(num_threads) +
                                  ": expected >= 0 (0 uses every hardware thread)");
  }
  if (cuda_streams < 1 || cuda_streams > 64) {
    return Status::InvalidOptions("matcher cuda_streams " + std::to_string(cuda_streams) +
                                  ": expected 1..64");
  }
  if (cuda_column_splits < 0 || cuda_column_splits > 1024) {
    return Status::InvalidOptions("matcher cuda_column_splits " +
                                  std::to_string(cuda_column_splits) +
                                  ": expected 0 (automatic) .. 1024");
  }
  return Status::Ok();
}

Status DescriptorMatcher::Match(const Features& a, const Features& b,
                                std::vector<FeatureMatch>* matches) {
  TIEPOINT_RETURN_IF_ERROR(a.CheckConsistent());
  TIEPOINT_RETURN_IF_ERROR(b.CheckConsistent());
  return Match(a.descriptors.data(), a.size(), b.descriptors.data(), b.size(), matches);
}

Status DescriptorMatcher::MatchPairs(const std::vector<const Features*>& images,
                                     const std::vector<std::pair<int, int>>& pairs,
                                     std::vector<std::vector<FeatureMatch>>* matches,
                                     const std::function<void(size_t, size_t)>& progress) {
  const Timer timer;
  matches->assign(pairs.size(), {});
  double descriptor_pairs = 0;
  for (size_t p = 0; p < pairs.size(); ++p) {
    const auto [i, j] = pairs[p];
    if (i < 0 || j < 0 || i >= static_cast<int>(images.size()) ||
        j >= static_cast<int>(images.size())) {
      return Status::InvalidInput("pair " + std::to_string(p) + " (" + std::to_string(i) + ", " +
                                  std::to_string(j) + ") names an image outside 0.." +
                                  std::to_string(images.size()) + "-1");
    }
    TIEPOINT_RETURN_IF_ERROR(Match(*images[i], *images[j], &(*matches)[p]));
    descriptor_pairs += summary_.descriptor_pairs;
    if (progress) progress(p + 1, pairs.size());
  }
  summary_.seconds = timer.Seconds();
  summary_.descriptor_pairs = descriptor_pairs;
  return Status::Ok();
}

Status MatchRestricted(const Features& a, const Features& b, const std::vector<uint64_t>& ptr,
                       const std::vector<uint32_t>& cols, const MatcherOptions& options,
                       std::vector<FeatureMatch>* matches) {
  TIEPOINT_RETURN_IF_ERROR(options.Check());
  TIEPOINT_RETURN_IF_ERROR(a.CheckConsistent());
  TIEPOINT_RETURN_IF_ERROR(b.CheckConsistent());
  TIEPOINT_RETURN_IF_ERROR(CheckMatcherSizes(a.size(), b.size()));
  matches->clear();
  const uint64_t n1 = a.size(), n2 = b.size();
  if (ptr.size() != n1 + 1 || ptr[0] != 0 || ptr[n1] != cols.size())
    return Status::InvalidInput("restricted matching: the candidate lists do not fit " + std::to_string(n1) +
                                " rows and " + std::to_string(cols.size()) + " candidates");
  for (uint64_t i = 0; i < n1; ++i) {
    if (ptr[i + 1] < ptr[i]) return Status::InvalidInput("restricted matching: row " + std::to_string(i) + "'s list ends before it starts");
    for (uint64_t k = ptr[i]; k < ptr[i + 1]; ++k)
      if (cols[k] >= n2 || (k > ptr[i] && cols[k] <= cols[k - 1]))
        return Status::InvalidInput("restricted matching: row " + std::to_string(i) +
                                    " lists a column out of range or out of order");
  }
  // Every allowed pair's distance, exact: |a|^2 + |b|^2 - 2 a.b as in Match.
  std::vector<int32_t> na, nb;
  Norms(a.descriptors.data(), n1, &na);
  Norms(b.descriptors.data(), n2, &nb);
  std::vector<uint32_t> dist(cols.size());
  const int threads = options.num_threads > 0 ? options.num_threads : omp_get_max_threads();
#pragma omp parallel for num_threads(threads) schedule(dynamic, 64)
  for (int64_t i = 0; i < static_cast<int64_t>(n1); ++i)
    for (uint64_t k = ptr[i]; k < ptr[i + 1]; ++k)
      dist[k] = static_cast<uint32_t>(na[i] + nb[cols[k]] - 2 * Dot(a.descriptor(i), b.descriptor(cols[k])));
  // Rows: nearest and second nearest over the allowed columns (lowest index among ties);
  // columns: the nearest allowed row (lowest index among ties), in row order.
  std::vector<uint32_t> col_best(n2, kNoSecond), col_index(n2, 0);
  std::vector<uint32_t> row_best(n1, kNoSecond), row_second(n1, kNoSecond), row_index(n1, 0);
  for (uint64_t i = 0; i < n1; ++i)
    for (uint64_t k = ptr[i]; k < ptr[i + 1]; ++k) {
      const uint32_t d = dist[k], j = cols[k];
      if (d < row_best[i]) {
        row_second[i] = row_best[i];
        row_best[i] = d;
        row_index[i] = j;
      } else if (d < row_second[i]) {
        row_second[i] = d;
      }
      if (d < col_best[j]) {
        col_best[j] = d;
        col_index[j] = static_cast<uint32_t>(i);
      }
    }
  const double ratio_sq = options.ratio * options.ratio;
  const double max_sq = options.max_distance < 0 ? -1.0 : options.max_distance * options.max_distance;
  for (uint64_t i = 0; i < n1; ++i) {
    if (ptr[i + 1] == ptr[i]) continue;
    if (!PassesRatioAndDistance(ratio_sq, max_sq, row_best[i], row_second[i])) continue;
    if (options.mutual && col_index[row_index[i]] != i) continue;
    matches->push_back({static_cast<uint32_t>(i), row_index[i], row_best[i]});
  }
  return Status::Ok();
}

Status DescriptorMatcher::Create(const MatcherOptions& options, Device device,
                                 std::unique_ptr<DescriptorMatcher>* matcher) {
  TIEPOINT_RETURN_IF_ERROR(options.Check());
  switch (device) {
    case Device::kCpu:
      *matcher = std::make_unique<CpuMatcher>(options);
      return Status::Ok();
    case Device::kCuda:
      return CreateCudaMatcher(options, matcher);
  }
  return Status::Internal("DescriptorMatcher::Create: unknown device");
}

}  // namespace tiepoint
