// PLY export of a scene for MeshLab and CloudCompare.
//
// Binary little-endian PLY with one vertex element: the 3D points (grey) followed by
// the camera centres C = -R^T t (red), each vertex as float x y z, uchar r g b.
// Written through a temporary file renamed into place on success.
#pragma once

#include <string>

#include "io/base/status.h"
#include "io/scene.h"

namespace tiepoint {

Status WritePly(const std::string& path, const Scene& scene);

}  // namespace tiepoint
