// What every fuzz target shares: the libFuzzer entry point's signature and a check that
// stops the run (a crash the fuzzer records) when a reader breaks its own contract.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "io/base/status.h"
#include "io/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

// A reader that accepts a file must hand back something its writer accepts too, and a
// failure must carry a message: anything else is a bug, so abort and let the fuzzer
// keep the input.
#define TIEPOINT_FUZZ_CHECK(cond)                                                      \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)

namespace tiepoint::fuzz {

// A failed read must say what failed, naming the input.
inline void CheckFailure(const Status& s, const char* name) {
  if (s.ok()) return;
  TIEPOINT_FUZZ_CHECK(!s.message().empty());
  TIEPOINT_FUZZ_CHECK(s.message().find(name) != std::string::npos);
  TIEPOINT_FUZZ_CHECK(s.code() != StatusCode::kInternal);
}

// An image a decoder accepted: a positive size, its pixels, every value in [0, 1].
inline void CheckGrayImage(const GrayImage& image) {
  TIEPOINT_FUZZ_CHECK(image.width > 0 && image.height > 0);
  TIEPOINT_FUZZ_CHECK(image.pixels.size() == static_cast<size_t>(image.width) * image.height);
  for (float v : image.pixels) TIEPOINT_FUZZ_CHECK(v >= 0.0f && v <= 1.0f);
}

}  // namespace tiepoint::fuzz
