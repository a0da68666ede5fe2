#include "io/reconstruction_export.h"

#include <Eigen/Eigenvalues>
#include <Eigen/Geometry>
#include <array>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "io/bal.h"
#include "io/base/atomic_file.h"

namespace tiepoint {
namespace {

void RotationToAngleAxis(const double* R, double* w) {
  const Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>> Rm(R);
  const Eigen::AngleAxisd aa{Eigen::Matrix3d(Rm)};
  const Eigen::Vector3d v = aa.axis() * aa.angle();
  for (int k = 0; k < 3; ++k) w[k] = v[k];
}

Eigen::Vector3d Centre(const Image& im) {
  double R[9];
  QuaternionToRotation(im.qvec, R);
  const Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>> Rm(R);
  return -Rm.transpose() * Eigen::Vector3d(im.tvec[0], im.tvec[1], im.tvec[2]);
}

Eigen::Vector3d ViewDirection(const Image& im) {
  double R[9];
  QuaternionToRotation(im.qvec, R);
  return Eigen::Vector3d(R[6], R[7], R[8]);  // third row of R: the optical axis in the world
}

}  // namespace

Status ReconstructionToBalScene(const Reconstruction& rec, Scene* scene) {
  *scene = Scene();
  std::map<uint32_t, int> cam_index;
  for (const auto& [id, im] : rec.images) {
    auto cit = rec.cameras.find(im.camera_id);
    if (cit == rec.cameras.end())
      return Status::InvalidInput("BAL export: image " + im.name + " names a missing camera");
    const Camera& c = cit->second;
    const int idx = static_cast<int>(cam_index.size());
    cam_index[id] = idx;
    double R[9];
    QuaternionToRotation(im.qvec, R);
    for (int k = 3; k < 9; ++k) R[k] = -R[k];  // diag(1, -1, -1) R
    double w[3];
    RotationToAngleAxis(R, w);
    double k1 = 0, k2 = 0;
    if (c.model == CameraModelId::kSimpleRadial) k1 = c.params[3];
    if (c.model == CameraModelId::kRadial) { k1 = c.params[3]; k2 = c.params[4]; }
    const double cam[9] = {w[0], w[1], w[2], im.tvec[0], -im.tvec[1], -im.tvec[2], c.MeanFocal(), k1, k2};
    scene->cameras.insert(scene->cameras.end(), cam, cam + 9);
  }
  int pidx = 0;
  for (const auto& [pid, p] : rec.points3D) {
    scene->points.insert(scene->points.end(), p.xyz, p.xyz + 3);
    std::vector<std::pair<int, std::array<double, 2>>> obs;
    for (const TrackElement& e : p.track) {
      auto iit = rec.images.find(e.image_id);
      if (iit == rec.images.end() || e.point2D_idx >= iit->second.points2D.size())
        return Status::InvalidInput("BAL export: point " + std::to_string(pid) + " has a bad track element");
      const Camera& c = rec.cameras.at(iit->second.camera_id);
      const Point2D& q = iit->second.points2D[e.point2D_idx];
      const bool bal_model = c.model == CameraModelId::kSimplePinhole || c.model == CameraModelId::kPinhole ||
                             c.model == CameraModelId::kSimpleRadial || c.model == CameraModelId::kRadial;
      if (!bal_model) {
        // BAL's camera has only its radial k1, k2 and projects as a pinhole: an observation of
        // the other models (OPENCV, FULL_OPENCV, FOV, the fisheye ones) goes undistorted, at
        // the mean focal length, and the BAL camera has no distortion (k1 = k2 = 0).
        double u, v;
        CameraPixelToNormalized(c.model, c.params.data(), q.x, q.y, &u, &v);
        const double f = c.MeanFocal();
        obs.push_back({cam_index.at(e.image_id), {f * u, -f * v}});
      } else {
        obs.push_back({cam_index.at(e.image_id), {q.x - c.cx(), -(q.y - c.cy())}});
      }
    }
    std::sort(obs.begin(), obs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [ci, xy] : obs) {
      scene->obs_camera.push_back(ci);
      scene->obs_point.push_back(pidx);
      scene->obs_xy.push_back(xy[0]);
      scene->obs_xy.push_back(xy[1]);
    }
    ++pidx;
  }
  return Status::Ok();
}

Status BalSceneToReconstruction(const Scene& scene, bool single_camera, Reconstruction* rec) {
  *rec = Reconstruction();
  const int nc = scene.num_cameras();
  for (int i = 0; i < nc; ++i) {
    const double* c = scene.camera(i);
    if (single_camera && i > 0) {
      for (int k = 6; k < 9; ++k)
        if (c[k] != scene.camera(0)[k])
          return Status::InvalidInput("BAL camera " + std::to_string(i) +
                                      " has other intrinsics than camera 0: not one physical camera");
    }
    if (!single_camera || i == 0) {
      Camera cam;
      cam.camera_id = static_cast<uint32_t>(i + 1);
      cam.model = CameraModelId::kRadial;
      cam.width = cam.height = 0;
      cam.params = {c[6], 0.0, 0.0, c[7], c[8]};
      rec->cameras[cam.camera_id] = cam;
    }
    Image im;
    im.image_id = static_cast<uint32_t>(i + 1);
    im.camera_id = single_camera ? 1u : im.image_id;
    im.name = "camera_" + std::to_string(i) + ".jpg";
    Eigen::Vector3d w(c[0], c[1], c[2]);
    Eigen::Matrix3d R = Eigen::Matrix3d::Identity();
    if (w.norm() > 0) R = Eigen::AngleAxisd(w.norm(), w / w.norm()).toRotationMatrix();
    R.row(1) *= -1;  // R = diag(1, -1, -1) R_bal
    R.row(2) *= -1;
    double Rr[9];
    for (int r = 0; r < 3; ++r)
      for (int k = 0; k < 3; ++k) Rr[3 * r + k] = R(r, k);
    RotationToQuaternion(Rr, im.qvec);
    im.tvec[0] = c[3];
    im.tvec[1] = -c[4];
    im.tvec[2] = -c[5];
    rec->images[im.image_id] = std::move(im);
  }
  for (int j = 0; j < scene.num_points(); ++j) {
    Point3D p;
    std::copy_n(scene.point(j), 3, p.xyz);
    rec->points3D[static_cast<uint64_t>(j) + 1] = std::move(p);
  }
  for (int64_t k = 0; k < scene.num_observations(); ++k) {
    const int ci = scene.obs_camera[k], pj = scene.obs_point[k];
    if (ci < 0 || ci >= nc || pj < 0 || pj >= scene.num_points())
      return Status::InvalidInput("BAL observation " + std::to_string(k) + " names a missing camera or point");
    Image& im = rec->images.at(static_cast<uint32_t>(ci + 1));
    Point2D q;
    q.x = scene.obs_xy[2 * k];
    q.y = -scene.obs_xy[2 * k + 1];
    q.point3D_id = static_cast<uint64_t>(pj) + 1;
    rec->points3D.at(q.point3D_id).track.push_back({im.image_id, static_cast<uint32_t>(im.points2D.size())});
    im.points2D.push_back(q);
  }
  return Status::Ok();
}

Status WriteReconstructionBal(const std::string& path, const Reconstruction& rec) {
  Scene scene;
  TIEPOINT_RETURN_IF_ERROR(ReconstructionToBalScene(rec, &scene));
  return WriteBal(path, scene);
}

Status WriteReconstructionPly(const std::string& path, const Reconstruction& rec) {
  AtomicFile file(path);
  TIEPOINT_RETURN_IF_ERROR(file.Open());
  std::ofstream& out = file.stream();
  const size_t n = rec.points3D.size() + rec.images.size();
  out << "ply\nformat binary_little_endian 1.0\ncomment tiepoint reconstruct: points, then camera centres (red)\n"
      << "element vertex " << n << "\nproperty float x\nproperty float y\nproperty float z\n"
      << "property uchar red\nproperty uchar green\nproperty uchar blue\nend_header\n";
  auto put = [&](double x, double y, double z, uint8_t r, uint8_t g, uint8_t b) {
    const float v[3] = {static_cast<float>(x), static_cast<float>(y), static_cast<float>(z)};
    out.write(reinterpret_cast<const char*>(v), sizeof(v));
    const uint8_t c[3] = {r, g, b};
    out.write(reinterpret_cast<const char*>(c), 3);
  };
  for (const auto& [pid, p] : rec.points3D) put(p.xyz[0], p.xyz[1], p.xyz[2], p.rgb[0], p.rgb[1], p.rgb[2]);
  for (const auto& [id, im] : rec.images) {
    const Eigen::Vector3d c = Centre(im);
    put(c[0], c[1], c[2], 255, 0, 0);
  }
  return file.Commit();
}

Status WriteReconstructionOverviewSvg(const std::string& path, const Reconstruction& rec) {
  // Plane of the camera centres: its two main directions span the drawing (the normal is
  // the direction of least spread); with fewer than 3 cameras, use the points too.
  std::vector<Eigen::Vector3d> centres;
  for (const auto& [id, im] : rec.images) centres.push_back(Centre(im));
  std::vector<Eigen::Vector3d> basis_pts = centres;
  if (centres.size() < 3)
    for (const auto& [pid, p] : rec.points3D) basis_pts.emplace_back(p.xyz[0], p.xyz[1], p.xyz[2]);
  Eigen::Vector3d mean = Eigen::Vector3d::Zero();
  for (const auto& c : basis_pts) mean += c;
  if (!basis_pts.empty()) mean /= static_cast<double>(basis_pts.size());
  Eigen::Matrix3d cov = Eigen::Matrix3d::Zero();
  for (const auto& c : basis_pts) cov += (c - mean) * (c - mean).transpose();
  Eigen::SelfAdjointEigenSolver<Eigen::Matrix3d> es(cov + 1e-12 * Eigen::Matrix3d::Identity());
  const Eigen::Vector3d ax = es.eigenvectors().col(2), ay = es.eigenvectors().col(1);
  auto proj = [&](const Eigen::Vector3d& X) { return Eigen::Vector2d((X - mean).dot(ax), (X - mean).dot(ay)); };
  // Extent: cameras and the central 98% of the points.
  std::vector<double> xs, ys;
  for (const auto& c : centres) { const auto q = proj(c); xs.push_back(q[0]); ys.push_back(q[1]); }
  std::vector<Eigen::Vector2d> pts;
  for (const auto& [pid, p] : rec.points3D) pts.push_back(proj(Eigen::Vector3d(p.xyz[0], p.xyz[1], p.xyz[2])));
  if (!pts.empty()) {
    std::vector<double> px, py;
    for (const auto& q : pts) { px.push_back(q[0]); py.push_back(q[1]); }
    std::sort(px.begin(), px.end());
    std::sort(py.begin(), py.end());
    const size_t lo = px.size() / 100, hi = px.size() - 1 - px.size() / 100;
    xs.push_back(px[lo]); xs.push_back(px[hi]); ys.push_back(py[lo]); ys.push_back(py[hi]);
  }
  if (xs.empty()) { xs = {-1, 1}; ys = {-1, 1}; }
  const double x0 = *std::min_element(xs.begin(), xs.end()), x1 = *std::max_element(xs.begin(), xs.end());
  const double y0 = *std::min_element(ys.begin(), ys.end()), y1 = *std::max_element(ys.begin(), ys.end());
  const double span = std::max({x1 - x0, y1 - y0, 1e-9});
  const double size = 800, margin = 40, scale = (size - 2 * margin) / span;
  auto sx = [&](double x) { return margin + (x - x0) * scale; };
  auto sy = [&](double y) { return size - margin - (y - y0) * scale; };
  AtomicFile file(path);
  TIEPOINT_RETURN_IF_ERROR(file.Open());
  std::ofstream& out = file.stream();
  char buf[256];
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << size << "\" height=\"" << size + 30
      << "\" viewBox=\"0 0 " << size << " " << size + 30 << "\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  std::snprintf(buf, sizeof(buf),
                "<text x=\"10\" y=\"%g\" font-family=\"sans-serif\" font-size=\"14\">%zu images, %zu points "
                "(view from above the plane of the camera centres)</text>\n",
                size + 20, rec.images.size(), rec.points3D.size());
  out << buf << "<g fill=\"#555\" fill-opacity=\"0.5\">\n";
  const size_t step = std::max<size_t>(1, pts.size() / 20000);
  for (size_t k = 0; k < pts.size(); k += step) {
    std::snprintf(buf, sizeof(buf), "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"1\"/>\n", sx(pts[k][0]), sy(pts[k][1]));
    out << buf;
  }
  out << "</g>\n<g stroke=\"#c00\" stroke-width=\"2\" fill=\"#c00\">\n";
  for (const auto& [id, im] : rec.images) {
    const Eigen::Vector3d c = Centre(im);
    const Eigen::Vector2d q = proj(c), d = proj(c + ViewDirection(im) * span * 0.08) - q;
    std::snprintf(buf, sizeof(buf),
                  "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\"/><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                  sx(q[0]), sy(q[1]), sx(q[0]), sy(q[1]), sx(q[0] + d[0]), sy(q[1] + d[1]));
    out << buf;
  }
  out << "</g>\n</svg>\n";
  return file.Commit();
}

}  // namespace tiepoint
