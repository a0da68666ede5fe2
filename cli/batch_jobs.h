// `tiepoint batch`: the job file, its validation, matrix expansion and each job's key.
//
// A job file is JSON:
//
//   {
//     "defaults": {"threads": 1, "max-iterations": 30},      // every job whose command has it
//     "jobs": [
//       {"name": "dubrovnik-huber", "kind": "ba", "input": "bal/problem-16-22106-pre.txt.bz2",
//        "solver": "cholmod", "loss": "huber:1", "output": "refined.bal"},
//       {"name": "temple", "kind": "reconstruct", "images": ["temple/*.png"], "single-camera": true}
//     ],
//     "matrix": [
//       {"kind": "ba", "name": "{input}-{solver}",            // optional; default: values joined by '-'
//        "input": ["bal/*.txt", "bal/*.bz2"], "solver": ["cholmod", "pcg-schur"]}
//     ]
//   }
//
// A job's fields other than name, kind and comment are the options of `tiepoint <kind>`
// spelled as on its command line without the dashes ("max-iterations"), its positional
// arguments by their names (ba: "input", bench: "problems", reconstruct: "images"). The
// option set and each option's type come from the command itself (its CLI11 registration),
// so a new option of a command is usable in a job file at once. Values: a string for a text
// option, an integer or number for numeric ones (checked with the command's own validators),
// true/false for a flag, an array of strings for a list. Relative paths are relative to the
// job file's directory; positional inputs and file options (reconstruct's --intrinsics,
// --pairs, --tracks when they name a file) may be globs, expanded in sorted order.
// Output options are set by the batch runner and must not be given, except the file names
// of optional outputs (ba's "output", "ply"), which name files inside the job's directory.
//
// A matrix entry is a job with axes: a field whose value is an array for an option that
// takes one value (or an array of arrays for an option that takes a list) is an axis, and
// the entry expands into the cross product, the first axis outermost. Input axes are
// globbed, each match a value. "{field}" in the name template is replaced by the value
// (an input file by its base name without .bz2/.txt/.bal/.jpg/.png extensions).
//
// Job order is the file's: "jobs" first, then each matrix entry's expansion. It is stable
// for a given job file and set of files, so `--shard I/N` agrees between shards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "io/base/status.h"

namespace tiepoint::cli {

// One input file of a job, with what its key is made of.
struct JobInput {
  std::string path;  // absolute
  int64_t size = -1;
  int64_t mtime_ns = -1;
  std::string content_hash;  // hex; filled only by FingerprintInputs(verify_inputs = true)
  // A folder: the hash of the files it stands for (FingerprintInputs): their names, sizes
  // and modification times. Empty for a file.
  std::string listing_hash;
  // What a folder given for this input stands for: the files below it of this kind.
  enum FolderFiles { kAnyFiles, kImages, kFeatures, kMatches };
  FolderFiles folder_files = kAnyFiles;
};

struct BatchJob {
  int index = 0;       // position in the expanded list (sharding: index % N)
  std::string name;    // unique; [A-Za-z0-9._+=@-], not starting with '.'
  std::string kind;    // "ba", "bench", "reconstruct"
  std::string origin;  // where it came from, for messages: "jobs[3]" or "matrix[0] #5"
  // The command line after the binary: kind, options, then "--" and the positionals. Output
  // paths inside the job directory start with kJobDirToken, replaced when the job runs.
  std::vector<std::string> args;
  std::vector<JobInput> inputs;  // every input file, in argument order
  bool uses_gpu = false;         // --device cuda, or a bench solver NAME@cuda
  nlohmann::json options;        // the job's fields as resolved (for dry-run and the record)
};

inline constexpr const char* kJobDirToken = "@JOBDIR@";

// Where a job's kind is looked up: the root `tiepoint` app with its registered commands.
// Reads options only (never parses with them).
struct CommandCatalog {
  CLI::App* root = nullptr;
};

struct JobFileOptions {
  std::string path;            // the job file
  std::string default_device;  // batch --device: for jobs whose command has --device; "" keeps theirs
  // The most jobs one matrix entry may expand into (an error beyond; the fuzz target lowers it).
  size_t max_matrix_jobs = 100000;
  // The most bytes all jobs' command lines may hold together (an error beyond): a matrix
  // repeats its fixed values in every job, so a small file could otherwise ask for gigabytes.
  size_t max_total_arg_bytes = size_t{256} << 20;
};

// JSON nested deeper than this (arrays and objects) is an error before it is parsed; a job
// file needs 4 levels.
inline constexpr int kMaxJobFileDepth = 64;

// Reads, validates and expands a job file. Collects every error it finds (up to 30), each
// naming the job and the field, into one kInvalidInput status whose message has one line per
// error. Input files are checked to exist (not fingerprinted). kIoError when the file cannot
// be read.
Status LoadJobFile(const JobFileOptions& options, const CommandCatalog& catalog,
                   std::vector<BatchJob>* jobs);
// The same on the file's text (options.path names the file in messages, and relative paths
// are relative to its directory). Time and memory grow with the text and the jobs it expands
// into (at most options.max_matrix_jobs a matrix entry), never with what its values multiply
// into: a job name built from a template stops growing past 1024 characters (an error: names
// are at most 200), values quoted in messages are cut to 60 characters.
Status ParseJobFile(const std::string& text, const JobFileOptions& options,
                    const CommandCatalog& catalog, std::vector<BatchJob>* jobs);

// Fills size and mtime of each input; with verify_inputs also the content hash. Names the
// job and file on error (a file that vanished since LoadJobFile). A folder stands for the
// files below it that a command reads: a folder of images (reconstruct's IMAGES or
// --image-path) for the image files in it and its subfolders, as reconstruct lists them,
// a --features or --matches folder for the .tpfeat or .tpmatch files below it (hidden ones
// passed over; an entry that is no regular file counts by its name). Its size is theirs, its listing hash covers their names, sizes and
// modification times, and its content hash their contents, so a file changed, added or
// removed anywhere below it changes the job's key, and nothing else does (its own stat,
// which changes only with its direct entries, is left out).
Status FingerprintInputs(bool verify_inputs, BatchJob* job);

// The identity of what this build is: version, commit and build flags.
nlohmann::json BuildIdentity();

// The job's key: a hex hash of kind, arguments, build and the inputs' size + mtime
// (by_content = false) or size + content hash (by_content = true; needs the content hashes).
std::string JobKey(const BatchJob& job, bool by_content);

// 64-bit FNV-1a of a file's bytes, as 16 hex digits. Not cryptographic: it detects changed
// inputs, not tampering.
Status HashFileContent(const std::string& path, std::string* hex);
std::string HashString(const std::string& text);

// "I/N" with 0 <= I < N.
Status ParseShard(const std::string& text, int* index, int* count);

// Quotes an argument for a shell command line when it needs it.
std::string ShellQuote(const std::string& arg);

}  // namespace tiepoint::cli
