// BAL text parsed on all threads.
//
// BAL is a stream of whitespace-separated tokens whose meaning is set by their index
// alone (3 header counts, 4 per observation, 9 per camera, 3 per point), with one line
// rule: a header's or an observation's values share a line. So, with the text cut into
// chunks at line ends (no token and no line straddles two chunks):
//  1. every chunk's tokens are counted (SSE2, 16 bytes per step), concurrently;
//  2. the header is read first; the scene is sized for it (once the header is known to
//     fit the text's size: allocation stays bounded by the input) while the others count;
//     the prefix sums give each chunk the global index of its first token, and the
//     total must be the header's;
//  3. every chunk is parsed concurrently into its place in the scene, with the serial
//     reader's own number parsing (std::from_chars fast path, ParseInt/ParseDouble for
//     the rest) and its checks (index ranges, finiteness, an observation on one line).
// Anything wrong makes the whole parse return false: errors are rare, and the serial
// reader, run by the caller over the same bytes, then gives the message with file and
// line exactly as before.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <new>
#include <stdexcept>

#include "io/bal_internal.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tiepoint::bal_internal {
namespace {

// Automatic chunk size: big enough that the per-chunk work is negligible, small enough
// that every thread gets several chunks (dynamic scheduling evens out slow ones).
constexpr size_t kMaxAutoChunk = size_t{4} << 20;
constexpr size_t kMinAutoChunk = size_t{64} << 10;

struct Chunk {
  const char* begin = nullptr;
  const char* end = nullptr;
  int64_t tokens = 0;  // tokens in [begin, end)
  int64_t first = 0;   // global index of the first of them
};

std::vector<Chunk> SplitIntoChunks(const std::vector<TextPiece>& pieces, size_t chunk_bytes) {
  std::vector<Chunk> chunks;
  for (const TextPiece& piece : pieces) {
    const char* p = piece.data;
    const char* const end = piece.data + piece.size;
    while (p < end) {
      const char* cut = end;
      if (static_cast<size_t>(end - p) > chunk_bytes) {
        // The chunk ends after the first '\n' at or past p + chunk_bytes - 1.
        const char* from = p + chunk_bytes - 1;
        const void* nl = std::memchr(from, '\n', static_cast<size_t>(end - from));
        if (nl != nullptr) cut = static_cast<const char*>(nl) + 1;
      }
      chunks.push_back({p, cut, 0, 0});
      p = cut;
    }
  }
  return chunks;
}

// Tokens (maximal runs of non-space bytes) in [p, e), where p starts a line.
int64_t CountTokens(const char* p, const char* const e) {
  int64_t count = 0;
  unsigned prev_space = 1;
#if defined(__SSE2__)
  const __m128i k9 = _mm_set1_epi8(9);
  const __m128i k4 = _mm_set1_epi8(4);
  const __m128i k32 = _mm_set1_epi8(32);
  while (e - p >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i t = _mm_sub_epi8(v, k9);                          // 9..13 -> 0..4
    const __m128i ctrl = _mm_cmpeq_epi8(_mm_min_epu8(t, k4), t);    // t <= 4 unsigned
    const __m128i space = _mm_or_si128(ctrl, _mm_cmpeq_epi8(v, k32));
    const unsigned m = static_cast<unsigned>(_mm_movemask_epi8(space));
    const unsigned starts = ~m & ((m << 1) | prev_space) & 0xffffu;
    count += __builtin_popcount(starts);
    prev_space = m >> 15;
    p += 16;
  }
#endif
  for (; p < e; ++p) {
    const unsigned s = IsSpace(*p) ? 1u : 0u;
    count += (s == 0 && prev_space != 0);
    prev_space = s;
  }
  return count;
}

// The serial reader's NextInt and NextDouble on the token at p (which ends at e or at a
// space before it). Each advances p past the token and says whether it is a valid value.
inline bool IntToken(const char*& p, const char* const e, int64_t* value) {
  const char* const t = p;
  const auto [ptr, ec] = std::from_chars(t, e, *value);
  if (ec == std::errc() && ptr != t && (ptr == e || IsSpace(*ptr))) {
    p = ptr;
  } else {
    while (p < e && !IsSpace(*p)) ++p;
    if (!ParseInt(std::string_view(t, static_cast<size_t>(p - t)), value)) return false;
  }
  return static_cast<size_t>(p - t) <= kMaxTokenLength;
}

inline bool DoubleToken(const char*& p, const char* const e, double* value) {
  const char* const t = p;
  const auto [ptr, ec] = std::from_chars(t, e, *value);
  if (ec == std::errc() && ptr != t && (ptr == e || IsSpace(*ptr)) && std::isfinite(*value)) {
    p = ptr;
  } else {
    while (p < e && !IsSpace(*p)) ++p;
    if (ParseDouble(std::string_view(t, static_cast<size_t>(p - t)), value) !=
        NumberKind::kOk) {
      return false;
    }
  }
  return static_cast<size_t>(p - t) <= kMaxTokenLength;
}

// Token index ranges of the sections.
struct Layout {
  int64_t cameras = 0, points = 0, observations = 0;
  int64_t obs_end = 0;  // header and observation tokens
  int64_t cam_end = 0;  // ... and camera parameters
  int64_t total = 0;    // ... and point coordinates
};

// The header as the serial reader checks it: the first three tokens, integers on one
// line, in range, no more observations than camera-point pairs. A line never straddles
// two pieces, so the three are in the piece of the first.
bool ReadHeader(const std::vector<TextPiece>& pieces, Layout* layout, std::string* why) {
  const char* p = nullptr;
  const char* e = nullptr;
  for (const TextPiece& piece : pieces) {
    p = piece.data;
    e = piece.data + piece.size;
    while (p < e && IsSpace(*p)) ++p;
    if (p < e) break;
  }
  const int64_t limits[3] = {kMaxCameras, kMaxPoints, kMaxObservations};
  int64_t values[3];
  for (int k = 0; k < 3; ++k) {
    bool newline = false;
    while (p < e && IsSpace(*p)) newline |= (*p++ == '\n');
    if (p == e || (k > 0 && newline) || !IntToken(p, e, &values[k]) || values[k] < 0 ||
        values[k] > limits[k]) {
      *why = "header not three counts on one line, or out of range";
      return false;
    }
  }
  layout->cameras = values[0];
  layout->points = values[1];
  layout->observations = values[2];
  if (layout->observations > layout->cameras * layout->points) {
    *why = "more observations than camera-point pairs";
    return false;
  }
  layout->obs_end = 3 + 4 * layout->observations;
  layout->cam_end = layout->obs_end + kCameraParams * layout->cameras;
  layout->total = layout->cam_end + kPointParams * layout->points;
  return true;
}

// Sizes the scene's arrays for the header's counts (zero-filled: std::vector's resize).
void SizeScene(const Layout& layout, Scene* scene) {
  scene->obs_camera.resize(static_cast<size_t>(layout.observations));
  scene->obs_point.resize(static_cast<size_t>(layout.observations));
  scene->obs_xy.resize(static_cast<size_t>(2 * layout.observations));
  scene->cameras.resize(static_cast<size_t>(kCameraParams * layout.cameras));
  scene->points.resize(static_cast<size_t>(kPointParams * layout.points));
}

// Parses one chunk into its place in *scene (sized already); false on any invalid token.
bool ParseChunk(const Chunk& c, const Layout& layout, Scene* scene) {
  const char* p = c.begin;
  const char* const e = c.end;
  int32_t* const obs_camera = scene->obs_camera.data();
  int32_t* const obs_point = scene->obs_point.data();
  double* const obs_xy = scene->obs_xy.data();
  double* const cameras = scene->cameras.data();
  double* const points = scene->points.data();
  const int64_t end = c.first + c.tokens;
  bool newline = true;  // a chunk starts a line
  for (int64_t g = c.first; g < end; ++g) {
    while (p < e && IsSpace(*p)) newline |= (*p++ == '\n');
    if (p == e) return false;  // fewer tokens than counted: cannot happen
    if (g < 3) {  // header, read already
      while (p < e && !IsSpace(*p)) ++p;
    } else if (g < layout.obs_end) {
      const int64_t r = g - 3;
      const int64_t i = r >> 2;
      const int field = static_cast<int>(r & 3);
      if (field > 0 && newline) return false;  // an observation's values share a line
      if (field < 2) {
        int64_t v;
        if (!IntToken(p, e, &v) || v < 0) return false;
        if (field == 0) {
          if (v >= layout.cameras) return false;
          obs_camera[i] = static_cast<int32_t>(v);
        } else {
          if (v >= layout.points) return false;
          obs_point[i] = static_cast<int32_t>(v);
        }
      } else {
        if (!DoubleToken(p, e, &obs_xy[2 * i + (field - 2)])) return false;
      }
    } else if (g < layout.cam_end) {
      if (!DoubleToken(p, e, &cameras[g - layout.obs_end])) return false;
    } else {
      if (!DoubleToken(p, e, &points[g - layout.cam_end])) return false;
    }
    newline = false;
  }
  return true;
}

}  // namespace

