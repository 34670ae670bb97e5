#include "ragd/common/status.h"

namespace ragd {

std::string_view status_code_name(StatusCode c) {
  switch (c) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kAlreadyExists: return "AlreadyExists";
    case StatusCode::kPermissionDenied: return "PermissionDenied";
    case StatusCode::kUnauthenticated: return "Unauthenticated";
    case StatusCode::kResourceExhausted: return "ResourceExhausted";
    case StatusCode::kFailedPrecondition: return "FailedPrecondition";
    case StatusCode::kUnavailable: return "Unavailable";
    case StatusCode::kCorruption: return "Corruption";
    case StatusCode::kIOError: return "IOError";
    case StatusCode::kUnimplemented: return "Unimplemented";
    case StatusCode::kCancelled: return "Cancelled";
    case StatusCode::kInternal: return "Internal";
  }
  return "Unknown";
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  std::string s(status_code_name(code_));
  s += ": ";
  s += message_;
  return s;
}

Status Status::with_context(std::string_view ctx) const {
  if (ok()) return *this;
  std::string m(ctx);
  m += ": ";
  m += message_;
  return Status(code_, std::move(m));
}

}  // namespace ragd
