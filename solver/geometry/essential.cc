#include "solver/geometry/essential.h"

#include <Eigen/Dense>
#include <array>
#include <cmath>
#include <complex>
#include <limits>

#include "solver/geometry/fundamental.h"
#include "solver/geometry/ransac_utils.h"

namespace tiepoint {
namespace two_view {
namespace {

// Polynomials of degree <= 3 in (x, y, z): 20 coefficients. Order: the 10 cubic
// monomials x^3, x^2y, x^2z, xy^2, xyz, xz^2, y^3, y^2z, yz^2, z^3, then the basis b:
// x^2, xy, xz, y^2, yz, z^2, x, y, z, 1.
using Poly = std::array<double, 20>;
constexpr int kExponents[20][3] = {
    {3, 0, 0}, {2, 1, 0}, {2, 0, 1}, {1, 2, 0}, {1, 1, 1}, {1, 0, 2}, {0, 3, 0},
    {0, 2, 1}, {0, 1, 2}, {0, 0, 3}, {2, 0, 0}, {1, 1, 0}, {1, 0, 1}, {0, 2, 0},
    {0, 1, 1}, {0, 0, 2}, {1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {0, 0, 0}};
constexpr int kX = 16, kY = 17, kZ = 18, kOne = 19;

struct MonomialTable {
  int index[4][4][4];
  int product[20][20];  // index of the product monomial, -1 when its degree exceeds 3
  MonomialTable() {
    for (auto& a : index)
      for (auto& b : a)
        for (int& c : b) c = -1;
    for (int m = 0; m < 20; ++m) index[kExponents[m][0]][kExponents[m][1]][kExponents[m][2]] = m;
    for (int i = 0; i < 20; ++i) {
      for (int j = 0; j < 20; ++j) {
        const int a = kExponents[i][0] + kExponents[j][0], b = kExponents[i][1] + kExponents[j][1],
                  c = kExponents[i][2] + kExponents[j][2];
        product[i][j] = (a + b + c <= 3) ? index[a][b][c] : -1;
      }
    }
  }
};

const MonomialTable& Monomials() {
  static const MonomialTable table;
  return table;
}

// A linear polynomial: coefficients of (x, y, z, 1). A quadratic one: of the last 10
// monomials, (x^2, xy, xz, y^2, yz, z^2, x, y, z, 1) (Poly's indices 10..19).
using Lin = std::array<double, 4>;
using Quad = std::array<double, 10>;

// The monomial (index into Quad) of the product of variables a and b of (x, y, z, 1), and
// the monomial (index into Poly) of Quad's monomial q times variable a.
struct ProductTables {
  int lin_lin[4][4];
  int quad_lin[10][4];
  ProductTables() {
    const MonomialTable& t = Monomials();
    constexpr int kVar[4] = {kX, kY, kZ, kOne};
    for (int a = 0; a < 4; ++a) {
      for (int b = 0; b < 4; ++b) lin_lin[a][b] = t.product[kVar[a]][kVar[b]] - 10;
      for (int q = 0; q < 10; ++q) quad_lin[q][a] = t.product[10 + q][kVar[a]];
    }
  }
};

const ProductTables& Products() {
  static const ProductTables tables;
  return tables;
}

Quad LinTimesLin(const Lin& a, const Lin& b) {
  const ProductTables& t = Products();
  Quad r{};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) r[t.lin_lin[i][j]] += a[i] * b[j];
  return r;
}

// *out += s q l.
void AddQuadTimesLin(const Quad& q, const Lin& l, double s, Poly* out) {
  const ProductTables& t = Products();
  for (int i = 0; i < 10; ++i) {
    const double v = s * q[i];
    for (int j = 0; j < 4; ++j) (*out)[t.quad_lin[i][j]] += v * l[j];
  }
}

void EpipolarRow(const Eigen::Vector3d& p, const Eigen::Vector3d& q, double* row) {
  for (int j = 0; j < 3; ++j)
    for (int k = 0; k < 3; ++k) row[3 * j + k] = q[j] * p[k];
}

Eigen::Matrix3d FromRowMajor(const double* f) {
  Eigen::Matrix3d F;
  F << f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8];
  return F;
}

Eigen::Matrix3d ProjectToEssential(const Eigen::Matrix3d& M) {
  Eigen::JacobiSVD<Eigen::Matrix3d> svd(M, Eigen::ComputeFullU | Eigen::ComputeFullV);
  return svd.matrixU() * Eigen::Vector3d(1, 1, 0).asDiagonal() * svd.matrixV().transpose();
}

// The action matrix's eigenvalues only (its Schur form without the Schur vectors: 60% of
// the full eigendecomposition's time), and for each real one, x, the eigenvector
// b = (x^2, xy, xz, y^2, yz, z^2, x, y, z, 1) from the six rows of A b = x b that hold the
// unknowns: with b's known entries (x^2, x, 1 and x y, x z in terms of y, z) they are
// linear in (y^2, yz, z^2, y, z), solved in least squares.
int EigenvalueSolutions(const Eigen::Matrix<double, 10, 20>& M, const Eigen::Matrix<double, 9, 4>& null,
                        std::vector<Eigen::Matrix3d>* E) {
  Eigen::FullPivLU<Eigen::Matrix<double, 10, 10>> lu(M.leftCols<10>());
  if (lu.rank() < 10) return 0;
  const Eigen::Matrix<double, 10, 10> B = lu.solve(M.rightCols<10>());
  if (!B.allFinite()) return 0;
  // Action matrix of multiplication by x on b = (x^2, xy, xz, y^2, yz, z^2, x, y, z, 1):
  // x b_0..x b_5 = x^3, x^2y, x^2z, xy^2, xyz, xz^2 (cubic rows 0..5 of B: cubic = -B b);
  // x b_6..x b_9 = x^2, xy, xz, x = b_0, b_1, b_2, b_6.
  Eigen::Matrix<double, 10, 10> action = Eigen::Matrix<double, 10, 10>::Zero();
  for (int i = 0; i < 6; ++i) action.row(i) = -B.row(i);
  action(6, 0) = 1;
  action(7, 1) = 1;
  action(8, 2) = 1;
  action(9, 6) = 1;
  Eigen::EigenSolver<Eigen::Matrix<double, 10, 10>> eig(action, false);
  if (eig.info() != Eigen::Success) return 0;
  int count = 0;
  for (int k = 0; k < 10; ++k) {
    const std::complex<double> lambda = eig.eigenvalues()[k];
    if (std::abs(lambda.imag()) > 1e-8 * (1.0 + std::abs(lambda.real()))) continue;
    const double x = lambda.real();
    // Row i: sum_j a_ij b_j = x b_i, unknowns (y^2, yz, z^2, y, z) = b_3, b_4, b_5, b_7, b_8.
    Eigen::Matrix<double, 6, 5> L;
    Eigen::Matrix<double, 6, 1> rhs;
    for (int i = 0; i < 6; ++i) {
      const auto a = action.row(i);
      L(i, 0) = a[3] - (i == 3 ? x : 0.0);
      L(i, 1) = a[4] - (i == 4 ? x : 0.0);
      L(i, 2) = a[5] - (i == 5 ? x : 0.0);
      L(i, 3) = a[7] + a[1] * x - (i == 1 ? x * x : 0.0);
      L(i, 4) = a[8] + a[2] * x - (i == 2 ? x * x : 0.0);
      rhs[i] = -(a[0] * x * x + a[6] * x + a[9]) + (i == 0 ? x * x * x : 0.0);
    }
    const Eigen::Matrix<double, 5, 1> sol = L.colPivHouseholderQr().solve(rhs);
    if (!sol.allFinite()) continue;
    const double y = sol[3], z = sol[4];
    const Eigen::Matrix<double, 9, 1> evec = x * null.col(0) + y * null.col(1) + z * null.col(2) + null.col(3);
    Eigen::Matrix3d Em = FromRowMajor(evec.data());
    const double norm = Em.norm();
    if (!(norm > 0.0) || !Em.allFinite()) continue;
    E->push_back(Em * (std::sqrt(2.0) / norm));
    ++count;
  }
  return count;
}

}  // namespace

int EssentialFromFivePoints(const Eigen::Vector3d u1[5], const Eigen::Vector3d u2[5],
                            std::vector<Eigen::Matrix3d>* E) {
  Eigen::Matrix<double, 5, 9, Eigen::RowMajor> Ar;
  for (int i = 0; i < 5; ++i) EpipolarRow(u1[i], u2[i], Ar.row(i).data());
  const Eigen::Matrix<double, 5, 9> A = Ar;
  Eigen::Matrix<double, 9, 4> null;
  if (!NullSpace9<5>(A, &null)) return 0;

  // E as a 3x3 array of linear polynomials x X + y Y + z Z + W: coefficients of (x, y, z, 1).
  Lin e[3][3];
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c)
      for (int k = 0; k < 4; ++k) e[r][c][k] = null(3 * r + c, k);
  Eigen::Matrix<double, 10, 20> M;
  // det(E) by cofactors along the first row.
  Quad minor[3];
  for (int c = 0; c < 3; ++c) {
    const int a = c == 0 ? 1 : 0, b = c == 2 ? 1 : 2;
    const Quad p = LinTimesLin(e[1][a], e[2][b]), q = LinTimesLin(e[1][b], e[2][a]);
    for (int k = 0; k < 10; ++k) minor[c][k] = p[k] - q[k];
  }
  Poly det{};
  for (int c = 0; c < 3; ++c) AddQuadTimesLin(minor[c], e[0][c], c == 1 ? -1.0 : 1.0, &det);
  for (int k = 0; k < 20; ++k) M(0, k) = det[k];
  // E E^T (symmetric) and its trace.
  Quad eet[3][3];
  for (int i = 0; i < 3; ++i)
    for (int j = i; j < 3; ++j) {
      Quad s{};
      for (int k = 0; k < 3; ++k) {
        const Quad p = LinTimesLin(e[i][k], e[j][k]);
        for (int m = 0; m < 10; ++m) s[m] += p[m];
      }
      eet[i][j] = eet[j][i] = s;
    }
  Quad trace;
  for (int m = 0; m < 10; ++m) trace[m] = eet[0][0][m] + eet[1][1][m] + eet[2][2][m];
  // 2 E E^T E - trace(E E^T) E = 0, entry by entry.
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      Poly s{};
      AddQuadTimesLin(trace, e[i][j], -1.0, &s);
      for (int k = 0; k < 3; ++k) AddQuadTimesLin(eet[i][k], e[k][j], 2.0, &s);
      for (int m = 0; m < 20; ++m) M(1 + 3 * i + j, m) = s[m];
    }
  return EigenvalueSolutions(M, null, E);
}