bool SizeSceneForHeader(const std::string& prefix, size_t max_text_bytes, Scene* scene) {
  const size_t line_end = prefix.find('\n');
  if (line_end == std::string::npos) return false;
  const std::vector<TextPiece> first_line = {{prefix.data(), line_end + 1}};
  Layout layout;
  std::string why;
  if (!ReadHeader(first_line, &layout, &why)) return false;
  if (2 * layout.total - 1 > static_cast<int64_t>(max_text_bytes)) return false;
  try {
    SizeScene(layout, scene);
  } catch (const std::exception&) {
    *scene = Scene();
    return false;
  }
  return true;
}

bool ParseBalText(const std::vector<TextPiece>& pieces, int threads, size_t chunk_bytes,
                  Scene* scene, std::string* why, Scene* presized) {
  std::string reason;
  if (why == nullptr) why = &reason;
  size_t text_bytes = 0;
  for (const TextPiece& piece : pieces) text_bytes += piece.size;
  if (threads <= 0) threads = omp_get_max_threads();
  if (chunk_bytes == 0) {
    chunk_bytes = std::clamp(text_bytes / (8 * static_cast<size_t>(threads)) + 1,
                             kMinAutoChunk, kMaxAutoChunk);
  }
  try {
    Layout layout;
    if (!ReadHeader(pieces, &layout, why)) return false;
    // T tokens take at least 2 T - 1 bytes: a header promising more than the text can
    // hold is wrong (the serial reader says how), and one that passes bounds the scene's
    // size by the text's (at most 24 bytes of scene per 8 bytes of "c p x y\n").
    if (2 * layout.total - 1 > static_cast<int64_t>(text_bytes)) {
      *why = "the header promises more values than the text can hold";
      return false;
    }

    std::vector<Chunk> chunks = SplitIntoChunks(pieces, chunk_bytes);
    const int64_t n = static_cast<int64_t>(chunks.size());
    Scene parsed;
    bool have_size = false;
    if (presized != nullptr &&
        presized->obs_camera.size() == static_cast<size_t>(layout.observations) &&
        presized->obs_point.size() == static_cast<size_t>(layout.observations) &&
        presized->obs_xy.size() == static_cast<size_t>(2 * layout.observations) &&
        presized->cameras.size() == static_cast<size_t>(kCameraParams * layout.cameras) &&
        presized->points.size() == static_cast<size_t>(kPointParams * layout.points)) {
      parsed = std::move(*presized);
      have_size = true;
    }
    std::atomic<bool> sized{true};
    // One thread sizes the scene (a serial zero-fill of up to a GB: as long as the
    // counting) while the others count tokens, then it joins them.
#pragma omp parallel num_threads(threads) if (threads > 1 && n > 1)
    {
#pragma omp single nowait
      {
        try {
          if (!have_size) SizeScene(layout, &parsed);
        } catch (const std::exception&) {
          sized = false;
        }
      }
#pragma omp for schedule(dynamic, 1) nowait
      for (int64_t k = 0; k < n; ++k) {
        Chunk& c = chunks[static_cast<size_t>(k)];
        c.tokens = CountTokens(c.begin, c.end);
      }
    }
    if (!sized) throw std::bad_alloc();
    int64_t total = 0;
    for (Chunk& c : chunks) {
      c.first = total;
      total += c.tokens;
    }
    if (total != layout.total) {
      *why = "the text has " + std::to_string(total) + " values, the header implies " +
             std::to_string(layout.total);
      return false;
    }

    std::atomic<int64_t> first_bad{n};
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (threads > 1 && n > 1)
    for (int64_t k = 0; k < n; ++k) {
      if (first_bad.load(std::memory_order_relaxed) < n) continue;  // failed: stop early
      bool ok;
      try {  // ParseDouble's rare copy could throw; nothing may leave an OpenMP region
        ok = ParseChunk(chunks[static_cast<size_t>(k)], layout, &parsed);
      } catch (const std::exception&) {
        ok = false;
      }
      if (!ok) {
        int64_t seen = first_bad.load();
        while (k < seen && !first_bad.compare_exchange_weak(seen, k)) {
        }
      }
    }
    if (first_bad.load() < n) {
      *why = "invalid value in the chunk starting at value " +
             std::to_string(chunks[static_cast<size_t>(first_bad.load())].first);
      return false;
    }
    *scene = std::move(parsed);
    return true;
  } catch (const std::bad_alloc&) {
    *why = "out of memory";
    return false;
  } catch (const std::length_error&) {
    *why = "out of memory";
    return false;
  }
}

}  // namespace tiepoint::bal_internal
