// Image decoding: PNG through libpng, JPEG through libjpeg, PGM/PPM by hand.
//
// libpng and libjpeg report fatal errors by calling a hook that must not return. Both
// hooks here longjmp back into a small "protected" function that holds every piece of
// state in a context struct owned by the caller: nothing with a destructor lives in the
// frames a longjmp skips, and no local of the setjmp frame is modified after setjmp
// (the rules that keep setjmp/longjmp defined in C++).
#include "io/image.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csetjmp>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <new>
#include <string>
#include <vector>

#include <png.h>
// jpeglib.h needs size_t and FILE declared before it.
#include <jpeglib.h>
#include <jerror.h>

#include <tiffio.h>

#include "io/base/atomic_file.h"
#include "io/base/folder_listing.h"

namespace tiepoint {
namespace {

// ITU-R BT.601 luma weights.
constexpr float kLumaR = 0.299f;
constexpr float kLumaG = 0.587f;
constexpr float kLumaB = 0.114f;

float Luma(float r, float g, float b) {
  return std::min(1.0f, kLumaR * r + kLumaG * g + kLumaB * b);
}

// v / 255.0f for every 8-bit v: the same floats as the division, by table (the division
// in the per-pixel loops was a quarter of a 1080p JPEG's decoding time).
const float* UnitFloat8() {
  static const auto* table = [] {
    auto* t = new float[256];
    for (int v = 0; v < 256; ++v) t[v] = v / 255.0f;
    return t;
  }();
  return table;
}

std::string Dimensions(long long w, long long h) {
  return std::to_string(w) + " x " + std::to_string(h);
}

// Rejects zero-sized and absurd dimensions before anything is allocated.
Status CheckDimensions(const std::string& name, const char* format, long long w,
                       long long h) {
  if (w <= 0 || h <= 0) {
    return Status::InvalidInput(name + ": " + format + " header gives a zero-sized image (" +
                                Dimensions(w, h) + " pixels)");
  }
  if (w > kMaxImageSide || h > kMaxImageSide || w * h > kMaxImagePixels) {
    return Status::InvalidInput(
        name + ": " + format + " header gives absurd dimensions " + Dimensions(w, h) +
        " (at most " + std::to_string(kMaxImageSide) + " pixels a side and " +
        std::to_string(kMaxImagePixels) + " pixels in all are accepted); corrupt header?");
  }
  return Status::Ok();
}

// Where a decoder puts the pixels: grey floats in [0, 1] (ReadImageGray), 8-bit samples
// with the file's channels (ReadImage8), or both from one decoding
// (DecodeImageGrayAndColour; a JPEG then fills only the grey, see there). At least one
// is set.
struct DecodeTarget {
  GrayImage* gray = nullptr;
  Image8* image8 = nullptr;
};

unsigned char To8(float v) {
  return static_cast<unsigned char>(std::min(1.0f, std::max(0.0f, v)) * 255.0f + 0.5f);
}

// ---------------------------------------------------------------------------------------
// PGM / PPM

class PnmParser {
 public:
  PnmParser(const unsigned char* data, size_t size, const std::string& name)
      : data_(data), size_(size), name_(name) {}

  // Skips whitespace and '#' comments (to end of line), then reads an unsigned decimal.
  Status ReadInt(const char* what, long long* value) {
    while (pos_ < size_) {
      const unsigned char c = data_[pos_];
      if (c == '#') {
        while (pos_ < size_ && data_[pos_] != '\n' && data_[pos_] != '\r') ++pos_;
      } else if (IsSpace(c)) {
        ++pos_;
      } else {
        break;
      }
    }
    if (pos_ >= size_) {
      return Status::InvalidInput(name_ + ": truncated " + format_ + ": file ends before the " +
                                  what);
    }
    const size_t start = pos_;
    long long v = 0;
    while (pos_ < size_ && data_[pos_] >= '0' && data_[pos_] <= '9') {
      if (v < 1000000000000LL) v = v * 10 + (data_[pos_] - '0');
      ++pos_;
    }
    if (pos_ == start || (pos_ < size_ && !IsSpace(data_[pos_]) && data_[pos_] != '#')) {
      const size_t end = std::min(size_, start + 12);
      return Status::InvalidInput(name_ + ": corrupt " + format_ + ": expected the " + what +
                                  " (a non-negative integer), found '" +
                                  Printable(start, end) + "'");
    }
    *value = v;
    return Status::Ok();
  }

