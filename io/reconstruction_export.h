// Exports of an image-based reconstruction (io/reconstruction.h) for other tools.
//
// BAL (WriteReconstructionBal): one BAL camera per registered image, in image-id order,
// points in point-id order, observations sorted by (point, camera) so `tiepoint ba` reads
// them as it writes them. Conversion from COLMAP's conventions (the file format has no
// comment lines, so it is written here, in the README and in report.json):
//   - BAL cameras look down -z: R_bal = diag(1, -1, -1) R, t_bal = diag(1, -1, -1) t, so
//     p = -P_bal.xy / P_bal.z = (u, -v) for the COLMAP normalized point (u, v);
//   - observations move to BAL's frame, origin at the principal point, +y up:
//     x_bal = x - cx, y_bal = -(y - cy) (COLMAP pixels, whose top-left pixel centre is
//     (0.5, 0.5); the principal point is kept in the same convention, so the shift is exact);
//   - f = the camera's focal length (PINHOLE: the mean of fx and fy, the one approximation),
//     k1, k2 = SIMPLE_RADIAL's k and 0, or RADIAL's k1, k2 (the same polynomial in |p|^2);
//   - OPENCV (whose tangential terms BAL cannot hold) and the fisheye models (whose
//     projection is not BAL's): each observation is undistorted to the normalized point
//     (u, v) and written as f (u, -v), f the mean of fx and fy, with k1 = k2 = 0.
// Residuals of the BAL problem therefore equal the model's reprojection errors (for all
// models but PINHOLE with fx != fy, OPENCV and the fisheye models, whose residuals are
// measured undistorted).
//
// PLY (WriteReconstructionPly): binary little-endian vertices x y z red green blue: every
// point in its colour, then every camera centre in red, for MeshLab / CloudCompare.
//
// SVG (WriteReconstructionOverviewSvg): a view from above of the camera centres (with their
// viewing directions) and points, on the plane that best fits the camera centres (the ring
// or street), so a user sees at a glance whether the layout came out right.
#pragma once

#include <string>

#include "io/base/status.h"
#include "io/reconstruction.h"
#include "io/scene.h"

namespace tiepoint {

// The BAL scene of a reconstruction (conversion above).
Status ReconstructionToBalScene(const Reconstruction& rec, Scene* scene);
Status WriteReconstructionBal(const std::string& path, const Reconstruction& rec);
// The inverse (bench/reconstruction_ba_bench): BAL camera i becomes image i + 1 with a
// RADIAL camera (f, 0, 0, k1, k2) of its own, or, with `single_camera`, every image camera 1
// (camera 0's f, k1, k2; kInvalidInput naming the first camera that differs); points keep
// their order (id j + 1), observations become points2D in file order.
Status BalSceneToReconstruction(const Scene& scene, bool single_camera, Reconstruction* rec);
Status WriteReconstructionPly(const std::string& path, const Reconstruction& rec);
Status WriteReconstructionOverviewSvg(const std::string& path, const Reconstruction& rec);

}  // namespace tiepoint
