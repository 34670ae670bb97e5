// The route table and dispatch: operations routes (no auth) and /v1 routes (API key first, then
// the table), 404 / 405 with Allow, readiness, and WebSocket admission.
#include <string_view>
#include <vector>

#include "api_impl.h"
#include "ragd/common/log.h"

namespace ragd::daemon {

namespace {

using Params = std::vector<std::string>;  // decoded path parameters, in order
using RouteFn = void (*)(ApiImpl&, const ReqCtx&, const HttpRequest&, const Params&, const Responder&);

struct Route {
  const char* method;                  // "GET", "POST", "DELETE"; "*" = any (the handler answers)
  std::vector<std::string_view> path;  // segments; "{}" is a parameter
  const char* label;                   // metric label and log name
  bool authenticated;                  // /v1 routes: API key checked before matching
  bool needs_ready;                    // 503 until the runtime is attached
  RouteFn fn;
};

// The method as a metric label value: the standard methods as themselves, anything else "other".
// The transport accepts any token as a method; a label per distinct method would let a client
// grow the metrics registry (and /metrics) without bound.
const char* method_label(const std::string& method) {
  for (const char* m : {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE"})
    if (method == m) return m;
  return "other";
}

void json_ok(const Responder& respond, std::string body) {
  HttpResponse r;
  r.body = std::move(body);
  respond(std::move(r));
}

const std::vector<Route>& routes() {
  static const std::vector<Route> table = {
      // The web console: static, no API key (its API calls carry one).
      {"GET", {}, "/", false, false,
       [](ApiImpl&, const ReqCtx&, const HttpRequest& req, const Params&, const Responder& respond) {
         respond(console_response(req, "index.html"));
       }},
      {"GET", {"console"}, "/console", false, false,
       [](ApiImpl&, const ReqCtx&, const HttpRequest& req, const Params&, const Responder& respond) {
         respond(console_response(req, "index.html"));
       }},
      {"GET", {"console", "{}"}, "/console/{file}", false, false,
       [](ApiImpl&, const ReqCtx&, const HttpRequest& req, const Params& p, const Responder& respond) {
         respond(console_response(req, p[0]));
       }},
      {"GET", {"healthz"}, "/healthz", false, false,
       [](ApiImpl&, const ReqCtx&, const HttpRequest&, const Params&, const Responder& respond) {
         json_ok(respond, R"({"status":"ok"})");
       }},
      {"GET", {"readyz"}, "/readyz", false, false,
       [](ApiImpl& api, const ReqCtx&, const HttpRequest&, const Params&, const Responder& respond) {
         if (ApiError e = api.require_ready(); e.failed()) return respond(to_response(e));
         json_ok(respond, api.readiness_json());
       }},
      {"GET", {"metrics"}, "/metrics", false, false,
       [](ApiImpl& api, const ReqCtx&, const HttpRequest& req, const Params&, const Responder& respond) {
         bool full = false;
         if (ApiError e = api.metrics_access(req, &full); e.failed()) return respond(to_response(e));
         HttpResponse r;
         r.content_type = "text/plain; version=0.0.4; charset=utf-8";
         r.body = api.render_metrics(full);
         respond(std::move(r));
       }},
      {"GET", {"v1", "pipelines"}, "/v1/pipelines", true, true,
       [](ApiImpl& api, const ReqCtx&, const HttpRequest&, const Params&, const Responder& respond) {
         bool found = false;
         json_ok(respond, api.pipelines_json("", &found));
       }},
      {"GET", {"v1", "pipelines", "{}"}, "/v1/pipelines/{name}", true, true,
       [](ApiImpl& api, const ReqCtx&, const HttpRequest&, const Params& p, const Responder& respond) {
         bool found = false;
         std::string body = api.pipelines_json(p[0], &found);
         if (!found) return respond(to_response({404, "pipeline_not_found", "unknown pipeline '" + clip_input(p[0]) + "'", "name", {}}));
         json_ok(respond, std::move(body));
       }},
      {"POST", {"v1", "pipelines", "{}", "runs"}, "/v1/pipelines/{name}/runs", true, true,
       [](ApiImpl& api, const ReqCtx& ctx, const HttpRequest& req, const Params& p, const Responder& respond) {
         api.pipeline_run(ctx, p[0], req, respond);
       }},
      {"POST", {"v1", "documents"}, "/v1/documents", true, true,
       [](ApiImpl& api, const ReqCtx& ctx, const HttpRequest& req, const Params&, const Responder& respond) {
         api.documents_post(ctx, req, respond);
       }},
      {"GET", {"v1", "documents"}, "/v1/documents", true, true,
       [](ApiImpl& api, const ReqCtx& ctx, const HttpRequest& req, const Params&, const Responder& respond) {
         api.documents_list(ctx, req, respond);
       }},
      {"GET", {"v1", "documents", "{}"}, "/v1/documents/{id}", true, true,
       [](ApiImpl& api, const ReqCtx& ctx, const HttpRequest&, const Params& p, const Responder& respond) {
         api.documents_get(ctx, p[0], respond);
       }},
      {"DELETE", {"v1", "documents", "{}"}, "/v1/documents/{id}", true, true,
       [](ApiImpl& api, const ReqCtx& ctx, const HttpRequest&, const Params& p, const Responder& respond) {
         api.documents_delete(ctx, p[0], respond);
       }},
      {"POST", {"v1", "chat", "completions"}, "/v1/chat/completions", true, true,
       [](ApiImpl& api, const ReqCtx& ctx, const HttpRequest& req, const Params&, const Responder& respond) {
         api.chat_completions(ctx, req, respond, true);
       }},
      {"POST", {"v1", "completions"}, "/v1/completions", true, true,
       [](ApiImpl& api, const ReqCtx& ctx, const HttpRequest& req, const Params&, const Responder& respond) {
         api.chat_completions(ctx, req, respond, false);
       }},
      {"POST", {"v1", "embeddings"}, "/v1/embeddings", true, true,
       [](ApiImpl& api, const ReqCtx& ctx, const HttpRequest& req, const Params&, const Responder& respond) {
         api.embeddings(ctx, req, respond);
       }},
      {"POST", {"v1", "rerank"}, "/v1/rerank", true, true,
       [](ApiImpl& api, const ReqCtx& ctx, const HttpRequest& req, const Params&, const Responder& respond) {
         api.rerank(ctx, req, respond);
       }},
      {"GET", {"v1", "models"}, "/v1/models", true, true,
       [](ApiImpl& api, const ReqCtx& ctx, const HttpRequest&, const Params&, const Responder& respond) {
         api.models(ctx, "", respond);
       }},
      {"GET", {"v1", "models", "{}"}, "/v1/models/{id}", true, true,
       [](ApiImpl& api, const ReqCtx& ctx, const HttpRequest&, const Params& p, const Responder& respond) {
         api.models(ctx, p[0], respond);
       }},
      {"GET", {"v1", "cache", "stats"}, "/v1/cache/stats", true, false,
       [](ApiImpl& api, const ReqCtx& ctx, const HttpRequest&, const Params&, const Responder& respond) {
         json_ok(respond, api.cache_stats_json(ctx));
       }},
      {"*", {"v1", "stream"}, "/v1/stream", true, false,
       [](ApiImpl&, const ReqCtx&, const HttpRequest&, const Params&, const Responder& respond) {
         respond(to_response({426, "upgrade_required",
                              "/v1/stream is a WebSocket endpoint: send an Upgrade: websocket request", "",
                              {{"Upgrade", "websocket"}}}));
       }},
  };
  return table;
}

std::vector<std::string_view> split_path(std::string_view p) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < p.size()) {
    if (p[i] == '/') {
      ++i;
      continue;
    }
    size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    out.push_back(p.substr(i, j - i));
    i = j;
  }
  return out;
}

bool path_matches(const Route& r, const std::vector<std::string_view>& seg) {
  if (r.path.size() != seg.size()) return false;
  for (size_t i = 0; i < seg.size(); ++i)
    if (r.path[i] != "{}" && r.path[i] != seg[i]) return false;
  return true;
}

bool method_matches(const Route& r, const std::string& method) {
  std::string_view m = r.method;
  return m == "*" || m == method || (m == "GET" && method == "HEAD" && !r.authenticated);
}

}  // namespace

ApiError ApiImpl::require_ready() const {
  if (shutting_down_.load()) return {503, "shutting_down", "server is shutting down", "", {{"Retry-After", "5"}}};
  pipelines::Executor* ex = executor();
  if (!ex || !documents()) return {503, "not_ready", "model and stores are still loading", "", {{"Retry-After", "1"}}};
  if (!ex->ready()) return {503, "not_ready", "executor is not ready", "", {{"Retry-After", "1"}}};
  return {};
}

HttpResponse ApiImpl::transport_error(int status, const std::string& code, const std::string& message) {
  metrics_.http_requests->inc({"transport", "-", std::to_string(status)});
  log::daemon()->warn("transport rejected a request: {} {}", status, clip_input(message, kEchoMessageMaxBytes));
  return error_response(status, code, message);
}

void ApiImpl::handle(HttpRequest req, Responder respond_raw) {
  auto ctx = std::make_shared<ReqCtx>();
  ctx->id = new_request_id(&req);
  ctx->route = "unmatched";
  const std::string method = req.method;
  const std::string path = req.path;
  // Both are the client's: quoted clipped in messages and logs.
  const std::string shown_method = clip_input(method), shown_path = clip_input(path);
  // Counting and logging wrapper: every answer passes here once. Error bodies are bounded by
  // error_response().
  Responder respond = [self = shared_from_this(), ctx, method, shown_method, shown_path, respond_raw](HttpResponse r) {
    r.headers.emplace_back("X-Request-Id", ctx->id);
    self->metrics_.http_requests->inc({ctx->route, method_label(method), std::to_string(r.status)});
    double ms = ms_since(ctx->t0);
    if (r.status >= 500) log::daemon()->error("{} {} {} -> {} ({:.1f} ms) {}", ctx->id, shown_method, shown_path, r.status, ms, r.body);
    else if (r.status >= 400) log::daemon()->info("{} {} {} -> {} ({:.1f} ms) {}", ctx->id, shown_method, shown_path, r.status, ms, r.body);
    else log::daemon()->debug("{} {} {} -> {} ({:.1f} ms)", ctx->id, shown_method, shown_path, r.status, ms);
    respond_raw(std::move(r));
  };
  auto fail = [&](const ApiError& e) { respond(to_response(e)); };
  // A connection accepted above a connection cap serves only the health endpoints.
  if (!req.connection_limit.empty() && path != "/healthz" && path != "/readyz") {
    ctx->route = "connection_limit";
    return fail({503, "too_many_connections",
                 req.connection_limit + "; this connection serves only /healthz and /readyz, retry later", "",
                 {{"Retry-After", "1"}}});
  }
  const auto seg = split_path(path);
  const bool v1 = !seg.empty() && seg[0] == "v1";
  if (v1) {
    if (ApiError e = authenticate(req, ctx.get(), path == "/v1/stream"); e.failed()) {
      ctx->route = "auth";
      return fail(e);
    }
  }
  const Route* route = nullptr;
  std::string allow;
  for (const Route& r : routes()) {
    if (r.authenticated != v1 || !path_matches(r, seg)) continue;
    ctx->route = r.label;
    if (std::string_view(r.method) != "*") allow += allow.empty() ? r.method : std::string(", ") + r.method;
    if (!route && method_matches(r, method)) route = &r;
  }
  if (!route && allow.empty()) return fail({404, "route_not_found", "no route for " + shown_method + " " + shown_path, "", {}});
  if (!route)
    return fail({405, "method_not_allowed", "method " + shown_method + " is not allowed on " + shown_path + " (allowed: " + allow + ")",
                 "", {{"Allow", allow}}});
  Params params;
  for (size_t i = 0; i < seg.size(); ++i) {
    if (route->path[i] != "{}") continue;
    bool ok = false;
    params.push_back(percent_decode(seg[i], &ok));
    if (!ok) return fail(bad_request("path", "bad percent-encoding in path segment '" + clip_input(seg[i]) + "'"));
  }
  if (route->needs_ready) {
    if (ApiError e = require_ready(); e.failed()) return fail(e);
  }
  route->fn(*this, *ctx, req, params, respond);
}

std::shared_ptr<WsHandler> ApiImpl::open_ws(const HttpRequest& req, std::shared_ptr<StreamWriter> out, HttpResponse* reject) {
  ReqCtx ctx;
  ctx.id = new_request_id(&req);
  ctx.route = "/v1/stream";
  auto rejected = [&](const ApiError& e) {
    *reject = to_response(e);
    reject->headers.emplace_back("X-Request-Id", ctx.id);
    metrics_.http_requests->inc({ctx.route, "GET", std::to_string(e.status)});
    log::daemon()->info("{} websocket {} rejected: {} {}", ctx.id, clip_input(req.path), e.status,
                        clip_input(e.message, kEchoMessageMaxBytes));
    return nullptr;
  };
  if (req.path != "/v1/stream") return rejected({404, "route_not_found", "no WebSocket endpoint at " + clip_input(req.path), "", {}});
  ApiError e = authenticate(req, &ctx, true);
  if (e.failed()) return rejected(e);
  metrics_.http_requests->inc({ctx.route, "GET", "101"});
  log::daemon()->info("{} websocket opened from {} (tenant {})", ctx.id, req.remote, ctx.tenant);
  return make_ws_handler(std::move(ctx), std::move(out));
}

}  // namespace ragd::daemon
