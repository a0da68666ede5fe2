#include "features/frontend.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "features/fast_cuda.h"

namespace tiepoint {

Status LinearPredictionOptions::Check() const {
  if (!(min_rotation_deg >= 0.0 && min_rotation_deg <= 180.0)) {
    return Status::InvalidOptions("linear prediction min_rotation_deg must be in [0, 180]");
  }
  if (!(min_scale_change >= 0.0 && min_scale_change <= 1.0)) {
    return Status::InvalidOptions("linear prediction min_scale_change must be in [0, 1]");
  }
  if (max_passes < 1 || max_passes > 10) {
    return Status::InvalidOptions("linear prediction max_passes " + std::to_string(max_passes) +
                                  ": expected 1..10");
  }
  if (min_tracks < 3) {
    return Status::InvalidOptions("linear prediction min_tracks " + std::to_string(min_tracks) +
                                  ": expected >= 3");
  }
  return Status::Ok();
}

Status FrontEndOptions::Check() const {
  TIEPOINT_RETURN_IF_ERROR(fast.Check());
  TIEPOINT_RETURN_IF_ERROR(lk.Check());
  TIEPOINT_RETURN_IF_ERROR(linear_prediction.Check());
  if (slots < 2 || slots > 64) {
    return Status::InvalidOptions("frontend slots " + std::to_string(slots) + ": expected 2..64");
  }
  return Status::Ok();
}

namespace {

class CpuFrontEnd : public FastLkFrontEnd {
 public:
  explicit CpuFrontEnd(const FrontEndOptions& options)
      : options_(options), pyramids_(options.slots), filled_(options.slots, false) {}

  Status SetFrame(int slot, const ImageU8& image) override {
    TIEPOINT_RETURN_IF_ERROR(CheckSlot(slot, false));
    TIEPOINT_RETURN_IF_ERROR(BuildPyramid(image, options_.pyramid_levels(),
                                          options_.fast.num_threads, &pyramids_[slot]));
    filled_[slot] = true;
    return Status::Ok();
  }
  Status GetPyramid(int slot, ImagePyramid* pyramid) override {
    TIEPOINT_RETURN_IF_ERROR(CheckSlot(slot, true));
    *pyramid = pyramids_[slot];
    return Status::Ok();
  }
  Status DetectRaw(int slot, std::vector<std::vector<FastCorner>>* per_level) override {
    TIEPOINT_RETURN_IF_ERROR(CheckSlot(slot, true));
    return DetectFastRaw(pyramids_[slot], options_.fast, per_level);
  }
  Status Detect(int slot, const std::vector<uint8_t>* blocked_cells,
                std::vector<FastCorner>* corners) override {
    TIEPOINT_RETURN_IF_ERROR(CheckSlot(slot, true));
    return DetectFast(pyramids_[slot], options_.fast, blocked_cells, corners);
  }
  Status TrackMapped(int from, int to, const std::vector<Point2f>& points,
                     const std::vector<Point2f>* guesses, const LkLinearMap& map,
                     std::vector<LkResult>* results) override {
    TIEPOINT_RETURN_IF_ERROR(CheckSlot(from, true));
    TIEPOINT_RETURN_IF_ERROR(CheckSlot(to, true));
    return TrackLk(pyramids_[from], pyramids_[to], points, guesses, map, options_.lk, results);
  }

 private:
  Status CheckSlot(int slot, bool must_be_filled) const {
    if (slot < 0 || slot >= options_.slots) {
      return Status::InvalidOptions("frontend slot " + std::to_string(slot) + ": expected 0.." +
                                    std::to_string(options_.slots - 1));
    }
    if (must_be_filled && !filled_[slot]) {
      return Status::InvalidOptions("frontend slot " + std::to_string(slot) + " holds no frame");
    }
    return Status::Ok();
  }