  Status Decode(const DecodeTarget& target) {
    const char kind = static_cast<char>(data_[1]);
    const bool ascii = kind == '2' || kind == '3';
    const int channels = (kind == '3' || kind == '6') ? 3 : 1;
    format_ = channels == 3 ? "PPM" : "PGM";
    format_ += ascii ? " (ASCII)" : " (binary)";
    pos_ = 2;
    long long w = 0, h = 0, maxval = 0;
    TIEPOINT_RETURN_IF_ERROR(ReadInt("width", &w));
    TIEPOINT_RETURN_IF_ERROR(ReadInt("height", &h));
    TIEPOINT_RETURN_IF_ERROR(CheckDimensions(name_, format_.c_str(), w, h));
    TIEPOINT_RETURN_IF_ERROR(ReadInt("maximum value", &maxval));
    if (maxval < 1 || maxval > 65535) {
      return Status::InvalidInput(name_ + ": corrupt " + format_ + ": maximum value " +
                                  std::to_string(maxval) + " is outside 1..65535");
    }
    const size_t num_pixels = static_cast<size_t>(w) * static_cast<size_t>(h);
    const size_t num_samples = num_pixels * channels;
    // The raster must fit in what is left of the file before anything is allocated:
    // binary, exactly one whitespace byte then 1 or 2 bytes a sample; ASCII, at least a
    // digit and a whitespace byte a sample.
    const size_t bytes_per_sample = maxval > 255 ? 2 : 1;
    const size_t left = size_ - pos_;
    const size_t least = ascii ? 2 * num_samples : 1 + num_samples * bytes_per_sample;
    if (left < least) {
      return Status::InvalidInput(name_ + ": truncated " + format_ + ": " + Dimensions(w, h) +
                                  " needs " + (ascii ? "at least " : "") +
                                  std::to_string(least - 1) +
                                  " bytes of pixel data, the file has " +
                                  std::to_string(left > 0 ? left - 1 : 0));
    }
    std::vector<float> samples(num_samples);
    const float scale = 1.0f / static_cast<float>(maxval);
    if (ascii) {
      for (size_t i = 0; i < num_samples; ++i) {
        long long v = 0;
        const Status s = ReadInt("sample", &v);
        if (!s.ok()) {
          if (pos_ >= size_) {
            return Status::InvalidInput(name_ + ": truncated " + format_ + ": " +
                                        std::to_string(num_samples) + " samples expected (" +
                                        Dimensions(w, h) + "), file ends after " +
                                        std::to_string(i));
          }
          return s;
        }
        if (v > maxval) return SampleAboveMax(i, v, maxval);
        samples[i] = static_cast<float>(v) * scale;
      }
    } else {
      // Exactly one whitespace byte separates the maximum value from the raster.
      if (pos_ >= size_ || !IsSpace(data_[pos_])) {
        return Status::InvalidInput(name_ + ": truncated " + format_ +
                                    ": file ends after the header");
      }
      ++pos_;
      const unsigned char* p = data_ + pos_;
      for (size_t i = 0; i < num_samples; ++i) {
        const long long v = bytes_per_sample == 2 ? (p[2 * i] << 8) | p[2 * i + 1] : p[i];
        if (v > maxval) return SampleAboveMax(i, v, maxval);
        samples[i] = static_cast<float>(v) * scale;
      }
    }
    if (target.image8 != nullptr) {
      Image8* out = target.image8;
      out->width = static_cast<int>(w);
      out->height = static_cast<int>(h);
      out->channels = channels;
      out->pixels.resize(num_samples);
      for (size_t i = 0; i < num_samples; ++i) out->pixels[i] = To8(samples[i]);
      if (target.gray == nullptr) return Status::Ok();
    }
    GrayImage* out = target.gray;
    out->width = static_cast<int>(w);
    out->height = static_cast<int>(h);
    if (channels == 1) {
      out->pixels = std::move(samples);
    } else {
      out->pixels.resize(num_pixels);
      for (size_t i = 0; i < num_pixels; ++i) {
        out->pixels[i] = Luma(samples[3 * i], samples[3 * i + 1], samples[3 * i + 2]);
      }
    }
    return Status::Ok();
  }

 private:
  static bool IsSpace(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
  }

  std::string Printable(size_t begin, size_t end) const {
    std::string s;
    for (size_t i = begin; i < end; ++i) {
      const unsigned char c = data_[i];
      s += (c >= 32 && c < 127) ? static_cast<char>(c) : '?';
    }
    return s;
  }

  Status SampleAboveMax(size_t index, long long v, long long maxval) const {
    return Status::InvalidInput(name_ + ": corrupt " + format_ + ": sample " +
                                std::to_string(index) + " is " + std::to_string(v) +
                                ", above the maximum value " + std::to_string(maxval));
  }

