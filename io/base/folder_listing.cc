#include "io/base/folder_listing.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace tiepoint {

bool NaturalLess(const std::string& a, const std::string& b) {
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      size_t ie = i, je = j;
      while (ie < a.size() && digit(a[ie])) ++ie;
      while (je < b.size() && digit(b[je])) ++je;
      size_t is = i, js = j;  // the runs without leading zeros
      while (is + 1 < ie && a[is] == '0') ++is;
      while (js + 1 < je && b[js] == '0') ++js;
      if (ie - is != je - js) return ie - is < je - js;
      const int c = a.compare(is, ie - is, b, js, je - js);
      if (c != 0) return c < 0;
      if (ie - i != je - j) return ie - i < je - j;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
      ++i;
      ++j;
    }
  }
  if (a.size() - i != b.size() - j) return a.size() - i < b.size() - j;
  return a < b;
}

Status ListFolder(const std::string& dir, const std::function<bool(const std::string& file_name)>& wanted,
                  std::vector<std::string>* relative_paths) {
  namespace fs = std::filesystem;
  relative_paths->clear();
  std::vector<std::vector<std::string>> found;  // components of each relative path
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end;
  std::string last = dir;  // the entry before an increment: a folder that fails to open
  for (; !ec && it != end; it.increment(ec)) {
    last = it->path().string();
    const std::string name = it->path().filename().string();
    std::error_code ec2;
    if (name.empty() || name[0] == '.') {  // hidden
      if (it->is_directory(ec2)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_directory(ec2) || !wanted(name)) continue;
    std::vector<std::string> parts;
    for (const fs::path& part : it->path().lexically_relative(dir)) parts.push_back(part.string());
    found.push_back(std::move(parts));
  }
  if (ec) return Status::IoError(last + ": cannot list the folder (" + ec.message() + ")");
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), NaturalLess);
  });
  for (const auto& parts : found) {
    std::string rel;
    for (const std::string& part : parts) rel += (rel.empty() ? "" : "/") + part;
    relative_paths->push_back(std::move(rel));
  }
  return Status::Ok();
}

Status ExpandFolderArguments(const std::vector<std::string>& args,
                             const std::function<bool(const std::string& file_name)>& wanted,
                             const std::string& what, std::vector<std::string>* files,
                             std::vector<std::string>* names) {
  namespace fs = std::filesystem;
  std::vector<std::string> out, out_names;
  for (const std::string& arg : args) {
    std::error_code ec;
    if (!fs::is_directory(arg, ec)) {
      out.push_back(arg);
      out_names.push_back(fs::path(arg).filename().string());
      continue;
    }
    std::vector<std::string> found;
    TIEPOINT_RETURN_IF_ERROR(ListFolder(arg, wanted, &found));
    if (found.empty()) return Status::InvalidInput(arg + ": no " + what + " in the folder or its subfolders");
    for (std::string& rel : found) {
      out.push_back((fs::path(arg) / rel).string());
      out_names.push_back(std::move(rel));
    }
  }
  *files = std::move(out);  // after the loop: `args` may be `*files`
  *names = std::move(out_names);
  return Status::Ok();
}

}  // namespace tiepoint
