#include "features/fast.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "features/fast_score_inl.h"

namespace tiepoint {

const char* ToString(FastScore score) {
  switch (score) {
    case FastScore::kMaxThreshold: return "max-threshold";
    case FastScore::kSad: return "sad";
    case FastScore::kHarris: return "harris";
    case FastScore::kShiTomasi: return "shi-tomasi";
  }
  return "unknown";
}

const char* ToString(FastNms nms) {
  switch (nms) {
    case FastNms::kGrid: return "grid";
    case FastNms::kPlain: return "plain";
  }
  return "unknown";
}

Status FastScoreFromString(const std::string& text, FastScore* score) {
  for (FastScore s : {FastScore::kMaxThreshold, FastScore::kSad, FastScore::kHarris,
                      FastScore::kShiTomasi}) {
    if (text == ToString(s)) {
      *score = s;
      return Status::Ok();
    }
  }
  return Status::InvalidOptions("FAST score '" + text +
                                "': expected max-threshold, sad, harris or shi-tomasi");
}

Status FastNmsFromString(const std::string& text, FastNms* nms) {
  if (text == "grid") {
    *nms = FastNms::kGrid;
  } else if (text == "plain") {
    *nms = FastNms::kPlain;
  } else {
    return Status::InvalidOptions("FAST suppression '" + text + "': expected grid or plain");
  }
  return Status::Ok();
}

Status FastOptions::Check() const {
  if (threshold < 1 || threshold > 254) {
    return Status::InvalidOptions("FAST threshold " + std::to_string(threshold) +
                                  ": expected 1..254 (8-bit intensity difference)");
  }
  if (arc_length < 9 || arc_length > 12) {
    return Status::InvalidOptions("FAST arc length " + std::to_string(arc_length) +
                                  ": expected 9..12 contiguous circle pixels");
  }
  if (levels < 1 || levels > 8) {
    return Status::InvalidOptions("FAST levels " + std::to_string(levels) + ": expected 1..8");
  }
  if (nms == FastNms::kGrid) {
    if (cell_width < 32 || cell_width % 32 != 0 || cell_width > 4096) {
      return Status::InvalidOptions("FAST cell width " + std::to_string(cell_width) +
                                    ": expected a multiple of 32 (32..4096): a warp takes a "
                                    "32-pixel cell row");
    }
    if (cell_height < 1 || cell_height > 4096) {
      return Status::InvalidOptions("FAST cell height " + std::to_string(cell_height) +
                                    ": expected 1..4096 pixels");
    }
  } else if (nms_radius < 1 || nms_radius > 16) {
    return Status::InvalidOptions("FAST suppression radius " + std::to_string(nms_radius) +
                                  ": expected 1..16");
  }
  if (num_threads < 0) return Status::InvalidOptions("FAST num_threads must be >= 0");
  return Status::Ok();
}

std::array<uint32_t, 2048> FastLookupTable(int arc_length) {
  std::array<uint32_t, 2048> table{};
  for (uint32_t m = 0; m < 65536; ++m) {
    if (fast_internal::HasArc(m, arc_length)) table[m >> 5] |= 1u << (m & 31);
  }
  return table;
}

void FastScoreMap(const ImageU8& level, const FastOptions& options,
                  const std::array<uint32_t, 2048>& table, int num_threads,
                  std::vector<float>* scores) {
  const int w = level.width, h = level.height;
  scores->assign(static_cast<size_t>(w) * h, -INFINITY);
  const int kind = static_cast<int>(options.score);
  const int threads = num_threads > 0 ? num_threads : omp_get_max_threads();
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int y = kFastBorder; y < h - kFastBorder; ++y) {
    const uint8_t* row = &level.data[static_cast<size_t>(y) * w];
    float* out = &(*scores)[static_cast<size_t>(y) * w];
    for (int x = kFastBorder; x < w - kFastBorder; ++x) {
      out[x] = fast_internal::PixelScore(row + x, w, options.threshold, options.arc_length, kind,
                                          table.data());
    }
  }
}

namespace {

int SearchedLevels(const ImagePyramid& pyramid, const FastOptions& options) {
  return std::min(options.levels, pyramid.num_levels());
}

void ScoreMaps(const ImagePyramid& pyramid, const FastOptions& options,
               std::vector<std::vector<float>>* maps) {
  const auto table = FastLookupTable(options.arc_length);
  maps->resize(SearchedLevels(pyramid, options));
  for (size_t l = 0; l < maps->size(); ++l) {
    FastScoreMap(pyramid.levels[l], options, table, options.num_threads, &(*maps)[l]);
  }
}

// True when (x, y) beats every corner within `radius` on its level.
bool IsLocalMax(const std::vector<float>& map, int w, int h, int level, int x, int y,
                int radius) {
  const float s = map[static_cast<size_t>(y) * w + x];
  for (int qy = std::max(0, y - radius); qy <= std::min(h - 1, y + radius); ++qy) {
    for (int qx = std::max(0, x - radius); qx <= std::min(w - 1, x + radius); ++qx) {
      if (qx == x && qy == y) continue;
      const float q = map[static_cast<size_t>(qy) * w + qx];
      if (q == -INFINITY) continue;
      if (!FastBeats(s, level, y, x, q, level, qy, qx)) return false;
    }
  }
  return true;
}

}  // namespace