bool EssentialLeastSquares(const std::vector<Eigen::Vector3d>& u1,
                           const std::vector<Eigen::Vector3d>& u2,
                           const std::vector<int>& indices, Eigen::Matrix3d* E) {
  if (indices.size() < 8) return false;
  Eigen::Matrix<double, 9, 9> AtA = Eigen::Matrix<double, 9, 9>::Zero();
  Eigen::Matrix<double, 9, 1> row;
  for (int i : indices) {
    EpipolarRow(u1[i], u2[i], row.data());
    AtA.noalias() += row * row.transpose();
  }
  Eigen::SelfAdjointEigenSolver<Eigen::Matrix<double, 9, 9>> eig(AtA);
  if (eig.info() != Eigen::Success) return false;
  if (!(eig.eigenvalues()[1] > 1e-14 * eig.eigenvalues()[8])) return false;
  const Eigen::Matrix<double, 9, 1> f = eig.eigenvectors().col(0);
  *E = ProjectToEssential(FromRowMajor(f.data()));
  return E->allFinite();
}

void DecomposeEssential(const Eigen::Matrix3d& E, Eigen::Matrix3d R[4], Eigen::Vector3d t[4]) {
  Eigen::JacobiSVD<Eigen::Matrix3d> svd(E, Eigen::ComputeFullU | Eigen::ComputeFullV);
  Eigen::Matrix3d U = svd.matrixU(), V = svd.matrixV();
  if (U.determinant() < 0) U = -U;
  if (V.determinant() < 0) V = -V;
  Eigen::Matrix3d W;
  W << 0, -1, 0, 1, 0, 0, 0, 0, 1;
  const Eigen::Matrix3d Ra = U * W * V.transpose(), Rb = U * W.transpose() * V.transpose();
  const Eigen::Vector3d tu = U.col(2).normalized();
  R[0] = Ra; t[0] = tu;
  R[1] = Ra; t[1] = -tu;
  R[2] = Rb; t[2] = tu;
  R[3] = Rb; t[3] = -tu;
}

