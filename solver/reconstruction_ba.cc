#include "solver/reconstruction_ba.h"

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <Eigen/LU>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <unordered_map>

#include <omp.h>

#include "solver/parallel.h"

namespace tiepoint {
namespace {

constexpr int kMaxLocal = 11;  // 6 pose + at most 5 intrinsics columns per observation

void RotationFromAngleAxis(const double* w, double* R) {
  const double theta2 = w[0] * w[0] + w[1] * w[1] + w[2] * w[2];
  if (theta2 < 1e-30) {
    R[0] = 1; R[1] = -w[2]; R[2] = w[1];
    R[3] = w[2]; R[4] = 1; R[5] = -w[0];
    R[6] = -w[1]; R[7] = w[0]; R[8] = 1;
    return;
  }
  const double theta = std::sqrt(theta2);
  const double c = std::cos(theta), s = std::sin(theta);
  const double k[3] = {w[0] / theta, w[1] / theta, w[2] / theta};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) R[3 * i + j] = (1 - c) * k[i] * k[j] + (i == j ? c : 0.0);
  R[1] -= s * k[2]; R[2] += s * k[1];
  R[3] += s * k[2]; R[5] -= s * k[0];
  R[6] -= s * k[1]; R[7] += s * k[0];
}

// R <- exp([w]x) R, re-orthonormalised through a quaternion round trip.
void LeftRotate(const double* w, double* R) {
  double dR[9], out[9];
  RotationFromAngleAxis(w, dR);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      out[3 * i + j] = dR[3 * i] * R[j] + dR[3 * i + 1] * R[3 + j] + dR[3 * i + 2] * R[6 + j];
  double q[4];
  RotationToQuaternion(out, q);
  QuaternionToRotation(q, R);
}

// Indices of the parameters of `model` that move under `options`.
std::vector<int> FreeParams(CameraModelId model, const ReconstructionBAOptions& options) {
  std::vector<int> focal, pp, extra;
  switch (model) {
    case CameraModelId::kSimplePinhole: focal = {0}; pp = {1, 2}; break;
    case CameraModelId::kPinhole: focal = {0, 1}; pp = {2, 3}; break;
    case CameraModelId::kSimpleRadial: focal = {0}; pp = {1, 2}; extra = {3}; break;
    case CameraModelId::kRadial: focal = {0}; pp = {1, 2}; extra = {3, 4}; break;
  }
  std::vector<int> out;
  if (options.fix_intrinsics) return out;
  if (options.refine_focal) out.insert(out.end(), focal.begin(), focal.end());
  if (options.refine_principal_point) out.insert(out.end(), pp.begin(), pp.end());
  if (options.refine_extra) out.insert(out.end(), extra.begin(), extra.end());
  std::sort(out.begin(), out.end());
  return out;
}

struct Obs {
  int image;    // index into images_
  int point;    // index into points_
  double xy[2];
};

}  // namespace

Status ReconstructionBAOptions::Check() const {
  if (max_iterations < 0) return Status::InvalidOptions("bundle adjustment: max_iterations must be >= 0");
  if (!(function_tolerance >= 0)) return Status::InvalidOptions("bundle adjustment: function_tolerance must be >= 0");
  if (!(initial_mu > 0)) return Status::InvalidOptions("bundle adjustment: initial_mu must be > 0");
  if (num_threads < 1 || num_threads > 4096)
    return Status::InvalidOptions("bundle adjustment: num_threads must be in [1, 4096]");
  return Status::Ok();
}

