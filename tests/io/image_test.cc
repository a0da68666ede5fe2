#include "io/image.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "tests/common/image_encoders.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/tiff_encoder.h"

namespace tiepoint {
namespace {

namespace fs = std::filesystem;
using testing::Bytes;
using testing::EncodeJpeg;
using testing::EncodePng;
using testing::EncodePnm;
using testing::EncodeTiff;
using testing::TiffLayout;

using testing::ScratchDir;

// A test pattern that tells x from y and rows from columns: distinct in every pixel.
uint16_t Pattern(int x, int y, int c, int maxval) {
  return static_cast<uint16_t>((x * 37 + y * 11 + c * 101) % (maxval + 1));
}

std::vector<uint16_t> PatternSamples(int w, int h, int channels, int maxval) {
  std::vector<uint16_t> s(static_cast<size_t>(w) * h * channels);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < channels; ++c) s[(y * w + x) * channels + c] = Pattern(x, y, c, maxval);
    }
  }
  return s;
}

float ExpectedGrey(int x, int y, int channels, int maxval) {
  const float m = static_cast<float>(maxval);
  if (channels == 1) return Pattern(x, y, 0, maxval) / m;
  return 0.299f * Pattern(x, y, 0, maxval) / m + 0.587f * Pattern(x, y, 1, maxval) / m +
         0.114f * Pattern(x, y, 2, maxval) / m;
}

void ExpectImage(const GrayImage& img, int w, int h, int channels, int maxval, float tol) {
  ASSERT_EQ(img.width, w);
  ASSERT_EQ(img.height, h);
  ASSERT_EQ(img.pixels.size(), static_cast<size_t>(w) * h);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      ASSERT_NEAR(img.at(x, y), ExpectedGrey(x, y, channels, maxval), tol)
          << "pixel (" << x << ", " << y << ")";
    }
  }
}

Status Decode(const Bytes& bytes, GrayImage* img, const std::string& name = "mem") {
  return DecodeImageGray(bytes.data(), bytes.size(), name, img);
}

TEST(ImageTest, PgmBinary8BitIsRowMajorWithYDown) {
  const int w = 7, h = 5;
  GrayImage img;
  ASSERT_TRUE(Decode(EncodePnm(w, h, 1, 255, PatternSamples(w, h, 1, 255)), &img).ok());
  ExpectImage(img, w, h, 1, 255, 1e-7f);
  // The first sample of the file is pixel (0, 0), the second (1, 0): x runs along rows.
  EXPECT_FLOAT_EQ(img.at(1, 0), Pattern(1, 0, 0, 255) / 255.0f);
  EXPECT_FLOAT_EQ(img.at(0, 1), Pattern(0, 1, 0, 255) / 255.0f);
}

TEST(ImageTest, PgmBinary16BitAndOddMaxval) {
  for (int maxval : {65535, 1000, 256}) {
    const int w = 9, h = 4;
    GrayImage img;
    ASSERT_TRUE(Decode(EncodePnm(w, h, 1, maxval, PatternSamples(w, h, 1, maxval)), &img).ok());
    ExpectImage(img, w, h, 1, maxval, 1e-6f);
  }
}

TEST(ImageTest, PnmAsciiAndColour) {
  const int w = 6, h = 4;
  GrayImage img;
  ASSERT_TRUE(Decode(EncodePnm(w, h, 1, 255, PatternSamples(w, h, 1, 255), true), &img).ok());
  ExpectImage(img, w, h, 1, 255, 1e-7f);
  ASSERT_TRUE(Decode(EncodePnm(w, h, 3, 255, PatternSamples(w, h, 3, 255), true), &img).ok());
  ExpectImage(img, w, h, 3, 255, 1e-6f);
  ASSERT_TRUE(Decode(EncodePnm(w, h, 3, 255, PatternSamples(w, h, 3, 255)), &img).ok());
  ExpectImage(img, w, h, 3, 255, 1e-6f);
  ASSERT_TRUE(Decode(EncodePnm(w, h, 3, 4095, PatternSamples(w, h, 3, 4095)), &img).ok());
  ExpectImage(img, w, h, 3, 4095, 1e-6f);
}

TEST(ImageTest, PgmCommentsAnywhereInHeader) {
  const std::string text = "P2 # grey\n# size follows\n3 # width\n2\n# max\n10\n0 1 2\n3 4 10\n";
  GrayImage img;
  ASSERT_TRUE(Decode(Bytes(text.begin(), text.end()), &img).ok());
  ASSERT_EQ(img.width, 3);
  ASSERT_EQ(img.height, 2);
  EXPECT_FLOAT_EQ(img.at(2, 0), 0.2f);
  EXPECT_FLOAT_EQ(img.at(2, 1), 1.0f);
}