bool InFrontOfBoth(const Eigen::Matrix3d& R, const Eigen::Vector3d& t, const Eigen::Vector3d& u1,
                   const Eigen::Vector3d& u2) {
  // d2 u2 = R (d1 u1) + t: least squares in (d1, d2).
  Eigen::Matrix<double, 3, 2> A;
  A.col(0) = R * u1;
  A.col(1) = -u2;
  const Eigen::Matrix2d AtA = A.transpose() * A;
  const double det = AtA.determinant();
  if (!(std::abs(det) > 1e-14 * AtA.squaredNorm())) return false;  // parallel rays
  const Eigen::Vector2d d = AtA.inverse() * (A.transpose() * (-t));
  return d[0] > 0.0 && d[1] > 0.0;
}

int PoseFromEssential(const Eigen::Matrix3d& E, const std::vector<Eigen::Vector3d>& u1,
                      const std::vector<Eigen::Vector3d>& u2, const std::vector<int>& indices,
                      Eigen::Matrix3d* R, Eigen::Vector3d* t) {
  Eigen::Matrix3d Rs[4];
  Eigen::Vector3d ts[4];
  DecomposeEssential(E, Rs, ts);
  int best = -1;
  for (int k = 0; k < 4; ++k) {
    int count = 0;
    for (int i : indices) count += InFrontOfBoth(Rs[k], ts[k], u1[i], u2[i]) ? 1 : 0;
    if (count > best) {
      best = count;
      *R = Rs[k];
      *t = ts[k];
    }
  }
  return best;
}

