// Private to the daemon: HTTP-level errors and their JSON body
// {"error": {"code", "message", "type", "param"}}.
//
// Client-facing messages never carry server internals (paths, storage offsets, Status text of
// storage failures): from_status() keeps the message only for the codes whose messages describe
// the request itself (400, 401, 403, 404, 409 duplicates, 429); everything else gets a generic
// message and the details go to the log under the request id.
// Thread-safety: value types and pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ragd/common/echo.h"
#include "ragd/common/status.h"
#include "ragd/daemon/server.h"

namespace ragd::daemon {

// An HTTP-level failure: status, machine code, human message naming the field/problem.
struct ApiError {
  int status = 0;
  std::string code, message, param;
  std::vector<std::pair<std::string, std::string>> headers;
  bool failed() const { return status != 0; }
};

// Client input quoted in a message goes through clip_input (ragd/common/echo.h): 128 bytes, then
// "…(N bytes)".

// error_response(status, code, message, param) is declared in server.h (the transport uses it).
HttpResponse to_response(const ApiError& e);
ApiError bad_request(const std::string& param, const std::string& message);
// Status from a module -> HTTP error (InvalidArgument 400, NotFound 404, ResourceExhausted 429,
// ...). `request_id` names the log line that holds the details of a sanitised message.
ApiError from_status(const Status& st, int retry_after_s, const std::string& request_id = "");
// 404 for a document that is absent or not visible to the caller (the two are indistinguishable).
ApiError document_not_found(const std::string& id);

}  // namespace ragd::daemon
