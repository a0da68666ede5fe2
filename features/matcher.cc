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

#include <Eigen/Dense>

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
// widened both sides to 16 bits for vpmaddwd (16 products an instruction). NibbleProducts:
// one row's q . t as eight partial sums, from the target's four vectors tv (ScanBlockAvx2's
// rows and the bounded scan's exact distances).
__attribute__((target("avx2"), always_inline)) inline __m256i NibbleProducts(const __m256i tv[4],
                                                                            const int8_t* high,
                                                                            const int8_t* low) {
  const __m256i* hr = reinterpret_cast<const __m256i*>(high);
  const __m256i* lr = reinterpret_cast<const __m256i*>(low);
  __m256i h = _mm256_maddubs_epi16(tv[0], _mm256_load_si256(hr));
  __m256i l = _mm256_maddubs_epi16(tv[0], _mm256_load_si256(lr));
  for (int c = 1; c < 4; ++c) {
    h = _mm256_add_epi16(h, _mm256_maddubs_epi16(tv[c], _mm256_load_si256(hr + c)));
    l = _mm256_add_epi16(l, _mm256_maddubs_epi16(tv[c], _mm256_load_si256(lr + c)));
  }
  return _mm256_add_epi32(_mm256_madd_epi16(h, _mm256_set1_epi16(16)), _mm256_madd_epi16(l, _mm256_set1_epi16(1)));
}

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
  const __m256i dead = DeadLanes(rows);
  NearestTwoRows nearest;
  for (uint64_t j = 0; j < nt; ++j) {
    __m256i tv[4], acc[kRowBlock];
    for (int c = 0; c < 4; ++c) tv[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t + j * kDim) + c);
    for (int r = 0; r < kRowBlock; ++r) acc[r] = NibbleProducts(tv, high[r], low[r]);
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

