// The subcommands of the `tiepoint` binary. Each registers its options on a CLI11 app and
// returns a runner; the runner parses nothing, fills Options, calls Check(), runs the
// library, writes outputs and returns a process exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "io/base/status.h"

namespace tiepoint::cli {

using Runner = std::function<int()>;

Runner RegisterBa(CLI::App& app);
Runner RegisterSynth(CLI::App& app);
Runner RegisterBench(CLI::App& app);
// The hidden `bench-worker` command: one solve of `tiepoint bench`, in a fresh process.
Runner RegisterBenchWorker(CLI::App& app);
Runner RegisterExtract(CLI::App& app);
Runner RegisterTrack(CLI::App& app);
Runner RegisterMatch(CLI::App& app);
// `tiepoint batch` (summarize, slurm): runs jobs as `tiepoint <kind>` processes of this binary;
// the job kinds' options are read from the sibling subcommands of `app`'s parent.
Runner RegisterBatch(CLI::App& app);
Runner RegisterReconstruct(CLI::App& app);
// `render-scene`: the synthetic scene's views and cameras (sfm/synthetic_scene.h).
Runner RegisterRender(CLI::App& app);

// Prints a Status error to stderr as "tiepoint <command>: error: ..." and returns its code.
int ReportError(const char* command, const Status& status);

// The bundle adjuster's "auto" solver (`reconstruct --ba-solver auto`, `ba MODEL_DIR`):
// dense Cholesky below this many variable images, CHOLMOD from there.
inline constexpr int kAutoSparseFromImages = 150;

// For an output file written only once the work is done: kIoError naming `option` and the
// directory when the directory `path` would be written into does not exist or cannot be
// written, so that the command fails before the work rather than after it (and leaves no
// partial set of outputs). OK for an empty path (option not given).
Status CheckOutputDirectory(const char* option, const std::string& path);

// Before the CUDA runtime starts: a hardware work queue per stream where a command runs
// more than CUDA's default 8 streams at once (at most 32), unless the caller set
// CUDA_DEVICE_MAX_CONNECTIONS. More queues than streams only cost start-up time (main.cc).
void RequestCudaQueues(int streams);

// --mask-path DIR and --camera-mask FILE (io/mask.h), the same for extract and reconstruct.
void AddMaskOptions(CLI::App& app, std::string* mask_path, std::string* camera_mask);

}  // namespace tiepoint::cli
