// io/colmap_model.h and io/reconstruction.h: COLMAP text and binary models round trip
// exactly, text -> binary -> text is byte-identical, the camera model arithmetic inverts,
// and malformed files are errors naming the file (and line or byte offset), never crashes.
#include "io/colmap_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "io/base/binary_io.h"
#include "io/reconstruction.h"
#include "tests/common/scratch_dir.h"

namespace tiepoint {
namespace {

// A small model with every camera model, awkward numbers (0.1, 1/3, -0, 1e-300, large
// ids), an image without points2D, a point with a two-element track in one image, and an
// image name with an inner space.
Reconstruction MakeModel() {
  Reconstruction rec;
  const CameraModelId models[4] = {CameraModelId::kSimplePinhole, CameraModelId::kPinhole,
                                   CameraModelId::kSimpleRadial, CameraModelId::kRadial};
  const std::vector<double> params[4] = {{1000.1, 320.5, 240.25},
                                         {900.0, 901.0 / 3, 319.5, 239.5},
                                         {1234.5678901234567, 640, 480, -0.1},
                                         {800, 400.5, 300.5, 0.01, -0.002}};
  for (int c = 0; c < 4; ++c) {
    Camera cam;
    cam.camera_id = c + 1;
    cam.model = models[c];
    cam.width = 640 + c;
    cam.height = 480 + c;
    cam.params = params[c];
    rec.cameras[cam.camera_id] = cam;
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  const uint32_t image_ids[5] = {1, 2, 7, 4000000000u, 9};
  for (int i = 0; i < 5; ++i) {
    Image im;
    im.image_id = image_ids[i];
    im.camera_id = 1 + i % 4;
    im.name = i == 3 ? "dir/with space.jpg" : "img_" + std::to_string(i) + ".png";
    double q[4] = {u(rng), u(rng), u(rng), u(rng)};
    const double n = std::sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
    for (int k = 0; k < 4; ++k) im.qvec[k] = q[k] / n;
    im.tvec[0] = 0.1;
    im.tvec[1] = -0.0;
    im.tvec[2] = 1e-300 * (i + 1);
    if (i != 4) {  // image 9 has no points2D
      for (int k = 0; k < 6; ++k) {
        Point2D p;
        p.x = 100 * u(rng) + 320;
        p.y = 1.0 / 3 + k;
        im.points2D.push_back(p);
      }
    }
    rec.images[im.image_id] = im;
  }
  // Points: each seen by points2D k of images 1, 2, 7, 4000000000.
  const uint64_t point_ids[4] = {5, 1ull << 40, 17, 3};
  for (int k = 0; k < 4; ++k) {
    Point3D pt;
    pt.xyz[0] = u(rng);
    pt.xyz[1] = u(rng) * 1e6;
    pt.xyz[2] = 3 + u(rng);
    pt.rgb[0] = static_cast<uint8_t>(k * 80);
    pt.rgb[1] = 255;
    pt.rgb[2] = 0;
    pt.error = k == 2 ? -1 : 0.25 + k;
    for (uint32_t id : {1u, 2u, 7u, 4000000000u}) {
      pt.track.push_back({id, static_cast<uint32_t>(k)});
      rec.images[id].points2D[k].point3D_id = point_ids[k];
    }
    rec.points3D[point_ids[k]] = pt;
  }
  // Two observations of point 3 in image 7 (points2D 3 and 5).
  rec.points3D[3].track.push_back({7, 5});
  rec.images[7].points2D[5].point3D_id = 3;
  // A point with an empty track (COLMAP allows it; its line ends "ERROR ").
  Point3D lonely;
  lonely.xyz[2] = 2;
  rec.points3D[99] = lonely;
  return rec;
}

void ExpectSameModel(const Reconstruction& a, const Reconstruction& b) {
  ASSERT_EQ(a.cameras.size(), b.cameras.size());
  for (const auto& [id, ca] : a.cameras) {
    const Camera& cb = b.cameras.at(id);
    EXPECT_EQ(ca.camera_id, cb.camera_id);
    EXPECT_EQ(ca.model, cb.model);
    EXPECT_EQ(ca.width, cb.width);
    EXPECT_EQ(ca.height, cb.height);
    EXPECT_EQ(ca.params, cb.params);
  }
  ASSERT_EQ(a.images.size(), b.images.size());
  for (const auto& [id, ia] : a.images) {
    const Image& ib = b.images.at(id);
    EXPECT_EQ(ia.image_id, ib.image_id);
    EXPECT_EQ(ia.camera_id, ib.camera_id);
    EXPECT_EQ(ia.name, ib.name);
    EXPECT_EQ(0, std::memcmp(ia.qvec, ib.qvec, sizeof(ia.qvec))) << "image " << id;
    EXPECT_EQ(0, std::memcmp(ia.tvec, ib.tvec, sizeof(ia.tvec))) << "image " << id;
    ASSERT_EQ(ia.points2D.size(), ib.points2D.size());
    for (size_t k = 0; k < ia.points2D.size(); ++k) {
      EXPECT_EQ(ia.points2D[k].x, ib.points2D[k].x);
      EXPECT_EQ(ia.points2D[k].y, ib.points2D[k].y);
      EXPECT_EQ(ia.points2D[k].point3D_id, ib.points2D[k].point3D_id);
    }
  }
  ASSERT_EQ(a.points3D.size(), b.points3D.size());
  for (const auto& [id, pa] : a.points3D) {
    const Point3D& pb = b.points3D.at(id);
    EXPECT_EQ(0, std::memcmp(pa.xyz, pb.xyz, sizeof(pa.xyz))) << "point " << id;
    EXPECT_EQ(0, std::memcmp(pa.rgb, pb.rgb, sizeof(pa.rgb)));
    EXPECT_EQ(pa.error, pb.error);
    ASSERT_EQ(pa.track.size(), pb.track.size());
    for (size_t k = 0; k < pa.track.size(); ++k) {
      EXPECT_EQ(pa.track[k].image_id, pb.track[k].image_id);
      EXPECT_EQ(pa.track[k].point2D_idx, pb.track[k].point2D_idx);
    }
  }
}

struct Files {
  std::string cameras, images, points3D;
};

Files WriteText(const Reconstruction& rec) {
  std::ostringstream c, i, p;
  const Status s = WriteColmapModelText(rec, c, i, p);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return {c.str(), i.str(), p.str()};
}

Files WriteBinary(const Reconstruction& rec) {
  std::ostringstream c, i, p;
  const Status s = WriteColmapModelBinary(rec, c, i, p);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return {c.str(), i.str(), p.str()};
}

Status ReadText(const Files& f, Reconstruction* rec) {
  std::istringstream c(f.cameras), i(f.images), p(f.points3D);
  return ReadColmapModelText(c, i, p, "model", rec);
}

Status ReadBinary(const Files& f, Reconstruction* rec) {
  std::istringstream c(f.cameras), i(f.images), p(f.points3D);
  return ReadColmapModelBinary(c, i, p, "model", rec);
}

TEST(ColmapModel, TextRoundTripIsExact) {
  const Reconstruction rec = MakeModel();
  const Files text = WriteText(rec);
  Reconstruction back;
  const Status s = ReadText(text, &back);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectSameModel(rec, back);
  EXPECT_EQ(WriteText(back).images, text.images);
}

TEST(ColmapModel, BinaryRoundTripIsExact) {
  const Reconstruction rec = MakeModel();
  const Files bin = WriteBinary(rec);
  Reconstruction back;
  const Status s = ReadBinary(bin, &back);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectSameModel(rec, back);
}

// The fisheye models COLMAP writes (OPENCV_FISHEYE 5, SIMPLE_RADIAL_FISHEYE 8,
// RADIAL_FISHEYE 9, THIN_PRISM_FISHEYE 10) and FULL_OPENCV (6) and FOV (7) go through both
// formats unchanged, with their ids and names.
TEST(ColmapModel, FisheyeAndOtherCamerasRoundTrip) {
  const std::pair<CameraModelId, std::vector<double>> cams[] = {
      {CameraModelId::kOpenCVFisheye, {500.25, 501.5, 320, 240, 0.03, -0.02, 0.004, -1e-300}},
      {CameraModelId::kSimpleRadialFisheye, {450.5, 319.5, 239.5, 1.0 / 3}},
      {CameraModelId::kRadialFisheye, {450.5, 319.5, 239.5, 0.05, -0.01}},
      {CameraModelId::kFullOpenCV, {500.25, 501.5, 320, 240, -0.1, 0.02, 1e-3, -2e-3, 0.001, 0.05, -0.01, 1.0 / 7}},
      {CameraModelId::kFov, {500.25, 501.5, 320, 240, 0.9}},
      {CameraModelId::kThinPrismFisheye, {500.25, 501.5, 320, 240, 0.03, -0.02, 1e-3, -2e-3, 0.004, -0.001, 3e-4, -5e-4}}};
  for (const auto& [model, params] : cams) {
    SCOPED_TRACE(CameraModelName(model));
    Reconstruction rec = MakeModel();
    rec.cameras.at(3).model = model;
    rec.cameras.at(3).params = params;
    const Files text = WriteText(rec), bin = WriteBinary(rec);
    EXPECT_NE(text.cameras.find(std::string("3 ") + CameraModelName(model) + " 642 482 "), std::string::npos)
        << text.cameras;
    Reconstruction back_text, back_bin;
    ASSERT_TRUE(ReadText(text, &back_text).ok());
    ASSERT_TRUE(ReadBinary(bin, &back_bin).ok());
    ExpectSameModel(rec, back_text);
    ExpectSameModel(rec, back_bin);
    EXPECT_EQ(WriteText(back_bin).cameras, text.cameras);
  }
}

TEST(ColmapModel, TextToBinaryToTextIsByteIdentical) {
  const Files text = WriteText(MakeModel());
  Reconstruction a, b;
  ASSERT_TRUE(ReadText(text, &a).ok());
  const Files bin = WriteBinary(a);
  ASSERT_TRUE(ReadBinary(bin, &b).ok());
  const Files text2 = WriteText(b);
  EXPECT_EQ(text.cameras, text2.cameras);
  EXPECT_EQ(text.images, text2.images);
  EXPECT_EQ(text.points3D, text2.points3D);
  // And binary -> text -> binary.
  Reconstruction c;
  ASSERT_TRUE(ReadText(text2, &c).ok());
  const Files bin2 = WriteBinary(c);
  EXPECT_EQ(bin.cameras, bin2.cameras);
  EXPECT_EQ(bin.images, bin2.images);
  EXPECT_EQ(bin.points3D, bin2.points3D);
}

// The exact bytes COLMAP 3.8 writes for a one-camera, one-image, one-point model (its
// writers print reals with precision(17) and join fields by single spaces).
TEST(ColmapModel, TextMatchesColmapLayout) {
  Reconstruction rec;
  Camera cam;
  cam.camera_id = 1;
  cam.model = CameraModelId::kSimpleRadial;
  cam.width = 640;
  cam.height = 480;
  cam.params = {500, 320, 240.5, 0.1};
  rec.cameras[1] = cam;
  Image im;
  im.image_id = 3;
  im.camera_id = 1;
  im.name = "a.jpg";
  im.tvec[2] = 1.5;
  im.points2D = {{10.25, 20, kInvalidPoint3DId}, {30, 40.5, 8}};
  rec.images[3] = im;
  Point3D pt;
  pt.xyz[0] = 0.1;
  pt.xyz[2] = 2;
  pt.rgb[0] = 1;
  pt.rgb[1] = 2;
  pt.rgb[2] = 3;
  pt.error = 0.5;
  pt.track = {{3, 1}};
  rec.points3D[8] = pt;
  const Files f = WriteText(rec);
  EXPECT_EQ(f.cameras,
            "# Camera list with one line of data per camera:\n"
            "#   CAMERA_ID, MODEL, WIDTH, HEIGHT, PARAMS[]\n"
            "# Number of cameras: 1\n"
            "1 SIMPLE_RADIAL 640 480 500 320 240.5 0.10000000000000001\n");
  EXPECT_EQ(f.images,
            "# Image list with two lines of data per image:\n"
            "#   IMAGE_ID, QW, QX, QY, QZ, TX, TY, TZ, CAMERA_ID, NAME\n"
            "#   POINTS2D[] as (X, Y, POINT3D_ID)\n"
            "# Number of images: 1, mean observations per image: 1\n"
            "3 1 0 0 0 0 0 1.5 1 a.jpg\n"
            "10.25 20 -1 30 40.5 8\n");
  EXPECT_EQ(f.points3D,
            "# 3D point list with one line of data per point:\n"
            "#   POINT3D_ID, X, Y, Z, R, G, B, ERROR, TRACK[] as (IMAGE_ID, POINT2D_IDX)\n"
            "# Number of points: 1, mean track length: 1\n"
            "8 0.10000000000000001 0 2 1 2 3 0.5 3 1\n");
  // Binary: sizes from the layout (8 + 48 + 4 bytes), (8 + 4 + 56 + 4 + 6 + 8 + 2 * 24),
  // (8 + 8 + 24 + 3 + 8 + 8 + 8), and a few fields at their offsets.
  const Files b = WriteBinary(rec);
  ASSERT_EQ(b.cameras.size(), 8u + 4 + 4 + 8 + 8 + 4 * 8);
  ASSERT_EQ(b.images.size(), 8u + 4 + 56 + 4 + 6 + 8 + 2 * 24);
  ASSERT_EQ(b.points3D.size(), 8u + 8 + 24 + 3 + 8 + 8 + 8);
  auto bytes = [](const std::string& s) {
    return reinterpret_cast<const unsigned char*>(s.data());
  };
  EXPECT_EQ(GetU64(bytes(b.cameras)), 1u);
  EXPECT_EQ(GetU32(bytes(b.cameras) + 8), 1u);   // camera_id
  EXPECT_EQ(GetU32(bytes(b.cameras) + 12), 2u);  // SIMPLE_RADIAL
  EXPECT_EQ(GetU64(bytes(b.cameras) + 16), 640u);
  EXPECT_EQ(GetF64(bytes(b.cameras) + 32 + 24), 0.1);
  EXPECT_EQ(std::string(b.images.data() + 8 + 4 + 56 + 4), "a.jpg");
  EXPECT_EQ(GetU64(bytes(b.images) + 8 + 4 + 56 + 4 + 6 + 8 + 16), kInvalidPoint3DId);
  EXPECT_EQ(GetU64(bytes(b.points3D) + 8), 8u);
  EXPECT_EQ(static_cast<unsigned char>(b.points3D[8 + 8 + 24 + 2]), 3);
  EXPECT_EQ(GetU32(bytes(b.points3D) + 8 + 8 + 24 + 3 + 8 + 8 + 4), 1u);  // point2D_idx
}

TEST(ColmapModel, DirectoryReadPrefersBinaryAndWritesAtomically) {
  testing::ScratchDir dir("colmap_model_dir");
  const Reconstruction rec = MakeModel();
  const std::string model = dir.path() + "/sparse/0";
  ASSERT_TRUE(WriteColmapModel(model, rec, ColmapFormat::kText).ok());
  Reconstruction back;
  Status s = ReadColmapModel(model, &back);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectSameModel(rec, back);
  ASSERT_TRUE(WriteColmapModel(model, rec, ColmapFormat::kBinary).ok());
  // Spoil the text files: the reader must take the binary ones.
  std::ofstream(model + "/points3D.txt") << "garbage\n";
  s = ReadColmapModel(model, &back);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectSameModel(rec, back);
  s = ReadColmapModel(model, ColmapFormat::kText, &back);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find("sparse/0/points3D.txt:1:"), std::string::npos) << s.message();
  EXPECT_TRUE(back.points3D.empty());
  // No temporaries left behind.
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(model)) {
    names.push_back(e.path().filename().string());
  }
  EXPECT_EQ(names.size(), 6u);
  // A missing model and a missing directory are I/O errors naming the directory.
  s = ReadColmapModel(dir.path(), &back);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find(dir.path()), std::string::npos);
  s = ReadColmapModel(dir.path() + "/nope", &back);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  // An inconsistent model writes nothing.
  Reconstruction bad = rec;
  bad.images[1].points2D[0].point3D_id = 12345;
  s = WriteColmapModel(dir.path() + "/bad", bad, ColmapFormat::kBinary);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find("12345"), std::string::npos) << s.message();
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/bad/images.bin"));
}

