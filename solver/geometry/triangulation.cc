#include "solver/geometry/triangulation.h"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "solver/geometry/ransac.h"

namespace tiepoint {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool AllFinite(const std::vector<CamFromWorld>& cams, const std::vector<Eigen::Vector2d>& x) {
  for (const auto& c : cams) {
    if (!c.allFinite()) return false;
  }
  for (const auto& p : x) {
    if (!p.allFinite()) return false;
  }
  return true;
}

// DLT over the views in `views` (indices into cams/x).
bool Dlt(const std::vector<CamFromWorld>& cams, const std::vector<Eigen::Vector2d>& x,
         const std::vector<int>& views, Eigen::Vector3d* X) {
  const int n = static_cast<int>(views.size());
  if (n < 2) return false;
  Eigen::MatrixXd A(2 * n, 4);
  for (int k = 0; k < n; ++k) {
    const CamFromWorld& P = cams[views[k]];
    const Eigen::Vector2d& p = x[views[k]];
    // Rows scaled to unit norm so that no view dominates by the scale of its pose.
    Eigen::RowVector4d r0 = p.x() * P.row(2) - P.row(0);
    Eigen::RowVector4d r1 = p.y() * P.row(2) - P.row(1);
    const double n0 = r0.norm(), n1 = r1.norm();
    if (!(n0 > 0.0) || !(n1 > 0.0)) return false;
    A.row(2 * k) = r0 / n0;
    A.row(2 * k + 1) = r1 / n1;
  }
  const Eigen::JacobiSVD<Eigen::MatrixXd> svd(A, Eigen::ComputeFullV);
  const Eigen::Vector4d h = svd.matrixV().col(3);
  // A point at infinity (parallel rays, zero baseline) has h.w ~ 0; so does a system of
  // rank < 3 (then V's last column is arbitrary within the null space).
  const Eigen::VectorXd& s = svd.singularValues();
  if (!(s[0] > 0.0) || s[2] < 1e-12 * s[0]) return false;
  if (!(std::abs(h[3]) > 1e-12 * h.head<3>().norm()) || !h.allFinite()) return false;
  *X = h.head<3>() / h[3];
  return X->allFinite();
}

double SumSquaredError(const std::vector<CamFromWorld>& cams, const std::vector<Eigen::Vector2d>& x,
                       const std::vector<int>& views, const Eigen::Vector3d& X) {
  double sum = 0.0;
  for (int v : views) {
    const double e = ReprojectionError(cams[v], X, x[v]);
    if (!std::isfinite(e)) return kInf;
    sum += e * e;
  }
  return sum;
}

bool Refine(const std::vector<CamFromWorld>& cams, const std::vector<Eigen::Vector2d>& x,
            const std::vector<int>& views, Eigen::Vector3d* X, int max_iterations) {
  if (views.size() < 2) return false;
  double cost = SumSquaredError(cams, x, views, *X);
  if (!std::isfinite(cost)) return false;
  Eigen::Vector3d Xc = *X;
  double lambda = 0.0;  // Gauss-Newton first; damping only after a failed step
  for (int it = 0; it < max_iterations && cost > 0.0; ++it) {
    Eigen::Matrix3d JtJ = Eigen::Matrix3d::Zero();
    Eigen::Vector3d g = Eigen::Vector3d::Zero();
    for (int v : views) {
      const Eigen::Matrix3d R = cams[v].leftCols<3>();
      const Eigen::Vector3d P = R * Xc + cams[v].col(3);
      const double iz = 1.0 / P.z();
      const Eigen::Vector2d r(P.x() * iz - x[v].x(), P.y() * iz - x[v].y());
      Eigen::Matrix<double, 2, 3> dr_dP;
      dr_dP << iz, 0.0, -P.x() * iz * iz, 0.0, iz, -P.y() * iz * iz;
      const Eigen::Matrix<double, 2, 3> J = dr_dP * R;
      JtJ.noalias() += J.transpose() * J;
      g.noalias() += J.transpose() * r;
    }
    bool improved = false;
    double decrease = 0.0;
    for (int attempt = 0; attempt < 12; ++attempt) {
      Eigen::Matrix3d A = JtJ;
      A.diagonal() += lambda * (JtJ.diagonal().array() + 1e-300).matrix();
      const Eigen::Vector3d delta = A.ldlt().solve(-g);
      if (delta.allFinite()) {
        const Eigen::Vector3d candidate = Xc + delta;
        const double c = SumSquaredError(cams, x, views, candidate);
        if (c < cost) {  // false for infinity: a step behind a camera is refused
          decrease = (cost - c) / cost;
          Xc = candidate;
          cost = c;
          lambda *= 0.1;
          improved = true;
          break;
        }
      }
      lambda = lambda == 0.0 ? 1e-6 : lambda * 10.0;
    }
    if (!improved || decrease < 1e-12) break;
  }
  *X = Xc;
  return true;
}

// Views within the threshold and in front, and their MSAC cost.
int CountInliers(const std::vector<CamFromWorld>& cams, const std::vector<Eigen::Vector2d>& x,
                 const Eigen::Vector3d& X, double t2, double* cost, std::vector<int>* inliers) {
  int count = 0;
  double c = 0.0;
  inliers->clear();
  for (int v = 0; v < static_cast<int>(cams.size()); ++v) {
    const double e = ReprojectionError(cams[v], X, x[v]);
    const double e2 = e * e;
    if (e2 <= t2) {
      ++count;
      c += e2;
      inliers->push_back(v);
    } else {
      c += t2;
    }
  }
  *cost = c;
  return count;
}

}  // namespace

