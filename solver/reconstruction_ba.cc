#include "solver/reconstruction_ba.h"

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <Eigen/LU>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <unordered_map>

#include <cholmod.h>
#include <omp.h>

#include "solver/blas_buffer.h"
#include "solver/parallel.h"
#include "solver/reconstruction_ba_cuda.h"

namespace tiepoint {
namespace {

// Camera-side columns of one observation: 6 for the pose, then at most 12 intrinsics
// (FULL_OPENCV, THIN_PRISM_FISHEYE). Per-observation storage uses the problem's own largest
// count (ml below).
constexpr int kMaxLocal = 18;

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
    case CameraModelId::kOpenCV: focal = {0, 1}; pp = {2, 3}; extra = {4, 5, 6, 7}; break;
    case CameraModelId::kOpenCVFisheye: focal = {0, 1}; pp = {2, 3}; extra = {4, 5, 6, 7}; break;
    case CameraModelId::kSimpleRadialFisheye: focal = {0}; pp = {1, 2}; extra = {3}; break;
    case CameraModelId::kRadialFisheye: focal = {0}; pp = {1, 2}; extra = {3, 4}; break;
    case CameraModelId::kFullOpenCV:
    case CameraModelId::kThinPrismFisheye:
      focal = {0, 1}; pp = {2, 3}; extra = {4, 5, 6, 7, 8, 9, 10, 11}; break;
    case CameraModelId::kFov: focal = {0, 1}; pp = {2, 3}; extra = {4}; break;
  }
  if (options.hold_aspect_ratio) focal.resize(1);  // fx's column stands for both
  // The distortion terms after k1, k2 (OPENCV's p1, p2, OPENCV_FISHEYE's k3, k4, and
  // FULL_OPENCV's and THIN_PRISM_FISHEYE's six) only with refine_tangential.
  if (CameraModelHasLaterDistortionTerms(model) && !options.refine_tangential) extra.resize(2);
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

// Symmetric block-sparse matrix over the reduced system's blocks (a pose's 6 columns, a
// camera's free intrinsics), upper triangle by block rows (A <= B); each stored block is
// dense row-major size[A] x size[B], diagonal blocks in full.
struct BlockPattern {
  std::vector<int> start, size;  // per block: first column, width
  std::vector<int64_t> row_ptr;  // per block row, into cols / offset
  std::vector<int> cols;         // column block of each stored block (sorted per row)
  std::vector<int64_t> offset;   // value offset of each stored block
  int64_t num_values = 0;
  int num_pose_blocks = 0;       // blocks [0, num_pose_blocks) are poses, the rest intrinsics