TEST(ColmapModel, WriterRejectsInconsistentModels) {
  struct Case {
    const char* name;
    void (*spoil)(Reconstruction*);
    const char* expect;
  };
  const Case cases[] = {
      {"track names a missing image",
       [](Reconstruction* r) { r->points3D[5].track[0].image_id = 77; }, "image 77 is not in"},
      {"track index out of range",
       [](Reconstruction* r) { r->points3D[5].track[0].point2D_idx = 60; }, "has only 6 points2D"},
      {"point2D not in the track",
       [](Reconstruction* r) {
         r->images[9].points2D = {{1, 2, 5}};
       },
       "does not hold (9, 0)"},
      {"missing camera", [](Reconstruction* r) { r->images[1].camera_id = 50; }, "camera 50"},
      {"wrong parameter count", [](Reconstruction* r) { r->cameras[1].params.push_back(0); },
       "has 3 parameters, not 4"},
      {"NaN point", [](Reconstruction* r) { r->points3D[5].xyz[1] = std::nan(""); }, "not finite"},
      {"name with newline", [](Reconstruction* r) { r->images[1].name = "a\nb"; }, "line break"},
      {"duplicate name", [](Reconstruction* r) { r->images[2].name = r->images[1].name; },
       "has the name"},
      {"id mismatch", [](Reconstruction* r) { r->images[2].image_id = 3; }, "has image_id 3"},
  };
  for (const Case& c : cases) {
    Reconstruction rec = MakeModel();
    c.spoil(&rec);
    std::ostringstream a, b, d;
    const Status s = WriteColmapModelText(rec, a, b, d);
    EXPECT_EQ(s.code(), StatusCode::kInvalidInput) << c.name;
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << c.name << ": " << s.message();
    EXPECT_TRUE(a.str().empty()) << c.name;
  }
}

