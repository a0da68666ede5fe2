// sfm_eval: accuracy of a COLMAP sparse model (tiepoint's or COLMAP's own) against ground
// truth cameras, as one JSON object on stdout.
//
//   sfm_eval MODEL_DIR --gt-par FILE            Middlebury *_par.txt layout (x = K [R|t] X)
//   sfm_eval MODEL_DIR --gt-bundler FILE --names a.jpg,b.jpg,...   Bundler .out, cameras in that order
//   sfm_eval MODEL_DIR --gt-kitti POSES.txt     KITTI poses (cam-to-world 3x4 per frame;
//                                               image NNNNNN.png is frame NNNNNN)
//
// Figures: images registered (matched to the ground truth by name, or for an image of a
// folder's subfolder, "a/x.png", by its file name); after a
// similarity (Umeyama) of the estimated camera centres onto the true ones: rotation error
// per image (degrees: angle of R_est Q^T R_gt^T, Q the similarity's rotation) and centre
// error, absolute and as a fraction of the largest distance between true centres (the
// ring's diameter, the scene's camera extent); alignment-free: relative rotation error of
// every pair of registered images, and for consecutive images (by name) the rotation error
// and the angle between the estimated and true directions of the relative translation.
// "ground_truth_consistency": how well each set of poses explains the model's own
// observations: every model point seen by >= 2 images with ground truth is triangulated
// (linear DLT on the observations undistorted by the model's cameras) once with the
// estimated poses and once with the true ones (KITTI and Middlebury give metric poses;
// the result does not depend on the model's scale), and the median / 90th percentile
// reprojection error in pixels (normalised error times the camera's focal length) is
// reported for each. True poses that reproject worse than the estimate mean the ground
// truth, not the reconstruction, limits the comparison at that level.
#include <Eigen/Dense>
#include <Eigen/Geometry>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "io/colmap_model.h"
#include "io/middlebury.h"
#include "io/reconstruction.h"

