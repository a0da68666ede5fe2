// Test-only TIFF encoder through libtiff (written to a temporary file and read back), so
// tests can decode TIFFs of known content in the layouts cameras and scanners write.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <tiffio.h>

namespace tiepoint::testing {

struct TiffLayout {
  int bits = 8;                            // 8 or 16 bits a sample; 1 (bilevel, grey, strips)
  uint16_t compression = COMPRESSION_NONE;  // COMPRESSION_LZW, COMPRESSION_ADOBE_DEFLATE, ...
  bool tiled = false;                      // 32 x 32 tiles instead of strips
  bool big_endian = false;                 // "MM" instead of "II"
  bool min_is_white = false;               // grey stored inverted (PHOTOMETRIC_MINISWHITE)
};

// Samples row-major, interleaved by channel (1: grey, 2: grey + alpha, 3: RGB, 4: RGBA); as
// stored (min_is_white:
// already inverted). Empty on failure.
inline std::vector<unsigned char> EncodeTiff(int width, int height, int channels,
                                             const std::vector<uint16_t>& samples,
                                             const TiffLayout& layout = TiffLayout()) {
  char path[] = "/tmp/tiepoint_tiff_XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return {};
  ::close(fd);
  std::vector<unsigned char> bytes;
  TIFF* tif = TIFFOpen(path, layout.big_endian ? "wb" : "wl");
  if (tif != nullptr) {
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, static_cast<uint32_t>(width));
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, static_cast<uint32_t>(height));
    TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, static_cast<uint16_t>(channels));
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, static_cast<uint16_t>(layout.bits));
    TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC,
                 channels == 3 ? PHOTOMETRIC_RGB : layout.min_is_white ? PHOTOMETRIC_MINISWHITE : PHOTOMETRIC_MINISBLACK);
    TIFFSetField(tif, TIFFTAG_COMPRESSION, layout.compression);
    if (channels == 2 || channels == 4) {  // the last sample is alpha
      const uint16_t alpha = EXTRASAMPLE_UNASSALPHA;
      TIFFSetField(tif, TIFFTAG_EXTRASAMPLES, 1, &alpha);
    }
    const int bps = layout.bits / 8;
    auto pack = [&](int x0, int y0, int w, int h, std::vector<unsigned char>* out) {
      if (layout.bits == 1) {  // one grey row, 8 pixels a byte, the first in the high bit
        out->assign((static_cast<size_t>(w) + 7) / 8, 0);
        for (int x = 0; x < w; ++x)
          if (samples[static_cast<size_t>(y0) * width + x] != 0) (*out)[x / 8] |= static_cast<unsigned char>(0x80 >> (x % 8));
        return;
      }
      out->assign(static_cast<size_t>(w) * h * channels * bps, 0);
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
          for (int c = 0; c < channels; ++c) {
            if (x0 + x >= width || y0 + y >= height) continue;
            const uint16_t v = samples[(static_cast<size_t>(y0 + y) * width + x0 + x) * channels + c];
            unsigned char* p = &(*out)[((static_cast<size_t>(y) * w + x) * channels + c) * bps];
            if (bps == 1) {
              p[0] = static_cast<unsigned char>(v);
            } else {
              const uint16_t native = v;
              std::memcpy(p, &native, 2);  // libtiff swaps to the file's order
            }
          }
    };
    std::vector<unsigned char> buf;
    bool ok = true;
    const int tile = 32;
    if (layout.tiled) {
      TIFFSetField(tif, TIFFTAG_TILEWIDTH, static_cast<uint32_t>(tile));
      TIFFSetField(tif, TIFFTAG_TILELENGTH, static_cast<uint32_t>(tile));
      for (int y = 0; y < height && ok; y += tile)
        for (int x = 0; x < width && ok; x += tile) {
          pack(x, y, tile, tile, &buf);
          ok = TIFFWriteTile(tif, buf.data(), x, y, 0, 0) >= 0;
        }
    } else {
      TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, layout.bits == 1 ? static_cast<uint32_t>(height) : 4u);
      for (int y = 0; y < height && ok; ++y) {
        pack(0, y, width, 1, &buf);
        ok = TIFFWriteScanline(tif, buf.data(), static_cast<uint32_t>(y), 0) >= 0;
      }
    }
    TIFFClose(tif);
    if (ok) {
      std::ifstream in(path, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  std::remove(path);
  return bytes;
}

}  // namespace tiepoint::testing
