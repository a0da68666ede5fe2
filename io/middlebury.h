// Ground truth of the Middlebury multi-view rings (templeSparseRing, dinoSparseRing, ...):
// the cameras of a *_par.txt file, and which views are neighbours on the ring.
#pragma once

#include <array>
#include <istream>
#include <string>
#include <utility>
#include <vector>

#include "io/base/status.h"

namespace tiepoint {

// One view: x = K [R | t] X, R and t cam_from_world; matrices row-major.
struct MiddleburyCamera {
  std::string name;  // the image's file name
  std::array<double, 9> K{}, R{};
  std::array<double, 3> t{};
  // The camera centre in the world, -R^T t.
  std::array<double, 3> Centre() const;
};

// Reads "*_par.txt": the view count, then per view "name k11..k33 r11..r33 t1 t2 t3".
// Errors name the file and line: a count that is not a positive integer, fewer views than
// the count, a line without 21 numbers after the name, a number that is not finite.
Status ReadMiddleburyCameras(const std::string& path, std::vector<MiddleburyCamera>* cameras);
// The same from a stream; `name` stands in for the path in messages.
Status ReadMiddleburyCameras(std::istream& in, const std::string& name,
                             std::vector<MiddleburyCamera>* cameras);

// Writes cameras in the same format, readable by ReadMiddleburyCameras: the count, then a
// line per camera, numbers with 17 significant digits (a double reads back exactly).
// Through a temporary file renamed into place. Errors: a name that is empty or holds
// white space, a number that is not finite (kInvalidInput); an unwritable path (kIoError).
Status WriteMiddleburyCameras(const std::string& path,
                              const std::vector<MiddleburyCamera>& cameras);

// Neighbouring views: each view with the `k` views whose centres are nearest, each pair
// (i < j, indices into `cameras`) once, sorted. The file order is not the ring order, so
// neighbours come from the centres; views at the same place (no baseline) are not
// neighbours.
std::vector<std::pair<int, int>> MiddleburyNeighbourPairs(const std::vector<MiddleburyCamera>& cameras,
                                                          int k = 2);

}  // namespace tiepoint
