// Bundle adjustment with shared intrinsics (solver/reconstruction_ba.h): analytic
// Jacobians against central differences for every camera model, and the solve against
// Ceres with one shared intrinsics parameter block (double precision, automatic
// derivatives, a different rotation parametrisation: angle-axis instead of tiepoint's
// left-multiplicative update).
#include "solver/reconstruction_ba.h"
#include "solver/reconstruction_ba_cuda.h"

#include <ceres/ceres.h>
#include <ceres/rotation.h>
#include <gtest/gtest.h>

#include <Eigen/Geometry>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <tuple>

namespace tiepoint {
namespace {

void RandomRotation(std::mt19937& rng, double scale, double* R) {
  std::normal_distribution<double> n(0, scale);
  const Eigen::Vector3d w(n(rng), n(rng), n(rng));
  const Eigen::Matrix<double, 3, 3, Eigen::RowMajor> M =
      w.norm() > 0 ? Eigen::AngleAxisd(w.norm(), w.normalized()).toRotationMatrix() : Eigen::Matrix3d::Identity();
  std::copy(M.data(), M.data() + 9, R);
}

std::vector<double> ParamsFor(CameraModelId m) {
  switch (m) {
    case CameraModelId::kSimplePinhole: return {800, 320, 240};
    case CameraModelId::kPinhole: return {800, 780, 320, 240};
    case CameraModelId::kSimpleRadial: return {800, 320, 240, -0.08};
    case CameraModelId::kRadial: return {800, 320, 240, -0.08, 0.02};
    case CameraModelId::kOpenCV: return {800, 780, 320, 240, -0.08, 0.02, 0.003, -0.002};
    case CameraModelId::kOpenCVFisheye: return {800, 780, 320, 240, 0.05, -0.02, 0.004, -0.001};
    case CameraModelId::kSimpleRadialFisheye: return {800, 320, 240, 0.04};
    case CameraModelId::kRadialFisheye: return {800, 320, 240, 0.04, -0.01};
    case CameraModelId::kFullOpenCV: return {800, 780, 320, 240, -0.08, 0.02, 0.003, -0.002, 0.001, 0.05, -0.01, 0.002};
    case CameraModelId::kFov: return {800, 780, 320, 240, 0.7};
    case CameraModelId::kThinPrismFisheye:
      return {800, 780, 320, 240, 0.05, -0.02, 0.003, -0.002, 0.004, -0.001, 0.002, -0.001};
  }
  return {};
}

TEST(ReconstructionBA, JacobiansMatchCentralDifferences) {
  std::mt19937 rng(3);
  for (CameraModelId m : {CameraModelId::kSimplePinhole, CameraModelId::kPinhole, CameraModelId::kSimpleRadial,
                          CameraModelId::kRadial, CameraModelId::kOpenCV, CameraModelId::kOpenCVFisheye,
                          CameraModelId::kSimpleRadialFisheye, CameraModelId::kRadialFisheye,
                          CameraModelId::kFullOpenCV, CameraModelId::kFov, CameraModelId::kThinPrismFisheye}) {
    std::vector<double> params = ParamsFor(m);
    const int np = static_cast<int>(params.size());
    for (int trial = 0; trial < 5; ++trial) {
      double R[9];
      RandomRotation(rng, 0.5, R);
      std::uniform_real_distribution<double> u(-1, 1);
      double t[3] = {u(rng), u(rng), 4 + u(rng)};
      double X[3] = {u(rng), u(rng), u(rng)};
      const double obs[2] = {300, 250};
      double r[2], jpose[12], jpt[6], jprm[24];
      ASSERT_TRUE(ReconstructionResidual(m, params.data(), R, t, X, obs, r, jpose, jpt, jprm));
      const double h = 1e-6;
      // Pose: left rotation increment and translation.
      for (int q = 0; q < 6; ++q) {
        double rp[2], rm[2];
        for (int sgn : {1, -1}) {
          double Rn[9], tn[3] = {t[0], t[1], t[2]};
          if (q < 3) {
            double w[3] = {0, 0, 0};
            w[q] = sgn * h;
            const Eigen::Matrix3d dR = Eigen::AngleAxisd(h, Eigen::Vector3d(w[0], w[1], w[2]).normalized()).toRotationMatrix();
            const Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>> Rm(R);
            const Eigen::Matrix<double, 3, 3, Eigen::RowMajor> out = dR * Rm;
            std::copy(out.data(), out.data() + 9, Rn);
          } else {
            std::copy(R, R + 9, Rn);
            tn[q - 3] += sgn * h;
          }
          ReconstructionResidual(m, params.data(), Rn, tn, X, obs, sgn > 0 ? rp : rm, nullptr, nullptr, nullptr);
        }
        for (int k = 0; k < 2; ++k)
          EXPECT_NEAR(jpose[6 * k + q], (rp[k] - rm[k]) / (2 * h), 1e-4 * (1 + std::abs(jpose[6 * k + q])))
              << CameraModelName(m) << " pose column " << q;
      }
      for (int q = 0; q < 3; ++q) {
        double rp[2], rm[2];
        double Xp[3] = {X[0], X[1], X[2]}, Xm[3] = {X[0], X[1], X[2]};
        Xp[q] += h;
        Xm[q] -= h;
        ReconstructionResidual(m, params.data(), R, t, Xp, obs, rp, nullptr, nullptr, nullptr);
        ReconstructionResidual(m, params.data(), R, t, Xm, obs, rm, nullptr, nullptr, nullptr);
        for (int k = 0; k < 2; ++k)
          EXPECT_NEAR(jpt[3 * k + q], (rp[k] - rm[k]) / (2 * h), 1e-4 * (1 + std::abs(jpt[3 * k + q])));
      }
      for (int q = 0; q < np; ++q) {
        double rp[2], rm[2];
        std::vector<double> pp = params, pm = params;
        const double hq = h * std::max(1.0, std::abs(params[q]));
        pp[q] += hq;
        pm[q] -= hq;
        ReconstructionResidual(m, pp.data(), R, t, X, obs, rp, nullptr, nullptr, nullptr);
        ReconstructionResidual(m, pm.data(), R, t, X, obs, rm, nullptr, nullptr, nullptr);
        for (int k = 0; k < 2; ++k)
          EXPECT_NEAR(jprm[np * k + q], (rp[k] - rm[k]) / (2 * hq), 1e-4 * (1 + std::abs(jprm[np * k + q])))
              << CameraModelName(m) << " param " << q;
      }
    }
  }
}

// A ring of images (radius 5) around a cloud of points (a cube of half-width `cloud`), one
// shared camera: SIMPLE_RADIAL (700, 320, 240, -0.05) unless `camera` is given (its model
// and parameters; 640 x 480).
Reconstruction MakeScene(std::mt19937& rng, int num_images, int num_points, double noise_px,
                         const Camera* camera = nullptr, double cloud = 1.0) {
  Reconstruction rec;
  Camera cam;
  cam.camera_id = 1;
  cam.model = CameraModelId::kSimpleRadial;
  cam.width = 640;
  cam.height = 480;
  cam.params = {700, 320, 240, -0.05};
  if (camera) {
    cam.model = camera->model;
    cam.params = camera->params;
  }
  rec.cameras[1] = cam;
  std::uniform_real_distribution<double> u(-1, 1);
  std::normal_distribution<double> n(0, noise_px);
  std::vector<Eigen::Vector3d> X;
  for (int j = 0; j < num_points; ++j) X.emplace_back(cloud * u(rng), cloud * u(rng), cloud * u(rng));
  for (int i = 0; i < num_images; ++i) {
    const double a = 2 * M_PI * i / num_images * 0.5;  // half ring
    const Eigen::Vector3d C(5 * std::sin(a), 0.3 * u(rng), -5 * std::cos(a));
    // Look at the origin: z axis towards -C.
    const Eigen::Vector3d z = (-C).normalized();
    const Eigen::Vector3d x = Eigen::Vector3d::UnitY().cross(z).normalized();
    const Eigen::Vector3d y = z.cross(x);
    Eigen::Matrix3d R;
    R.row(0) = x;
    R.row(1) = y;
    R.row(2) = z;
    const Eigen::Vector3d t = -R * C;
    Image im;
    im.image_id = i + 1;
    im.camera_id = 1;
    im.name = "img" + std::to_string(i);
    const Eigen::Matrix<double, 3, 3, Eigen::RowMajor> Rr = R;
    RotationToQuaternion(Rr.data(), im.qvec);
    for (int k = 0; k < 3; ++k) im.tvec[k] = t[k];
    rec.images[im.image_id] = im;
  }
  for (int j = 0; j < num_points; ++j) {
    Point3D p;
    for (int k = 0; k < 3; ++k) p.xyz[k] = X[j][k];
    rec.points3D[j + 1] = p;
  }
  for (auto& [id, im] : rec.images) {
    for (auto& [pid, p] : rec.points3D) {
      double x, y;
      if (!ProjectToImage(cam, im, p.xyz, &x, &y)) continue;
      Point2D q;
      q.x = x + n(rng);
      q.y = y + n(rng);
      q.point3D_id = pid;
      p.track.push_back({id, static_cast<uint32_t>(im.points2D.size())});
      im.points2D.push_back(q);
    }
  }
  return rec;
}

// Ceres on `start`'s poses (angle-axis and translation, image 1's held) and points, with one
// intrinsics block `intr` shared by every observation, residual F(x, y) differentiated
// automatically; Ceres's DENSE_SCHUR run to `tolerance`. *poses: the solved poses by image id.
template <typename F, int N>
ceres::Solver::Summary SolveWithCeres(const Reconstruction& start, double* intr, int max_iterations,
                                      double tolerance, std::map<uint32_t, std::array<double, 6>>* poses) {
  ceres::Problem problem;
  std::map<uint64_t, std::array<double, 3>> points;
  for (const auto& [id, im] : start.images) {
    double R[9];
    QuaternionToRotation(im.qvec, R);
    const Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>> Rm(R);
    const Eigen::AngleAxisd aa{Eigen::Matrix3d(Rm)};
    const Eigen::Vector3d w = aa.axis() * aa.angle();
    (*poses)[id] = {w[0], w[1], w[2], im.tvec[0], im.tvec[1], im.tvec[2]};
  }
  for (const auto& [pid, p] : start.points3D) points[pid] = {p.xyz[0], p.xyz[1], p.xyz[2]};
  for (const auto& [pid, p] : start.points3D)
    for (const TrackElement& e : p.track) {
      const Point2D& q = start.images.at(e.image_id).points2D[e.point2D_idx];
      problem.AddResidualBlock(new ceres::AutoDiffCostFunction<F, 2, 6, N, 3>(new F(q.x, q.y)), nullptr,
                               (*poses)[e.image_id].data(), intr, points[pid].data());
    }
  problem.SetParameterBlockConstant((*poses)[1].data());
  ceres::Solver::Options so;
  so.linear_solver_type = ceres::DENSE_SCHUR;
  so.max_num_iterations = max_iterations;
  so.function_tolerance = tolerance;
  so.gradient_tolerance = tolerance;
  so.parameter_tolerance = tolerance;
  ceres::Solver::Summary cs;
  ceres::Solve(so, &problem, &cs);
  return cs;
}

// Every image and point variable, image 1's pose held (the gauge).
ReconstructionBAConfig FirstPoseHeld(const Reconstruction& rec) {
  ReconstructionBAConfig config;
  for (const auto& [id, im] : rec.images) config.variable_images.insert(id);
  config.fixed_pose_images.insert(1);
  config.only_points_of_variable_images = false;
  return config;
}

// The point in the camera's frame: R(pose[0..2]) X + pose[3..5], R from angle-axis as Ceres
// makes it (independent of tiepoint's rotations).
template <typename T>
void CameraFramePoint(const T* pose, const T* point, T* P) {
  ceres::AngleAxisRotatePoint(pose, point, P);
  for (int k = 0; k < 3; ++k) P[k] += pose[3 + k];
}

struct CeresResidual {
  CeresResidual(double x, double y) : x(x), y(y) {}
  template <typename T>
  bool operator()(const T* pose, const T* intr, const T* point, T* r) const {
    T P[3];
    CameraFramePoint(pose, point, P);
    const T u = P[0] / P[2], v = P[1] / P[2];
    const T d = T(1) + intr[1] * (u * u + v * v);
    // intr = (f, k); principal point fixed (as tiepoint's default).
    r[0] = intr[0] * u * d + T(320) - T(x);
    r[1] = intr[0] * v * d + T(240) - T(y);
    return true;
  }
  double x, y;
};

TEST(ReconstructionBA, SharedIntrinsicsMatchesCeres) {
  std::mt19937 rng(7);
  Reconstruction truth = MakeScene(rng, 8, 150, 0.5);
  // Perturb: poses (except the first, held fixed), focal, distortion, points.
  Reconstruction rec = truth;
  std::normal_distribution<double> n(0, 1);
  for (auto& [id, im] : rec.images) {
    if (id == 1) continue;
    double R[9], dR[9], out[9];
    QuaternionToRotation(im.qvec, R);
    RandomRotation(rng, 0.01, dR);
    const Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>> A(dR), B(R);
    Eigen::Map<Eigen::Matrix<double, 3, 3, Eigen::RowMajor>> outm(out);
    outm = A * B;
    RotationToQuaternion(out, im.qvec);
    for (int k = 0; k < 3; ++k) im.tvec[k] += 0.05 * n(rng);
  }
  rec.cameras[1].params[0] *= 1.05;
  rec.cameras[1].params[3] = 0;
  for (auto& [pid, p] : rec.points3D)
    for (int k = 0; k < 3; ++k) p.xyz[k] += 0.02 * n(rng);
  Reconstruction start = rec;

  ReconstructionBAOptions options;
  options.max_iterations = 100;
  options.function_tolerance = 1e-12;
  options.parameter_tolerance = 1e-14;
  ReconstructionBAConfig config;
  for (const auto& [id, im] : rec.images) config.variable_images.insert(id);
  config.fixed_pose_images.insert(1);
  config.only_points_of_variable_images = false;
  ReconstructionBASummary summary;
  ASSERT_TRUE(BundleAdjustReconstruction(options, config, &rec, &summary).ok());
  EXPECT_LT(summary.final_cost, 0.01 * summary.initial_cost);

  // The threaded solver (per-thread Schur parts) reaches the same minimum.
  Reconstruction rec3 = start;
  ReconstructionBAOptions options3 = options;
  options3.num_threads = 3;
  ReconstructionBASummary summary3;
  ASSERT_TRUE(BundleAdjustReconstruction(options3, config, &rec3, &summary3).ok());
  EXPECT_NEAR(summary3.final_cost, summary.final_cost, 1e-8 * summary.final_cost);
  EXPECT_NEAR(rec3.cameras[1].params[0], rec.cameras[1].params[0], 1e-6 * rec.cameras[1].params[0]);
  for (const auto& [id, im] : rec.images)
    for (int k = 0; k < 3; ++k) EXPECT_NEAR(rec3.images.at(id).tvec[k], im.tvec[k], 1e-7);

  // Ceres on the same start, one shared intrinsics block (f, k).
  std::map<uint32_t, std::array<double, 6>> poses;
  std::array<double, 2> intr = {start.cameras[1].params[0], start.cameras[1].params[3]};
  const ceres::Solver::Summary cs = SolveWithCeres<CeresResidual, 2>(start, intr.data(), 200, 1e-14, &poses);
  EXPECT_NEAR(summary.final_cost, cs.final_cost, 1e-6 * cs.final_cost)
      << "tiepoint " << summary.final_cost << " ceres " << cs.final_cost;
  EXPECT_NEAR(rec.cameras[1].params[0], intr[0], 1e-4 * intr[0]);
  EXPECT_NEAR(rec.cameras[1].params[3], intr[1], 1e-5);
  // Focal recovered near the truth (noise 0.5 px).
  EXPECT_NEAR(rec.cameras[1].params[0], truth.cameras[1].params[0], 0.01 * truth.cameras[1].params[0]);
  for (const auto& [id, im] : rec.images) {
    EXPECT_NEAR(im.tvec[0], poses[id][3], 1e-5);
    EXPECT_NEAR(im.tvec[2], poses[id][5], 1e-5);
  }
}

TEST(ReconstructionBA, FixedIntrinsicsAndPointsStayFixed) {
  std::mt19937 rng(11);
  Reconstruction rec = MakeScene(rng, 5, 60, 0.3);
  const Reconstruction before = rec;
  ReconstructionBAOptions options;
  options.fix_intrinsics = true;
  ReconstructionBAConfig config;
  config.variable_images = {2, 3};
  config.fixed_points = {1, 2, 3};
  ReconstructionBASummary summary;
  ASSERT_TRUE(BundleAdjustReconstruction(options, config, &rec, &summary).ok());
  EXPECT_EQ(rec.cameras[1].params, before.cameras.at(1).params);
  for (uint64_t pid : {1, 2, 3})
    for (int k = 0; k < 3; ++k) EXPECT_EQ(rec.points3D[pid].xyz[k], before.points3D.at(pid).xyz[k]);
  for (uint32_t id : {1u, 4u, 5u})
    for (int k = 0; k < 3; ++k) EXPECT_EQ(rec.images[id].tvec[k], before.images.at(id).tvec[k]);
  EXPECT_LE(summary.final_cost, summary.initial_cost);
}

// --- linear solvers (dense / sparse CHOLMOD / matrix-free PCG) ---------------------------

// Perturbs every pose but the first (rotation ~0.01 rad, translation 0.05), every camera's
// focal (+5%) and distortion (zeroed), and the points (0.02); all times `scale`.
void Perturb(std::mt19937& rng, Reconstruction* rec, double scale = 1.0) {
  std::normal_distribution<double> n(0, 1);
  const uint32_t first = rec->images.begin()->first;
  for (auto& [id, im] : rec->images) {
    if (id == first) continue;
    double R[9], dR[9], out[9];
    QuaternionToRotation(im.qvec, R);
    RandomRotation(rng, 0.01 * scale, dR);
    const Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>> A(dR), B(R);
    Eigen::Map<Eigen::Matrix<double, 3, 3, Eigen::RowMajor>> outm(out);
    outm = A * B;
    RotationToQuaternion(out, im.qvec);
    for (int k = 0; k < 3; ++k) im.tvec[k] += 0.05 * scale * n(rng);
  }
  for (auto& [cid, cam] : rec->cameras) {
    cam.params[0] *= 1 + 0.05 * scale;
    if (CameraModelHasTwoFocals(cam.model)) cam.params[1] *= 1 + 0.04 * scale;
    std::fill(cam.params.begin() + CameraModelDistortionBegin(cam.model), cam.params.end(), 0.0);
    if (cam.model == CameraModelId::kFov) cam.params[4] = 0.01;  // 0 is stationary (as COLMAP's start)
  }
  for (auto& [pid, p] : rec->points3D)
    for (int k = 0; k < 3; ++k) p.xyz[k] += 0.02 * scale * n(rng);
}

// Step extension (the mapper's setting, 1.5) under a Cauchy loss with gross outliers, where
// plain LM's short steps crawl: the same minimum as plain LM, in fewer steps.
TEST(ReconstructionBA, StepExtensionReachesTheSameMinimumInFewerSteps) {
  std::mt19937 rng(23);
  Reconstruction start = MakeScene(rng, 8, 200, 0.5);
  // One observation in eight moved 10-40 px (wrong matches), then the usual perturbation.
  std::uniform_real_distribution<double> off(10, 40), sign(-1, 1);
  int k = 0;
  for (auto& [id, im] : start.images)
    for (Point2D& q : im.points2D)
      if (++k % 8 == 0) {
        q.x += off(rng) * (sign(rng) < 0 ? -1 : 1);
        q.y += off(rng) * (sign(rng) < 0 ? -1 : 1);
      }
  Perturb(rng, &start, 2.0);
  ReconstructionBAOptions plain;
  plain.max_iterations = 500;
  plain.function_tolerance = 1e-12;
  plain.parameter_tolerance = 1e-14;
  plain.loss.type = LossType::kCauchy;
  plain.loss.scale = 1.0;
  ReconstructionBAOptions extended = plain;
  extended.step_extension = 1.5;
  const ReconstructionBAConfig config = FirstPoseHeld(start);
  Reconstruction a = start, b = start;
  ReconstructionBASummary sa, sb;
  ASSERT_TRUE(BundleAdjustReconstruction(plain, config, &a, &sa).ok());
  ASSERT_TRUE(BundleAdjustReconstruction(extended, config, &b, &sb).ok());
  EXPECT_TRUE(sa.converged) << sa.termination;
  EXPECT_TRUE(sb.converged) << sb.termination;
  EXPECT_NEAR(sb.final_cost, sa.final_cost, 1e-6 * sa.final_cost);
  EXPECT_NEAR(b.cameras[1].params[0], a.cameras[1].params[0], 1e-5 * a.cameras[1].params[0]);
  // The scale is free (image 1's pose is the only gauge), so the camera centres are
  // compared from the first one, in units of their spread; the rotations as they are.
  auto centres = [](const Reconstruction& r) {
    std::vector<Eigen::Vector3d> c;
    for (const auto& [id, im] : r.images) {
      double R[9];
      QuaternionToRotation(im.qvec, R);
      const Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>> Rm(R);
      c.push_back(-Rm.transpose() * Eigen::Vector3d(im.tvec[0], im.tvec[1], im.tvec[2]));
    }
    const Eigen::Vector3d first = c.front();
    const double spread = (c.back() - first).norm();
    for (Eigen::Vector3d& x : c) x = (x - first) / spread;
    return c;
  };
  const std::vector<Eigen::Vector3d> ca = centres(a), cb = centres(b);
  for (size_t i = 0; i < ca.size(); ++i) EXPECT_LT((cb[i] - ca[i]).norm(), 1e-5) << "image " << i + 1;
  for (const auto& [id, im] : a.images)
    for (int q = 0; q < 4; ++q) EXPECT_NEAR(std::abs(b.images.at(id).qvec[q]), std::abs(im.qvec[q]), 1e-6);
  EXPECT_LT(sb.iterations, sa.iterations) << "plain " << sa.iterations << ", extended " << sb.iterations;
  // Off by default, and checked.
  EXPECT_EQ(ReconstructionBAOptions().step_extension, 0.0);
  ReconstructionBAOptions bad;
  bad.step_extension = 0.5;
  EXPECT_FALSE(bad.Check().ok());
}

// MakeScene, then every third image gets its own camera (a copy of the shared one, so the
// observations stay consistent): per-image and shared intrinsics mixed.
Reconstruction MakeMixedScene(std::mt19937& rng, int num_images, int num_points) {
  Reconstruction rec = MakeScene(rng, num_images, num_points, 0.5);
  for (auto& [id, im] : rec.images) {
    if (id % 3 != 0) continue;
    Camera cam = rec.cameras.at(1);
    cam.camera_id = 100 + id;
    rec.cameras[cam.camera_id] = cam;
    im.camera_id = cam.camera_id;
  }
  return rec;
}

// Cameras along a line looking sideways at a wall of points, each point seen only by the
// nearby images (a sparse reduced system, unlike MakeScene's all-see-all ring); one shared
// SIMPLE_RADIAL camera.
Reconstruction MakeCorridor(std::mt19937& rng, int num_images, int points_per_image) {
  Reconstruction rec;
  Camera cam;
  cam.camera_id = 1;
  cam.model = CameraModelId::kSimpleRadial;
  cam.width = 640;
  cam.height = 480;
  cam.params = {700, 320, 240, -0.05};
  rec.cameras[1] = cam;
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> n(0, 0.5);
  const double spacing = 0.5;
  for (int i = 0; i < num_images; ++i) {
    Image im;
    im.image_id = i + 1;
    im.camera_id = 1;
    im.name = "img" + std::to_string(i);
    im.qvec[0] = 1;  // identity rotation: looking along +z
    im.tvec[0] = -spacing * i;
    im.tvec[1] = 0.2 * (u(rng) - 0.5);
    rec.images[im.image_id] = im;
  }
  const int num_points = num_images * points_per_image;
  for (int j = 0; j < num_points; ++j) {
    Point3D p;
    p.xyz[0] = spacing * (num_images - 1) * u(rng);
    p.xyz[1] = 3 * (u(rng) - 0.5);
    p.xyz[2] = 4 + 2 * u(rng);
    rec.points3D[j + 1] = p;
  }
  for (auto& [id, im] : rec.images)
    for (auto& [pid, p] : rec.points3D) {
      double x, y;
      // Field of view on the undistorted coordinates (R = I): with k < 0 the distortion
      // folds far-off points back into the image.
      const double z = p.xyz[2] + im.tvec[2];
      if (std::abs((p.xyz[0] + im.tvec[0]) / z) > 0.45 || std::abs((p.xyz[1] + im.tvec[1]) / z) > 0.34) continue;
      if (!ProjectToImage(cam, im, p.xyz, &x, &y)) continue;
      Point2D q;
      q.x = x + n(rng);
      q.y = y + n(rng);
      q.point3D_id = pid;
      p.track.push_back({id, static_cast<uint32_t>(im.points2D.size())});
      im.points2D.push_back(q);
    }
  return rec;
}

struct SolveResult {
  Reconstruction rec;
  ReconstructionBASummary summary;
};

SolveResult Solve(const Reconstruction& start, ReconstructionBAOptions options,
                  const ReconstructionBAConfig& config, ReconstructionLinearSolver solver,
                  int threads) {
  SolveResult out{start, {}};
  options.linear_solver = solver;
  options.cuda_min_observations = 0;  // these scenes are small: the GPU all the same
  options.num_threads = threads;
  const Status s = BundleAdjustReconstruction(options, config, &out.rec, &out.summary);
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

// Largest differences of two solutions: relative in focal lengths, absolute in camera
// centres' translation and points (scene units; the scenes span a few units).
struct Diff {
  double focal = 0, pose = 0, point = 0;
};
Diff Compare(const Reconstruction& a, const Reconstruction& b) {
  Diff d;
  for (const auto& [cid, cam] : a.cameras)
    for (size_t q = 0; q < cam.params.size(); ++q)
      d.focal = std::max(d.focal, std::abs(cam.params[q] - b.cameras.at(cid).params[q]) /
                                      std::max(1.0, std::abs(cam.params[q])));
  for (const auto& [id, im] : a.images) {
    for (int k = 0; k < 3; ++k) d.pose = std::max(d.pose, std::abs(im.tvec[k] - b.images.at(id).tvec[k]));
    for (int k = 0; k < 4; ++k) d.pose = std::max(d.pose, std::abs(im.qvec[k] - b.images.at(id).qvec[k]));
  }
  for (const auto& [pid, p] : a.points3D)
    for (int k = 0; k < 3; ++k)
      d.point = std::max(d.point, std::abs(p.xyz[k] - b.points3D.at(pid).xyz[k]));
  return d;
}

// Every solver with 1 and 3 threads against dense with 1 thread. Sparse is the same
// factorisation of the same matrix: the same steps to rounding. Iterative stops CG at a
// relative residual of 1e-4, so its steps differ at that level; near the minimum they
// still converge to it, and the parameters agree to what the final cost's flatness lets
// through (the gauge is fixed by pose 1 and the scale by pose 2).
void CheckSolversAgree(const Reconstruction& start, const ReconstructionBAOptions& options,
                       const ReconstructionBAConfig& config, double iter_param_tol) {
  const SolveResult dense = Solve(start, options, config, ReconstructionLinearSolver::kDenseSchur, 1);
  EXPECT_LT(dense.summary.final_cost, dense.summary.initial_cost);
  for (int threads : {1, 3}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    const SolveResult dense_t = Solve(start, options, config, ReconstructionLinearSolver::kDenseSchur, threads);
    EXPECT_NEAR(dense_t.summary.final_cost, dense.summary.final_cost, 1e-9 * dense.summary.final_cost);
    const SolveResult sparse = Solve(start, options, config, ReconstructionLinearSolver::kSparseSchur, threads);
    EXPECT_EQ(sparse.summary.linear_iterations, 0);
    EXPECT_EQ(sparse.summary.iterations, dense.summary.iterations);
    {
      // The same steps: after 2 LM iterations (far from the minimum, where an inexact
      // solve would show) the two agree to rounding.
      ReconstructionBAOptions two = options;
      two.max_iterations = 2;
      const SolveResult d2 = Solve(start, two, config, ReconstructionLinearSolver::kDenseSchur, threads);
      const SolveResult s2 = Solve(start, two, config, ReconstructionLinearSolver::kSparseSchur, threads);
      EXPECT_NEAR(s2.summary.final_cost, d2.summary.final_cost, 1e-10 * d2.summary.final_cost);
      const Diff d = Compare(s2.rec, d2.rec);
      EXPECT_LT(d.focal, 1e-10);
      EXPECT_LT(d.pose, 1e-10);
      EXPECT_LT(d.point, 1e-10);
    }
    EXPECT_NEAR(sparse.summary.final_cost, dense.summary.final_cost, 1e-9 * dense.summary.final_cost);
    const Diff ds = Compare(sparse.rec, dense.rec);
    EXPECT_LT(ds.focal, 1e-9);
    EXPECT_LT(ds.pose, 1e-8);
    EXPECT_LT(ds.point, 1e-8);
    const SolveResult iter = Solve(start, options, config, ReconstructionLinearSolver::kIterativeSchur, threads);
    EXPECT_NEAR(iter.summary.final_cost, dense.summary.final_cost, 1e-6 * dense.summary.final_cost)
        << "iterations " << iter.summary.iterations << " CG " << iter.summary.linear_iterations;
    const Diff di = Compare(iter.rec, dense.rec);
    EXPECT_LT(di.focal, iter_param_tol);
    EXPECT_LT(di.pose, iter_param_tol);
    EXPECT_LT(di.point, iter_param_tol);
    if (config.variable_images.size() > config.fixed_pose_images.size())
      EXPECT_GT(iter.summary.linear_iterations, 0);
  }
}

ReconstructionBAOptions TightOptions() {
  ReconstructionBAOptions options;
  options.max_iterations = 100;
  options.function_tolerance = 1e-12;
  options.parameter_tolerance = 1e-14;
  return options;
}

ReconstructionBAConfig AllVariable(const Reconstruction& rec) {
  ReconstructionBAConfig config;
  for (const auto& [id, im] : rec.images) config.variable_images.insert(id);
  config.fixed_pose_images = {1, 2};
  config.only_points_of_variable_images = false;
  return config;
}

TEST(ReconstructionBASolvers, SharedIntrinsicsAgree) {
  std::mt19937 rng(7);
  Reconstruction rec = MakeScene(rng, 8, 150, 0.5);
  Perturb(rng, &rec);
  CheckSolversAgree(rec, TightOptions(), AllVariable(rec), 1e-5);
}

TEST(ReconstructionBASolvers, MixedPerImageAndSharedIntrinsicsAgree) {
  std::mt19937 rng(21);
  Reconstruction rec = MakeMixedScene(rng, 10, 150);
  ASSERT_EQ(rec.cameras.size(), 4u);
  Perturb(rng, &rec);
  ReconstructionBAOptions options = TightOptions();
  options.refine_principal_point = true;  // 4 free intrinsics per camera
  CheckSolversAgree(rec, options, AllVariable(rec), 1e-5);
}

TEST(ReconstructionBASolvers, LocalBundleWithFixedPartsAgrees) {
  // Local BA as the mapper runs it: a few variable images, fixed points, a fixed camera
  // among mixed ones; observations in other images are constraints.
  std::mt19937 rng(11);
  Reconstruction rec = MakeMixedScene(rng, 9, 120);
  Perturb(rng, &rec);
  ReconstructionBAOptions options = TightOptions();
  ReconstructionBAConfig config;
  config.variable_images = {2, 3, 4, 6, 9};
  config.fixed_pose_images = {2};
  config.fixed_points = {1, 2, 3, 50};
  config.fixed_cameras = {106};
  CheckSolversAgree(rec, options, config, 1e-5);
}

// FixedIntrinsicsAndPointsStayFixed with each solver: fixed parts bit-identical.
TEST(ReconstructionBASolvers, FixedIntrinsicsAndPointsStayFixed) {
  for (ReconstructionLinearSolver solver :
       {ReconstructionLinearSolver::kDenseSchur, ReconstructionLinearSolver::kSparseSchur,
        ReconstructionLinearSolver::kIterativeSchur}) {
    for (int threads : {1, 3}) {
      SCOPED_TRACE(std::string(ReconstructionLinearSolverName(solver)) + " threads " + std::to_string(threads));
      std::mt19937 rng(11);
      const Reconstruction before = MakeScene(rng, 5, 60, 0.3);
      ReconstructionBAOptions options;
      options.fix_intrinsics = true;
      ReconstructionBAConfig config;
      config.variable_images = {2, 3};
      config.fixed_points = {1, 2, 3};
      const SolveResult r = Solve(before, options, config, solver, threads);
      EXPECT_EQ(r.rec.cameras.at(1).params, before.cameras.at(1).params);
      for (uint64_t pid : {1, 2, 3})
        for (int k = 0; k < 3; ++k) EXPECT_EQ(r.rec.points3D.at(pid).xyz[k], before.points3D.at(pid).xyz[k]);
      for (uint32_t id : {1u, 4u, 5u})
        for (int k = 0; k < 3; ++k) EXPECT_EQ(r.rec.images.at(id).tvec[k], before.images.at(id).tvec[k]);
      EXPECT_LT(r.summary.final_cost, r.summary.initial_cost);
    }
  }
}

// Only points and intrinsics move (every pose fixed): the reduced system is the
// intrinsics block alone.
TEST(ReconstructionBASolvers, FixedPosesAgree) {
  std::mt19937 rng(5);
  Reconstruction rec = MakeMixedScene(rng, 6, 80);
  Perturb(rng, &rec);
  ReconstructionBAConfig config = AllVariable(rec);
  for (const auto& [id, im] : rec.images) config.fixed_pose_images.insert(id);
  CheckSolversAgree(rec, TightOptions(), config, 1e-5);
}

// OPENCV (fx, fy, cx, cy, k1, k2, p1, p2), every intrinsic free, against Ceres with one
// shared block of all eight differentiated automatically through the same templated
// projection (io/reconstruction.h), from the same start.
// kOneFocal: intr = (f, cx, cy, k1, k2, p1, p2), fx = fy = f (HeldAspectRatio... below);
// else all eight of OPENCV's parameters.
// kModel: OPENCV, or OPENCV_FISHEYE (fx, fy, cx, cy, k1..k4) the same way.
// kNumParams: the model's parameter count (FULL_OPENCV, THIN_PRISM_FISHEYE: 12; FOV: 5).
template <bool kOneFocal, CameraModelId kModel = CameraModelId::kOpenCV, int kNumParams = 8>
struct CeresOpenCVResidual {
  CeresOpenCVResidual(double x, double y) : x(x), y(y) {}
  template <typename T>
  bool operator()(const T* pose, const T* intr, const T* point, T* r) const {
    T P[3];
    CameraFramePoint(pose, point, P);
    T p[kNumParams];
    for (int k = 0; k < kNumParams; ++k) p[k] = kOneFocal ? intr[k == 0 ? 0 : k - 1] : intr[k];
    T px, py;
    CameraNormalizedToPixel(kModel, p, P[0] / P[2], P[1] / P[2], &px, &py);
    r[0] = px - T(x);
    r[1] = py - T(y);
    return true;
  }
  double x, y;
};

Camera OpenCVCamera() {
  Camera cam;
  cam.model = CameraModelId::kOpenCV;
  cam.params = {420, 430, 322, 238, -0.12, 0.04, 0.002, -0.0015};
  return cam;
}

// All kN intrinsics of truth_cam (kModel: OPENCV, OPENCV_FISHEYE, FULL_OPENCV, FOV or
// THIN_PRISM_FISHEYE) free and shared by 12 images seeing a cloud out to 0.8 of the image's
// half-width (half-width 2.2 at distance 5, so that the distortion is seen), from a
// perturbed start with the distortion zeroed (FOV's omega at 0.01): tiepoint's minimum is
// Ceres's with one block of the kN (cost to 1e-6, parameters to param_tol relative,
// translations to pose_tol). *got: tiepoint's parameters, for the caller's checks against
// the truth.
template <CameraModelId kModel, int kN = 8>
void ExpectAllIntrinsicsMatchCeres(uint64_t seed, const Camera& truth_cam, double param_tol, double pose_tol,
                                   std::vector<double>* got) {
  std::mt19937 rng(seed);
  const Reconstruction truth = MakeScene(rng, 12, 300, 0.3, &truth_cam, 2.2);
  Reconstruction start = truth;
  Perturb(rng, &start);
  ASSERT_EQ(start.cameras.at(1).params.size(), size_t{kN});
  ASSERT_NE(start.cameras.at(1).params[4], truth_cam.params[4]);  // distortion zeroed
  ReconstructionBAOptions options;
  options.max_iterations = 200;
  options.function_tolerance = 1e-14;
  options.parameter_tolerance = 1e-15;
  options.refine_principal_point = true;
  const ReconstructionBAConfig config = FirstPoseHeld(start);
  Reconstruction rec = start;
  ReconstructionBASummary summary;
  ASSERT_TRUE(BundleAdjustReconstruction(options, config, &rec, &summary).ok());
  // Noise 0.3 px: 1/2 sum r^2 is about 0.045 per residual at the truth.
  EXPECT_LT(summary.final_cost, 0.045 * 1.2 * summary.num_residuals);

  std::map<uint32_t, std::array<double, 6>> poses;
  std::vector<double> intr = start.cameras.at(1).params;
  const ceres::Solver::Summary cs =
      SolveWithCeres<CeresOpenCVResidual<false, kModel, kN>, kN>(start, intr.data(), 300, 1e-15, &poses);
  EXPECT_NEAR(summary.final_cost, cs.final_cost, 1e-6 * cs.final_cost)
      << "tiepoint " << summary.final_cost << " ceres " << cs.final_cost;
  *got = rec.cameras.at(1).params;
  for (int q = 0; q < kN; ++q)
    EXPECT_NEAR((*got)[q], intr[q], param_tol * std::max(1.0, std::abs(intr[q]))) << "parameter " << q;
  for (const auto& [id, im] : rec.images)
    for (int k = 0; k < 3; ++k) EXPECT_NEAR(im.tvec[k], poses[id][3 + k], pose_tol) << "image " << id;
}

TEST(ReconstructionBA, OpenCVSharedIntrinsicsMatchCeres) {
  const Camera truth_cam = OpenCVCamera();
  std::vector<double> got;
  ASSERT_NO_FATAL_FAILURE(
      ExpectAllIntrinsicsMatchCeres<CameraModelId::kOpenCV>(17, truth_cam, 1e-4, 1e-5, &got));
  const std::vector<double>& want = truth_cam.params;
  for (int q = 0; q < 8; ++q) {
    // Near the truth (noise 0.3 px).
    const double tol = q < 2 ? 0.01 * want[q] : q < 4 ? 3.0 : q < 6 ? 0.02 : 0.001;
    EXPECT_NEAR(got[q], want[q], tol) << "parameter " << q;
  }
}

// OPENCV_FISHEYE (fx, fy, cx, cy, k1..k4) the same way, through the same templated
// projection: the same minimum, and both near the truth (the scene spans 47 degrees, where
// the k's act; k3, k4 are weakly determined there, hence the looser agreement).
TEST(ReconstructionBA, OpenCVFisheyeSharedIntrinsicsMatchCeres) {
  Camera truth_cam;
  truth_cam.model = CameraModelId::kOpenCVFisheye;
  truth_cam.params = {420, 430, 322, 238, 0.06, -0.03, 0.0, 0.0};
  std::vector<double> got;
  ASSERT_NO_FATAL_FAILURE(
      ExpectAllIntrinsicsMatchCeres<CameraModelId::kOpenCVFisheye>(31, truth_cam, 1e-3, 1e-4, &got));
  const std::vector<double>& want = truth_cam.params;
  for (int q = 0; q < 6; ++q) {
    const double tol = q < 2 ? 0.01 * want[q] : q < 4 ? 3.0 : 0.03;
    EXPECT_NEAR(got[q], want[q], tol) << "parameter " << q;
  }
  // The equidistant start is far from it: the k's were needed.
  EXPECT_GT(std::abs(got[4]), 0.03);
}

// FULL_OPENCV (fx, fy, cx, cy, k1, k2, p1, p2, k3, k4, k5, k6), all twelve free: Ceres's
// minimum through the templated projection. The rational terms trade off against each
// other over this field of view (k1..k3 against k4..k6), so only the image of the lens,
// not each term, is compared with the truth: the distorted radius at the image's edge.
TEST(ReconstructionBA, FullOpenCVSharedIntrinsicsMatchCeres) {
  Camera truth_cam;
  truth_cam.model = CameraModelId::kFullOpenCV;
  truth_cam.params = {420, 430, 322, 238, -0.12, 0.04, 0.002, -0.0015, 0.0, 0.05, 0.0, 0.0};
  std::vector<double> got;
  ASSERT_NO_FATAL_FAILURE(
      (ExpectAllIntrinsicsMatchCeres<CameraModelId::kFullOpenCV, 12>(41, truth_cam, 1e-3, 1e-4, &got)));
  for (int q = 0; q < 4; ++q) EXPECT_NEAR(got[q], truth_cam.params[q], q < 2 ? 0.01 * truth_cam.params[q] : 3.0);
  for (const double u : {0.2, 0.4, 0.6}) {
    double a, b, c, d;
    CameraNormalizedToPixel(CameraModelId::kFullOpenCV, got.data(), u, 0.0, &a, &b);
    CameraNormalizedToPixel(CameraModelId::kFullOpenCV, truth_cam.params.data(), u, 0.0, &c, &d);
    EXPECT_NEAR(a, c, 1.0) << "u = " << u;
  }
}

// THIN_PRISM_FISHEYE, all twelve free, the same way; and FOV (fx, fy, cx, cy, omega) from
// omega = 0.01 (COLMAP's start) to a fisheye's 0.8.
TEST(ReconstructionBA, ThinPrismFisheyeAndFovSharedIntrinsicsMatchCeres) {
  {
    SCOPED_TRACE("THIN_PRISM_FISHEYE");
    Camera truth_cam;
    truth_cam.model = CameraModelId::kThinPrismFisheye;
    truth_cam.params = {420, 430, 322, 238, 0.06, -0.03, 0.002, -0.0015, 0.0, 0.0, 0.001, -0.001};
    std::vector<double> got;
    ASSERT_NO_FATAL_FAILURE(
        (ExpectAllIntrinsicsMatchCeres<CameraModelId::kThinPrismFisheye, 12>(43, truth_cam, 1e-3, 1e-4, &got)));
    // Its prism and tangential terms trade off against the principal point (and that
    // against the cameras' rotations) over this field of view: the principal point within
    // 4 px, and the image of the lens about it within 1 px of the truth's.
    for (int q = 0; q < 4; ++q) EXPECT_NEAR(got[q], truth_cam.params[q], q < 2 ? 0.01 * truth_cam.params[q] : 4.0);
    double a0, b0, c0, d0;
    CameraNormalizedToPixel(CameraModelId::kThinPrismFisheye, got.data(), 0.0, 0.0, &a0, &b0);
    CameraNormalizedToPixel(CameraModelId::kThinPrismFisheye, truth_cam.params.data(), 0.0, 0.0, &c0, &d0);
    for (const auto& [u, v] : {std::pair<double, double>{0.4, 0.0}, {0.0, 0.4}, {-0.3, 0.3}}) {
      double a, b, c, d;
      CameraNormalizedToPixel(CameraModelId::kThinPrismFisheye, got.data(), u, v, &a, &b);
      CameraNormalizedToPixel(CameraModelId::kThinPrismFisheye, truth_cam.params.data(), u, v, &c, &d);
      EXPECT_NEAR(a - a0, c - c0, 1.0) << u << ", " << v;
      EXPECT_NEAR(b - b0, d - d0, 1.0) << u << ", " << v;
    }
  }
  {
    SCOPED_TRACE("FOV");
    Camera truth_cam;
    truth_cam.model = CameraModelId::kFov;
    truth_cam.params = {420, 430, 322, 238, 0.8};
    std::vector<double> got;
    ASSERT_NO_FATAL_FAILURE((ExpectAllIntrinsicsMatchCeres<CameraModelId::kFov, 5>(47, truth_cam, 1e-4, 1e-5, &got)));
    EXPECT_NEAR(got[4], 0.8, 0.01);
    EXPECT_NEAR(got[0], 420, 4.2);
  }
}

// hold_aspect_ratio: OPENCV with fx and fy moving together (square pixels, fx = fy at the
// start) against Ceres with one focal length in a 7-parameter block (f, cx, cy, k1, k2, p1,
// p2): the same minimum, and fy / fx as it started, to rounding.
TEST(ReconstructionBA, HeldAspectRatioMatchesCeresWithOneFocalLength) {
  std::mt19937 rng(29);
  Camera truth_cam = OpenCVCamera();
  truth_cam.params[1] = truth_cam.params[0];  // square pixels
  const Reconstruction truth = MakeScene(rng, 12, 300, 0.3, &truth_cam, 2.2);
  Reconstruction start = truth;
  Perturb(rng, &start);
  start.cameras.at(1).params[1] = start.cameras.at(1).params[0];
  ReconstructionBAOptions options;
  options.max_iterations = 200;
  options.function_tolerance = 1e-14;
  options.parameter_tolerance = 1e-15;
  options.refine_principal_point = true;
  options.hold_aspect_ratio = true;
  const ReconstructionBAConfig config = FirstPoseHeld(start);
  Reconstruction rec = start;
  ReconstructionBASummary summary;
  ASSERT_TRUE(BundleAdjustReconstruction(options, config, &rec, &summary).ok());
  const std::vector<double>& got = rec.cameras.at(1).params;
  EXPECT_EQ(got[1], got[0]);  // the ratio 1 held exactly
  EXPECT_NE(got[0], start.cameras.at(1).params[0]);

  std::map<uint32_t, std::array<double, 6>> poses;
  const std::vector<double>& s0 = start.cameras.at(1).params;
  std::vector<double> intr = {s0[0], s0[2], s0[3], s0[4], s0[5], s0[6], s0[7]};
  const ceres::Solver::Summary cs =
      SolveWithCeres<CeresOpenCVResidual<true>, 7>(start, intr.data(), 300, 1e-15, &poses);
  EXPECT_NEAR(summary.final_cost, cs.final_cost, 1e-6 * cs.final_cost)
      << "tiepoint " << summary.final_cost << " ceres " << cs.final_cost;
  const double mine[7] = {got[0], got[2], got[3], got[4], got[5], got[6], got[7]};
  for (int q = 0; q < 7; ++q)
    EXPECT_NEAR(mine[q], intr[q], 1e-4 * std::max(1.0, std::abs(intr[q]))) << "parameter " << q;
  EXPECT_NEAR(got[0], truth_cam.params[0], 0.01 * truth_cam.params[0]);
  // Free, the two focal lengths part (the noise's doing) and the cost falls a little more.
  Reconstruction free_rec = start;
  options.hold_aspect_ratio = false;
  ReconstructionBASummary free_summary;
  ASSERT_TRUE(BundleAdjustReconstruction(options, config, &free_rec, &free_summary).ok());
  EXPECT_NE(free_rec.cameras.at(1).params[1], free_rec.cameras.at(1).params[0]);
  EXPECT_LE(free_summary.final_cost, summary.final_cost);
}

// rec perturbed, then adjusted with every intrinsic free (the principal point too) by each
// linear solver: they agree.
void PerturbAndCheckSolversAgreeWithEveryIntrinsic(std::mt19937& rng, Reconstruction* rec) {
  Perturb(rng, rec);
  ReconstructionBAOptions options = TightOptions();
  options.refine_principal_point = true;
  CheckSolversAgree(*rec, options, AllVariable(*rec), 1e-4);
}

// The linear solvers agree on OPENCV cameras too (per-image and shared, 8 free intrinsics).
TEST(ReconstructionBASolvers, OpenCVCamerasAgree) {
  std::mt19937 rng(23);
  const Camera cam = OpenCVCamera();
  Reconstruction rec = MakeScene(rng, 9, 150, 0.5, &cam);
  for (auto& [id, im] : rec.images) {
    if (id % 4 != 0) continue;
    Camera own = rec.cameras.at(1);
    own.camera_id = 100 + id;
    rec.cameras[own.camera_id] = own;
    im.camera_id = own.camera_id;
  }
  PerturbAndCheckSolversAgreeWithEveryIntrinsic(rng, &rec);
}

// Every third image of rec gets a camera of its own (id 100 + image id, 640 x 480): the
// model and parameters that own(image id) gives.
void GiveEveryThirdImageItsOwnCamera(Reconstruction* rec,
                                     const std::function<std::pair<CameraModelId, std::vector<double>>(uint32_t)>& own) {
  for (auto& [id, im] : rec->images) {
    if (id % 3 != 0) continue;
    Camera cam;
    cam.camera_id = 100 + id;
    cam.width = 640;
    cam.height = 480;
    std::tie(cam.model, cam.params) = own(id);
    rec->cameras[cam.camera_id] = cam;
    im.camera_id = cam.camera_id;
  }
}

// One LM step (least squares) from the dense normal equations, built here from
// ReconstructionResidual's Jacobians alone: (J^T J + mu diag(J^T J)) dx = -J^T r over the
// free poses (6 each), each camera's free intrinsics (focal lengths, principal point with
// refine_principal_point, every distortion term) and every point. The solvers share the
// reduced system's assembly (U, W, the Schur complement), so agreeing with one another
// says nothing about it; this does. Returned per kind: the translations' steps (the
// rotations' are left-multiplicative), the intrinsics' and the points'.
struct DenseStep {
  std::map<uint32_t, Eigen::Vector3d> t;
  std::map<uint32_t, std::vector<double>> params;
  std::map<uint64_t, Eigen::Vector3d> X;
};
DenseStep DenseNormalEquationsStep(const Reconstruction& rec, const ReconstructionBAOptions& options,
                                   const ReconstructionBAConfig& config) {
  std::map<uint32_t, int> pose_col, cam_col;
  std::map<uint32_t, std::vector<int>> free;
  std::map<uint64_t, int> point_col;
  int n = 0;
  for (const auto& [id, im] : rec.images)
    if (!config.fixed_pose_images.count(id)) pose_col[id] = (n += 6) - 6;
  for (const auto& [cid, cam] : rec.cameras) {
    std::vector<int> f = {0};
    if (CameraModelHasTwoFocals(cam.model)) f.push_back(1);
    const int pp = static_cast<int>(f.size());
    if (options.refine_principal_point) f.insert(f.end(), {pp, pp + 1});
    for (int q = CameraModelDistortionBegin(cam.model); q < CameraModelNumParams(cam.model); ++q) f.push_back(q);
    free[cid] = f;
    cam_col[cid] = n;
    n += static_cast<int>(f.size());
  }
  for (const auto& [pid, p] : rec.points3D) point_col[pid] = (n += 3) - 3;
  Eigen::MatrixXd A = Eigen::MatrixXd::Zero(n, n);
  Eigen::VectorXd g = Eigen::VectorXd::Zero(n);
  for (const auto& [pid, p] : rec.points3D)
    for (const TrackElement& e : p.track) {
      const Image& im = rec.images.at(e.image_id);
      const Camera& cam = rec.cameras.at(im.camera_id);
      double R[9], r[2], jpose[12], jpoint[6], jparams[2 * 12];
      QuaternionToRotation(im.qvec, R);
      const Point2D& obs = im.points2D[e.point2D_idx];
      const double xy[2] = {obs.x, obs.y};
      ReconstructionResidual(cam.model, cam.params.data(), R, im.tvec, p.xyz, xy, r, jpose, jpoint, jparams);
      const int np = CameraModelNumParams(cam.model);
      Eigen::MatrixXd J = Eigen::MatrixXd::Zero(2, n);
      for (int row = 0; row < 2; ++row) {
        if (pose_col.count(e.image_id))
          for (int q = 0; q < 6; ++q) J(row, pose_col[e.image_id] + q) = jpose[6 * row + q];
        const std::vector<int>& f = free[im.camera_id];
        for (size_t q = 0; q < f.size(); ++q) J(row, cam_col[im.camera_id] + static_cast<int>(q)) = jparams[np * row + f[q]];
        for (int q = 0; q < 3; ++q) J(row, point_col[pid] + q) = jpoint[3 * row + q];
      }
      A += J.transpose() * J;
      g -= J.transpose() * Eigen::Vector2d(r[0], r[1]);
    }
  Eigen::MatrixXd damped = A;
  for (int q = 0; q < n; ++q) damped(q, q) += options.initial_mu * std::min(std::max(A(q, q), 1e-6), 1e32);
  const Eigen::VectorXd dx = damped.ldlt().solve(g);
  DenseStep step;
  for (const auto& [id, c] : pose_col) step.t[id] = dx.segment<3>(c + 3);
  for (const auto& [cid, c] : cam_col) {
    std::vector<double> d(rec.cameras.at(cid).params.size(), 0.0);
    for (size_t q = 0; q < free[cid].size(); ++q) d[free[cid][q]] = dx[c + static_cast<int>(q)];
    step.params[cid] = d;
  }
  for (const auto& [pid, c] : point_col) step.X[pid] = dx.segment<3>(c);
  return step;
}

// The first LM step of the CPU's linear solvers, 1 and 3 threads, equals the dense normal
// equations' step (to 1e-7 of the step's size), where the reduced system's blocks take
// every shape: OPENCV cameras with the principal point held have 6 free intrinsics, as
// wide as a pose (its block with a pose, and with itself, beside the pose's own), shared
// by most images and the images' own for every third one; the first two images' poses are
// held (their observations have an intrinsics block only).
TEST(ReconstructionBA, FirstStepSolvesTheDenseNormalEquations) {
  for (const bool own_cameras : {false, true}) {
    for (const bool principal_point : {false, true}) {
      SCOPED_TRACE(std::string(own_cameras ? "per-image and shared" : "shared") + " OPENCV, principal point " +
                   (principal_point ? "free" : "held"));
      std::mt19937 rng(own_cameras ? 41 : 43);
      const Camera cam = OpenCVCamera();
      Reconstruction rec = MakeScene(rng, 7, 60, 0.5, &cam);
      if (own_cameras)
        GiveEveryThirdImageItsOwnCamera(&rec, [&](uint32_t) { return std::make_pair(cam.model, cam.params); });
      Perturb(rng, &rec, 0.5);
      ReconstructionBAOptions options;
      options.max_iterations = 1;
      options.refine_principal_point = principal_point;
      const ReconstructionBAConfig config = AllVariable(rec);
      const DenseStep want = DenseNormalEquationsStep(rec, options, config);
      double scale = 0;
      for (const auto& [pid, d] : want.X) scale = std::max(scale, d.cwiseAbs().maxCoeff());
      ASSERT_GT(scale, 1e-4);
      // The iterative solver too, its CG run to 1e-12 (its preconditioner takes the reduced
      // system's diagonal blocks, its products the rest matrix-free).
      for (ReconstructionLinearSolver solver : {ReconstructionLinearSolver::kDenseSchur, ReconstructionLinearSolver::kSparseSchur,
                                                ReconstructionLinearSolver::kIterativeSchur}) {
        for (int threads : {1, 3}) {
          SCOPED_TRACE(std::string(ReconstructionLinearSolverName(solver)) + ", threads " + std::to_string(threads));
          ReconstructionBAOptions solver_options = options;
          solver_options.pcg_relative_tolerance = 1e-12;
          solver_options.pcg_max_iterations = 2000;
          const SolveResult got = Solve(rec, solver_options, config, solver, threads);
          ASSERT_LT(got.summary.final_cost, got.summary.initial_cost);  // the step was taken
          double worst = 0;
          for (const auto& [pid, d] : want.X)
            for (int k = 0; k < 3; ++k)
              worst = std::max(worst, std::abs(got.rec.points3D.at(pid).xyz[k] - rec.points3D.at(pid).xyz[k] - d[k]));
          EXPECT_LT(worst, 1e-7 * scale) << "points";
          worst = 0;
          for (const auto& [id, d] : want.t)
            for (int k = 0; k < 3; ++k)
              worst = std::max(worst, std::abs(got.rec.images.at(id).tvec[k] - rec.images.at(id).tvec[k] - d[k]));
          EXPECT_LT(worst, 1e-7 * scale) << "translations";
          for (const auto& [cid, d] : want.params)
            for (size_t q = 0; q < d.size(); ++q)
              EXPECT_NEAR(got.rec.cameras.at(cid).params[q] - rec.cameras.at(cid).params[q], d[q],
                          1e-7 * std::max(1.0, std::abs(d[q])))
                  << "camera " << cid << " parameter " << q;
        }
      }
    }
  }
}

// The linear solvers agree on the fisheye models (OPENCV_FISHEYE shared, and per-image
// SIMPLE_RADIAL_FISHEYE and RADIAL_FISHEYE cameras beside it).
TEST(ReconstructionBASolvers, FisheyeCamerasAgree) {
  std::mt19937 rng(37);
  Camera cam;
  cam.model = CameraModelId::kOpenCVFisheye;
  cam.params = {420, 430, 322, 238, 0.06, -0.03, 0.004, -0.001};
  Reconstruction rec = MakeScene(rng, 9, 150, 0.5, &cam, 2.2);
  GiveEveryThirdImageItsOwnCamera(&rec, [](uint32_t id) {
    return id % 2 ? std::make_pair(CameraModelId::kSimpleRadialFisheye, std::vector<double>{425, 320, 240, 0.05})
                  : std::make_pair(CameraModelId::kRadialFisheye, std::vector<double>{425, 320, 240, 0.05, -0.02});
  });
  PerturbAndCheckSolversAgreeWithEveryIntrinsic(rng, &rec);
}

// The linear solvers agree on THIN_PRISM_FISHEYE (shared, twelve free intrinsics: the
// widest block) beside per-image FOV cameras. (FULL_OPENCV's twelve are weakly determined
// by any one scene: its numerator and denominator both times 1 + e r^2, less their r^8
// terms, are nearly the same lens; the exact solvers part at 4e-9 on it, and its Ceres
// test above holds it.)
TEST(ReconstructionBASolvers, ThinPrismAndFovCamerasAgree) {
  std::mt19937 rng(53);
  Camera cam;
  cam.model = CameraModelId::kThinPrismFisheye;
  cam.params = {420, 430, 322, 238, 0.05, -0.02, 0.002, -0.001, 0.004, -0.001, 0.001, -0.001};
  Reconstruction rec = MakeScene(rng, 9, 150, 0.5, &cam, 2.2);
  GiveEveryThirdImageItsOwnCamera(&rec, [](uint32_t) {
    return std::make_pair(CameraModelId::kFov, std::vector<double>{425, 430, 320, 240, 0.7});
  });
  PerturbAndCheckSolversAgreeWithEveryIntrinsic(rng, &rec);
}

// A corridor of images with local visibility (sparse S). Size from
// TIEPOINT_BA_CORRIDOR_IMAGES (default 40) so that it can be run by hand at several
// hundred images; the printed seconds are for reading, not checked. At 400 images no solver
// converges in 100 LM steps (the gauge is held at one end of a long chain), so the
// iterative-vs-dense cost check fails there by ~5e-4 relative: a timing run, not a check.
TEST(ReconstructionBASolvers, CorridorAgrees) {
  int n = 40;
  if (const char* e = std::getenv("TIEPOINT_BA_CORRIDOR_IMAGES")) n = std::max(4, std::atoi(e));
  std::mt19937 rng(3);
  Reconstruction rec = MakeCorridor(rng, n, 20);
  Perturb(rng, &rec, 0.2);  // near the minimum, as the mapper's bundles start
  ReconstructionBAOptions options;  // the mapper's tolerances
  options.max_iterations = 100;
  const ReconstructionBAConfig config = AllVariable(rec);
  SolveResult r[3];
  const ReconstructionLinearSolver solvers[3] = {ReconstructionLinearSolver::kDenseSchur,
                                                 ReconstructionLinearSolver::kSparseSchur,
                                                 ReconstructionLinearSolver::kIterativeSchur};
  for (int s = 0; s < 3; ++s) {
    r[s] = Solve(rec, options, config, solvers[s], 1);
    std::printf("corridor %d images, %d residuals, %s: %d iterations (CG %d), cost %.6g -> %.9g, %.3f s\n",
                n, r[s].summary.num_residuals, ReconstructionLinearSolverName(solvers[s]),
                r[s].summary.iterations, r[s].summary.linear_iterations, r[s].summary.initial_cost,
                r[s].summary.final_cost, r[s].summary.seconds);
  }
  // Noise 0.5 px: 1/2 sum r^2 is about 0.125 per residual at the truth.
  EXPECT_LT(r[0].summary.final_cost, 0.125 * r[0].summary.num_residuals);
  EXPECT_NEAR(r[1].summary.final_cost, r[0].summary.final_cost, 1e-9 * r[0].summary.final_cost);
  EXPECT_NEAR(r[2].summary.final_cost, r[0].summary.final_cost, 1e-6 * r[0].summary.final_cost);
}

// iterative-cuda against iterative (the CPU reference of the same CG) and dense. With CG
// run to 1e-10 the two take the same LM steps to rounding: checked after 2 LM iterations,
// far from the minimum, where a wrong product would show (`exact_steps`; not on the long
// corridor, whose reduced system CG does not take to 1e-10 in reasonable time). At a CG
// tolerance of 1e-4 rounding differences grow over many CG iterations, as between
// the CPU solver's thread counts: the final costs agree as iterative's agree with dense's.
// Skips without a GPU.
bool CudaAvailable() {
  std::unique_ptr<CudaReducedPcg> pcg;
  return CreateCudaReducedPcg(&pcg).ok();
}

void CheckCudaMatchesCpu(const Reconstruction& start, const ReconstructionBAOptions& options,
                         const ReconstructionBAConfig& config, bool exact_steps) {
  if (exact_steps) {
    ReconstructionBAOptions two = options;
    two.max_iterations = 2;
    two.pcg_relative_tolerance = 1e-10;
    two.pcg_max_iterations = 20000;
    const SolveResult c2 = Solve(start, two, config, ReconstructionLinearSolver::kIterativeSchur, 2);
    const SolveResult g2 = Solve(start, two, config, ReconstructionLinearSolver::kIterativeSchurCuda, 2);
    const SolveResult d2 = Solve(start, two, config, ReconstructionLinearSolver::kDenseSchur, 2);
    EXPECT_NEAR(g2.summary.final_cost, c2.summary.final_cost, 1e-9 * c2.summary.final_cost);
    EXPECT_NEAR(g2.summary.final_cost, d2.summary.final_cost, 1e-8 * d2.summary.final_cost);
    EXPECT_LT(g2.summary.final_cost, 0.5 * g2.summary.initial_cost);
    for (const Diff& d : {Compare(g2.rec, c2.rec), Compare(g2.rec, d2.rec)}) {
      EXPECT_LT(d.focal, 1e-7);
      EXPECT_LT(d.pose, 1e-7);
      EXPECT_LT(d.point, 1e-7);
    }
  }
  ReconstructionBAOptions tight_cg = options;  // the tolerance these bounds were set for
  tight_cg.pcg_relative_tolerance = 1e-4;
  const SolveResult c = Solve(start, tight_cg, config, ReconstructionLinearSolver::kIterativeSchur, 2);
  const SolveResult g = Solve(start, tight_cg, config, ReconstructionLinearSolver::kIterativeSchurCuda, 2);
  const SolveResult dense = Solve(start, tight_cg, config, ReconstructionLinearSolver::kDenseSchur, 2);
  EXPECT_NEAR(g.summary.final_cost, c.summary.final_cost, 1e-6 * c.summary.final_cost);
  EXPECT_NEAR(g.summary.final_cost, dense.summary.final_cost, 1e-6 * dense.summary.final_cost);
  EXPECT_GT(g.summary.linear_iterations, 0);
  std::printf("cuda vs cpu PCG: %d vs %d LM iterations, %d vs %d CG iterations, cost %.12g vs %.12g (dense %.12g)\n",
              g.summary.iterations, c.summary.iterations, g.summary.linear_iterations,
              c.summary.linear_iterations, g.summary.final_cost, c.summary.final_cost,
              dense.summary.final_cost);
}

TEST(ReconstructionBASolversCuda, MatchesCpuIterative) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA device (or a build without CUDA)";
  {
    SCOPED_TRACE("one shared camera");
    std::mt19937 rng(7);
    Reconstruction rec = MakeScene(rng, 8, 150, 0.5);
    Perturb(rng, &rec);
    CheckCudaMatchesCpu(rec, TightOptions(), AllVariable(rec), true);
  }
  {
    SCOPED_TRACE("mixed per-image and shared cameras, principal point free");
    std::mt19937 rng(21);
    Reconstruction rec = MakeMixedScene(rng, 10, 150);
    Perturb(rng, &rec);
    ReconstructionBAOptions options = TightOptions();
    options.refine_principal_point = true;
    CheckCudaMatchesCpu(rec, options, AllVariable(rec), true);
  }
  {
    SCOPED_TRACE("OPENCV cameras, every intrinsic free");
    std::mt19937 rng(23);
    const Camera cam = OpenCVCamera();
    Reconstruction rec = MakeScene(rng, 9, 150, 0.5, &cam);
    Perturb(rng, &rec);
    ReconstructionBAOptions options = TightOptions();
    options.refine_principal_point = true;
    CheckCudaMatchesCpu(rec, options, AllVariable(rec), true);
  }
  {
    SCOPED_TRACE("OPENCV_FISHEYE cameras, every intrinsic free");
    std::mt19937 rng(37);
    Camera cam;
    cam.model = CameraModelId::kOpenCVFisheye;
    cam.params = {420, 430, 322, 238, 0.06, -0.03, 0.004, -0.001};
    Reconstruction rec = MakeScene(rng, 9, 150, 0.5, &cam, 2.2);
    Perturb(rng, &rec);
    ReconstructionBAOptions options = TightOptions();
    options.refine_principal_point = true;
    CheckCudaMatchesCpu(rec, options, AllVariable(rec), true);
  }
  {
    SCOPED_TRACE("THIN_PRISM_FISHEYE cameras (12-wide intrinsics blocks), every intrinsic free");
    std::mt19937 rng(53);
    Camera cam;
    cam.model = CameraModelId::kThinPrismFisheye;
    cam.params = {420, 430, 322, 238, 0.05, -0.02, 0.002, -0.001, 0.004, -0.001, 0.001, -0.001};
    Reconstruction rec = MakeScene(rng, 12, 300, 0.5, &cam, 2.2);
    Perturb(rng, &rec);
    ReconstructionBAOptions options = TightOptions();
    options.refine_principal_point = true;
    CheckCudaMatchesCpu(rec, options, AllVariable(rec), true);
  }
  {
    SCOPED_TRACE("local bundle with fixed parts");
    std::mt19937 rng(11);
    Reconstruction rec = MakeMixedScene(rng, 9, 120);
    Perturb(rng, &rec);
    ReconstructionBAConfig config;
    config.variable_images = {2, 3, 4, 6, 9};
    config.fixed_pose_images = {2};
    config.fixed_points = {1, 2, 3, 50};
    config.fixed_cameras = {106};
    CheckCudaMatchesCpu(rec, TightOptions(), config, true);
  }
  {
    SCOPED_TRACE("corridor of 120 images");
    std::mt19937 rng(3);
    Reconstruction rec = MakeCorridor(rng, 120, 20);
    Perturb(rng, &rec, 0.2);
    ReconstructionBAOptions options;
    options.max_iterations = 100;
    CheckCudaMatchesCpu(rec, options, AllVariable(rec), false);
  }
}

TEST(ReconstructionBASolversCuda, WithoutGpuSaysWhatToUse) {
  if (CudaAvailable()) GTEST_SKIP() << "a CUDA device is present";
  std::mt19937 rng(7);
  Reconstruction rec = MakeScene(rng, 4, 40, 0.5);
  ReconstructionBAOptions options;
  options.linear_solver = ReconstructionLinearSolver::kIterativeSchurCuda;
  options.cuda_min_observations = 0;
  ReconstructionBASummary summary;
  const Status s = BundleAdjustReconstruction(options, AllVariable(rec), &rec, &summary);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("--ba-solver iterative"), std::string::npos) << s.message();
}

// Below cuda_min_observations iterative-cuda is iterative on the CPU: the same result bit
// for bit, with or without a GPU.
TEST(ReconstructionBASolversCuda, SmallBundlesRunOnTheCpu) {
  std::mt19937 rng(7);
  Reconstruction start = MakeScene(rng, 6, 100, 0.5);
  Perturb(rng, &start);
  Reconstruction a = start, b = start;
  ReconstructionBAOptions options;
  ASSERT_GT(options.cuda_min_observations, 1000);  // the scene has fewer observations
  ReconstructionBASummary sa, sb;
  options.linear_solver = ReconstructionLinearSolver::kIterativeSchurCuda;
  ASSERT_TRUE(BundleAdjustReconstruction(options, AllVariable(start), &a, &sa).ok());
  options.linear_solver = ReconstructionLinearSolver::kIterativeSchur;
  ASSERT_TRUE(BundleAdjustReconstruction(options, AllVariable(start), &b, &sb).ok());
  EXPECT_EQ(sa.final_cost, sb.final_cost);
  EXPECT_EQ(sa.linear_iterations, sb.linear_iterations);
  EXPECT_LT(sa.final_cost, sa.initial_cost);
  ReconstructionBAOptions bad;
  bad.cuda_min_observations = -1;
  EXPECT_FALSE(bad.Check().ok());
}

TEST(ReconstructionBASolvers, NamesAndOptions) {
  ReconstructionLinearSolver s;
  ASSERT_TRUE(ReconstructionLinearSolverFromName("sparse", &s).ok());
  EXPECT_EQ(s, ReconstructionLinearSolver::kSparseSchur);
  ASSERT_TRUE(ReconstructionLinearSolverFromName("iterative", &s).ok());
  EXPECT_EQ(s, ReconstructionLinearSolver::kIterativeSchur);
  ASSERT_TRUE(ReconstructionLinearSolverFromName("iterative-cuda", &s).ok());
  EXPECT_EQ(s, ReconstructionLinearSolver::kIterativeSchurCuda);
  EXPECT_STREQ(ReconstructionLinearSolverName(s), "iterative-cuda");
  ASSERT_TRUE(ReconstructionLinearSolverFromName("dense", &s).ok());
  EXPECT_EQ(s, ReconstructionLinearSolver::kDenseSchur);
  EXPECT_FALSE(ReconstructionLinearSolverFromName("cholesky", &s).ok());
  ReconstructionBAOptions o;
  o.pcg_relative_tolerance = 0;
  EXPECT_FALSE(o.Check().ok());
  o.pcg_relative_tolerance = 1e-3;
  o.pcg_max_iterations = 0;
  EXPECT_FALSE(o.Check().ok());
}

}  // namespace
}  // namespace tiepoint
