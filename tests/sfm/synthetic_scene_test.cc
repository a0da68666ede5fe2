// The synthetic scene (sfm/synthetic_scene.h): deterministic, its cameras agree with what
// it renders, its texture gives SIFT stable features, and its files read back.
#include "sfm/synthetic_scene.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "features/sift.h"
#include "io/image.h"
#include "io/middlebury.h"

namespace tiepoint {
namespace {

std::unique_ptr<SyntheticScene> MakeScene(const SyntheticSceneOptions& options) {
  std::unique_ptr<SyntheticScene> scene;
  const Status s = SyntheticScene::Create(options, &scene);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return scene;
}

SyntheticSceneOptions Small(int views = 6) {
  SyntheticSceneOptions o;
  o.num_views = views;
  o.width = 400;
  o.height = 300;
  return o;
}

// BT.601 luma in [0, 1], as io/image.h converts colour.
GrayImage Luma(const Image8& im) {
  GrayImage g;
  g.width = im.width;
  g.height = im.height;
  g.pixels.resize(static_cast<size_t>(im.width) * im.height);
  for (size_t i = 0; i < g.pixels.size(); ++i) {
    const unsigned char* p = &im.pixels[3 * i];
    g.pixels[i] = (0.299f * p[0] + 0.587f * p[1] + 0.114f * p[2]) / 255.0f;
  }
  return g;
}

// Projection written out here from the file's K, R, t, independent of the scene's own.
void ProjectWithCamera(const MiddleburyCamera& c, const std::array<double, 3>& X, double* x,
                       double* y) {
  double p[3];
  for (int i = 0; i < 3; ++i) p[i] = c.R[3 * i] * X[0] + c.R[3 * i + 1] * X[1] + c.R[3 * i + 2] * X[2] + c.t[i];
  double q[3];
  for (int i = 0; i < 3; ++i) q[i] = c.K[3 * i] * p[0] + c.K[3 * i + 1] * p[1] + c.K[3 * i + 2] * p[2];
  *x = q[0] / q[2];
  *y = q[1] / q[2];
}

TEST(SyntheticScene, OptionsOutOfRangeAreRejected) {
  SyntheticSceneOptions o;
  o.num_views = 1;
  EXPECT_EQ(o.Check().code(), StatusCode::kInvalidOptions);
  o = SyntheticSceneOptions();
  o.width = 8;
  EXPECT_NE(o.Check().message().find("image size"), std::string::npos);
  o = SyntheticSceneOptions();
  o.supersampling = 0;
  EXPECT_NE(o.Check().message().find("supersampling"), std::string::npos);
  o = SyntheticSceneOptions();
  o.arc_degrees = 400;
  EXPECT_NE(o.Check().message().find("arc_degrees"), std::string::npos);
  for (const double c : {0.0, 1.5, std::nan("")}) {
    SyntheticSceneOptions bad;
    bad.contrast = c;
    EXPECT_NE(bad.Check().message().find("contrast"), std::string::npos) << c;
  }
  std::unique_ptr<SyntheticScene> scene;
  EXPECT_FALSE(SyntheticScene::Create(o, &scene).ok());
  EXPECT_EQ(scene, nullptr);
  EXPECT_TRUE(SyntheticSceneOptions().Check().ok());
}

TEST(SyntheticScene, SameSeedSamePixelsWhateverTheThreads) {
  SyntheticSceneOptions o = Small(3);
  o.num_threads = 1;
  const auto a = MakeScene(o);
  o.num_threads = 2;
  const auto b = MakeScene(o);
  o.seed = 2;
  const auto c = MakeScene(o);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->num_boxes(), 10);
  EXPECT_EQ(a->num_spheres(), 3);
  for (int v = 0; v < 3; ++v) {
    Image8 ia, ib, ic;
    ASSERT_TRUE(a->Render(v, &ia).ok());
    ASSERT_TRUE(b->Render(v, &ib).ok());
    ASSERT_TRUE(c->Render(v, &ic).ok());
    EXPECT_EQ(ia.width, 400);
    EXPECT_EQ(ia.height, 300);
    EXPECT_EQ(ia.channels, 3);
    EXPECT_EQ(ia.pixels, ib.pixels) << "view " << v;
    EXPECT_NE(ia.pixels, ic.pixels) << "view " << v << ": another seed, another scene";
    EXPECT_EQ(a->cameras()[v].R, b->cameras()[v].R);
    EXPECT_EQ(a->cameras()[v].t, b->cameras()[v].t);
  }
  Image8 none;
  EXPECT_EQ(a->Render(3, &none).code(), StatusCode::kInvalidOptions);
}

TEST(SyntheticScene, ContrastScalesThePixelsAboutMidGrey) {
  SyntheticSceneOptions o = Small(2);
  const auto full = MakeScene(o);
  o.contrast = 0.2;
  const auto low = MakeScene(o);
  ASSERT_TRUE(full && low);
  Image8 a, b;
  ASSERT_TRUE(full->Render(1, &a).ok());
  ASSERT_TRUE(low->Render(1, &b).ok());
  ASSERT_EQ(a.pixels.size(), b.pixels.size());
  int lo = 255, hi = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) {
    // Rounded both times: within one level of 0.5 + 0.2 (v - 0.5).
    const double want = 255.0 * (0.5 + 0.2 * (a.pixels[i] / 255.0 - 0.5));
    ASSERT_NEAR(b.pixels[i], want, 1.0) << i;
    lo = std::min<int>(lo, b.pixels[i]);
    hi = std::max<int>(hi, b.pixels[i]);
  }
  EXPECT_GE(lo, 101);
  EXPECT_LE(hi, 154);
  EXPECT_GT(hi - lo, 20) << "the texture is still there";
}

