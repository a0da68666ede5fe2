// Opening an input file, with the errors every reader gives in the same words.
#pragma once

#include <fstream>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "io/base/status.h"

namespace tiepoint {

// OK when `path` is not a directory (or does not exist: the open that follows says so);
// else kIoError "<path>: is a directory, not <what>" (`what` with its article: "a pairs
// file", "an image"). On Linux a directory opens as a
// stream that reads as empty, which a reader would report as "no pairs", "no observations"
// or a parse error at its first byte.
Status RefuseDirectory(const std::string& path, const std::string& what);

// Opens `path` into `in` for reading as <what> ("a tracks file"). Errors
// (kIoError) name the path:
//   "<path>: cannot open for reading (<strerror>)"
//   "<path>: is a directory, not <what>"
Status OpenInputFile(const std::string& path, const std::string& what, std::ifstream* in,
                     std::ios::openmode mode = std::ios::in);

// Files seen so far, by device and inode: one file given twice under different names (a
// photo given and also found through its folder, a link and its target) is found.
class SeenFiles {
 public:
  // False, with the earlier path in *earlier, when `path` is a file added before under
  // another name; else adds it (a path that does not exist is left to its reader) and
  // returns true.
  bool Add(const std::string& path, std::string* earlier);
  // Add, as an error naming both (kInvalidInput): "<path>: the same <what> given twice"
  // (the same string twice) or "<path>: the same <what> as <earlier>" (`what`: "image file").
  Status AddOnce(const std::string& path, const std::string& what);

 private:
  std::map<std::pair<uint64_t, uint64_t>, std::string> seen_;
};

}  // namespace tiepoint
