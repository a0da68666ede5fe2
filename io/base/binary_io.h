// Little-endian fields of the project's binary files (features, matches), and reading a
// whole file into memory with errors that name it. Byte order is fixed (little-endian)
// whatever the host, so the files move between machines.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "io/base/status.h"

namespace tiepoint {

inline void PutU32(uint32_t v, unsigned char* out) {
  for (int b = 0; b < 4; ++b) out[b] = static_cast<unsigned char>((v >> (8 * b)) & 0xffu);
}
inline void PutU64(uint64_t v, unsigned char* out) {
  for (int b = 0; b < 8; ++b) out[b] = static_cast<unsigned char>((v >> (8 * b)) & 0xffu);
}
inline uint32_t GetU32(const unsigned char* in) {
  uint32_t v = 0;
  for (int b = 0; b < 4; ++b) v |= static_cast<uint32_t>(in[b]) << (8 * b);
  return v;
}
inline uint64_t GetU64(const unsigned char* in) {
  uint64_t v = 0;
  for (int b = 0; b < 8; ++b) v |= static_cast<uint64_t>(in[b]) << (8 * b);
  return v;
}
inline void PutF32(float f, unsigned char* out) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  PutU32(bits, out);
}
inline void PutF64(double f, unsigned char* out) {
  uint64_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  PutU64(bits, out);
}
inline float GetF32(const unsigned char* in) {
  const uint32_t bits = GetU32(in);
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}
inline double GetF64(const unsigned char* in) {
  const uint64_t bits = GetU64(in);
  double f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// The whole of `path` into `bytes`. Errors name the path; a directory is reported as
// "is a directory, not a <what>".
Status ReadWholeFile(const std::string& path, const char* what, std::vector<unsigned char>* bytes);

}  // namespace tiepoint
