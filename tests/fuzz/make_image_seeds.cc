// Writes the image seed corpora (corpus/image_{png,jpeg,pnm,tiff}/): small crops of real
// images from ../shared/data, encoded in each layout the decoders handle. Run once by
// tests/fuzz/make_seeds.sh; the output is committed, so CI never needs it.
//   make_image_seeds SHARED_DATA_DIR CORPUS_DIR
#include <csetjmp>
#include <cstdio>
#include <string>
#include <vector>

#include "io/image.h"
#include "tests/common/image_encoders.h"
#include "tests/common/tiff_encoder.h"

namespace {

using tiepoint::GrayImage;
using tiepoint::testing::Bytes;

// 8-bit crop of `w` x `h` at the image's centre.
std::vector<uint8_t> Crop(const GrayImage& img, int w, int h) {
  std::vector<uint8_t> out(static_cast<size_t>(w) * h);
  const int x0 = (img.width - w) / 2, y0 = (img.height - h) / 2;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) out[y * w + x] = static_cast<uint8_t>(img.at(x0 + x, y0 + y) * 255 + 0.5f);
  return out;
}

// Three channels from one: the grey value and two shifted versions (colour paths only).
template <typename T>
std::vector<T> Colour(const std::vector<uint8_t>& g, int channels, int scale) {
  std::vector<T> out;
  for (uint8_t v : g) {
    out.push_back(static_cast<T>(v * scale));
    out.push_back(static_cast<T>(((v + 40) & 255) * scale));
    out.push_back(static_cast<T>((255 - v) * scale));
    if (channels == 4) out.push_back(static_cast<T>(200 * scale));
  }
  return out;
}

struct JpegOptions {
  bool progressive = false, arithmetic = false, rgb = false;
  int restart_rows = 0, quality = 85;
};

JpegOptions Opt(bool progressive, bool arithmetic, bool rgb, int restart_rows, int quality) {
  JpegOptions o;
  o.progressive = progressive;
  o.arithmetic = arithmetic;
  o.rgb = rgb;
  o.restart_rows = restart_rows;
  o.quality = quality;
  return o;
}

Bytes Jpeg(int w, int h, int components, const std::vector<uint8_t>& s, const JpegOptions& o) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr jerr;
  cinfo.err = jpeg_std_error(&jerr);
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = w;
  cinfo.image_height = h;
  cinfo.input_components = components;
  cinfo.in_color_space = components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  if (o.rgb) jpeg_set_colorspace(&cinfo, JCS_RGB);
  jpeg_set_quality(&cinfo, o.quality, TRUE);
  if (o.progressive) jpeg_simple_progression(&cinfo);
  cinfo.arith_code = o.arithmetic ? TRUE : FALSE;
  cinfo.restart_in_rows = o.restart_rows;
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(&s[static_cast<size_t>(cinfo.next_scanline) * w * components]);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  Bytes out(buffer, buffer + size);
  jpeg_destroy_compress(&cinfo);
  std::free(buffer);
  return out;
}