#ifdef TIEPOINT_MATCH_SIMD
// 0: portable, 1: AVX2, 2: AVX-512 VNNI. TIEPOINT_MATCHER_SCAN=scalar|avx2 keeps a
// narrower scan than the CPU allows (the tests run each).
int ScanLevel() {
  static const int scan = [] {
    const char* e = std::getenv("TIEPOINT_MATCHER_SCAN");
    const std::string want = e ? e : "";
    if (want == "scalar" || !__builtin_cpu_supports("avx2")) return 0;
    if (want == "avx2" || !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512vnni")) return 1;
    return 2;
  }();
  return scan;
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
  const int scan = ScanLevel();
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

#ifdef TIEPOINT_MATCH_SIMD
// The bounded scan (CpuMatcher::MatchPairs on sets of many pairs): the same nearest two
// as NearestTwo, exactly, from far fewer exact distances. For an orthonormal k x 128
// projection P (the top principal axes of the descriptors), |P a - P b| <= |a - b|, so the
// projected distance is a lower bound that costs k/128 of an exact one; a row needs the
// exact distance only to the targets whose bound does not exceed its second-nearest
// distance so far. For each block of rows: the bound to every target (eight targets a
// vector); per row, the exact distances to two targets of small bound, whose larger sets a
// threshold; the targets whose bounds pass it, gathered; their exact distances, each
// skipped when its bound no longer passes the threshold as it tightens. On SIFT
// descriptors 32 axes hold ~80% of the variance and ~3% of the targets are left for exact
// distances (dinoSparseRing); on descriptors without such axes (uniform noise) the scan
// is not used (kMinBoundEnergy).
//
// The bound in floats: a projection is a sum of 128 products P_cj x_j with
// sum_j |P_cj x_j| <= |x| <= 255 sqrt(128) < 2,886, so each coordinate is within
// 128 u 2,886 < 0.023 of its value in exact arithmetic (u = 2^-24), and a projected
// difference within 0.26 in norm; the float P is within 64 u < 4e-6 of the orthonormal
// one (2-norm: its rows' roundings, u each entry at most); the differences, squares and
// sum add a relative 34 u. So a float bound B
// has sqrt(B) <= (1 + 2e-6)((1 + 4e-6) |a - b| + 0.26). A target is skipped only when
// B > T^2, T = (sqrt(s) + 1)(1 + 1e-4), s the row's second-nearest distance so far; then
// (1 + 6e-6) |a - b| > T - 0.27 > sqrt(s) + 0.73, so |a - b| > sqrt(s) (sqrt(s) < 2,886):
// the target is neither of the nearest two nor ties with them, and the nearest two are
// those of the full scan (ties included: the exact distances come out of index order, and
// the update keeps the lowest index among equal distances).
constexpr int kBoundDim = 32;

// 32-byte aligned floats (vector storage, aligned start).
class AlignedFloats {
 public:
  explicit AlignedFloats(size_t n) : v_(n + 8) {}
  float* data() {
    const auto p = reinterpret_cast<uintptr_t>(v_.data());
    return reinterpret_cast<float*>((p + 31) & ~uintptr_t{31});
  }

 private:
  std::vector<float> v_;
};

// Projections are used when their axes hold at least this share of the variance (random
// uniform descriptors: 32 / 128 = 0.25).
constexpr double kMinBoundEnergy = 0.5;
// Descriptors sampled (evenly over the sets) for the principal axes.
constexpr uint64_t kBoundSamples = 4096;
// MatchPairs uses the bounded scan from this many descriptor pairs (a 16-image ring of
// ~1,700 features each: 3.6e8); below, the axes' set-up (~10 ms) would not pay.
constexpr double kBoundMinDescriptorPairs = 2e7;

struct BoundBasis {
  // pt[j * kBoundDim + c] = P[c][j]: row j is descriptor element j's contribution.
  std::vector<float> pt;
};

// The kBoundDim principal axes of an even sample of the sets' descriptors (any orthonormal
// axes give a valid bound; these give a tight one). false, unless `force`, when there are
// too few descriptors to estimate them or they hold too little of the variance.
bool BuildBoundBasis(const std::vector<std::pair<const uint8_t*, uint64_t>>& sets, bool force,
                     BoundBasis* basis) {
  uint64_t total = 0;
  for (const auto& s : sets) total += s.second;
  if (total == 0 || (!force && total < 4 * kBoundDim)) return false;
  const uint64_t stride = std::max<uint64_t>(1, total / kBoundSamples);
  Eigen::MatrixXf x(static_cast<Eigen::Index>((total + stride - 1) / stride), kDim);
  Eigen::Index m = 0;
  uint64_t at = 0;
  for (const auto& [d, n] : sets) {
    // Global indices at, at + 1, ... : take those divisible by stride.
    for (uint64_t i = (stride - at % stride) % stride; i < n; i += stride, ++m)
      for (int k = 0; k < kDim; ++k) x(m, k) = d[i * kDim + k];
    at += n;
  }
  x.conservativeResize(m, kDim);
  const Eigen::RowVectorXf mean = x.colwise().mean();
  x.rowwise() -= mean;
  const Eigen::MatrixXd cov = (x.transpose() * x).cast<double>() / static_cast<double>(m);
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(cov);
  if (eig.info() != Eigen::Success) return false;
  const Eigen::VectorXd& values = eig.eigenvalues();  // increasing
  const double all = values.sum();
  const double energy = all > 0 ? values.tail(kBoundDim).sum() / all : 0.0;  // the axes' share
  if (!force && !(energy >= kMinBoundEnergy)) return false;
  basis->pt.assign(static_cast<size_t>(kDim) * kBoundDim, 0.0f);
  for (int c = 0; c < kBoundDim; ++c)
    for (int j = 0; j < kDim; ++j)
      basis->pt[j * kBoundDim + c] = static_cast<float>(eig.eigenvectors()(j, kDim - 1 - c));
  return true;
}

// out[i * kBoundDim + c] = (P d_i)_c for n descriptors (out 32-byte aligned).
__attribute__((target("avx2,fma"))) void ProjectDescriptors(const BoundBasis& basis, const uint8_t* d,
                                                            uint64_t n, float* out) {
  static_assert(kBoundDim == 32, "four vectors of eight per projection");
  const float* pt = basis.pt.data();
  for (uint64_t i = 0; i < n; ++i) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int j = 0; j < kDim; ++j) {
      const __m256 x = _mm256_set1_ps(static_cast<float>(d[i * kDim + j]));
      for (int c = 0; c < 4; ++c) acc[c] = _mm256_fmadd_ps(x, _mm256_loadu_ps(pt + j * kBoundDim + 8 * c), acc[c]);
    }
    for (int c = 0; c < 4; ++c) _mm256_store_ps(out + i * kBoundDim + 8 * c, acc[c]);
  }
}