Status DetectFastRaw(const ImagePyramid& pyramid, const FastOptions& options,
                     std::vector<std::vector<FastCorner>>* per_level) {
  TIEPOINT_RETURN_IF_ERROR(options.Check());
  if (pyramid.levels.empty()) return Status::InvalidInput("FAST: empty pyramid");
  std::vector<std::vector<float>> maps;
  ScoreMaps(pyramid, options, &maps);
  per_level->assign(maps.size(), {});
  for (size_t l = 0; l < maps.size(); ++l) {
    const ImageU8& img = pyramid.levels[l];
    for (int y = 0; y < img.height; ++y) {
      for (int x = 0; x < img.width; ++x) {
        const float s = maps[l][static_cast<size_t>(y) * img.width + x];
        if (s != -INFINITY) (*per_level)[l].push_back(MakeFastCorner(static_cast<int>(l), x, y, s));
      }
    }
  }
  return Status::Ok();
}

void SuppressFast(const ImagePyramid& pyramid, const std::vector<std::vector<float>>& maps,
                  const FastOptions& options, const std::vector<uint8_t>* blocked_cells,
                  std::vector<FastCorner>* corners) {
  corners->clear();
  const int levels = static_cast<int>(maps.size());
  const int threads = options.num_threads > 0 ? options.num_threads : omp_get_max_threads();
  if (options.nms == FastNms::kPlain) {
    for (int l = 0; l < levels; ++l) {
      const ImageU8& img = pyramid.levels[l];
      std::vector<std::vector<FastCorner>> rows(img.height);
#pragma omp parallel for schedule(dynamic, 8) num_threads(threads)
      for (int y = 0; y < img.height; ++y) {
        for (int x = 0; x < img.width; ++x) {
          const float s = maps[l][static_cast<size_t>(y) * img.width + x];
          if (s == -INFINITY) continue;
          if (IsLocalMax(maps[l], img.width, img.height, l, x, y, options.nms_radius)) {
            rows[y].push_back(MakeFastCorner(l, x, y, s));
          }
        }
      }
      for (auto& r : rows) corners->insert(corners->end(), r.begin(), r.end());
    }
    return;
  }
  const int w0 = pyramid.levels[0].width, h0 = pyramid.levels[0].height;
  const int gx = FastGridColumns(w0, options.cell_width);
  const int gy = FastGridRows(h0, options.cell_height);
  std::vector<FastCorner> best(static_cast<size_t>(gx) * gy);
  std::vector<uint8_t> has(best.size(), 0);
  // One cell row of cells per task: cells are independent, the result fixed.
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int cy = 0; cy < gy; ++cy) {
    for (int cx = 0; cx < gx; ++cx) {
      const size_t cell = static_cast<size_t>(cy) * gx + cx;
      if (blocked_cells && (*blocked_cells)[cell]) continue;
      for (int l = 0; l < levels; ++l) {
        const ImageU8& img = pyramid.levels[l];
        // Level pixels x with floor(2^l x / cell_width) == cx.
        const int scale = 1 << l;
        const int x_begin = (cx * options.cell_width + scale - 1) / scale;
        const int x_end = std::min(img.width, ((cx + 1) * options.cell_width + scale - 1) / scale);
        const int y_begin = (cy * options.cell_height + scale - 1) / scale;
        const int y_end = std::min(img.height, ((cy + 1) * options.cell_height + scale - 1) / scale);
        for (int y = y_begin; y < y_end; ++y) {
          for (int x = x_begin; x < x_end; ++x) {
            const float s = maps[l][static_cast<size_t>(y) * img.width + x];
            if (s == -INFINITY) continue;
            if (has[cell] && !FastBeats(s, l, y, x, best[cell].score, best[cell].level,
                                        best[cell].level_y, best[cell].level_x)) {
              continue;
            }
            if (!IsLocalMax(maps[l], img.width, img.height, l, x, y, 1)) continue;
            best[cell] = MakeFastCorner(l, x, y, s);
            has[cell] = 1;
          }
        }
      }
    }
  }
  for (size_t i = 0; i < best.size(); ++i) {
    if (has[i]) corners->push_back(best[i]);
  }
}

Status DetectFast(const ImagePyramid& pyramid, const FastOptions& options,
                  const std::vector<uint8_t>* blocked_cells, std::vector<FastCorner>* corners) {
  TIEPOINT_RETURN_IF_ERROR(options.Check());
  if (pyramid.levels.empty()) return Status::InvalidInput("FAST: empty pyramid");
  if (blocked_cells && options.nms == FastNms::kGrid) {
    const size_t cells =
        static_cast<size_t>(FastGridColumns(pyramid.levels[0].width, options.cell_width)) *
        FastGridRows(pyramid.levels[0].height, options.cell_height);
    if (blocked_cells->size() != cells) {
      return Status::InvalidInput("FAST: blocked-cell mask of " +
                                  std::to_string(blocked_cells->size()) + " cells, expected " +
                                  std::to_string(cells));
    }
  }
  std::vector<std::vector<float>> maps;
  ScoreMaps(pyramid, options, &maps);
  SuppressFast(pyramid, maps, options, blocked_cells, corners);
  return Status::Ok();
}

}  // namespace tiepoint