// --- malformed text ------------------------------------------------------------------------

const char kCameras[] = "1 PINHOLE 640 480 500 501 320 240\n";
const char kImages[] =
    "# Number of images: 2, mean observations per image: 1\n"
    "1 1 0 0 0 0 0 0 1 a.png\n"
    "10 20 7 30 40 -1\n"
    "2 1 0 0 0 1 0 0 1 b.png\n"
    "11 21 7\n";
const char kPoints[] = "7 0 0 5 255 0 0 0.5 1 0 2 0\n";

TEST(ColmapModel, BaseTextSampleReads) {
  Reconstruction rec;
  const Status s = ReadText({kCameras, kImages, kPoints}, &rec);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(rec.NumObservations(), 2);
  EXPECT_EQ(rec.MeanTrackLength(), 2.0);
  EXPECT_EQ(rec.MeanPointError(), 0.5);
}

TEST(ColmapModel, MalformedTextNamesFileAndLine) {
  struct Case {
    std::string cameras, images, points, expect;
  };
  const std::string c = kCameras, i = kImages, p = kPoints;
  const std::vector<Case> cases = {
      {"1 PINHOLE 640 480 500 501 320\n", i, p, "model/cameras.txt:1: camera 1: PINHOLE has 4"},
      {"1 RAD_TAN_THIN_PRISM_FISHEYE 640 480 1 2 3 4 0 0 0 0 0 0 0 0 0 0 0 0\n", i, p,
       "cameras.txt:1: camera model 'RAD_TAN_THIN_PRISM_FISHEYE' is a COLMAP model"},
      {"1 FULL_OPENCV 640 480 500 501 320 240 0.1 0.01 0 0\n", i, p, "camera 1: FULL_OPENCV has 12 parameters, not 8"},
      {"1 OPENCV 640 480 500 501 320 240 0.1 0.01\n", i, p, "camera 1: OPENCV has 8 parameters, not 6"},
      {"1 FISHEYE 640 480 1 2 3\n", i, p, "cameras.txt:1: camera model 'FISHEYE' is a COLMAP model"},
      {"1 FISHEYES 640 480 1 2 3\n", i, p, "cameras.txt:1: camera model 'FISHEYES' is unknown"},
      {"1 PINHOLE 640 480 500 nan 320 240\n", i, p, "cameras.txt:1: parameter 2 'nan'"},
      {"1 PINHOLE -640 480 500 501 320 240\n", i, p, "cameras.txt:1: camera 1: width and height"},
      {"# Number of cameras: 1\n" + c + c, i, p, "cameras.txt:3: camera 1 appears twice"},
      {"# Number of cameras: 2\n" + c, i, p, "cameras.txt:1: the header says 2 cameras"},
      {c, "1 1 0 0 0 0 0 0 1 a.png\n10 20 7 30 40 -1\n2 1 0 0 0 1 0 0 1 b.png\n", p,
       "images.txt:3: image 2 has no POINTS2D line"},
      {c, "1 1 0 0 0 0 0 0 1 a.png\n10 20 7 30 40\n2 1 0 0 0 1 0 0 1 b.png\n11 21 7\n", p,
       "images.txt:2: POINTS2D of image 1: 5 fields"},
      {c, "1 1 0 0 0 0 0 0 1\n\n", p, "images.txt:1: expected 'IMAGE_ID"},
      {c, "1 1 0 0 0 inf 0 0 1 a.png\n\n", p, "images.txt:1: translation field 1 'inf'"},
      {c, "1 0 0 0 0 0 0 0 1 a.png\n\n", p, "images.txt:1: image 1: the quaternion is zero"},
      {c, "1 1 0 0 0 0 0 0 1 a.png\n1e999 20 -1\n", p, "images.txt:2: point2D 0 of image 1"},
      {c, "1 1 0 0 0 0 0 0 1 a.png\n10 20 x\n", p,
       "images.txt:2: point2D 0 of image 1: POINT3D_ID 'x'"},
      {c, "1 1 0 0 0 0 0 0 1 a.png\n\n1 1 0 0 0 0 0 0 1 b.png\n\n", p + "",
       "images.txt:3: image 1 appears twice"},
      {c, "1 1 0 0 0 0 0 0 1 a.png\n\n2 1 0 0 0 0 0 0 1 a.png\n\n", "",
       "images.txt:3: image 2 has the name 'a.png' of image 1"},
      {c, "1 1 0 0 0 0 0 0 9 a.png\n\n", "",
       "images.txt:1: image 1 names camera 9, which is not in model/cameras.txt"},
      {c, i, "7 0 0 5 255 0 0 0.5 1 0 2\n", "points3D.txt:1: expected 'POINT3D_ID"},
      {c, i, "7 0 0 5 256 0 0 0.5 1 0 2 0\n", "points3D.txt:1: point3D 7: R '256'"},
      {c, i, "7 0 nan 5 255 0 0 0.5 1 0 2 0\n", "points3D.txt:1: point3D 7: Y 'nan'"},
      {c, i, "7 0 0 5 255 0 0 0.5 1 0 3 0\n",
       "points3D.txt:1: point3D 7, track element (3, 0): image 3 is not in"},
      {c, i, "7 0 0 5 255 0 0 0.5 1 0 2 5\n",
       "points3D.txt:1: point3D 7, track element (2, 5): image 2 has only 1"},
      {c, i, "7 0 0 5 255 0 0 0.5 1 0 2 0 1 0\n",
       "track element (1, 0): that point2D is in a track twice"},
      {c, i, "7 0 0 5 255 0 0 0.5 1 0 2 0 1 1\n",
       "track element (1, 1): that point2D names no point3D (-1)"},
      {c, i, "7 0 0 5 255 0 0 0.5 1 0\n",
       "images.txt:4: image 2, point2D 0: names point3D 7, whose track"},
      {c, i, "",
       "images.txt:2: image 1, point2D 0: names point3D 7, which is not in model/points3D.txt"},
      {c, i, p + p, "points3D.txt:2: point3D 7 appears twice"},
      {c, i, "# Number of points: 3, mean track length: 2\n" + p,
       "points3D.txt:1: the header says 3 points"},
  };
  for (const Case& k : cases) {
    Reconstruction rec;
    const Status s = ReadText({k.cameras, k.images, k.points}, &rec);
    EXPECT_EQ(s.code(), StatusCode::kInvalidInput) << k.expect;
    EXPECT_NE(s.message().find(k.expect), std::string::npos)
        << "expected '" << k.expect << "' in: " << s.message();
    EXPECT_NE(s.message().find("model/"), std::string::npos) << s.message();
    EXPECT_TRUE(rec.cameras.empty() && rec.images.empty() && rec.points3D.empty());
  }
}

