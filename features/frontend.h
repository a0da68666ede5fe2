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

struct FrontEndOptions {
  FastOptions fast;
  LkOptions lk;
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
  virtual Status Track(int from, int to, const std::vector<Point2f>& points,
                       const std::vector<Point2f>* guesses, std::vector<LkResult>* results) = 0;

  // kCpu: the reference; kCuda: features/fast_cuda.h, kUnavailable naming --device cpu when
  // this build has no CUDA or no GPU can be used. Checks the options first.
  static Status Create(const FrontEndOptions& options, Device device,
                       std::unique_ptr<FastLkFrontEnd>* frontend);
};

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
};

// Detect, track, re-detect in emptied cells. Frame 0: FAST + grid suppression starts one
// track per corner. Every next frame: the live tracks are tracked by LK (lost ones end),
// the cells holding a live track are blocked, and FAST starts new tracks in the others.
// Prediction: a track seen in two frames is predicted at constant image velocity; a new
// one takes the median motion of the (up to) 5 nearest tracks that have a velocity. A
// track lost with its prediction is tried once more without (predicted at rest).
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
  int64_t next_id_ = 0;
  SequenceTrackerSummary summary_;
};

}  // namespace tiepoint