  // adj[A]: column blocks B >= A of row A (any order, duplicates allowed).
  void Build(std::vector<std::vector<int>>* adj) {
    const int nb = static_cast<int>(adj->size());
    row_ptr.assign(1, 0);
    cols.clear();
    offset.clear();
    num_values = 0;
    for (int a = 0; a < nb; ++a) {
      std::vector<int>& r = (*adj)[a];
      std::sort(r.begin(), r.end());
      r.erase(std::unique(r.begin(), r.end()), r.end());
      for (int bb : r) {
        cols.push_back(bb);
        offset.push_back(num_values);
        num_values += static_cast<int64_t>(size[a]) * size[bb];
      }
      row_ptr.push_back(static_cast<int64_t>(cols.size()));
    }
  }
  int64_t Find(int a, int b) const {
    const auto first = cols.begin() + row_ptr[a], last = cols.begin() + row_ptr[a + 1];
    const auto it = std::lower_bound(first, last, b);
    return (it != last && *it == b) ? offset[it - cols.begin()] : -1;
  }
};

// Camera-side blocks of one observation: the pose block (local rows 0..5) if the pose is
// variable, then the camera's intrinsics block; pose blocks precede intrinsics blocks.
struct ObsBlocks {
  int blk[2];
  uint8_t off[2];
  uint8_t n;
};

// The observation's pose block (its local rows 0..5), or -1 when its pose is fixed.
int PoseBlockOf(const ObsBlocks& o, int num_pose_blocks) {
  return o.n > 0 && o.blk[0] < num_pose_blocks ? o.blk[0] : -1;
}

// Point side of one LM step, read by the Schur assembly and the matrix-free product.
struct PointSide {
  int num_points;
  const int64_t* point_ptr;
  const uint8_t* point_free;
  const ObsBlocks* obs_blocks;
  const int* local_cols;     // max_local per observation
  const uint8_t* num_local;
  const double* W;           // max_local x 3 per observation
  // Optional (null: looked up with BlockPattern::Find): per free point, where its pose
  // pairs start in pair_offsets, which holds the value offset (or -1) of the block of the
  // poses of every pair of its observations a <= b whose poses are free, in
  // SchurAccumulatePoint's loop order. Built once per bundle adjustment; saves a binary
  // search per pair in every LM step.
  const int64_t* pair_ptr = nullptr;
  const int64_t* pair_offsets = nullptr;
  int max_local = kMaxLocal;  // stride of local_cols (and of W, times 3)
};

// vals(block A, B) -= M or M^T (see SchurAccumulatePoint), M = T_x W_y^T over the local rows of
// the two blocks; T and W are (local rows) x 3 row-major. Only blocks with A <= B are stored:
// for bx > by, M goes transposed into block (by, bx).
// The value offset of block (bx, by) as stored (A <= B), or -1.
int64_t StoredOffset(const BlockPattern& pat, int bx, int by) {
  return bx <= by ? pat.Find(bx, by) : pat.Find(by, bx);
}

// x86-64 (GCC): an AVX2 copy of SubtractPosePoseProduct beside the baseline one, chosen
// when the program loads. "avx2" does not include FMA, so both copies round alike.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__)
#define TIEPOINT_BA_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TIEPOINT_BA_CLONES
#endif

// blk(r, c) -= a_r . b_c for r, c < 6: a 6 x 6 row-major block, A 6 x 3 row-major and B
// given turned (Bt: 3 x 6 row-major), so that the loops over c run over contiguous values
// (vectorised).
TIEPOINT_BA_CLONES
void SubtractPosePoseProduct(double* __restrict blk, const double* __restrict A, const double* __restrict Bt) {
  for (int r = 0; r < 6; ++r) {
    const double a0 = A[3 * r], a1 = A[3 * r + 1], a2 = A[3 * r + 2];
    double* row = blk + 6 * r;
    for (int c = 0; c < 6; ++c) row[c] -= a0 * Bt[c] + a1 * Bt[6 + c] + a2 * Bt[12 + c];
  }
}

// At (3 x 6) = A^T for A 6 x 3, both row-major.
void Turn63(const double* A, double* At) {
  for (int c = 0; c < 6; ++c)
    for (int q = 0; q < 3; ++q) At[6 * q + c] = A[3 * c + q];
}

// blk(p, q) += j0[p] j0[q] + j1[p] j1[q] for p, q < 6: a pose's block of J^T J from one
// observation's two rows.
TIEPOINT_BA_CLONES
void AddPoseGram(double* __restrict blk, const double* __restrict j0, const double* __restrict j1) {
  for (int p = 0; p < 6; ++p) {
    const double a0 = j0[p], a1 = j1[p];
    double* row = blk + 6 * p;
    for (int q = 0; q < 6; ++q) row[q] += a0 * j0[q] + a1 * j1[q];
  }
}

// `o`: StoredOffset(pat, bx, by). Any two blocks (SchurAccumulatePoint takes the pairs of
// pose blocks, the bulk of the work, through SubtractPosePoseProduct).
void SubtractProduct(const BlockPattern& pat, double* vals, int64_t o, int bx, int ox,
                     const double* T, int by, int oy, const double* Wb, bool add_transpose_too) {
  const int sx = pat.size[bx], sy = pat.size[by];
  const bool upper = bx <= by;
  if (o < 0) return;
  double* blk = vals + o;
  // Element (r, c) of M: row r of block (bx, by), or column r of block (by, bx).
  const int row_stride = upper ? sy : 1, col_stride = upper ? 1 : sx;
  for (int r = 0; r < sx; ++r) {
    const double* t = T + 3 * (ox + r);
    for (int c = 0; c < sy; ++c) {
      const double* w = Wb + 3 * (oy + c);
      const double v = t[0] * w[0] + t[1] * w[1] + t[2] * w[2];
      blk[r * row_stride + c * col_stride] -= v;
      if (add_transpose_too) blk[c * sy + r] -= v;  // bx == by
    }
  }
}

// One intrinsics block's rows of W_j summed over a point's observations, and the same
// rows of T = W Vinv (SchurAccumulatePoint).
struct IntrinsicsSum {
  int block;
  int size;
  double W[3 * (kMaxLocal - 6)];
  double T[3 * (kMaxLocal - 6)];
};

// SchurAccumulatePoint's scratch, one per thread.
struct SchurScratch {
  std::vector<double> T;       // W_a Vinv of each observation of the point, nl x 3
  std::vector<double> turned;  // per observation with a pose: its pose rows of W and of T turned, 3 x 6 each
  std::vector<IntrinsicsSum> sums;
};

// Adds -sum_j W_j Vinv_j W_j^T to vals (the blocks of `pat`; blocks missing from `pat`,
// or all off-diagonal blocks with diag_only, are skipped) and -sum_j W_j Vinv_j g_j to bt.
// One point's contributions; called inside the per-thread point loop.
// Pose blocks pair up observation by observation (one product per pair a <= b). An
// intrinsics block is shared by every observation of its camera's images, so its rows of
// W_j are summed over the point's observations first: its blocks with a pose, and with
// itself, are then one product per observation, or per point, instead of one per pair of
// observations (with one camera, a point seen 5 times: 5 + 1 products instead of 25 + 15).
void SchurAccumulatePoint(const BlockPattern& pat, const PointSide& ps, int j,
                          const Eigen::Matrix3d& Vi, const double* gj, bool diag_only,
                          SchurScratch* scratch, double* vals, double* bt) {
  const int64_t first = ps.point_ptr[j], count = ps.point_ptr[j + 1] - first;
  const int ml = ps.max_local;
  std::vector<double>* T = &scratch->T;
  std::vector<IntrinsicsSum>* sums = &scratch->sums;
  T->resize(static_cast<size_t>(count) * ml * 3);
  scratch->turned.resize(static_cast<size_t>(count) * 36);
  sums->clear();
  for (int64_t a = 0; a < count; ++a) {
    const int64_t k = first + a;
    const int nl = ps.num_local[k];
    const int* ca = &ps.local_cols[k * ml];
    const double* Wa = &ps.W[k * ml * 3];
    double* Ta = &(*T)[a * ml * 3];
    for (int p = 0; p < nl; ++p) {
      const double* w = Wa + 3 * p;
      double* t = Ta + 3 * p;
      for (int q = 0; q < 3; ++q) t[q] = w[0] * Vi(0, q) + w[1] * Vi(1, q) + w[2] * Vi(2, q);
      bt[ca[p]] -= t[0] * gj[0] + t[1] * gj[1] + t[2] * gj[2];
    }
    const ObsBlocks& oa = ps.obs_blocks[k];
    if (PoseBlockOf(oa, pat.num_pose_blocks) >= 0) {
      Turn63(Wa, &scratch->turned[36 * a]);
      Turn63(Ta, &scratch->turned[36 * a + 18]);
    }
    for (int x = 0; x < oa.n; ++x) {
      const int bx = oa.blk[x];
      if (bx < pat.num_pose_blocks) continue;
      size_t i = 0;
      while (i < sums->size() && (*sums)[i].block != bx) ++i;
      if (i == sums->size()) {
        sums->emplace_back();
        IntrinsicsSum& z = sums->back();
        z.block = bx;
        z.size = pat.size[bx];
        std::fill(z.W, z.W + 3 * z.size, 0.0);
        std::fill(z.T, z.T + 3 * z.size, 0.0);
      }
      IntrinsicsSum& sum = (*sums)[i];
      for (int q = 0; q < 3 * sum.size; ++q) {
        sum.W[q] += Wa[3 * oa.off[x] + q];
        sum.T[q] += Ta[3 * oa.off[x] + q];
      }
    }
  }
  // Pose with pose.
  const int64_t* table = ps.pair_offsets ? ps.pair_offsets + ps.pair_ptr[j] : nullptr;
  for (int64_t a = 0; a < count; ++a) {
    const int bx = PoseBlockOf(ps.obs_blocks[first + a], pat.num_pose_blocks);
    if (bx < 0) continue;
    const double* Ta = &(*T)[a * ml * 3];
    for (int64_t bb = a; bb < count; ++bb) {
      const int by = PoseBlockOf(ps.obs_blocks[first + bb], pat.num_pose_blocks);
      if (by < 0) continue;
      const int64_t o = table ? *table++ : -2;  // every such (a, b) has an entry
      if (diag_only && bx != by) continue;
      const int64_t off = o == -2 ? StoredOffset(pat, bx, by) : o;
      const double* Wb = &ps.W[(first + bb) * ml * 3];
      if (off >= 0 && !(bb != a && bx == by)) {
        // T_a W_b^T into block (bx, by), or W_b T_a^T into (by, bx): the same products.
        if (bx <= by) {
          SubtractPosePoseProduct(vals + off, Ta, &scratch->turned[36 * bb]);
        } else {
          SubtractPosePoseProduct(vals + off, Wb, &scratch->turned[36 * a + 18]);
        }
        continue;
      }
      // (a, b) of one image: also its mirror (b, a).
      SubtractProduct(pat, vals, off, bx, 0, Ta, by, 0, Wb, bb != a && bx == by);
    }
  }
  // Pose with intrinsics: block (P_a, I) gets T_a's pose rows times I's summed W rows
  // (pose blocks come first: stored as is).
  if (!diag_only) {
    for (int64_t a = 0; a < count; ++a) {
      const int bx = PoseBlockOf(ps.obs_blocks[first + a], pat.num_pose_blocks);
      if (bx < 0) continue;
      const double* Ta = &(*T)[a * ml * 3];
      for (const IntrinsicsSum& sum : *sums)
        SubtractProduct(pat, vals, pat.Find(bx, sum.block), bx, 0, Ta, sum.block, 0, sum.W, false);
    }
  }
  // Intrinsics with intrinsics: (I, J) gets I's summed T rows times J's summed W rows.
  for (size_t x = 0; x < sums->size(); ++x)
    for (size_t y = diag_only ? x : 0; y < (diag_only ? x + 1 : sums->size()); ++y) {
      const IntrinsicsSum &si = (*sums)[x], &sj = (*sums)[y];
      if (si.block > sj.block) continue;  // each unordered pair once, stored (A <= B)
      SubtractProduct(pat, vals, pat.Find(si.block, sj.block), si.block, 0, si.T, sj.block, 0, sj.W, false);
    }
}

// One LM step's reduced system S dc = b as the linear solvers see it.
struct ReducedSystem {
  const BlockPattern* pattern;
  const std::vector<double>* S;  // blocks of S + mu D (kIterativeSchur: only the diagonal
                                 // blocks are S's, the others are U's)
  const std::vector<double>* U;  // blocks of U (undamped)
  const Eigen::VectorXd* diagU;
  double mu;
  const Eigen::VectorXd* b;
  PointSide points;
  const std::vector<Eigen::Matrix3d>* Vinv;  // (V_j + mu D_Vj)^-1
  int threads;
};

class ReducedSolver {
 public:
  virtual ~ReducedSolver() = default;
  // Whether S's off-diagonal blocks must be assembled (false: only its diagonal blocks).
  virtual bool NeedsOffDiagonalSchur() const { return true; }
  // *solved = false when S is not numerically positive definite (LM then raises mu).
  virtual Status Solve(const ReducedSystem& sys, Eigen::VectorXd* dc, bool* solved,
                       int* iterations) = 0;
};

class DenseSchurSolver : public ReducedSolver {
 public:
  Status Solve(const ReducedSystem& sys, Eigen::VectorXd* dc, bool* solved, int*) override {
    const BlockPattern& pat = *sys.pattern;
    const int n = static_cast<int>(sys.b->size());
    S_.setZero(n, n);
    const int nb = static_cast<int>(pat.size.size());
    for (int a = 0; a < nb; ++a)
      for (int64_t k = pat.row_ptr[a]; k < pat.row_ptr[a + 1]; ++k) {
        const int bb = pat.cols[k], sa = pat.size[a], sb = pat.size[bb];
        const double* blk = sys.S->data() + pat.offset[k];
        for (int r = 0; r < sa; ++r)
          for (int c = 0; c < sb; ++c) {
            S_(pat.start[a] + r, pat.start[bb] + c) = blk[r * sb + c];
            S_(pat.start[bb] + c, pat.start[a] + r) = blk[r * sb + c];
          }
      }
    Eigen::LLT<Eigen::MatrixXd> llt(S_);
    if (llt.info() != Eigen::Success) { *solved = false; return Status::Ok(); }
    *dc = llt.solve(*sys.b);
    *solved = dc->allFinite();
    return Status::Ok();
  }

