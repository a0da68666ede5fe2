// The job file of `tiepoint batch`: validation against the commands' own options, matrix
// expansion, input fingerprints and keys.
#include "cli/batch_jobs.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "io/base/input_file.h"
#include "io/base/folder_listing.h"
#include "io/features.h"
#include "io/image.h"
#include "tiepoint/build_info.h"

namespace tiepoint::cli {
namespace {

using ojson = nlohmann::ordered_json;

constexpr int kMaxErrors = 30;

// What batch does with each kind's options. Output options are set by the runner (to files in
// the job directory); "file names" are optional outputs whose value the job file gives as a
// plain name inside the job directory; "file inputs" are options whose value, when it names
// an existing file, is an input (resolved, globbed, fingerprinted).
struct KindRules {
  const char* kind;
  std::vector<std::pair<std::string, std::string>> managed;  // option -> value under the job dir
  std::vector<std::string> file_names;
  std::vector<std::string> file_inputs;
};

const std::vector<KindRules>& AllKindRules() {
  static const std::vector<KindRules> rules = {
      {"ba", {{"report", "report.json"}}, {"output", "ply"}, {}},
      {"bench", {{"out", "bench.json"}, {"plot", "bench.svg"}}, {}, {}},
      // features, matches, image-path, mask-path: folders (resolved against the job file),
      // fingerprinted by the files below them that the command reads (FingerprintInputs).
      {"reconstruct",
       {{"output", "model"}},
       {},
       {"intrinsics", "pairs", "tracks", "features", "matches", "image-path", "mask-path", "camera-mask"}},
  };
  return rules;
}

const KindRules* FindKindRules(const std::string& kind) {
  for (const KindRules& r : AllKindRules()) {
    if (kind == r.kind) return &r;
  }
  return nullptr;
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

enum class ValueType { kFlag, kInt, kUint, kNumber, kText };

struct OptionSpec {
  std::string name;  // field name: long name, else positional name, else short name
  CLI::Option* option = nullptr;
  bool positional = false;
  bool list = false;
  ValueType type = ValueType::kText;
  std::string spelling;  // "--max-iterations" or "-o"
};

// The options of `tiepoint <kind>` as registered on its CLI11 app.
std::vector<OptionSpec> SpecsOf(CLI::App* command) {
  std::vector<OptionSpec> specs;
  const CLI::Option* help = command->get_help_ptr();
  for (CLI::Option* opt : command->get_options()) {
    if (opt == help) continue;
    OptionSpec s;
    s.option = opt;
    s.name = opt->get_single_name();
    s.positional = opt->get_positional() && !opt->nonpositional();
    if (!opt->get_lnames().empty()) {
      s.spelling = "--" + opt->get_lnames()[0];
    } else if (!opt->get_snames().empty()) {
      s.spelling = "-" + opt->get_snames()[0];
    }
    if (opt->get_expected_max() == 0) {  // add_flag: expected(0)
      s.type = ValueType::kFlag;
    } else {
      s.list = opt->get_items_expected_max() > 1;
      std::string base = opt->get_type_name();
      base = base.substr(0, base.find(':'));
      if (base == "INT") s.type = ValueType::kInt;
      else if (base == "UINT") s.type = ValueType::kUint;
      else if (base == "FLOAT" || base == "NUMBER") s.type = ValueType::kNumber;
      else s.type = ValueType::kText;
    }
    specs.push_back(s);
  }
  return specs;
}

const OptionSpec* FindSpec(const std::vector<OptionSpec>& specs, const std::string& name) {
  for (const OptionSpec& s : specs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string TypeWord(const OptionSpec& s) {
  switch (s.type) {
    case ValueType::kFlag: return "true or false (a flag)";
    case ValueType::kInt: return s.list ? "an array of integers" : "an integer";
    case ValueType::kUint: return s.list ? "an array of non-negative integers" : "a non-negative integer";
    case ValueType::kNumber: return s.list ? "an array of numbers" : "a number";
    case ValueType::kText: return s.list ? "a string or an array of strings" : "a string";
  }
  return "?";
}

// v.dump(), stopped once past `limit` characters: the cost of quoting a value in a message
// does not grow with the value, and the recursion is as deep as `limit` at most.
void DumpPrefix(const ojson& v, size_t limit, std::string* out) {
  if (out->size() > limit) return;
  if (v.is_array() || v.is_object()) {
    *out += v.is_array() ? '[' : '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end() && out->size() <= limit; ++it) {
      if (!first) *out += ',';
      first = false;
      if (v.is_object()) *out += ojson(it.key()).dump() + ':';
      DumpPrefix(it.value(), limit, out);
    }
    *out += v.is_array() ? ']' : '}';
    return;
  }
  if (v.is_string() && v.get_ref<const std::string&>().size() > limit) {
    const std::string& s = v.get_ref<const std::string&>();
    size_t cut = limit;  // not inside a UTF-8 sequence (dump() throws on a broken one)
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
    *out += ojson(s.substr(0, cut)).dump();
    return;
  }
  *out += v.dump();
}

std::string Shorten(const ojson& v) {
  std::string text;
  DumpPrefix(v, 60, &text);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

// How deeply the JSON text nests arrays and objects, counted outside strings; stops counting
// past `limit`.
int NestingDepth(const std::string& text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// Every `placeholder` in *name replaced by `text`, in one pass; stops once the name is past
// `limit` characters (the caller reports such a name as too long).
void ReplaceAll(const std::string& placeholder, const std::string& text, size_t limit,
                std::string* name) {
  if (name->find(placeholder) == std::string::npos) return;
  std::string out;
  size_t from = 0;
  for (size_t pos; (pos = name->find(placeholder, from)) != std::string::npos;) {
    out.append(*name, from, pos - from);
    out += text;
    from = pos + placeholder.size();
    if (out.size() > limit) break;
  }
  if (out.size() <= limit) out.append(*name, from, std::string::npos);
  if (out.size() > limit) out.resize(limit + 1);
  *name = std::move(out);
}

// A job name past this many characters is cut here (NameError reports it as too long).
constexpr size_t kNameBuildLimit = 1024;

std::string JsonTypeWord(const ojson& v) {
  if (v.is_string()) return "string " + Shorten(v);
  if (v.is_boolean()) return std::string("boolean ") + (v.get<bool>() ? "true" : "false");
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer " + v.dump();
  if (v.is_number()) return "number " + v.dump();
  if (v.is_array()) return "array " + Shorten(v);
  if (v.is_object()) return "object " + Shorten(v);
  return "null";
}

// One value of a scalar option as its command-line text; empty error when it converts.
std::string ScalarToArg(const OptionSpec& s, const ojson& v, std::string* arg) {
  switch (s.type) {
    case ValueType::kFlag:
      return "expected " + TypeWord(s) + ", got " + JsonTypeWord(v);
    case ValueType::kInt:
      if (!v.is_number_integer() && !v.is_number_unsigned()) {
        return "expected " + TypeWord(s) + ", got " + JsonTypeWord(v);
      }
      *arg = v.dump();
      return "";
    case ValueType::kUint:
      if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
        return "expected " + TypeWord(s) + ", got " + JsonTypeWord(v);
      }
      *arg = v.dump();
      return "";
    case ValueType::kNumber:
      if (!v.is_number()) return "expected " + TypeWord(s) + ", got " + JsonTypeWord(v);
      *arg = v.dump();
      return "";
    case ValueType::kText:
      if (!v.is_string()) return "expected " + TypeWord(s) + ", got " + JsonTypeWord(v);
      *arg = v.get<std::string>();
      return "";
  }
  return "unknown type";
}

// Runs the command's own validators (e.g. NonNegativeNumber) on one argument.
std::string RunValidators(const OptionSpec& s, const std::string& arg) {
  for (int i = 0;; ++i) {
    CLI::Validator* validator = nullptr;
    try {
      validator = s.option->get_validator(i);
    } catch (const CLI::OptionNotFound&) {
      break;
    }
    std::string copy = arg;
    const std::string error = (*validator)(copy);
    if (!error.empty()) return error;
  }
  return "";
}

bool HasWildcard(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

std::string Resolve(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  return base_dir + "/" + path;
}

// Expands one input pattern; error text when nothing matches or the file is missing.
std::string ExpandInput(const std::string& base_dir, const std::string& pattern,
                        std::vector<std::string>* out) {
  const std::string full = Resolve(base_dir, pattern);
  if (!HasWildcard(pattern)) {
    struct stat st;
    if (::stat(full.c_str(), &st) != 0) {
      return "input '" + full + "': " + std::strerror(errno);
    }
    out->push_back(full);
    return "";
  }
  glob_t g{};
  const int rc = ::glob(full.c_str(), 0, nullptr, &g);
  if (rc != 0) {
    ::globfree(&g);
    return "'" + full + "' matches no file";
  }
  for (size_t i = 0; i < g.gl_pathc; ++i) out->push_back(g.gl_pathv[i]);
  ::globfree(&g);
  return "";
}

// Base name without the usual data extensions: "bal/problem-49-7776-pre.txt.bz2" -> "problem-49-7776-pre".
std::string ShortName(const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') + 1);
  for (const char* ext : {".bz2", ".gz", ".txt", ".bal", ".jpg", ".jpeg", ".png", ".json"}) {
    const size_t n = std::strlen(ext);
    if (base.size() > n && base.compare(base.size() - n, n, ext) == 0) base.resize(base.size() - n);
  }
  return base;
}

bool NameCharOk(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("._+=@-", c) != nullptr;
}

std::string SanitizeName(const std::string& s) {
  std::string out;
  for (char c : s) out += NameCharOk(c) ? c : '_';
  while (!out.empty() && out[0] == '.') out.erase(0, 1);
  return out;
}

std::string NameError(const std::string& name) {
  if (name.empty()) return "is empty";
  if (name[0] == '.') return "'" + name + "' starts with '.'";
  if (name.size() > 200) return "is longer than 200 characters";
  for (char c : name) {
    if (!NameCharOk(c)) {
      return "'" + name + "' has '" + std::string(1, c) +
             "': a job name becomes a directory name; use letters, digits and ._+=@-";
    }
  }
  return "";
}

CLI::App* FindCommand(const CommandCatalog& catalog, const std::string& kind) {
  if (catalog.root == nullptr) return nullptr;
  for (CLI::App* sub : catalog.root->get_subcommands([](CLI::App*) { return true; })) {
    if (sub->get_name() == kind) return sub;
  }
  return nullptr;
}

class Collector {
 public:
  explicit Collector(std::string file) : file_(std::move(file)) {}
  void Add(const std::string& where, const std::string& what) {
    ++count_;
    if (count_ <= kMaxErrors) lines_.push_back(file_ + ": " + where + ": " + what);
  }
  bool empty() const { return count_ == 0; }
  // More errors than are listed: a matrix stops expanding (the rest could only be counted).
  bool full() const { return count_ > kMaxErrors; }
  void SetStopped() { stopped_ = true; }
  Status ToStatus() const {
    std::string msg;
    for (size_t i = 0; i < lines_.size(); ++i) msg += (i ? "\n" : "") + lines_[i];
    if (count_ > kMaxErrors) {
      msg += "\n(" + std::to_string(count_ - kMaxErrors) + " more errors" +
             (stopped_ ? ", and jobs not checked after them" : "") + ")";
    }
    return Status::InvalidInput(msg);
  }

 private:
  std::string file_;
  std::vector<std::string> lines_;
  int count_ = 0;
  bool stopped_ = false;
};

// The fields of a job (after defaults and matrix substitution) as a BatchJob.
struct JobBuilder {
  const CommandCatalog& catalog;
  const JobFileOptions& file_options;
  std::string base_dir;
  Collector& errors;

  // `where` names the job for messages: "job 'x' (jobs[3])".
  bool Build(const std::string& where, const std::string& kind, const ojson& fields,
             const std::vector<std::string>& default_keys, BatchJob* job) {
    CLI::App* command = FindCommand(catalog, kind);
    const KindRules* rules = FindKindRules(kind);
    if (command == nullptr || rules == nullptr) {
      errors.Add(where, "field 'kind': '" + kind + "' is not a job kind of this tiepoint build " +
                            "(ba, bench" + (FindCommand(catalog, "reconstruct") ? ", reconstruct" : "") + ")");
      return false;
    }
    const std::vector<OptionSpec> specs = SpecsOf(command);
    job->kind = kind;
    std::vector<std::string> args = {kind};
    std::vector<std::string> positional_args;
    bool ok = true;
    std::set<std::string> given;
    for (auto it = fields.begin(); it != fields.end(); ++it) {
      const std::string& key = it.key();
      const ojson& value = it.value();
      const bool from_defaults = Contains(default_keys, key);
      const std::string field = "field '" + key + "'" + (from_defaults ? " (from defaults)" : "");
      const OptionSpec* spec = FindSpec(specs, key);
      if (spec == nullptr) {
        if (from_defaults) continue;  // a default for other kinds
        std::string hint;
        size_t best = 3;
        for (const OptionSpec& s : specs) {
          // The distance is at least the difference in length: a long key costs nothing.
          const size_t longer = std::max(key.size(), s.name.size());
          if (longer - std::min(key.size(), s.name.size()) >= best) continue;
          const size_t d = EditDistance(key, s.name);
          if (d < best) best = d, hint = " (did you mean '" + s.name + "'?)";
        }
        if (key.rfind("--", 0) == 0 && FindSpec(specs, key.substr(2)) != nullptr) {
          hint = " (write it without the dashes: '" + key.substr(2) + "')";
        }
        errors.Add(where, field + ": not an option of `tiepoint " + kind + "`" + hint);
        ok = false;
        continue;
      }
      bool managed = false;
      for (const auto& m : rules->managed) managed = managed || m.first == key;
      if (managed || key == "quiet" || key == "help") {
        errors.Add(where, field + ": set by tiepoint batch (outputs go to RUN/jobs/<name>/)");
        ok = false;
        continue;
      }
      given.insert(key);
      job->options[key] = value;
      if (spec->type == ValueType::kFlag) {
        if (!value.is_boolean()) {
          errors.Add(where, field + ": expected " + TypeWord(*spec) + ", got " + JsonTypeWord(value));
          ok = false;
        } else if (value.get<bool>()) {
          args.push_back(spec->spelling);
        }
        continue;
      }
      // Values as a list of JSON scalars.
      std::vector<ojson> items;
      if (value.is_array()) {
        if (!spec->list) {
          errors.Add(where, field + ": expected " + TypeWord(*spec) + ", got " + JsonTypeWord(value));
          ok = false;
          continue;
        }
        for (const ojson& v : value) items.push_back(v);
        if (items.empty()) {
          errors.Add(where, field + ": empty array");
          ok = false;
          continue;
        }
      } else {
        items.push_back(value);
      }
      const bool is_input =
          spec->positional || Contains(rules->file_inputs, key);
      const bool is_file_name = Contains(rules->file_names, key);
      std::vector<std::string> texts;
      for (const ojson& v : items) {
        std::string arg;
        const std::string error = ScalarToArg(*spec, v, &arg);
        if (!error.empty()) {
          errors.Add(where, field + ": " + error);
          ok = false;
          continue;
        }
        if (is_input) {
          // reconstruct's --pairs may be a scheme ("exhaustive") rather than a file.
          const bool must_be_file = spec->positional || HasWildcard(arg) ||
                                    arg.find('/') != std::string::npos;
          struct stat st;
          if (!must_be_file && ::stat(Resolve(base_dir, arg).c_str(), &st) != 0) {
            texts.push_back(arg);
            continue;
          }
          std::vector<std::string> files;
          const std::string error2 = ExpandInput(base_dir, arg, &files);
          if (!error2.empty()) {
            errors.Add(where, field + ": " + error2);
            ok = false;
            continue;
          }
          for (const std::string& f : files) {
            texts.push_back(f);
            JobInput input;
            input.path = f;
            // What a folder given there stands for: reconstruct's IMAGES and --image-path, its
            // images; --features, its .tpfeat files; --matches, its .tpmatch files.
            if (job->kind == "reconstruct") {
              if (spec->positional || key == "image-path") input.folder_files = JobInput::kImages;
              if (key == "features") input.folder_files = JobInput::kFeatures;
              if (key == "matches") input.folder_files = JobInput::kMatches;
            }
            job->inputs.push_back(input);
          }
          continue;
        }
        if (is_file_name) {
          if (arg.empty() || arg.find('/') != std::string::npos || arg[0] == '.') {
            errors.Add(where, field + ": '" + arg +
                                  "' must be a plain file name: it is written into RUN/jobs/<name>/");
            ok = false;
            continue;
          }
          arg = std::string(kJobDirToken) + "/" + arg;
        } else {
          const std::string verror = RunValidators(*spec, arg);
          if (!verror.empty()) {
            errors.Add(where, field + ": " + verror);
            ok = false;
            continue;
          }
        }
        texts.push_back(arg);
      }
      if (!spec->list && texts.size() > 1) {
        errors.Add(where, field + ": takes one file, but the pattern matches " +
                              std::to_string(texts.size()));
        ok = false;
        continue;
      }
      if (spec->positional) {
        positional_args.insert(positional_args.end(), texts.begin(), texts.end());
      } else {
        for (const std::string& t : texts) {
          args.push_back(spec->spelling);
          args.push_back(t);
        }
      }
      if (key == "device" && !texts.empty() && texts[0] == "cuda") job->uses_gpu = true;
      if (key == "solvers") {
        for (const std::string& t : texts) job->uses_gpu |= t.find("@cuda") != std::string::npos;
      }
    }
    // The batch's --device for jobs that leave it to the batch.
    if (!file_options.default_device.empty() && given.count("device") == 0 &&
        FindSpec(specs, "device") != nullptr) {
      args.push_back("--device");
      args.push_back(file_options.default_device);
      job->options["device"] = file_options.default_device;
      job->uses_gpu |= file_options.default_device == "cuda";
    }
    for (const OptionSpec& s : specs) {
      bool is_managed = false;
      for (const auto& m : rules->managed) is_managed = is_managed || m.first == s.name;
      if (s.option->get_required() && given.count(s.name) == 0 && !is_managed) {
        errors.Add(where, "field '" + s.name + "': missing (required by `tiepoint " + kind + "`)");
        ok = false;
      }
    }
    for (const auto& m : rules->managed) {
      const OptionSpec* s = FindSpec(specs, m.first);
      if (s == nullptr) continue;
      args.push_back(s->spelling);
      args.push_back(std::string(kJobDirToken) + "/" + m.second);
    }
    if (const OptionSpec* q = FindSpec(specs, "quiet"); q != nullptr && q->type == ValueType::kFlag) {
      args.push_back(q->spelling);
    }
    if (!positional_args.empty()) {
      args.push_back("--");
      args.insert(args.end(), positional_args.begin(), positional_args.end());
    }
    job->args = std::move(args);
    return ok;
  }
};

std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string AbsoluteDir(const std::string& dir) {
  if (!dir.empty() && dir[0] == '/') return dir;
  char cwd[4096];
  if (::getcwd(cwd, sizeof(cwd)) == nullptr) return dir;
  return dir == "." ? std::string(cwd) : std::string(cwd) + "/" + dir;
}

// Value text for a "{field}" placeholder.
std::string PlaceholderText(const ojson& v, bool is_input) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    return is_input ? ShortName(s) : s;
  }
  if (v.is_array()) {
    std::string out;
    for (const ojson& e : v) out += (out.empty() ? "" : "+") + PlaceholderText(e, is_input);
    return out;
  }
  return v.dump();
}

bool IsMetaKey(const std::string& key) {
  return key == "name" || key == "kind" || key == "comment" || (!key.empty() && key[0] == '_');
}

}  // namespace

Status LoadJobFile(const JobFileOptions& options, const CommandCatalog& catalog,
                   std::vector<BatchJob>* jobs) {
  jobs->clear();
  TIEPOINT_RETURN_IF_ERROR(RefuseDirectory(options.path, "a job file"));
  std::ifstream in(options.path, std::ios::binary);
  if (!in) {
    return Status::IoError(options.path + ": cannot open the job file (" + std::strerror(errno) + ")");
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return Status::IoError(options.path + ": read error");
  return ParseJobFile(buffer.str(), options, catalog, jobs);
}

Status ParseJobFile(const std::string& text, const JobFileOptions& options,
                    const CommandCatalog& catalog, std::vector<BatchJob>* jobs) {
  jobs->clear();
  // nlohmann's parser keeps its own stack, but copying and printing values recurse: a depth
  // bound first.
  if (NestingDepth(text, kMaxJobFileDepth) > kMaxJobFileDepth) {
    return Status::InvalidInput(options.path + ": arrays and objects nested deeper than " +
                                std::to_string(kMaxJobFileDepth) + " levels (a job file needs 4)");
  }
  ojson root;
  try {
    root = ojson::parse(text);
  } catch (const ojson::exception& e) {  // parse_error, and out_of_range for 1e400
    return Status::InvalidInput(options.path + ": not valid JSON: " + e.what());
  }
  Collector errors(options.path);
  if (!root.is_object()) {
    errors.Add("top level", "expected an object with \"jobs\" and/or \"matrix\" (and optional \"defaults\")");
    return errors.ToStatus();
  }
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() != "jobs" && it.key() != "matrix" && it.key() != "defaults" && !IsMetaKey(it.key())) {
      errors.Add("top level", "field '" + it.key() + "': unknown (expected jobs, matrix, defaults, comment)");
    }
  }
  ojson defaults = ojson::object();
  if (root.contains("defaults")) {
    if (!root["defaults"].is_object()) {
      errors.Add("defaults", "expected an object of options, got " + JsonTypeWord(root["defaults"]));
    } else {
      defaults = root["defaults"];
      for (auto it = defaults.begin(); it != defaults.end(); ++it) {
        if (it.key() == "name" || it.key() == "kind") {
          errors.Add("defaults", "field '" + it.key() + "': cannot be a default");
        }
      }
    }
  }
  std::vector<std::string> default_keys;
  for (auto it = defaults.begin(); it != defaults.end(); ++it) default_keys.push_back(it.key());
  std::set<std::string> defaults_used;

  const std::string base_dir = AbsoluteDir(DirName(options.path));
  JobBuilder builder{catalog, options, base_dir, errors};
  std::map<std::string, std::string> origin_of_name;

  size_t arg_bytes = 0;  // over all jobs' args, against options.max_total_arg_bytes
  bool arg_budget_exceeded = false;
  auto add_job = [&](const std::string& origin, const std::string& name, const std::string& kind,
                     const ojson& own_fields) {
    if (arg_budget_exceeded) return;
    const std::string where = "job '" + name + "' (" + origin + ")";
    ojson fields = ojson::object();
    CLI::App* command = FindCommand(catalog, kind);
    std::vector<std::string> applied_defaults;
    if (command != nullptr) {
      const std::vector<OptionSpec> specs = SpecsOf(command);
      for (auto it = defaults.begin(); it != defaults.end(); ++it) {
        if (FindSpec(specs, it.key()) == nullptr) continue;
        defaults_used.insert(it.key());
        if (!own_fields.contains(it.key())) {
          fields[it.key()] = it.value();
          applied_defaults.push_back(it.key());
        }
      }
    }
    for (auto it = own_fields.begin(); it != own_fields.end(); ++it) {
      if (!IsMetaKey(it.key())) fields[it.key()] = it.value();
    }
    BatchJob job;
    job.name = name;
    job.origin = origin;
    job.options = nlohmann::json::object();
    const std::string name_error = NameError(name);
    if (!name_error.empty()) {
      errors.Add(where, "field 'name': " + name_error);
    }
    const auto dup = origin_of_name.find(name);
    if (dup != origin_of_name.end()) {
      errors.Add(where, "field 'name': duplicate: " + dup->second + " has the same name");
    } else {
      origin_of_name[name] = origin;
    }
    if (builder.Build(where, kind, fields, applied_defaults, &job) && name_error.empty()) {
      job.index = static_cast<int>(jobs->size());
      for (const std::string& a : job.args) arg_bytes += a.size();
      if (arg_bytes > options.max_total_arg_bytes) {
        if (!arg_budget_exceeded) {
          errors.Add(where, "the jobs' command lines so far hold " + std::to_string(arg_bytes) +
                                " bytes, more than " + std::to_string(options.max_total_arg_bytes) +
                                " (a matrix that repeats long values?)");
        }
        arg_budget_exceeded = true;
        jobs->push_back(BatchJob{});
        return;
      }
      jobs->push_back(std::move(job));
    } else {
      jobs->push_back(BatchJob{});  // keeps indices aligned with the file; dropped on error
    }
  };

  auto kind_of = [&](const std::string& where, const ojson& entry, std::string* kind) {
    if (!entry.contains("kind")) {
      errors.Add(where, "field 'kind': missing (ba, bench or reconstruct)");
      return false;
    }
    if (!entry["kind"].is_string()) {
      errors.Add(where, "field 'kind': expected a string, got " + JsonTypeWord(entry["kind"]));
      return false;
    }
    *kind = entry["kind"].get<std::string>();
    return true;
  };

  if (root.contains("jobs")) {
    const ojson& list = root["jobs"];
    if (!list.is_array()) {
      errors.Add("jobs", "expected an array of job objects, got " + JsonTypeWord(list));
    } else {
      for (size_t i = 0; i < list.size(); ++i) {
        const std::string origin = "jobs[" + std::to_string(i) + "]";
        const ojson& entry = list[i];
        if (!entry.is_object()) {
          errors.Add(origin, "expected a job object, got " + JsonTypeWord(entry));
          continue;
        }
        std::string name;
        if (!entry.contains("name")) {
          errors.Add(origin, "field 'name': missing");
          continue;
        }
        if (!entry["name"].is_string()) {
          errors.Add(origin, "field 'name': expected a string, got " + JsonTypeWord(entry["name"]));
          continue;
        }
        name = entry["name"].get<std::string>();
        std::string kind;
        if (!kind_of("job '" + name + "' (" + origin + ")", entry, &kind)) continue;
        add_job(origin, name, kind, entry);
      }
    }
  }

  if (root.contains("matrix")) {
    ojson list = root["matrix"];
    if (list.is_object()) list = ojson::array({list});
    if (!list.is_array()) {
      errors.Add("matrix", "expected an array of matrix objects, got " + JsonTypeWord(list));
    } else {
      for (size_t m = 0; m < list.size(); ++m) {
        const std::string origin = "matrix[" + std::to_string(m) + "]";
        const ojson& entry = list[m];
        if (!entry.is_object()) {
          errors.Add(origin, "expected a matrix object, got " + JsonTypeWord(entry));
          continue;
        }
        std::string kind;
        if (!kind_of(origin, entry, &kind)) continue;
        CLI::App* command = FindCommand(catalog, kind);
        if (command == nullptr || FindKindRules(kind) == nullptr) {
          errors.Add(origin, "field 'kind': '" + kind + "' is not a job kind of this tiepoint build");
          continue;
        }
        const std::vector<OptionSpec> specs = SpecsOf(command);
        const KindRules* rules = FindKindRules(kind);
        std::string name_template;
        if (entry.contains("name")) {
          if (!entry["name"].is_string()) {
            errors.Add(origin, "field 'name': expected a template string like \"{input}-{solver}\"");
            continue;
          }
          name_template = entry["name"].get<std::string>();
        }
        // Axes: arrays for single-valued options, arrays of arrays for list options.
        struct Axis {
          std::string key;
          std::vector<ojson> values;
          bool is_input;
        };
        std::vector<Axis> axes;
        ojson fixed = ojson::object();
        bool entry_ok = true;
        for (auto it = entry.begin(); it != entry.end(); ++it) {
          if (IsMetaKey(it.key())) continue;
          const OptionSpec* spec = FindSpec(specs, it.key());
          const bool is_input = spec != nullptr && (spec->positional || Contains(rules->file_inputs, it.key()));
          const ojson& v = it.value();
          const bool axis = spec != nullptr && v.is_array() &&
                            (spec->list ? (!v.empty() && v[0].is_array()) : spec->type != ValueType::kFlag);
          const bool flag_axis = spec != nullptr && spec->type == ValueType::kFlag && v.is_array();
          if (!axis && !flag_axis) {
            fixed[it.key()] = v;
            continue;
          }
          Axis a{it.key(), {}, is_input};
          for (const ojson& value : v) {
            if (is_input && !spec->list && value.is_string() && HasWildcard(value.get<std::string>())) {
              std::vector<std::string> files;
              const std::string error = ExpandInput(base_dir, value.get<std::string>(), &files);
              if (!error.empty()) {
                errors.Add(origin, "field '" + it.key() + "': " + error);
                entry_ok = false;
                continue;
              }
              for (const std::string& f : files) a.values.push_back(f);
            } else {
              a.values.push_back(value);
            }
          }
          if (v.empty()) {
            errors.Add(origin, "field '" + it.key() + "': empty axis");
            entry_ok = false;
          }
          axes.push_back(std::move(a));
        }
        if (!entry_ok) continue;
        if (axes.empty()) {
          errors.Add(origin, "no axis: give at least one field an array of values (e.g. \"solver\": [\"cholmod\", \"pcg-schur\"])");
          continue;
        }
        // The product, stopped once past the limit (so that it cannot overflow).
        size_t total = 1;
        bool too_many = false;
        for (const Axis& a : axes) {
          const size_t n = std::max<size_t>(a.values.size(), 1);
          if (total > options.max_matrix_jobs / n) {
            too_many = true;
            break;
          }
          total *= n;
        }
        if (too_many) {
          std::string sizes;
          for (const Axis& a : axes) sizes += (sizes.empty() ? "" : " x ") + std::to_string(a.values.size());
          errors.Add(origin, "expands into " + sizes + " jobs (more than " +
                                 std::to_string(options.max_matrix_jobs) + ")");
          continue;
        }
        for (size_t k = 0; k < total; ++k) {
          if (arg_budget_exceeded) break;
          if (errors.full()) {
            errors.SetStopped();
            break;
          }
          ojson fields = ojson::object();
          for (auto it = entry.begin(); it != entry.end(); ++it) {
            if (fixed.contains(it.key())) fields[it.key()] = it.value();
            else if (!IsMetaKey(it.key())) fields[it.key()] = nullptr;  // an axis: set below, in file order
          }
          std::string name = name_template;
          std::string joined;
          size_t rest = k;
          std::vector<size_t> pick(axes.size());
          for (size_t a = axes.size(); a-- > 0;) {
            pick[a] = rest % axes[a].values.size();
            rest /= axes[a].values.size();
          }
          for (size_t a = 0; a < axes.size(); ++a) {
            const ojson& value = axes[a].values[pick[a]];
            fields[axes[a].key] = value;
            const std::string text = SanitizeName(PlaceholderText(value, axes[a].is_input));
            joined += (joined.empty() ? "" : "-") + text;
            ReplaceAll("{" + axes[a].key + "}", text, kNameBuildLimit, &name);
          }
          // Fixed fields may name the job too ("{input}" of a single input).
          for (auto it = fixed.begin(); it != fixed.end(); ++it) {
            const OptionSpec* spec = FindSpec(specs, it.key());
            const bool is_input = spec != nullptr && (spec->positional || Contains(rules->file_inputs, it.key()));
            const std::string text = SanitizeName(PlaceholderText(it.value(), is_input));
            ReplaceAll("{" + it.key() + "}", text, kNameBuildLimit, &name);
          }
          if (name_template.empty()) name = joined;
          if (name.find('{') != std::string::npos) {
            errors.Add(origin, "field 'name': template '" + name_template +
                                   "' names a field that is not an axis: '" + name + "'");
            break;
          }
          add_job(origin + " #" + std::to_string(k), name, kind, fields);
        }
      }
    }
  }
  if (!root.contains("jobs") && !root.contains("matrix")) {
    errors.Add("top level", "no \"jobs\" and no \"matrix\": nothing to run");
  }
  for (const std::string& key : default_keys) {
    if (defaults_used.count(key) == 0 && key != "name" && key != "kind" && !IsMetaKey(key)) {
      errors.Add("defaults", "field '" + key + "': not an option of any job's command");
    }
  }
  if (!errors.empty()) {
    jobs->clear();
    return errors.ToStatus();
  }
  return Status::Ok();
}

Status HashFileContent(const std::string& path, std::string* hex) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IoError(path + ": cannot open (" + std::strerror(errno) + ")");
  uint64_t h = 1469598103934665603ull;
  std::vector<unsigned char> buf(1 << 20);
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      return Status::IoError(path + ": read failed (" + std::strerror(e) + ")");
    }
    if (n == 0) break;
    for (ssize_t i = 0; i < n; ++i) h = (h ^ buf[static_cast<size_t>(i)]) * 1099511628211ull;
  }
  ::close(fd);
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(h));
  *hex = text;
  return Status::Ok();
}