TEST(SyntheticScene, CamerasArePinholeOnARingLookingInward) {
  SyntheticSceneOptions o;  // the defaults: 12 views, 800 x 600
  const auto scene = MakeScene(o);
  ASSERT_TRUE(scene);
  ASSERT_EQ(scene->num_views(), 12);
  for (int v = 0; v < 12; ++v) {
    const MiddleburyCamera& c = scene->cameras()[v];
    char name[32];
    std::snprintf(name, sizeof(name), "view_%03d.png", v);
    EXPECT_EQ(c.name, name);
    EXPECT_DOUBLE_EQ(c.K[0], 1.1 * 800);
    EXPECT_DOUBLE_EQ(c.K[4], 1.1 * 800);
    EXPECT_DOUBLE_EQ(c.K[2], 399.5);
    EXPECT_DOUBLE_EQ(c.K[5], 299.5);
    EXPECT_EQ(c.K[1], 0.0);
    EXPECT_EQ(c.K[8], 1.0);
    // R is a rotation: R R^T = I, det +1.
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) {
        double d = 0;
        for (int k = 0; k < 3; ++k) d += c.R[3 * i + k] * c.R[3 * j + k];
        EXPECT_NEAR(d, i == j ? 1.0 : 0.0, 1e-12);
      }
    }
    const double det = c.R[0] * (c.R[4] * c.R[8] - c.R[5] * c.R[7]) -
                       c.R[1] * (c.R[3] * c.R[8] - c.R[5] * c.R[6]) +
                       c.R[2] * (c.R[3] * c.R[7] - c.R[4] * c.R[6]);
    EXPECT_NEAR(det, 1.0, 1e-12);
    // The image x axis is horizontal (level horizon), y points down the world's z.
    EXPECT_NEAR(c.R[2], 0.0, 1e-12);
    EXPECT_LT(c.R[5], 0.0);
    // The centre is on the ring and the scene's middle projects near the image centre.
    const auto centre = c.Centre();
    EXPECT_NEAR(std::hypot(centre[0], centre[1]), 6.3, 0.3);
    EXPECT_GT(centre[2], 6.5);
    double x, y;
    ProjectWithCamera(c, {0.0, 0.0, 0.5}, &x, &y);
    EXPECT_NEAR(x, 399.5, 60.0);
    EXPECT_NEAR(y, 299.5, 60.0);
  }
  // Neighbours 30 degrees apart on the closed ring.
  const auto c0 = scene->cameras()[0].Centre(), c1 = scene->cameras()[1].Centre();
  const double angle = std::acos((c0[0] * c1[0] + c0[1] * c1[1]) /
                                 (std::hypot(c0[0], c0[1]) * std::hypot(c1[0], c1[1])));
  EXPECT_NEAR(angle * 180.0 / M_PI, 30.0, 1e-9);
}

