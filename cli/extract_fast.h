// `tiepoint extract --detector fast`: FAST corners with grid (or plain) suppression over a
// pyramid (features/fast.h), per image, through FastLkFrontEnd (CPU or CUDA). FAST corners
// have no descriptor, so the output is the features text format of io/features.h with
// descriptor dimension 0: DIR/<image file name>.txt, line 1 "<N> 0", then one line
// "x y scale orientation" per corner (scale = 3 * 2^level, the segment-test circle's radius
// in image pixels; orientation 0). The binary .tpfeat format holds 128-byte descriptors
// only, so it is not written for FAST. A batch goes on past bad images; they are named on
// stderr and make the exit code 2.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace tiepoint::cli {

struct FastExtractArgs {
  int threshold = 20;
  int arc = 9;
  std::string cell = "32x32";
  int levels = 3;
  std::string score = "max-threshold";
  std::string nms = "grid";
  int nms_radius = 1;
};

// Adds --fast-threshold, --fast-arc, --fast-score, --fast-nms, --fast-radius, --cell and
// --levels to the extract command.
void AddFastExtractOptions(CLI::App& app, FastExtractArgs* args);

// Runs FAST over `images`; returns the process exit code.
// `names`: the images' names, one per image (io/image.h ExpandImageArguments); image
// NAME's corners go to output_dir/NAME.txt.
int RunExtractFast(const std::vector<std::string>& images, const std::vector<std::string>& names,
                   const std::string& output_dir,
                   const std::string& device, int threads, bool quiet, const FastExtractArgs& args);

}  // namespace tiepoint::cli
