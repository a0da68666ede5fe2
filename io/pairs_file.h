// Pairs files: which image pairs to match, one pair a line, "NAME1 NAME2" (COLMAP's
// match list, `colmap matches_importer --match_type pairs`). Read by `match --pairs FILE`
// and `reconstruct --pairs FILE`, in the same words.
//
//   # a comment: from '#' to the end of the line, on a line of its own or after a pair
//   view_000.png view_001.png
//   view_000.png view_007.png   # the ring closes
//
// Blank lines and comments are passed over; any other line holds exactly two names.
#pragma once

#include <istream>
#include <string>
#include <utility>
#include <vector>

#include "io/base/status.h"

namespace tiepoint {

// One pair as written, with its line number (from 1).
struct NamePair {
  std::string name1, name2;
  int line = 0;
};

// Reads the pairs of `path` as written, names unresolved. Errors name the file (and line):
//   "<path>: is a directory, not a pairs file", "<path>: cannot open for reading (...)"
//   "<path>:<line>: expected two names, found <n>"
//   "<path>: no pairs in the file"           (nothing but comments and blank lines)
Status ReadPairsFile(const std::string& path, std::vector<NamePair>* pairs);
// The same from a stream; `name` stands for the file in messages.
Status ReadPairs(std::istream& in, const std::string& name, std::vector<NamePair>* pairs);

// Resolves the pairs of `path` (as ReadPairsFile returned them) to indices into a list of
// `noun`s ("image", "feature file"): item i answers to every name in names_of[i] (its path
// as given, its file name, its stem...). A name that two items answer to is ambiguous.
// A pair given twice, in either order, is kept once, in its first order. Errors:
//   "<path>:<line>: '<name>' is not one of the <noun>s given"
//   "<path>:<line>: '<name>' names more than one <noun> (<first> and <second>)"
//   "<path>:<line>: pairs '<name>' with itself"
Status ResolvePairs(const std::string& path, const std::vector<NamePair>& named,
                    const std::vector<std::vector<std::string>>& names_of, const std::string& noun,
                    std::vector<std::pair<int, int>>* pairs);

}  // namespace tiepoint
