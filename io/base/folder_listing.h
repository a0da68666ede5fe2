// Listing a folder as the commands read one: the files in it and its subfolders, in natural
// order, named by their paths relative to it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "io/base/status.h"

namespace tiepoint {

// Natural order, as `ls -v`: runs of digits compare as numbers (frame_2 before frame_10;
// with equal values the shorter run, fewer leading zeros, first), everything else byte by
// byte; names equal so are ordered by their bytes. Zero-padded names keep their byte order.
bool NaturalLess(const std::string& a, const std::string& b);

// The files in `dir` and its subfolders whose file names `wanted` accepts, by their paths
// relative to `dir` ("100MEDIA/DJI_0001.JPG", '/' between components), in natural order
// component by component (a folder's files stay together). Hidden files and folders (names
// starting with '.': .thumbnails/, macOS's ._IMG_0001.JPG) are passed over, and links to
// folders are not followed (a link to a file is a file). Errors (kIoError) name the folder
// that could not be read: "<path>: cannot list the folder (<reason>)".
Status ListFolder(const std::string& dir, const std::function<bool(const std::string& file_name)>& wanted,
                  std::vector<std::string>* relative_paths);

// A command's file arguments, a folder among them standing for the files in it and its
// subfolders that `wanted` accepts (ListFolder); any other argument is kept as given (a
// missing file is named later, by its reader). names[i] is files[i]'s name: its path
// relative to the folder given, or for a file argument its file name. Errors: ListFolder's,
// and for a folder with no such file (kInvalidInput) "<dir>: no <what> in the folder or its
// subfolders" (`what`: "image files (*.png, ...)").
Status ExpandFolderArguments(const std::vector<std::string>& args,
                             const std::function<bool(const std::string& file_name)>& wanted,
                             const std::string& what, std::vector<std::string>* files,
                             std::vector<std::string>* names);

}  // namespace tiepoint