std::string HashString(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char out[17];
  std::snprintf(out, sizeof(out), "%016llx", static_cast<unsigned long long>(h));
  return out;
}

Status FingerprintInputs(bool verify_inputs, BatchJob* job) {
  for (JobInput& in : job->inputs) {
    struct stat st;
    if (::stat(in.path.c_str(), &st) != 0) {
      return Status::IoError("job '" + job->name + "': input '" + in.path + "': " + std::strerror(errno));
    }
    in.size = static_cast<int64_t>(st.st_size);
    in.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    if (S_ISDIR(st.st_mode)) {
      // The files below the folder that the job reads (JobInput::folder_files): images, as
      // reconstruct lists them (a folder of none makes the job fail: its key is that of no
      // files), .tpfeat or .tpmatch files, or for any other input every file.
      std::vector<std::string> names;
      const Status s = ListFolder(
          in.path,
          [&](const std::string& f) {
            switch (in.folder_files) {
              case JobInput::kImages: return HasImageExtension(f);
              case JobInput::kFeatures: return IsFeaturesFileName(f);
              case JobInput::kMatches: return std::filesystem::path(f).extension() == ".tpmatch";
              default: return true;
            }
          },
          &names);
      if (!s.ok()) return Status::IoError("job '" + job->name + "': input '" + in.path + "': " + s.message());
      std::string listing, contents;
      in.size = 0;
      in.mtime_ns = 0;  // the folder's own stat changes with entries that are not inputs
      for (size_t i = 0; i < names.size(); ++i) {
        const std::string file = in.path + "/" + names[i];
        struct stat fst;
        // A dangling link, a pipe or a socket: listed by its name alone (the command reports
        // what it makes of it; a pipe would block the fingerprint).
        if (::stat(file.c_str(), &fst) != 0 || !S_ISREG(fst.st_mode)) {
          listing += names[i] + '\n';
          contents += names[i] + '\n';
          continue;
        }
        in.size += static_cast<int64_t>(fst.st_size);
        listing += names[i] + '\0' + std::to_string(fst.st_size) + '\0' + std::to_string(fst.st_mtim.tv_sec) + '.' +
                   std::to_string(fst.st_mtim.tv_nsec) + '\n';
        if (verify_inputs) {
          std::string hash;
          const Status s = HashFileContent(file, &hash);
          if (!s.ok()) return Status::IoError("job '" + job->name + "': " + s.message());
          contents += names[i] + '\0' + hash + '\n';
        }
      }
      in.listing_hash = HashString(listing);
      if (verify_inputs) in.content_hash = HashString(contents);
      continue;
    }
    if (verify_inputs && S_ISREG(st.st_mode)) {
      const Status s = HashFileContent(in.path, &in.content_hash);
      if (!s.ok()) return Status::IoError("job '" + job->name + "': " + s.message());
    }
  }
  return Status::Ok();
}

