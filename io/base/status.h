// Status: the error value every library function returns instead of throwing or exiting.
//
// A non-OK status carries a code and a message written for the user: it names the
// file, line or field and says what was expected (GTSAM-style errors that teach).
// CHECK-style asserts are for programmer bugs only; bad input always becomes a Status.
#pragma once

#include <string>
#include <utility>

namespace tiepoint {

enum class StatusCode {
  kOk = 0,
  kInvalidInput,    // a file or value the user gave is malformed (CLI exit code 2)
  kIoError,         // a file cannot be opened, read or written (CLI exit code 2)
  kInvalidOptions,  // options that make no sense together (CLI exit code 2)
  kUnavailable,     // a backend that is not built or a device that is absent (exit 3)
  kOutOfMemory,     // host or device memory exhausted (exit 3)
  kNumerical,       // a numerical failure the caller must hear about (exit 1)
  kInsufficientData,  // valid input that holds too little to give a result: no model (exit 1)
  kInternal,        // a bug: should never happen (exit 1)
};

const char* ToString(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidInput(std::string m) { return {StatusCode::kInvalidInput, std::move(m)}; }
  static Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
  static Status InvalidOptions(std::string m) { return {StatusCode::kInvalidOptions, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status OutOfMemory(std::string m) { return {StatusCode::kOutOfMemory, std::move(m)}; }
  static Status Numerical(std::string m) { return {StatusCode::kNumerical, std::move(m)}; }
  static Status InsufficientData(std::string m) { return {StatusCode::kInsufficientData, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid input: file.txt:12: expected ..." style, for printing.
  std::string ToString() const;

  // Exit code for the command line: 0 ok, 2 bad input/options/IO, 3 unavailable, 1 other.
  int ExitCode() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Propagates a non-OK status to the caller.
#define TIEPOINT_RETURN_IF_ERROR(expr)           \
  do {                                           \
    ::tiepoint::Status _tp_status = (expr);      \
    if (!_tp_status.ok()) return _tp_status;     \
  } while (0)

}  // namespace tiepoint