// The convention is consistent: the point the renderer's ray through (x, y) meets projects
// back onto (x, y) with the ground-truth K [R | t], for pixel centres and points between.
TEST(SyntheticScene, RayHitsProjectBackOntoTheirPixel) {
  const auto scene = MakeScene(Small(4));
  ASSERT_TRUE(scene);
  int hits = 0, ground_hits = 0;
  for (int v = 0; v < scene->num_views(); ++v) {
    const MiddleburyCamera& c = scene->cameras()[v];
    for (double y = 0.0; y < 300.0; y += 13.0) {
      for (double x = 0.0; x < 400.0; x += 17.0) {
        for (const double dx : {0.0, 0.25, -0.5}) {
          SyntheticHit hit;
          if (!scene->CastRay(v, x + dx, y + dx, &hit)) continue;
          ++hits;
          double px, py;
          ProjectWithCamera(c, hit.point_in_world, &px, &py);
          ASSERT_NEAR(px, x + dx, 1e-6) << "view " << v;
          ASSERT_NEAR(py, y + dx, 1e-6) << "view " << v;
          double sx, sy;
          ASSERT_TRUE(scene->Project(v, hit.point_in_world, &sx, &sy));
          EXPECT_NEAR(sx, px, 1e-9);
          EXPECT_NEAR(sy, py, 1e-9);
          if (hit.surface == 0) {
            // The ground is z = 0 in the world: the ray from the file's camera (centre
            // -R^T t, direction R^T K^-1 (x, y, 1)) meets it at the same point.
            ++ground_hits;
            const auto o = c.Centre();
            const double dc[3] = {(x + dx - c.K[2]) / c.K[0], (y + dx - c.K[5]) / c.K[4], 1.0};
            double d[3];
            for (int i = 0; i < 3; ++i) d[i] = c.R[i] * dc[0] + c.R[3 + i] * dc[1] + c.R[6 + i] * dc[2];
            const double s = -o[2] / d[2];
            EXPECT_NEAR(hit.point_in_world[0], o[0] + s * d[0], 1e-9);
            EXPECT_NEAR(hit.point_in_world[1], o[1] + s * d[1], 1e-9);
            EXPECT_NEAR(hit.point_in_world[2], 0.0, 1e-12);
          }
        }
      }
    }
  }
  EXPECT_GT(hits, 1000);
  EXPECT_GT(ground_hits, 300);
  // A ray far above the image looks over the scene into the sky.
  SyntheticHit hit;
  EXPECT_FALSE(scene->CastRay(0, 200.0, -3000.0, &hit));
}

// The rendered pixels sample the scene where CastRay's rays go: pixel (x, y) is the mean
// of the colours on the regular grid inside its square (its centre alone without
// supersampling), so the images agree with the ground-truth cameras to the sub-pixel.
TEST(SyntheticScene, PixelsAreTheMeanOfTheirRays) {
  for (const int n : {1, 2, 3}) {
    SyntheticSceneOptions o = Small(2);
    o.supersampling = n;
    const auto scene = MakeScene(o);
    ASSERT_TRUE(scene);
    Image8 im;
    ASSERT_TRUE(scene->Render(1, &im).ok());
    int checked = 0;
    for (int y = 0; y < o.height; y += 7) {
      for (int x = 0; x < o.width; x += 11) {
        float sum[3] = {0, 0, 0};
        for (int j = 0; j < n; ++j) {
          for (int i = 0; i < n; ++i) {
            const auto c = scene->RayColour(1, x - 0.5 + (i + 0.5) / n, y - 0.5 + (j + 0.5) / n);
            for (int k = 0; k < 3; ++k) sum[k] += c[k];
          }
        }
        for (int k = 0; k < 3; ++k) {
          const float mean = std::min(1.0f, std::max(0.0f, sum[k] / (n * n)));
          ASSERT_NEAR(im.pixels[3 * (static_cast<size_t>(y) * o.width + x) + k], mean * 255.0f, 0.51f)
              << "pixel (" << x << ", " << y << ") channel " << k << ", supersampling " << n;
        }
        ++checked;
      }
    }
    EXPECT_GT(checked, 1500);
  }
}

