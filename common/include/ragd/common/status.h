// Status and Result<T>: the error currency at every module boundary.
//
// Soft outcomes ("cache miss", "no free block") are ordinary values, not errors. A Status names
// the problem in its message (file, field, value) so that the HTTP edge can pass it on unchanged.
// Thread-safety: value types, no shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace ragd {

enum class StatusCode : uint8_t {
  kOk = 0,
  kInvalidArgument,    // malformed input from a user or a file (HTTP 400)
  kNotFound,           // a named thing does not exist (404)
  kAlreadyExists,      // (409)
  kPermissionDenied,   // (403)
  kUnauthenticated,    // (401)
  kResourceExhausted,  // capacity or rate limit (429)
  kFailedPrecondition, // valid input, wrong state (409)
  kUnavailable,        // not ready, tier disabled (503)
  kCorruption,         // checksum or format violation in stored data
  kIOError,            // OS / storage failure
  kUnimplemented,      // supported by the format, not by this build
  kCancelled,
  kInternal,           // a bug (500)
};

std::string_view status_code_name(StatusCode c);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return {}; }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status PermissionDenied(std::string m) { return {StatusCode::kPermissionDenied, std::move(m)}; }
  static Status Unauthenticated(std::string m) { return {StatusCode::kUnauthenticated, std::move(m)}; }
  static Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
  static Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status IOError(std::string m) { return {StatusCode::kIOError, std::move(m)}; }
  static Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
  static Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: config.json: field 'hidden_size' missing"
  std::string to_string() const;

  // Prefixes context: st.with_context("model.safetensors") -> "model.safetensors: <msg>".
  Status with_context(std::string_view ctx) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Result<T>: either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(implicit)
  Result(Status st) : v_(std::move(st)) {}   // NOLINT(implicit); must not be OK

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace ragd

#define RAGD_CONCAT_INNER(a, b) a##b
#define RAGD_CONCAT(a, b) RAGD_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` is not OK.
#define RAGD_RETURN_IF_ERROR(expr)                \
  do {                                            \
    ::ragd::Status _st = (expr);                  \
    if (!_st.ok()) return _st;                    \
  } while (0)

// RAGD_ASSIGN_OR_RETURN(auto x, make_x()); returns the error Status if make_x() failed.
#define RAGD_ASSIGN_OR_RETURN(lhs, rexpr) \
  RAGD_ASSIGN_OR_RETURN_IMPL(RAGD_CONCAT(_res_, __LINE__), lhs, rexpr)
#define RAGD_ASSIGN_OR_RETURN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                               \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
