// HTTP error bodies and the Status -> HTTP mapping.
#include "errors.h"

#include "ragd/common/json_writer.h"
#include "ragd/common/log.h"

namespace ragd::daemon {

HttpResponse error_response(int status, const std::string& code, const std::string& message, const std::string& param) {
  HttpResponse r;
  r.status = status;
  JsonWriter w;
  w.begin_object().key("error").begin_object();
  w.key("code").value(code).key("message").value(clip_input(message, kEchoMessageMaxBytes));
  w.key("type").value(status >= 500 ? "server_error" : "invalid_request_error");
  if (param.empty()) w.key("param").null();
  else w.key("param").value(clip_input(param));
  w.end_object().end_object();
  r.body = w.take();
  return r;
}

HttpResponse to_response(const ApiError& e) {
  HttpResponse r = error_response(e.status, e.code, e.message, e.param);
  r.headers = e.headers;
  return r;
}

ApiError bad_request(const std::string& param, const std::string& message) {
  return ApiError{400, "invalid_request", message, param, {}};
}

ApiError document_not_found(const std::string& id) {
  return {404, "document_not_found", "no document with id '" + clip_input(id) + "'", "id", {}};
}

ApiError from_status(const Status& st, int retry_after_s, const std::string& request_id) {
  // Messages of these codes describe the request; the rest may describe the server.
  auto hidden = [&](int status, const char* code, const char* message) {
    log::daemon()->error("{} {} -> {}: {}", request_id.empty() ? "-" : request_id, code, status,
                         clip_input(st.to_string(), kEchoMessageMaxBytes));
    std::string m = message;
    if (!request_id.empty()) m += " (request " + request_id + ")";
    return ApiError{status, code, m, "", {}};
  };
  switch (st.code()) {
    case StatusCode::kInvalidArgument: return {400, "invalid_request", st.message(), "", {}};
    case StatusCode::kNotFound: return {404, "not_found", st.message(), "", {}};
    case StatusCode::kAlreadyExists: return {409, "already_exists", st.message(), "", {}};
    case StatusCode::kPermissionDenied: return {403, "forbidden", st.message(), "", {}};
    case StatusCode::kUnauthenticated: return {401, "unauthorized", st.message(), "", {}};
    case StatusCode::kResourceExhausted:
      return {429, "overloaded", st.message(), "", {{"Retry-After", std::to_string(retry_after_s)}}};
    case StatusCode::kCancelled: return {499, "cancelled", st.message(), "", {}};
    case StatusCode::kUnimplemented: return {501, "unimplemented", st.message(), "", {}};
    case StatusCode::kFailedPrecondition:
      return hidden(409, "failed_precondition", "the server cannot do this in its current state");
    case StatusCode::kUnavailable: {
      ApiError e = hidden(503, "unavailable", "the service is temporarily unavailable");
      e.headers.emplace_back("Retry-After", std::to_string(retry_after_s));
      return e;
    }
    default: return hidden(500, "internal", "internal server error");
  }
}

}  // namespace ragd::daemon