  const unsigned char* data_;
  size_t size_;
  const std::string& name_;
  std::string format_ = "PNM";
  size_t pos_ = 0;
};

// ---------------------------------------------------------------------------------------
// PNG

struct PngContext {
  const unsigned char* data = nullptr;
  size_t size = 0;
  size_t pos = 0;
  png_structp png = nullptr;
  png_infop info = nullptr;
  char error[256] = {0};
  // Filled by the protected decode.
  png_uint_32 width = 0, height = 0;
  int channels = 0;
  int bit_depth = 0;
  size_t row_bytes = 0;
  bool dimensions_rejected = false;
  bool exceeds_file = false;  // more raster than the file's compressed data can hold
  size_t raw_bytes = 0;
  std::vector<unsigned char> buffer;
  std::vector<png_bytep> rows;
};

// Deflate turns at most 1032 bytes into one (a 258-byte match costs at least 2 bits), so
// a PNG's filtered raster ((row bytes + 1) x height) is at most 1032 times the file.
constexpr size_t kMaxDeflateRatio = 1032;

void PngErrorHook(png_structp png, png_const_charp message) {
  auto* ctx = static_cast<PngContext*>(png_get_error_ptr(png));
  std::snprintf(ctx->error, sizeof(ctx->error), "%s", message);
  png_longjmp(png, 1);
}

// Warnings (e.g. "iCCP: known incorrect sRGB profile") do not affect the pixels.
void PngWarningHook(png_structp, png_const_charp) {}

void PngReadHook(png_structp png, png_bytep out, png_size_t n) {
  auto* ctx = static_cast<PngContext*>(png_get_io_ptr(png));
  if (ctx->size - ctx->pos < n) png_error(png, "file ends early (truncated)");
  std::memcpy(out, ctx->data + ctx->pos, n);
  ctx->pos += n;
}

// Returns false after a libpng error (message in ctx->error) or rejected dimensions.
bool DecodePngProtected(PngContext* ctx) {
  if (setjmp(png_jmpbuf(ctx->png))) return false;
  png_set_read_fn(ctx->png, ctx, PngReadHook);
  png_set_user_limits(ctx->png, kMaxImageSide, kMaxImageSide);
  png_read_info(ctx->png, ctx->info);
  int color_type = 0, interlace = 0;
  png_get_IHDR(ctx->png, ctx->info, &ctx->width, &ctx->height, &ctx->bit_depth, &color_type,
               &interlace, nullptr, nullptr);
  if (ctx->width == 0 || ctx->height == 0 || ctx->width > kMaxImageSide ||
      ctx->height > kMaxImageSide ||
      static_cast<long long>(ctx->width) * ctx->height > kMaxImagePixels) {
    ctx->dimensions_rejected = true;
    return false;
  }
  // Before anything the size of the image is allocated: the header must not promise
  // more than the file can hold.
  ctx->raw_bytes = (png_get_rowbytes(ctx->png, ctx->info) + 1) * static_cast<size_t>(ctx->height);
  if (ctx->raw_bytes / kMaxDeflateRatio > ctx->size) {
    ctx->exceeds_file = true;
    return false;
  }
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(ctx->png);
  if (color_type == PNG_COLOR_TYPE_GRAY && ctx->bit_depth < 8) {
    png_set_expand_gray_1_2_4_to_8(ctx->png);
  }
  if (color_type & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(ctx->png);
  png_set_interlace_handling(ctx->png);
  png_read_update_info(ctx->png, ctx->info);
  ctx->channels = png_get_channels(ctx->png, ctx->info);
  ctx->bit_depth = png_get_bit_depth(ctx->png, ctx->info);
  ctx->row_bytes = png_get_rowbytes(ctx->png, ctx->info);
  if ((ctx->channels != 1 && ctx->channels != 3) ||
      (ctx->bit_depth != 8 && ctx->bit_depth != 16)) {
    png_error(ctx->png, "unexpected pixel layout after expansion");
  }
  ctx->buffer.resize(ctx->row_bytes * ctx->height);
  ctx->rows.resize(ctx->height);
  for (png_uint_32 y = 0; y < ctx->height; ++y) ctx->rows[y] = &ctx->buffer[y * ctx->row_bytes];
  png_read_image(ctx->png, ctx->rows.data());
  png_read_end(ctx->png, nullptr);
  return true;
}

Status DecodePng(const unsigned char* data, size_t size, const std::string& name,
                 const DecodeTarget& target) {
  // IHDR must be the first chunk: check its dimensions before libpng reads further (it
  // would otherwise stop at whatever follows a corrupt header, with a vaguer message).
  if (size >= 24 && std::memcmp(data + 12, "IHDR", 4) == 0) {
    auto be32 = [&](size_t at) {
      return (static_cast<long long>(data[at]) << 24) | (data[at + 1] << 16) |
             (data[at + 2] << 8) | data[at + 3];
    };
    TIEPOINT_RETURN_IF_ERROR(CheckDimensions(name, "PNG", be32(16), be32(20)));
  }
  PngContext ctx;
  ctx.data = data;
  ctx.size = size;
  ctx.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &ctx, PngErrorHook, PngWarningHook);
  if (ctx.png == nullptr) return Status::OutOfMemory(name + ": cannot create a PNG decoder");
  ctx.info = png_create_info_struct(ctx.png);
  if (ctx.info == nullptr) {
    png_destroy_read_struct(&ctx.png, nullptr, nullptr);
    return Status::OutOfMemory(name + ": cannot create a PNG decoder");
  }
  const bool ok = DecodePngProtected(&ctx);
  png_destroy_read_struct(&ctx.png, &ctx.info, nullptr);
  if (ctx.dimensions_rejected) return CheckDimensions(name, "PNG", ctx.width, ctx.height);
  if (ctx.exceeds_file) {
    return Status::InvalidInput(
        name + ": corrupt or truncated PNG: the header gives " +
        Dimensions(ctx.width, ctx.height) + " pixels, " + std::to_string(ctx.raw_bytes) +
        " bytes of raster, more than " + std::to_string(kMaxDeflateRatio) + " times the file's " +
        std::to_string(size) + " bytes (the most deflate can compress)");
  }
  if (!ok) return Status::InvalidInput(name + ": corrupt or truncated PNG: " + ctx.error);

  const size_t n = static_cast<size_t>(ctx.width) * ctx.height;
  const int c = ctx.channels;
  // The grey first: the 8-bit copy may take the decoder's buffer.
  if (target.gray != nullptr) {
    GrayImage* out = target.gray;
    std::vector<float> pixels(n);
    const float* unit = UnitFloat8();
    for (png_uint_32 y = 0; y < ctx.height; ++y) {
      const unsigned char* row = ctx.rows[y];
      float* dst = &pixels[static_cast<size_t>(y) * ctx.width];
      for (png_uint_32 x = 0; x < ctx.width; ++x) {
        float v[3];
        for (int k = 0; k < c; ++k) {
          const size_t i = static_cast<size_t>(x) * c + k;
          v[k] = ctx.bit_depth == 16 ? ((row[2 * i] << 8) | row[2 * i + 1]) / 65535.0f
                                     : unit[row[i]];
        }
        dst[x] = c == 1 ? v[0] : Luma(v[0], v[1], v[2]);
      }
    }
    out->width = static_cast<int>(ctx.width);
    out->height = static_cast<int>(ctx.height);
    out->pixels = std::move(pixels);
  }
  if (target.image8 != nullptr) {
    Image8* out = target.image8;
    out->width = static_cast<int>(ctx.width);
    out->height = static_cast<int>(ctx.height);
    out->channels = c;
    if (ctx.bit_depth == 8) {
      if (ctx.row_bytes == static_cast<size_t>(ctx.width) * c) {
        out->pixels = std::move(ctx.buffer);
      } else {
        out->pixels.resize(n * c);
        for (png_uint_32 y = 0; y < ctx.height; ++y)
          std::memcpy(&out->pixels[static_cast<size_t>(y) * ctx.width * c], ctx.rows[y],
                      static_cast<size_t>(ctx.width) * c);
      }
    } else {
      out->pixels.resize(n * c);
      for (png_uint_32 y = 0; y < ctx.height; ++y) {
        const unsigned char* row = ctx.rows[y];
        unsigned char* dst = &out->pixels[static_cast<size_t>(y) * ctx.width * c];
        for (size_t i = 0; i < static_cast<size_t>(ctx.width) * c; ++i)
          dst[i] = static_cast<unsigned char>((((row[2 * i] << 8) | row[2 * i + 1]) * 255 + 32767) / 65535);
      }
    }
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------
// JPEG

struct JpegErrorManager {
  jpeg_error_mgr pub;  // first member: libjpeg hands back a pointer to it
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void JpegErrorExitHook(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Level -1 is a warning about corrupt data, after which libjpeg would go on with made-up
// pixels; we stop instead. Extraneous bytes before a marker are common and harmless.
void JpegEmitMessageHook(j_common_ptr cinfo, int level) {
  if (level >= 0) return;  // trace messages
  if (cinfo->err->msg_code == JWRN_EXTRANEOUS_DATA) return;
  JpegErrorExitHook(cinfo);
}

// Bounds that keep a small corrupt file from costing a large allocation or seconds of
// decoding. Huffman coding spends at least one bit per 8 x 8 block in the first scan, so
// a file holds at most 512 pixels a byte (1024 allowed). Arithmetic coding can spend
// less than a bit a block on flat areas, so it gets 4096 (a real photograph takes far
// more). A progressive file decodes every block of a component in each of its scans;
// encoders write about 10 (jpegtran, mozjpeg up to ~20).
constexpr long long kMaxJpegPixelsPerByte = 1024;
constexpr long long kMaxJpegPixelsPerByteArithmetic = 4096;
constexpr int kMaxJpegScans = 100;

struct JpegContext {
  const unsigned char* data = nullptr;
  size_t size = 0;
  jpeg_decompress_struct cinfo;
  JpegErrorManager err;
  jpeg_progress_mgr progress;
  bool created = false;
  bool color = false;  // decode YCbCr to RGB (else to its Y channel)
  // Filled by the protected decode.
  long long width = 0, height = 0;
  bool dimensions_rejected = false;
  bool exceeds_file = false;
  const char* unsupported = nullptr;
  int components = 0;
  std::vector<unsigned char> buffer;
};

void JpegProgressHook(j_common_ptr cinfo) {
  if (cinfo->is_decompressor &&
      reinterpret_cast<j_decompress_ptr>(cinfo)->input_scan_number > kMaxJpegScans) {
    auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
    std::snprintf(err->message, sizeof(err->message),
                  "more than %d progressive scans (encoders write about 10)", kMaxJpegScans);
    std::longjmp(err->jump, 1);
  }
}

// Returns false after a libjpeg error (message in ctx->err.message), rejected dimensions
// or an unsupported colour space.
bool DecodeJpegProtected(JpegContext* ctx) {
  ctx->cinfo.err = jpeg_std_error(&ctx->err.pub);
  ctx->err.pub.error_exit = JpegErrorExitHook;
  ctx->err.pub.emit_message = JpegEmitMessageHook;
  ctx->err.message[0] = '\0';
  if (setjmp(ctx->err.jump)) return false;
  jpeg_create_decompress(&ctx->cinfo);
  ctx->created = true;
  ctx->progress.progress_monitor = JpegProgressHook;
  ctx->cinfo.progress = &ctx->progress;
  jpeg_mem_src(&ctx->cinfo, ctx->data, static_cast<unsigned long>(ctx->size));
  if (jpeg_read_header(&ctx->cinfo, TRUE) != JPEG_HEADER_OK) {
    std::snprintf(ctx->err.message, sizeof(ctx->err.message), "no image in the stream");
    return false;
  }
  ctx->width = ctx->cinfo.image_width;
  ctx->height = ctx->cinfo.image_height;
  if (ctx->width == 0 || ctx->height == 0 || ctx->width > kMaxImageSide ||
      ctx->height > kMaxImageSide || ctx->width * ctx->height > kMaxImagePixels) {
    ctx->dimensions_rejected = true;
    return false;
  }
  const long long per_byte =
      ctx->cinfo.arith_code ? kMaxJpegPixelsPerByteArithmetic : kMaxJpegPixelsPerByte;
  if (ctx->width * ctx->height / per_byte > static_cast<long long>(ctx->size)) {
    ctx->exceeds_file = true;
    return false;
  }
  switch (ctx->cinfo.jpeg_color_space) {
    case JCS_GRAYSCALE:
      ctx->cinfo.out_color_space = JCS_GRAYSCALE;
      break;
    case JCS_YCbCr:
      // The Y channel of JPEG's YCbCr is the BT.601 luma: grey needs no chroma.
      ctx->cinfo.out_color_space = ctx->color ? JCS_RGB : JCS_GRAYSCALE;
      break;
    case JCS_RGB:
      ctx->cinfo.out_color_space = JCS_RGB;
      break;
    default:
      ctx->unsupported = "CMYK/YCCK or unknown JPEG colour space (only grey, YCbCr and RGB)";
      return false;
  }
  jpeg_start_decompress(&ctx->cinfo);
  ctx->components = ctx->cinfo.output_components;
  const size_t row_bytes = static_cast<size_t>(ctx->cinfo.output_width) * ctx->components;
  ctx->buffer.resize(row_bytes * ctx->cinfo.output_height);
  while (ctx->cinfo.output_scanline < ctx->cinfo.output_height) {
    JSAMPROW row = &ctx->buffer[ctx->cinfo.output_scanline * row_bytes];
    jpeg_read_scanlines(&ctx->cinfo, &row, 1);
  }
  jpeg_finish_decompress(&ctx->cinfo);
  return true;
}

Status DecodeJpeg(const unsigned char* data, size_t size, const std::string& name,
                  const DecodeTarget& target) {
  JpegContext ctx;
  ctx.data = data;
  ctx.size = size;
  // Grey and colour from one decoding: grey only (see DecodeImageGrayAndColour).
  ctx.color = target.image8 != nullptr && target.gray == nullptr;
  const bool ok = DecodeJpegProtected(&ctx);
  if (ctx.created) jpeg_destroy_decompress(&ctx.cinfo);
  if (ctx.dimensions_rejected) return CheckDimensions(name, "JPEG", ctx.width, ctx.height);
  if (ctx.exceeds_file) {
    return Status::InvalidInput(name + ": corrupt or truncated JPEG: the header gives " +
                                Dimensions(ctx.width, ctx.height) +
                                " pixels, more than its " + std::to_string(size) +
                                " bytes can code");
  }
  if (ctx.unsupported != nullptr) {
    return Status::InvalidInput(name + ": unsupported JPEG: " + ctx.unsupported);
  }
  if (!ok) {
    return Status::InvalidInput(name + ": corrupt or truncated JPEG: " +
                                std::string(ctx.err.message));
  }
  const size_t n = static_cast<size_t>(ctx.width) * ctx.height;
  if (ctx.color) {
    Image8* out = target.image8;
    out->width = static_cast<int>(ctx.width);
    out->height = static_cast<int>(ctx.height);
    out->channels = ctx.components;
    out->pixels = std::move(ctx.buffer);
    return Status::Ok();
  }
  GrayImage* out = target.gray;
  std::vector<float> pixels(n);
  const float* unit = UnitFloat8();
  const unsigned char* b = ctx.buffer.data();
  if (ctx.components == 1) {
    for (size_t i = 0; i < n; ++i) pixels[i] = unit[b[i]];
  } else {
    for (size_t i = 0; i < n; ++i) pixels[i] = Luma(unit[b[3 * i]], unit[b[3 * i + 1]], unit[b[3 * i + 2]]);
  }
  out->width = static_cast<int>(ctx.width);
  out->height = static_cast<int>(ctx.height);
  out->pixels = std::move(pixels);
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------
// TIFF (libtiff: its RGBA interface decodes every photometric interpretation, bit depth,
// compression, strip and tile layout it supports to 8-bit RGBA, oriented top-left)

// A raster's samples (w h spp bits / 8 bytes) may be at most this many times the file's
// bytes: more than TIFF's byte-oriented codecs give (LZW, at most about 2,700; deflate
// 1,032), so a larger header is a corrupt one, refused before the raster is allocated.
// Bilevel fax and JBIG codecs store a blank row in a few bits and are not bounded so (their
// rasters are bounded by kMaxImagePixels alone).
constexpr long long kMaxTiffRatio = 4096;

struct TiffContext {
  const unsigned char* data = nullptr;
  size_t size = 0;
  uint64_t pos = 0;
  std::string name;
  std::string error;  // libtiff's first error message
};

int TiffErrorHook(TIFF*, void* user, const char* module, const char* fmt, va_list ap) {
  auto* ctx = static_cast<TiffContext*>(user);
  if (ctx->error.empty()) {
    char buf[512];
    std::vsnprintf(buf, sizeof(buf), fmt, ap);
    // libtiff passes the file's name as the module: the message names it already.
    const bool named = module != nullptr && *module != '\0' && ctx->name != module;
    ctx->error = (named ? std::string(module) + ": " : std::string()) + buf;
  }
  return 1;  // handled: nothing goes to stderr
}
int TiffWarningHook(TIFF*, void*, const char*, const char*, va_list) { return 1; }

tmsize_t TiffRead(thandle_t h, void* out, tmsize_t n) {
  auto* ctx = static_cast<TiffContext*>(h);
  if (n <= 0 || ctx->pos >= ctx->size) return 0;
  const size_t k = std::min<uint64_t>(static_cast<uint64_t>(n), ctx->size - ctx->pos);
  std::memcpy(out, ctx->data + ctx->pos, k);
  ctx->pos += k;
  return static_cast<tmsize_t>(k);
}
tmsize_t TiffWrite(thandle_t, void*, tmsize_t) { return -1; }
toff_t TiffSeek(thandle_t h, toff_t off, int whence) {
  auto* ctx = static_cast<TiffContext*>(h);
  uint64_t base = whence == SEEK_CUR ? ctx->pos : whence == SEEK_END ? ctx->size : 0;
  if (whence != SEEK_SET && whence != SEEK_CUR && whence != SEEK_END) return static_cast<toff_t>(-1);
  ctx->pos = base + off;
  return ctx->pos;
}
int TiffClose(thandle_t) { return 0; }
toff_t TiffSize(thandle_t h) { return static_cast<TiffContext*>(h)->size; }
int TiffMap(thandle_t, void**, toff_t*) { return 0; }
void TiffUnmap(thandle_t, void*, toff_t) {}

bool IsTiff(const unsigned char* data, size_t size) {
  if (size < 4) return false;
  return (data[0] == 'I' && data[1] == 'I' && (data[2] == 42 || data[2] == 43) && data[3] == 0) ||
         (data[0] == 'M' && data[1] == 'M' && data[2] == 0 && (data[3] == 42 || data[3] == 43));
}

Status DecodeTiff(const unsigned char* data, size_t size, const std::string& name,
                  const DecodeTarget& target) {
  TiffContext ctx;
  ctx.data = data;
  ctx.size = size;
  ctx.name = name;
  TIFFOpenOptions* opts = TIFFOpenOptionsAlloc();
  if (opts == nullptr) return Status::OutOfMemory(name + ": cannot create a TIFF decoder");
  TIFFOpenOptionsSetErrorHandlerExtR(opts, TiffErrorHook, &ctx);
  TIFFOpenOptionsSetWarningHandlerExtR(opts, TiffWarningHook, &ctx);
  // No single allocation over the largest raster accepted (4 bytes a pixel).
  TIFFOpenOptionsSetMaxSingleMemAlloc(opts, static_cast<tmsize_t>(4 * kMaxImagePixels));
  // "m": no memory mapping (the bytes are already in memory, read through TiffRead).
  TIFF* tif = TIFFClientOpenExt(name.c_str(), "rm", &ctx, TiffRead, TiffWrite, TiffSeek, TiffClose,
                                TiffSize, TiffMap, TiffUnmap, opts);
  TIFFOpenOptionsFree(opts);
  if (tif == nullptr)
    return Status::InvalidInput(name + ": corrupt or truncated TIFF: " +
                                (ctx.error.empty() ? std::string("cannot read its header") : ctx.error));
  struct Closer {
    TIFF* t;
    ~Closer() { TIFFClose(t); }
  } closer{tif};
  uint32_t w = 0, h = 0;
  uint16_t spp = 1, bits = 1, compression = COMPRESSION_NONE, photometric = PHOTOMETRIC_MINISBLACK;
  uint16_t num_extra = 0;
  uint16_t* extra = nullptr;
  if (!TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &w) || !TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &h))
    return Status::InvalidInput(name + ": corrupt TIFF: no image width or length");
  TIEPOINT_RETURN_IF_ERROR(CheckDimensions(name, "TIFF", w, h));
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &spp);
  TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bits);
  TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &compression);
  TIFFGetFieldDefaulted(tif, TIFFTAG_EXTRASAMPLES, &num_extra, &extra);
  TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &photometric);
  const long long pixels = static_cast<long long>(w) * h;
  const long long raw_bytes = pixels * spp * bits / 8;
  const bool bilevel_codec = compression == COMPRESSION_CCITTRLE || compression == COMPRESSION_CCITTRLEW ||
                             compression == COMPRESSION_CCITTFAX3 || compression == COMPRESSION_CCITTFAX4 ||
                             compression == COMPRESSION_JBIG;
  if (!bilevel_codec && raw_bytes > kMaxTiffRatio * static_cast<long long>(size)) {
    return Status::InvalidInput(name + ": corrupt or truncated TIFF: the header gives " + Dimensions(w, h) +
                                " pixels, " + std::to_string(raw_bytes) + " bytes of samples, more than " +
                                std::to_string(kMaxTiffRatio) + " times the file's " + std::to_string(size) +
                                " bytes");
  }
  char why[1024] = "";
  if (!TIFFRGBAImageOK(tif, why)) {
    return Status::InvalidInput(name + ": unsupported TIFF: " + (why[0] != '\0' ? std::string(why) : ctx.error));
  }
  std::vector<uint32_t> raster;
  try {
    raster.resize(static_cast<size_t>(pixels));
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory(name + ": out of memory decoding a " + Dimensions(w, h) + " TIFF");
  }
  if (!TIFFReadRGBAImageOriented(tif, w, h, raster.data(), ORIENTATION_TOPLEFT, 0) || !ctx.error.empty()) {
    return Status::InvalidInput(name + ": corrupt or truncated TIFF: " +
                                (ctx.error.empty() ? std::string("its raster does not decode") : ctx.error));
  }
  // Grey files (one sample besides alpha and other extra samples; black or white is zero)
  // stay one channel for ReadImage8.
  const bool grey = spp - num_extra == 1 &&
                    (photometric == PHOTOMETRIC_MINISBLACK || photometric == PHOTOMETRIC_MINISWHITE);
  const size_t n = static_cast<size_t>(pixels);
  if (target.image8 != nullptr) {
    Image8* out = target.image8;
    out->width = static_cast<int>(w);
    out->height = static_cast<int>(h);
    out->channels = grey ? 1 : 3;
    std::vector<unsigned char> px(n * out->channels);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t v = raster[i];
      if (grey) {
        px[i] = static_cast<unsigned char>(TIFFGetR(v));
      } else {
        px[3 * i] = static_cast<unsigned char>(TIFFGetR(v));
        px[3 * i + 1] = static_cast<unsigned char>(TIFFGetG(v));
        px[3 * i + 2] = static_cast<unsigned char>(TIFFGetB(v));
      }
    }
    out->pixels = std::move(px);
    if (target.gray == nullptr) return Status::Ok();
  }
  GrayImage* out = target.gray;
  std::vector<float> g(n);
  const float* unit = UnitFloat8();
  for (size_t i = 0; i < n; ++i) {
    const uint32_t v = raster[i];
    g[i] = grey ? unit[TIFFGetR(v)] : Luma(unit[TIFFGetR(v)], unit[TIFFGetG(v)], unit[TIFFGetB(v)]);
  }
  out->width = static_cast<int>(w);
  out->height = static_cast<int>(h);
  out->pixels = std::move(g);
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------

std::string FirstBytes(const unsigned char* data, size_t size) {
  char hex[8];
  std::string text, printable;
  for (size_t i = 0; i < std::min<size_t>(size, 8); ++i) {
    std::snprintf(hex, sizeof(hex), "%s%02x", i ? " " : "", data[i]);
    text += hex;
    printable += (data[i] >= 32 && data[i] < 127) ? static_cast<char>(data[i]) : '.';
  }
  return text + " \"" + printable + "\"";
}

std::string ExtensionHint(const std::string& name) {
  const size_t dot = name.find_last_of('.');
  if (dot == std::string::npos || name.find('/', dot) != std::string::npos) return "";
  return " despite its '" + name.substr(dot) + "' extension";
}

}  // namespace

