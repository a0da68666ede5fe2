// Reading images as single-channel float for feature extraction, or as 8-bit colour.
//
// Pixel convention (the project's, see DESIGN.md): pixel (0,0) is the *centre* of the
// top-left pixel; x grows to the right (column), y grows downwards (row). A feature at
// (x, y) = (2.0, 3.0) sits exactly on the centre of the pixel in column 2, row 3; the
// image covers [-0.5, width - 0.5] x [-0.5, height - 0.5].
//
// Formats, detected from the first bytes (never from the file name):
//   PNG   (libpng)  grey, grey+alpha, RGB, RGBA, palette; 1/2/4/8/16 bit; interlaced.
//   JPEG  (libjpeg) baseline and progressive, greyscale, YCbCr and RGB. CMYK/YCCK is
//                   rejected with a message. Corrupt or truncated entropy-coded data is
//                   an error (libjpeg only warns and pads with grey); the one warning
//                   tolerated is "extraneous bytes before marker", common in camera files.
//   PGM/PPM P2 (ASCII grey), P5 (binary grey), P3 (ASCII RGB), P6 (binary RGB); maxval
//                   1..65535 (above 255: two bytes per sample, big-endian, as Netpbm).
//   TIFF  (libtiff) classic and BigTIFF, either byte order, strips or tiles, any codec and
//                   photometric interpretation libtiff's RGBA interface decodes (grey,
//                   RGB, palette, YCbCr, CMYK...), at 8 bits a sample (16-bit samples are
//                   reduced by libtiff); the first image of a multi-page file; grey with
//                   alpha stays grey. Floating-point samples are refused with libtiff's
//                   reason. Samples of over 4096 times the file's size in bytes (fax and
//                   JBIG codecs exempt) are refused as corrupt before the raster is
//                   allocated; libtiff's messages are quoted, never printed.
// Colour is converted to grey with the ITU-R BT.601 luma weights applied to the stored
// (gamma-encoded) values: Y = 0.299 R + 0.587 G + 0.114 B. For YCbCr JPEGs this is the
// decoded Y channel itself. Alpha is ignored. Values are scaled to [0, 1] by the
// format's maximum (255, 65535 or the PNM maxval); no gamma or ICC conversion is done.
//
// Errors (code kInvalidInput unless noted) name the file and say what is wrong:
// missing/unreadable path (kIoError), empty file, unknown format (with the first bytes
// shown), zero width or height, absurd dimensions (either side above kMaxImageSide or
// more than kMaxImagePixels pixels: checked from the header before any allocation),
// a header that promises more pixels than the file can code (PNG: a raster over 1032
// times the file, deflate's limit; JPEG: over 1024 pixels a byte, 4096 when arithmetic
// coded; PGM/PPM: fewer bytes left than the samples need), a JPEG of over 100 scans,
// truncated or corrupt data (libpng's and libjpeg's own message is quoted). The
// libraries' errors are caught through their error hooks (setjmp/longjmp); nothing
// here aborts or throws. On failure *out is left unchanged.
//
// Thread safety: ReadImageGray and ReadImage8 are reentrant (no shared state); call them
// from any thread.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "io/base/status.h"

namespace tiepoint {

// Largest accepted width or height, and largest accepted pixel count (2^28 = 268 M
// pixels = 1 GiB as float). Anything bigger is treated as a corrupt header.
constexpr int kMaxImageSide = 65535;
constexpr long long kMaxImagePixels = 1LL << 28;

// Whether (x, y) lies on an image of width x height pixels under the pixel convention above
// ([-0.5, width - 0.5] x [-0.5, height - 0.5], the outer edges included); false for NaN.
inline bool InsideImage(double x, double y, int width, int height) {
  return x >= -0.5 && x <= width - 0.5 && y >= -0.5 && y <= height - 0.5;
}

// The IMAGES arguments of a command as files: a folder stands for the image files in it
// and in its subfolders, as COLMAP's --image_path does (named *.png, *.jpg, *.jpeg, *.tif,
// *.tiff, *.pgm, *.ppm or *.pnm, any case; other files such as README.txt or *_par.txt
// are passed over, and so are hidden files and folders, whose names start with '.', such
// as macOS's ._IMG_0001.JPG; symbolic links to folders are not followed). Their order is
// natural, as `ls -v` sorts names, path component by component (a folder's files stay
// together): digit runs compare as numbers, so video frames frame_1, frame_2, ...,
// frame_10 keep their sequence without zero padding, and zero-padded names keep their
// byte order. Any other argument is kept as given (a missing file is named later, by the
// reader). `names`, when given, receives each file's name as a model names it: its path
// relative to the folder given ("100MEDIA/DJI_0001.JPG", '/' between components, as in
// COLMAP's image names), or for a file argument its file name. Errors name the folder:
// "<dir>: no image files (*.png, *.jpg, ...) in the folder or its subfolders"
// (kInvalidInput), "<dir>: cannot list the folder (<reason>)" (kIoError).
Status ExpandImageArguments(const std::vector<std::string>& args, std::vector<std::string>* files,
                            std::vector<std::string>* names = nullptr);

// Whether a file name has one of the image extensions above (any case), as a folder's
// listing takes it for an image.
bool HasImageExtension(const std::string& file_name);

// A single-channel image, row-major: the value of pixel (x, y) is pixels[y * width + x],
// in [0, 1] for decoded images. See the pixel convention above.
struct GrayImage {
  int width = 0;
  int height = 0;
  std::vector<float> pixels;

