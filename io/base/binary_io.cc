#include "io/base/binary_io.h"

#include <fstream>
#include <iterator>

#include "io/base/input_file.h"

namespace tiepoint {

Status ReadWholeFile(const std::string& path, const char* what, std::vector<unsigned char>* bytes) {
  std::ifstream in;
  TIEPOINT_RETURN_IF_ERROR(OpenInputFile(path, std::string("a ") + what, &in, std::ios::binary));
  bytes->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) return Status::IoError(path + ": read error");
  return Status::Ok();
}

}  // namespace tiepoint