// Every prefix of valid text files (a truncation at any byte) is read or rejected, never a
// crash; a prefix that reads is a valid model.
TEST(ColmapModel, TruncatedTextNeverCrashes) {
  const Files f = WriteText(MakeModel());
  int errors = 0;
  for (size_t n = 0; n < f.images.size(); n += 7) {
    Reconstruction rec;
    const Status s = ReadText({f.cameras, f.images.substr(0, n), f.points3D}, &rec);
    if (!s.ok()) {
      ++errors;
      EXPECT_NE(s.message().find("model/"), std::string::npos);
    } else {
      EXPECT_TRUE(CheckColmapModel(rec).ok());
    }
  }
  EXPECT_GT(errors, 0);
}

// --- malformed binary ----------------------------------------------------------------------

void PatchU64(std::string* s, size_t at, uint64_t v) {
  PutU64(v, reinterpret_cast<unsigned char*>(&(*s)[at]));
}
void PatchU32(std::string* s, size_t at, uint32_t v) {
  PutU32(v, reinterpret_cast<unsigned char*>(&(*s)[at]));
}
void PatchF64(std::string* s, size_t at, double v) {
  PutF64(v, reinterpret_cast<unsigned char*>(&(*s)[at]));
}

TEST(ColmapModel, MalformedBinaryNamesFileOffsetAndField) {
  const Files good = WriteBinary(MakeModel());
  // Offsets in MakeModel's files: camera 1 starts at 8; image 1 at 8 (name at 8+4+56+4);
  // point 3 (the lowest id) at 8.
  static constexpr size_t kImageName = 8 + 4 + 56 + 4;
  static constexpr size_t kImagePoints = kImageName + sizeof("img_0.png");
  struct Case {
    const char* file;  // "cameras", "images", "points3D"
    void (*spoil)(std::string*);
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"cameras", [](std::string* s) { s->resize(s->size() - 3); }, "cameras.bin: byte"},
      {"cameras", [](std::string* s) { PatchU64(s, 0, 1ull << 60); },
       "cameras.bin: byte 0: header, camera count: 1152921504606846976 records"},
      {"cameras", [](std::string* s) { PatchU32(s, 12, 11); },
       "cameras.bin: byte 12: camera record 0 of 4 (camera 1), model_id: camera model id 11 "
       "(COLMAP's RAD_TAN_THIN_PRISM_FISHEYE)"},
      {"cameras", [](std::string* s) { PatchU32(s, 12, 0xffffffffu); },
       "camera model id -1 is unknown"},
      {"cameras", [](std::string* s) { PatchU64(s, 16, 0); },
       "byte 16: camera record 0 of 4 (camera 1), width/height"},
      {"cameras", [](std::string* s) { PatchF64(s, 32, std::nan("")); },
       "byte 32: camera record 0 of 4 (camera 1), params[0]: not a finite"},
      {"cameras", [](std::string* s) { PatchU32(s, 12, 3); },  // RADIAL: two params too many
       "cameras.bin: byte"},
      {"cameras", [](std::string* s) { s->push_back('x'); }, "1 bytes after the last record"},
      {"images", [](std::string* s) { PatchU64(s, 0, ~0ull); },
       "images.bin: byte 0: header, image count"},
      {"images",
       [](std::string* s) {
         PatchU64(s, 0, 1);
         s->resize(kImageName + 9);
       },
       "images.bin: byte 72: image record 0 of 1 (image 1), name: no terminating NUL"},
      {"images", [](std::string* s) { PatchU64(s, kImagePoints, 1ull << 61); },
       "image record 0 of 5 (image 1), num_points2D: 2305843009213693952 records of at least 24"},
      {"images", [](std::string* s) { PatchF64(s, 12, std::numeric_limits<double>::infinity()); },
       "byte 12: image record 0 of 5 (image 1), qw: not a finite number"},
      {"images",
       [](std::string* s) {
         for (int k = 0; k < 4; ++k) PatchF64(s, 12 + 8 * k, 0);
       },
       "image 1: the quaternion is zero"},
      {"images", [](std::string* s) { PatchU32(s, 8 + 4 + 56, 77); }, "image 1 names camera 77"},
      {"images", [](std::string* s) { PatchU64(s, kImagePoints + 8 + 4 * 24 + 16, 123); },
       "image 1, point2D 4: names point3D 123, which is not in model/points3D.bin"},
      {"images", [](std::string* s) { s->resize(s->size() - 1); }, "truncated"},
      {"points3D", [](std::string* s) { PatchU64(s, 0, 1ull << 59); },
       "points3D.bin: byte 0: header, point count"},
      {"points3D", [](std::string* s) { PatchU64(s, 8 + 8 + 24 + 3 + 8, 1ull << 62); },
       "points3D.bin: byte 51: point3D record 0 of 5 (point3D 3), track length"},
      {"points3D",
       [](std::string* s) { PatchF64(s, 16, -std::numeric_limits<double>::infinity()); },
       "byte 16: point3D record 0 of 5 (point3D 3), x: not a finite"},
      {"points3D", [](std::string* s) { PatchU32(s, 8 + 8 + 24 + 3 + 8 + 8, 8); },
       "point3D 3, track element (8, 3): image 8 is not in model/images.bin"},
      {"points3D", [](std::string* s) { PatchU32(s, 8 + 8 + 24 + 3 + 8 + 8 + 4, 6); },
       "point3D 3, track element (1, 6): image 1 has only 6 points2D"},
      {"points3D", [](std::string* s) { PatchU64(s, 8, 5); }, "point3D 5 appears twice"},
      {"points3D", [](std::string* s) { PatchU64(s, 8, ~0ull); }, "reserved"},
  };
  for (const Case& k : cases) {
    Files f = good;
    std::string* target = std::string(k.file) == "cameras"  ? &f.cameras
                          : std::string(k.file) == "images" ? &f.images
                                                            : &f.points3D;
    k.spoil(target);
    Reconstruction rec;
    const Status s = ReadBinary(f, &rec);
    EXPECT_EQ(s.code(), StatusCode::kInvalidInput) << k.expect;
    EXPECT_NE(s.message().find(k.expect), std::string::npos)
        << "expected '" << k.expect << "' in: " << s.message();
    EXPECT_NE(s.message().find("model/"), std::string::npos) << s.message();
    EXPECT_TRUE(rec.images.empty());
  }
}