// The projections of n descriptors (row-major, p) in blocks of eight descriptors, each a
// kBoundDim x 8 array (coordinate-major), for the bound scan; past n, coordinates of 1e15
// (bounds ~1e31, finite; the scan masks them anyway).
void BlockProjections(const float* p, uint64_t n, float* out) {
  const uint64_t blocks = (n + 7) / 8;
  for (uint64_t b = 0; b < blocks; ++b)
    for (int c = 0; c < kBoundDim; ++c)
      for (int l = 0; l < 8; ++l) {
        const uint64_t i = 8 * b + l;
        out[(b * kBoundDim + c) * 8 + l] = i < n ? p[i * kBoundDim + c] : 1e15f;
      }
}

// The row's threshold on float bounds for a second-nearest distance s (see above).
inline float BoundThreshold(uint32_t s) {
  if (s == kNoSecond) return std::numeric_limits<float>::infinity();
  const double t = (std::sqrt(static_cast<double>(s)) + 1.0) * (1.0 + 1e-4);
  const double t2 = t * t;
  float f = static_cast<float>(t2);
  if (static_cast<double>(f) < t2) f = std::nextafter(f, std::numeric_limits<float>::infinity());
  return f;
}

// One exact distance, |q|^2 + |t|^2 - 2 q.t, with q as the nibbles of ScanBlockAvx2.
__attribute__((target("avx2"), always_inline)) inline uint32_t ExactDistance(const int8_t* high, const int8_t* low,
                                                                           int32_t qnorm, const uint8_t* t,
                                                                           int32_t tnorm) {
  __m256i tv[4];
  for (int c = 0; c < 4; ++c) tv[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t) + c);
  const __m256i acc = NibbleProducts(tv, high, low);
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return static_cast<uint32_t>(qnorm + tnorm - 2 * _mm_cvtsi128_si32(s));
}

// For each 8-bit mask, the indices of its set bits, in order, then zeros: a permutation
// that packs the passing lanes of a vector to its front.
struct CompressTable {
  alignas(32) int32_t lanes[256][8];
};
const CompressTable& Compress() {
  static const CompressTable table = [] {
    CompressTable t{};
    for (int mask = 0; mask < 256; ++mask) {
      int k = 0;
      for (int l = 0; l < 8; ++l)
        if (mask & (1 << l)) t.lanes[mask][k++] = l;
    }
    return t;
  }();
  return table;
}