 private:
  Eigen::MatrixXd S_;
};

// CHOLMOD (supernodal, long indices) on the lower triangle in CSC, which is the stored
// upper triangle read by rows; analysed once (the pattern is fixed), factored each step.
class SparseSchurSolver : public ReducedSolver {
 public:
  SparseSchurSolver() { cholmod_l_start(&common_); }
  ~SparseSchurSolver() override {
    if (factor_) cholmod_l_free_factor(&factor_, &common_);
    if (matrix_) cholmod_l_free_sparse(&matrix_, &common_);
    cholmod_l_finish(&common_);
  }
  SparseSchurSolver(const SparseSchurSolver&) = delete;
  SparseSchurSolver& operator=(const SparseSchurSolver&) = delete;

  Status Solve(const ReducedSystem& sys, Eigen::VectorXd* dc, bool* solved, int*) override {
    const BlockPattern& pat = *sys.pattern;
    const int64_t n = sys.b->size();
    const int nb = static_cast<int>(pat.size.size());
    if (!matrix_) {
      int64_t nnz = 0;
      for (int a = 0; a < nb; ++a)
        for (int64_t k = pat.row_ptr[a]; k < pat.row_ptr[a + 1]; ++k) {
          const int bb = pat.cols[k];
          nnz += bb == a ? pat.size[a] * (pat.size[a] + 1) / 2
                         : static_cast<int64_t>(pat.size[a]) * pat.size[bb];
        }
      matrix_ = cholmod_l_allocate_sparse(n, n, nnz, 1, 1, -1, CHOLMOD_REAL, &common_);
      if (!matrix_)
        return Status::OutOfMemory("bundle adjustment: CHOLMOD could not allocate the reduced system (" +
                                   std::to_string(nnz) + " nonzeros)");
      auto* colp = static_cast<SuiteSparse_long*>(matrix_->p);
      auto* rowi = static_cast<SuiteSparse_long*>(matrix_->i);
      int64_t pos = 0;
      for (int a = 0; a < nb; ++a)
        for (int r = 0; r < pat.size[a]; ++r) {
          colp[pat.start[a] + r] = pos;
          for (int64_t k = pat.row_ptr[a]; k < pat.row_ptr[a + 1]; ++k) {
            const int bb = pat.cols[k];
            for (int c = bb == a ? r : 0; c < pat.size[bb]; ++c) {
              src_.push_back(pat.offset[k] + static_cast<int64_t>(r) * pat.size[bb] + c);
              rowi[pos++] = pat.start[bb] + c;
            }
          }
        }
      colp[n] = pos;
      factor_ = cholmod_l_analyze(matrix_, &common_);
      if (!factor_) return Status::Internal("bundle adjustment: CHOLMOD analysis failed");
    }
    double* x = static_cast<double*>(matrix_->x);
    for (size_t q = 0; q < src_.size(); ++q) x[q] = (*sys.S)[src_[q]];
    TIEPOINT_RETURN_IF_ERROR(
        CheckRoomForBlasBuffer("bundle adjustment", static_cast<size_t>(std::max(0.0, common_.lnz)) * 12));
    if (!cholmod_l_factorize(matrix_, factor_, &common_) || common_.status == CHOLMOD_NOT_POSDEF) {
      *solved = false;
      return Status::Ok();
    }
    if (common_.status < CHOLMOD_OK)
      return Status::Internal("bundle adjustment: CHOLMOD factorization failed (status " +
                              std::to_string(common_.status) + ")");
    cholmod_dense* rhs = cholmod_l_allocate_dense(n, 1, n, CHOLMOD_REAL, &common_);
    if (!rhs) return Status::OutOfMemory("bundle adjustment: CHOLMOD could not allocate the right-hand side");
    std::copy_n(sys.b->data(), n, static_cast<double*>(rhs->x));
    cholmod_dense* sol = cholmod_l_solve(CHOLMOD_A, factor_, rhs, &common_);
    cholmod_l_free_dense(&rhs, &common_);
    if (!sol) return Status::Internal("bundle adjustment: CHOLMOD solve failed");
    dc->resize(n);
    std::copy_n(static_cast<const double*>(sol->x), n, dc->data());
    cholmod_l_free_dense(&sol, &common_);
    *solved = dc->allFinite();
    return Status::Ok();
  }