// Every truncation and single-byte corruption of the binary files is an error or a valid
// model, never a crash or a huge allocation.
TEST(ColmapModel, CorruptBinaryNeverCrashes) {
  const Files good = WriteBinary(MakeModel());
  std::mt19937 rng(3);
  int errors = 0;
  for (int which = 0; which < 3; ++which) {
    const std::string& src = which == 0 ? good.cameras : which == 1 ? good.images : good.points3D;
    for (size_t n = 0; n < src.size(); n += 5) {
      Files f = good;
      std::string& t = which == 0 ? f.cameras : which == 1 ? f.images : f.points3D;
      t = src.substr(0, n);
      Reconstruction rec;
      errors += !ReadBinary(f, &rec).ok();
    }
    for (int trial = 0; trial < 300; ++trial) {
      Files f = good;
      std::string& t = which == 0 ? f.cameras : which == 1 ? f.images : f.points3D;
      t[rng() % t.size()] = static_cast<char>(rng());
      Reconstruction rec;
      const Status s = ReadBinary(f, &rec);
      if (s.ok()) {
        const Status check = CheckColmapModel(rec);
        EXPECT_TRUE(check.ok()) << check.ToString();
      } else {
        ++errors;
      }
    }
  }
  EXPECT_GT(errors, 100);
}

// --- camera models and rotations -------------------------------------------------------------

TEST(CameraModel, NamesIdsAndParameterCounts) {
  const std::pair<CameraModelId, int> expect[] = {{CameraModelId::kSimplePinhole, 3},
                                                  {CameraModelId::kPinhole, 4},
                                                  {CameraModelId::kSimpleRadial, 4},
                                                  {CameraModelId::kRadial, 5},
                                                  {CameraModelId::kOpenCV, 8},
                                                  {CameraModelId::kOpenCVFisheye, 8},
                                                  {CameraModelId::kSimpleRadialFisheye, 4},
                                                  {CameraModelId::kRadialFisheye, 5},
                                                  {CameraModelId::kFullOpenCV, 12},
                                                  {CameraModelId::kFov, 5},
                                                  {CameraModelId::kThinPrismFisheye, 12}};
  for (const auto& [model, n] : expect) {
    EXPECT_EQ(CameraModelNumParams(model), n);
    CameraModelId back;
    ASSERT_TRUE(CameraModelFromName(CameraModelName(model), &back).ok());
    EXPECT_EQ(back, model);
    std::string lower = CameraModelName(model);
    for (char& c : lower) c = static_cast<char>(std::tolower(c));
    ASSERT_TRUE(CameraModelFromName(lower, &back).ok());
    EXPECT_EQ(back, model);
    ASSERT_TRUE(CameraModelFromId(static_cast<int>(model), &back));
    EXPECT_EQ(back, model);
  }
  CameraModelId m;
  // COLMAP 3.8's models are all there; later COLMAP's (RAD_TAN_THIN_PRISM_FISHEYE, 11, on)
  // are not.
  const Status s = CameraModelFromName("RAD_TAN_THIN_PRISM_FISHEYE", &m);
  EXPECT_EQ(s.code(), StatusCode::kInvalidOptions);
  EXPECT_NE(s.message().find("simple_radial"), std::string::npos);
  EXPECT_FALSE(CameraModelFromName("Simple_Radial", &m).ok());
  EXPECT_NE(s.message().find("thin_prism_fisheye"), std::string::npos);
  // COLMAP's ids: OPENCV_FISHEYE 5, FULL_OPENCV 6, FOV 7, SIMPLE_RADIAL_FISHEYE 8,
  // RADIAL_FISHEYE 9, THIN_PRISM_FISHEYE 10.
  EXPECT_EQ(static_cast<int>(CameraModelId::kOpenCVFisheye), 5);
  EXPECT_EQ(static_cast<int>(CameraModelId::kFullOpenCV), 6);
  EXPECT_EQ(static_cast<int>(CameraModelId::kFov), 7);
  EXPECT_EQ(static_cast<int>(CameraModelId::kSimpleRadialFisheye), 8);
  EXPECT_EQ(static_cast<int>(CameraModelId::kRadialFisheye), 9);
  EXPECT_EQ(static_cast<int>(CameraModelId::kThinPrismFisheye), 10);
  for (int id : {11, 12, -1}) EXPECT_FALSE(CameraModelFromId(id, &m)) << id;
  EXPECT_STREQ(CameraModelName(CameraModelId::kOpenCVFisheye), "OPENCV_FISHEYE");
  EXPECT_EQ(CameraModelParamNames(CameraModelId::kOpenCVFisheye), "fx,fy,cx,cy,k1,k2,k3,k4");
  EXPECT_EQ(CameraModelParamNames(CameraModelId::kFullOpenCV), "fx,fy,cx,cy,k1,k2,p1,p2,k3,k4,k5,k6");
  EXPECT_EQ(CameraModelParamNames(CameraModelId::kFov), "fx,fy,cx,cy,omega");
  EXPECT_EQ(CameraModelParamNames(CameraModelId::kThinPrismFisheye), "fx,fy,cx,cy,k1,k2,p1,p2,k3,k4,sx1,sy1");
  for (CameraModelId two : {CameraModelId::kFullOpenCV, CameraModelId::kFov, CameraModelId::kThinPrismFisheye}) {
    EXPECT_TRUE(CameraModelHasTwoFocals(two));
    EXPECT_EQ(CameraModelDistortionBegin(two), 4);
    EXPECT_FALSE(CameraModelIsFisheye(two));
  }
  EXPECT_TRUE(CameraModelHasLaterDistortionTerms(CameraModelId::kFullOpenCV));
  EXPECT_TRUE(CameraModelHasLaterDistortionTerms(CameraModelId::kThinPrismFisheye));
  EXPECT_FALSE(CameraModelHasLaterDistortionTerms(CameraModelId::kFov));
  Camera pinhole;
  pinhole.model = CameraModelId::kPinhole;
  pinhole.params = {100, 200, 3, 4};
  EXPECT_EQ(pinhole.MeanFocal(), 150);
  // The accessors and setters read and write each model's own parameter layout.
  Camera opencv;
  opencv.model = CameraModelId::kOpenCV;
  opencv.params = {100, 200, 3, 4, 0.1, 0.2, 0.3, 0.4};
  EXPECT_EQ(opencv.MeanFocal(), 150);
  EXPECT_EQ(opencv.fy(), 200);
  EXPECT_EQ(opencv.cx(), 3);
  EXPECT_EQ(opencv.cy(), 4);
  opencv.SetPrincipalPoint(30, 40);
  opencv.SetFocal(500);
  EXPECT_EQ(opencv.params, (std::vector<double>{500, 500, 30, 40, 0.1, 0.2, 0.3, 0.4}));
  EXPECT_EQ(CameraModelDistortionBegin(CameraModelId::kOpenCV), 4);
  EXPECT_TRUE(opencv.HasDistortion());
  EXPECT_FALSE(pinhole.HasDistortion());
  Camera radial;
  radial.model = CameraModelId::kRadial;
  radial.params = {800, 320, 240, 0.1, 0.2};
  radial.SetPrincipalPoint(1, 2);
  EXPECT_EQ(radial.params, (std::vector<double>{800, 1, 2, 0.1, 0.2}));
  EXPECT_EQ(CameraModelDistortionBegin(CameraModelId::kRadial), 3);
  Camera fisheye;
  fisheye.model = CameraModelId::kOpenCVFisheye;
  fisheye.params = {100, 200, 3, 4, 0.1, 0.2, 0.3, 0.4};
  EXPECT_EQ(fisheye.fy(), 200);
  EXPECT_EQ(fisheye.cy(), 4);
  EXPECT_EQ(CameraModelDistortionBegin(fisheye.model), 4);
  EXPECT_EQ(CameraModelDistortionBegin(CameraModelId::kSimpleRadialFisheye), 3);
  EXPECT_EQ(CameraModelDistortionBegin(CameraModelId::kRadialFisheye), 3);
  EXPECT_TRUE(CameraModelIsFisheye(CameraModelId::kRadialFisheye));
  EXPECT_FALSE(CameraModelIsFisheye(CameraModelId::kOpenCV));
}

