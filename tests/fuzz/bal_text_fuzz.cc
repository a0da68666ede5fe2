// BAL text: ReadBalFromMemory (size known: header checked against it) and the stream
// reader (size unknown); a scene either accepts must write and read back unchanged.
#include <sstream>
#include <string>

#include "io/bal.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tiepoint;
  const char* text = reinterpret_cast<const char*>(data);
  Scene scene;
  const Status s = ReadBalFromMemory(text, size, "fuzz.txt", &scene);
  fuzz::CheckFailure(s, "fuzz.txt");

  std::istringstream in(std::string(text, size));
  Scene streamed;
  const Status t = ReadBal(in, "stream", &streamed);
  fuzz::CheckFailure(t, "stream");
  // Memory and stream agree on acceptance (they differ only in when a lie is caught).
  TIEPOINT_FUZZ_CHECK(s.ok() == t.ok());
  if (!s.ok()) return 0;

  std::ostringstream out;
  TIEPOINT_FUZZ_CHECK(WriteBal(out, scene).ok());
  const std::string written = out.str();
  Scene back;
  TIEPOINT_FUZZ_CHECK(ReadBalFromMemory(written.data(), written.size(), "back", &back).ok());
  TIEPOINT_FUZZ_CHECK(back.cameras == scene.cameras && back.points == scene.points &&
                      back.obs_camera == scene.obs_camera && back.obs_point == scene.obs_point &&
                      back.obs_xy == scene.obs_xy);
  return 0;
}