Eigen::Matrix3d FundamentalFromEssential(const Eigen::Matrix3d& E, const Eigen::Matrix3d& K1,
                                         const Eigen::Matrix3d& K2) {
  return K2.inverse().transpose() * E * K1.inverse();
}

namespace {

// The pose of RefineRelativePose and RotationStandardError, moved by a local step
// d = (w, s): R exp([w]x), and t along the tangent plane of the start direction (basis
// columns), back onto the sphere.
struct LocalPose {
  Eigen::Matrix3d R;
  Eigen::Vector3d t;
};

LocalPose Plus(const LocalPose& p, const Eigen::Matrix<double, 3, 2>& basis, const Eigen::VectorXd& d) {
  LocalPose q;
  q.R = p.R * ExpRotation(d.segment<3>(0));
  q.t = (p.t + basis * d.segment<2>(3)).normalized();
  return q;
}

// Signed Sampson distances (pixels) of `indices` for the pose, each through the Cauchy
// loss of scale c (c <= 0: as they are).
void SampsonResiduals(const std::vector<Eigen::Vector2d>& x1, const std::vector<Eigen::Vector2d>& x2,
                      const Eigen::Matrix3d& K1inv, const Eigen::Matrix3d& K2invT,
                      const std::vector<int>& indices, const LocalPose& p, double c,
                      Eigen::VectorXd* r) {
  const Eigen::Matrix3d F = K2invT * Skew(p.t) * p.R * K1inv;
  r->resize(static_cast<int>(indices.size()));
  for (size_t k = 0; k < indices.size(); ++k) {
    const int i = indices[k];
    const Eigen::Vector3d a = x1[i].homogeneous(), b = x2[i].homogeneous();
    const Eigen::Vector3d Fa = F * a, Ftb = F.transpose() * b;
    const double denom = Fa.x() * Fa.x() + Fa.y() * Fa.y() + Ftb.x() * Ftb.x() + Ftb.y() * Ftb.y();
    const double e = denom > 0.0 ? b.dot(Fa) / std::sqrt(denom) : 0.0;
    (*r)[k] = CauchyResidual(e, c);
  }
}

}  // namespace

