#include "solver/cholmod_schur_solver.h"

#include <cholmod.h>
#include <omp.h>

#include <Eigen/Core>
#include <Eigen/Cholesky>
#include <algorithm>
#include <vector>

#include "solver/blas_buffer.h"

namespace tiepoint {
namespace {

using Mat9 = Eigen::Matrix<double, 9, 9, Eigen::RowMajor>;
using Mat93 = Eigen::Matrix<double, 9, 3, Eigen::RowMajor>;
using Mat3 = Eigen::Matrix<double, 3, 3, Eigen::RowMajor>;
using Jc = Eigen::Matrix<double, 2, 9, Eigen::RowMajor>;
using Jp = Eigen::Matrix<double, 2, 3, Eigen::RowMajor>;
using Vec9 = Eigen::Matrix<double, 9, 1>;
using Vec3 = Eigen::Vector3d;

// Owns the cholmod_common and every CHOLMOD object; the only place CHOLMOD is touched.
class CholmodSchurSolver : public LinearSolver {
 public:
  CholmodSchurSolver(const DoubleBlockLinearization& linearization, int num_threads)
      : linearization_(linearization), num_threads_(num_threads) {
    cholmod_l_start(&common_);
    common_.supernodal = CHOLMOD_SUPERNODAL;
    common_.print = 0;
    common_.error_handler = nullptr;
  }
  ~CholmodSchurSolver() override {
    if (factor_) cholmod_l_free_factor(&factor_, &common_);
    if (matrix_) cholmod_l_free_sparse(&matrix_, &common_);
    cholmod_l_finish(&common_);
  }

  Status Initialize(const BAProblem& problem);
  Status Solve(const double* d_cameras, const double* d_points, const double* rhs_cameras,
               const double* rhs_points, double* dx_cameras, double* dx_points,
               LinearSolverSummary* summary) override;

 private:
  int threads() const { return num_threads_ > 0 ? num_threads_ : omp_get_max_threads(); }

  const DoubleBlockLinearization& linearization_;
  int num_threads_;
  cholmod_common common_;
  cholmod_sparse* matrix_ = nullptr;
  cholmod_factor* factor_ = nullptr;

