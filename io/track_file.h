// The tracks file of `tiepoint track`: '#' comment lines, then one observation per line,
//   track_id frame x y
// track_id an integer >= 0, frame the index of the image in the sequence (from 0), x, y in
// pixels with (0, 0) the centre of the top-left pixel, x right, y down. A track holds at
// most one observation per frame.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "io/base/status.h"

namespace tiepoint {

struct TrackObservation {
  int64_t track_id = 0;
  int frame = 0;
  double x = 0, y = 0;
};

// Errors (kInvalidInput) name the file and line: a line without exactly four numbers, a
// negative id or frame, a frame above 10^7, a non-finite coordinate, a track seen twice in
// one frame. kIoError when the file cannot be opened.
Status ReadTrackFile(const std::string& path, std::vector<TrackObservation>* observations);
Status ReadTrackFile(std::istream& in, const std::string& name,
                     std::vector<TrackObservation>* observations);

}  // namespace tiepoint