// The fisheye models are COLMAP's: the ray at angle theta from the axis lands at the
// normalized radius theta (1 + k1 theta^2 + ...) (equidistant when every k is 0), and
// FisheyeDistortion's Jacobians are its derivatives (central differences).
TEST(CameraModel, FisheyeModelsProjectAsColmapDefinesThem) {
  const double theta = 0.7, phi = 0.4;  // 40 degrees off axis
  const double u = std::tan(theta) * std::cos(phi), v = std::tan(theta) * std::sin(phi);
  const double k[4] = {0.05, -0.02, 0.004, -0.001};
  const double t2 = theta * theta;
  const double td4 = theta * (1 + k[0] * t2 + k[1] * t2 * t2 + k[2] * t2 * t2 * t2 + k[3] * t2 * t2 * t2 * t2);
  const double td1 = theta * (1 + k[0] * t2);
  const double td2 = theta * (1 + k[0] * t2 + k[1] * t2 * t2);
  double x, y;
  const double ocv[8] = {500, 510, 320, 240, k[0], k[1], k[2], k[3]};
  CameraNormalizedToPixel(CameraModelId::kOpenCVFisheye, ocv, u, v, &x, &y);
  EXPECT_NEAR(x, 500 * td4 * std::cos(phi) + 320, 1e-9);
  EXPECT_NEAR(y, 510 * td4 * std::sin(phi) + 240, 1e-9);
  const double srf[4] = {500, 320, 240, k[0]};
  CameraNormalizedToPixel(CameraModelId::kSimpleRadialFisheye, srf, u, v, &x, &y);
  EXPECT_NEAR(x, 500 * td1 * std::cos(phi) + 320, 1e-9);
  EXPECT_NEAR(y, 500 * td1 * std::sin(phi) + 240, 1e-9);
  const double rf[5] = {500, 320, 240, k[0], k[1]};
  CameraNormalizedToPixel(CameraModelId::kRadialFisheye, rf, u, v, &x, &y);
  EXPECT_NEAR(x, 500 * td2 * std::cos(phi) + 320, 1e-9);
  // k = 0: equidistant, the radius in pixels is f theta.
  const double eq[4] = {500, 320, 240, 0};
  CameraNormalizedToPixel(CameraModelId::kSimpleRadialFisheye, eq, u, v, &x, &y);
  EXPECT_NEAR(std::hypot(x - 320, y - 240), 500 * theta, 1e-9);
  // On the axis: the principal point.
  CameraNormalizedToPixel(CameraModelId::kOpenCVFisheye, ocv, 0.0, 0.0, &x, &y);
  EXPECT_EQ(x, 320);
  EXPECT_EQ(y, 240);
  // FisheyeDistortion: the same point, its Jacobians by central differences.
  for (int num_k : {1, 2, 4}) {
    for (const auto& [a, b] : {std::pair<double, double>{u, v}, {0.01, -0.02}, {-0.3, 0.9}}) {
      double du, dv, J[4], dk[8];
      FisheyeDistortion(k, num_k, a, b, &du, &dv, J, dk);
      const double s = FisheyeScale(k, num_k, a, b);
      EXPECT_NEAR(du, a * s, 1e-15);
      EXPECT_NEAR(dv, b * s, 1e-15);
      const double h = 1e-7;
      for (int q = 0; q < 2; ++q) {
        const double ap = a + (q == 0 ? h : 0), bp = b + (q == 1 ? h : 0);
        const double am = a - (q == 0 ? h : 0), bm = b - (q == 1 ? h : 0);
        const double sp = FisheyeScale(k, num_k, ap, bp), sm = FisheyeScale(k, num_k, am, bm);
        EXPECT_NEAR(J[q], (ap * sp - am * sm) / (2 * h), 1e-7) << num_k << " d du / d " << q;
        EXPECT_NEAR(J[2 + q], (bp * sp - bm * sm) / (2 * h), 1e-7) << num_k << " d dv / d " << q;
      }
      for (int i = 0; i < num_k; ++i) {
        double kp[4] = {k[0], k[1], k[2], k[3]}, km[4] = {k[0], k[1], k[2], k[3]};
        kp[i] += h;
        km[i] -= h;
        const double sp = FisheyeScale(kp, num_k, a, b), sm = FisheyeScale(km, num_k, a, b);
        EXPECT_NEAR(dk[i], a * (sp - sm) / (2 * h), 1e-7) << num_k << " k" << i + 1;
        EXPECT_NEAR(dk[num_k + i], b * (sp - sm) / (2 * h), 1e-7) << num_k << " k" << i + 1;
      }
    }
  }
}