namespace {

Status DecodeImage(const unsigned char* data, size_t size, const std::string& name,
                   const DecodeTarget& out) {
  if (size == 0) return Status::InvalidInput(name + ": empty file (0 bytes), not an image");
  static const unsigned char kPngMagic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size >= 8 && std::memcmp(data, kPngMagic, 8) == 0) return DecodePng(data, size, name, out);
  if (size >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff) {
    return DecodeJpeg(data, size, name, out);
  }
  if (IsTiff(data, size)) return DecodeTiff(data, size, name, out);
  if (size >= 2 && data[0] == 'P') {
    switch (data[1]) {
      case '2': case '3': case '5': case '6': {
        PnmParser parser(data, size, name);
        return parser.Decode(out);
      }
      case '1': case '4':
        return Status::InvalidInput(name + ": PBM bitmaps (P1/P4) are not supported; "
                                    "convert to PGM or PNG");
      case '7':
        return Status::InvalidInput(name + ": PAM (P7) is not supported; "
                                    "convert to PGM, PPM or PNG");
      default:
        break;
    }
  }
  return Status::InvalidInput(name + ": not a PNG, JPEG, TIFF, PGM or PPM image" + ExtensionHint(name) +
                              " (the file starts with " + FirstBytes(data, size) + ")");
}

}  // namespace

