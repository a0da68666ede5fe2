#include "solver/synthetic.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "solver/camera_model.h"

namespace tiepoint {
namespace {

SyntheticOptions SmallOptions() {
  SyntheticOptions options;
  options.num_cameras = 30;
  options.num_points = 5000;
  options.observations_per_point = 5.0;
  options.noise_px = 1.0;
  options.seed = 42;
  return options;
}

Scene MakeOrDie(const SyntheticOptions& options, Scene* truth = nullptr) {
  Scene initial;
  const Status status = MakeSyntheticProblem(options, &initial, truth);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return initial;
}

// Root mean square of the residual per coordinate (pixels), and its largest magnitude.
std::pair<double, double> Residuals(const Scene& scene) {
  double sum = 0.0, largest = 0.0;
  for (int64_t k = 0; k < scene.num_observations(); ++k) {
    double predicted[2];
    ProjectBal(scene.camera(scene.obs_camera[k]), scene.point(scene.obs_point[k]), predicted);
    for (int d = 0; d < 2; ++d) {
      const double r = predicted[d] - scene.obs_xy[2 * k + d];
      sum += r * r;
      largest = std::max(largest, std::abs(r));
    }
  }
  return {std::sqrt(sum / (2.0 * scene.num_observations())), largest};
}

void ExpectSameScene(const Scene& a, const Scene& b) {
  EXPECT_EQ(a.cameras, b.cameras);
  EXPECT_EQ(a.points, b.points);
  EXPECT_EQ(a.obs_camera, b.obs_camera);
  EXPECT_EQ(a.obs_point, b.obs_point);
  EXPECT_EQ(a.obs_xy, b.obs_xy);
}

TEST(SyntheticOptionsTest, DefaultsAreValid) {
  const Status status = SyntheticOptions().Check();
  EXPECT_TRUE(status.ok()) << status.ToString();
}

TEST(SyntheticOptionsTest, RejectsEachBadFieldNamingIt) {
  const double nan = std::nan("");
  const double inf = HUGE_VAL;
  const std::vector<std::pair<std::string, std::function<void(SyntheticOptions&)>>> cases = {
      {"num_cameras", [](SyntheticOptions& o) { o.num_cameras = 1; }},
      {"num_cameras", [](SyntheticOptions& o) { o.num_cameras = -5; }},
      {"num_cameras",
       [](SyntheticOptions& o) {
         o.num_cameras = 10000001;
         o.num_points = 10;
       }},
      {"num_points", [](SyntheticOptions& o) { o.num_points = 0; }},
      {"num_points", [](SyntheticOptions& o) { o.num_points = -1; }},
      {"num_points",
       [](SyntheticOptions& o) {
         o.num_cameras = 1000;
         o.num_points = 400000000;
         o.observations_per_point = 6.0;
       }},
      {"observations_per_point", [](SyntheticOptions& o) { o.observations_per_point = 1.5; }},
      {"observations_per_point",
       [](SyntheticOptions& o) {
         o.num_cameras = 4;
         o.observations_per_point = 4.5;
       }},
      {"observations_per_point", [nan](SyntheticOptions& o) { o.observations_per_point = nan; }},
      {"noise_px", [](SyntheticOptions& o) { o.noise_px = -0.1; }},
      {"noise_px", [nan](SyntheticOptions& o) { o.noise_px = nan; }},
      {"noise_px", [inf](SyntheticOptions& o) { o.noise_px = inf; }},
      {"rotation_noise", [](SyntheticOptions& o) { o.rotation_noise = -1e-3; }},
      {"translation_noise", [](SyntheticOptions& o) { o.translation_noise = -1e-3; }},
      {"point_noise", [nan](SyntheticOptions& o) { o.point_noise = nan; }},
      {"focal_noise", [inf](SyntheticOptions& o) { o.focal_noise = inf; }},
      {"num_threads", [](SyntheticOptions& o) { o.num_threads = -1; }},
  };
  for (const auto& [field, mutate] : cases) {
    SyntheticOptions options;
    mutate(options);
    const Status status = options.Check();
    ASSERT_FALSE(status.ok()) << field;
    EXPECT_EQ(status.code(), StatusCode::kInvalidOptions) << field;
    EXPECT_NE(status.message().find(field), std::string::npos)
        << "expected '" << field << "' in: " << status.message();
    // MakeSyntheticProblem refuses the same options.
    Scene initial;
    EXPECT_FALSE(MakeSyntheticProblem(options, &initial, nullptr).ok()) << field;
  }
}

TEST(SyntheticOptionsTest, AcceptsBoundaryValues) {
  SyntheticOptions options;
  options.num_cameras = 2;
  options.num_points = 1;
  options.observations_per_point = 2.0;
  options.noise_px = 0.0;
  options.rotation_noise = options.translation_noise = 0.0;
  options.point_noise = options.focal_noise = 0.0;
  options.num_threads = 0;
  EXPECT_TRUE(options.Check().ok());
}

TEST(SyntheticTest, RejectsNullOrAliasedInitial) {
  const SyntheticOptions options = SmallOptions();
  Scene truth;
  EXPECT_FALSE(MakeSyntheticProblem(options, nullptr, &truth).ok());
  EXPECT_FALSE(MakeSyntheticProblem(options, &truth, &truth).ok());
}

TEST(SyntheticTest, DeterministicWhateverTheThreadCount) {
  SyntheticOptions options = SmallOptions();
  options.num_points = 3000;
  Scene truth1, truth2, truth3;
  options.num_threads = 1;
  const Scene initial1 = MakeOrDie(options, &truth1);
  options.num_threads = 2;
  const Scene initial2 = MakeOrDie(options, &truth2);
  options.num_threads = 3;
  const Scene initial3 = MakeOrDie(options, &truth3);
  ExpectSameScene(initial1, initial2);
  ExpectSameScene(truth1, truth2);
  ExpectSameScene(initial1, initial3);
  ExpectSameScene(truth1, truth3);

  // Without `truth`, `initial` is the same.
  ExpectSameScene(initial1, MakeOrDie(options));

  options.seed = 43;
  Scene truth4;
  const Scene initial4 = MakeOrDie(options, &truth4);
  EXPECT_NE(truth1.cameras, truth4.cameras);
  EXPECT_NE(truth1.points, truth4.points);
  EXPECT_NE(truth1.obs_xy, truth4.obs_xy);
  EXPECT_NE(initial1.cameras, initial4.cameras);
}

TEST(SyntheticTest, StatisticsLikeBal) {
  const SyntheticOptions options = SmallOptions();
  Scene truth;
  const Scene initial = MakeOrDie(options, &truth);
  ASSERT_EQ(truth.num_cameras(), options.num_cameras);
  ASSERT_EQ(truth.num_points(), options.num_points);
  ASSERT_EQ(initial.num_cameras(), options.num_cameras);
  ASSERT_EQ(initial.num_points(), options.num_points);
  ASSERT_EQ(truth.obs_point.size(), truth.obs_camera.size());
  ASSERT_EQ(truth.obs_xy.size(), 2 * truth.obs_camera.size());
  EXPECT_EQ(initial.obs_camera, truth.obs_camera);
  EXPECT_EQ(initial.obs_point, truth.obs_point);
  EXPECT_EQ(initial.obs_xy, truth.obs_xy);

  const double mean = static_cast<double>(truth.num_observations()) / truth.num_points();
  EXPECT_NEAR(mean, options.observations_per_point, 0.1 * options.observations_per_point);

  // Indices in range, ordered by camera then point (as BAL files), every point seen by at
  // least 2 distinct cameras, every camera seeing many points, every observation in front
  // and inside the image.
  std::vector<std::set<int>> cameras_of_point(truth.num_points());
  std::vector<int> observations_of_camera(truth.num_cameras(), 0);
  for (int64_t k = 0; k < truth.num_observations(); ++k) {
    const int c = truth.obs_camera[k], j = truth.obs_point[k];
    ASSERT_GE(c, 0);
    ASSERT_LT(c, truth.num_cameras());
    ASSERT_GE(j, 0);
    ASSERT_LT(j, truth.num_points());
    if (k > 0) {
      ASSERT_LT(std::make_pair(truth.obs_camera[k - 1], truth.obs_point[k - 1]),
                std::make_pair(c, j));
    }
    EXPECT_TRUE(cameras_of_point[j].insert(c).second) << "camera twice for point " << j;
    ++observations_of_camera[c];
    double predicted[2], depth;
    ProjectBal(truth.camera(c), truth.point(j), predicted, &depth);
    ASSERT_LT(depth, 0.0) << "observation " << k << " behind its camera";
    const double f = truth.camera(c)[6];
    EXPECT_LT(std::abs(predicted[0]), f);
    EXPECT_LT(std::abs(predicted[1]), 0.75 * f);
  }
  for (int j = 0; j < truth.num_points(); ++j) {
    ASSERT_GE(cameras_of_point[j].size(), 2u) << "point " << j;
  }
  for (int c = 0; c < truth.num_cameras(); ++c) {
    EXPECT_GE(observations_of_camera[c], 100) << "camera " << c;
  }

  for (int c = 0; c < truth.num_cameras(); ++c) {
    const double* cam = truth.camera(c);
    EXPECT_GE(cam[6], 500.0);
    EXPECT_LE(cam[6], 1500.0);
    EXPECT_LT(std::abs(cam[7]), 0.2);
    EXPECT_LT(std::abs(cam[8]), 0.05);
    const double* init = initial.camera(c);
    EXPECT_NEAR(init[6], cam[6], 0.01 * cam[6]);
    EXPECT_EQ(init[7], cam[7]);
    EXPECT_EQ(init[8], cam[8]);
  }

  const auto [truth_rms, truth_max] = Residuals(truth);
  EXPECT_NEAR(truth_rms, options.noise_px, 0.2 * options.noise_px);
  EXPECT_LT(truth_max, 8.0 * options.noise_px);
  const auto [initial_rms, initial_max] = Residuals(initial);
  EXPECT_GT(initial_rms, 1.5 * truth_rms);
  (void)initial_max;
}

TEST(SyntheticTest, NoiselessObservationsAreExact) {
  SyntheticOptions options = SmallOptions();
  options.noise_px = 0.0;
  Scene truth;
  MakeOrDie(options, &truth);
  ASSERT_GT(truth.num_observations(), 0);
  EXPECT_LT(Residuals(truth).second, 1e-9);
}

TEST(SyntheticTest, NoPerturbationMeansInitialIsTruth) {
  SyntheticOptions options = SmallOptions();
  options.num_points = 500;
  options.rotation_noise = options.translation_noise = 0.0;
  options.point_noise = options.focal_noise = 0.0;
  Scene truth;
  const Scene initial = MakeOrDie(options, &truth);
  EXPECT_EQ(initial.points, truth.points);
  for (size_t a = 0; a < truth.cameras.size(); ++a) {
    EXPECT_NEAR(initial.cameras[a], truth.cameras[a], 1e-9 * (1.0 + std::abs(truth.cameras[a])));
  }
}

// Cameras stand on a ring around the scene, upright, and look at its centre: this checks
// the rotations (including those of angle near pi, which a ring of cameras always has).
TEST(SyntheticTest, CamerasRingTheSceneAndLookAtIt) {
  SyntheticOptions options;
  options.num_cameras = 2000;
  options.num_points = 2000;
  options.observations_per_point = 3.0;
  Scene truth;
  MakeOrDie(options, &truth);
  double scene_radius = 0.0;
  for (int j = 0; j < truth.num_points(); ++j) {
    const double* X = truth.point(j);
    scene_radius = std::max(scene_radius, std::sqrt(X[0] * X[0] + X[1] * X[1] + X[2] * X[2]));
  }
  ASSERT_GT(scene_radius, 0.0);
  double largest_angle = 0.0;
  for (int c = 0; c < truth.num_cameras(); ++c) {
    const double* cam = truth.camera(c);
    const double angle = std::sqrt(cam[0] * cam[0] + cam[1] * cam[1] + cam[2] * cam[2]);
    EXPECT_LE(angle, 3.14159265358979323846 + 1e-12);
    largest_angle = std::max(largest_angle, angle);
    // Centre C = -R^T t.
    const double inverse[3] = {-cam[0], -cam[1], -cam[2]};
    double center[3];
    AngleAxisRotatePoint(inverse, cam + 3, center);
    const double ring = std::hypot(center[0], center[1]);
    EXPECT_GT(ring, 2.0 * scene_radius) << "camera " << c;
    EXPECT_LT(ring, 5.0 * scene_radius) << "camera " << c;
    EXPECT_LT(std::abs(center[2]), 0.5 * scene_radius) << "camera " << c;
    // Small roll and tilt: the world's up (+z) is close to the camera's up (+y).
    const double world_up[3] = {0.0, 0.0, 1.0};
    double up_in_camera[3];
    AngleAxisRotatePoint(cam, world_up, up_in_camera);
    EXPECT_GT(up_in_camera[1], std::cos(0.4)) << "camera " << c;
    // The scene centre is in front, near the image centre.
    const double origin[3] = {0.0, 0.0, 0.0};
    double predicted[2], depth;
    ProjectBal(cam, origin, predicted, &depth);
    EXPECT_LT(depth, 0.0) << "camera " << c;
    EXPECT_LT(std::hypot(predicted[0], predicted[1]), 0.15 * cam[6]) << "camera " << c;
  }
  EXPECT_GT(largest_angle, 3.0);
}

// Rotation matrix (row-major) of an angle-axis vector, through the camera model.
void RotationMatrix(const double* w, double* R) {
  for (int col = 0; col < 3; ++col) {
    double e[3] = {0.0, 0.0, 0.0}, r[3];
    e[col] = 1.0;
    AngleAxisRotatePoint(w, e, r);
    for (int row = 0; row < 3; ++row) R[3 * row + col] = r[row];
  }
}

double StdDev(const std::vector<double>& v) {
  double sum = 0.0, sum2 = 0.0;
  for (double x : v) {
    sum += x;
    sum2 += x * x;
  }
  const double mean = sum / v.size();
  return std::sqrt(std::max(0.0, sum2 / v.size() - mean * mean));
}

// The perturbation of the initial values has the requested size. Large rotation noise
// makes rotations of every kind, which exercises the angle-axis conversion everywhere.
TEST(SyntheticTest, PerturbationHasTheRequestedSize) {
  SyntheticOptions options;
  options.num_cameras = 4000;
  options.num_points = 20000;
  options.observations_per_point = 3.0;
  options.rotation_noise = 0.3;
  options.translation_noise = 0.01;
  options.point_noise = 0.02;
  options.focal_noise = 0.05;
  Scene truth;
  const Scene initial = MakeOrDie(options, &truth);
  double scene_radius = 0.0;
  for (int j = 0; j < truth.num_points(); ++j) {
    const double* X = truth.point(j);
    scene_radius = std::max(scene_radius, std::sqrt(X[0] * X[0] + X[1] * X[1] + X[2] * X[2]));
  }

  // The angle of R_initial R_truth^T is |delta| with delta ~ N(0, sigma^2 I_3): a chi
  // distribution with 3 degrees of freedom, mean 2 sqrt(2 / pi) sigma.
  double angle_sum = 0.0, largest = 0.0;
  std::vector<double> dt, df;
  for (int c = 0; c < truth.num_cameras(); ++c) {
    double Rt[9], Ri[9];
    RotationMatrix(truth.camera(c), Rt);
    RotationMatrix(initial.camera(c), Ri);
    double trace = 0.0;  // trace(Ri Rt^T)
    for (int k = 0; k < 9; ++k) trace += Ri[k] * Rt[k];
    const double angle = std::acos(std::clamp(0.5 * (trace - 1.0), -1.0, 1.0));
    angle_sum += angle;
    largest = std::max(largest, angle);
    for (int k = 3; k < 6; ++k) dt.push_back(initial.camera(c)[k] - truth.camera(c)[k]);
    df.push_back(initial.camera(c)[6] / truth.camera(c)[6] - 1.0);
  }
  const double expected_mean = 2.0 * std::sqrt(2.0 / 3.14159265358979323846) * 0.3;
  EXPECT_NEAR(angle_sum / truth.num_cameras(), expected_mean, 0.05 * expected_mean);
  EXPECT_LT(largest, 6.0 * 0.3);
  EXPECT_NEAR(StdDev(df), options.focal_noise, 0.1 * options.focal_noise);
  const double translation_std = StdDev(dt) / (options.translation_noise * scene_radius);
  EXPECT_GT(translation_std, 0.7);
  EXPECT_LT(translation_std, 1.3);

  std::vector<double> dp;
  for (size_t a = 0; a < truth.points.size(); ++a) dp.push_back(initial.points[a] - truth.points[a]);
  const double point_std = StdDev(dp) / (options.point_noise * scene_radius);
  EXPECT_GT(point_std, 0.7);
  EXPECT_LT(point_std, 1.3);
}

TEST(SyntheticTest, EveryCameraWhenTracksSpanAllCameras) {
  SyntheticOptions options;
  options.num_cameras = 6;
  options.num_points = 300;
  options.observations_per_point = 6.0;
  Scene truth;
  MakeOrDie(options, &truth);
  EXPECT_EQ(truth.num_observations(), 6 * 300);

  options.num_cameras = 2;
  options.observations_per_point = 2.0;
  MakeOrDie(options, &truth);
  EXPECT_EQ(truth.num_observations(), 2 * 300);

  options.num_cameras = 3;
  options.num_points = 4000;
  options.observations_per_point = 2.5;
  MakeOrDie(options, &truth);
  EXPECT_NEAR(static_cast<double>(truth.num_observations()) / truth.num_points(), 2.5, 0.05);
}

TEST(SyntheticTest, SinglePoint) {
  SyntheticOptions options;
  options.num_cameras = 2;
  options.num_points = 1;
  options.observations_per_point = 2.0;
  Scene truth;
  const Scene initial = MakeOrDie(options, &truth);
  EXPECT_EQ(initial.num_points(), 1);
  EXPECT_EQ(initial.num_observations(), 2);
}

}  // namespace
}  // namespace tiepoint
