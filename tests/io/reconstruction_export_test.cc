// BAL scene <-> reconstruction conversions (io/reconstruction_export.h): the round trip, and
// the residuals of the converted reconstruction against BAL's own camera model written
// out here.
#include "io/reconstruction_export.h"

#include <gtest/gtest.h>

#include <Eigen/Geometry>
#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "solver/reconstruction_ba.h"
#include "solver/synthetic.h"

namespace tiepoint {
namespace {

Scene Synth(bool shared, Scene* truth = nullptr) {
  SyntheticOptions o;
  o.num_cameras = 7;
  o.num_points = 300;
  o.shared_intrinsics = shared;
  Scene initial, t;
  EXPECT_TRUE(MakeSyntheticProblem(o, &initial, &t).ok());
  if (truth) *truth = t;
  return initial;
}

Eigen::Matrix3d RotationOf(const double* w) {
  const Eigen::Vector3d v(w[0], w[1], w[2]);
  return v.norm() > 0 ? Eigen::AngleAxisd(v.norm(), v / v.norm()).toRotationMatrix()
                      : Eigen::Matrix3d::Identity();
}

TEST(BalSceneToReconstruction, RoundTrip) {
  const Scene scene = Synth(false);
  Reconstruction rec;
  ASSERT_TRUE(BalSceneToReconstruction(scene, false, &rec).ok());
  EXPECT_EQ(rec.images.size(), 7u);
  EXPECT_EQ(rec.cameras.size(), 7u);
  EXPECT_EQ(rec.points3D.size(), 300u);
  EXPECT_EQ(rec.NumObservations(), scene.num_observations());
  Scene back;
  ASSERT_TRUE(ReconstructionToBalScene(rec, &back).ok());
  ASSERT_EQ(back.num_cameras(), scene.num_cameras());
  for (int i = 0; i < scene.num_cameras(); ++i) {
    EXPECT_LT((RotationOf(back.camera(i)) - RotationOf(scene.camera(i))).norm(), 1e-12);
    for (int k = 3; k < 9; ++k) EXPECT_NEAR(back.camera(i)[k], scene.camera(i)[k], 1e-12) << i << " " << k;
  }
  EXPECT_EQ(back.points, scene.points);
  // The export sorts observations by (point, camera); synth writes them camera by camera.
  auto sorted = [](const Scene& sc) {
    std::vector<std::tuple<int, int, double, double>> o;
    for (int64_t k = 0; k < sc.num_observations(); ++k)
      o.emplace_back(sc.obs_point[k], sc.obs_camera[k], sc.obs_xy[2 * k], sc.obs_xy[2 * k + 1]);
    std::sort(o.begin(), o.end());
    return o;
  };
  EXPECT_TRUE(sorted(back) == sorted(scene));
}

// Each observation's residual in the reconstruction equals BAL's: P = R X + t,
// p = -P.xy / P.z, x = f (1 + k1 |p|^2 + k2 |p|^4) p, residual x - observed (up to BAL's
// +y up, which flips the sign of the y residual).
TEST(BalSceneToReconstruction, ResidualsEqualBals) {
  const Scene scene = Synth(false);
  Reconstruction rec;
  ASSERT_TRUE(BalSceneToReconstruction(scene, false, &rec).ok());
  for (int64_t k = 0; k < scene.num_observations(); k += 7) {
    const double* c = scene.camera(scene.obs_camera[k]);
    const Eigen::Vector3d X(scene.point(scene.obs_point[k]));
    const Eigen::Vector3d P = RotationOf(c) * X + Eigen::Vector3d(c[3], c[4], c[5]);
    const double px = -P.x() / P.z(), py = -P.y() / P.z(), r2 = px * px + py * py;
    const double d = 1 + c[7] * r2 + c[8] * r2 * r2;
    const double bal_rx = c[6] * d * px - scene.obs_xy[2 * k];
    const double bal_ry = c[6] * d * py - scene.obs_xy[2 * k + 1];
    const Image& im = rec.images.at(scene.obs_camera[k] + 1);
    const Camera& cam = rec.cameras.at(im.camera_id);
    double R[9];
    QuaternionToRotation(im.qvec, R);
    const Point2D* q = nullptr;
    for (const Point2D& p : im.points2D)
      if (p.point3D_id == static_cast<uint64_t>(scene.obs_point[k]) + 1) q = &p;
    ASSERT_NE(q, nullptr);
    const double obs[2] = {q->x, q->y};
    double r[2];
    EXPECT_TRUE(ReconstructionResidual(cam.model, cam.params.data(), R, im.tvec,
                                       rec.points3D.at(q->point3D_id).xyz, obs, r, nullptr, nullptr,
                                       nullptr));
    EXPECT_NEAR(r[0], bal_rx, 1e-9 * (1 + std::abs(bal_rx)));
    EXPECT_NEAR(r[1], -bal_ry, 1e-9 * (1 + std::abs(bal_ry)));
  }
}

TEST(BalSceneToReconstruction, SingleCamera) {
  Reconstruction rec;
  ASSERT_TRUE(BalSceneToReconstruction(Synth(true), true, &rec).ok());
  EXPECT_EQ(rec.cameras.size(), 1u);
  for (const auto& [id, im] : rec.images) EXPECT_EQ(im.camera_id, 1u);
  const Status s = BalSceneToReconstruction(Synth(false), true, &rec);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_NE(s.message().find("BAL camera 1"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tiepoint
