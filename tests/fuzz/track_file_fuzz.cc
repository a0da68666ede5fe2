// The tracks file of `tiepoint track` (track_id frame x y lines): ReadTrackFile on a stream.
// Accepted observations must obey the header's contract.
#include <cmath>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "io/track_file.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tiepoint;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::vector<TrackObservation> observations;
  const Status s = ReadTrackFile(in, "fuzz_tracks.txt", &observations);
  fuzz::CheckFailure(s, "fuzz_tracks.txt");
  if (!s.ok()) return 0;
  TIEPOINT_FUZZ_CHECK(observations.size() <= size / 8 + 1);  // "0 0 0 0\n" is the shortest line
  std::set<std::pair<int64_t, int>> seen;
  for (const TrackObservation& o : observations) {
    TIEPOINT_FUZZ_CHECK(o.track_id >= 0 && o.frame >= 0 && o.frame <= 10000000);
    TIEPOINT_FUZZ_CHECK(std::isfinite(o.x) && std::isfinite(o.y));
    TIEPOINT_FUZZ_CHECK(seen.insert({o.track_id, o.frame}).second);
  }
  return 0;
}
