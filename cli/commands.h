// The subcommands of the `tiepoint` binary. Each registers its options on a CLI11 app and
// returns a runner; the runner parses nothing, fills Options, calls Check(), runs the
// library, writes outputs and returns a process exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

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

// Prints a Status error to stderr as "tiepoint <command>: error: ..." and returns its code.
int ReportError(const char* command, const Status& status);

}  // namespace tiepoint::cli
