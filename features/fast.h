// FAST corners (Rosten & Drummond, ECCV 2006) on an image pyramid, decided through a
// bit-packed lookup table, with grid non-maximum suppression that spreads the corners over
// the image, after Nagy, Foehn & Scaramuzza, "Faster than FAST: GPU-Accelerated Frontend
// for High-Speed VIO", IROS 2020. This header is the CPU reference (OpenMP); the CUDA
// version (features/fast_cuda.h, through FastLkFrontEnd in features/frontend.h) gives the
// identical corners.
//
// Segment test. On an 8-bit level (features/pyramid.h), pixel c with intensity I_c is a
// corner for threshold t and arc length n when, of the 16 pixels p_0..p_15 of the Bresenham
// circle of radius 3 (p_0 straight above, then clockwise: offsets (0,-3) (1,-3) (2,-2)
// (3,-1) (3,0) (3,1) (2,2) (1,3) (0,3) (-1,3) (-2,2) (-3,1) (-3,0) (-3,-1) (-2,-2) (-1,-3)),
// n circularly contiguous ones are all brighter (I_p > I_c + t) or all darker
// (I_p < I_c - t). The two 16-bit masks (bit i: p_i brighter, resp. darker) index a table
// of 2^16 bits (8 KiB, FastLookupTable) whose bit says "holds a run of n ones": no branch
// on the pixel values. Pixels closer than kFastBorder to the level's edge are not tested.
//
// Scores (FastScore), larger is better:
//  kMaxThreshold  the largest threshold t' >= t for which the pixel is still a corner:
//                 the max over the two signs and the 16 arcs of n pixels of the arc's
//                 smallest signed difference (I_p - I_c, resp. I_c - I_p), minus 1
//                 (computed directly with sliding minima, no search).
//  kSad           sum of absolute differences beyond the threshold, over the circle, in the
//                 passing sign(s): sum_i max(0, I_p_i - I_c - t) (brighter), resp.
//                 max(0, I_c - I_p_i - t) (darker); the larger of the passing signs.
//  kHarris        det M - 0.04 tr(M)^2 and
//  kShiTomasi     the smaller eigenvalue of M, where M = sum over the 5x5 window around c
//                 of [gx gy]^T [gx gy] with 3x3 Sobel gradients (integers, summed exactly).
//
// Suppression (FastNms):
//  kGrid   The level-0 image is divided into cells of cell_width x cell_height pixels
//          (cell_width a multiple of 32); a corner at pixel (x, y) of level l lies in the
//          cell of level-0 pixel (2^l x, 2^l y). A corner must beat its 8 neighbours on its
//          level, and then each cell keeps its best corner over all levels: at most one
//          corner per cell.
//  kPlain  A corner must beat every corner in the (2r+1) x (2r+1) window around it on its
//          level (r = nms_radius); no cells.
// "a beats b": a.score > b.score, or equal scores and (level, y, x) of a is lexicographically
// smaller than b's. This total order makes the result unique (and equal on CPU and GPU).
// Output order: kGrid by cell (row-major), kPlain by (level, y, x).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "features/pyramid.h"
#include "io/base/status.h"

namespace tiepoint {

// Circle radius; also the room Harris/Shi-Tomasi need (5x5 window of 3x3 Sobel).
constexpr int kFastBorder = 3;

enum class FastScore { kMaxThreshold, kSad, kHarris, kShiTomasi };
enum class FastNms { kGrid, kPlain };

const char* ToString(FastScore score);
const char* ToString(FastNms nms);
// "max-threshold", "sad", "harris", "shi-tomasi"; "grid", "plain". kInvalidOptions else.
Status FastScoreFromString(const std::string& text, FastScore* score);
Status FastNmsFromString(const std::string& text, FastNms* nms);

struct FastOptions {
  // Segment-test threshold t on 8-bit intensities (1..254).
  int threshold = 20;
  // Arc length n: contiguous circle pixels that must pass (9..12).
  int arc_length = 9;
  // Pyramid levels searched (1..8); fewer when the image is too small.
  int levels = 3;
  FastScore score = FastScore::kMaxThreshold;
  FastNms nms = FastNms::kGrid;
  // kGrid: cell size in level-0 pixels; cell_width a positive multiple of 32.
  int cell_width = 32;
  int cell_height = 32;
  // kPlain: suppression radius r (1..16).
  int nms_radius = 1;
  // OpenMP threads of the CPU reference; 0 uses all. Never changes the output.
  int num_threads = 0;

  // Explains the first option out of range, naming the field.
  Status Check() const;
};

struct FastCorner {
  float x = 0;     // level-0 pixels: 2^level * level_x
  float y = 0;
  int level = 0;
  int level_x = 0;  // integer pixel on its level
  int level_y = 0;
  float score = 0;
};

// The corner at integer pixel (x, y) of pyramid level `level`, in both coordinate frames.
inline FastCorner MakeFastCorner(int level, int x, int y, float score) {
  FastCorner c;
  c.level = level;
  c.level_x = x;
  c.level_y = y;
  c.x = static_cast<float>(x << level);
  c.y = static_cast<float>(y << level);
  c.score = score;
  return c;
}

// The 2^16-bit table for arc length n: bit m (word m >> 5, bit m & 31) is set when the
// 16-bit circular mask m holds n contiguous ones.
std::array<uint32_t, 2048> FastLookupTable(int arc_length);

// Grid of cells over a w x h level-0 image.
inline int FastGridColumns(int width, int cell_width) { return (width + cell_width - 1) / cell_width; }
inline int FastGridRows(int height, int cell_height) { return (height + cell_height - 1) / cell_height; }

// "a beats b" of the header comment.
inline bool FastBeats(float score_a, int level_a, int y_a, int x_a, float score_b, int level_b,
                      int y_b, int x_b) {
  if (score_a != score_b) return score_a > score_b;
  if (level_a != level_b) return level_a < level_b;
  if (y_a != y_b) return y_a < y_b;
  return x_a < x_b;
}

// Score map of one level: score of each corner, -infinity elsewhere (row-major, w x h).
void FastScoreMap(const ImageU8& level, const FastOptions& options,
                  const std::array<uint32_t, 2048>& table, int num_threads,
                  std::vector<float>* scores);

// Every pixel of each searched level that passes the segment test, before suppression,
// in (y, x) order: (*per_level)[l] for level l. Checks the options.
Status DetectFastRaw(const ImagePyramid& pyramid, const FastOptions& options,
                     std::vector<std::vector<FastCorner>>* per_level);

// FAST + suppression as the options say. With kGrid, `blocked_cells` (optional; row-major,
// FastGridColumns x FastGridRows of the level-0 size) marks cells that get no corner
// (non-zero: blocked), as a tracker does with the cells its tracks occupy.
Status DetectFast(const ImagePyramid& pyramid, const FastOptions& options,
                  const std::vector<uint8_t>* blocked_cells, std::vector<FastCorner>* corners);

// Suppression on given score maps (one per level, sized as the pyramid's levels): the
// step DetectFast runs after FastScoreMap, exposed for the CUDA comparison tests.
void SuppressFast(const ImagePyramid& pyramid, const std::vector<std::vector<float>>& score_maps,
                  const FastOptions& options, const std::vector<uint8_t>* blocked_cells,
                  std::vector<FastCorner>* corners);

}  // namespace tiepoint