// Rich texture: strong gradients nearly everywhere below the horizon, no flat areas.
TEST(SyntheticScene, TextureIsRich) {
  const auto scene = MakeScene(Small(2));
  ASSERT_TRUE(scene);
  Image8 im;
  ASSERT_TRUE(scene->Render(0, &im).ok());
  const GrayImage g = Luma(im);
  // Blocks of 16 x 16 whose centre ray meets the scene: the share with a standard deviation
  // of at least 4 grey levels.
  int blocks = 0, textured = 0;
  double gradient_energy = 0;
  long long gradient_count = 0;
  for (int by = 0; by + 16 <= g.height; by += 16) {
    for (int bx = 0; bx + 16 <= g.width; bx += 16) {
      SyntheticHit hit;
      if (!scene->CastRay(0, bx + 7.5, by + 7.5, &hit)) continue;
      double sum = 0, sum2 = 0;
      for (int y = by; y < by + 16; ++y) {
        for (int x = bx; x < bx + 16; ++x) {
          sum += g.at(x, y);
          sum2 += g.at(x, y) * g.at(x, y);
          if (x + 1 < g.width && y + 1 < g.height) {
            const double gx = g.at(x + 1, y) - g.at(x, y), gy = g.at(x, y + 1) - g.at(x, y);
            gradient_energy += gx * gx + gy * gy;
            ++gradient_count;
          }
        }
      }
      const double mean = sum / 256, sd = std::sqrt(std::max(0.0, sum2 / 256 - mean * mean));
      ++blocks;
      if (sd * 255 >= 4.0) ++textured;
    }
  }
  std::printf("%d of %d blocks textured; RMS neighbour difference %.1f grey levels\n", textured,
              blocks, std::sqrt(gradient_energy / gradient_count) * 255);
  ASSERT_GT(blocks, 200);
  EXPECT_GT(static_cast<double>(textured) / blocks, 0.95) << textured << " of " << blocks;
  // Mean squared difference of neighbouring pixels, in grey levels: an RMS step above 8.
  EXPECT_GT(std::sqrt(gradient_energy / gradient_count) * 255, 8.0);
}

// SIFT finds many features, and they are stable: a keypoint of view 0 whose scene point
// view 1 also sees reappears where the ground truth projects it. This also checks that the
// rendered pixels agree with the ground-truth cameras (a wrong pose or a flipped axis
// would leave the projections far from any keypoint).
TEST(SyntheticScene, SiftFeaturesAreManyAndRepeatable) {
  SyntheticSceneOptions o = Small(12);
  const auto scene = MakeScene(o);
  ASSERT_TRUE(scene);
  SiftOptions sift;
  std::unique_ptr<FeatureExtractor> extractor;
  ASSERT_TRUE(FeatureExtractor::Create(sift, Device::kCpu, &extractor).ok());
  Features f[2];
  for (int v = 0; v < 2; ++v) {
    Image8 im;
    ASSERT_TRUE(scene->Render(v, &im).ok());
    ASSERT_TRUE(extractor->Extract(Luma(im), &f[v]).ok());
  }
  EXPECT_GT(f[0].size(), 400u);
  EXPECT_GT(f[1].size(), 400u);
  int visible = 0, repeated = 0;
  for (const Keypoint& k : f[0].keypoints) {
    SyntheticHit hit, back;
    if (!scene->CastRay(0, k.x, k.y, &hit)) continue;
    double x, y;
    if (!scene->Project(1, hit.point_in_world, &x, &y)) continue;
    if (x < 8 || y < 8 || x > o.width - 9 || y > o.height - 9) continue;
    // Seen from view 1 (not hidden behind something else)?
    if (!scene->CastRay(1, x, y, &back)) continue;
    const auto& p = hit.point_in_world;
    const auto& q = back.point_in_world;
    if (std::hypot(std::hypot(p[0] - q[0], p[1] - q[1]), p[2] - q[2]) > 1e-3) continue;
    ++visible;
    for (const Keypoint& m : f[1].keypoints) {
      if (std::hypot(m.x - x, m.y - y) < 1.5) {
        ++repeated;
        break;
      }
    }
  }
  std::printf("features %zu and %zu; %d of %d visible keypoints of view 0 repeated in view 1\n",
              f[0].size(), f[1].size(), repeated, visible);
  ASSERT_GT(visible, 200);
  EXPECT_GT(static_cast<double>(repeated) / visible, 0.2) << repeated << " of " << visible;
}

