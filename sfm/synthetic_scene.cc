#include "sfm/synthetic_scene.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace tiepoint {
namespace {

using Vec3 = std::array<double, 3>;
using Rgb = std::array<float, 3>;

constexpr double kPi = 3.14159265358979323846;
constexpr double kGroundHalfSide = 7.0;
constexpr int kNumBoxes = 10;
constexpr int kNumSpheres = 3;
// Offset of a shadow ray's origin from the surface, against self-intersection.
constexpr double kShadowEpsilon = 1e-6;

Vec3 Sub(const Vec3& a, const Vec3& b) { return {a[0] - b[0], a[1] - b[1], a[2] - b[2]}; }
double Dot(const Vec3& a, const Vec3& b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
Vec3 Cross(const Vec3& a, const Vec3& b) {
  return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}
Vec3 Normalized(const Vec3& a) {
  const double n = std::sqrt(Dot(a, a));
  return {a[0] / n, a[1] / n, a[2] / n};
}

// The layout's random numbers: splitmix64, whose output is the same on every platform
// (std:: distributions are not).
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi).
  double Uniform(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0);
  }

 private:
  uint64_t state_;
};

// ---------------------------------------------------------------------------------------
// Procedural texture. Lattice values come from an integer hash of the cell and a key
// (the surface and the layer), so there is no table and no period.

inline uint32_t Mix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

inline uint32_t Hash(int32_t x, int32_t y, int32_t z, uint32_t key) {
  return Mix32(static_cast<uint32_t>(x) * 0x8da6b343u + static_cast<uint32_t>(y) * 0xd8163841u +
               static_cast<uint32_t>(z) * 0xcb1ab31fu + Mix32(key));
}

inline float Unit(uint32_t h) { return static_cast<float>(h >> 8) * (1.0f / 16777216.0f); }

// floor() for the texture's coordinates (well inside the int range): the same value as
// std::floor, which without SSE4.1 in the build flags is a call into libm.
inline float Floor(float a) {
  const float t = static_cast<float>(static_cast<int32_t>(a));
  return t > a ? t - 1.0f : t;
}

inline float Smooth(float a) { return a * a * (3.0f - 2.0f * a); }
inline float Lerp(float a, float b, float s) { return a + (b - a) * s; }

// Value noise in [0, 1]: hashed lattice values, smoothly interpolated.
float Noise2(float u, float v, uint32_t key) {
  const float fu = Floor(u), fv = Floor(v);
  const auto iu = static_cast<int32_t>(fu), iv = static_cast<int32_t>(fv);
  const float a = Smooth(u - fu), b = Smooth(v - fv);
  const float h00 = Unit(Hash(iu, iv, 0, key)), h10 = Unit(Hash(iu + 1, iv, 0, key));
  const float h01 = Unit(Hash(iu, iv + 1, 0, key)), h11 = Unit(Hash(iu + 1, iv + 1, 0, key));
  return Lerp(Lerp(h00, h10, a), Lerp(h01, h11, a), b);
}

float Noise3(float u, float v, float w, uint32_t key) {
  const float fu = Floor(u), fv = Floor(v), fw = Floor(w);
  const auto iu = static_cast<int32_t>(fu), iv = static_cast<int32_t>(fv),
             iw = static_cast<int32_t>(fw);
  const float a = Smooth(u - fu), b = Smooth(v - fv), c = Smooth(w - fw);
  float layer[2];
  for (int k = 0; k < 2; ++k) {
    const float h00 = Unit(Hash(iu, iv, iw + k, key)), h10 = Unit(Hash(iu + 1, iv, iw + k, key));
    const float h01 = Unit(Hash(iu, iv + 1, iw + k, key));
    const float h11 = Unit(Hash(iu + 1, iv + 1, iw + k, key));
    layer[k] = Lerp(Lerp(h00, h10, a), Lerp(h01, h11, a), b);
  }
  return Lerp(layer[0], layer[1], c);
}