// One block of up to kRowBlock query rows against every target, as ScanBlockAvx2 computes
// it (the same nearest two), from the rows' projections qp (row-major) and the targets'
// in blocks of eight (tb: BlockProjections). `bounds` holds kRowBlock rows of the targets
// rounded up to eight. Returns the exact distances it computed.
__attribute__((target("avx2,fma"))) uint64_t BoundedBlock(const uint8_t* q, uint64_t i0, int rows,
                                                          const int32_t* qn, const float* qp, const uint8_t* t,
                                                          uint64_t nt, const int32_t* tn, const float* tb,
                                                          float* bounds, uint32_t* candidates, uint32_t* best_index,
                                                          uint32_t* best_d, uint32_t* second_d) {
  alignas(32) int8_t high[kRowBlock][kDim], low[kRowBlock][kDim];
  // The rows' projections with each coordinate in all eight lanes (loads, not broadcasts,
  // in the loop below: a broadcast takes a vector pipe on Zen 3).
  alignas(32) float rp[kRowBlock][kBoundDim][8];
  for (int r = 0; r < kRowBlock; ++r) {
    for (int k = 0; k < kDim; ++k) {
      const int v = r < rows ? q[(i0 + r) * kDim + k] : 0;
      high[r][k] = static_cast<int8_t>(v >> 4);
      low[r][k] = static_cast<int8_t>(v & 15);
    }
    for (int c = 0; c < kBoundDim; ++c) {
      const float x = r < rows ? qp[(i0 + r) * kBoundDim + c] : 0.0f;
      for (int l = 0; l < 8; ++l) rp[r][c][l] = x;
    }
  }
  const uint64_t blocks = (nt + 7) / 8, padded = blocks * 8;
  // 1. Every target's bound: eight targets a vector, so no horizontal sums.
  for (uint64_t b = 0; b < blocks; ++b) {
    const float* tv = tb + b * kBoundDim * 8;
    __m256 acc[kRowBlock];
    {
      const __m256 x = _mm256_load_ps(tv);
      for (int r = 0; r < kRowBlock; ++r) {
        const __m256 e = _mm256_sub_ps(x, _mm256_load_ps(rp[r][0]));
        acc[r] = _mm256_mul_ps(e, e);
      }
    }
    for (int c = 1; c < kBoundDim; ++c) {
      const __m256 x = _mm256_load_ps(tv + 8 * c);
      for (int r = 0; r < kRowBlock; ++r) {
        const __m256 e = _mm256_sub_ps(x, _mm256_load_ps(rp[r][c]));
        acc[r] = _mm256_fmadd_ps(e, e, acc[r]);
      }
    }
    for (int r = 0; r < kRowBlock; ++r) _mm256_store_ps(bounds + r * padded + 8 * b, acc[r]);
  }
  // 2. Per row: the exact distances to two targets of small bound (the two smallest of 32
  // running minima: four chains of eight lanes), then to each target whose bound passes the
  // row's threshold as it tightens. Exact distances come in any order: the lowest index wins
  // among equal ones.
  const unsigned last_lanes = (nt % 8) ? (1u << (nt % 8)) - 1 : 0xffu;
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  uint64_t exact = 0;
  for (int r = 0; r < rows; ++r) {
    const float* br = bounds + r * padded;
    uint32_t best = kNoSecond, index = 0, second = kNoSecond;
    float threshold = std::numeric_limits<float>::infinity();
    auto update = [&](uint64_t j, uint32_t d) {
      ++exact;
      const uint32_t jj = static_cast<uint32_t>(j);
      if (d < best || (d == best && jj < index)) {
        second = best;
        best = d;
        index = jj;
      } else if (d < second) {
        second = d;
      } else {
        return;
      }
      threshold = BoundThreshold(second);
    };
    // Four independent running minima (one chain would bound the speed by its latency).
    const __m256 inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
    const __m256i none = _mm256_set1_epi32(-1);
    __m256 m0 = inf, m1 = inf, m2 = inf, m3 = inf;
    __m256i i0v = none, i1v = none, i2v = none, i3v = none;
    auto step = [](const float* at, __m256i j, __m256* mm, __m256i* ii) __attribute__((target("avx2"))) {
      const __m256 v = _mm256_load_ps(at);
      const __m256 lt = _mm256_cmp_ps(v, *mm, _CMP_LT_OQ);
      *mm = _mm256_blendv_ps(*mm, v, lt);
      *ii = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(*ii), _mm256_castsi256_ps(j), lt));
    };
    const __m256i eight = _mm256_set1_epi32(8);
    __m256i jv = lane;
    uint64_t b = 0;
    for (; b + 4 <= blocks; b += 4) {
      step(br + 8 * b, jv, &m0, &i0v);
      jv = _mm256_add_epi32(jv, eight);
      step(br + 8 * b + 8, jv, &m1, &i1v);
      jv = _mm256_add_epi32(jv, eight);
      step(br + 8 * b + 16, jv, &m2, &i2v);
      jv = _mm256_add_epi32(jv, eight);
      step(br + 8 * b + 24, jv, &m3, &i3v);
      jv = _mm256_add_epi32(jv, eight);
    }
    for (; b < blocks; ++b) {
      step(br + 8 * b, jv, &m0, &i0v);
      jv = _mm256_add_epi32(jv, eight);
    }
    const __m256 m[4] = {m0, m1, m2, m3};
    const __m256i mi[4] = {i0v, i1v, i2v, i3v};
    alignas(32) float lane_min[32];
    alignas(32) int32_t lane_index[32];
    for (int u = 0; u < 4; ++u) {
      _mm256_store_ps(lane_min + 8 * u, m[u]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(lane_index + 8 * u), mi[u]);
    }
    int64_t seed[2] = {-1, -1};
    for (int k = 0; k < 2; ++k) {
      int pick = -1;
      for (int l = 0; l < 32; ++l) {
        if (lane_index[l] < 0 || static_cast<uint64_t>(lane_index[l]) >= nt || lane_index[l] == seed[0]) continue;
        if (pick < 0 || lane_min[l] < lane_min[pick]) pick = l;
      }
      if (pick < 0) break;
      seed[k] = lane_index[pick];
      const uint64_t j = static_cast<uint64_t>(seed[k]);
      update(j, ExactDistance(high[r], low[r], qn[i0 + r], t + j * kDim, tn[j]));
    }
    // The candidates under the seeds' threshold first (no dependency on the exact
    // distances, so the scan runs ahead), then their exact distances, each skipped when its
    // bound no longer passes the threshold as it tightens.
    const __m256 tv = _mm256_set1_ps(threshold);
    const CompressTable& compress = Compress();
    size_t count = 0;
    for (uint64_t blk = 0; blk < blocks; ++blk) {
      unsigned pass = static_cast<unsigned>(
          _mm256_movemask_ps(_mm256_cmp_ps(_mm256_load_ps(br + 8 * blk), tv, _CMP_LE_OQ)));
      if (blk + 1 == blocks) pass &= last_lanes;
      // Branch-free: the passing lanes' indices to the front, stored whole (candidates has
      // room for eight past nt).
      const __m256i picked = _mm256_permutevar8x32_epi32(
          _mm256_add_epi32(lane, _mm256_set1_epi32(static_cast<int32_t>(8 * blk))),
          _mm256_load_si256(reinterpret_cast<const __m256i*>(compress.lanes[pass])));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(candidates + count), picked);
      count += static_cast<size_t>(__builtin_popcount(pass));
    }
    for (size_t k = 0; k < count; ++k) {
      const uint64_t j = candidates[k];
      if (static_cast<int64_t>(j) == seed[0] || static_cast<int64_t>(j) == seed[1] || !(br[j] <= threshold)) continue;
      update(j, ExactDistance(high[r], low[r], qn[i0 + r], t + j * kDim, tn[j]));
    }
    best_index[i0 + r] = index;
    best_d[i0 + r] = best;
    second_d[i0 + r] = second;
  }
  return exact;
}