  // Block pattern of the upper triangle of S, row by row (diagonal block first).
  std::vector<int64_t> row_ptr_;
  std::vector<int32_t> cols_;
  std::vector<double> blocks_;     // 81 per block, row-major
  std::vector<int64_t> csc_pos_;   // 9 per block: CSC position of (row a, first column)
  // Per-solve workspaces.
  std::vector<double> w_;          // 27 per observation: W_ip = Jc^T Jp
  std::vector<double> vinv_;       // 9 per point
  std::vector<double> vinv_b_;     // 3 per point
  std::vector<double> reduced_rhs_;
};

Status CholmodSchurSolver::Initialize(const BAProblem& p) {
  const int nc = p.num_cameras;
  const int nt = threads();
  // Block row i holds cameras j >= i sharing a point with i.
  std::vector<std::vector<int32_t>> rows(nc);
#pragma omp parallel num_threads(nt)
  {
    std::vector<uint8_t> mark(nc, 0);
    std::vector<int32_t> touched;
#pragma omp for schedule(dynamic, 8)
    for (int i = 0; i < nc; ++i) {
      touched.clear();
      touched.push_back(i);
      mark[i] = 1;
      for (int64_t k = p.camera_ptr[i]; k < p.camera_ptr[i + 1]; ++k) {
        const int point = p.obs_point[p.camera_obs[k]];
        for (int64_t o = p.point_ptr[point]; o < p.point_ptr[point + 1]; ++o) {
          const int j = p.obs_camera[o];
          if (j > i && !mark[j]) {
            mark[j] = 1;
            touched.push_back(j);
          }
        }
      }
      for (int32_t j : touched) mark[j] = 0;
      std::sort(touched.begin(), touched.end());
      rows[i] = touched;
    }
  }
  row_ptr_.assign(nc + 1, 0);
  for (int i = 0; i < nc; ++i) row_ptr_[i + 1] = row_ptr_[i] + static_cast<int64_t>(rows[i].size());
  const int64_t num_blocks = row_ptr_[nc];
  cols_.resize(num_blocks);
  for (int i = 0; i < nc; ++i) std::copy(rows[i].begin(), rows[i].end(), cols_.begin() + row_ptr_[i]);
  rows.clear();
  rows.shrink_to_fit();
  blocks_.assign(81 * num_blocks, 0.0);

  // Upper triangle stored by block rows == lower triangle of S in CSC (S is symmetric):
  // scalar column 9i+a holds row a of each block (i, j), j >= i; on the diagonal block
  // only the entries b >= a.
  const int64_t n = 9LL * nc;
  int64_t nnz = 0;
  for (int i = 0; i < nc; ++i) {
    const int64_t blocks_in_row = row_ptr_[i + 1] - row_ptr_[i];
    for (int a = 0; a < 9; ++a) nnz += 9 * (blocks_in_row - 1) + (9 - a);
  }
  if (matrix_) cholmod_l_free_sparse(&matrix_, &common_);
  if (factor_) cholmod_l_free_factor(&factor_, &common_);
  matrix_ = cholmod_l_allocate_sparse(n, n, nnz, /*sorted=*/1, /*packed=*/1, /*stype=*/-1,
                                      CHOLMOD_REAL, &common_);
  if (!matrix_) {
    return Status::OutOfMemory("CHOLMOD could not allocate the reduced camera system (" +
                               std::to_string(nnz) + " nonzeros)");
  }
  auto* colp = static_cast<SuiteSparse_long*>(matrix_->p);
  auto* rowi = static_cast<SuiteSparse_long*>(matrix_->i);
  csc_pos_.resize(9 * num_blocks);
  int64_t pos = 0;
  for (int i = 0; i < nc; ++i) {
    for (int a = 0; a < 9; ++a) {
      colp[9 * i + a] = pos;
      for (int64_t k = row_ptr_[i]; k < row_ptr_[i + 1]; ++k) {
        const int j = cols_[k];
        const int b0 = (j == i) ? a : 0;
        csc_pos_[9 * k + a] = pos;
        for (int b = b0; b < 9; ++b) rowi[pos++] = 9LL * j + b;
      }
    }
  }
  colp[n] = pos;
  factor_ = cholmod_l_analyze(matrix_, &common_);
  if (!factor_ || common_.status < CHOLMOD_OK) {
    return Status::Internal("CHOLMOD symbolic analysis failed (status " +
                            std::to_string(common_.status) + ")");
  }
  w_.resize(27 * p.num_observations);
  vinv_.resize(9 * static_cast<size_t>(p.num_points));
  vinv_b_.resize(3 * static_cast<size_t>(p.num_points));
  reduced_rhs_.resize(9 * static_cast<size_t>(nc));
  return Status::Ok();
}

Status CholmodSchurSolver::Solve(const double* d_cameras, const double* d_points,
                                 const double* rhs_cameras, const double* rhs_points,
                                 double* dx_cameras, double* dx_points,
                                 LinearSolverSummary* summary) {
  const BAProblem& p = linearization_.problem();
  const JacobianBlocks& jac = linearization_.jacobian();
  const int nt = threads();
  const int nc = p.num_cameras;
  summary->iterations = 1;
  summary->success = false;

  // Point blocks: V_p^-1, V_p^-1 b_p and W_ip = Jc^T Jp for every observation.
  int not_pd = 0;
#pragma omp parallel for num_threads(nt) schedule(static) reduction(+ : not_pd)
  for (int j = 0; j < p.num_points; ++j) {
    Mat3 V = Mat3::Zero();
    for (int64_t i = p.point_ptr[j]; i < p.point_ptr[j + 1]; ++i) {
      const Eigen::Map<const Jp> J(&jac.jp[6 * i]);
      V.noalias() += J.transpose() * J;
      Eigen::Map<Mat93> W(&w_[27 * i]);
      W.noalias() = Eigen::Map<const Jc>(&jac.jc[18 * i]).transpose() * J;
    }
    V.diagonal() += Vec3(d_points + 3 * j);
    Eigen::LLT<Mat3> llt(V);
    if (llt.info() != Eigen::Success) {
      ++not_pd;
      continue;
    }
    Eigen::Map<Mat3> Vinv(&vinv_[9 * j]);
    Vinv = llt.solve(Mat3::Identity());
    Eigen::Map<Vec3> vinv_b(&vinv_b_[3 * j]);
    vinv_b = Vinv * Vec3(rhs_points + 3 * j);
  }
  if (not_pd > 0) {
    summary->message = std::to_string(not_pd) + " point blocks are not positive definite";
    return Status::Ok();
  }

  // Reduced camera system, one block row per task: S_ij = U_i [i==j] - sum_p W_ip V_p^-1 W_jp^T.
#pragma omp parallel for num_threads(nt) schedule(dynamic, 4)
  for (int i = 0; i < nc; ++i) {
    const int64_t row_begin = row_ptr_[i], row_end = row_ptr_[i + 1];
    std::fill(blocks_.begin() + 81 * row_begin, blocks_.begin() + 81 * row_end, 0.0);
    Eigen::Map<Mat9> Sii(&blocks_[81 * row_begin]);
    Vec9 r = Vec9(rhs_cameras + 9 * i);
    for (int64_t k = p.camera_ptr[i]; k < p.camera_ptr[i + 1]; ++k) {
      const int64_t o = p.camera_obs[k];
      const int point = p.obs_point[o];
      const Eigen::Map<const Jc> J(&jac.jc[18 * o]);
      Sii.noalias() += J.transpose() * J;
      const Eigen::Map<const Mat93> W(&w_[27 * o]);
      r.noalias() -= W * Eigen::Map<const Vec3>(&vinv_b_[3 * point]);
      const Mat93 Y = W * Eigen::Map<const Mat3>(&vinv_[9 * point]);
      const int32_t* cols_begin = cols_.data() + row_begin;
      const int32_t* cols_end = cols_.data() + row_end;
      for (int64_t o2 = p.point_ptr[point]; o2 < p.point_ptr[point + 1]; ++o2) {
        const int j = p.obs_camera[o2];
        if (j < i) continue;
        const int64_t block = row_begin + (std::lower_bound(cols_begin, cols_end, j) - cols_begin);
        Eigen::Map<Mat9> S(&blocks_[81 * block]);
        S.noalias() -= Y * Eigen::Map<const Mat93>(&w_[27 * o2]).transpose();
      }
    }
    Sii.diagonal() += Vec9(d_cameras + 9 * i);
    Eigen::Map<Vec9> reduced(&reduced_rhs_[9 * i]);
    reduced = r;

    // Scatter the block row into CHOLMOD's lower-triangular CSC values.
    auto* x = static_cast<double*>(matrix_->x);
    for (int64_t k = row_begin; k < row_end; ++k) {
      const double* B = &blocks_[81 * k];
      const int b0max = (cols_[k] == i);
      for (int a = 0; a < 9; ++a) {
        const int b0 = b0max ? a : 0;
        std::copy(B + 9 * a + b0, B + 9 * a + 9, x + csc_pos_[9 * k + a]);
      }
    }
  }

  TIEPOINT_RETURN_IF_ERROR(
      CheckRoomForBlasBuffer("CHOLMOD Schur solver", static_cast<size_t>(std::max(0.0, common_.lnz)) * 12));
  if (!cholmod_l_factorize(matrix_, factor_, &common_) || common_.status == CHOLMOD_NOT_POSDEF) {
    summary->message = "the reduced camera system is not positive definite";
    return Status::Ok();
  }
  if (common_.status < CHOLMOD_OK) {
    return Status::Internal("CHOLMOD factorization failed (status " +
                            std::to_string(common_.status) + ")");
  }
  cholmod_dense* b = cholmod_l_allocate_dense(9LL * nc, 1, 9LL * nc, CHOLMOD_REAL, &common_);
  if (!b) return Status::OutOfMemory("CHOLMOD could not allocate the right-hand side");
  std::copy(reduced_rhs_.begin(), reduced_rhs_.end(), static_cast<double*>(b->x));
  cholmod_dense* x = cholmod_l_solve(CHOLMOD_A, factor_, b, &common_);
  cholmod_l_free_dense(&b, &common_);
  if (!x) return Status::Internal("CHOLMOD solve failed");
  std::copy_n(static_cast<const double*>(x->x), 9LL * nc, dx_cameras);
  cholmod_l_free_dense(&x, &common_);

  // Back-substitution: dp = V^-1 (b_p - sum_i W_ip^T dc_i).
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int j = 0; j < p.num_points; ++j) {
    Vec3 r(rhs_points + 3 * j);
    for (int64_t i = p.point_ptr[j]; i < p.point_ptr[j + 1]; ++i) {
      r.noalias() -= Eigen::Map<const Mat93>(&w_[27 * i]).transpose() *
                     Eigen::Map<const Vec9>(dx_cameras + 9 * p.obs_camera[i]);
    }
    Eigen::Map<Vec3> dx(dx_points + 3 * j);
    dx = Eigen::Map<const Mat3>(&vinv_[9 * j]) * r;
  }
  summary->success = true;
  return Status::Ok();
}

}  // namespace

Status CreateCholmodSchurSolver(const DoubleBlockLinearization& linearization, int num_threads,
                                std::unique_ptr<LinearSolver>* solver) {
  auto s = std::make_unique<CholmodSchurSolver>(linearization, num_threads);
  TIEPOINT_RETURN_IF_ERROR(s->Initialize(linearization.problem()));
  *solver = std::move(s);
  return Status::Ok();
}

}  // namespace tiepoint
