// Triangulation of 3D points from calibrated views with known poses.
//
// Conventions:
//  - A view is its pose cam_from_world as a 3x4 matrix [R | t]: a world point X maps to
//    P = R X + t in the camera frame (x right, y down, z forward). The camera centre is
//    C = -R^T t.
//  - Observations are normalized image coordinates (u, v) = (P.x / P.z, P.y / P.z); the
//    caller forms them from pixels after undistortion, u = (x_px - cx) / f, v = (y_px - cy) / f.
//  - Every error and threshold here is a reprojection error in normalized units,
//    |(u, v) - proj(P)|: a pixel threshold becomes max_error = max_error_px / f.
//  - Depth is P.z; cheirality means depth > 0 in every view used. Angles are in radians.
//
// Methods: the linear (DLT) triangulation of Hartley & Zisserman (Multiple View Geometry,
// 2nd ed., sec. 12.2) from the rows u P3 - P1, v P3 - P2 of each view, solved as the
// right singular vector of the smallest singular value; then Gauss-Newton on the sum of
// squared reprojection errors over the point's 3 coordinates (RefineTriangulation).
// Single-threaded; reentrant; deterministic.
#pragma once

#include <Eigen/Core>

#include <cstdint>
#include <vector>

#include "io/base/status.h"

namespace tiepoint {

// cam_from_world [R | t].
using CamFromWorld = Eigen::Matrix<double, 3, 4>;

// The camera centre -R^T t of cam_from_world [R | t].
Eigen::Vector3d CameraCenter(const CamFromWorld& cam_from_world);

// Depth of X in the view: the z of R X + t.
double PointDepth(const CamFromWorld& cam_from_world, const Eigen::Vector3d& X);

// True when X has depth > 0 in every pose (cheirality); false for an empty list.
bool IsInFrontOfAll(const std::vector<CamFromWorld>& cams_from_world, const Eigen::Vector3d& X);

// Reprojection error |normalized - proj(R X + t)| in normalized units; +infinity when X is
// not in front of the camera (depth <= 0).
double ReprojectionError(const CamFromWorld& cam_from_world, const Eigen::Vector3d& X,
                         const Eigen::Vector2d& normalized);

// The angle (radians, in [0, pi]) at X between the rays to the camera centres center1 and
// center2; 0 when X coincides with a centre.
double TriangulationAngle(const Eigen::Vector3d& center1, const Eigen::Vector3d& center2,
                          const Eigen::Vector3d& X);

// Linear (DLT) triangulation from two views. False when the system is degenerate (the
// point at infinity: parallel rays, coincident centres) or the input is not finite.
// No cheirality check: use IsInFrontOfAll.
bool TriangulateTwoView(const CamFromWorld& cam1_from_world, const CamFromWorld& cam2_from_world,
                        const Eigen::Vector2d& normalized1, const Eigen::Vector2d& normalized2,
                        Eigen::Vector3d* X);

// Linear (DLT) triangulation from n >= 2 views (normalized[i] seen in cams_from_world[i]).
// False for fewer than 2 views, mismatched sizes, non-finite input or a degenerate system.
bool TriangulateMultiView(const std::vector<CamFromWorld>& cams_from_world,
                          const std::vector<Eigen::Vector2d>& normalized, Eigen::Vector3d* X);

// Gauss-Newton (with Levenberg damping when a step does not lower the cost) on the sum of
// squared reprojection errors of X over the views; *X is the start and receives the result.
// The cost never rises and X never leaves the front of any view. False (X untouched) for
// fewer than 2 views, mismatched sizes, a start not in front of every view, or non-finite
// input.
bool RefineTriangulation(const std::vector<CamFromWorld>& cams_from_world,
                         const std::vector<Eigen::Vector2d>& normalized, Eigen::Vector3d* X,
                         int max_iterations = 10);

struct RobustTriangulationOptions {
  // Reprojection error threshold of an inlier view, normalized units (pixels / focal). > 0.
  double max_error = 0.004;
  // The pair of views that seeds a point must see it at least this angle apart (radians;
  // COLMAP's mapper uses 1.5 degrees). >= 0.
  double min_angle_rad = 1.5 * 3.14159265358979323846 / 180.0;
  // Pairs of views tried at most: all pairs when there are no more, else this many drawn
  // at random (seeded), stopping early once an all-inlier pair was drawn with `confidence`.
  int max_pairs = 200;
  double confidence = 0.9999;
  uint64_t seed = 0;
  // Views that must agree for a point to count as found. >= 2.
  int min_inliers = 2;

  // Explains bad values in words (kInvalidOptions naming the field).
  Status Check() const;
};

struct RobustTriangulation {
  // A point in front of and within max_error of >= min_inliers views, seeded by a pair of
  // views at least min_angle_rad apart. When false, point is unspecified.
  bool found = false;
  Eigen::Vector3d point = Eigen::Vector3d::Zero();
  // One entry per view: 1 when the view agrees with the point (in front, within max_error).
  std::vector<uint8_t> inlier_mask;
  int num_inliers = 0;
  // Largest triangulation angle (radians) between two inlier views.
  double max_angle_rad = 0.0;
  // Root mean square reprojection error over the inlier views, normalized units.
  double inlier_rms_error = 0.0;
};

// Robust multi-view triangulation of one track: for pairs of views (see max_pairs), the
// two-view DLT point is kept when it is in front of both, seen at >= min_angle_rad, and
// scored by MSAC over all views (sum of min(e^2, max_error^2)); the best point is
// re-triangulated (DLT + RefineTriangulation) on its inlier views and the inliers
// re-counted, repeated while their number grows (at most 3 times). A view that is an
// outlier (a wrong match, a badly registered image) thus leaves the mask at 0.
// Returns kInvalidInput for mismatched sizes or non-finite input (naming the view),
// kInvalidOptions for bad options; OK with found = false when no pair qualifies.
Status TriangulateTrackRobust(const std::vector<CamFromWorld>& cams_from_world,
                              const std::vector<Eigen::Vector2d>& normalized,
                              const RobustTriangulationOptions& options, RobustTriangulation* result);

}  // namespace tiepoint