// NearestTwo without the mutual check, by the bounded scan (projections qp row-major, tb
// in blocks: ProjectDescriptors, BlockProjections). Returns the exact distances computed.
uint64_t BoundedNearestTwo(const uint8_t* q, uint64_t nq, const std::vector<int32_t>& qn, const float* qp,
                           const uint8_t* t, uint64_t nt, const std::vector<int32_t>& tn, const float* tb,
                           int threads, uint32_t* best_index, uint32_t* best_d, uint32_t* second_d) {
  const int64_t blocks = static_cast<int64_t>((nq + kRowBlock - 1) / kRowBlock);
  uint64_t exact = 0;
#pragma omp parallel num_threads(threads) reduction(+ : exact)
  {
    AlignedFloats bounds(((nt + 7) / 8) * 8 * kRowBlock);
    std::vector<uint32_t> candidates(nt + 8);
#pragma omp for schedule(dynamic, 4)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const uint64_t i0 = static_cast<uint64_t>(blk) * kRowBlock;
      const int rows = static_cast<int>(std::min<uint64_t>(kRowBlock, nq - i0));
      exact += BoundedBlock(q, i0, rows, qn.data(), qp, t, nt, tn.data(), tb, bounds.data(), candidates.data(),
                            best_index, best_d, second_d);
    }
  }
  return exact;
}
#endif