 private:
  cholmod_common common_;
  cholmod_sparse* matrix_ = nullptr;
  cholmod_factor* factor_ = nullptr;
  std::vector<int64_t> src_;  // value index in the block storage of each CSC entry
};

// Block-Jacobi preconditioner: inverses of S's damped diagonal blocks; false when one is
// not positive definite.
bool BlockJacobiInverses(const ReducedSystem& sys, std::vector<Eigen::MatrixXd>* inv) {
  const BlockPattern& pat = *sys.pattern;
  const int nb = static_cast<int>(pat.size.size());
  inv->resize(nb);
  for (int a = 0; a < nb; ++a) {
    const int s = pat.size[a];
    const Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> D(
        sys.S->data() + pat.offset[pat.row_ptr[a]], s, s);
    Eigen::LLT<Eigen::MatrixXd> llt(D);
    if (llt.info() != Eigen::Success) return false;
    (*inv)[a] = llt.solve(Eigen::MatrixXd::Identity(s, s));
  }
  return true;
}

// IterativeSchurSolver's CG on the GPU (solver/reconstruction_ba_cuda.h): the same
// preconditioner, product and recurrences; the step's arrays are uploaded each call.
class CudaIterativeSchurSolver : public ReducedSolver {
 public:
  CudaIterativeSchurSolver(std::unique_ptr<CudaReducedPcg> pcg, double tolerance, int max_iterations)
      : pcg_(std::move(pcg)), tolerance_(tolerance), max_iterations_(max_iterations) {}
  bool NeedsOffDiagonalSchur() const override { return false; }

  Status Solve(const ReducedSystem& sys, Eigen::VectorXd* dc, bool* solved,
               int* iterations) override {
    const BlockPattern& pat = *sys.pattern;
    if (!BlockJacobiInverses(sys, &inv_)) { *solved = false; return Status::Ok(); }
    flat_.clear();
    for (const Eigen::MatrixXd& m : inv_)
      for (int r = 0; r < m.rows(); ++r)
        for (int c = 0; c < m.cols(); ++c) flat_.push_back(m(r, c));
    const PointSide& ps = sys.points;
    ReducedSystemView v;
    v.n = static_cast<int>(sys.b->size());
    v.num_blocks = static_cast<int>(pat.size.size());
    v.block_start = pat.start.data();
    v.block_size = pat.size.data();
    v.row_ptr = pat.row_ptr.data();
    v.cols = pat.cols.data();
    v.offset = pat.offset.data();
    v.num_values = pat.num_values;
    v.U = sys.U->data();
    v.diagU = sys.diagU->data();
    v.mu = sys.mu;
    v.precond = flat_.data();
    v.num_points = ps.num_points;
    v.point_ptr = ps.point_ptr;
    v.point_free = ps.point_free;
    v.max_local = ps.max_local;
    v.local_cols = ps.local_cols;
    v.num_local = ps.num_local;
    v.W = ps.W;
    v.Vinv = sys.Vinv->empty() ? nullptr : (*sys.Vinv)[0].data();
    v.b = sys.b->data();
    // Pose blocks precede intrinsics blocks.
    v.intr_begin = pat.num_pose_blocks < v.num_blocks ? pat.start[pat.num_pose_blocks] : v.n;
    dc->resize(v.n);
    return pcg_->Solve(v, tolerance_, max_iterations_, dc->data(), solved, iterations);
  }

 private:
  std::unique_ptr<CudaReducedPcg> pcg_;
  double tolerance_;
  int max_iterations_;
  std::vector<Eigen::MatrixXd> inv_;
  std::vector<double> flat_;
};

// Matrix-free preconditioned CG on S dc = b.
class IterativeSchurSolver : public ReducedSolver {
 public:
  IterativeSchurSolver(double tolerance, int max_iterations)
      : tolerance_(tolerance), max_iterations_(max_iterations) {}
  bool NeedsOffDiagonalSchur() const override { return false; }

  Status Solve(const ReducedSystem& sys, Eigen::VectorXd* dc, bool* solved,
               int* iterations) override {
    const BlockPattern& pat = *sys.pattern;
    const int n = static_cast<int>(sys.b->size());
    const int nb = static_cast<int>(pat.size.size());
    if (!BlockJacobiInverses(sys, &precond_)) { *solved = false; return Status::Ok(); }
    auto precondition = [&](const Eigen::VectorXd& r, Eigen::VectorXd* z) {
      for (int a = 0; a < nb; ++a)
        z->segment(pat.start[a], pat.size[a]) = precond_[a] * r.segment(pat.start[a], pat.size[a]);
    };
    parts_.assign(sys.threads, Eigen::VectorXd(n));
    auto apply = [&](const Eigen::VectorXd& x, Eigen::VectorXd* y) { Apply(sys, x, y); };

    Eigen::VectorXd& x = *dc;
    x.setZero(n);
    Eigen::VectorXd r = *sys.b, z(n), p(n), q(n);
    const double bnorm = r.norm();
    int it = 0;
    if (bnorm > 0) {
      precondition(r, &z);
      p = z;
      double rz = r.dot(z);
      for (; it < max_iterations_; ++it) {
        apply(p, &q);
        const double pq = p.dot(q);
        if (!(pq > 0)) {
          if (it == 0) { *solved = false; return Status::Ok(); }
          break;  // lost positive curvature to rounding: keep the iterate so far
        }
        const double alpha = rz / pq;
        x += alpha * p;
        r -= alpha * q;
        if (r.norm() <= tolerance_ * bnorm) { ++it; break; }
        precondition(r, &z);
        const double rz_new = r.dot(z);
        p = z + (rz_new / rz) * p;
        rz = rz_new;
      }
    }
    *iterations += it;
    *solved = x.allFinite();
    return Status::Ok();
  }