// Octaves of the fractal noise: frequency (cycles per scene unit), weight, and a rotation
// of the domain per octave so that the lattices of the octaves do not line up. The finest
// octave has a period of about 5.5 pixels at the middle of the scene with the default
// camera (about 94 pixels a unit), which 2 x 2 supersampling renders without aliasing.
// Weights nearly flat over the octaves (fine detail as strong as coarse) gave SIFT more
// distinctive descriptors: 323 and 405 verified inliers between 30-degree neighbours
// against 298 and 375 with weights falling as 0.7^k.
struct Octave {
  float frequency, weight, cos_a, sin_a;
};
constexpr int kNumOctaves = 4;
const Octave kOctaves[kNumOctaves] = {
    {1.7f, 0.29f, 0.8660f, 0.5000f},
    {3.9f, 0.26f, 0.2588f, 0.9659f},
    {8.3f, 0.24f, -0.6428f, 0.7660f},
    {17.0f, 0.21f, -0.9397f, -0.3420f},
};

// Ellipses (balls on a sphere) of random size, shape and brightness, one at most per
// cell, held inside their cell so that a point needs only its own cell.
struct BlobLayer {
  float cell;        // cell side, scene units
  float min_radius;  // radius range as fractions of the cell
  float max_radius;
  uint32_t salt;
};
const BlobLayer kBlobLayers[2] = {{0.62f, 0.14f, 0.42f, 0x51a3u}, {0.23f, 0.16f, 0.44f, 0x7c15u}};

// Texture at a point: brightness in [0, 1] and which of the surface's two colours.
struct TextureSample {
  float brightness;
  float colour_b;  // 0: colour a, 1: colour b
};

// Combines the layers; `fbm` in about [0, 1], `patch` the sharp-edged field in [0, 1],
// blob brightness < 0 when no blob covers the point.
TextureSample Combine(float fbm, float patch, float blob) {
  float t = std::min(1.0f, std::max(0.0f, 0.5f + 2.3f * (fbm - 0.5f)));
  TextureSample s{0.12f + 0.88f * t, 0.0f};
  if (patch > 0.6f) {
    s.brightness *= 0.5f;
    s.colour_b = 1.0f;
  }
  if (blob >= 0.0f) s.brightness = blob;
  return s;
}

TextureSample Texture2(float u, float v, uint32_t key) {
  float fbm = 0.0f;
  for (int k = 0; k < kNumOctaves; ++k) {
    const Octave& o = kOctaves[k];
    const float ru = (o.cos_a * u - o.sin_a * v) * o.frequency;
    const float rv = (o.sin_a * u + o.cos_a * v) * o.frequency;
    fbm += o.weight * Noise2(ru, rv, key * 16u + k);
  }
  const float patch = 0.7f * Noise2(0.93f * u + 0.37f * v, -0.37f * u + 0.93f * v, key * 16u + 8u) +
                      0.3f * Noise2(2.9f * u, 2.9f * v, key * 16u + 9u);
  float blob = -1.0f;
  for (const BlobLayer& layer : kBlobLayers) {
    const float cu = Floor(u / layer.cell), cv = Floor(v / layer.cell);
    const uint32_t h = Hash(static_cast<int32_t>(cu), static_cast<int32_t>(cv), 0, key * 16u + layer.salt);
    if ((h & 3u) == 0u) continue;  // a quarter of the cells hold no disc
    const uint32_t h2 = Mix32(h);
    const float r = layer.cell * Lerp(layer.min_radius, layer.max_radius, Unit(h2));
    const float free = layer.cell - 2.0f * r;
    const float px = cu * layer.cell + r + free * Unit(Mix32(h2 + 1u));
    const float py = cv * layer.cell + r + free * Unit(Mix32(h2 + 2u));
    // An ellipse of axes r and r / aspect, turned by a random angle.
    const float du = u - px, dv = v - py;
    if (du * du + dv * dv >= r * r) continue;  // outside the ellipse's circumcircle
    float ca = Unit(Mix32(h2 + 5u)) - 0.5f, sa = Unit(Mix32(h2 + 7u)) - 0.5f;
    const float norm = 1.0f / std::sqrt(ca * ca + sa * sa + 1e-12f);
    ca *= norm;
    sa *= norm;
    const float aspect = 1.0f + 1.5f * Unit(Mix32(h2 + 6u));
    const float e1 = ca * du + sa * dv, e2 = (-sa * du + ca * dv) * aspect;
    if (e1 * e1 + e2 * e2 < r * r) {
      blob = (h & 4u) ? 0.95f - 0.4f * Unit(Mix32(h2 + 3u)) : 0.03f + 0.4f * Unit(Mix32(h2 + 3u));
    }
  }
  return Combine(fbm, patch, blob);
}

