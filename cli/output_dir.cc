#include "cli/output_dir.h"

#include "io/base/atomic_file.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

namespace tiepoint::cli {

namespace fs = std::filesystem;

OutputDirectory::~OutputDirectory() {
  // rmdir removes only empty folders: one the run wrote into stays, and so do its parents.
  for (const std::string& d : made_) ::rmdir(d.c_str());
  ForgetMadeFolders();
}

void OutputDirectory::Keep() {
  made_.clear();
  ForgetMadeFolders();
}

Status OutputDirectory::Create(const std::string& dir) {
  std::error_code ec;
  // The missing folders, deepest first, as create_directories will make them from the path
  // as given ("x/../y" makes x, then y; "." and ".." name no folder of their own).
  std::vector<std::string> missing;
  for (fs::path p = fs::path(dir); !p.empty(); p = p.parent_path()) {
    if (p.filename().empty()) p = p.parent_path();  // "a/b/": the folder a/b
    if (p.empty()) break;
    const std::string leaf = p.filename().string();
    if (leaf != "." && leaf != "..") {
      if (fs::symlink_status(p, ec).type() != fs::file_type::not_found) break;
      missing.push_back(p.string());
    }
    if (p == p.parent_path()) break;
  }
  // Even when the creation fails part way, what it made is taken back. A later call makes
  // folders inside those of earlier ones: they go first.
  made_.insert(made_.begin(), missing.begin(), missing.end());
  // Registered for a stop by a signal or out of memory, and made, in one step.
  RegisterMadeFolders(missing, [&] { fs::create_directories(dir, ec); });
  if (ec || !fs::is_directory(dir)) {
    return Status::IoError(dir + ": cannot create the output directory (" +
                           (ec ? ec.message() : std::string("not a directory")) + ")");
  }
  return Status::Ok();
}

}  // namespace tiepoint::cli
