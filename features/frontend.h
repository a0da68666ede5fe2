// A feature-tracking front end for image sequences: image pyramids, FAST + grid suppression
// (features/fast.h) and pyramidal LK (features/lk.h) behind one interface with a CPU
// reference and a CUDA backend (features/fast_cuda.h), so that on the GPU each frame is
// uploaded once and its pyramid stays on the device for both detection and tracking.
// SequenceTracker builds tracks over a sequence with it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "features/fast.h"
#include "features/lk.h"
#include "features/pyramid.h"
#include "io/base/device.h"
#include "io/base/status.h"

namespace tiepoint {

// Linear prediction of the LK patches from the tracks themselves (LkLinearMap of
// features/lk.h; TrackWithLinearPrediction below), as visual-inertial front ends turn
// their patches by the gyro's rotation.
struct LinearPredictionOptions {
  bool enabled = true;
  // A second pass runs when the similarity fitted to the first pass's tracks turns by more
  // than min_rotation_deg from the map that pass used, or scales by more than
  // min_scale_change (relative). Measured (CPU reference, bench/fast_lk_bench.cc quality):
  // KITTI 00 frames 0-4 fit turns of 0.02-0.19 degrees and scales of 1.036-1.042 (the
  // expansion of forward motion, which depends on depth: not a zoom of every patch); a
  // 2% scale rule applied that scale to every patch and cost median forward-backward
  // error 0.0233 -> 0.0325 px and step 3->4 survival 90.9 -> 89.3%, so scale alone only
  // triggers beyond 15%. Boat 1->2 fits -14.0 degrees and 0.882: median 0.211 -> 0.058 px.
  // A translation-only patch turned by 5 degrees (boat img1, exact prediction) is already
  // 0.2 px off the truth (0.01 px with the map): hence 2 degrees.
  double min_rotation_deg = 2.0;
  double min_scale_change = 0.15;
  // Fewest tracks (passing the forward-backward check) to fit a similarity.
  int min_tracks = 8;
  // LK passes per frame pair at most (>= 2 for any effect).
  int max_passes = 3;

  Status Check() const;
};

struct FrontEndOptions {
  FastOptions fast;
  LkOptions lk;
  LinearPredictionOptions linear_prediction;
  // CUDA only: frames whose pyramids are kept on the device at once (slots), >= 2.
  int slots = 2;

  // Checks fast and lk.
  Status Check() const;
  // Pyramid levels built per frame: max(fast.levels, lk.levels).
  int pyramid_levels() const { return fast.levels > lk.levels ? fast.levels : lk.levels; }
};

// Holds the pyramids of up to `slots` frames. A frontend is used from one thread at a
// time. Every method names the slot it works on; a slot that never received a frame is
// kInvalidOptions.
class FastLkFrontEnd {
 public:
  virtual ~FastLkFrontEnd() = default;

  // Builds the pyramid of `image` into `slot` (replacing what was there). Frames of one
  // sequence may differ in size; LK then refuses the pair.
  virtual Status SetFrame(int slot, const ImageU8& image) = 0;
  // A copy of the slot's pyramid (tests; on the GPU a download).
  virtual Status GetPyramid(int slot, ImagePyramid* pyramid) = 0;
  // All corners of the searched levels before suppression, as DetectFastRaw.
  virtual Status DetectRaw(int slot, std::vector<std::vector<FastCorner>>* per_level) = 0;
  // FAST + suppression, as DetectFast (blocked_cells: optional, kGrid only).
  virtual Status Detect(int slot, const std::vector<uint8_t>* blocked_cells,
                        std::vector<FastCorner>* corners) = 0;
  // LK from the frame in `from` to the frame in `to`, as TrackLk.
  Status Track(int from, int to, const std::vector<Point2f>& points,
               const std::vector<Point2f>* guesses, std::vector<LkResult>* results) {
    return TrackMapped(from, to, points, guesses, LkLinearMap(), results);
  }
  // The same with the linear prediction `map` (features/lk.h).
  virtual Status TrackMapped(int from, int to, const std::vector<Point2f>& points,
                             const std::vector<Point2f>* guesses, const LkLinearMap& map,
                             std::vector<LkResult>* results) = 0;

