#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>

namespace tiepoint::cli {

bool StderrIsTerminal() { return ::isatty(STDERR_FILENO) == 1; }

void ProgressLine::Update(const std::string& text) {
  if (!enabled_) return;
  std::fprintf(stderr, "\r\033[K%s", text.c_str());
  std::fflush(stderr);
  dirty_ = true;
}

void ProgressLine::Done() {
  if (!enabled_ || !dirty_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  dirty_ = false;
}

}  // namespace tiepoint::cli