TextureSample Texture3(float u, float v, float w, uint32_t key) {
  float fbm = 0.0f;
  for (int k = 0; k < kNumOctaves; ++k) {
    const Octave& o = kOctaves[k];
    const float ru = (o.cos_a * u - o.sin_a * v) * o.frequency;
    const float rv = (o.sin_a * u + o.cos_a * v) * o.frequency;
    fbm += o.weight * Noise3(ru, rv, w * o.frequency, key * 16u + k);
  }
  const float patch = 0.7f * Noise3(0.93f * u + 0.37f * v, -0.37f * u + 0.93f * v, w, key * 16u + 8u) +
                      0.3f * Noise3(2.9f * u, 2.9f * v, 2.9f * w, key * 16u + 9u);
  float blob = -1.0f;
  for (const BlobLayer& layer : kBlobLayers) {
    const float cu = Floor(u / layer.cell), cv = Floor(v / layer.cell),
                cw = Floor(w / layer.cell);
    const uint32_t h = Hash(static_cast<int32_t>(cu), static_cast<int32_t>(cv),
                            static_cast<int32_t>(cw), key * 16u + layer.salt);
    if ((h & 3u) == 0u) continue;
    const uint32_t h2 = Mix32(h);
    const float r = layer.cell * Lerp(layer.min_radius, layer.max_radius, Unit(h2));
    const float free = layer.cell - 2.0f * r;
    const float px = cu * layer.cell + r + free * Unit(Mix32(h2 + 1u));
    const float py = cv * layer.cell + r + free * Unit(Mix32(h2 + 2u));
    const float pz = cw * layer.cell + r + free * Unit(Mix32(h2 + 4u));
    const float du = u - px, dv = v - py, dw = w - pz;
    if (du * du + dv * dv + dw * dw < r * r) {
      blob = (h & 4u) ? 0.92f - 0.2f * Unit(Mix32(h2 + 3u)) : 0.04f + 0.2f * Unit(Mix32(h2 + 3u));
    }
  }
  return Combine(fbm, patch, blob);
}

Rgb RandomColour(SplitMix* rng) {
  // Saturated but not dark: one channel high, the others anywhere above 0.25.
  Rgb c{static_cast<float>(rng->Uniform(0.45, 1.0)), static_cast<float>(rng->Uniform(0.45, 1.0)),
        static_cast<float>(rng->Uniform(0.45, 1.0))};
  const float m = std::max(c[0], std::max(c[1], c[2]));
  for (float& x : c) x /= m;
  return c;
}

}  // namespace

Status SyntheticSceneOptions::Check() const {
  const auto bad = [](const std::string& m) {
    return Status::InvalidOptions("synthetic scene: " + m);
  };
  if (num_views < 2 || num_views > 10000) {
    return bad("num_views " + std::to_string(num_views) + " is outside 2..10000");
  }
  if (width < 16 || width > 8192 || height < 16 || height > 8192) {
    return bad("image size " + std::to_string(width) + " x " + std::to_string(height) +
               " is outside 16..8192 a side");
  }
  if (!(focal_factor >= 0.5 && focal_factor <= 5.0)) {
    return bad("focal_factor " + std::to_string(focal_factor) + " is outside [0.5, 5]");
  }
  if (!(arc_degrees > 0.0 && arc_degrees <= 360.0)) {
    return bad("arc_degrees " + std::to_string(arc_degrees) + " is outside (0, 360]");
  }
  if (supersampling < 1 || supersampling > 8) {
    return bad("supersampling " + std::to_string(supersampling) + " is outside 1..8");
  }
  if (!(contrast > 0.0 && contrast <= 1.0)) return bad("contrast " + std::to_string(contrast) + " is outside (0, 1]");
  if (num_threads < 0) return bad("num_threads " + std::to_string(num_threads) + " is negative");
  return Status::Ok();
}