// Pair p's two indices name an image.
Status CheckPairIndices(const std::vector<const Features*>& images, size_t p, std::pair<int, int> pair) {
  const auto [i, j] = pair;
  if (i < 0 || j < 0 || i >= static_cast<int>(images.size()) || j >= static_cast<int>(images.size())) {
    return Status::InvalidInput("pair " + std::to_string(p) + " (" + std::to_string(i) + ", " +
                                std::to_string(j) + ") names an image outside 0.." +
                                std::to_string(images.size()) + "-1");
  }
  return Status::Ok();
}

// Everything the pair-by-pair MatchPairs would refuse pair p for, in its order: the indices,
// then what Match checks (each image's descriptors fit its keypoints; the sizes fit
// kMaxMatcherDescriptors). The bounded path checks every pair first with it.
Status CheckPair(const std::vector<const Features*>& images, size_t p, std::pair<int, int> pair) {
  TIEPOINT_RETURN_IF_ERROR(CheckPairIndices(images, p, pair));
  const auto [i, j] = pair;
  TIEPOINT_RETURN_IF_ERROR(images[i]->CheckConsistent());
  TIEPOINT_RETURN_IF_ERROR(images[j]->CheckConsistent());
  return CheckMatcherSizes(images[i]->size(), images[j]->size());
}

// The matches of n rows from their nearest two (index, distance; second distance): the
// rows that pass the ratio and distance tests and, with col_index (each target's nearest
// row), the mutual check, in row order.
void AppendMatches(const MatcherOptions& o, uint64_t n, const uint32_t* index, const uint32_t* d,
                   const uint32_t* second, const uint32_t* col_index, std::vector<FeatureMatch>* matches) {
  const double ratio_sq = o.ratio * o.ratio;
  const double max_sq = o.max_distance < 0 ? -1.0 : o.max_distance * o.max_distance;
  for (uint64_t i = 0; i < n; ++i) {
    if (!PassesRatioAndDistance(ratio_sq, max_sq, d[i], second[i])) continue;
    if (col_index && col_index[index[i]] != i) continue;
    matches->push_back({static_cast<uint32_t>(i), index[i], d[i]});
  }
}

#ifdef TIEPOINT_MATCH_SIMD
// TIEPOINT_MATCHER_BOUND=off|always: never use the bounded scan, or use it for every pair
// (Match as well), whatever the CPU, the sizes and the variance its axes hold (the tests
// run both); unset, MatchPairs uses it where the scan is AVX2 (not VNNI), from
// kBoundMinDescriptorPairs, where the axes hold kMinBoundEnergy.
enum class BoundMode { kOff, kAuto, kAlways };
BoundMode BoundScanMode() {
  static const BoundMode mode = [] {
    const char* e = std::getenv("TIEPOINT_MATCHER_BOUND");
    const std::string want = e ? e : "";
    if (want == "off") return BoundMode::kOff;
    if (want == "always") return BoundMode::kAlways;
    return BoundMode::kAuto;
  }();
  return mode;
}
#endif

class CpuMatcher : public DescriptorMatcher {
 public:
  explicit CpuMatcher(const MatcherOptions& options) : options_(options) {}

