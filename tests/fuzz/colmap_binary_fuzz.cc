// COLMAP binary model: ReadColmapModelBinary on three streams cut from one input. The first
// four bytes are two little-endian uint16 lengths, of cameras.bin and images.bin (each cut to
// what is left), then those bytes, then points3D.bin (the rest). A model it accepts must pass
// CheckColmapModel, and write (binary and text) and read back to the same bytes.
#include <sstream>
#include <string>

#include "io/colmap_model.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

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
  if (size < 4) return 0;
  size_t len[2] = {data[0] | (size_t{data[1]} << 8), data[2] | (size_t{data[3]} << 8)};
  const std::string input(reinterpret_cast<const char*>(data) + 4, size - 4);
  std::string part[3];
  size_t from = 0;
  for (int k = 0; k < 2; ++k) {
    part[k] = input.substr(from, len[k]);
    from += part[k].size();
  }
  part[2] = input.substr(from);
  Reconstruction rec;
  const Status s = Read(part, ColmapFormat::kBinary, &rec);
  fuzz::CheckFailure(s, "back/");
  if (!s.ok()) {
    TIEPOINT_FUZZ_CHECK(rec.cameras.empty() && rec.images.empty() && rec.points3D.empty());
    return 0;
  }
  TIEPOINT_FUZZ_CHECK(CheckColmapModel(rec).ok());
  // binary -> read -> binary is byte-identical, and so is binary -> text -> read -> binary.
  std::string binary[3], again[3], text[3];
  Write(rec, ColmapFormat::kBinary, binary);
  Reconstruction back;
  TIEPOINT_FUZZ_CHECK(Read(binary, ColmapFormat::kBinary, &back).ok());
  Write(back, ColmapFormat::kBinary, again);
  for (int k = 0; k < 3; ++k) TIEPOINT_FUZZ_CHECK(again[k] == binary[k]);
  Write(rec, ColmapFormat::kText, text);
  Reconstruction from_text;
  TIEPOINT_FUZZ_CHECK(Read(text, ColmapFormat::kText, &from_text).ok());
  Write(from_text, ColmapFormat::kBinary, again);
  for (int k = 0; k < 3; ++k) TIEPOINT_FUZZ_CHECK(again[k] == binary[k]);
  return 0;
}