void RefineRelativePose(const std::vector<Eigen::Vector2d>& x1, const std::vector<Eigen::Vector2d>& x2,
                        const Eigen::Matrix3d& K1, const Eigen::Matrix3d& K2,
                        const std::vector<int>& indices, Eigen::Matrix3d* R, Eigen::Vector3d* t,
                        double robust_scale_px) {
  if (indices.size() < 6) return;
  const Eigen::Matrix3d K1inv = K1.inverse(), K2invT = K2.inverse().transpose();
  const Eigen::Matrix<double, 3, 2> basis = TangentBasis(t->normalized());
  auto plus = [&](const LocalPose& p, const Eigen::VectorXd& d) { return Plus(p, basis, d); };
  auto residuals = [&](const LocalPose& p, Eigen::VectorXd* r) {
    SampsonResiduals(x1, x2, K1inv, K2invT, indices, p, robust_scale_px, r);
  };
  const LocalPose refined = LevenbergMarquardt(LocalPose{*R, t->normalized()}, 5, plus, residuals);
  *R = refined.R;
  *t = refined.t;
}

double RotationStandardError(const std::vector<Eigen::Vector2d>& x1, const std::vector<Eigen::Vector2d>& x2,
                             const Eigen::Matrix3d& K1, const Eigen::Matrix3d& K2,
                             const std::vector<int>& indices, const Eigen::Matrix3d& R,
                             const Eigen::Vector3d& t, double sigma_px) {
  const double kInf = std::numeric_limits<double>::infinity();
  if (indices.size() < 6 || !(sigma_px >= 0.0) || !std::isfinite(sigma_px)) return kInf;
  const Eigen::Matrix3d K1inv = K1.inverse(), K2invT = K2.inverse().transpose();
  const LocalPose at{R, t.normalized()};
  const Eigen::Matrix<double, 3, 2> basis = TangentBasis(at.t);
  constexpr double kStep = 1e-6;  // as LevenbergMarquardt's Jacobian
  Eigen::MatrixXd J(static_cast<int>(indices.size()), 5);
  Eigen::VectorXd rp, rm;
  for (int k = 0; k < 5; ++k) {
    Eigen::VectorXd d = Eigen::VectorXd::Zero(5);
    d[k] = kStep;
    SampsonResiduals(x1, x2, K1inv, K2invT, indices, Plus(at, basis, d), 0.0, &rp);
    d[k] = -kStep;
    SampsonResiduals(x1, x2, K1inv, K2invT, indices, Plus(at, basis, d), 0.0, &rm);
    J.col(k) = (rp - rm) / (2.0 * kStep);
  }
  const Eigen::Matrix<double, 5, 5> JtJ = J.transpose() * J;
  const Eigen::LDLT<Eigen::Matrix<double, 5, 5>> ldlt(JtJ);
  if (ldlt.info() != Eigen::Success || !(ldlt.vectorD().minCoeff() > 1e-12 * JtJ.diagonal().maxCoeff())) {
    return kInf;
  }
  const Eigen::Matrix<double, 5, 5> covariance =
      sigma_px * sigma_px * ldlt.solve(Eigen::Matrix<double, 5, 5>::Identity());
  const double trace = covariance.topLeftCorner<3, 3>().trace();
  return std::isfinite(trace) && trace >= 0.0 ? std::sqrt(trace) : kInf;
}

}  // namespace two_view
}  // namespace tiepoint