bool ReconstructionResidual(CameraModelId model, const double* params, const double* R,
                            const double* t, const double* X, const double* observed,
                            double* residual, double* jpose, double* jpoint, double* jparams) {
  const double RX[3] = {R[0] * X[0] + R[1] * X[1] + R[2] * X[2],
                        R[3] * X[0] + R[4] * X[1] + R[5] * X[2],
                        R[6] * X[0] + R[7] * X[1] + R[8] * X[2]};
  const double P[3] = {RX[0] + t[0], RX[1] + t[1], RX[2] + t[2]};
  const double z = P[2];
  const double iz = 1.0 / z;
  const double u = P[0] * iz, v = P[1] * iz;
  double px = 0, py = 0;
  CameraNormalizedToPixel(model, params, u, v, &px, &py);
  residual[0] = px - observed[0];
  residual[1] = py - observed[1];
  if (!jpose && !jpoint && !jparams) return z > 0;

  // d pixel / d (u, v) and d pixel / d params.
  double A[4] = {0, 0, 0, 0};  // row-major 2x2
  const double r2 = u * u + v * v;
  switch (model) {
    case CameraModelId::kSimplePinhole:
      A[0] = params[0]; A[1] = 0; A[2] = 0; A[3] = params[0];
      if (jparams) {
        const double jp[6] = {u, 1, 0, v, 0, 1};
        std::copy(jp, jp + 6, jparams);
      }
      break;
    case CameraModelId::kPinhole:
      A[0] = params[0]; A[1] = 0; A[2] = 0; A[3] = params[1];
      if (jparams) {
        const double jp[8] = {u, 0, 1, 0, 0, v, 0, 1};
        std::copy(jp, jp + 8, jparams);
      }
      break;
    case CameraModelId::kSimpleRadial: {
      const double f = params[0], k = params[3];
      const double d = 1 + k * r2;
      A[0] = f * (d + 2 * k * u * u); A[1] = f * 2 * k * u * v;
      A[2] = A[1];                    A[3] = f * (d + 2 * k * v * v);
      if (jparams) {
        const double jp[8] = {u * d, 1, 0, f * u * r2, v * d, 0, 1, f * v * r2};
        std::copy(jp, jp + 8, jparams);
      }
      break;
    }
    case CameraModelId::kRadial: {
      const double f = params[0], k1 = params[3], k2 = params[4];
      const double d = 1 + r2 * (k1 + k2 * r2);
      const double dd = k1 + 2 * k2 * r2;  // d d / d r2
      A[0] = f * (d + 2 * dd * u * u); A[1] = f * 2 * dd * u * v;
      A[2] = A[1];                     A[3] = f * (d + 2 * dd * v * v);
      if (jparams) {
        const double jp[10] = {u * d, 1, 0, f * u * r2, f * u * r2 * r2,
                               v * d, 0, 1, f * v * r2, f * v * r2 * r2};
        std::copy(jp, jp + 10, jparams);
      }
      break;
    }
  }
  // d (u, v) / d P
  const double B[6] = {iz, 0, -u * iz, 0, iz, -v * iz};
  double C[6];  // A B: d pixel / d P (2x3)
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) C[3 * i + j] = A[2 * i] * B[j] + A[2 * i + 1] * B[3 + j];
  if (jpose) {
    // d P / d w = -[RX]x ; d P / d t = I
    const double M[9] = {0, RX[2], -RX[1], -RX[2], 0, RX[0], RX[1], -RX[0], 0};
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 3; ++j)
        jpose[6 * i + j] = C[3 * i] * M[j] + C[3 * i + 1] * M[3 + j] + C[3 * i + 2] * M[6 + j];
      for (int j = 0; j < 3; ++j) jpose[6 * i + 3 + j] = C[3 * i + j];
    }
  }
  if (jpoint) {
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        jpoint[3 * i + j] = C[3 * i] * R[j] + C[3 * i + 1] * R[3 + j] + C[3 * i + 2] * R[6 + j];
  }
  return z > 0;
}

