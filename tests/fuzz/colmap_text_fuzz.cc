// COLMAP text model: ReadColmapModelText on three streams cut from one input at its first
// two NUL bytes (cameras.txt NUL images.txt NUL points3D.txt; a missing part is an empty
// file). A model it accepts must pass CheckColmapModel, and write (text and binary) and read
// back to the same bytes.
#include <sstream>
#include <string>

#include "io/colmap_model.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

// Writes `rec` in `format` into three strings.
void Write(const tiepoint::Reconstruction& rec, tiepoint::ColmapFormat format, std::string out[3]) {
  std::ostringstream s[3];
  const tiepoint::Status st =
      format == tiepoint::ColmapFormat::kText
          ? tiepoint::WriteColmapModelText(rec, s[0], s[1], s[2])
          : tiepoint::WriteColmapModelBinary(rec, s[0], s[1], s[2]);
  TIEPOINT_FUZZ_CHECK(st.ok());
  for (int k = 0; k < 3; ++k) out[k] = s[k].str();
}

tiepoint::Status Read(const std::string in[3], tiepoint::ColmapFormat format,
                      tiepoint::Reconstruction* rec) {
  std::istringstream s[3] = {std::istringstream(in[0]), std::istringstream(in[1]),
                             std::istringstream(in[2])};
  return format == tiepoint::ColmapFormat::kText
             ? tiepoint::ReadColmapModelText(s[0], s[1], s[2], "back", rec)
             : tiepoint::ReadColmapModelBinary(s[0], s[1], s[2], "back", rec);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tiepoint;
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::string part[3];
  size_t from = 0;
  for (int k = 0; k < 3 && from <= input.size(); ++k) {
    const size_t nul = k < 2 ? input.find('\0', from) : std::string::npos;
    part[k] = input.substr(from, nul == std::string::npos ? std::string::npos : nul - from);
    from = nul == std::string::npos ? input.size() + 1 : nul + 1;
  }
  std::istringstream cameras(part[0]), images(part[1]), points(part[2]);
  Reconstruction rec;
  const Status s = ReadColmapModelText(cameras, images, points, "fuzzdir", &rec);
  fuzz::CheckFailure(s, "fuzzdir/");
  if (!s.ok()) {
    TIEPOINT_FUZZ_CHECK(rec.cameras.empty() && rec.images.empty() && rec.points3D.empty());
    return 0;
  }
  TIEPOINT_FUZZ_CHECK(CheckColmapModel(rec).ok());
  // text -> read -> text is byte-identical, and so is text -> binary -> read -> text.
  std::string text[3], again[3], binary[3];
  Write(rec, ColmapFormat::kText, text);
  Reconstruction back;
  TIEPOINT_FUZZ_CHECK(Read(text, ColmapFormat::kText, &back).ok());
  Write(back, ColmapFormat::kText, again);
  for (int k = 0; k < 3; ++k) TIEPOINT_FUZZ_CHECK(again[k] == text[k]);
  Write(rec, ColmapFormat::kBinary, binary);
  Reconstruction from_binary;
  TIEPOINT_FUZZ_CHECK(Read(binary, ColmapFormat::kBinary, &from_binary).ok());
  Write(from_binary, ColmapFormat::kText, again);
  for (int k = 0; k < 3; ++k) TIEPOINT_FUZZ_CHECK(again[k] == text[k]);
  return 0;
}
