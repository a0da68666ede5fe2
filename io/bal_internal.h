// Pieces the serial BAL reader (bal.cc) and the parallel text parser (bal_parallel.cc)
// share, so that both accept exactly the same tokens with exactly the same values.
// Not a public header: include io/bal.h.
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "io/scene.h"

namespace tiepoint::bal_internal {

inline constexpr int64_t kMaxCameras = 10'000'000;
inline constexpr int64_t kMaxPoints = 1'000'000'000;
inline constexpr int64_t kMaxObservations = 2'147'483'647;  // observation indices are int32
inline constexpr size_t kMaxTokenLength = 4096;              // longer tokens are garbage

// Whitespace as the reader sees it: ' ', '\t', '\n', '\v', '\f', '\r' (bytes 9..13 and
// 32); lines are counted by '\n'.
struct SpaceTable {
  bool space[256] = {};
  constexpr SpaceTable() {
    space[static_cast<unsigned char>(' ')] = true;
    space[static_cast<unsigned char>('\t')] = true;
    space[static_cast<unsigned char>('\n')] = true;
    space[static_cast<unsigned char>('\r')] = true;
    space[static_cast<unsigned char>('\v')] = true;
    space[static_cast<unsigned char>('\f')] = true;
  }
};
inline constexpr SpaceTable kSpace;

inline bool IsSpace(char c) { return kSpace.space[static_cast<unsigned char>(c)]; }

inline std::string_view StripPlus(std::string_view t) {
  if (t.size() > 1 && t[0] == '+' && t[1] != '+' && t[1] != '-') t.remove_prefix(1);
  return t;
}

enum class NumberKind { kOk, kNotNumber, kNotFinite, kOutOfRange };

// The slow path for a whole token: a leading '+', underflow (to 0 or a subnormal, as
// strtod), overflow, garbage.
inline NumberKind ParseDouble(std::string_view token, double* value) {
  const std::string_view t = StripPlus(token);
  const char* first = t.data();
  const char* last = t.data() + t.size();
  auto [ptr, ec] = std::from_chars(first, last, *value);
  if (ptr != last || t.empty()) return NumberKind::kNotNumber;
  if (ec == std::errc::result_out_of_range) {
    // from_chars reports underflow as out of range too; strtod gives the nearest value
    // (0 or a subnormal), which is fine. Overflow is not.
    const std::string copy(t);
    char* end = nullptr;
    *value = std::strtod(copy.c_str(), &end);
    if (!std::isfinite(*value)) return NumberKind::kOutOfRange;
    return NumberKind::kOk;
  }
  if (ec != std::errc()) return NumberKind::kNotNumber;
  if (!std::isfinite(*value)) return NumberKind::kNotFinite;
  return NumberKind::kOk;
}

inline bool ParseInt(std::string_view token, int64_t* value) {
  const std::string_view t = StripPlus(token);
  const char* last = t.data() + t.size();
  auto [ptr, ec] = std::from_chars(t.data(), last, *value);
  return ec == std::errc() && ptr == last && !t.empty();
}

// BAL text in memory as consecutive pieces (not owned). Every piece but the last ends
// with '\n', so no line (and no token) straddles two pieces.
struct TextPiece {
  const char* data = nullptr;
  size_t size = 0;
};

// Parses BAL text on `threads` threads: the pieces are cut into chunks of about
// `chunk_bytes` (0: automatic) ending at a line end; each chunk's tokens are counted,
// the header read, and every chunk parsed where its tokens belong. Returns true and
// fills *scene only when the text is a valid BAL file, with exactly the values the
// serial reader gives; false for anything else (*why says what), leaving *scene as it
// was: the caller then runs the serial reader for the error message (file and line).
// `presized`, if not null and sized by SizeSceneForHeader for this text's header, is
// used (moved from) instead of sizing a scene while the tokens are counted.
bool ParseBalText(const std::vector<TextPiece>& pieces, int threads, size_t chunk_bytes,
                  Scene* scene, std::string* why, Scene* presized = nullptr);

// Sizes *scene for the header at the start of `prefix` (the text's first bytes, holding
// its whole first line), as ParseBalText would, so that a caller can do it while the rest
// of the text is still being decoded. False (scene untouched) where the header does not
// read, or where it implies more values than `max_text_bytes` of text can hold.
bool SizeSceneForHeader(const std::string& prefix, size_t max_text_bytes, Scene* scene);

}  // namespace tiepoint::bal_internal