// FULL_OPENCV, THIN_PRISM_FISHEYE and FOV are COLMAP's formulas (written out here apart),
// and their Jacobians (FullOpenCVDistortion, ThinPrismFisheyeDistortion, FovDistortion) are
// their derivatives: central differences, near the axis and near omega = 0 too (where FOV
// takes its series).
TEST(CameraModel, FullOpenCVThinPrismAndFovProjectAsColmapDefinesThem) {
  const double u = 0.45, v = -0.3, r2 = u * u + v * v, r = std::sqrt(r2);
  const double fo[12] = {500, 510, 320, 240, -0.3, 0.08, 0.001, -0.0005, 0.01, 0.1, 0.02, 0.005};
  double x, y;
  CameraNormalizedToPixel(CameraModelId::kFullOpenCV, fo, u, v, &x, &y);
  const double radial = (1 + fo[4] * r2 + fo[5] * r2 * r2 + fo[8] * r2 * r2 * r2) /
                        (1 + fo[9] * r2 + fo[10] * r2 * r2 + fo[11] * r2 * r2 * r2);
  EXPECT_NEAR(x, 500 * (u * radial + 2 * fo[6] * u * v + fo[7] * (r2 + 2 * u * u)) + 320, 1e-9);
  EXPECT_NEAR(y, 510 * (v * radial + 2 * fo[7] * u * v + fo[6] * (r2 + 2 * v * v)) + 240, 1e-9);
  const double tp[12] = {500, 510, 320, 240, 0.03, -0.02, 0.001, -0.002, 0.004, -0.001, 3e-4, -5e-4};
  CameraNormalizedToPixel(CameraModelId::kThinPrismFisheye, tp, u, v, &x, &y);
  const double th = std::atan(r), a = u * th / r, b = v * th / r, t2 = th * th;
  const double rad = 1 + tp[4] * t2 + tp[5] * t2 * t2 + tp[8] * t2 * t2 * t2 + tp[9] * t2 * t2 * t2 * t2;
  EXPECT_NEAR(x, 500 * (a * rad + 2 * tp[6] * a * b + tp[7] * (t2 + 2 * a * a) + tp[10] * t2) + 320, 1e-9);
  EXPECT_NEAR(y, 510 * (b * rad + 2 * tp[7] * a * b + tp[6] * (t2 + 2 * b * b) + tp[11] * t2) + 240, 1e-9);
  const double fov[5] = {500, 510, 320, 240, 0.9};
  CameraNormalizedToPixel(CameraModelId::kFov, fov, u, v, &x, &y);
  const double rd = std::atan(2 * r * std::tan(0.45)) / 0.9;
  EXPECT_NEAR(x, 500 * u * rd / r + 320, 1e-9);
  EXPECT_NEAR(y, 510 * v * rd / r + 240, 1e-9);
  // FOV's series branches meet the formula: at omega^2 and r^2 just above and below 1e-8.
  for (const double w : {0.9999e-4, 1.0001e-4})
    EXPECT_NEAR(FovScale(w, u, v), std::atan(2 * r * std::tan(w / 2)) / (r * w), 1e-15) << w;
  for (const double q : {0.9999e-4, 1.0001e-4})
    EXPECT_NEAR(FovScale(0.9, q, 0.0), std::atan(2 * q * std::tan(0.45)) / (q * 0.9), 1e-15) << q;

  // The Jacobians, by central differences (h = 1e-6), at points near the axis too.
  auto check = [](const char* what, int nk, const double* k, auto&& distort, auto&& jacobian) {
    for (const auto& [p, q] : {std::pair<double, double>{0.45, -0.3}, {1.2, 0.7}, {3e-5, -2e-5}, {0.0, 0.0}}) {
      double du, dv, J[4], dk[16];
      jacobian(k, p, q, &du, &dv, J, dk);
      double eu, ev;
      distort(k, p, q, &eu, &ev);
      EXPECT_NEAR(du, eu, 1e-15 * (1 + std::abs(eu))) << what;
      EXPECT_NEAR(dv, ev, 1e-15 * (1 + std::abs(ev))) << what;
      const double h = 1e-6;
      for (int c = 0; c < 2; ++c) {
        double pu, pv, mu, mv;
        distort(k, p + (c == 0 ? h : 0), q + (c == 1 ? h : 0), &pu, &pv);
        distort(k, p - (c == 0 ? h : 0), q - (c == 1 ? h : 0), &mu, &mv);
        EXPECT_NEAR(J[c], (pu - mu) / (2 * h), 1e-7) << what << " d du / d " << c << " at " << p;
        EXPECT_NEAR(J[2 + c], (pv - mv) / (2 * h), 1e-7) << what << " d dv / d " << c << " at " << p;
      }
      for (int i = 0; i < nk; ++i) {
        double kp[8], km[8];
        std::copy(k, k + nk, kp);
        std::copy(k, k + nk, km);
        kp[i] += h;
        km[i] -= h;
        double pu, pv, mu, mv;
        distort(kp, p, q, &pu, &pv);
        distort(km, p, q, &mu, &mv);
        EXPECT_NEAR(dk[i], (pu - mu) / (2 * h), 1e-7) << what << " parameter " << i << " at " << p;
        EXPECT_NEAR(dk[nk + i], (pv - mv) / (2 * h), 1e-7) << what << " parameter " << i << " at " << p;
      }
    }
  };
  check("FULL_OPENCV", 8, fo + 4, [](const double* k, double p, double q, double* a, double* b) {
    FullOpenCVDistort(k, p, q, a, b);
  }, FullOpenCVDistortion);
  check("THIN_PRISM_FISHEYE", 8, tp + 4, [](const double* k, double p, double q, double* a, double* b) {
    ThinPrismFisheyeDistort(k, p, q, a, b);
  }, ThinPrismFisheyeDistortion);
  for (const double w : {0.9, 0.02, 2e-4, 5e-5, 0.0}) {
    const double k[1] = {w};
    check("FOV", 1, k, [](const double* kk, double p, double q, double* a, double* b) {
      const double s = FovScale(kk[0], p, q);
      *a = p * s;
      *b = q * s;
    }, [](const double* kk, double p, double q, double* a, double* b, double* J, double* dk) {
      FovDistortion(kk[0], p, q, a, b, J, dk);
    });
  }
}

TEST(CameraModel, PixelToNormalizedInvertsNormalizedToPixel) {
  struct Model {
    CameraModelId id;
    std::vector<double> params;
  };
  // Distortions of real lenses and stronger ones: barrel and pincushion, k2 of either sign.
  const Model models[] = {
      {CameraModelId::kSimplePinhole, {800, 320, 240}},
      {CameraModelId::kPinhole, {800, 780, 321, 239}},
      {CameraModelId::kSimpleRadial, {800, 320, 240, -0.12}},
      {CameraModelId::kSimpleRadial, {800, 320, 240, 0.3}},
      {CameraModelId::kRadial, {800, 320, 240, -0.2, 0.05}},
      {CameraModelId::kRadial, {800, 320, 240, 0.1, -0.02}},
      // OPENCV: a phone's and a wide-angle lens's radial terms with tangential ones.
      {CameraModelId::kOpenCV, {800, 790, 321, 239, 0.05, -0.02, 0.001, -0.0005}},
      {CameraModelId::kOpenCV, {800, 810, 318, 242, -0.2, 0.05, -0.002, 0.003}},
      // The fisheye models: equidistant, a GoPro-like lens, and k's that bend back.
      {CameraModelId::kSimpleRadialFisheye, {500, 320, 240, 0}},
      {CameraModelId::kRadialFisheye, {500, 320, 240, 0.05, -0.01}},
      {CameraModelId::kOpenCVFisheye, {500, 505, 321, 239, 0.03, -0.02, 0.004, -0.001}},
      {CameraModelId::kOpenCVFisheye, {500, 505, 321, 239, -0.1, 0.02, 0, 0}},
      // FULL_OPENCV: a wide-angle lens's rational radial terms, and OPENCV's alone.
      {CameraModelId::kFullOpenCV, {800, 790, 321, 239, -0.3, 0.08, 0.001, -0.0005, 0.01, 0.1, 0.02, 0.005}},
      {CameraModelId::kFullOpenCV, {800, 790, 321, 239, 0.05, -0.02, 0.001, -0.0005, 0, 0, 0, 0}},
      // FOV: a fisheye's omega, a slight one, and one where COLMAP would take its series.
      {CameraModelId::kFov, {500, 505, 321, 239, 0.9}},
      {CameraModelId::kFov, {500, 505, 321, 239, 0.05}},
      {CameraModelId::kFov, {500, 505, 321, 239, 1e-5}},
      {CameraModelId::kThinPrismFisheye, {500, 505, 321, 239, 0.03, -0.02, 0.001, -0.002, 0.004, -0.001, 3e-4, -5e-4}},
  };
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> uv(-0.5, 0.5);  // up to 30 degrees off axis
  for (const Model& m : models) {
    double worst = 0;
    for (int i = 0; i < 2000; ++i) {
      const double u = uv(rng), v = uv(rng);
      double x, y, u2, v2;
      CameraNormalizedToPixel(m.id, m.params.data(), u, v, &x, &y);
      CameraPixelToNormalized(m.id, m.params.data(), x, y, &u2, &v2);
      worst = std::max(worst, std::max(std::abs(u2 - u), std::abs(v2 - v)));
    }
    EXPECT_LT(worst, 1e-14) << CameraModelName(m.id) << " k = " << m.params.back();
  }
  // FOV past its horizon (omega r_d at 90 degrees or more): finite, on the ray, far out.
  const double fov[5] = {500, 500, 320, 240, 0.9};
  double uf, vf;
  CameraPixelToNormalized(CameraModelId::kFov, fov, 320 + 500 * 2.0, 240, &uf, &vf);
  EXPECT_TRUE(std::isfinite(uf));
  EXPECT_GT(uf, 1e6);
  EXPECT_EQ(vf, 0);
  // The principal point maps to (0, 0), whatever the distortion.
  const double p[5] = {800, 320, 240, -0.2, 0.05};
  double u, v;
  CameraPixelToNormalized(CameraModelId::kRadial, p, 320, 240, &u, &v);
  EXPECT_EQ(u, 0);
  EXPECT_EQ(v, 0);
  // Past the fold of strong barrel distortion (k = -0.5: r_d peaks at r = 0.816): finite,
  // on the ray through the pixel, at the fold radius.
  const double strong[4] = {800, 320, 240, -0.5};
  CameraPixelToNormalized(CameraModelId::kSimpleRadial, strong, 320 + 800 * 2.0, 240, &u, &v);
  EXPECT_NEAR(u, std::sqrt(1 / 1.5), 1e-12);
  EXPECT_EQ(v, 0);
  // A fisheye pixel 80 degrees off axis (equidistant: f theta from the centre) is the ray
  // at 80 degrees; one past the fold of k1 = -0.3 (theta_d peaks at theta = 1.054) maps to
  // the fold's angle.
  const double eq[4] = {500, 320, 240, 0};
  const double theta80 = 80 * M_PI / 180;
  CameraPixelToNormalized(CameraModelId::kSimpleRadialFisheye, eq, 320 + 500 * theta80, 240, &u, &v);
  EXPECT_NEAR(u, std::tan(theta80), 1e-9);
  EXPECT_EQ(v, 0);
  const double folding[4] = {500, 320, 240, -0.3};
  CameraPixelToNormalized(CameraModelId::kSimpleRadialFisheye, folding, 320 + 500 * 1.5, 240, &u, &v);
  EXPECT_NEAR(std::atan(u), std::sqrt(1 / 0.9), 1e-6);
  EXPECT_TRUE(std::isfinite(u));
}