Status ReadImageFile(const std::string& path, std::vector<unsigned char>* out_bytes) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return Status::IoError(path + ": cannot open for reading (" + std::strerror(errno) + ")");
  }
  if (S_ISDIR(st.st_mode)) return Status::IoError(path + ": is a directory, not an image");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return Status::IoError(path + ": cannot open for reading (" + std::strerror(errno) + ")");
  }
  std::vector<unsigned char> bytes;
  unsigned char chunk[1 << 16];
  size_t got = 0;
  while ((got = std::fread(chunk, 1, sizeof(chunk), f)) > 0) {
    bytes.insert(bytes.end(), chunk, chunk + got);
  }
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) return Status::IoError(path + ": read error (" + std::strerror(err) + ")");
  *out_bytes = std::move(bytes);
  return Status::Ok();
}

Status DecodeImageGray(const unsigned char* data, size_t size, const std::string& name,
                       GrayImage* out) {
  DecodeTarget target;
  target.gray = out;
  return DecodeImage(data, size, name, target);
}

Status DecodeImage8(const unsigned char* data, size_t size, const std::string& name, Image8* out) {
  DecodeTarget target;
  target.image8 = out;
  return DecodeImage(data, size, name, target);
}

Status DecodeImageGrayAndColour(const unsigned char* data, size_t size, const std::string& name,
                                GrayImage* gray, Image8* colour) {
  DecodeTarget target;
  target.gray = gray;
  target.image8 = colour;
  return DecodeImage(data, size, name, target);
}