TEST(ImageTest, PngAllLayouts) {
  const int w = 13, h = 6;
  struct Case {
    int color_type, bit_depth, channels;
    bool interlaced;
  };
  for (const Case& c : {Case{PNG_COLOR_TYPE_GRAY, 8, 1, false},
                        Case{PNG_COLOR_TYPE_GRAY, 16, 1, false},
                        Case{PNG_COLOR_TYPE_GRAY, 8, 1, true},
                        Case{PNG_COLOR_TYPE_RGB, 8, 3, false},
                        Case{PNG_COLOR_TYPE_RGB, 16, 3, true}}) {
    SCOPED_TRACE("colour type " + std::to_string(c.color_type) + ", " +
                 std::to_string(c.bit_depth) + " bit" + (c.interlaced ? ", interlaced" : ""));
    const int maxval = (1 << c.bit_depth) - 1;
    const Bytes png = EncodePng(w, h, c.color_type, c.bit_depth,
                                PatternSamples(w, h, c.channels, maxval), c.interlaced);
    ASSERT_FALSE(png.empty());
    GrayImage img;
    const Status s = Decode(png, &img);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ExpectImage(img, w, h, c.channels, maxval, 1e-6f);
  }
}

TEST(ImageTest, PngAlphaIsIgnored) {
  const int w = 5, h = 3;
  std::vector<uint16_t> rgba, ga;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < 3; ++c) rgba.push_back(Pattern(x, y, c, 255));
      rgba.push_back(static_cast<uint16_t>(x * 50));  // alpha
      ga.push_back(Pattern(x, y, 0, 255));
      ga.push_back(17);
    }
  }
  GrayImage img;
  ASSERT_TRUE(Decode(EncodePng(w, h, PNG_COLOR_TYPE_RGB_ALPHA, 8, rgba), &img).ok());
  ExpectImage(img, w, h, 3, 255, 1e-6f);
  ASSERT_TRUE(Decode(EncodePng(w, h, PNG_COLOR_TYPE_GRAY_ALPHA, 8, ga), &img).ok());
  ExpectImage(img, w, h, 1, 255, 1e-6f);
}

TEST(ImageTest, PngPaletteAndLowBitDepth) {
  const int w = 10, h = 3;
  std::vector<png_color> palette = {{0, 0, 0}, {255, 0, 0}, {0, 255, 0}, {10, 20, 30}};
  std::vector<uint16_t> idx;
  for (int i = 0; i < w * h; ++i) idx.push_back(static_cast<uint16_t>(i % 4));
  GrayImage img;
  const Status s = Decode(EncodePng(w, h, PNG_COLOR_TYPE_PALETTE, 8, idx, false, palette), &img);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (int i = 0; i < w * h; ++i) {
    const png_color& c = palette[i % 4];
    EXPECT_NEAR(img.pixels[i], (0.299f * c.red + 0.587f * c.green + 0.114f * c.blue) / 255.0f,
                1e-6f);
  }
  std::vector<uint16_t> bits;
  for (int i = 0; i < w * h; ++i) bits.push_back(static_cast<uint16_t>((i / 3) % 2));
  ASSERT_TRUE(Decode(EncodePng(w, h, PNG_COLOR_TYPE_GRAY, 1, bits), &img).ok());
  for (int i = 0; i < w * h; ++i) EXPECT_FLOAT_EQ(img.pixels[i], static_cast<float>(bits[i]));
}

// A smooth image, so that JPEG's loss stays small and the comparison can be tight.
std::vector<uint8_t> SmoothSamples(int w, int h, int channels) {
  std::vector<uint8_t> s;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < channels; ++c) {
        s.push_back(static_cast<uint8_t>(
            127.5 + 100 * std::sin(0.07 * x + 0.05 * y + c) * std::cos(0.04 * y - 0.5 * c)));
      }
    }
  }
  return s;
}

