// bzip2 data for tests, made with libbz2 (link BZip2::BZip2).
#pragma once

#include <bzlib.h>
#include <gtest/gtest.h>

#include <string>

namespace tiepoint::testing {

// `text` as one bzip2 stream at block-size level `level` (1-9).
inline std::string Bz2Compress(const std::string& text, int level) {
  unsigned int size = static_cast<unsigned int>(text.size() + text.size() / 50 + 4096);
  std::string out(size, '\0');
  const int rc = BZ2_bzBuffToBuffCompress(out.data(), &size, const_cast<char*>(text.data()),
                                          static_cast<unsigned int>(text.size()), level, 0, 0);
  EXPECT_EQ(rc, BZ_OK);
  out.resize(size);
  return out;
}

}  // namespace tiepoint::testing