Status ReadImageGray(const std::string& path, GrayImage* out) {
  std::vector<unsigned char> bytes;
  TIEPOINT_RETURN_IF_ERROR(ReadImageFile(path, &bytes));
  return DecodeImageGray(bytes.data(), bytes.size(), path, out);
}

Status ReadImage8(const std::string& path, Image8* out) {
  std::vector<unsigned char> bytes;
  TIEPOINT_RETURN_IF_ERROR(ReadImageFile(path, &bytes));
  return DecodeImage8(bytes.data(), bytes.size(), path, out);
}

Status WritePgm(const std::string& path, const GrayImage& image, int max_value) {
  if (max_value < 1 || max_value > 65535) {
    return Status::InvalidOptions("WritePgm " + path + ": max_value " +
                                  std::to_string(max_value) + " is outside 1..65535");
  }
  if (image.pixels.size() != static_cast<size_t>(image.width) * image.height) {
    return Status::InvalidInput("WritePgm " + path + ": image has " +
                                std::to_string(image.pixels.size()) + " pixels, expected " +
                                Dimensions(image.width, image.height));
  }
  AtomicFile file(path);
  TIEPOINT_RETURN_IF_ERROR(file.Open());
  std::ofstream& out = file.stream();
  out << "P5\n" << image.width << ' ' << image.height << '\n' << max_value << '\n';
  const bool wide = max_value > 255;
  std::vector<char> row(static_cast<size_t>(image.width) * (wide ? 2 : 1));
  for (int y = 0; y < image.height; ++y) {
    for (int x = 0; x < image.width; ++x) {
      const float v = std::min(1.0f, std::max(0.0f, image.at(x, y)));
      const auto q = static_cast<unsigned>(v * max_value + 0.5f);
      if (wide) {
        row[2 * x] = static_cast<char>(q >> 8);
        row[2 * x + 1] = static_cast<char>(q & 0xff);
      } else {
        row[x] = static_cast<char>(q);
      }
    }
    out.write(row.data(), static_cast<std::streamsize>(row.size()));
  }
  return file.Commit();
}