  Status Match(const uint8_t* a, uint64_t n1, const uint8_t* b, uint64_t n2,
               std::vector<FeatureMatch>* matches) override {
    const Timer timer;
    TIEPOINT_RETURN_IF_ERROR(BeginMatch(n1, n2, matches));
    if (n1 == 0 || n2 == 0) return Status::Ok();
#ifdef TIEPOINT_MATCH_SIMD
    if (BoundScanMode() == BoundMode::kAlways) {
      std::vector<std::vector<FeatureMatch>> one;
      if (MatchBounded({{a, n1}, {b, n2}}, {{0, 1}}, true, &one, nullptr)) {
        *matches = std::move(one[0]);
        summary_.seconds = timer.Seconds();
        return Status::Ok();
      }
    }
#endif
    const int threads = Threads();
    std::vector<int32_t> na, nb;
    Norms(a, n1, &na);
    Norms(b, n2, &nb);
    std::vector<uint32_t> row_index(n1), row_d(n1), row_second(n1);
    // The mutual check's other direction comes from the same scan.
    std::vector<uint32_t> col_index(options_.mutual ? n2 : 0);
    NearestTwo(a, n1, na, b, n2, nb, threads, row_index.data(), row_d.data(), row_second.data(),
               options_.mutual ? col_index.data() : nullptr);
    AppendMatches(options_, n1, row_index.data(), row_d.data(), row_second.data(),
                  options_.mutual ? col_index.data() : nullptr, matches);
    summary_.seconds = timer.Seconds();
    return Status::Ok();
  }

  Status MatchPairs(const std::vector<const Features*>& images, const std::vector<std::pair<int, int>>& pairs,
                    std::vector<std::vector<FeatureMatch>>* matches,
                    const std::function<void(size_t, size_t)>& progress) override {
#ifdef TIEPOINT_MATCH_SIMD
    const BoundMode mode = BoundScanMode();
    if (mode != BoundMode::kOff) {
      // Checked as the pair-by-pair MatchPairs checks them; a bad pair or set goes there,
      // for its error.
      bool valid = true;
      double descriptor_pairs = 0;
      for (size_t p = 0; p < pairs.size() && valid; ++p) {
        valid = CheckPair(images, p, pairs[p]).ok();
        const auto [i, j] = pairs[p];
        if (valid) descriptor_pairs += static_cast<double>(images[i]->size()) * static_cast<double>(images[j]->size());
      }
      // Auto: with the AVX2 scan only; the VNNI scan (32 byte products an instruction) is
      // faster than the bounded scan's float bounds (the H200 host's Xeon, dino: 0.37-0.40 s
      // against 0.45-0.53 s at 2 threads, 0.062-0.064 s against 0.087-0.094 s at 16).
      const bool worth = descriptor_pairs >= kBoundMinDescriptorPairs && ScanLevel() == 1;
      if (valid && (mode == BoundMode::kAlways || worth)) {
        const Timer timer;
        std::vector<std::pair<const uint8_t*, uint64_t>> sets;
        for (const Features* f : images) sets.emplace_back(f->descriptors.data(), f->size());
        if (MatchBounded(sets, pairs, mode == BoundMode::kAlways, matches, progress)) {
          summary_.seconds = timer.Seconds();
          return Status::Ok();
        }
      }
    }
#endif
    return DescriptorMatcher::MatchPairs(images, pairs, matches, progress);
  }