  // kCpu: the reference; kCuda: features/fast_cuda.h, kUnavailable naming --device cpu when
  // this build has no CUDA or no GPU can be used. Checks the options first.
  static Status Create(const FrontEndOptions& options, Device device,
                       std::unique_ptr<FastLkFrontEnd>* frontend);
};

// Fits x' = s R x + t (a similarity) to the tracked results (status kTracked) of
// `points`, robustly: least squares, then again on the tracks within max(1 px, 2.5 x the
// median residual), three times. False (outputs untouched) with fewer than min_tracks
// tracks or a degenerate fit. *map: s R; (*tx, *ty): t; *inliers: the tracks of the last
// fit (each optional but map).
bool FitSimilarity(const std::vector<Point2f>& points, const std::vector<LkResult>& results,
                   int min_tracks, LkLinearMap* map, float* tx, float* ty, int* inliers);

struct LinearPredictionReport {
  bool fitted = false;  // a similarity was fitted to the first pass
  LkLinearMap fit;      // ... the last one
  int inliers = 0;      // on this many tracks
  int passes = 0;       // LK passes run (1 when the first pass's map held)
  bool second_pass() const { return passes > 1; }
};

// LK with linear prediction: a first pass with *map (the previous frame pair's; identity
// to start with) and a similarity fitted to its tracks (FitSimilarity). When the fit
// turns by more than options.min_rotation_deg from the map of the pass, or scales by more
// than options.min_scale_change, another pass runs with the fitted map, from the last
// pass's positions where it tracked and from the fitted similarity's prediction
// (s R p + t) elsewhere; up to options.max_passes passes, refitting after each. Each
// feature keeps its last tracked result (the last pass's status when none tracked), and
// *map becomes the last pass's map. Without a departure *map stays as it is (the identity
// on sequences without turns: exactly Track's results). options.enabled false: Track
// with *map.
Status TrackWithLinearPrediction(FastLkFrontEnd* frontend, int from, int to,
                                 const std::vector<Point2f>& points,
                                 const std::vector<Point2f>* guesses,
                                 const LinearPredictionOptions& options, LkLinearMap* map,
                                 std::vector<LkResult>* results,
                                 LinearPredictionReport* report);

// One point of a track in one frame.
struct TrackPoint {
  int64_t track_id = 0;
  float x = 0;  // level-0 pixels of that frame
  float y = 0;
  // Image motion of the track into this frame (0 for a new track); the tracker predicts
  // the next position as (x + vx, y + vy).
  float vx = 0;
  float vy = 0;
};

struct SequenceTrackerSummary {
  int frames = 0;
  int64_t tracks_started = 0;
  // Per frame after the first: tracks that came in from the previous frame, and how many
  // of them survived LK + the forward-backward check.
  std::vector<int> tracks_in;
  std::vector<int> tracks_survived;
  // Of the lost ones, those whose predicted position (constant velocity) lies outside the
  // frame: they left the field of view rather than failed.
  std::vector<int> tracks_lost_leaving;
  // Lost tracks of all steps by LkStatus (index: kFlat, kOutside, kForwardBackward).
  int64_t lost_flat = 0, lost_outside = 0, lost_forward_backward = 0;
  // Forward-backward errors of all surviving tracks (level-0 pixels), in frame order.
  std::vector<float> fb_errors;
  // Per frame after the first (linear prediction): the rotation (degrees) and scale of
  // the map the step ended with, and whether it ran a second pass.
  std::vector<double> map_rotation_deg, map_scale;
  std::vector<bool> second_pass;
};

// Detect, track, re-detect in emptied cells. Frame 0: FAST + grid suppression starts one
// track per corner. Every next frame: the live tracks are tracked by LK (lost ones end),
// the cells holding a live track are blocked, and FAST starts new tracks in the others.
// Prediction: a track seen in two frames is predicted at constant image velocity; a new
// one takes the median motion of the (up to) 5 nearest tracks that have a velocity. A
// track lost with its prediction is tried once more without (predicted at rest).
// Patches are turned and zoomed by TrackWithLinearPrediction (options.linear_prediction),
// the map carried from one frame pair to the next.
// New tracks start only where every LK level's patch fits inside the frame: corners closer
// than LkPatchReach (32 px for the defaults) to the border are not used. On KITTI this
// raises the share of tracks that survive a step by 3-7 points (they are the ones that
// leave the frame or whose coarse patches are clamped at the border).
// Track ids count from 0 in order of creation (by cell within a frame). Needs kGrid.
class SequenceTracker {
 public:
  // Takes the frontend (not owned; outlives the tracker).
  SequenceTracker(FastLkFrontEnd* frontend, const FrontEndOptions& options);

  // Adds the next frame; *points (optional) receives the live tracks' points in it.
  // kInvalidInput when the frame's size differs from the first frame's.
  Status AddFrame(const ImageU8& frame, std::vector<TrackPoint>* points);

  const SequenceTrackerSummary& summary() const { return summary_; }

 private:
  FastLkFrontEnd* frontend_;
  FrontEndOptions options_;
  int current_slot_ = 0;
  int width_ = 0, height_ = 0;
  std::vector<TrackPoint> live_;
  LkLinearMap map_;
  int64_t next_id_ = 0;
  SequenceTrackerSummary summary_;
};

}  // namespace tiepoint