Status BundleAdjustReconstruction(const ReconstructionBAOptions& options,
                                  const ReconstructionBAConfig& config, Reconstruction* rec,
                                  ReconstructionBASummary* summary) {
  TIEPOINT_RETURN_IF_ERROR(options.Check());
  const auto t_start = std::chrono::steady_clock::now();
  *summary = ReconstructionBASummary();

  // --- gather the problem ---------------------------------------------------------------
  std::vector<uint64_t> point_ids;
  for (const auto& [pid, p] : rec->points3D) {
    bool take = !config.only_points_of_variable_images;
    if (!take)
      for (const TrackElement& e : p.track)
        if (config.variable_images.count(e.image_id)) { take = true; break; }
    if (take) point_ids.push_back(pid);
  }
  std::unordered_map<uint32_t, int> image_index;
  std::vector<uint32_t> image_ids;
  std::vector<Obs> obs;
  std::vector<int64_t> point_ptr(1, 0);
  for (size_t j = 0; j < point_ids.size(); ++j) {
    const Point3D& p = rec->points3D.at(point_ids[j]);
    for (const TrackElement& e : p.track) {
      auto it = rec->images.find(e.image_id);
      if (it == rec->images.end() || e.point2D_idx >= it->second.points2D.size())
        return Status::Internal("bundle adjustment: point " + std::to_string(point_ids[j]) +
                                " has a track element naming a missing image or point2D");
      auto [ii, inserted] = image_index.emplace(e.image_id, static_cast<int>(image_ids.size()));
      if (inserted) image_ids.push_back(e.image_id);
      const Point2D& p2 = it->second.points2D[e.point2D_idx];
      obs.push_back(Obs{ii->second, static_cast<int>(j), {p2.x, p2.y}});
    }
    point_ptr.push_back(static_cast<int64_t>(obs.size()));
  }
  const int num_images = static_cast<int>(image_ids.size());
  const int num_points = static_cast<int>(point_ids.size());

  // State: R, t per image; params per camera; X per point.
  std::vector<double> Rs(9 * num_images), ts(3 * num_images), Xs(3 * num_points);
  std::map<uint32_t, int> camera_index;
  std::vector<uint32_t> camera_ids;
  std::vector<int> image_camera(num_images);
  for (int i = 0; i < num_images; ++i) {
    const Image& im = rec->images.at(image_ids[i]);
    QuaternionToRotation(im.qvec, &Rs[9 * i]);
    std::copy(im.tvec, im.tvec + 3, &ts[3 * i]);
    auto [it, inserted] = camera_index.emplace(im.camera_id, static_cast<int>(camera_ids.size()));
    if (inserted) camera_ids.push_back(im.camera_id);
    image_camera[i] = it->second;
  }
  const int num_cameras = static_cast<int>(camera_ids.size());
  std::vector<std::vector<double>> params(num_cameras);
  std::vector<CameraModelId> models(num_cameras);
  for (int c = 0; c < num_cameras; ++c) {
    auto it = rec->cameras.find(camera_ids[c]);
    if (it == rec->cameras.end())
      return Status::Internal("bundle adjustment: missing camera " + std::to_string(camera_ids[c]));
    params[c] = it->second.params;
    models[c] = it->second.model;
  }
  for (int j = 0; j < num_points; ++j)
    std::copy(rec->points3D.at(point_ids[j]).xyz, rec->points3D.at(point_ids[j]).xyz + 3, &Xs[3 * j]);

  // Columns of the reduced (camera-side) system.
  int nc = 0;
  std::vector<int> pose_col(num_images, -1);
  for (int i = 0; i < num_images; ++i) {
    const uint32_t id = image_ids[i];
    if (config.variable_images.count(id) && !config.fixed_pose_images.count(id)) {
      pose_col[i] = nc;
      nc += 6;
    }
  }
  std::vector<std::vector<int>> free_params(num_cameras);
  std::vector<int> intr_col(num_cameras, -1);
  for (int c = 0; c < num_cameras; ++c) {
    // Intrinsics move only when some variable image uses the camera.
    bool used = false;
    for (int i = 0; i < num_images; ++i)
      if (image_camera[i] == c && config.variable_images.count(image_ids[i])) used = true;
    if (!used || config.fixed_cameras.count(camera_ids[c])) continue;
    free_params[c] = FreeParams(models[c], options);
    if (free_params[c].empty()) continue;
    intr_col[c] = nc;
    nc += static_cast<int>(free_params[c].size());
  }
  std::vector<uint8_t> point_free(num_points);
  for (int j = 0; j < num_points; ++j) point_free[j] = !config.fixed_points.count(point_ids[j]);

  summary->num_residuals = static_cast<int>(2 * obs.size());
  for (int i = 0; i < num_images; ++i) summary->num_variable_images += pose_col[i] >= 0;
  for (int j = 0; j < num_points; ++j) summary->num_variable_points += point_free[j];

  const int threads = std::max(1, options.num_threads);
  std::vector<double> cost_part(threads);
  auto cost_of = [&](const std::vector<double>& R, const std::vector<double>& t,
                     const std::vector<std::vector<double>>& prm, const std::vector<double>& X) {
    const int64_t n = static_cast<int64_t>(obs.size());
    ParallelRegion(threads, [&] {
      const int tid = threads > 1 ? omp_get_thread_num() : 0;
      double c = 0;
#pragma omp for schedule(static)
      for (int64_t k = 0; k < n; ++k) {
        const Obs& o = obs[k];
        double r[2];
        ReconstructionResidual(models[image_camera[o.image]], prm[image_camera[o.image]].data(),
                               &R[9 * o.image], &t[3 * o.image], &X[3 * o.point], o.xy, r,
                               nullptr, nullptr, nullptr);
        double rho, drho;
        options.loss.Evaluate(r[0] * r[0] + r[1] * r[1], &rho, &drho);
        c += 0.5 * rho;
      }
      cost_part[tid] = c;
    });
    double cost = 0;
    for (int t = 0; t < threads; ++t) cost += cost_part[t];
    return cost;
  };

  double cost = cost_of(Rs, ts, params, Xs);
  summary->initial_cost = summary->final_cost = cost;
  if (!std::isfinite(cost)) return Status::Numerical("bundle adjustment: initial cost is not finite");
  if (obs.empty() || (nc == 0 && summary->num_variable_points == 0)) {
    summary->termination = "nothing to optimise";
    summary->converged = true;
    return Status::Ok();
  }

  // Per-observation linearization storage. Each observation keeps only its active
  // camera-side columns (the pose's 6 unless the pose is fixed, then the camera's free
  // intrinsics), packed first in local_cols / W.
  const size_t nobs = obs.size();
  std::vector<double> W(nobs * kMaxLocal * 3);   // J_c^T J_p, kMaxLocal x 3 per observation
  std::vector<int> local_cols(nobs * kMaxLocal);  // global column of each active local row
  std::vector<uint8_t> num_local(nobs);
  std::vector<double> V(9 * num_points), g(3 * num_points);
  Eigen::MatrixXd S(nc, nc);
  Eigen::VectorXd b(nc), diagU(nc);
  std::vector<double> diagV(3 * num_points);
  std::vector<Eigen::Matrix3d> Vinv(num_points);
  // Per-thread accumulators of the camera-side blocks (summed in thread order, so a run
  // with a given thread count is deterministic).
  std::vector<Eigen::MatrixXd> S_part(threads, Eigen::MatrixXd(nc, nc));
  std::vector<Eigen::VectorXd> b_part(threads, Eigen::VectorXd(nc));

  double mu = options.initial_mu, nu = 2.0;
  bool relinearize = true;
  std::vector<double> dX(3 * num_points);
  Eigen::VectorXd dc(nc);
  Eigen::MatrixXd U(nc, nc);
  Eigen::VectorXd bc(nc);
  int it = 0;
  for (; it < options.max_iterations; ++it) {
    if (relinearize) {
      // Observations are stored point by point, so a thread that owns a range of points
      // owns their V, g and W; U and bc go through per-thread parts.
      ParallelRegion(threads, [&] {
        const int tid = threads > 1 ? omp_get_thread_num() : 0;
        Eigen::MatrixXd& Ut = S_part[tid];
        Eigen::VectorXd& bt = b_part[tid];
        Ut.setZero();
        bt.setZero();
#pragma omp for schedule(static)
        for (int j = 0; j < num_points; ++j) {
          double* Vj = &V[9 * j];
          double* gj = &g[3 * j];
          std::fill(Vj, Vj + 9, 0.0);
          std::fill(gj, gj + 3, 0.0);
          for (int64_t k = point_ptr[j]; k < point_ptr[j + 1]; ++k) {
            const Obs& o = obs[k];
            const int c = image_camera[o.image];
            double r[2], jpose[12], jpt[6], jprm[10];
            ReconstructionResidual(models[c], params[c].data(), &Rs[9 * o.image], &ts[3 * o.image],
                                   &Xs[3 * o.point], o.xy, r, jpose, jpt, jprm);
            double rho, drho;
            options.loss.Evaluate(r[0] * r[0] + r[1] * r[1], &rho, &drho);
            const double w = std::sqrt(std::max(drho, 0.0));
            // Active camera-side Jacobian: 2 x nl.
            double Jc[2][kMaxLocal];
            int* cols = &local_cols[k * kMaxLocal];
            int nl = 0;
            if (pose_col[o.image] >= 0) {
              for (int q = 0; q < 6; ++q, ++nl) {
                cols[nl] = pose_col[o.image] + q;
                Jc[0][nl] = w * jpose[q];
                Jc[1][nl] = w * jpose[6 + q];
              }
            }
            const int np = CameraModelNumParams(models[c]);
            for (size_t q = 0; q < free_params[c].size(); ++q, ++nl) {
              cols[nl] = intr_col[c] + static_cast<int>(q);
              Jc[0][nl] = w * jprm[free_params[c][q]];
              Jc[1][nl] = w * jprm[np + free_params[c][q]];
            }
            num_local[k] = static_cast<uint8_t>(nl);
            const double wr[2] = {w * r[0], w * r[1]};
            for (int a = 0; a < nl; ++a) {
              bt[cols[a]] -= Jc[0][a] * wr[0] + Jc[1][a] * wr[1];
              for (int bb = 0; bb < nl; ++bb)
                Ut(cols[a], cols[bb]) += Jc[0][a] * Jc[0][bb] + Jc[1][a] * Jc[1][bb];
            }
            double* Wk = &W[k * kMaxLocal * 3];
            if (point_free[j]) {
              double Jp[2][3];
              for (int q = 0; q < 3; ++q) { Jp[0][q] = w * jpt[q]; Jp[1][q] = w * jpt[3 + q]; }
              for (int a = 0; a < 3; ++a) {
                gj[a] -= Jp[0][a] * wr[0] + Jp[1][a] * wr[1];
                for (int bb = 0; bb < 3; ++bb) Vj[3 * a + bb] += Jp[0][a] * Jp[0][bb] + Jp[1][a] * Jp[1][bb];
              }
              for (int a = 0; a < nl; ++a)
                for (int q = 0; q < 3; ++q) Wk[3 * a + q] = Jc[0][a] * Jp[0][q] + Jc[1][a] * Jp[1][q];
            } else {
              std::fill(Wk, Wk + kMaxLocal * 3, 0.0);
            }
          }
        }
      });
      U = S_part[0];
      bc = b_part[0];
      for (int t = 1; t < threads; ++t) { U += S_part[t]; bc += b_part[t]; }
      for (int q = 0; q < nc; ++q) diagU[q] = std::min(std::max(U(q, q), 1e-6), 1e32);
      for (int j = 0; j < num_points; ++j)
        for (int q = 0; q < 3; ++q) diagV[3 * j + q] = std::min(std::max(V[9 * j + 4 * q], 1e-6), 1e32);
      relinearize = false;
      // Gradient-based convergence: nothing left to move.
      double gmax = bc.size() ? bc.cwiseAbs().maxCoeff() : 0.0;
      for (double v : g) gmax = std::max(gmax, std::abs(v));
      if (gmax <= 1e-10) {
        summary->converged = true;
        summary->termination = "gradient tolerance";
        break;
      }
    }

    // Reduced system with damping: S = U + mu D_U - sum_j W_j (V_j + mu D_Vj)^-1 W_j^T,
    // b = bc - sum_j W_j (V_j + mu D_Vj)^-1 g_j, accumulated point by point.
    ParallelRegion(threads, [&] {
      const int tid = threads > 1 ? omp_get_thread_num() : 0;
      Eigen::MatrixXd& St = S_part[tid];
      Eigen::VectorXd& bt = b_part[tid];
      St.setZero();
      bt.setZero();
      std::vector<double> T;  // W_a Vinv of each observation of the point, nl x 3
#pragma omp for schedule(static)
      for (int j = 0; j < num_points; ++j) {
        if (!point_free[j]) continue;
        Eigen::Matrix3d Vj = Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>>(&V[9 * j]);
        for (int q = 0; q < 3; ++q) Vj(q, q) += mu * diagV[3 * j + q];
        Vinv[j] = Vj.inverse();
        const Eigen::Matrix3d& Vi = Vinv[j];
        const double* gj = &g[3 * j];
        const int64_t first = point_ptr[j], count = point_ptr[j + 1] - first;
        T.resize(static_cast<size_t>(count) * kMaxLocal * 3);
        for (int64_t a = 0; a < count; ++a) {
          const int64_t k = first + a;
          const int nl = num_local[k];
          const int* ca = &local_cols[k * kMaxLocal];
          const double* Wa = &W[k * kMaxLocal * 3];
          double* Ta = &T[a * kMaxLocal * 3];
          for (int p = 0; p < nl; ++p) {
            const double* w = Wa + 3 * p;
            double* t = Ta + 3 * p;
            for (int q = 0; q < 3; ++q) t[q] = w[0] * Vi(0, q) + w[1] * Vi(1, q) + w[2] * Vi(2, q);
            bt[ca[p]] -= t[0] * gj[0] + t[1] * gj[1] + t[2] * gj[2];
          }
        }
        for (int64_t a = 0; a < count; ++a) {
          const int64_t ka = first + a;
          const int na = num_local[ka];
          const int* ca = &local_cols[ka * kMaxLocal];
          const double* Ta = &T[a * kMaxLocal * 3];
          for (int64_t bb = a; bb < count; ++bb) {
            const int64_t kb = first + bb;
            const int nb = num_local[kb];
            const int* cb = &local_cols[kb * kMaxLocal];
            const double* Wb = &W[kb * kMaxLocal * 3];
            for (int p = 0; p < na; ++p) {
              const double* t = Ta + 3 * p;
              for (int q = 0; q < nb; ++q) {
                const double* w = Wb + 3 * q;
                const double v = t[0] * w[0] + t[1] * w[1] + t[2] * w[2];
                St(ca[p], cb[q]) -= v;
                if (bb != a) St(cb[q], ca[p]) -= v;
              }
            }
          }
        }
      }
    });
    S = U;
    b = bc;
    for (int t = 0; t < threads; ++t) { S += S_part[t]; b += b_part[t]; }
    for (int q = 0; q < nc; ++q) S(q, q) += mu * diagU[q];
    bool solved = true;
    if (nc > 0) {
      Eigen::LLT<Eigen::MatrixXd> llt(S);
      if (llt.info() != Eigen::Success) {
        solved = false;
      } else {
        dc = llt.solve(b);
        solved = dc.allFinite();
      }
    }
    if (solved) {
      for (int j = 0; j < num_points; ++j) {
        if (!point_free[j]) { dX[3 * j] = dX[3 * j + 1] = dX[3 * j + 2] = 0; continue; }
        Eigen::Vector3d rhs(&g[3 * j]);
        for (int64_t a = point_ptr[j]; a < point_ptr[j + 1]; ++a) {
          const int* ca = &local_cols[a * kMaxLocal];
          const double* Wa = &W[a * kMaxLocal * 3];
          for (int p = 0; p < num_local[a]; ++p)
            for (int q = 0; q < 3; ++q) rhs[q] -= Wa[3 * p + q] * dc[ca[p]];
        }
        const Eigen::Vector3d d = Vinv[j] * rhs;
        dX[3 * j] = d[0]; dX[3 * j + 1] = d[1]; dX[3 * j + 2] = d[2];
        if (!d.allFinite()) solved = false;
      }
    }
    if (!solved) {
      mu *= nu;
      nu *= 2;
      if (mu > 1e16) { summary->termination = "linear solver failed"; break; }
      continue;
    }
    // Predicted decrease: 1/2 dx^T (mu D dx + b_full), b_full = -J^T r.
    double predicted = 0, dx_norm2 = 0, x_norm2 = 0;
    for (int q = 0; q < nc; ++q) {
      predicted += dc[q] * (mu * diagU[q] * dc[q] + bc[q]);
      dx_norm2 += dc[q] * dc[q];
    }
    for (int j = 0; j < num_points; ++j)
      for (int q = 0; q < 3; ++q) {
        predicted += dX[3 * j + q] * (mu * diagV[3 * j + q] * dX[3 * j + q] + g[3 * j + q]);
        dx_norm2 += dX[3 * j + q] * dX[3 * j + q];
        x_norm2 += Xs[3 * j + q] * Xs[3 * j + q];
      }
    predicted *= 0.5;
    // Trial point.
    std::vector<double> Rn = Rs, tn = ts, Xn = Xs;
    std::vector<std::vector<double>> pn = params;
    for (int i = 0; i < num_images; ++i) {
      if (pose_col[i] < 0) continue;
      LeftRotate(&dc[pose_col[i]], &Rn[9 * i]);
      for (int q = 0; q < 3; ++q) tn[3 * i + q] += dc[pose_col[i] + 3 + q];
    }
    for (int c = 0; c < num_cameras; ++c)
      for (size_t q = 0; q < free_params[c].size(); ++q) pn[c][free_params[c][q]] += dc[intr_col[c] + q];
    for (int j = 0; j < num_points; ++j)
      for (int q = 0; q < 3; ++q) Xn[3 * j + q] += dX[3 * j + q];
    const double new_cost = cost_of(Rn, tn, pn, Xn);
    const double rho = (cost - new_cost) / std::max(predicted, 1e-300);
    if (std::isfinite(new_cost) && new_cost < cost && rho > 1e-3) {
      const double rel = (cost - new_cost) / cost;
      Rs.swap(Rn); ts.swap(tn); Xs.swap(Xn); params.swap(pn);
      cost = new_cost;
      mu *= std::max(1.0 / 3.0, 1.0 - std::pow(2.0 * rho - 1.0, 3));
      nu = 2;
      relinearize = true;
      if (rel <= options.function_tolerance) {
        summary->converged = true;
        summary->termination = "function tolerance";
        ++it;
        break;
      }
      if (std::sqrt(dx_norm2) <= options.parameter_tolerance * (std::sqrt(x_norm2) + options.parameter_tolerance)) {
        summary->converged = true;
        summary->termination = "parameter tolerance";
        ++it;
        break;
      }
    } else {
      mu *= nu;
      nu *= 2;
      if (mu > 1e16) {
        summary->converged = true;
        summary->termination = "no further decrease";
        break;
      }
    }
  }
  if (summary->termination.empty()) summary->termination = "max iterations";
  summary->iterations = it;
  summary->final_cost = cost;

  // Write back.
  for (int i = 0; i < num_images; ++i) {
    if (pose_col[i] < 0) continue;
    Image& im = rec->images.at(image_ids[i]);
    RotationToQuaternion(&Rs[9 * i], im.qvec);
    std::copy(&ts[3 * i], &ts[3 * i] + 3, im.tvec);
  }
  for (int c = 0; c < num_cameras; ++c)
    if (!free_params[c].empty()) rec->cameras.at(camera_ids[c]).params = params[c];
  for (int j = 0; j < num_points; ++j)
    if (point_free[j]) std::copy(&Xs[3 * j], &Xs[3 * j] + 3, rec->points3D.at(point_ids[j]).xyz);
  summary->seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  return Status::Ok();
}

}  // namespace tiepoint
