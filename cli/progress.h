// Terminal progress: shown only when stderr is a terminal (quiet when piped or in CI).
#pragma once

#include <string>

namespace tiepoint::cli {

bool StderrIsTerminal();

// A single-line status on stderr, rewritten in place ("\r"), cleared by Done().
class ProgressLine {
 public:
  explicit ProgressLine(bool enabled) : enabled_(enabled) {}
  ~ProgressLine() { Done(); }
  void Update(const std::string& text);
  void Done();

 private:
  bool enabled_;
  bool dirty_ = false;
};

}  // namespace tiepoint::cli