// TIFF (libtiff's RGBA interface): strips and tiles, no compression, LZW and deflate, both
// byte orders, 8 and 16 bits (16-bit samples to 8 bits by libtiff's RGBA interface: its
// grey path takes the high byte, its RGB path rounds v / 257; 257 v gives v either way),
// grey stored min-is-white; grey decodes to its samples / 255, colour to their luma, and
// ReadImage8 keeps 1 channel for grey and 3 for colour, row-major with y down.
TEST(ImageTest, TiffLayoutsDecodeToTheirSamples) {
  const int w = 37, h = 21;  // not a multiple of the 32 x 32 tiles
  struct Case {
    const char* what;
    int channels;
    TiffLayout layout;
  };
  TiffLayout lzw, deflate16, tiled_be, white;
  lzw.compression = COMPRESSION_LZW;
  deflate16.compression = COMPRESSION_ADOBE_DEFLATE;
  deflate16.bits = 16;
  tiled_be.tiled = true;
  tiled_be.big_endian = true;
  white.min_is_white = true;
  for (const Case& c : {Case{"grey", 1, TiffLayout()}, Case{"rgb lzw", 3, lzw}, Case{"grey 16 deflate", 1, deflate16},
                        Case{"rgb 16 deflate", 3, deflate16}, Case{"rgb tiled big-endian", 3, tiled_be},
                        Case{"grey min-is-white", 1, white}}) {
    SCOPED_TRACE(c.what);
    const std::vector<uint8_t> s8 = SmoothSamples(w, h, c.channels);
    std::vector<uint16_t> stored(s8.begin(), s8.end());
    if (c.layout.bits == 16)
      for (uint16_t& v : stored) v = static_cast<uint16_t>(v * 257);
    if (c.layout.min_is_white)
      for (uint16_t& v : stored) v = static_cast<uint16_t>(255 - v);
    const Bytes tiff = EncodeTiff(w, h, c.channels, stored, c.layout);
    ASSERT_FALSE(tiff.empty());
    EXPECT_EQ(tiff[0], c.layout.big_endian ? 'M' : 'I');
    GrayImage g;
    ASSERT_TRUE(Decode(tiff, &g).ok()) << Decode(tiff, &g).ToString();
    ASSERT_EQ(g.width, w);
    ASSERT_EQ(g.height, h);
    Image8 im;
    ASSERT_TRUE(DecodeImage8(tiff.data(), tiff.size(), "mem", &im).ok());
    ASSERT_EQ(im.channels, c.channels);
    ASSERT_EQ(im.pixels.size(), static_cast<size_t>(w) * h * c.channels);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        const uint8_t* s = &s8[(static_cast<size_t>(y) * w + x) * c.channels];
        const double want = c.channels == 1 ? s[0] / 255.0 : (0.299 * s[0] + 0.587 * s[1] + 0.114 * s[2]) / 255.0;
        ASSERT_NEAR(g.at(x, y), want, 1e-5) << "at (" << x << ", " << y << ")";
        for (int k = 0; k < c.channels; ++k)
          ASSERT_EQ(im.pixels[(static_cast<size_t>(y) * w + x) * c.channels + k], s[k]) << "at (" << x << ", " << y << ")";
      }
  }
}

// A bilevel fax scan (CCITT G4): a blank 2048 x 2048 page with a mark codes in 448 bytes,
// over 4096 pixels a byte (a bound on pixels refused it), and decodes: the bound is on the
// samples' bytes. (Larger blank pages pass that too only because fax codecs are exempt:
// an 8192 x 8192 page, 8 MiB of samples in about 1 KB, checked by hand.)
// Grey with an alpha channel stays one channel for ReadImage8, as a grey+alpha PNG does.
TEST(ImageTest, TiffFaxScanAndGreyAlpha) {
  const int w = 2048, h = 2048;
  std::vector<uint16_t> page(static_cast<size_t>(w) * h, 0);
  for (int y = 900; y < 1100; ++y)
    for (int x = 1000; x < 1010; ++x) page[static_cast<size_t>(y) * w + x] = 1;
  TiffLayout g4;
  g4.bits = 1;
  g4.compression = COMPRESSION_CCITTFAX4;
  const Bytes fax = EncodeTiff(w, h, 1, page, g4);
  ASSERT_FALSE(fax.empty());
  EXPECT_LT(fax.size(), 1024u);  // 448 bytes: 9,000 pixels a byte, but 512 KiB of 1-bit samples
  GrayImage g;
  const Status s = Decode(fax, &g);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(g.at(1005, 1000), 1.0f);  // 1 is white (min-is-black)
  EXPECT_EQ(g.at(5, 5), 0.0f);

  const int gw = 5, gh = 3;
  std::vector<uint16_t> ga;
  for (int i = 0; i < gw * gh; ++i) {
    ga.push_back(static_cast<uint16_t>(10 * i));
    ga.push_back(255);
  }
  const Bytes grey_alpha = EncodeTiff(gw, gh, 2, ga);
  ASSERT_FALSE(grey_alpha.empty());
  Image8 im;
  ASSERT_TRUE(DecodeImage8(grey_alpha.data(), grey_alpha.size(), "mem", &im).ok());
  EXPECT_EQ(im.channels, 1);
  ASSERT_EQ(im.pixels.size(), static_cast<size_t>(gw * gh));
  for (int i = 0; i < gw * gh; ++i) EXPECT_EQ(im.pixels[i], 10 * i);
}