 private:
  // y = (U + mu D_U) x - sum_j W_j Vinv_j W_j^T x.
  void Apply(const ReducedSystem& sys, const Eigen::VectorXd& x, Eigen::VectorXd* y) {
    const BlockPattern& pat = *sys.pattern;
    const PointSide& ps = sys.points;
    const int threads = sys.threads;
    ParallelRegion(threads, [&] {
      const int tid = threads > 1 ? omp_get_thread_num() : 0;
      Eigen::VectorXd& yt = parts_[tid];
      yt.setZero();
#pragma omp for schedule(static)
      for (int j = 0; j < ps.num_points; ++j) {
        if (!ps.point_free[j]) continue;
        Eigen::Vector3d w = Eigen::Vector3d::Zero();
        for (int64_t k = ps.point_ptr[j]; k < ps.point_ptr[j + 1]; ++k) {
          const int* ck = &ps.local_cols[k * ps.max_local];
          const double* Wk = &ps.W[k * ps.max_local * 3];
          for (int p = 0; p < ps.num_local[k]; ++p)
            for (int q = 0; q < 3; ++q) w[q] += Wk[3 * p + q] * x[ck[p]];
        }
        const Eigen::Vector3d v = (*sys.Vinv)[j] * w;
        for (int64_t k = ps.point_ptr[j]; k < ps.point_ptr[j + 1]; ++k) {
          const int* ck = &ps.local_cols[k * ps.max_local];
          const double* Wk = &ps.W[k * ps.max_local * 3];
          for (int p = 0; p < ps.num_local[k]; ++p)
            yt[ck[p]] -= Wk[3 * p] * v[0] + Wk[3 * p + 1] * v[1] + Wk[3 * p + 2] * v[2];
        }
      }
    });
    *y = sys.mu * sys.diagU->cwiseProduct(x);
    const int nb = static_cast<int>(pat.size.size());
    for (int a = 0; a < nb; ++a)
      for (int64_t k = pat.row_ptr[a]; k < pat.row_ptr[a + 1]; ++k) {
        const int bb = pat.cols[k], sa = pat.size[a], sb = pat.size[bb];
        const Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> B(
            sys.U->data() + pat.offset[k], sa, sb);
        y->segment(pat.start[a], sa) += B * x.segment(pat.start[bb], sb);
        if (bb != a) y->segment(pat.start[bb], sb) += B.transpose() * x.segment(pat.start[a], sa);
      }
    for (int t = 0; t < threads; ++t) *y += parts_[t];
  }

  double tolerance_;
  int max_iterations_;
  std::vector<Eigen::MatrixXd> precond_;
  std::vector<Eigen::VectorXd> parts_;
};

}  // namespace

Status ReconstructionLinearSolverFromName(const std::string& name, ReconstructionLinearSolver* out) {
  if (name == "dense") *out = ReconstructionLinearSolver::kDenseSchur;
  else if (name == "sparse") *out = ReconstructionLinearSolver::kSparseSchur;
  else if (name == "iterative") *out = ReconstructionLinearSolver::kIterativeSchur;
  else if (name == "iterative-cuda") *out = ReconstructionLinearSolver::kIterativeSchurCuda;
  else
    return Status::InvalidOptions("bundle adjustment: unknown linear solver '" + name +
                                  "' (dense, sparse or iterative)");
  return Status::Ok();
}

const char* ReconstructionLinearSolverName(ReconstructionLinearSolver solver) {
  switch (solver) {
    case ReconstructionLinearSolver::kDenseSchur: return "dense";
    case ReconstructionLinearSolver::kSparseSchur: return "sparse";
    case ReconstructionLinearSolver::kIterativeSchur: return "iterative";
    case ReconstructionLinearSolver::kIterativeSchurCuda: return "iterative-cuda";
  }
  return "?";
}