TEST(SyntheticScene, FilesReadBack) {
  const auto scene = MakeScene(Small(3));
  ASSERT_TRUE(scene);
  const std::string dir = testing::TempDir();
  // The cameras through the Middlebury writer and reader, exactly.
  const std::string par = dir + "/synthetic_scene_test_par.txt";
  ASSERT_TRUE(WriteMiddleburyCameras(par, scene->cameras()).ok());
  std::vector<MiddleburyCamera> read;
  const Status s = ReadMiddleburyCameras(par, &read);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(read.size(), 3u);
  for (int v = 0; v < 3; ++v) {
    EXPECT_EQ(read[v].name, scene->cameras()[v].name);
    EXPECT_EQ(read[v].K, scene->cameras()[v].K);
    EXPECT_EQ(read[v].R, scene->cameras()[v].R);
    EXPECT_EQ(read[v].t, scene->cameras()[v].t);
  }
  std::remove(par.c_str());
  std::vector<MiddleburyCamera> bad = scene->cameras();
  bad[1].name = "two words.png";
  const Status named = WriteMiddleburyCameras(par, bad);
  EXPECT_EQ(named.code(), StatusCode::kInvalidInput);
  EXPECT_NE(named.message().find("camera 1"), std::string::npos);
  EXPECT_EQ(std::fopen(par.c_str(), "r"), nullptr);

  // A view through the colour PNG writer and the project's reader: the reader's grey is
  // the luma of the written colours.
  Image8 im;
  ASSERT_TRUE(scene->Render(0, &im).ok());
  const std::string png = dir + "/synthetic_scene_test_view.png";
  ASSERT_TRUE(WritePng(png, im).ok());
  GrayImage grey;
  ASSERT_TRUE(ReadImageGray(png, &grey).ok());
  const GrayImage expected = Luma(im);
  ASSERT_EQ(grey.width, 400);
  ASSERT_EQ(grey.height, 300);
  for (size_t i = 0; i < grey.pixels.size(); ++i) {
    ASSERT_NEAR(grey.pixels[i], expected.pixels[i], 1e-5) << "pixel " << i;
  }
  // And the grey writer: 8-bit values come back exactly.
  const std::string png_grey = dir + "/synthetic_scene_test_grey.png";
  ASSERT_TRUE(WritePng(png_grey, grey).ok());
  GrayImage grey2;
  ASSERT_TRUE(ReadImageGray(png_grey, &grey2).ok());
  for (size_t i = 0; i < grey.pixels.size(); ++i) {
    ASSERT_NEAR(grey2.pixels[i], std::round(grey.pixels[i] * 255.0f) / 255.0f, 1e-6) << "pixel " << i;
  }
  std::remove(png.c_str());
  std::remove(png_grey.c_str());
  Image8 two_channels = im;
  two_channels.channels = 2;
  EXPECT_EQ(WritePng(png, two_channels).code(), StatusCode::kInvalidInput);
}

}  // namespace
}  // namespace tiepoint