TEST(ImageTest, JpegGreyAndColour) {
  const int w = 48, h = 40;
  for (int channels : {1, 3}) {
    for (bool keep_rgb : {false, true}) {
      if (channels == 1 && keep_rgb) continue;
      SCOPED_TRACE(std::to_string(channels) + " channels" + (keep_rgb ? ", RGB stored" : ""));
      const std::vector<uint8_t> s = SmoothSamples(w, h, channels);
      GrayImage img;
      const Status st = Decode(EncodeJpeg(w, h, channels, s, 100, keep_rgb), &img);
      ASSERT_TRUE(st.ok()) << st.ToString();
      ASSERT_EQ(img.width, w);
      ASSERT_EQ(img.height, h);
      double max_err = 0;
      for (int i = 0; i < w * h; ++i) {
        const float expected =
            channels == 1 ? s[i] / 255.0f
                          : (0.299f * s[3 * i] + 0.587f * s[3 * i + 1] + 0.114f * s[3 * i + 2]) /
                                255.0f;
        max_err = std::max(max_err, std::abs(static_cast<double>(img.pixels[i] - expected)));
      }
      EXPECT_LT(max_err, 4.0 / 255) << "quality-100 JPEG should be within a few grey levels";
    }
  }
}

std::string BadImagesDir() { return std::string(TIEPOINT_TEST_DATA_DIR) + "/bad_images"; }

TEST(ImageTest, BadImageCorpusGivesClearErrors) {
  // File -> fragment the message must contain (besides the file's path).
  const std::map<std::string, std::string> expected = {
      {"truncated.png", "truncated PNG: file ends early"},
      {"bad_crc.png", "CRC error"},
      {"absurd_dimensions.png", "absurd dimensions 70000 x 70000"},
      {"not_an_image.png", "not a PNG, JPEG, TIFF, PGM or PPM image despite its '.png' extension"},
      {"truncated.jpg", "Premature end of JPEG file"},
      {"corrupt.jpg", "Bogus Huffman table"},
      {"corrupt_data.jpg", "Corrupt JPEG data"},
      {"empty.pgm", "empty file"},
      {"zero_size.pgm", "zero-sized image (0 x 0 pixels)"},
      {"absurd_dimensions.pgm", "absurd dimensions 100000 x 100000"},
      {"truncated.pgm", "truncated PGM (binary): 64 x 48 needs 3072 bytes"},
      {"bad_maxval.pgm", "maximum value 70000 is outside 1..65535"},
  };
  std::set<std::string> seen;
  for (const auto& entry : fs::directory_iterator(BadImagesDir())) {
    const std::string name = entry.path().filename().string();
    if (name == "README.md") continue;
    seen.insert(name);
    SCOPED_TRACE(name);
    const auto it = expected.find(name);
    ASSERT_NE(it, expected.end()) << "add a row for " << name << " to this table";
    GrayImage img;
    img.width = 3;  // must survive a failed read
    const Status s = ReadImageGray(entry.path().string(), &img);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
    EXPECT_NE(s.message().find(entry.path().string()), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(it->second), std::string::npos) << s.message();
    EXPECT_EQ(img.width, 3);
    EXPECT_TRUE(img.pixels.empty());
  }
  EXPECT_EQ(seen.size(), expected.size()) << "a file of the table is missing from the corpus";
}

TEST(ImageTest, MissingFileAndDirectoryAreIoErrors) {
  ScratchDir dir("missing");
  GrayImage img;
  Status s = ReadImageGray(dir.File("nope.png"), &img);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("nope.png"), std::string::npos);
  EXPECT_NE(s.message().find("No such file"), std::string::npos);
  s = ReadImageGray(dir.File(""), &img);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("directory"), std::string::npos);
}

TEST(ImageTest, FolderArgumentsStandForTheImagesInThem) {
  namespace fs = std::filesystem;
  ScratchDir dir("expand");
  const std::string d = dir.File("photos");
  fs::create_directories(d + "/sub.png");  // a folder named like an image: passed over
  for (const char* name : {"B.png", "a.jpg", "c.JPEG", "a_par.txt", "README.txt", "e.pnm", "d.Pgm", "f.ppm", ".png",
                           "g.tif", "h.TIFF"})
    std::ofstream(d + "/" + name) << "x";
  std::vector<std::string> files;
  ASSERT_TRUE(ExpandImageArguments({"first.png", d, "last.png"}, &files).ok());
  // Byte order of the names ('B' < 'a'); the readers judge the contents later.
  const std::vector<std::string> want = {"first.png", d + "/B.png", d + "/a.jpg", d + "/c.JPEG", d + "/d.Pgm",
                                         d + "/e.pnm", d + "/f.ppm", d + "/g.tif", d + "/h.TIFF", "last.png"};
  EXPECT_EQ(files, want);
  // The arguments may be the output (the command line's own vector).
  files = {d + "/"};
  ASSERT_TRUE(ExpandImageArguments(files, &files).ok());
  EXPECT_EQ(files.size(), 8u);
  // Natural order: digit runs as numbers, so unpadded frame numbers keep their sequence.
  const std::string v = dir.File("frames");
  fs::create_directories(v);
  for (const char* name : {"f10.png", "f2.png", "f1.png", "f02.png", "f1b.png", "f9.png", "g.png", "F3.png"})
    std::ofstream(v + "/" + name) << "x";
  ASSERT_TRUE(ExpandImageArguments({v}, &files).ok());
  std::vector<std::string> order;
  for (const std::string& f : files) order.push_back(fs::path(f).filename().string());
  EXPECT_EQ(order, (std::vector<std::string>{"F3.png", "f1.png", "f1b.png", "f2.png", "f02.png", "f9.png",
                                             "f10.png", "g.png"}));
  // A folder with no image files is named; a missing path is left to the reader.
  const Status s = ExpandImageArguments({d + "/sub.png"}, &files);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_EQ(s.message(),
            d + "/sub.png: no image files (*.png, *.jpg, *.jpeg, *.tif, *.tiff, *.pgm, *.ppm, *.pnm) in the folder "
                "or its subfolders");
  ASSERT_TRUE(ExpandImageArguments({dir.File("none.png")}, &files).ok());
  EXPECT_EQ(files, std::vector<std::string>{dir.File("none.png")});
}