Status ReconstructionBAOptions::Check() const {
  if (max_iterations < 0) return Status::InvalidOptions("bundle adjustment: max_iterations must be >= 0");
  if (!(function_tolerance >= 0)) return Status::InvalidOptions("bundle adjustment: function_tolerance must be >= 0");
  if (!(initial_mu > 0)) return Status::InvalidOptions("bundle adjustment: initial_mu must be > 0");
  if (!(step_extension == 0 || step_extension >= 1))
    return Status::InvalidOptions("bundle adjustment: step_extension must be 0 (off) or >= 1");
  if (num_threads < 1 || num_threads > 4096)
    return Status::InvalidOptions("bundle adjustment: num_threads must be in [1, 4096]");
  if (!(pcg_relative_tolerance > 0 && pcg_relative_tolerance < 1))
    return Status::InvalidOptions("bundle adjustment: pcg_relative_tolerance must be in (0, 1)");
  if (pcg_max_iterations < 1)
    return Status::InvalidOptions("bundle adjustment: pcg_max_iterations must be >= 1");
  if (cuda_min_observations < 0)
    return Status::InvalidOptions("bundle adjustment: cuda_min_observations must be >= 0");
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
        jparams[0] = u; jparams[1] = 1; jparams[2] = 0;
        jparams[3] = v; jparams[4] = 0; jparams[5] = 1;
      }
      break;
    case CameraModelId::kPinhole:
      A[0] = params[0]; A[1] = 0; A[2] = 0; A[3] = params[1];
      if (jparams) {
        jparams[0] = u; jparams[1] = 0; jparams[2] = 1; jparams[3] = 0;
        jparams[4] = 0; jparams[5] = v; jparams[6] = 0; jparams[7] = 1;
      }
      break;
    case CameraModelId::kSimpleRadial: {
      const double f = params[0], k = params[3];
      const double d = 1 + k * r2;
      A[0] = f * (d + 2 * k * u * u); A[1] = f * 2 * k * u * v;
      A[2] = A[1];                    A[3] = f * (d + 2 * k * v * v);
      if (jparams) {
        jparams[0] = u * d; jparams[1] = 1; jparams[2] = 0; jparams[3] = f * u * r2;
        jparams[4] = v * d; jparams[5] = 0; jparams[6] = 1; jparams[7] = f * v * r2;
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
        jparams[0] = u * d; jparams[1] = 1; jparams[2] = 0; jparams[3] = f * u * r2; jparams[4] = f * u * r2 * r2;
        jparams[5] = v * d; jparams[6] = 0; jparams[7] = 1; jparams[8] = f * v * r2; jparams[9] = f * v * r2 * r2;
      }
      break;
    }
    case CameraModelId::kOpenCV: {
      const double fx = params[0], fy = params[1];
      // Distorted normalized point (du, dv) and its derivatives in (u, v).
      double du, dv, J[4];
      OpenCVDistortion(params + 4, u, v, &du, &dv, J);
      A[0] = fx * J[0]; A[1] = fx * J[1];
      A[2] = fy * J[2]; A[3] = fy * J[3];
      const double uv = u * v, uu = u * u, vv = v * v;
      if (jparams) {
        const double jp[16] = {du, 0, 1, 0, fx * u * r2, fx * u * r2 * r2, fx * 2 * uv, fx * (r2 + 2 * uu),
                               0, dv, 0, 1, fy * v * r2, fy * v * r2 * r2, fy * (r2 + 2 * vv), fy * 2 * uv};
        std::copy(jp, jp + 16, jparams);
      }
      break;
    }
    case CameraModelId::kOpenCVFisheye:
    case CameraModelId::kSimpleRadialFisheye:
    case CameraModelId::kRadialFisheye:
    case CameraModelId::kFullOpenCV:
    case CameraModelId::kThinPrismFisheye:
    case CameraModelId::kFov: {
      // The focal length(s) and principal point, then the distortion's nk parameters from
      // index kb (d: the distorted normalized point).
      const bool two = CameraModelHasTwoFocals(model);
      const int kb = CameraModelDistortionBegin(model);
      const int nk = CameraModelNumParams(model) - kb;
      const double fx = params[0], fy = params[two ? 1 : 0];
      double du, dv, J[4], dk[16];
      double* dkp = jparams ? dk : nullptr;
      if (CameraModelIsFisheye(model))
        FisheyeDistortion(params + kb, nk, u, v, &du, &dv, J, dkp);
      else if (model == CameraModelId::kFullOpenCV)
        FullOpenCVDistortion(params + kb, u, v, &du, &dv, J, dkp);
      else if (model == CameraModelId::kThinPrismFisheye)
        ThinPrismFisheyeDistortion(params + kb, u, v, &du, &dv, J, dkp);
      else
        FovDistortion(params[kb], u, v, &du, &dv, J, dkp);
      A[0] = fx * J[0]; A[1] = fx * J[1];
      A[2] = fy * J[2]; A[3] = fy * J[3];
      if (jparams) {
        const int np = kb + nk;  // row stride: x's derivatives, then y's
        std::fill(jparams, jparams + 2 * np, 0.0);
        jparams[0] = du;                   // d x / d fx (or f)
        jparams[np + (two ? 1 : 0)] = dv;  // d y / d fy (or f)
        jparams[kb - 2] = 1;               // d x / d cx
        jparams[np + kb - 1] = 1;          // d y / d cy
        for (int i = 0; i < nk; ++i) {
          jparams[kb + i] = fx * dk[i];
          jparams[np + kb + i] = fy * dk[nk + i];
        }
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
  // The points in ascending id order (as the map holds them). A local adjustment's are
  // found through the variable images' points2D, without a pass over the whole model.
  std::vector<uint64_t> point_ids;
  if (config.only_points_of_variable_images) {
    point_ids = rec->PointsSeenBy(config.variable_images);
  } else {
    point_ids.reserve(rec->points3D.size());
    for (const auto& [pid, p] : rec->points3D) point_ids.push_back(pid);
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
  // hold_aspect_ratio: per camera fy / fx, whose fx column is d/dfx + (fy / fx) d/dfy
  // (0: the camera's focal lengths are not linked).
  std::vector<double> aspect(num_cameras, 0.0);
  for (int c = 0; c < num_cameras; ++c) {
    // Intrinsics move only when some variable image uses the camera.
    bool used = false;
    for (int i = 0; i < num_images; ++i)
      if (image_camera[i] == c && config.variable_images.count(image_ids[i])) used = true;
    if (!used || config.fixed_cameras.count(camera_ids[c])) continue;
    free_params[c] = FreeParams(models[c], options);
    if (free_params[c].empty()) continue;
    if (options.hold_aspect_ratio && options.refine_focal && CameraModelHasTwoFocals(models[c]))
      aspect[c] = params[c][1] / params[c][0];
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

  // Blocks of the reduced system: a pose block per variable pose, then an intrinsics block
  // per camera with free intrinsics (columns are numbered in that order).
  BlockPattern pattern;
  std::vector<int> pose_block(num_images, -1), intr_block(num_cameras, -1);
  for (int i = 0; i < num_images; ++i)
    if (pose_col[i] >= 0) {
      pose_block[i] = static_cast<int>(pattern.start.size());
      pattern.start.push_back(pose_col[i]);
      pattern.size.push_back(6);
    }
  pattern.num_pose_blocks = static_cast<int>(pattern.start.size());
  for (int c = 0; c < num_cameras; ++c)
    if (intr_col[c] >= 0) {
      intr_block[c] = static_cast<int>(pattern.start.size());
      pattern.start.push_back(intr_col[c]);
      pattern.size.push_back(static_cast<int>(free_params[c].size()));
    }
  const int num_blocks = static_cast<int>(pattern.start.size());
  const size_t nobs = obs.size();
  // An observation's blocks are its image's.
  std::vector<ObsBlocks> image_blocks(num_images);
  for (int i = 0; i < num_images; ++i) {
    ObsBlocks& ob = image_blocks[i];
    ob.n = 0;
    if (pose_block[i] >= 0) { ob.blk[ob.n] = pose_block[i]; ob.off[ob.n++] = 0; }
    const int ib = intr_block[image_camera[i]];
    if (ib >= 0) { ob.blk[ob.n] = ib; ob.off[ob.n] = ob.n == 1 ? 6 : 0; ++ob.n; }
  }
  std::vector<ObsBlocks> obs_blocks(nobs);
  for (size_t k = 0; k < nobs; ++k) obs_blocks[k] = image_blocks[obs[k].image];
  std::unique_ptr<ReducedSolver> solver;
  ReconstructionLinearSolver kind = options.linear_solver;
  // iterative-cuda below cuda_min_observations: the same CG on the CPU.
  if (kind == ReconstructionLinearSolver::kIterativeSchurCuda &&
      static_cast<int64_t>(nobs) < options.cuda_min_observations)
    kind = ReconstructionLinearSolver::kIterativeSchur;
  switch (kind) {
    case ReconstructionLinearSolver::kDenseSchur: solver = std::make_unique<DenseSchurSolver>(); break;
    case ReconstructionLinearSolver::kSparseSchur: solver = std::make_unique<SparseSchurSolver>(); break;
    case ReconstructionLinearSolver::kIterativeSchur:
      solver = std::make_unique<IterativeSchurSolver>(options.pcg_relative_tolerance,
                                                      options.pcg_max_iterations);
      break;
    case ReconstructionLinearSolver::kIterativeSchurCuda: {
      std::unique_ptr<CudaReducedPcg> pcg;
      TIEPOINT_RETURN_IF_ERROR(CreateCudaReducedPcg(&pcg));
      solver = std::make_unique<CudaIterativeSchurSolver>(std::move(pcg), options.pcg_relative_tolerance,
                                                          options.pcg_max_iterations);
      break;
    }
  }
  const bool full_schur = solver->NeedsOffDiagonalSchur();
  {
    // U's blocks (those of one observation), plus for the exact solvers every pair of
    // blocks that share a free point.
    // Up to 2048 blocks, a flag per pair of blocks (4 MB at most); beyond, lists that
    // Build sorts.
    std::vector<std::vector<int>> adj(num_blocks);
    const bool flags = num_blocks <= 2048;
    std::vector<uint8_t> flag(flags ? static_cast<size_t>(num_blocks) * num_blocks : 0);
    auto add = [&](int a, int b) {
      if (flags) {
        flag[static_cast<size_t>(a) * num_blocks + b] = 1;
      } else {
        adj[a].push_back(b);
      }
    };
    for (int i = 0; i < num_images; ++i) {
      const ObsBlocks& ob = image_blocks[i];
      for (int x = 0; x < ob.n; ++x)
        for (int y = x; y < ob.n; ++y) add(ob.blk[x], ob.blk[y]);
    }
    std::vector<int> blocks;
    if (full_schur)
      for (int j = 0; j < num_points; ++j) {
        if (!point_free[j]) continue;
        blocks.clear();
        for (int64_t k = point_ptr[j]; k < point_ptr[j + 1]; ++k)
          for (int x = 0; x < obs_blocks[k].n; ++x) blocks.push_back(obs_blocks[k].blk[x]);
        std::sort(blocks.begin(), blocks.end());
        blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
        for (size_t x = 0; x < blocks.size(); ++x)
          for (size_t y = x; y < blocks.size(); ++y) add(blocks[x], blocks[y]);
      }
    if (flags)
      for (int a = 0; a < num_blocks; ++a)
        for (int b = a; b < num_blocks; ++b)
          if (flag[static_cast<size_t>(a) * num_blocks + b]) adj[a].push_back(b);
    pattern.Build(&adj);
  }
  // Per image, the value offsets of its blocks of U (x <= y over its blocks: up to 3).
  std::vector<int64_t> image_u_offsets(3 * static_cast<size_t>(num_images), -1);
  for (int i = 0; i < num_images; ++i) {
    const ObsBlocks& ob = image_blocks[i];
    int e = 0;
    for (int x = 0; x < ob.n; ++x)
      for (int y = x; y < ob.n; ++y) image_u_offsets[3 * i + e++] = pattern.Find(ob.blk[x], ob.blk[y]);
  }
  // SchurAccumulatePoint's block offsets, once for all LM steps (exact solvers only; up to
  // 2^25 entries, 256 MB, beyond which it looks them up each time).
  std::vector<int64_t> pair_ptr, pair_offsets;
  if (full_schur) {
    constexpr int64_t kMaxPairOffsets = int64_t{1} << 25;
    pair_ptr.assign(num_points + 1, 0);
    int64_t total = 0;
    const int npb = pattern.num_pose_blocks;
    for (int j = 0; j < num_points && total <= kMaxPairOffsets; ++j) {
      pair_ptr[j] = total;
      if (!point_free[j]) continue;
      int64_t poses = 0;
      for (int64_t a = point_ptr[j]; a < point_ptr[j + 1]; ++a) poses += PoseBlockOf(obs_blocks[a], npb) >= 0;
      total += poses * (poses + 1) / 2;
    }
    pair_ptr[num_points] = total;
    if (total <= kMaxPairOffsets) {
      pair_offsets.resize(total);
      int64_t q = 0;
      for (int j = 0; j < num_points; ++j) {
        if (!point_free[j]) continue;
        for (int64_t a = point_ptr[j]; a < point_ptr[j + 1]; ++a) {
          const int bx = PoseBlockOf(obs_blocks[a], npb);
          if (bx < 0) continue;
          for (int64_t bb = a; bb < point_ptr[j + 1]; ++bb) {
            const int by = PoseBlockOf(obs_blocks[bb], npb);
            if (by >= 0) pair_offsets[q++] = StoredOffset(pattern, bx, by);
          }
        }
      }
    } else {
      pair_ptr.clear();
    }
  }

  // Per-observation linearization storage. Each observation keeps only its active
  // camera-side columns (the pose's 6 unless the pose is fixed, then the camera's free
  // intrinsics), packed first in local_cols / W.
  size_t max_free = 0;
  for (int c = 0; c < num_cameras; ++c) max_free = std::max(max_free, free_params[c].size());
  const int ml = 6 + static_cast<int>(max_free);  // <= kMaxLocal
  std::vector<double> W(nobs * ml * 3);   // J_c^T J_p, ml x 3 per observation
  std::vector<int> local_cols(nobs * ml);  // global column of each active local row
  std::vector<uint8_t> num_local(nobs);
  std::vector<double> V(9 * num_points), g(3 * num_points);
  Eigen::VectorXd b(nc), diagU(nc);
  std::vector<double> diagV(3 * num_points);
  std::vector<Eigen::Matrix3d> Vinv(num_points);
  // Blocks of U and of S, and per-thread accumulators of both (summed in thread order, so
  // a run with a given thread count is deterministic).
  std::vector<double> Uvals(pattern.num_values), Svals(pattern.num_values);
  std::vector<std::vector<double>> val_part(threads, std::vector<double>(pattern.num_values));
  std::vector<Eigen::VectorXd> b_part(threads, Eigen::VectorXd(nc));
  const PointSide point_side{num_points, point_ptr.data(), point_free.data(), obs_blocks.data(),
                             local_cols.data(), num_local.data(), W.data(),
                             pair_offsets.empty() ? nullptr : pair_ptr.data(),
                             pair_offsets.empty() ? nullptr : pair_offsets.data(), ml};

  double mu = options.initial_mu, nu = 2.0;
  bool relinearize = true;
  std::vector<double> dX(3 * num_points);
  Eigen::VectorXd dc(nc);
  Eigen::VectorXd bc(nc);
  int it = 0;
  for (; it < options.max_iterations; ++it) {
    if (relinearize) {
      // Observations are stored point by point, so a thread that owns a range of points
      // owns their V, g and W; U and bc go through per-thread parts. Points go to the
      // threads in chunks of 256, in turn (the earlier points, seen by more images, would
      // load the first thread with more of the work), fixed for a thread count.
      ParallelRegion(threads, [&] {
        const int tid = threads > 1 ? omp_get_thread_num() : 0;
        double* Ut = val_part[tid].data();
        Eigen::VectorXd& bt = b_part[tid];
        std::fill(val_part[tid].begin(), val_part[tid].end(), 0.0);
        bt.setZero();
#pragma omp for schedule(static, 256)
        for (int j = 0; j < num_points; ++j) {
          double* Vj = &V[9 * j];
          double* gj = &g[3 * j];
          std::fill(Vj, Vj + 9, 0.0);
          std::fill(gj, gj + 3, 0.0);
          for (int64_t k = point_ptr[j]; k < point_ptr[j + 1]; ++k) {
            const Obs& o = obs[k];
            const int c = image_camera[o.image];
            double r[2], jpose[12], jpt[6], jprm[2 * (kMaxLocal - 6)];
            ReconstructionResidual(models[c], params[c].data(), &Rs[9 * o.image], &ts[3 * o.image],
                                   &Xs[3 * o.point], o.xy, r, jpose, jpt, jprm);
            const double drho = options.loss.Derivative(r[0] * r[0] + r[1] * r[1]);
            const double w = std::sqrt(std::max(drho, 0.0));
            // Active camera-side Jacobian: 2 x nl.
            double Jc[2][kMaxLocal];
            int* cols = &local_cols[k * ml];
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
            if (aspect[c] > 0) {  // free_params[c][0] is fx, standing for both
              const int q = nl - static_cast<int>(free_params[c].size());
              Jc[0][q] += w * aspect[c] * jprm[1];
              Jc[1][q] += w * aspect[c] * jprm[np + 1];
            }
            num_local[k] = static_cast<uint8_t>(nl);
            const double wr[2] = {w * r[0], w * r[1]};
            for (int a = 0; a < nl; ++a) bt[cols[a]] -= Jc[0][a] * wr[0] + Jc[1][a] * wr[1];
            // Jc^T Jc into U's blocks (x <= y: pose block before intrinsics block).
            const ObsBlocks& ob = obs_blocks[k];
            const int64_t* uoff = &image_u_offsets[3 * o.image];
            for (int x = 0; x < ob.n; ++x)
              for (int y = x; y < ob.n; ++y) {
                double* blk = Ut + *uoff++;
                const int sx = pattern.size[ob.blk[x]], sy = pattern.size[ob.blk[y]];
                const int ox = ob.off[x], oy = ob.off[y];
                if (sx == 6 && sy == 6 && ox == 0 && oy == 0) {
                  // The pose's own block (or, its pose held, a 6-wide intrinsics block's).
                  AddPoseGram(blk, Jc[0], Jc[1]);
                  continue;
                }
                for (int p = 0; p < sx; ++p)
                  for (int q = 0; q < sy; ++q)
                    blk[p * sy + q] += Jc[0][ox + p] * Jc[0][oy + q] + Jc[1][ox + p] * Jc[1][oy + q];
              }
            double* Wk = &W[k * ml * 3];
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
              std::fill(Wk, Wk + ml * 3, 0.0);
            }
          }
        }
      });
      Uvals = val_part[0];
      bc = b_part[0];
      for (int t = 1; t < threads; ++t) {
        for (int64_t q = 0; q < pattern.num_values; ++q) Uvals[q] += val_part[t][q];
        bc += b_part[t];
      }
      for (int a = 0; a < num_blocks; ++a) {
        const double* D = &Uvals[pattern.offset[pattern.row_ptr[a]]];
        for (int q = 0; q < pattern.size[a]; ++q)
          diagU[pattern.start[a] + q] = std::min(std::max(D[q * pattern.size[a] + q], 1e-6), 1e32);
      }
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
    // b = bc - sum_j W_j (V_j + mu D_Vj)^-1 g_j, accumulated point by point (only S's
    // diagonal blocks for the iterative solver).
    ParallelRegion(threads, [&] {
      const int tid = threads > 1 ? omp_get_thread_num() : 0;
      double* St = val_part[tid].data();
      Eigen::VectorXd& bt = b_part[tid];
      std::fill(val_part[tid].begin(), val_part[tid].end(), 0.0);
      bt.setZero();
      SchurScratch scratch;
#pragma omp for schedule(static, 256)
      for (int j = 0; j < num_points; ++j) {
        if (!point_free[j]) continue;
        Eigen::Matrix3d Vj = Eigen::Map<const Eigen::Matrix<double, 3, 3, Eigen::RowMajor>>(&V[9 * j]);
        for (int q = 0; q < 3; ++q) Vj(q, q) += mu * diagV[3 * j + q];
        Vinv[j] = Vj.inverse();
        SchurAccumulatePoint(pattern, point_side, j, Vinv[j], &g[3 * j], !full_schur, &scratch, St,
                             bt.data());
      }
    });
    Svals = Uvals;
    b = bc;
    for (int t = 0; t < threads; ++t) {
      for (int64_t q = 0; q < pattern.num_values; ++q) Svals[q] += val_part[t][q];
      b += b_part[t];
    }
    for (int a = 0; a < num_blocks; ++a) {
      double* D = &Svals[pattern.offset[pattern.row_ptr[a]]];
      for (int q = 0; q < pattern.size[a]; ++q)
        D[q * pattern.size[a] + q] += mu * diagU[pattern.start[a] + q];
    }
    bool solved = true;
    if (nc > 0) {
      const ReducedSystem sys{&pattern, &Svals, &Uvals, &diagU, mu, &b, point_side, &Vinv, threads};
      TIEPOINT_RETURN_IF_ERROR(solver->Solve(sys, &dc, &solved, &summary->linear_iterations));
    }
    if (solved) {
      // The points' steps, each from its own observations (split over the threads).
      int not_finite = 0;
      ParallelRegion(threads, [&] {
#pragma omp for schedule(static) reduction(+ : not_finite)
        for (int j = 0; j < num_points; ++j) {
          if (!point_free[j]) { dX[3 * j] = dX[3 * j + 1] = dX[3 * j + 2] = 0; continue; }
          Eigen::Vector3d rhs(&g[3 * j]);
          for (int64_t a = point_ptr[j]; a < point_ptr[j + 1]; ++a) {
            const int* ca = &local_cols[a * ml];
            const double* Wa = &W[a * ml * 3];
            for (int p = 0; p < num_local[a]; ++p)
              for (int q = 0; q < 3; ++q) rhs[q] -= Wa[3 * p + q] * dc[ca[p]];
          }
          const Eigen::Vector3d d = Vinv[j] * rhs;
          dX[3 * j] = d[0]; dX[3 * j + 1] = d[1]; dX[3 * j + 2] = d[2];
          if (!d.allFinite()) ++not_finite;
        }
      });
      if (not_finite > 0) solved = false;
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
    // Trial point: the state moved by `step` times (dc, dX).
    auto move = [&](double step, std::vector<double>* Rm, std::vector<double>* tm,
                    std::vector<std::vector<double>>* pm, std::vector<double>* Xm) {
      *Rm = Rs; *tm = ts; *pm = params; *Xm = Xs;
      for (int i = 0; i < num_images; ++i) {
        if (pose_col[i] < 0) continue;
        double w[3];
        for (int q = 0; q < 3; ++q) w[q] = step * dc[pose_col[i] + q];
        LeftRotate(w, &(*Rm)[9 * i]);
        for (int q = 0; q < 3; ++q) (*tm)[3 * i + q] += step * dc[pose_col[i] + 3 + q];
      }
      for (int c = 0; c < num_cameras; ++c) {
        for (size_t q = 0; q < free_params[c].size(); ++q) (*pm)[c][free_params[c][q]] += step * dc[intr_col[c] + q];
        if (aspect[c] > 0) (*pm)[c][1] = aspect[c] * (*pm)[c][0];
      }
      for (int j = 0; j < num_points; ++j)
        for (int q = 0; q < 3; ++q) (*Xm)[3 * j + q] += step * dX[3 * j + q];
    };
    std::vector<double> Rn, tn, Xn;
    std::vector<std::vector<double>> pn;
    move(1.0, &Rn, &tn, &pn, &Xn);
    double new_cost = cost_of(Rn, tn, pn, Xn);
    // The gain ratio (below) is the unit step's; an extension only replaces the state taken.
    const double unit_decrease = cost - new_cost;
    const double model_decrease = std::max(predicted, 1e-300);
    if (options.step_extension > 0 && std::isfinite(new_cost) &&
        unit_decrease > options.step_extension * model_decrease) {
      std::vector<double> Re, te, Xe;
      std::vector<std::vector<double>> pe;
      for (double step = 2.0; step <= 16.0; step *= 2.0) {
        move(step, &Re, &te, &pe, &Xe);
        const double c = cost_of(Re, te, pe, Xe);
        if (!(c < new_cost)) break;
        new_cost = c;
        Rn.swap(Re); tn.swap(te); pn.swap(pe); Xn.swap(Xe);
      }
    }
    const double rho = unit_decrease / model_decrease;
    const bool accepted = std::isfinite(new_cost) && new_cost < cost && rho > 1e-3;
    if (options.progress) options.progress(it + 1, accepted ? new_cost : cost, accepted, mu);
    if (accepted) {
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