// ---------------------------------------------------------------------------------------
// PNG writing. As for reading, libpng's error hook longjmps back into a protected
// function whose state all lives in a context struct owned by the caller.

namespace {

struct PngWriteContext {
  png_structp png = nullptr;
  png_infop info = nullptr;
  char error[256] = {0};
  const Image8* image = nullptr;
  int compression_level = 3;
  std::vector<unsigned char> encoded;
  std::vector<png_bytep> rows;
};

void PngWriteErrorHook(png_structp png, png_const_charp message) {
  auto* ctx = static_cast<PngWriteContext*>(png_get_error_ptr(png));
  std::snprintf(ctx->error, sizeof(ctx->error), "%s", message);
  png_longjmp(png, 1);
}

void PngWriteHook(png_structp png, png_bytep data, png_size_t n) {
  auto* ctx = static_cast<PngWriteContext*>(png_get_io_ptr(png));
  ctx->encoded.insert(ctx->encoded.end(), data, data + n);
}

void PngFlushHook(png_structp) {}

bool EncodePngProtected(PngWriteContext* ctx) {
  if (setjmp(png_jmpbuf(ctx->png))) return false;
  const Image8& im = *ctx->image;
  png_set_write_fn(ctx->png, ctx, PngWriteHook, PngFlushHook);
  png_set_compression_level(ctx->png, ctx->compression_level);
  png_set_IHDR(ctx->png, ctx->info, static_cast<png_uint_32>(im.width),
               static_cast<png_uint_32>(im.height), 8,
               im.channels == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(ctx->png, ctx->info);
  png_write_image(ctx->png, ctx->rows.data());
  png_write_end(ctx->png, nullptr);
  return true;
}

}  // namespace

Status WritePng(const std::string& path, const Image8& image, int compression_level) {
  if (image.channels != 1 && image.channels != 3) {
    return Status::InvalidInput("WritePng " + path + ": " + std::to_string(image.channels) +
                                " channels (1 or 3 are written)");
  }
  if (image.width <= 0 || image.height <= 0 || image.width > kMaxImageSide ||
      image.height > kMaxImageSide) {
    return Status::InvalidInput("WritePng " + path + ": bad dimensions " +
                                Dimensions(image.width, image.height));
  }
  const size_t row_bytes = static_cast<size_t>(image.width) * image.channels;
  if (image.pixels.size() != row_bytes * image.height) {
    return Status::InvalidInput("WritePng " + path + ": image has " +
                                std::to_string(image.pixels.size()) + " samples, expected " +
                                std::to_string(row_bytes * image.height) + " for " +
                                Dimensions(image.width, image.height) + " x " +
                                std::to_string(image.channels));
  }
  if (compression_level < 0 || compression_level > 9) {
    return Status::InvalidOptions("WritePng " + path + ": compression level " +
                                  std::to_string(compression_level) + " is outside 0..9");
  }
  PngWriteContext ctx;
  ctx.image = &image;
  ctx.compression_level = compression_level;
  ctx.rows.resize(image.height);
  for (int y = 0; y < image.height; ++y) {
    // libpng's row pointers are non-const; it does not write through them when encoding.
    ctx.rows[y] = const_cast<png_bytep>(image.pixels.data() + row_bytes * y);
  }
  ctx.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &ctx, PngWriteErrorHook,
                                    PngWarningHook);
  if (ctx.png == nullptr) return Status::OutOfMemory("WritePng " + path + ": cannot create a PNG encoder");
  ctx.info = png_create_info_struct(ctx.png);
  if (ctx.info == nullptr) {
    png_destroy_write_struct(&ctx.png, nullptr);
    return Status::OutOfMemory("WritePng " + path + ": cannot create a PNG encoder");
  }
  const bool ok = EncodePngProtected(&ctx);
  png_destroy_write_struct(&ctx.png, &ctx.info);
  if (!ok) return Status::IoError("WritePng " + path + ": libpng failed: " + ctx.error);