TEST(ImageTest, FoldersAreSearchedWithTheirSubfoldersAndNamedRelativeToThem) {
  namespace fs = std::filesystem;
  ScratchDir dir("expand_tree");
  const std::string d = dir.File("DCIM");
  // A camera's card: numbering restarts in each folder, so the file names repeat.
  for (const char* name : {"100MEDIA/DJI_0002.JPG", "100MEDIA/DJI_0001.JPG", "101MEDIA/DJI_0001.JPG",
                           "10MEDIA/x.png", "b.png", "a.png", "deep/er/still.tif", ".thumbs/t.png", "._b.png",
                           "100MEDIA/._DJI_0001.JPG", "100MEDIA/notes.txt"}) {
    fs::create_directories(fs::path(d + "/" + name).parent_path());
    std::ofstream(d + "/" + name) << "x";
  }
  fs::create_directory_symlink("100MEDIA", d + "/link");  // not followed: no file twice
  fs::create_directories(d + "/empty");
  std::vector<std::string> files, names;
  ASSERT_TRUE(ExpandImageArguments({dir.File("first.png"), d + "/"}, &files, &names).ok());
  const std::vector<std::string> want_names = {"first.png",
                                               "10MEDIA/x.png",
                                               "100MEDIA/DJI_0001.JPG",
                                               "100MEDIA/DJI_0002.JPG",
                                               "101MEDIA/DJI_0001.JPG",
                                               "a.png",
                                               "b.png",
                                               "deep/er/still.tif"};
  EXPECT_EQ(names, want_names);
  ASSERT_EQ(files.size(), want_names.size());
  EXPECT_EQ(files[0], dir.File("first.png"));
  for (size_t i = 1; i < files.size(); ++i) {
    EXPECT_EQ(files[i], d + "/" + want_names[i]);
    EXPECT_TRUE(fs::is_regular_file(files[i])) << files[i];
  }
  // The folder of one subfolder: names relative to the folder given.
  ASSERT_TRUE(ExpandImageArguments({d + "/100MEDIA"}, &files, &names).ok());
  EXPECT_EQ(names, (std::vector<std::string>{"DJI_0001.JPG", "DJI_0002.JPG"}));
  // A hidden folder named as the argument is searched; a folder whose only images are
  // hidden has none.
  ASSERT_TRUE(ExpandImageArguments({d + "/.thumbs"}, &files, &names).ok());
  EXPECT_EQ(names, std::vector<std::string>{"t.png"});
  fs::create_directories(d + "/hid/.x");
  std::ofstream(d + "/hid/.x/y.png") << "x";
  std::ofstream(d + "/hid/.y.png") << "x";
  const Status s = ExpandImageArguments({d + "/hid"}, &files);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
}

// An uncompressed 8-bit grey TIFF with its directory first and its pixels after, written by
// hand: libtiff writes the directory last, so cutting its files never reaches the pixels.
Bytes DirectoryFirstTiff(int w, int h, const std::vector<uint8_t>& grey) {
  Bytes b = {'I', 'I', 42, 0, 8, 0, 0, 0};
  auto u16 = [&](uint32_t v) { b.push_back(v & 255); b.push_back((v >> 8) & 255); };
  auto u32 = [&](uint32_t v) { u16(v & 0xffff); u16(v >> 16); };
  const uint32_t entries = 9, data_at = 8 + 2 + 12 * entries + 4;
  u16(entries);
  auto entry = [&](uint16_t tag, uint16_t type, uint32_t value) {
    u16(tag);
    u16(type);
    u32(1);
    if (type == 3) {  // SHORT, left-justified in the 4-byte value field
      u16(value);
      u16(0);
    } else {
      u32(value);
    }
  };
  entry(256, 3, w);             // ImageWidth
  entry(257, 3, h);             // ImageLength
  entry(258, 3, 8);             // BitsPerSample
  entry(259, 3, 1);             // Compression: none
  entry(262, 3, 1);             // PhotometricInterpretation: min-is-black
  entry(273, 4, data_at);       // StripOffsets
  entry(277, 3, 1);             // SamplesPerPixel
  entry(278, 3, h);             // RowsPerStrip
  entry(279, 4, w * h);         // StripByteCounts
  u32(0);                       // no next directory
  b.insert(b.end(), grey.begin(), grey.end());
  return b;
}

