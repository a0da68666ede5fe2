// Test-only encoders: PNG through libpng, JPEG through libjpeg, PGM/PPM by hand, all
// into memory, so tests can write images of known content (and cut or corrupt them).
// Samples are given row-major, interleaved by channel; 16-bit samples as uint16_t.
#pragma once

#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <png.h>
#include <jpeglib.h>

namespace tiepoint::testing {

using Bytes = std::vector<unsigned char>;

inline void PngWriteToVector(png_structp png, png_bytep data, png_size_t n) {
  auto* out = static_cast<Bytes*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + n);
}
inline void PngFlushNothing(png_structp) {}

// color_type: PNG_COLOR_TYPE_GRAY, _RGB, _RGB_ALPHA, _GRAY_ALPHA or _PALETTE (then
// `samples` are palette indices and `palette` holds RGB triples). bit_depth 8 or 16
// (or 1/2/4 for grey and palette; samples then hold values < 2^bit_depth, one a byte).
inline Bytes EncodePng(int width, int height, int color_type, int bit_depth,
                       const std::vector<uint16_t>& samples, bool interlaced = false,
                       const std::vector<png_color>& palette = {}) {
  const int channels = color_type == PNG_COLOR_TYPE_RGB         ? 3
                       : color_type == PNG_COLOR_TYPE_RGB_ALPHA  ? 4
                       : color_type == PNG_COLOR_TYPE_GRAY_ALPHA ? 2
                                                                 : 1;
  const int bytes = bit_depth == 16 ? 2 : 1;
  std::vector<Bytes> rows(height, Bytes(static_cast<size_t>(width) * channels * bytes));
  std::vector<png_bytep> row_ptrs(height);
  for (int y = 0; y < height; ++y) {
    for (int i = 0; i < width * channels; ++i) {
      const uint16_t v = samples[static_cast<size_t>(y) * width * channels + i];
      if (bytes == 2) {
        rows[y][2 * i] = static_cast<unsigned char>(v >> 8);
        rows[y][2 * i + 1] = static_cast<unsigned char>(v & 0xff);
      } else {
        rows[y][i] = static_cast<unsigned char>(v);
      }
    }
    row_ptrs[y] = rows[y].data();
  }
  // Everything with a destructor exists before setjmp (libpng errors longjmp back here).
  Bytes out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    out.clear();
    return out;
  }
  png_set_write_fn(png, &out, PngWriteToVector, PngFlushNothing);
  png_set_IHDR(png, info, width, height, bit_depth, color_type,
               interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (color_type == PNG_COLOR_TYPE_PALETTE) {
    png_set_PLTE(png, info, palette.data(), static_cast<int>(palette.size()));
  }
  png_write_info(png, info);
  if (bit_depth < 8) png_set_packing(png);
  png_write_image(png, row_ptrs.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

// components 1 (grey) or 3 (RGB, stored as YCbCr unless keep_rgb).
inline Bytes EncodeJpeg(int width, int height, int components, const std::vector<uint8_t>& samples,
                        int quality = 95, bool keep_rgb = false) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr jerr;
  cinfo.err = jpeg_std_error(&jerr);
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = width;
  cinfo.image_height = height;
  cinfo.input_components = components;
  cinfo.in_color_space = components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  if (keep_rgb) jpeg_set_colorspace(&cinfo, JCS_RGB);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(
        &samples[static_cast<size_t>(cinfo.next_scanline) * width * components]);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  Bytes out(buffer, buffer + size);
  jpeg_destroy_compress(&cinfo);
  std::free(buffer);
  return out;
}

// Binary (P5/P6) or ASCII (P2/P3) PNM with the given maxval (two bytes per sample,
// big-endian, above 255).
inline Bytes EncodePnm(int width, int height, int channels, int maxval,
                       const std::vector<uint16_t>& samples, bool ascii = false) {
  const char* magic = channels == 1 ? (ascii ? "P2" : "P5") : (ascii ? "P3" : "P6");
  std::string header = std::string(magic) + "\n# written by a tiepoint test\n" +
                       std::to_string(width) + " " + std::to_string(height) + "\n" +
                       std::to_string(maxval) + "\n";
  Bytes out(header.begin(), header.end());
  for (size_t i = 0; i < samples.size(); ++i) {
    if (ascii) {
      const std::string v = std::to_string(samples[i]) + ((i + 1) % 12 ? " " : "\n");
      out.insert(out.end(), v.begin(), v.end());
    } else if (maxval > 255) {
      out.push_back(static_cast<unsigned char>(samples[i] >> 8));
      out.push_back(static_cast<unsigned char>(samples[i] & 0xff));
    } else {
      out.push_back(static_cast<unsigned char>(samples[i]));
    }
  }
  return out;
}

inline bool WriteBytes(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

}  // namespace tiepoint::testing