bool Write(const std::string& path, const Bytes& b) {
  if (b.empty() || !tiepoint::testing::WriteBytes(path, b)) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return false;
  }
  std::printf("%s %zu bytes\n", path.c_str(), b.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: make_image_seeds SHARED_DATA_DIR CORPUS_DIR\n");
    return 2;
  }
  const std::string data = argv[1], out = argv[2];
  GrayImage graf, temple, leuven, iguazu;
  for (auto [path, img] : {std::pair{"/features/opencv_samples/graf1.png", &graf},
                           std::pair{"/multiview/middlebury/templeSparseRing/templeSR0001.png", &temple},
                           std::pair{"/features/opencv_samples/leuvenA.jpg", &leuven},
                           std::pair{"/features/akaze_iguazu/img2.pgm", &iguazu}}) {
    const tiepoint::Status s = tiepoint::ReadImageGray(data + path, img);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  using tiepoint::testing::EncodePng;
  using tiepoint::testing::EncodePnm;
  bool ok = true;
  const int w = 24, h = 16;
  const std::vector<uint8_t> g1 = Crop(graf, w, h), g2 = Crop(temple, w, h);
  const std::vector<uint8_t> g3 = Crop(leuven, w, h), g4 = Crop(iguazu, w, h);
  const std::vector<uint16_t> g1w(g1.begin(), g1.end()), g2w(g2.begin(), g2.end());
  std::vector<uint16_t> g1x16, g2bits1, g1pal;
  for (uint8_t v : g1) g1x16.push_back(static_cast<uint16_t>(v * 257));
  for (uint8_t v : g2) g2bits1.push_back(v > 100 ? 1 : 0);
  for (uint8_t v : g1) g1pal.push_back(v >> 4);
  std::vector<png_color> palette;
  for (int i = 0; i < 16; ++i) palette.push_back({static_cast<png_byte>(i * 17), static_cast<png_byte>(255 - i * 17), 64});
  std::vector<uint16_t> ga;
  for (uint8_t v : g2) { ga.push_back(v); ga.push_back(255); }
  const std::string png = out + "/image_png/";
  ok &= Write(png + "grey8.png", EncodePng(w, h, PNG_COLOR_TYPE_GRAY, 8, g1w));
  ok &= Write(png + "grey16.png", EncodePng(w, h, PNG_COLOR_TYPE_GRAY, 16, g1x16));
  ok &= Write(png + "grey1.png", EncodePng(w, h, PNG_COLOR_TYPE_GRAY, 1, g2bits1));
  ok &= Write(png + "grey8_interlaced.png", EncodePng(w, h, PNG_COLOR_TYPE_GRAY, 8, g2w, true));
  ok &= Write(png + "grey_alpha.png", EncodePng(w, h, PNG_COLOR_TYPE_GRAY_ALPHA, 8, ga));
  ok &= Write(png + "rgb8.png", EncodePng(w, h, PNG_COLOR_TYPE_RGB, 8, Colour<uint16_t>(g2, 3, 1)));
  ok &= Write(png + "rgba16.png", EncodePng(w, h, PNG_COLOR_TYPE_RGB_ALPHA, 16, Colour<uint16_t>(g1, 4, 257)));
  ok &= Write(png + "palette4.png", EncodePng(w, h, PNG_COLOR_TYPE_PALETTE, 4, g1pal, false, palette));
  const std::string jpg = out + "/image_jpeg/";
  ok &= Write(jpg + "grey.jpg", Jpeg(w, h, 1, g3, {}));
  ok &= Write(jpg + "ycbcr.jpg", Jpeg(w, h, 3, Colour<uint8_t>(g3, 3, 1), {}));
  ok &= Write(jpg + "rgb.jpg", Jpeg(w, h, 3, Colour<uint8_t>(g4, 3, 1), Opt(false, false, true, 0, 85)));
  ok &= Write(jpg + "progressive.jpg", Jpeg(w, h, 3, Colour<uint8_t>(g3, 3, 1), Opt(true, false, false, 0, 85)));
  ok &= Write(jpg + "arithmetic.jpg", Jpeg(w, h, 1, g4, Opt(false, true, false, 0, 85)));
  ok &= Write(jpg + "restart.jpg", Jpeg(w, h, 1, g3, Opt(false, false, false, 1, 60)));
  const std::string pnm = out + "/image_pnm/";
  const std::vector<uint16_t> g4w(g4.begin(), g4.end());
  ok &= Write(pnm + "p5.pgm", EncodePnm(w, h, 1, 255, g4w));
  ok &= Write(pnm + "p2.pgm", EncodePnm(w / 2, h / 2, 1, 255, std::vector<uint16_t>(g4w.begin(), g4w.begin() + w * h / 4), true));
  ok &= Write(pnm + "p5_16bit.pgm", EncodePnm(w, h, 1, 65535, g1x16));
  ok &= Write(pnm + "p6.ppm", EncodePnm(w, h, 3, 255, Colour<uint16_t>(g2, 3, 1)));
  const std::vector<uint16_t> c2 = Colour<uint16_t>(g2, 3, 1);
  ok &= Write(pnm + "p3.ppm", EncodePnm(8, 4, 3, 255, std::vector<uint16_t>(c2.begin(), c2.begin() + 96), true));
  using tiepoint::testing::EncodeTiff;
  using tiepoint::testing::TiffLayout;
  const std::string tif = out + "/image_tiff/";
  auto layout = [](int bits, uint16_t compression, bool tiled, bool big_endian, bool white) {
    TiffLayout l;
    l.bits = bits;
    l.compression = compression;
    l.tiled = tiled;
    l.big_endian = big_endian;
    l.min_is_white = white;
    return l;
  };
  ok &= Write(tif + "grey8.tif", EncodeTiff(w, h, 1, g4w));
  ok &= Write(tif + "rgb8_lzw.tif", EncodeTiff(w, h, 3, Colour<uint16_t>(g2, 3, 1), layout(8, COMPRESSION_LZW, false, false, false)));
  ok &= Write(tif + "grey16_deflate_be.tif", EncodeTiff(w, h, 1, g1x16, layout(16, COMPRESSION_ADOBE_DEFLATE, false, true, false)));
  ok &= Write(tif + "rgb8_tiled.tif", EncodeTiff(w, h, 3, Colour<uint16_t>(g3, 3, 1), layout(8, COMPRESSION_NONE, true, false, false)));
  ok &= Write(tif + "grey8_white_packbits.tif", EncodeTiff(w, h, 1, g1w, layout(8, COMPRESSION_PACKBITS, false, false, true)));
  return ok ? 0 : 1;
}