TEST(ImageTest, EveryTruncationIsAnError) {
  const int w = 24, h = 16;
  const std::vector<uint8_t> s8 = SmoothSamples(w, h, 3);
  const std::vector<uint16_t> s16(s8.begin(), s8.end());
  const std::map<std::string, Bytes> files = {
      {"png", EncodePng(w, h, PNG_COLOR_TYPE_RGB, 8, s16)},
      {"png-interlaced", EncodePng(w, h, PNG_COLOR_TYPE_RGB, 8, s16, true)},
      {"jpeg", EncodeJpeg(w, h, 3, s8, 90)},
      {"ppm", EncodePnm(w, h, 3, 255, s16)},
      {"ppm-ascii", EncodePnm(w, h, 3, 255, s16, true)},
      {"tiff", EncodeTiff(w, h, 3, s16)},
      {"tiff-directory-first", DirectoryFirstTiff(w, h, SmoothSamples(w, h, 1))},
      {"tiff-lzw-tiled", EncodeTiff(w, h, 3, s16, [] {
         TiffLayout l;
         l.compression = COMPRESSION_LZW;
         l.tiled = true;
         return l;
       }())}};
  for (const auto& [kind, full] : files) {
    GrayImage img;
    ASSERT_TRUE(Decode(full, &img).ok()) << kind;
    if (kind == "tiff-directory-first") {
      const std::vector<uint8_t> grey = SmoothSamples(w, h, 1);
      for (int i = 0; i < w * h; ++i) ASSERT_EQ(img.pixels[i], grey[i] / 255.0f) << "pixel " << i;
    }
    for (size_t len = 0; len < full.size(); ++len) {
      const Bytes cut(full.begin(), full.begin() + len);
      const Status s = Decode(cut, &img, "cut.img");
      // An ASCII PNM cut inside its last number still parses (a shorter last value).
      if (kind == "ppm-ascii" && len + 4 > full.size()) continue;
      ASSERT_FALSE(s.ok()) << kind << " cut to " << len << " of " << full.size() << " bytes";
      ASSERT_NE(s.message().find("cut.img"), std::string::npos) << s.message();
    }
  }
}

TEST(ImageTest, RandomCorruptionNeverCrashes) {
  const int w = 32, h = 24;
  const std::vector<uint8_t> s8 = SmoothSamples(w, h, 1);
  const std::vector<uint16_t> s16(s8.begin(), s8.end());
  const std::vector<Bytes> files = {EncodePng(w, h, PNG_COLOR_TYPE_GRAY, 8, s16),
                                    EncodeJpeg(w, h, 1, s8, 90),
                                    EncodeJpeg(w, h, 1, s8, 60),
                                    EncodePnm(w, h, 1, 255, s16),
                                    EncodeTiff(w, h, 1, s16)};
  std::mt19937 rng(7);
  int failures = 0, successes = 0;
  for (const Bytes& full : files) {
    for (int trial = 0; trial < 300; ++trial) {
      Bytes b = full;
      const int flips = 1 + trial % 8;
      for (int f = 0; f < flips; ++f) b[rng() % b.size()] = static_cast<unsigned char>(rng());
      GrayImage img;
      const Status s = Decode(b, &img);
      if (s.ok()) {
        ++successes;
        ASSERT_EQ(img.pixels.size(), static_cast<size_t>(img.width) * img.height);
        for (float v : img.pixels) ASSERT_TRUE(v >= 0.0f && v <= 1.0f);
      } else {
        ++failures;
      }
    }
  }
  // Both outcomes occur (bit errors in pixel data can go unnoticed); none crashes.
  EXPECT_GT(failures, 0);
  EXPECT_GT(successes, 0);
}