Eigen::Vector3d CameraCenter(const CamFromWorld& cam_from_world) {
  return -cam_from_world.leftCols<3>().transpose() * cam_from_world.col(3);
}

double PointDepth(const CamFromWorld& cam_from_world, const Eigen::Vector3d& X) {
  return cam_from_world.row(2).head<3>().dot(X) + cam_from_world(2, 3);
}

bool IsInFrontOfAll(const std::vector<CamFromWorld>& cams_from_world, const Eigen::Vector3d& X) {
  if (cams_from_world.empty()) return false;
  for (const auto& c : cams_from_world) {
    if (!(PointDepth(c, X) > 0.0)) return false;
  }
  return true;
}

double ReprojectionError(const CamFromWorld& cam_from_world, const Eigen::Vector3d& X,
                         const Eigen::Vector2d& normalized) {
  const Eigen::Vector3d P = cam_from_world.leftCols<3>() * X + cam_from_world.col(3);
  if (!(P.z() > 0.0)) return kInf;
  return std::hypot(P.x() / P.z() - normalized.x(), P.y() / P.z() - normalized.y());
}

double TriangulationAngle(const Eigen::Vector3d& center1, const Eigen::Vector3d& center2,
                          const Eigen::Vector3d& X) {
  const Eigen::Vector3d r1 = center1 - X, r2 = center2 - X;
  const double n = r1.norm() * r2.norm();
  if (!(n > 0.0)) return 0.0;
  // atan2(|a x b|, a . b) keeps its accuracy at small angles, where acos does not.
  return std::atan2(r1.cross(r2).norm(), r1.dot(r2));
}

bool TriangulateTwoView(const CamFromWorld& cam1_from_world, const CamFromWorld& cam2_from_world,
                        const Eigen::Vector2d& normalized1, const Eigen::Vector2d& normalized2,
                        Eigen::Vector3d* X) {
  const std::vector<CamFromWorld> cams = {cam1_from_world, cam2_from_world};
  const std::vector<Eigen::Vector2d> x = {normalized1, normalized2};
  return TriangulateMultiView(cams, x, X);
}

bool TriangulateMultiView(const std::vector<CamFromWorld>& cams_from_world,
                          const std::vector<Eigen::Vector2d>& normalized, Eigen::Vector3d* X) {
  if (X == nullptr || cams_from_world.size() != normalized.size() || cams_from_world.size() < 2) return false;
  if (!AllFinite(cams_from_world, normalized)) return false;
  std::vector<int> views(cams_from_world.size());
  for (size_t i = 0; i < views.size(); ++i) views[i] = static_cast<int>(i);
  return Dlt(cams_from_world, normalized, views, X);
}

bool RefineTriangulation(const std::vector<CamFromWorld>& cams_from_world,
                         const std::vector<Eigen::Vector2d>& normalized, Eigen::Vector3d* X,
                         int max_iterations) {
  if (X == nullptr || cams_from_world.size() != normalized.size() || cams_from_world.size() < 2) return false;
  if (!AllFinite(cams_from_world, normalized) || !X->allFinite()) return false;
  std::vector<int> views(cams_from_world.size());
  for (size_t i = 0; i < views.size(); ++i) views[i] = static_cast<int>(i);
  return Refine(cams_from_world, normalized, views, X, max_iterations);
}

Status RobustTriangulationOptions::Check() const {
  auto bad = [](const std::string& m) { return Status::InvalidOptions("robust triangulation: " + m); };
  if (!(max_error > 0.0 && std::isfinite(max_error))) {
    return bad("max_error must be a positive number in normalized units (pixels / focal length), got " +
               std::to_string(max_error));
  }
  if (!(min_angle_rad >= 0.0 && min_angle_rad < M_PI)) {
    return bad("min_angle_rad must lie in [0, pi), got " + std::to_string(min_angle_rad));
  }
  if (max_pairs < 1) return bad("max_pairs must be >= 1, got " + std::to_string(max_pairs));
  if (!(confidence > 0.0 && confidence < 1.0)) {
    return bad("confidence must lie in (0, 1), got " + std::to_string(confidence));
  }
  if (min_inliers < 2) return bad("min_inliers must be >= 2, got " + std::to_string(min_inliers));
  return Status::Ok();
}