TEST(Rotation, QuaternionRoundTrips) {
  std::mt19937 rng(5);
  std::normal_distribution<double> g;
  // Random rotations, plus the cases where one branch of the conversion degenerates
  // (180 degrees about each axis, identity).
  std::vector<std::vector<double>> qs = {{1, 0, 0, 0},
                                         {0, 1, 0, 0},
                                         {0, 0, 1, 0},
                                         {0, 0, 0, 1},
                                         {0, std::sqrt(0.5), std::sqrt(0.5), 0},
                                         {1e-9, 1, 1e-9, 0}};
  for (int i = 0; i < 1000; ++i) qs.push_back({g(rng), g(rng), g(rng), g(rng)});
  for (auto q : qs) {
    const double n = std::sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
    for (double& c : q) c /= n;
    double R[9], q2[4], R2[9];
    QuaternionToRotation(q.data(), R);
    // R is a rotation: R R^T = I, det 1.
    for (int a = 0; a < 3; ++a) {
      for (int b = 0; b < 3; ++b) {
        double dot = 0;
        for (int k = 0; k < 3; ++k) dot += R[3 * a + k] * R[3 * b + k];
        EXPECT_NEAR(dot, a == b ? 1 : 0, 1e-14);
      }
    }
    RotationToQuaternion(R, q2);
    EXPECT_GE(q2[0], 0);
    const double sign = q[0] * q2[0] + q[1] * q2[1] + q[2] * q2[2] + q[3] * q2[3] < 0 ? -1 : 1;
    for (int k = 0; k < 4; ++k) EXPECT_NEAR(q2[k], sign * q[k], 1e-14);
    QuaternionToRotation(q2, R2);
    for (int k = 0; k < 9; ++k) EXPECT_NEAR(R2[k], R[k], 1e-14);
  }
  // A rotation of 90 degrees about z maps x to y (Hamilton, active).
  const double qz[4] = {std::sqrt(0.5), 0, 0, std::sqrt(0.5)};
  double R[9];
  QuaternionToRotation(qz, R);
  EXPECT_NEAR(R[3], 1, 1e-15);  // R * (1, 0, 0) = (0, 1, 0)
  EXPECT_NEAR(R[1], -1, 1e-15);
}

TEST(Reconstruction, ProjectionAndStatistics) {
  Reconstruction rec;
  Camera cam;
  cam.camera_id = 1;
  cam.model = CameraModelId::kSimpleRadial;
  cam.width = 640;
  cam.height = 480;
  cam.params = {500, 320, 240, 0.05};
  rec.cameras[1] = cam;
  Image im;
  im.image_id = 1;
  im.camera_id = 1;
  im.name = "a";
  im.tvec[2] = 2;  // the world origin 2 units in front
  const double X[3] = {0.2, -0.1, 0};
  double x, y;
  ASSERT_TRUE(ProjectToImage(cam, im, X, &x, &y));
  const double d = 1 + 0.05 * (0.01 + 0.0025);
  EXPECT_NEAR(x, 500 * 0.1 * d + 320, 1e-12);
  EXPECT_NEAR(y, 500 * -0.05 * d + 240, 1e-12);
  const double behind[3] = {0, 0, -3};
  EXPECT_FALSE(ProjectToImage(cam, im, behind, &x, &y));
  // One point seen at its projection + (3, 4): error 5; another exactly.
  im.points2D = {{x + 3, y + 4, 1}, {0, 0, kInvalidPoint3DId}};
  rec.images[1] = im;
  Point3D pt;
  std::copy(X, X + 3, pt.xyz);
  pt.track = {{1, 0}};
  pt.error = 2;
  rec.points3D[1] = pt;
  EXPECT_EQ(rec.NumObservations(), 1);
  EXPECT_EQ(rec.MeanTrackLength(), 1);
  EXPECT_NEAR(rec.MeanReprojectionError(), 5, 1e-9);
  EXPECT_EQ(rec.MeanPointError(), 2);
  EXPECT_EQ(Reconstruction().MeanReprojectionError(), 0);
}

// PointsSeenBy: the points that the images' points2D name, ascending and once each; image
// ids not in the model, points2D naming no point and ids not in points3D are passed over.
TEST(Reconstruction, PointsSeenByTheImages) {
  Reconstruction rec = MakeModel();
  const std::vector<uint64_t> all = {3, 5, 17, 1ull << 40};
  EXPECT_EQ(rec.PointsSeenBy({1}), all);
  EXPECT_EQ(rec.PointsSeenBy({2, 7, 4000000000u}), all);
  EXPECT_TRUE(rec.PointsSeenBy({9}).empty());   // in the model, no points2D
  EXPECT_TRUE(rec.PointsSeenBy({99}).empty());  // not in the model
  EXPECT_TRUE(rec.PointsSeenBy({}).empty());
  rec.images.at(1).points2D[5].point3D_id = 12345;  // no such point
  rec.images.at(1).points2D[0].point3D_id = kInvalidPoint3DId;
  EXPECT_EQ(rec.PointsSeenBy({1}), std::vector<uint64_t>({3, 17, 1ull << 40}));
}

}  // namespace
}  // namespace tiepoint