// ReadImage8: the samples as stored, 1 channel for grey files and 3 for colour ones.
TEST(ImageTest, Image8KeepsColourAndChannels) {
  ScratchDir dir("image8");
  const int w = 7, h = 5;
  struct Case {
    std::string name;
    testing::Bytes bytes;
    int channels;
    int maxval;  // of the pattern written
    int tol;     // in 8-bit steps (JPEG is lossy)
  };
  std::vector<uint8_t> rgb8(w * h * 3), grey8(w * h);
  for (size_t i = 0; i < rgb8.size(); ++i) rgb8[i] = static_cast<uint8_t>(PatternSamples(w, h, 3, 255)[i]);
  for (size_t i = 0; i < grey8.size(); ++i) grey8[i] = static_cast<uint8_t>(PatternSamples(w, h, 1, 255)[i]);
  const std::vector<Case> cases = {
      {"rgb.png", EncodePng(w, h, PNG_COLOR_TYPE_RGB, 8, PatternSamples(w, h, 3, 255)), 3, 255, 0},
      {"rgb16.png", EncodePng(w, h, PNG_COLOR_TYPE_RGB, 16, PatternSamples(w, h, 3, 65535)), 3, 65535, 0},
      {"grey.png", EncodePng(w, h, PNG_COLOR_TYPE_GRAY, 8, PatternSamples(w, h, 1, 255)), 1, 255, 0},
      {"rgb.ppm", EncodePnm(w, h, 3, 255, PatternSamples(w, h, 3, 255)), 3, 255, 0},
      {"rgb1000.ppm", EncodePnm(w, h, 3, 1000, PatternSamples(w, h, 3, 1000)), 3, 1000, 1},
      {"grey.pgm", EncodePnm(w, h, 1, 255, PatternSamples(w, h, 1, 255)), 1, 255, 0},
      {"rgb_as_rgb.jpg", EncodeJpeg(w, h, 3, rgb8, 100, true), 3, 255, 6},
      {"grey.jpg", EncodeJpeg(w, h, 1, grey8, 100), 1, 255, 6},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.File(c.name);
    ASSERT_TRUE(testing::WriteBytes(path, c.bytes));
    Image8 im;
    const Status s = ReadImage8(path, &im);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(im.width, w);
    ASSERT_EQ(im.height, h);
    ASSERT_EQ(im.channels, c.channels);
    ASSERT_EQ(im.pixels.size(), static_cast<size_t>(w) * h * c.channels);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        for (int k = 0; k < c.channels; ++k) {
          const double expected = std::round(Pattern(x, y, k, c.maxval) * 255.0 / c.maxval);
          ASSERT_NEAR(im.pixels[(y * w + x) * c.channels + k], expected, c.tol + 1e-9)
              << "pixel (" << x << ", " << y << ") channel " << k;
        }
  }
}

// DecodeImageGrayAndColour: one decoding gives what DecodeImageGray and DecodeImage8 give
// apart, to the bit, for every format whose grey and colour come from the same samples;
// a JPEG gives its grey (libjpeg's luma channel) and leaves the colour as it was; errors
// are DecodeImageGray's, with neither image touched.
TEST(ImageTest, GrayAndColourFromOneDecodingEqualTheTwoDecodings) {
  const int w = 37, h = 21;
  std::vector<uint16_t> rgba;
  for (uint16_t v : PatternSamples(w, h, 3, 255)) rgba.push_back(v);
  std::vector<uint16_t> with_alpha;
  for (size_t i = 0; i < rgba.size(); i += 3) with_alpha.insert(with_alpha.end(), {rgba[i], rgba[i + 1], rgba[i + 2], 200});
  std::vector<uint16_t> idx(static_cast<size_t>(w) * h);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<uint16_t>(i % 3);
  std::vector<uint8_t> rgb8(rgba.begin(), rgba.end());
  TiffLayout lzw;
  lzw.compression = COMPRESSION_LZW;
  const std::vector<std::pair<std::string, Bytes>> files = {
      {"grey.png", EncodePng(w, h, PNG_COLOR_TYPE_GRAY, 8, PatternSamples(w, h, 1, 255))},
      {"grey16.png", EncodePng(w, h, PNG_COLOR_TYPE_GRAY, 16, PatternSamples(w, h, 1, 65535))},
      {"rgb.png", EncodePng(w, h, PNG_COLOR_TYPE_RGB, 8, PatternSamples(w, h, 3, 255))},
      {"rgb16 interlaced.png", EncodePng(w, h, PNG_COLOR_TYPE_RGB, 16, PatternSamples(w, h, 3, 65535), true)},
      {"rgba.png", EncodePng(w, h, PNG_COLOR_TYPE_RGB_ALPHA, 8, with_alpha)},
      {"palette.png", EncodePng(w, h, PNG_COLOR_TYPE_PALETTE, 8, idx, false, {{0, 0, 0}, {255, 0, 0}, {10, 20, 30}})},
      {"grey.pgm", EncodePnm(w, h, 1, 255, PatternSamples(w, h, 1, 255))},
      {"rgb1000.ppm", EncodePnm(w, h, 3, 1000, PatternSamples(w, h, 3, 1000))},
      {"rgb.tif", EncodeTiff(w, h, 3, rgba, lzw)},
      {"grey.tif", EncodeTiff(w, h, 1, PatternSamples(w, h, 1, 255))},
      {"rgb.jpg", EncodeJpeg(w, h, 3, rgb8, 90)},
  };
  for (const auto& [name, bytes] : files) {
    SCOPED_TRACE(name);
    ASSERT_FALSE(bytes.empty());
    GrayImage g_alone, g;
    Image8 c_alone, c;
    ASSERT_TRUE(DecodeImageGray(bytes.data(), bytes.size(), name, &g_alone).ok());
    ASSERT_TRUE(DecodeImage8(bytes.data(), bytes.size(), name, &c_alone).ok());
    const Status s = DecodeImageGrayAndColour(bytes.data(), bytes.size(), name, &g, &c);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(g.width, g_alone.width);
    EXPECT_EQ(g.height, g_alone.height);
    EXPECT_EQ(g.pixels, g_alone.pixels);  // float ==, bit for bit here
    if (name.size() > 4 && name.substr(name.size() - 4) == ".jpg") {
      EXPECT_TRUE(c.empty());
      EXPECT_TRUE(c.pixels.empty());
      continue;
    }
    EXPECT_EQ(c.width, c_alone.width);
    EXPECT_EQ(c.height, c_alone.height);
    EXPECT_EQ(c.channels, c_alone.channels);
    EXPECT_EQ(c.pixels, c_alone.pixels);
  }
  // Errors: DecodeImageGray's message, both images left as they were.
  Bytes cut = EncodePng(w, h, PNG_COLOR_TYPE_RGB, 8, PatternSamples(w, h, 3, 255));
  cut.resize(cut.size() / 2);
  GrayImage g, g_alone;
  Image8 c;
  c.width = 3;
  const Status alone = DecodeImageGray(cut.data(), cut.size(), "cut.png", &g_alone);
  const Status both = DecodeImageGrayAndColour(cut.data(), cut.size(), "cut.png", &g, &c);
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.message(), alone.message());
  EXPECT_TRUE(g.empty());
  EXPECT_EQ(c.width, 3);
  EXPECT_TRUE(c.pixels.empty());
}