Status SyntheticScene::Create(const SyntheticSceneOptions& options,
                              std::unique_ptr<SyntheticScene>* scene) {
  TIEPOINT_RETURN_IF_ERROR(options.Check());
  std::unique_ptr<SyntheticScene> s(new SyntheticScene());
  s->options_ = options;
  SplitMix rng(options.seed * 0x2545f4914f6cdd1dULL + 0x1234567ULL);
  s->texture_seed_ = static_cast<uint32_t>(rng.Next());
  s->ground_a_ = RandomColour(&rng);
  s->ground_b_ = RandomColour(&rng);

  // Boxes and spheres on the ground, footprints apart by at least 0.3 units.
  struct Footprint {
    double x, y, r;
  };
  std::vector<Footprint> taken;
  const auto free_at = [&taken](double x, double y, double r) {
    for (const Footprint& f : taken) {
      if (std::hypot(x - f.x, y - f.y) < r + f.r + 0.25) return false;
    }
    return true;
  };
  for (int attempt = 0; attempt < 5000 && static_cast<int>(s->boxes_.size()) < kNumBoxes; ++attempt) {
    Box b;
    b.half_size = {rng.Uniform(0.3, 0.8), rng.Uniform(0.3, 0.8), rng.Uniform(0.4, 1.6)};
    const double yaw = rng.Uniform(0.0, 2.0 * kPi);
    const double radius = rng.Uniform(0.0, 3.4), angle = rng.Uniform(0.0, 2.0 * kPi);
    b.centre = {radius * std::cos(angle), radius * std::sin(angle), b.half_size[2]};
    const double footprint = std::hypot(b.half_size[0], b.half_size[1]);
    if (radius + footprint > 4.0 || !free_at(b.centre[0], b.centre[1], footprint)) continue;
    b.cos_yaw = std::cos(yaw);
    b.sin_yaw = std::sin(yaw);
    for (int f = 0; f < 6; ++f) {
      b.colour_a[f] = RandomColour(&rng);
      b.colour_b[f] = RandomColour(&rng);
    }
    taken.push_back({b.centre[0], b.centre[1], footprint});
    s->boxes_.push_back(b);
  }
  for (int attempt = 0; attempt < 5000 && static_cast<int>(s->spheres_.size()) < kNumSpheres;
       ++attempt) {
    Sphere sp;
    sp.radius = rng.Uniform(0.35, 0.75);
    const double radius = rng.Uniform(0.5, 3.6), angle = rng.Uniform(0.0, 2.0 * kPi);
    sp.centre = {radius * std::cos(angle), radius * std::sin(angle), sp.radius};
    if (radius + sp.radius > 4.0 || !free_at(sp.centre[0], sp.centre[1], sp.radius)) continue;
    sp.colour_a = RandomColour(&rng);
    sp.colour_b = RandomColour(&rng);
    taken.push_back({sp.centre[0], sp.centre[1], sp.radius});
    s->spheres_.push_back(sp);
  }
  const double sun_azimuth = rng.Uniform(0.0, 2.0 * kPi);
  s->sun_ = Normalized({0.55 * std::cos(sun_azimuth), 0.55 * std::sin(sun_azimuth), 0.84});

  // Cameras on the ring.
  const int n = options.num_views;
  const double f = options.focal_factor * std::max(options.width, options.height);
  const double cx = 0.5 * (options.width - 1), cy = 0.5 * (options.height - 1);
  const double start = rng.Uniform(0.0, 2.0 * kPi);
  const double arc = options.arc_degrees * kPi / 180.0;
  const double step = options.arc_degrees >= 360.0 ? arc / n : arc / (n - 1);
  const double height_phase = rng.Uniform(0.0, 2.0 * kPi);
  // The ring's elevation decides how well SIFT matches the ground and the box tops
  // between neighbours, whose foreshortening turns with the view: between views 30 degrees
  // apart, 42 and 57 verified inliers (`tiepoint match --verify fundamental`) at 27 degrees
  // above the horizon, 298 and 375 at 41 degrees, 664 and 763 at 50 degrees (six boxes).
  // Ten taller boxes keep the scene far from planar at that height: the homography's
  // inliers are a median 0.41 to 0.63 of the fundamental matrix's over three seeds (0.7 to
  // 0.85 with six low boxes, which COLMAP would call planar), with 207 to 319 inliers at
  // least between neighbours of the default 12-view ring.
  for (int i = 0; i < n; ++i) {
    const double angle = start + step * i;
    const double ring = 6.3 + rng.Uniform(-0.25, 0.25);
    const double height = 7.4 + 0.5 * std::sin(2.0 * angle + height_phase) + rng.Uniform(-0.1, 0.1);
    const Vec3 centre{ring * std::cos(angle), ring * std::sin(angle), height};
    const Vec3 target{rng.Uniform(-0.25, 0.25), rng.Uniform(-0.25, 0.25), 0.5 + rng.Uniform(-0.15, 0.15)};
    // Camera axes in the world: z forward, x right (horizontal), y down.
    const Vec3 z = Normalized(Sub(target, centre));
    const Vec3 x = Normalized(Cross(z, {0.0, 0.0, 1.0}));
    const Vec3 y = Cross(z, x);
    MiddleburyCamera c;
    char name[32];
    std::snprintf(name, sizeof(name), "view_%03d.png", i);
    c.name = name;
    c.K = {f, 0.0, cx, 0.0, f, cy, 0.0, 0.0, 1.0};
    c.R = {x[0], x[1], x[2], y[0], y[1], y[2], z[0], z[1], z[2]};
    c.t = {-Dot(x, centre), -Dot(y, centre), -Dot(z, centre)};
    s->cameras_.push_back(c);
  }
  *scene = std::move(s);
  return Status::Ok();
}

