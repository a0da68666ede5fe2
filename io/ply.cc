// PLY export: binary little-endian, one vertex element (points grey, camera centres red).
#include "io/ply.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "io/base/atomic_file.h"

namespace tiepoint {
namespace {

constexpr size_t kVertexBytes = 3 * sizeof(float) + 3;  // x y z as float32, r g b as uint8
constexpr unsigned char kPointGrey = 160;

// Rodrigues' formula: rotation matrix (row-major) of the angle-axis vector w, whose
// direction is the axis and whose norm is the angle in radians.
//   R = cos(a) I + sin(a) [k]x + (1 - cos(a)) k k^T,  k = w / |w|
// For tiny angles the division by |w| is unstable; there R = I + [w]x to first order
// (the error is O(|w|^2), below double precision when |w|^2 < eps).
void AngleAxisToRotationMatrix(const double* w, double R[9]) {
  const double theta2 = w[0] * w[0] + w[1] * w[1] + w[2] * w[2];
  if (theta2 > 1e-16) {
    const double theta = std::sqrt(theta2);
    const double kx = w[0] / theta, ky = w[1] / theta, kz = w[2] / theta;
    const double c = std::cos(theta), s = std::sin(theta), v = 1.0 - c;
    R[0] = c + kx * kx * v;       R[1] = kx * ky * v - kz * s;  R[2] = kx * kz * v + ky * s;
    R[3] = ky * kx * v + kz * s;  R[4] = c + ky * ky * v;       R[5] = ky * kz * v - kx * s;
    R[6] = kz * kx * v - ky * s;  R[7] = kz * ky * v + kx * s;  R[8] = c + kz * kz * v;
  } else {
    R[0] = 1.0;    R[1] = -w[2];  R[2] = w[1];
    R[3] = w[2];   R[4] = 1.0;    R[5] = -w[0];
    R[6] = -w[1];  R[7] = w[0];   R[8] = 1.0;
  }
}

// Camera centre in world coordinates: P = R X + t is zero at X = C = -R^T t.
void CameraCentre(const double* camera, double C[3]) {
  double R[9];
  AngleAxisToRotationMatrix(camera, R);
  const double* t = camera + 3;
  for (int i = 0; i < 3; ++i) {
    C[i] = -(R[0 * 3 + i] * t[0] + R[1 * 3 + i] * t[1] + R[2 * 3 + i] * t[2]);
  }
}

void PutFloatLE(float f, char* out) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  for (int b = 0; b < 4; ++b) out[b] = static_cast<char>((bits >> (8 * b)) & 0xffu);
}

void PutVertex(const double* xyz, unsigned char r, unsigned char g, unsigned char b,
               char* out) {
  for (int i = 0; i < 3; ++i) PutFloatLE(static_cast<float>(xyz[i]), out + 4 * i);
  out[12] = static_cast<char>(r);
  out[13] = static_cast<char>(g);
  out[14] = static_cast<char>(b);
}

}  // namespace

Status WritePly(const std::string& path, const Scene& scene) {
  if (scene.cameras.size() % kCameraParams != 0 || scene.points.size() % kPointParams != 0) {
    return Status::InvalidInput("cannot write PLY " + path + ": scene has " +
                                std::to_string(scene.cameras.size()) + " camera values and " +
                                std::to_string(scene.points.size()) +
                                " point values (expected multiples of 9 and 3)");
  }
  const size_t num_points = static_cast<size_t>(scene.num_points());
  const size_t num_cameras = static_cast<size_t>(scene.num_cameras());
  const size_t num_vertices = num_points + num_cameras;

  AtomicFile file(path);
  TIEPOINT_RETURN_IF_ERROR(file.Open());
  std::ofstream& out = file.stream();
  out << "ply\n"
         "format binary_little_endian 1.0\n"
         "comment tiepoint scene: "
      << num_points << " points (grey), " << num_cameras
      << " camera centres (red)\n"
         "element vertex "
      << num_vertices
      << "\n"
         "property float x\n"
         "property float y\n"
         "property float z\n"
         "property uchar red\n"
         "property uchar green\n"
         "property uchar blue\n"
         "end_header\n";

  // Vertices go out in chunks to keep memory flat for large scenes.
  constexpr size_t kChunkVertices = 1 << 16;
  std::vector<char> buf(kChunkVertices * kVertexBytes);
  size_t used = 0;
  auto flush = [&]() -> Status {
    out.write(buf.data(), static_cast<std::streamsize>(used));
    used = 0;
    if (!out) return Status::IoError(path + ": write failed");
    return Status::Ok();
  };
  for (size_t j = 0; j < num_points; ++j) {
    PutVertex(scene.point(static_cast<int>(j)), kPointGrey, kPointGrey, kPointGrey,
              buf.data() + used);
    used += kVertexBytes;
    if (used == buf.size()) TIEPOINT_RETURN_IF_ERROR(flush());
  }
  for (size_t i = 0; i < num_cameras; ++i) {
    double C[3];
    CameraCentre(scene.camera(static_cast<int>(i)), C);
    PutVertex(C, 255, 0, 0, buf.data() + used);
    used += kVertexBytes;
    if (used == buf.size()) TIEPOINT_RETURN_IF_ERROR(flush());
  }
  TIEPOINT_RETURN_IF_ERROR(flush());
  return file.Commit();
}

}  // namespace tiepoint