TEST(ImageTest, Image8DecodesYCbCrJpegToRgb) {
  // Flat red, green and blue thirds, stored as YCbCr: RGB comes back, not the luma.
  const int w = 48, h = 16;
  std::vector<uint8_t> rgb(w * h * 3, 0);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) rgb[(y * w + x) * 3 + x / 16] = 255;
  const testing::Bytes jpeg = EncodeJpeg(w, h, 3, rgb, 95);
  Image8 im;
  ASSERT_TRUE(DecodeImage8(jpeg.data(), jpeg.size(), "thirds.jpg", &im).ok());
  ASSERT_EQ(im.channels, 3);
  for (int third = 0; third < 3; ++third) {
    const int x = third * 16 + 8, y = 8;
    for (int k = 0; k < 3; ++k)
      EXPECT_NEAR(im.pixels[(y * w + x) * 3 + k], k == third ? 255 : 0, 8) << "third " << third << " channel " << k;
  }
}

TEST(ImageTest, Image8GivesTheSameErrorsAsGrey) {
  for (const auto& entry : fs::directory_iterator(BadImagesDir())) {
    const std::string name = entry.path().filename().string();
    if (name == "README.md") continue;
    SCOPED_TRACE(name);
    GrayImage g;
    Image8 im;
    im.width = 3;
    const Status sg = ReadImageGray(entry.path().string(), &g);
    const Status s8 = ReadImage8(entry.path().string(), &im);
    ASSERT_FALSE(s8.ok());
    EXPECT_EQ(s8.code(), sg.code());
    EXPECT_EQ(s8.message(), sg.message());
    EXPECT_EQ(im.width, 3);
    EXPECT_TRUE(im.pixels.empty());
  }
}

TEST(ImageTest, WritePgmRoundTrip) {
  ScratchDir dir("write");
  GrayImage img;
  img.width = 11;
  img.height = 3;
  for (int i = 0; i < 33; ++i) img.pixels.push_back(i / 32.0f);
  for (int maxval : {255, 65535}) {
    const std::string path = dir.File("out" + std::to_string(maxval) + ".pgm");
    ASSERT_TRUE(WritePgm(path, img, maxval).ok());
    GrayImage back;
    ASSERT_TRUE(ReadImageGray(path, &back).ok());
    ASSERT_EQ(back.width, 11);
    ASSERT_EQ(back.height, 3);
    for (int i = 0; i < 33; ++i) EXPECT_NEAR(back.pixels[i], img.pixels[i], 0.5 / maxval + 1e-7);
  }
  EXPECT_FALSE(WritePgm(dir.File("nodir/x.pgm"), img).ok());
}

}  // namespace
}  // namespace tiepoint