void SyntheticScene::PixelRay(int view, double x, double y, Vec3* origin, Vec3* dir) const {
  const MiddleburyCamera& c = cameras_[view];
  // Direction in the camera: K^-1 (x, y, 1) for K = [f 0 cx; 0 f cy; 0 0 1] (any K of
  // that shape: fx, fy, skew-free); in the world: R^T of it; origin the centre -R^T t.
  const double fx = c.K[0], fy = c.K[4], cx = c.K[2], cy = c.K[5];
  const Vec3 d_cam{(x - cx) / fx, (y - cy) / fy, 1.0};
  Vec3 d{}, o{};
  for (int i = 0; i < 3; ++i) {
    d[i] = c.R[i] * d_cam[0] + c.R[3 + i] * d_cam[1] + c.R[6 + i] * d_cam[2];
    o[i] = -(c.R[i] * c.t[0] + c.R[3 + i] * c.t[1] + c.R[6 + i] * c.t[2]);
  }
  *origin = o;
  *dir = Normalized(d);
}

bool SyntheticScene::Intersect(const Vec3& o, const Vec3& d, SyntheticHit* hit, double* u,
                               double* v) const {
  double best = INFINITY;
  // Ground square.
  if (d[2] < 0.0 && o[2] > 0.0) {
    const double t = -o[2] / d[2];
    const double px = o[0] + t * d[0], py = o[1] + t * d[1];
    if (std::abs(px) <= kGroundHalfSide && std::abs(py) <= kGroundHalfSide) {
      best = t;
      hit->surface = 0;
      hit->normal = {0.0, 0.0, 1.0};
      *u = px;
      *v = py;
    }
  }
  // Boxes, by the slab method in each box's own frame.
  for (size_t b = 0; b < boxes_.size(); ++b) {
    const Box& box = boxes_[b];
    const Vec3 rel = Sub(o, box.centre);
    {
      // Most rays miss most boxes: first the box's bounding sphere (d is unit length).
      const double r2 = box.half_size[0] * box.half_size[0] + box.half_size[1] * box.half_size[1] +
                        box.half_size[2] * box.half_size[2];
      const double along = Dot(rel, d), c = Dot(rel, rel) - r2;
      if (c > 0.0 && (along > 0.0 || along * along < c)) continue;
    }
    const Vec3 lo{box.cos_yaw * rel[0] + box.sin_yaw * rel[1], -box.sin_yaw * rel[0] + box.cos_yaw * rel[1],
                  rel[2]};
    const Vec3 ld{box.cos_yaw * d[0] + box.sin_yaw * d[1], -box.sin_yaw * d[0] + box.cos_yaw * d[1], d[2]};
    double t_near = -INFINITY, t_far = INFINITY;
    int axis_near = -1;
    bool miss = false;
    for (int a = 0; a < 3; ++a) {
      const double h = box.half_size[a];
      if (std::abs(ld[a]) < 1e-300) {
        if (std::abs(lo[a]) > h) miss = true;
        continue;
      }
      double t1 = (-h - lo[a]) / ld[a], t2 = (h - lo[a]) / ld[a];
      if (t1 > t2) std::swap(t1, t2);
      if (t1 > t_near) {
        t_near = t1;
        axis_near = a;
      }
      t_far = std::min(t_far, t2);
    }
    if (miss || axis_near < 0 || t_near > t_far || t_near <= 0.0 || t_near >= best) continue;
    best = t_near;
    const int a = axis_near;
    const double sign = ld[a] > 0.0 ? -1.0 : 1.0;  // the face the ray enters through
    hit->surface = 1 + 6 * static_cast<int>(b) + 2 * a + (sign > 0.0 ? 1 : 0);
    Vec3 ln{0.0, 0.0, 0.0};
    ln[a] = sign;
    hit->normal = {box.cos_yaw * ln[0] - box.sin_yaw * ln[1], box.sin_yaw * ln[0] + box.cos_yaw * ln[1],
                   ln[2]};
    const int a1 = (a + 1) % 3, a2 = (a + 2) % 3;
    *u = lo[a1] + t_near * ld[a1];
    *v = lo[a2] + t_near * ld[a2];
  }
  // Spheres.
  for (size_t k = 0; k < spheres_.size(); ++k) {
    const Sphere& sp = spheres_[k];
    const Vec3 rel = Sub(o, sp.centre);
    const double b = Dot(rel, d), c = Dot(rel, rel) - sp.radius * sp.radius;
    const double disc = b * b - c;
    if (disc < 0.0) continue;
    const double t = -b - std::sqrt(disc);
    if (t <= 0.0 || t >= best) continue;
    best = t;
    hit->surface = 1 + 6 * static_cast<int>(boxes_.size()) + static_cast<int>(k);
    const Vec3 p{o[0] + t * d[0], o[1] + t * d[1], o[2] + t * d[2]};
    hit->normal = Normalized(Sub(p, sp.centre));
  }
  if (!std::isfinite(best)) return false;
  hit->distance = best;
  hit->point_in_world = {o[0] + best * d[0], o[1] + best * d[1], o[2] + best * d[2]};
  return true;
}

