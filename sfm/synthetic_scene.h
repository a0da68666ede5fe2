// A synthetic scene that tiepoint renders itself: photos with known cameras, so that
// `tiepoint reconstruct` can be shown and tested photos-to-model without outside data.
//
// The scene (world frame, metres-like units, +z up): a square ground plane z = 0 of half
// side 7, ten boxes standing on it (0.6 to 1.6 wide, 0.8 to 3.2 tall, each turned about
// the vertical) and three spheres resting on it, all within 4 units of the origin. Every
// surface carries its own deterministic procedural texture: multi-octave value noise,
// sharp-edged patches and ellipses of random size, shape and brightness, in two colours
// of its own. The texture is a function of the point on the surface (2D coordinates in
// the plane of a face, 3D for a sphere), so a surface point looks the same from every
// view; it has no period, so a feature is not repeated elsewhere. Lighting is Lambertian
// from a fixed sun with an ambient term and cast shadows (view-independent, so shadow
// edges are scene points too); rays that miss are a smooth sky.
//
// The cameras: pinhole, no distortion, focal f = focal_factor * max(width, height) in
// pixels for both axes, principal point at the image centre ((width - 1) / 2,
// (height - 1) / 2). They stand on a ring around the vertical axis (radius ~6.3, height
// ~6.9 to 7.9 varying along the ring: about 50 degrees above the horizon as seen from the
// middle), evenly spaced over `arc_degrees`, each looking at a point near (0, 0, 0.5) with
// the image x axis horizontal.
//
// Conventions (the project's, see io/image.h and io/middlebury.h): the pose is
// cam_from_world, a world point X projects to x = K [R | t] X; pixel (0, 0) is the centre of
// the top-left pixel, x right, y down. A pixel's value is the mean of
// supersampling^2 rays through a regular grid inside the pixel's square.
//
// Rendering is deterministic for a seed: the same options give the same bytes, whatever
// the thread count. The layout (boxes, spheres, colours, camera jitter) and the textures
// come from the seed.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/base/status.h"
#include "io/image.h"
#include "io/middlebury.h"

namespace tiepoint {

struct SyntheticSceneOptions {
  // Number of views (cameras), >= 2.
  int num_views = 12;
  // Image size in pixels, 16..8192 each.
  int width = 800;
  int height = 600;
  // Focal length in pixels as a multiple of max(width, height), in [0.5, 5]. 1.1 gives a
  // horizontal field of view of 49 degrees at 4:3.
  double focal_factor = 1.1;
  // The cameras spread evenly over this arc of the ring, in degrees, in (0, 360]; 360
  // closes the ring (neighbouring views 360 / num_views apart).
  double arc_degrees = 360.0;
  // Rays per pixel along each axis (supersampling^2 rays a pixel), 1..8.
  int supersampling = 2;
  // Image contrast in (0, 1]: a pixel's value v (in [0, 1]) is written as 0.5 + contrast
  // (v - 0.5), before rounding to 8 bits. Below 1, a flat-lit, low-contrast object, as the
  // Middlebury dino, on which SIFT at its default threshold finds few features.
  double contrast = 1.0;
  // Seed of the layout and the textures.
  uint64_t seed = 1;
  // Worker threads for rendering (0 = OpenMP's default).
  int num_threads = 0;

  // kInvalidOptions naming the field when an option is out of range.
  Status Check() const;
};

// Where a ray meets the scene.
struct SyntheticHit {
  std::array<double, 3> point_in_world{};
  std::array<double, 3> normal{};  // unit, facing the ray's origin side
  double distance = 0;             // along the unit ray direction
  int surface = -1;                // 0 ground, then box faces, then spheres
};

class SyntheticScene {
 public:
  // Builds the layout and the cameras from validated options (Check() is called).
  static Status Create(const SyntheticSceneOptions& options,
                       std::unique_ptr<SyntheticScene>* scene);

  const SyntheticSceneOptions& options() const { return options_; }
  int num_views() const { return static_cast<int>(cameras_.size()); }
  // The ground truth: per view the image name ("view_000.png", ...), K, R, t
  // (cam_from_world; see the conventions above).
  const std::vector<MiddleburyCamera>& cameras() const { return cameras_; }

  // Renders view `view` (0-based) as an 8-bit RGB image of options().width x height.
  // Threads over rows with OpenMP. kInvalidOptions for a view out of range.
  Status Render(int view, Image8* image) const;

  // Casts the ray of camera `view` through image point (x, y) (pixel units, the
  // convention above) and returns whether it meets the scene (false: sky), with the
  // nearest hit in *hit. The renderer casts exactly these rays.
  bool CastRay(int view, double x, double y, SyntheticHit* hit) const;

  // The colour (RGB in [0, 1]) that the ray of camera `view` through (x, y) sees, before
  // the pixel's mean and the rounding to 8 bits; Render's pixel (x, y) is the mean of this
  // at x - 0.5 + (i + 0.5) / n, y - 0.5 + (j + 0.5) / n for i, j in 0..n-1, n the
  // supersampling. Black for a view out of range.
  std::array<float, 3> RayColour(int view, double x, double y) const;

  // Projects a world point with camera `view`: false when it is not in front of the camera.
  bool Project(int view, const std::array<double, 3>& point_in_world, double* x, double* y) const;

  // For tests: the number of boxes and spheres placed.
  int num_boxes() const { return static_cast<int>(boxes_.size()); }
  int num_spheres() const { return static_cast<int>(spheres_.size()); }

  struct Box {
    std::array<double, 3> centre{};     // world; the box stands on z = 0
    std::array<double, 3> half_size{};  // along its own axes
    double cos_yaw = 1, sin_yaw = 0;    // its x axis is (cos, sin, 0) in the world
    std::array<std::array<float, 3>, 6> colour_a{}, colour_b{};  // per face
  };
  struct Sphere {
    std::array<double, 3> centre{};
    double radius = 1;
    std::array<float, 3> colour_a{}, colour_b{};
  };

 private:
  SyntheticScene() = default;
  bool Intersect(const std::array<double, 3>& origin, const std::array<double, 3>& dir,
                 SyntheticHit* hit, double* u, double* v) const;
  bool Occluded(const std::array<double, 3>& origin, const std::array<double, 3>& dir) const;
  std::array<float, 3> Shade(const std::array<double, 3>& origin,
                             const std::array<double, 3>& dir) const;
  void PixelRay(int view, double x, double y, std::array<double, 3>* origin,
                std::array<double, 3>* dir) const;

  SyntheticSceneOptions options_;
  std::vector<MiddleburyCamera> cameras_;
  std::vector<Box> boxes_;
  std::vector<Sphere> spheres_;
  std::array<float, 3> ground_a_{}, ground_b_{};
  std::array<double, 3> sun_{};  // unit, towards the sun
  uint32_t texture_seed_ = 0;
};

}  // namespace tiepoint