  float at(int x, int y) const { return pixels[static_cast<size_t>(y) * width + x]; }
  float& at(int x, int y) { return pixels[static_cast<size_t>(y) * width + x]; }
  bool empty() const { return width == 0 || height == 0; }
};

// Decodes a PNG, JPEG, TIFF, PGM or PPM file (detected by magic bytes) to grey in [0, 1].
Status ReadImageGray(const std::string& path, GrayImage* out);

// The bytes of an image file, read as ReadImageGray reads them (its errors: a missing or
// unreadable path, a directory), for a caller that decodes them more than once (pixels and
// EXIF) from one read.
Status ReadImageFile(const std::string& path, std::vector<unsigned char>* bytes);

// Decodes an image held in memory; `name` stands in for the path in error messages.
Status DecodeImageGray(const unsigned char* data, size_t size, const std::string& name,
                       GrayImage* out);

// Writes a binary PGM (P5, 8-bit when max_value <= 255, else 16-bit big-endian) of
// `image` scaled by max_value and rounded, through a temporary file renamed into place.
// For tests, debugging and `tiepoint` outputs; values outside [0, 1] are clamped.
Status WritePgm(const std::string& path, const GrayImage& image, int max_value = 255);

// An 8-bit image of 1 (grey) or 3 (RGB) interleaved channels, row-major, top row first:
// sample c of pixel (x, y) is pixels[(y * width + x) * channels + c]. Same pixel
// convention as GrayImage.
struct Image8 {
  int width = 0;
  int height = 0;
  int channels = 1;
  std::vector<unsigned char> pixels;

  bool empty() const { return width == 0 || height == 0; }
};

// Decodes a PNG, JPEG, TIFF, PGM or PPM file (detected by magic bytes) to 8-bit samples as
// stored, for colours: 1 channel for grey files (PGM, grey PNG and JPEG), 3 for colour
// ones (PPM; RGB and palette PNG; YCbCr and RGB JPEG, YCbCr converted by libjpeg); alpha
// is dropped; 16-bit samples and PNM maxvals other than 255 are scaled to 0..255 and
// rounded. The same checks and error messages as ReadImageGray; on failure *out is left
// unchanged. Reentrant. Holds width x height x channels bytes (a 3072 x 2048 photo: 19 MB).
Status ReadImage8(const std::string& path, Image8* out);
Status DecodeImage8(const unsigned char* data, size_t size, const std::string& name, Image8* out);

// Both from one decoding, for a caller that needs the grey image now and the colours
// later (reconstruct: SIFT, then the points' colours): *gray as DecodeImageGray gives it,
// and *colour as DecodeImage8 gives it, for PNG, TIFF, PGM and PPM files. A JPEG fills
// *gray only and leaves *colour as it was: its grey is libjpeg's luma channel, decoded
// without the chroma, and its colour is a decoding of its own. Errors as DecodeImageGray.
Status DecodeImageGrayAndColour(const unsigned char* data, size_t size, const std::string& name,
                                GrayImage* gray, Image8* colour);

// Writes an 8-bit PNG (grey for 1 channel, RGB for 3; no alpha, no gamma chunk) through
// libpng, encoded in memory and written through a temporary file renamed into place.
// `compression_level` is zlib's 0..9 (1: fastest; 6: libpng's default). Errors: bad
// dimensions, a channel count other than 1 or 3 or a pixel buffer of the wrong size
// (kInvalidInput), libpng failures and an unwritable path (kIoError), naming the path.
// Reentrant.
Status WritePng(const std::string& path, const Image8& image, int compression_level = 3);
// The same for a float grey image: values in [0, 1] scaled by 255 and rounded, clamped.
Status WritePng(const std::string& path, const GrayImage& image, int compression_level = 3);

}  // namespace tiepoint