Status TriangulateTrackRobust(const std::vector<CamFromWorld>& cams_from_world,
                              const std::vector<Eigen::Vector2d>& normalized,
                              const RobustTriangulationOptions& options, RobustTriangulation* result) {
  TIEPOINT_RETURN_IF_ERROR(options.Check());
  if (cams_from_world.size() != normalized.size()) {
    return Status::InvalidInput("robust triangulation: " + std::to_string(cams_from_world.size()) +
                                " poses but " + std::to_string(normalized.size()) +
                                " observations (one per view expected in both)");
  }
  const int n = static_cast<int>(cams_from_world.size());
  for (int v = 0; v < n; ++v) {
    if (!cams_from_world[v].allFinite()) {
      return Status::InvalidInput("robust triangulation: pose of view " + std::to_string(v) + " is not finite");
    }
    if (!normalized[v].allFinite()) {
      return Status::InvalidInput("robust triangulation: observation of view " + std::to_string(v) +
                                  " is not finite");
    }
  }
  *result = RobustTriangulation();
  result->inlier_mask.assign(n, 0);
  if (n < 2) return Status::Ok();

  std::vector<Eigen::Vector3d> centers(n);
  for (int v = 0; v < n; ++v) centers[v] = CameraCenter(cams_from_world[v]);
  const double t2 = options.max_error * options.max_error;

  bool have = false;
  Eigen::Vector3d best_X = Eigen::Vector3d::Zero();
  double best_cost = kInf;
  int best_count = 0;
  std::vector<int> inliers;
  auto try_pair = [&](int i, int j) {
    Eigen::Vector3d X;
    if (!Dlt(cams_from_world, normalized, {i, j}, &X)) return;
    if (!(PointDepth(cams_from_world[i], X) > 0.0) || !(PointDepth(cams_from_world[j], X) > 0.0)) return;
    if (TriangulationAngle(centers[i], centers[j], X) < options.min_angle_rad) return;
    double cost;
    const int count = CountInliers(cams_from_world, normalized, X, t2, &cost, &inliers);
    // Both seeding views must agree with their own point (the DLT point is not the
    // least-squares one; far off for a very noisy pair).
    if (count < 2 || !(cost < best_cost)) return;
    have = true;
    best_X = X;
    best_cost = cost;
    best_count = count;
  };

  const long long all_pairs = static_cast<long long>(n) * (n - 1) / 2;
  if (all_pairs <= options.max_pairs) {
    for (int i = 0; i < n; ++i) {
      for (int j = i + 1; j < n; ++j) try_pair(i, j);
    }
  } else {
    std::mt19937_64 rng(options.seed);
    double required = static_cast<double>(options.max_pairs);
    for (int it = 0; it < options.max_pairs && it < required; ++it) {
      const int i = static_cast<int>(rng() % static_cast<uint64_t>(n));
      int j = static_cast<int>(rng() % static_cast<uint64_t>(n - 1));
      if (j >= i) ++j;
      try_pair(std::min(i, j), std::max(i, j));
      if (have) {
        required = two_view::RequiredIterations(static_cast<double>(best_count) / n, 2, options.confidence);
      }
    }
  }
  if (!have) return Status::Ok();

  // Re-triangulate on the inliers and re-count while their number grows (or, at equal
  // number, the cost drops).
  Eigen::Vector3d X = best_X;
  double cost;
  int count = CountInliers(cams_from_world, normalized, X, t2, &cost, &inliers);
  for (int round = 0; round < 3; ++round) {
    Eigen::Vector3d Y;
    if (!Dlt(cams_from_world, normalized, inliers, &Y)) Y = X;
    if (SumSquaredError(cams_from_world, normalized, inliers, Y) >
        SumSquaredError(cams_from_world, normalized, inliers, X)) {
      Y = X;  // the DLT minimises an algebraic error; start from the better of the two
    }
    if (!Refine(cams_from_world, normalized, inliers, &Y, 10)) break;
    double y_cost;
    std::vector<int> y_inliers;
    const int y_count = CountInliers(cams_from_world, normalized, Y, t2, &y_cost, &y_inliers);
    if (y_count < count || (y_count == count && !(y_cost < cost))) break;
    const bool grew = y_count > count;
    X = Y;
    cost = y_cost;
    count = y_count;
    inliers.swap(y_inliers);
    if (!grew) break;
  }

  result->point = X;
  result->num_inliers = count;
  double sum = 0.0;
  for (int v : inliers) {
    result->inlier_mask[v] = 1;
    const double e = ReprojectionError(cams_from_world[v], X, normalized[v]);
    sum += e * e;
  }
  result->inlier_rms_error = count > 0 ? std::sqrt(sum / count) : 0.0;
  for (size_t a = 0; a < inliers.size(); ++a) {
    for (size_t b = a + 1; b < inliers.size(); ++b) {
      result->max_angle_rad = std::max(result->max_angle_rad,
                                       TriangulationAngle(centers[inliers[a]], centers[inliers[b]], X));
    }
  }
  result->found = count >= options.min_inliers && result->max_angle_rad >= options.min_angle_rad;
  return Status::Ok();
}

}  // namespace tiepoint