bool SyntheticScene::Occluded(const Vec3& o, const Vec3& d) const {
  SyntheticHit hit;
  double u, v;
  // The ground casts no shadow on anything above it, so any hit is a box or a sphere.
  return Intersect(o, d, &hit, &u, &v) && hit.surface != 0;
}

std::array<float, 3> SyntheticScene::Shade(const Vec3& o, const Vec3& d) const {
  SyntheticHit hit;
  double u = 0, v = 0;
  if (!Intersect(o, d, &hit, &u, &v)) {
    // Sky: a smooth gradient, featureless.
    const float up = static_cast<float>(std::max(0.0, d[2]));
    return {0.72f - 0.25f * up, 0.80f - 0.15f * up, 0.93f};
  }
  const uint32_t key = texture_seed_ + 977u * static_cast<uint32_t>(hit.surface);
  TextureSample tex;
  Rgb a, b;
  const int num_box_faces = 6 * static_cast<int>(boxes_.size());
  if (hit.surface == 0) {
    tex = Texture2(static_cast<float>(u), static_cast<float>(v), key);
    a = ground_a_;
    b = ground_b_;
  } else if (hit.surface <= num_box_faces) {
    const Box& box = boxes_[(hit.surface - 1) / 6];
    const int face = (hit.surface - 1) % 6;
    tex = Texture2(static_cast<float>(u), static_cast<float>(v), key);
    a = box.colour_a[face];
    b = box.colour_b[face];
  } else {
    const Sphere& sp = spheres_[hit.surface - 1 - num_box_faces];
    const Vec3 rel = Sub(hit.point_in_world, sp.centre);
    tex = Texture3(static_cast<float>(rel[0]), static_cast<float>(rel[1]), static_cast<float>(rel[2]), key);
    a = sp.colour_a;
    b = sp.colour_b;
  }
  double light = Dot(hit.normal, sun_);
  if (light > 0.0) {
    const Vec3& p = hit.point_in_world;
    const Vec3 start{p[0] + kShadowEpsilon * hit.normal[0], p[1] + kShadowEpsilon * hit.normal[1],
                     p[2] + kShadowEpsilon * hit.normal[2]};
    if (Occluded(start, sun_)) light = 0.0;
  } else {
    light = 0.0;
  }
  const float shade = 0.5f + 0.5f * static_cast<float>(light);
  Rgb out;
  for (int c = 0; c < 3; ++c) out[c] = Lerp(a[c], b[c], tex.colour_b) * tex.brightness * shade;
  return out;
}