namespace {

using tiepoint::Reconstruction;
using Mat3 = Eigen::Matrix3d;
using Vec3 = Eigen::Vector3d;

struct Pose {
  Mat3 R;  // cam_from_world
  Vec3 C;  // centre
};

// The angle of a rotation from both its symmetric and skew parts: |R - R^T| / 2 = sin(angle)
// and (trace - 1) / 2 = cos(angle). acos of the trace alone loses the small angles: a matrix
// off the rotations by e (ground truth printed to 7 digits, as KITTI's poses are: e = 2e-7)
// reads as sqrt(2 e) rad, 0.03 degrees, where the angle is 0.
double AngleDeg(const Mat3& R) {
  const Vec3 w(R(2, 1) - R(1, 2), R(0, 2) - R(2, 0), R(1, 0) - R(0, 1));
  return std::atan2(0.5 * w.norm(), 0.5 * (R.trace() - 1.0)) * 180.0 / M_PI;
}

// The rotation nearest to a ground-truth matrix printed with few digits (SVD: U V^T).
Mat3 NearestRotation(const Mat3& M) {
  Eigen::JacobiSVD<Mat3> svd(M, Eigen::ComputeFullU | Eigen::ComputeFullV);
  Mat3 D = Mat3::Identity();
  D(2, 2) = (svd.matrixU() * svd.matrixV().transpose()).determinant() < 0 ? -1 : 1;
  return svd.matrixU() * D * svd.matrixV().transpose();
}

double Median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
double Max(const std::vector<double>& v) { return v.empty() ? NAN : *std::max_element(v.begin(), v.end()); }

int Fail(const std::string& m) {
  std::fprintf(stderr, "sfm_eval: %s\n", m.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return Fail("usage: sfm_eval MODEL_DIR (--gt-par F | --gt-bundler F --names a,b,.. | --gt-kitti F)");
  const std::string model_dir = argv[1];
  std::string gt_par, gt_bundler, gt_kitti, names_csv;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--gt-par") gt_par = v;
    else if (k == "--gt-bundler") gt_bundler = v;
    else if (k == "--gt-kitti") gt_kitti = v;
    else if (k == "--names") names_csv = v;
    else return Fail("unknown option " + k);
  }
  Reconstruction rec;
  tiepoint::Status s = tiepoint::ReadColmapModel(model_dir, &rec);
  if (!s.ok()) return Fail(s.ToString());

  std::map<std::string, Pose> gt;
  if (!gt_par.empty()) {
    std::vector<tiepoint::MiddleburyCamera> cams;
    s = tiepoint::ReadMiddleburyCameras(gt_par, &cams);
    if (!s.ok()) return Fail(s.ToString());
    for (const auto& c : cams) {
      Pose p;
      p.R = Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>>(c.R.data());
      p.C = -p.R.transpose() * Vec3(c.t[0], c.t[1], c.t[2]);
      gt[c.name] = p;
    }
  } else if (!gt_bundler.empty()) {
    std::ifstream in(gt_bundler);
    std::string line;
    std::getline(in, line);
    int nc = 0, np = 0;
    in >> nc >> np;
    std::vector<std::string> names;
    std::stringstream ss(names_csv);
    for (std::string n; std::getline(ss, n, ',');) names.push_back(n);
    if (static_cast<int>(names.size()) != nc) return Fail("--names must list the bundle's " + std::to_string(nc) + " cameras");
    const Mat3 D = Vec3(1, -1, -1).asDiagonal();  // Bundler cameras look down -z
    for (int i = 0; i < nc; ++i) {
      double f, k1, k2;
      Mat3 R;
      Vec3 t;
      in >> f >> k1 >> k2;
      for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 3; ++c) in >> R(r, c);
      in >> t[0] >> t[1] >> t[2];
      if (!in) return Fail(gt_bundler + ": truncated");
      if (f == 0) continue;  // camera not in the Bundler model
      Pose p;
      p.R = D * R;
      p.C = -R.transpose() * t;
      gt[names[i]] = p;
    }
  } else if (!gt_kitti.empty()) {
    std::ifstream in(gt_kitti);
    std::string line;
    int frame = 0;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      Eigen::Matrix<double, 3, 4> T;
      for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 4; ++c) ls >> T(r, c);
      char name[32];
      std::snprintf(name, sizeof(name), "%06d.png", frame++);
      Pose p;
      p.R = T.block<3, 3>(0, 0).transpose();
      p.C = T.col(3);
      gt[name] = p;
    }
  } else {
    return Fail("no ground truth given");
  }

  for (auto& [name, p] : gt) p.R = NearestRotation(p.R);
  std::vector<std::string> names;
  std::vector<Pose> est, tru;
  for (const auto& [id, im] : rec.images) {
    auto it = gt.find(im.name);
    // An image of a folder's subfolder ("a/dinoSR0001.png"): by its file name.
    if (it == gt.end() && im.name.find('/') != std::string::npos) it = gt.find(im.name.substr(im.name.rfind('/') + 1));
    if (it == gt.end()) continue;
    double R[9];
    tiepoint::QuaternionToRotation(im.qvec, R);
    Pose p;
    p.R = Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>>(R);
    p.C = -p.R.transpose() * Vec3(im.tvec[0], im.tvec[1], im.tvec[2]);
    names.push_back(im.name);
    est.push_back(p);
    tru.push_back(it->second);
  }
  // Order by name (for "consecutive").
  std::vector<size_t> order(names.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return names[a] < names[b]; });
  const size_t n = names.size();
  nlohmann::json out;
  out["model"] = model_dir;
  out["ground_truth_images"] = gt.size();
  out["registered"] = n;
  out["points"] = rec.points3D.size();
  out["mean_reprojection_error_px"] = rec.MeanReprojectionError();
  double diameter = 0;
  for (const auto& [a, pa] : gt)
    for (const auto& [b, pb] : gt) diameter = std::max(diameter, (pa.C - pb.C).norm());
  out["true_camera_extent"] = diameter;
  if (n >= 3) {
    Eigen::Matrix3Xd A(3, n), B(3, n);
    for (size_t k = 0; k < n; ++k) { A.col(k) = est[k].C; B.col(k) = tru[k].C; }
    const Eigen::Matrix4d T = Eigen::umeyama(A, B, true);
    const double scale = T.block<3, 3>(0, 0).col(0).norm();
    const Mat3 Q = T.block<3, 3>(0, 0) / scale;
    std::vector<double> rot, cen;
    nlohmann::json per = nlohmann::json::array();
    for (size_t k = 0; k < n; ++k) {
      const Vec3 c = scale * Q * est[k].C + T.block<3, 1>(0, 3);
      const double re = AngleDeg(est[k].R * Q.transpose() * tru[k].R.transpose());
      const double ce = (c - tru[k].C).norm();
      rot.push_back(re);
      cen.push_back(ce);
      per.push_back({{"image", names[k]}, {"rotation_error_deg", re}, {"centre_error", ce}});
    }
    out["aligned"] = {{"median_rotation_error_deg", Median(rot)},
                      {"max_rotation_error_deg", Max(rot)},
                      {"median_centre_error", Median(cen)},
                      {"max_centre_error", Max(cen)},
                      {"median_centre_error_fraction_of_extent", Median(cen) / diameter},
                      {"max_centre_error_fraction_of_extent", Max(cen) / diameter},
                      {"per_image", per}};
  }
  std::vector<double> rel;
  for (size_t a = 0; a < n; ++a)
    for (size_t b = a + 1; b < n; ++b) {
      const Mat3 Re = est[a].R * est[b].R.transpose(), Rt = tru[a].R * tru[b].R.transpose();
      rel.push_back(AngleDeg(Re * Rt.transpose()));
    }
  out["pairwise"] = {{"median_relative_rotation_error_deg", Median(rel)},
                     {"max_relative_rotation_error_deg", Max(rel)}};
  std::vector<double> step_rot, step_dir;
  for (size_t k = 0; k + 1 < n; ++k) {
    const Pose &e1 = est[order[k]], &e2 = est[order[k + 1]], &t1 = tru[order[k]], &t2 = tru[order[k + 1]];
    step_rot.push_back(AngleDeg((e2.R * e1.R.transpose()) * (t2.R * t1.R.transpose()).transpose()));
    // Direction of travel in the first camera's frame.
    const Vec3 de = e1.R * (e2.C - e1.C), dt = t1.R * (t2.C - t1.C);
    step_dir.push_back(std::acos(std::clamp(de.normalized().dot(dt.normalized()), -1.0, 1.0)) * 180 / M_PI);
  }
  out["consecutive"] = {{"max_rotation_error_deg", Max(step_rot)},
                        {"max_translation_direction_error_deg", Max(step_dir)},
                        {"rotation_errors_deg", step_rot},
                        {"translation_direction_errors_deg", step_dir}};
  // Ground-truth consistency (see the header).
  {
    std::map<uint32_t, size_t> image_k;  // image id -> index into est / tru
    for (size_t k = 0; k < n; ++k)
      for (const auto& [id, im] : rec.images)
        if (im.name == names[k]) image_k[id] = k;
    auto reprojection = [&](const std::vector<Pose>& poses) {
      std::vector<double> errors;
      for (const auto& [pid, p] : rec.points3D) {
        struct Ob { size_t k; double u, v, f; };
        std::vector<Ob> obs;
        for (const auto& e : p.track) {
          auto it = image_k.find(e.image_id);
          if (it == image_k.end()) continue;
          const auto& im = rec.images.at(e.image_id);
          const auto& cam = rec.cameras.at(im.camera_id);
          double u, v;
          tiepoint::CameraPixelToNormalized(cam.model, cam.params.data(), im.points2D[e.point2D_idx].x,
                                            im.points2D[e.point2D_idx].y, &u, &v);
          obs.push_back({it->second, u, v, cam.params[0]});
        }
        if (obs.size() < 2) continue;
        Eigen::MatrixXd A(2 * obs.size(), 4);
        for (size_t o = 0; o < obs.size(); ++o) {
          const Pose& P = poses[obs[o].k];
          Eigen::Matrix<double, 3, 4> M;
          M.block<3, 3>(0, 0) = P.R;
          M.col(3) = -P.R * P.C;
          A.row(2 * o) = obs[o].u * M.row(2) - M.row(0);
          A.row(2 * o + 1) = obs[o].v * M.row(2) - M.row(1);
        }
        const Eigen::Vector4d X = Eigen::JacobiSVD<Eigen::MatrixXd>(A, Eigen::ComputeFullV).matrixV().col(3);
        for (const Ob& ob : obs) {
          const Pose& P = poses[ob.k];
          const Vec3 q = P.R * (X.head<3>() / X[3] - P.C);
          errors.push_back(ob.f * std::hypot(q[0] / q[2] - ob.u, q[1] / q[2] - ob.v));
        }
      }
      std::sort(errors.begin(), errors.end());
      const double p90 = errors.empty() ? 0.0 : errors[std::min(errors.size() - 1, errors.size() * 9 / 10)];
      return nlohmann::json{{"median_px", Median(errors)}, {"p90_px", p90}, {"observations", errors.size()}};
    };
    out["ground_truth_consistency"] = {{"estimated_poses", reprojection(est)},
                                       {"true_poses", reprojection(tru)}};
  }
  std::cout << out.dump(2) << "\n";
  return 0;
}