  FrontEndOptions options_;
  std::vector<ImagePyramid> pyramids_;
  std::vector<bool> filled_;
};

}  // namespace

Status FastLkFrontEnd::Create(const FrontEndOptions& options, Device device,
                              std::unique_ptr<FastLkFrontEnd>* frontend) {
  TIEPOINT_RETURN_IF_ERROR(options.Check());
  switch (device) {
    case Device::kCpu:
      *frontend = std::make_unique<CpuFrontEnd>(options);
      return Status::Ok();
    case Device::kCuda:
      return CreateCudaFrontEnd(options, frontend);
  }
  return Status::Internal("unknown device");
}

namespace {

// Guesses of where each track is in the next frame (see the header).
void PredictMotion(const std::vector<TrackPoint>& tracks, std::vector<Point2f>* guess) {
  std::vector<size_t> moving;
  for (size_t i = 0; i < tracks.size(); ++i) {
    if (tracks[i].vx != 0.0f || tracks[i].vy != 0.0f) moving.push_back(i);
  }
  constexpr size_t kNeighbours = 5;
  std::vector<std::pair<float, size_t>> near;
  std::vector<float> mx, my;
  for (size_t i = 0; i < tracks.size(); ++i) {
    const TrackPoint& t = tracks[i];
    (*guess)[i] = {t.x + t.vx, t.y + t.vy};
    if (t.vx != 0.0f || t.vy != 0.0f || moving.empty()) continue;
    near.clear();
    for (size_t j : moving) {
      const float dx = tracks[j].x - t.x, dy = tracks[j].y - t.y;
      near.push_back({dx * dx + dy * dy, j});
    }
    const size_t k = std::min(kNeighbours, near.size());
    std::partial_sort(near.begin(), near.begin() + k, near.end());
    mx.clear();
    my.clear();
    for (size_t m = 0; m < k; ++m) {
      mx.push_back(tracks[near[m].second].vx);
      my.push_back(tracks[near[m].second].vy);
    }
    std::nth_element(mx.begin(), mx.begin() + k / 2, mx.end());
    std::nth_element(my.begin(), my.begin() + k / 2, my.end());
    (*guess)[i] = {t.x + mx[k / 2], t.y + my[k / 2]};
  }
}

}  // namespace

bool FitSimilarity(const std::vector<Point2f>& points, const std::vector<LkResult>& results,
                   int min_tracks, LkLinearMap* map, float* tx, float* ty, int* inliers) {
  std::vector<size_t> use;
  for (size_t i = 0; i < points.size() && i < results.size(); ++i) {
    if (results[i].status == LkStatus::kTracked) use.push_back(i);
  }
  double a = 1, b = 0, mx = 0, my = 0, nx = 0, ny = 0;
  bool ok = false;
  std::vector<double> residual;
  for (int round = 0; round < 4; ++round) {
    if (static_cast<int>(use.size()) < std::max(min_tracks, 3)) return false;
    mx = my = nx = ny = 0;
    for (size_t i : use) {
      mx += points[i].x;
      my += points[i].y;
      nx += results[i].x;
      ny += results[i].y;
    }
    const double inv = 1.0 / static_cast<double>(use.size());
    mx *= inv;
    my *= inv;
    nx *= inv;
    ny *= inv;
    double pp = 0, dot = 0, cross = 0;
    for (size_t i : use) {
      const double px = points[i].x - mx, py = points[i].y - my;
      const double qx = results[i].x - nx, qy = results[i].y - ny;
      pp += px * px + py * py;
      dot += px * qx + py * qy;
      cross += px * qy - py * qx;
    }
    if (!(pp > 0)) return false;
    a = dot / pp;
    b = cross / pp;
    ok = std::isfinite(a) && std::isfinite(b) && a * a + b * b > 0;
    if (!ok) return false;
    if (round == 3) break;
    // Residuals of every tracked point; keep those within max(1 px, 2.5 x the median).
    std::vector<size_t> all;
    residual.clear();
    for (size_t i = 0; i < points.size() && i < results.size(); ++i) {
      if (results[i].status != LkStatus::kTracked) continue;
      const double px = points[i].x - mx, py = points[i].y - my;
      const double ex = results[i].x - nx - (a * px - b * py);
      const double ey = results[i].y - ny - (b * px + a * py);
      all.push_back(i);
      residual.push_back(std::hypot(ex, ey));
    }
    std::vector<double> sorted = residual;
    std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
    const double limit = std::max(1.0, 2.5 * sorted[sorted.size() / 2]);
    use.clear();
    for (size_t k = 0; k < all.size(); ++k) {
      if (residual[k] <= limit) use.push_back(all[k]);
    }
  }
  LkLinearMap m;
  m.a00 = static_cast<float>(a);
  m.a01 = static_cast<float>(-b);
  m.a10 = static_cast<float>(b);
  m.a11 = static_cast<float>(a);
  if (!m.Check().ok()) return false;
  *map = m;
  // x' - n = A (x - m): t = n - A m.
  if (tx) *tx = static_cast<float>(nx - (a * mx - b * my));
  if (ty) *ty = static_cast<float>(ny - (b * mx + a * my));
  if (inliers) *inliers = static_cast<int>(use.size());
  return true;
}

Status TrackWithLinearPrediction(FastLkFrontEnd* frontend, int from, int to,
                                 const std::vector<Point2f>& points,
                                 const std::vector<Point2f>* guesses,
                                 const LinearPredictionOptions& options, LkLinearMap* map,
                                 std::vector<LkResult>* results,
                                 LinearPredictionReport* report) {
  TIEPOINT_RETURN_IF_ERROR(options.Check());
  LinearPredictionReport local;
  LinearPredictionReport& rep = report ? *report : local;
  rep = LinearPredictionReport();
  TIEPOINT_RETURN_IF_ERROR(frontend->TrackMapped(from, to, points, guesses, *map, results));
  rep.passes = 1;
  if (!options.enabled) return Status::Ok();
  LkLinearMap used = *map;
  std::vector<Point2f> again(points.size());
  std::vector<LkResult> next;
  while (rep.passes < options.max_passes) {
    LkLinearMap fit;
    float tx = 0, ty = 0;
    if (!FitSimilarity(points, *results, options.min_tracks, &fit, &tx, &ty, &rep.inliers)) break;
    rep.fitted = true;
    rep.fit = fit;
    const double turn = std::remainder(fit.RotationDegrees() - used.RotationDegrees(), 360.0);
    const double zoom = fit.Scale() / used.Scale();
    if (!(std::fabs(turn) > options.min_rotation_deg ||
          std::fabs(zoom - 1.0) > options.min_scale_change)) {
      break;
    }
    for (size_t i = 0; i < points.size(); ++i) {
      const LkResult& r = (*results)[i];
      const Point2f& p = points[i];
      again[i] = r.status == LkStatus::kTracked
                     ? Point2f{r.x, r.y}
                     : Point2f{fit.a00 * p.x + fit.a01 * p.y + tx,
                               fit.a10 * p.x + fit.a11 * p.y + ty};
    }
    TIEPOINT_RETURN_IF_ERROR(frontend->TrackMapped(from, to, points, &again, fit, &next));
    ++rep.passes;
    for (size_t i = 0; i < points.size(); ++i) {
      if (next[i].status == LkStatus::kTracked || (*results)[i].status != LkStatus::kTracked) {
        (*results)[i] = next[i];
      }
    }
    used = fit;
  }
  *map = used;
  return Status::Ok();
}

SequenceTracker::SequenceTracker(FastLkFrontEnd* frontend, const FrontEndOptions& options)
    : frontend_(frontend), options_(options) {}

Status SequenceTracker::AddFrame(const ImageU8& frame, std::vector<TrackPoint>* points) {
  if (options_.fast.nms != FastNms::kGrid) {
    return Status::InvalidOptions("tracking re-detects in empty cells: it needs grid suppression");
  }
  const bool first = summary_.frames == 0;
  if (first) {
    width_ = frame.width;
    height_ = frame.height;
  } else if (frame.width != width_ || frame.height != height_) {
    return Status::InvalidInput("frame " + std::to_string(summary_.frames) + " is " +
                                std::to_string(frame.width) + "x" + std::to_string(frame.height) +
                                ", the sequence started at " + std::to_string(width_) + "x" +
                                std::to_string(height_));
  }
  const int slot = first ? 0 : 1 - current_slot_;
  TIEPOINT_RETURN_IF_ERROR(frontend_->SetFrame(slot, frame));

  std::vector<TrackPoint> live;
  if (!first) {
    const size_t n = live_.size();
    std::vector<Point2f> from(n), guess(n);
    for (size_t i = 0; i < n; ++i) from[i] = {live_[i].x, live_[i].y};
    PredictMotion(live_, &guess);
    std::vector<LkResult> results;
    LinearPredictionReport report;
    TIEPOINT_RETURN_IF_ERROR(TrackWithLinearPrediction(frontend_, current_slot_, slot, from, &guess,
                                                       options_.linear_prediction, &map_,
                                                       &results, &report));
    summary_.map_rotation_deg.push_back(map_.RotationDegrees());
    summary_.map_scale.push_back(map_.Scale());
    summary_.second_pass.push_back(report.second_pass());
    // Retry at rest the tracks lost with a prediction that moved them.
    std::vector<size_t> retry;
    for (size_t i = 0; i < n; ++i) {
      if (results[i].status != LkStatus::kTracked &&
          (guess[i].x != from[i].x || guess[i].y != from[i].y)) {
        retry.push_back(i);
      }
    }
    if (!retry.empty()) {
      std::vector<Point2f> again(retry.size());
      for (size_t k = 0; k < retry.size(); ++k) again[k] = from[retry[k]];
      std::vector<LkResult> second;
      TIEPOINT_RETURN_IF_ERROR(
          frontend_->TrackMapped(current_slot_, slot, again, nullptr, map_, &second));
      for (size_t k = 0; k < retry.size(); ++k) {
        if (second[k].status == LkStatus::kTracked) results[retry[k]] = second[k];
      }
    }
    int leaving = 0;
    for (size_t i = 0; i < n; ++i) {
      if (results[i].status != LkStatus::kTracked) {
        summary_.lost_flat += results[i].status == LkStatus::kFlat;
        summary_.lost_outside += results[i].status == LkStatus::kOutside;
        summary_.lost_forward_backward += results[i].status == LkStatus::kForwardBackward;
        const bool has_velocity = live_[i].vx != 0.0f || live_[i].vy != 0.0f;
        leaving += has_velocity && (guess[i].x < 0.0f || guess[i].y < 0.0f ||
                                    guess[i].x > width_ - 1.0f || guess[i].y > height_ - 1.0f);
        continue;
      }
      live.push_back({live_[i].track_id, results[i].x, results[i].y, results[i].x - from[i].x,
                      results[i].y - from[i].y});
      summary_.fb_errors.push_back(results[i].fb_error);
    }
    summary_.tracks_in.push_back(static_cast<int>(n));
    summary_.tracks_survived.push_back(static_cast<int>(live.size()));
    summary_.tracks_lost_leaving.push_back(leaving);
  }
  const int gx = FastGridColumns(width_, options_.fast.cell_width);
  const int gy = FastGridRows(height_, options_.fast.cell_height);
  std::vector<uint8_t> blocked(static_cast<size_t>(gx) * gy, 0);
  for (const TrackPoint& t : live) {
    const int cx = std::min(gx - 1, std::max(0, static_cast<int>(t.x + 0.5f) / options_.fast.cell_width));
    const int cy = std::min(gy - 1, std::max(0, static_cast<int>(t.y + 0.5f) / options_.fast.cell_height));
    blocked[static_cast<size_t>(cy) * gx + cx] = 1;
  }
  std::vector<FastCorner> corners;
  TIEPOINT_RETURN_IF_ERROR(frontend_->Detect(slot, &blocked, &corners));
  const float margin = static_cast<float>(LkPatchReach(
      options_.lk, std::min(options_.lk.levels, PyramidLevelsFor(width_, height_, options_.lk.levels))));
  for (const FastCorner& c : corners) {
    if (c.x < margin || c.y < margin || c.x > width_ - 1 - margin || c.y > height_ - 1 - margin) {
      continue;
    }
    live.push_back({next_id_++, c.x, c.y, 0.0f, 0.0f});
    ++summary_.tracks_started;
  }
  live_ = std::move(live);
  current_slot_ = slot;
  ++summary_.frames;
  if (points) *points = live_;
  return Status::Ok();
}

}  // namespace tiepoint
