#include "io/base/status.h"

namespace tiepoint {

const char* ToString(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidInput: return "invalid input";
    case StatusCode::kIoError: return "I/O error";
    case StatusCode::kInvalidOptions: return "invalid options";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kOutOfMemory: return "out of memory";
    case StatusCode::kNumerical: return "numerical failure";
    case StatusCode::kInsufficientData: return "not enough data";
    case StatusCode::kInternal: return "internal error";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(tiepoint::ToString(code_)) + ": " + message_;
}

int Status::ExitCode() const {
  switch (code_) {
    case StatusCode::kOk: return 0;
    case StatusCode::kInvalidInput:
    case StatusCode::kIoError:
    case StatusCode::kInvalidOptions: return 2;
    case StatusCode::kUnavailable:
    case StatusCode::kOutOfMemory: return 3;
    default: return 1;
  }
}

}  // namespace tiepoint