 private:
  int Threads() const { return options_.num_threads > 0 ? options_.num_threads : omp_get_max_threads(); }

#ifdef TIEPOINT_MATCH_SIMD
  // The pairs by the bounded scan (sizes and indices already checked). false, with nothing
  // done, where it does not apply: the mutual check, a CPU without AVX2 and FMA (or a
  // narrower scan asked for), or (unless `force`) axes that hold too little variance.
  bool MatchBounded(const std::vector<std::pair<const uint8_t*, uint64_t>>& sets,
                    const std::vector<std::pair<int, int>>& pairs, bool force,
                    std::vector<std::vector<FeatureMatch>>* matches,
                    const std::function<void(size_t, size_t)>& progress) {
    if (options_.mutual || ScanLevel() < 1 || !__builtin_cpu_supports("fma")) return false;
    // The sets the pairs use, for the axes, projections and norms.
    std::vector<int> used(sets.size(), 0);
    for (const auto& [i, j] : pairs) used[i] = used[j] = 1;
    std::vector<std::pair<const uint8_t*, uint64_t>> sample;
    for (size_t k = 0; k < sets.size(); ++k)
      if (used[k]) sample.push_back(sets[k]);
    BoundBasis basis;
    if (!BuildBoundBasis(sample, force, &basis)) return false;
    const int threads = Threads();
    // Each set's projections row-major (as queries) and in blocks (as targets).
    std::vector<AlignedFloats> proj, blocked;
    std::vector<std::vector<int32_t>> norms(sets.size());
    proj.reserve(sets.size());
    blocked.reserve(sets.size());
    for (size_t k = 0; k < sets.size(); ++k) {
      proj.emplace_back(used[k] ? sets[k].second * kBoundDim : 0);
      blocked.emplace_back(used[k] ? (sets[k].second + 7) / 8 * 8 * kBoundDim : 0);
    }
#pragma omp parallel for num_threads(threads) schedule(dynamic)
    for (int64_t k = 0; k < static_cast<int64_t>(sets.size()); ++k) {
      if (!used[k]) continue;
      ProjectDescriptors(basis, sets[k].first, sets[k].second, proj[k].data());
      BlockProjections(proj[k].data(), sets[k].second, blocked[k].data());
      Norms(sets[k].first, sets[k].second, &norms[k]);
    }
    summary_ = {};
    matches->assign(pairs.size(), {});
    for (size_t p = 0; p < pairs.size(); ++p) {
      const auto [a, b] = pairs[p];
      const uint64_t n1 = sets[a].second, n2 = sets[b].second;
      summary_.descriptor_pairs += static_cast<double>(n1) * static_cast<double>(n2);
      if (n1 > 0 && n2 > 0) {
        std::vector<uint32_t> row_index(n1), row_d(n1), row_second(n1);
        summary_.exact_distances += static_cast<double>(
            BoundedNearestTwo(sets[a].first, n1, norms[a], proj[a].data(), sets[b].first, n2, norms[b],
                              blocked[b].data(), threads, row_index.data(), row_d.data(), row_second.data()));
        AppendMatches(options_, n1, row_index.data(), row_d.data(), row_second.data(), nullptr, &(*matches)[p]);
      }
      if (progress) progress(p + 1, pairs.size());
    }
    return true;
  }
#endif

  MatcherOptions options_;
};

}  // namespace

Status DescriptorMatcher::BeginMatch(uint64_t n1, uint64_t n2, std::vector<FeatureMatch>* matches) {
  TIEPOINT_RETURN_IF_ERROR(CheckMatcherSizes(n1, n2));
  matches->clear();
  summary_ = {};
  summary_.descriptor_pairs = static_cast<double>(n1) * static_cast<double>(n2);
  summary_.exact_distances = summary_.descriptor_pairs;
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
  double descriptor_pairs = 0, exact_distances = 0;
  for (size_t p = 0; p < pairs.size(); ++p) {
    TIEPOINT_RETURN_IF_ERROR(CheckPairIndices(images, p, pairs[p]));  // Match checks the rest
    const auto [i, j] = pairs[p];
    TIEPOINT_RETURN_IF_ERROR(Match(*images[i], *images[j], &(*matches)[p]));
    descriptor_pairs += summary_.descriptor_pairs;
    exact_distances += summary_.exact_distances;
    if (progress) progress(p + 1, pairs.size());
  }
  summary_.seconds = timer.Seconds();
  summary_.descriptor_pairs = descriptor_pairs;
  summary_.exact_distances = exact_distances;
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