  AtomicFile file(path);
  TIEPOINT_RETURN_IF_ERROR(file.Open());
  file.stream().write(reinterpret_cast<const char*>(ctx.encoded.data()),
                      static_cast<std::streamsize>(ctx.encoded.size()));
  return file.Commit();
}

Status WritePng(const std::string& path, const GrayImage& image, int compression_level) {
  if (image.pixels.size() != static_cast<size_t>(image.width) * image.height) {
    return Status::InvalidInput("WritePng " + path + ": image has " +
                                std::to_string(image.pixels.size()) + " pixels, expected " +
                                Dimensions(image.width, image.height));
  }
  Image8 grey;
  grey.width = image.width;
  grey.height = image.height;
  grey.channels = 1;
  grey.pixels.resize(image.pixels.size());
  for (size_t i = 0; i < image.pixels.size(); ++i) {
    const float v = std::min(1.0f, std::max(0.0f, image.pixels[i]));
    grey.pixels[i] = static_cast<unsigned char>(v * 255.0f + 0.5f);
  }
  return WritePng(path, grey, compression_level);
}

bool HasImageExtension(const std::string& name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot == 0) return false;
  std::string ext = name.substr(dot + 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == "png" || ext == "jpg" || ext == "jpeg" || ext == "tif" || ext == "tiff" || ext == "pgm" ||
         ext == "ppm" || ext == "pnm";
}

Status ExpandImageArguments(const std::vector<std::string>& args, std::vector<std::string>* files,
                            std::vector<std::string>* names) {
  std::vector<std::string> out_names;
  TIEPOINT_RETURN_IF_ERROR(ExpandFolderArguments(
      args, HasImageExtension, "image files (*.png, *.jpg, *.jpeg, *.tif, *.tiff, *.pgm, *.ppm, *.pnm)", files,
      &out_names));
  if (names != nullptr) *names = std::move(out_names);
  return Status::Ok();
}

}  // namespace tiepoint