nlohmann::json BuildIdentity() {
  return {{"version", kVersion}, {"commit", kGitCommit}, {"flags", kBuildFlags}};
}

std::string JobKey(const BatchJob& job, bool by_content) {
  nlohmann::json inputs = nlohmann::json::array();
  for (const JobInput& in : job.inputs) {
    nlohmann::json e = {{"path", in.path}, {"size", in.size}};
    if (by_content) {
      e["content"] = in.content_hash;
    } else {
      e["mtime_ns"] = in.mtime_ns;
      if (!in.listing_hash.empty()) e["listing"] = in.listing_hash;
    }
    inputs.push_back(e);
  }
  const nlohmann::json key = {
      {"kind", job.kind}, {"args", job.args}, {"build", BuildIdentity()}, {"inputs", inputs}};
  return HashString(key.dump());
}

Status ParseShard(const std::string& text, int* index, int* count) {
  const size_t slash = text.find('/');
  char* end = nullptr;
  if (slash != std::string::npos) {
    const long i = std::strtol(text.c_str(), &end, 10);
    const bool i_ok = end == text.c_str() + slash && slash > 0;
    const char* rest = text.c_str() + slash + 1;
    const long n = std::strtol(rest, &end, 10);
    if (i_ok && end != rest && *end == '\0' && n >= 1 && n <= 100000 && i >= 0 && i < n) {
      *index = static_cast<int>(i);
      *count = static_cast<int>(n);
      return Status::Ok();
    }
  }
  return Status::InvalidOptions("--shard '" + text +
                                "': expected I/N with 0 <= I < N, e.g. 0/3 (Slurm: $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT)");
}

std::string ShellQuote(const std::string& arg) {
  if (!arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789_-.,/:=+@%") == std::string::npos) {
    return arg;
  }
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace tiepoint::cli
