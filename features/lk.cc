#include "features/lk.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "features/lk_inl.h"

namespace tiepoint {

const char* ToString(LkStatus status) {
  switch (status) {
    case LkStatus::kTracked: return "tracked";
    case LkStatus::kFlat: return "flat";
    case LkStatus::kOutside: return "outside";
    case LkStatus::kForwardBackward: return "forward-backward";
  }
  return "unknown";
}

Status LkOptions::Check() const {
  if (levels < 1 || levels > 8) {
    return Status::InvalidOptions("LK levels " + std::to_string(levels) + ": expected 1..8");
  }
  if (coarse_level < 0) return Status::InvalidOptions("LK coarse_level must be >= 0");
  if (max_iterations < 1 || max_iterations > 1000) {
    return Status::InvalidOptions("LK max_iterations " + std::to_string(max_iterations) +
                                  ": expected 1..1000");
  }
  if (!(min_step > 0.0f)) return Status::InvalidOptions("LK min_step must be > 0 pixels");
  if (upper_max_iterations < 1 || upper_max_iterations > 1000) {
    return Status::InvalidOptions("LK upper_max_iterations " +
                                  std::to_string(upper_max_iterations) + ": expected 1..1000");
  }
  if (!(upper_min_step > 0.0f)) {
    return Status::InvalidOptions("LK upper_min_step must be > 0 pixels");
  }
  if (!(min_eigenvalue >= 0.0f)) return Status::InvalidOptions("LK min_eigenvalue must be >= 0");
  if (!std::isfinite(fb_threshold)) return Status::InvalidOptions("LK fb_threshold must be finite");
  if (num_threads < 0) return Status::InvalidOptions("LK num_threads must be >= 0");
  if (cuda_warps_per_feature != 1 && cuda_warps_per_feature != 2 && cuda_warps_per_feature != 4) {
    return Status::InvalidOptions("LK cuda_warps_per_feature " +
                                  std::to_string(cuda_warps_per_feature) + ": expected 1, 2 or 4");
  }
  return Status::Ok();
}

LkLinearMap LkLinearMap::Inverse() const {
  if (IsIdentity()) return LkLinearMap();
  const double det = static_cast<double>(a00) * a11 - static_cast<double>(a01) * a10;
  LkLinearMap inv;
  inv.a00 = static_cast<float>(a11 / det);
  inv.a01 = static_cast<float>(-a01 / det);
  inv.a10 = static_cast<float>(-a10 / det);
  inv.a11 = static_cast<float>(a00 / det);
  return inv;
}

double LkLinearMap::RotationDegrees() const {
  // Similarity part: the closest [[s, -r], [r, s]] is s = (a00 + a11) / 2, r = (a10 - a01) / 2.
  return std::atan2(0.5 * (static_cast<double>(a10) - a01),
                    0.5 * (static_cast<double>(a00) + a11)) *
         180.0 / M_PI;
}

double LkLinearMap::Scale() const {
  const double det = static_cast<double>(a00) * a11 - static_cast<double>(a01) * a10;
  return det > 0 ? std::sqrt(det) : 0.0;
}

LkLinearMap LkLinearMap::Similarity(double scale, double degrees) {
  const double t = degrees * M_PI / 180.0;
  LkLinearMap m;
  m.a00 = static_cast<float>(scale * std::cos(t));
  m.a01 = static_cast<float>(-scale * std::sin(t));
  m.a10 = static_cast<float>(scale * std::sin(t));
  m.a11 = static_cast<float>(scale * std::cos(t));
  return m;
}

Status LkLinearMap::Check() const {
  if (!std::isfinite(a00) || !std::isfinite(a01) || !std::isfinite(a10) || !std::isfinite(a11)) {
    return Status::InvalidOptions("LK linear map: not finite");
  }
  // Singular values of A from A^T A's eigenvalues.
  const double p = static_cast<double>(a00) * a00 + static_cast<double>(a10) * a10;
  const double q = static_cast<double>(a01) * a01 + static_cast<double>(a11) * a11;
  const double r = static_cast<double>(a00) * a01 + static_cast<double>(a10) * a11;
  const double det = static_cast<double>(a00) * a11 - static_cast<double>(a01) * a10;
  const double h = std::sqrt(0.25 * (p - q) * (p - q) + r * r);
  const double smax = std::sqrt(0.5 * (p + q) + h);
  const double smin = std::sqrt(std::max(0.0, 0.5 * (p + q) - h));
  if (!(det > 0) || smin < 0.25 || smax > 4.0) {
    return Status::InvalidOptions(
        "LK linear map [" + std::to_string(a00) + " " + std::to_string(a01) + "; " +
        std::to_string(a10) + " " + std::to_string(a11) +
        "]: expected det > 0 and singular values in [0.25, 4]");
  }
  return Status::Ok();
}

namespace {

using lk_internal::Bilinear;
using lk_internal::InsideLevel;
using lk_internal::kLkMaxGain;
using lk_internal::kLkMaxLevelShift;
using lk_internal::kLkMinGain;
using lk_internal::LkUnknowns;

// One pass previous -> next. Returns the status; *out the level-0 position in `next`.
// `m`: the linear map of the next frame's samples (the identity path when `mapped` is
// false).
LkStatus TrackOne(const ImagePyramid& prev, const ImagePyramid& next, int levels, Point2f p,
                  Point2f guess, const LkLinearMap& m, const LkOptions& o, Point2f* out,
                  float* gain, float* bias) {
  const bool mapped = !m.IsIdentity();
  std::vector<float> tv, tgx, tgy;
  float dx = 0, dy = 0, alpha = 0, beta = 0;
  for (int l = levels - 1; l >= 0; --l) {
    const float scale = 1.0f / static_cast<float>(1 << l);
    if (l == levels - 1) {
      dx = (guess.x - p.x) * scale;
      dy = (guess.y - p.y) * scale;
    } else {
      dx *= 2.0f;
      dy *= 2.0f;
    }
    const ImageU8& ti = prev.levels[l];
    const ImageU8& ni = next.levels[l];
    const float px = p.x * scale, py = p.y * scale;
    const int patch = LkPatchSize(o, l);
    const int unknowns = LkUnknowns(o.gain_bias, o.coarse_level, l);
    const float half = 0.5f * static_cast<float>(patch - 1);
    const int n = patch * patch;
    tv.resize(n);
    tgx.resize(n);
    tgy.resize(n);
    // G = sum u u^T, u = [gx gy T 1], packed upper triangle (accumulated in float, the
    // precision the GPU uses).
    float gf[10] = {0};
    for (int k = 0; k < n; ++k) {
      const float sx = px + static_cast<float>(k % patch) - half;
      const float sy = py + static_cast<float>(k / patch) - half;
      lk_internal::TemplateSample(ti.data.data(), ti.width, ti.height, sx, sy, &tv[k], &tgx[k],
                                  &tgy[k]);
      const float u[4] = {tgx[k], tgy[k], 1.0f, tv[k]};
      for (int r = 0; r < 4; ++r) {
        for (int c = r; c < 4; ++c) gf[lk_internal::Packed(r, c)] += u[r] * u[c];
      }
    }
    double g[10], chol[16];
    for (int i = 0; i < 10; ++i) g[i] = gf[i];
    if (!lk_internal::Cholesky(g, unknowns, chol)) return LkStatus::kFlat;
    if (l == 0 && lk_internal::MinEigen2(g[0], g[1], g[4]) / n < o.min_eigenvalue) {
      return LkStatus::kFlat;
    }
    const float dx0 = dx, dy0 = dy;
    const int max_iterations = l == 0 ? o.max_iterations : o.upper_max_iterations;
    const float min_step = l == 0 ? o.min_step : o.upper_min_step;
    for (int it = 0; it < max_iterations; ++it) {
      float bf[4] = {0, 0, 0, 0};
      const float gain1 = 1.0f + alpha;
      for (int k = 0; k < n; ++k) {
        float sx, sy;
        if (!mapped) {
          sx = px + dx + static_cast<float>(k % patch) - half;
          sy = py + dy + static_cast<float>(k / patch) - half;
        } else {
          const float u = static_cast<float>(k % patch) - half;
          const float v = static_cast<float>(k / patch) - half;
          sx = px + dx + (m.a00 * u + m.a01 * v);
          sy = py + dy + (m.a10 * u + m.a11 * v);
        }
        const float e = Bilinear(ni.data.data(), ni.width, ni.height, sx, sy) - gain1 * tv[k] - beta;
        bf[0] += tgx[k] * e;
        bf[1] += tgy[k] * e;
        bf[2] += e;
        bf[3] += tv[k] * e;
      }
      const double b[4] = {bf[0], bf[1], bf[2], bf[3]};
      double z[4] = {0, 0, 0, 0};
      lk_internal::CholeskySolve(chol, unknowns, b, z);
      float step_x = static_cast<float>(-z[0] / gain1);
      float step_y = static_cast<float>(-z[1] / gain1);
      if (mapped) {  // d -= A delta
        const float tx = step_x, ty = step_y;
        step_x = m.a00 * tx + m.a01 * ty;
        step_y = m.a10 * tx + m.a11 * ty;
      }
      dx += step_x;
      dy += step_y;
      beta += static_cast<float>(z[2]);
      alpha = std::clamp(alpha + static_cast<float>(z[3]), kLkMinGain - 1.0f, kLkMaxGain - 1.0f);
      if (!(std::fabs(dx - dx0) < kLkMaxLevelShift && std::fabs(dy - dy0) < kLkMaxLevelShift) ||
          !InsideLevel(px + dx, py + dy, ni.width, ni.height, half)) {
        return LkStatus::kOutside;
      }
      if (step_x * step_x + step_y * step_y < min_step * min_step) break;
    }
  }
  out->x = p.x + dx;
  out->y = p.y + dy;
  *gain = 1.0f + alpha;
  *bias = beta;
  const ImageU8& base = next.levels[0];
  if (!(out->x >= 0.0f && out->y >= 0.0f && out->x <= base.width - 1.0f &&
        out->y <= base.height - 1.0f)) {
    return LkStatus::kOutside;
  }
  return LkStatus::kTracked;
}

}  // namespace

Status TrackLk(const ImagePyramid& previous, const ImagePyramid& next,
               const std::vector<Point2f>& points, const std::vector<Point2f>* guesses,
               const LkOptions& options, std::vector<LkResult>* results) {
  return TrackLk(previous, next, points, guesses, LkLinearMap(), options, results);
}

Status TrackLk(const ImagePyramid& previous, const ImagePyramid& next,
               const std::vector<Point2f>& points, const std::vector<Point2f>* guesses,
               const LkLinearMap& map, const LkOptions& options, std::vector<LkResult>* results) {
  TIEPOINT_RETURN_IF_ERROR(options.Check());
  TIEPOINT_RETURN_IF_ERROR(map.Check());
  const LkLinearMap inverse = map.Inverse();
  if (previous.levels.empty() || next.levels.empty()) {
    return Status::InvalidInput("LK: empty pyramid");
  }
  if (previous.levels[0].width != next.levels[0].width ||
      previous.levels[0].height != next.levels[0].height) {
    return Status::InvalidInput(
        "LK: frames differ in size (" + std::to_string(previous.levels[0].width) + "x" +
        std::to_string(previous.levels[0].height) + " then " +
        std::to_string(next.levels[0].width) + "x" + std::to_string(next.levels[0].height) + ")");
  }
  if (guesses && guesses->size() != points.size()) {
    return Status::InvalidInput("LK: " + std::to_string(guesses->size()) + " guesses for " +
                                std::to_string(points.size()) + " points");
  }
  const int levels =
      std::min({options.levels, previous.num_levels(), next.num_levels()});
  const int threads = options.num_threads > 0 ? options.num_threads : omp_get_max_threads();
  results->assign(points.size(), LkResult());
#pragma omp parallel for schedule(dynamic, 16) num_threads(threads)
  for (long long i = 0; i < static_cast<long long>(points.size()); ++i) {
    LkResult& r = (*results)[i];
    const Point2f p = points[i];
    const Point2f g = guesses ? (*guesses)[i] : p;
    Point2f fwd;
    r.status = TrackOne(previous, next, levels, p, g, map, options, &fwd, &r.gain, &r.bias);
    r.x = fwd.x;
    r.y = fwd.y;
    if (r.status != LkStatus::kTracked || options.fb_threshold <= 0.0f) continue;
    Point2f back;
    float gain_b, bias_b;
    const LkStatus bs =
        TrackOne(next, previous, levels, fwd, p, inverse, options, &back, &gain_b, &bias_b);
    if (bs != LkStatus::kTracked) {
      r.status = LkStatus::kForwardBackward;
      r.fb_error = INFINITY;
      continue;
    }
    r.fb_error = std::hypot(back.x - p.x, back.y - p.y);
    if (!(r.fb_error <= options.fb_threshold)) r.status = LkStatus::kForwardBackward;
  }
  return Status::Ok();
}

}  // namespace tiepoint
