#include "cli/output_dir.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

namespace tiepoint::cli {

namespace fs = std::filesystem;

OutputDirectory::~OutputDirectory() {
  for (const std::string& d : made_) {
    if (::rmdir(d.c_str()) != 0) break;  // not empty (or gone): its parents are not either
  }
}

Status OutputDirectory::Create(const std::string& dir) {
  made_.clear();
  std::error_code ec;
  // The missing folders, deepest first, as create_directories will make them.
  std::vector<std::string> missing;
  for (fs::path p = fs::path(dir).lexically_normal(); !p.empty(); p = p.parent_path()) {
    if (p.filename().empty()) p = p.parent_path();  // "a/b/" normalises to "a/b/"
    if (p.empty() || fs::symlink_status(p, ec).type() != fs::file_type::not_found) break;
    missing.push_back(p.string());
    if (p == p.parent_path()) break;
  }
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    return Status::IoError(dir + ": cannot create the output directory (" +
                           (ec ? ec.message() : std::string("not a directory")) + ")");
  }
  made_ = std::move(missing);
  return Status::Ok();
}

}  // namespace tiepoint::cli