bool SyntheticScene::CastRay(int view, double x, double y, SyntheticHit* hit) const {
  if (view < 0 || view >= num_views()) return false;
  Vec3 o, d;
  PixelRay(view, x, y, &o, &d);
  double u, v;
  return Intersect(o, d, hit, &u, &v);
}

std::array<float, 3> SyntheticScene::RayColour(int view, double x, double y) const {
  if (view < 0 || view >= num_views()) return {0.0f, 0.0f, 0.0f};
  Vec3 o, d;
  PixelRay(view, x, y, &o, &d);
  return Shade(o, d);
}

bool SyntheticScene::Project(int view, const Vec3& X, double* x, double* y) const {
  if (view < 0 || view >= num_views()) return false;
  const MiddleburyCamera& c = cameras_[view];
  double p[3];
  for (int i = 0; i < 3; ++i) p[i] = c.R[3 * i] * X[0] + c.R[3 * i + 1] * X[1] + c.R[3 * i + 2] * X[2] + c.t[i];
  if (p[2] <= 0.0) return false;
  *x = (c.K[0] * p[0] + c.K[1] * p[1] + c.K[2] * p[2]) / p[2];
  *y = (c.K[3] * p[0] + c.K[4] * p[1] + c.K[5] * p[2]) / p[2];
  return true;
}

Status SyntheticScene::Render(int view, Image8* image) const {
  if (view < 0 || view >= num_views()) {
    return Status::InvalidOptions("synthetic scene: view " + std::to_string(view) + " is outside 0.." +
                                  std::to_string(num_views() - 1));
  }
  const int w = options_.width, h = options_.height, n = options_.supersampling;
  Image8 out;
  out.width = w;
  out.height = h;
  out.channels = 3;
  out.pixels.resize(static_cast<size_t>(w) * h * 3);
  const int threads = options_.num_threads > 0 ? options_.num_threads : omp_get_max_threads();
  const float inv = 1.0f / static_cast<float>(n * n);
  const float contrast = static_cast<float>(options_.contrast);
#pragma omp parallel for schedule(dynamic, 4) num_threads(threads)
  for (int y = 0; y < h; ++y) {
    unsigned char* row = &out.pixels[static_cast<size_t>(y) * w * 3];
    for (int x = 0; x < w; ++x) {
      float sum[3] = {0.0f, 0.0f, 0.0f};
      for (int sy = 0; sy < n; ++sy) {
        for (int sx = 0; sx < n; ++sx) {
          // Sample points on a regular grid inside the pixel's square [x - 0.5, x + 0.5].
          const double px = x - 0.5 + (sx + 0.5) / n, py = y - 0.5 + (sy + 0.5) / n;
          Vec3 o, d;
          PixelRay(view, px, py, &o, &d);
          const Rgb c = Shade(o, d);
          for (int k = 0; k < 3; ++k) sum[k] += c[k];
        }
      }
      for (int k = 0; k < 3; ++k) {
        float v = std::min(1.0f, std::max(0.0f, sum[k] * inv));
        if (contrast != 1.0f) v = 0.5f + contrast * (v - 0.5f);
        row[3 * x + k] = static_cast<unsigned char>(v * 255.0f + 0.5f);
      }
    }
  }
  *image = std::move(out);
  return Status::Ok();
}

}  // namespace tiepoint
