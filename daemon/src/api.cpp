// Api: routing, auth, limits, JSON field helpers, documents, operations routes.
#include <algorithm>
#include <cmath>
#include <cctype>
#include <random>

#include <strings.h>

#include "api_impl.h"
#include "ragd/common/log.h"

namespace ragd::daemon {

// ---------------------------------------------------------------------------------------------
// errors and helpers

HttpResponse error_response(int status, const std::string& code, const std::string& message, const std::string& param) {
  HttpResponse r;
  r.status = status;
  JsonWriter w;
  w.begin_object().key("error").begin_object();
  w.key("code").value(code).key("message").value(message);
  w.key("type").value(status >= 500 ? "server_error" : "invalid_request_error");
  if (param.empty()) w.key("param").null();
  else w.key("param").value(param);
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

ApiError from_status(const Status& st, int retry_after_s) {
  switch (st.code()) {
    case StatusCode::kInvalidArgument: return {400, "invalid_request", st.message(), "", {}};
    case StatusCode::kNotFound: return {404, "not_found", st.message(), "", {}};
    case StatusCode::kAlreadyExists: return {409, "already_exists", st.message(), "", {}};
    case StatusCode::kFailedPrecondition: return {409, "failed_precondition", st.message(), "", {}};
    case StatusCode::kPermissionDenied: return {403, "forbidden", st.message(), "", {}};
    case StatusCode::kUnauthenticated: return {401, "unauthorized", st.message(), "", {}};
    case StatusCode::kResourceExhausted:
      return {429, "overloaded", st.message(), "", {{"Retry-After", std::to_string(retry_after_s)}}};
    case StatusCode::kUnavailable: return {503, "unavailable", st.message(), "", {}};
    case StatusCode::kCancelled: return {499, "cancelled", st.message(), "", {}};
    case StatusCode::kUnimplemented: return {501, "unimplemented", st.message(), "", {}};
    default: return {500, "internal", st.to_string(), "", {}};
  }
}

ApiError parse_object(const std::string& body, simdjson::dom::object* out) {
  thread_local simdjson::dom::parser parser;
  if (body.empty()) return bad_request("", "request body is empty; expected a JSON object");
  simdjson::dom::element doc;
  auto err = parser.parse(body.data(), body.size(), true).get(doc);
  if (err) return {400, "invalid_json", std::string("malformed JSON: ") + simdjson::error_message(err), "", {}};
  if (doc.get_object().get(*out)) return {400, "invalid_json", "request body must be a JSON object", "", {}};
  return {};
}

namespace {
const char* type_of(const simdjson::dom::element& e) {
  switch (e.type()) {
    case simdjson::dom::element_type::ARRAY: return "array";
    case simdjson::dom::element_type::OBJECT: return "object";
    case simdjson::dom::element_type::INT64:
    case simdjson::dom::element_type::UINT64: return "integer";
    case simdjson::dom::element_type::DOUBLE: return "number";
    case simdjson::dom::element_type::STRING: return "string";
    case simdjson::dom::element_type::BOOL: return "boolean";
    case simdjson::dom::element_type::NULL_VALUE: return "null";
  }
  return "?";
}
}  // namespace

std::optional<simdjson::dom::element> Fields::get(const char* key) const {
  simdjson::dom::element e;
  if (obj_[key].get(e)) return std::nullopt;
  if (e.is_null()) return std::nullopt;
  return e;
}

bool Fields::has(const char* key) const { return get(key).has_value(); }

ApiError Fields::str(const char* key, std::string* out, bool required) const {
  auto e = get(key);
  if (!e) return required ? bad_request(name(key), "field '" + name(key) + "' is required") : ApiError{};
  std::string_view sv;
  if (e->get_string().get(sv))
    return bad_request(name(key), "field '" + name(key) + "' must be a string, got " + type_of(*e));
  *out = std::string(sv);
  return {};
}

ApiError Fields::integer(const char* key, int64_t* out, int64_t lo, int64_t hi, bool* present) const {
  if (present) *present = false;
  auto e = get(key);
  if (!e) return {};
  int64_t v = 0;
  if (e->type() == simdjson::dom::element_type::DOUBLE) {
    double d = 0;
    if (e->get_double().get(d)) d = 0.5;
    if (d != std::floor(d) || std::fabs(d) > 9e15)
      return bad_request(name(key), "field '" + name(key) + "' must be an integer, got " + std::to_string(d));
    v = static_cast<int64_t>(d);
  } else if (e->get_int64().get(v)) {
    if (e->type() == simdjson::dom::element_type::UINT64)
      return bad_request(name(key), "field '" + name(key) + "' is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return bad_request(name(key), "field '" + name(key) + "' must be an integer, got " + type_of(*e));
  }
  if (v < lo || v > hi)
    return bad_request(name(key), "field '" + name(key) + "' is out of range [" + std::to_string(lo) + ", " +
                                      std::to_string(hi) + "], got " + std::to_string(v));
  *out = v;
  if (present) *present = true;
  return {};
}

ApiError Fields::uinteger(const char* key, uint64_t* out, bool* present) const {
  if (present) *present = false;
  auto e = get(key);
  if (!e) return {};
  int64_t sv = 0;
  if (e->get_uint64().get(*out)) {
    if (!e->get_int64().get(sv))
      return bad_request(name(key), "field '" + name(key) + "' must be >= 0, got " + std::to_string(sv));
    return bad_request(name(key), "field '" + name(key) + "' must be a non-negative integer, got " + type_of(*e));
  }
  if (present) *present = true;
  return {};
}

ApiError Fields::number(const char* key, double* out, double lo, double hi, bool* present) const {
  if (present) *present = false;
  auto e = get(key);
  if (!e) return {};
  double v = 0;
  if (e->type() == simdjson::dom::element_type::BOOL || e->get_double().get(v))
    return bad_request(name(key), "field '" + name(key) + "' must be a number, got " + type_of(*e));
  if (!(v >= lo && v <= hi)) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "' is out of range [%g, %g], got %g", lo, hi, v);
    return bad_request(name(key), "field '" + name(key) + buf);
  }
  *out = v;
  if (present) *present = true;
  return {};
}

ApiError Fields::boolean(const char* key, bool* out, bool* present) const {
  if (present) *present = false;
  auto e = get(key);
  if (!e) return {};
  if (e->get_bool().get(*out))
    return bad_request(name(key), "field '" + name(key) + "' must be a boolean, got " + type_of(*e));
  if (present) *present = true;
  return {};
}

ApiError Fields::only(std::initializer_list<const char*> allowed) const {
  for (auto [k, v] : obj_) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || k == a;
    if (!ok) return bad_request(prefix_ + std::string(k), "unknown field '" + prefix_ + std::string(k) + "'");
  }
  return {};
}

std::string percent_decode(std::string_view s, bool* ok) {
  *ok = true;
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
      };
      if (i + 2 >= s.size()) {
        *ok = false;
        return {};
      }
      int a = hex(s[i + 1]), b = hex(s[i + 2]);
      if (a < 0 || b < 0) {
        *ok = false;
        return {};
      }
      out += static_cast<char>(a * 16 + b);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

void write_sources(JsonWriter& w, const std::vector<pipelines::Source>& s) {
  w.begin_array();
  for (const auto& src : s) {
    w.begin_object();
    w.key("doc_id").value(src.doc_id).key("chunk_id").value(src.chunk_id);
    w.key("score").value(src.score).key("snippet").value(src.snippet);
    w.end_object();
  }
  w.end_array();
}

void write_usage(JsonWriter& w, const pipelines::Usage& u) {
  w.begin_object();
  w.key("prompt_tokens").value(u.prompt_tokens).key("completion_tokens").value(u.completion_tokens);
  w.key("reused_tokens").begin_object();
  w.key("hbm").value(u.reused_hbm).key("dram").value(u.reused_dram).key("ssd").value(u.reused_ssd);
  w.end_object();
  w.key("recomputed_tokens").value(u.recomputed_tokens);
  w.end_object();
}

void write_timings(JsonWriter& w, const pipelines::Timings& t) {
  w.begin_object();
  w.key("queue_ms").value(t.queue_ms).key("retrieval_ms").value(t.retrieval_ms);
  w.key("kv_load_ms").value(t.kv_load_ms).key("prefill_ms").value(t.prefill_ms);
  w.key("ttft_ms").value(t.ttft_ms).key("tpot_ms").value(t.tpot_ms).key("total_ms").value(t.total_ms);
  w.end_object();
}

// ---------------------------------------------------------------------------------------------
// ApiImpl

ApiImpl::ApiImpl(const DaemonConfig& cfg)
    : cfg_(cfg), blocking_(2, 256, "ragd-blocking"), limiter_(cfg.limits) {
  std::random_device rd;
  id_prefix_ = (static_cast<uint64_t>(rd()) << 16 ^ rd()) & 0xffffffull;
  created_unix_ = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  http_requests_ = &reg_.counter("ragd_http_requests_total", "HTTP requests by route, method and status", {"route", "method", "status"});
  ttft_ = &reg_.histogram("ragd_time_to_first_token_seconds", "Time from request arrival to the first generated token", {}, token_latency_buckets());
  tpot_ = &reg_.histogram("ragd_time_per_output_token_seconds", "Mean time per output token after the first, per request", {}, token_latency_buckets());
  itl_ = &reg_.histogram("ragd_inter_token_latency_seconds", "Time between consecutive tokens of a request", {}, token_latency_buckets());
  e2e_ = &reg_.histogram("ragd_e2e_request_latency_seconds", "Request latency from arrival to done or error", {}, request_latency_buckets());
  queue_time_ = &reg_.histogram("ragd_request_queue_time_seconds", "Time a run waited in the executor queue", {}, request_latency_buckets());
  prompt_tokens_ = &reg_.counter("ragd_prompt_tokens_total", "Prompt tokens of finished runs");
  generated_tokens_ = &reg_.counter("ragd_generation_tokens_total", "Generated tokens of finished runs");
  reused_tokens_ = &reg_.counter("ragd_reused_tokens_total", "Prompt tokens served from cached KV, by tier", {"tier"});
  recomputed_tokens_ = &reg_.counter("ragd_recomputed_tokens_total", "Prompt tokens whose KV was computed");
  runs_total_ = &reg_.counter("ragd_runs_total", "Finished runs by route and finish reason", {"route", "finish_reason"});
  running_g_ = &reg_.gauge("ragd_requests_running", "Runs that have started producing events");
  waiting_g_ = &reg_.gauge("ragd_requests_waiting", "Runs submitted and waiting for their first event");
  kv_bytes_g_ = &reg_.gauge("ragd_kv_cache_bytes", "KV bytes held per tier", {"tier"});
  cache_hits_ = &reg_.gauge("ragd_kv_cache_hits", "KV cache hits per tier (cumulative, mirrored from the executor)", {"tier"});
  cache_misses_ = &reg_.gauge("ragd_kv_cache_misses", "KV cache misses per tier (cumulative, mirrored from the executor)", {"tier"});
  executor_stat_g_ = &reg_.gauge("ragd_executor_stat", "Every numeric field of the executor's stats, by JSON path", {"key"});
  ready_g_ = &reg_.gauge("ragd_ready", "1 when the runtime is loaded and serving");
  if (!cfg_.runtime.data_dir.empty()) {
    Status st = owners_.open(cfg_.runtime.data_dir + "/daemon");
    if (!st.ok()) log::daemon()->error("document owners: {}", st.to_string());
  }
}

ApiImpl::~ApiImpl() { blocking_.stop(); }

std::string ApiImpl::new_request_id(const HttpRequest* req) {
  if (req) {
    const std::string& h = req->header("x-request-id");
    bool ok = !h.empty() && h.size() <= 64;
    for (char c : h) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.');
    if (ok) return h;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "req-%06llx%06llx", static_cast<unsigned long long>(id_prefix_),
                static_cast<unsigned long long>(next_id_.fetch_add(1) + 1));
  return buf;
}

ApiError ApiImpl::authenticate(const HttpRequest& req, ReqCtx* ctx) const {
  ctx->tenant = "default";
  if (cfg_.auth.keys.empty()) return {};
  std::string key;
  const std::string& h = req.header("authorization");
  if (!h.empty()) {
    if (h.size() < 7 || strncasecmp(h.c_str(), "Bearer ", 7) != 0)
      return {401, "unauthorized", "Authorization header must be 'Bearer <api key>'", "", {{"WWW-Authenticate", "Bearer"}}};
    key = h.substr(7);
    while (!key.empty() && key.front() == ' ') key.erase(key.begin());
  } else {
    // Browsers cannot set headers on WebSocket upgrades: accept ?api_key= there.
    auto pos = req.query.find("api_key=");
    if (pos != std::string::npos && (pos == 0 || req.query[pos - 1] == '&')) {
      auto end = req.query.find('&', pos);
      bool ok = false;
      key = percent_decode(req.query.substr(pos + 8, end == std::string::npos ? std::string::npos : end - pos - 8), &ok);
    }
  }
  if (key.empty())
    return {401, "unauthorized", "missing API key: send 'Authorization: Bearer <api key>'", "", {{"WWW-Authenticate", "Bearer"}}};
  auto it = cfg_.auth.keys.find(key);
  if (it == cfg_.auth.keys.end()) return {401, "unauthorized", "invalid API key", "", {{"WWW-Authenticate", "Bearer"}}};
  ctx->tenant = it->second;
  ctx->authed_by_key = true;
  return {};
}

ApiError ApiImpl::acquire_slot(const std::string& tenant, std::shared_ptr<void>* slot) {
  *slot = limiter_.acquire(tenant);
  if (*slot) return {};
  return {429, "rate_limited",
          "tenant '" + tenant + "' is at its limit of " + std::to_string(limiter_.limit(tenant)) + " concurrent requests",
          "", {{"Retry-After", std::to_string(cfg_.limits.retry_after_s)}}};
}

ApiError ApiImpl::require_ready() const {
  if (shutting_down_.load()) return {503, "shutting_down", "server is shutting down", "", {{"Retry-After", "5"}}};
  pipelines::Executor* ex = executor();
  if (!ex || !documents()) return {503, "not_ready", "model and stores are still loading", "", {{"Retry-After", "1"}}};
  if (!ex->ready()) return {503, "not_ready", "executor is not ready", "", {{"Retry-After", "1"}}};
  return {};
}

HttpResponse ApiImpl::transport_error(int status, const std::string& code, const std::string& message) {
  http_requests_->inc({"transport", "-", std::to_string(status)});
  log::daemon()->warn("transport rejected a request: {} {}", status, message);
  return error_response(status, code, message);
}

namespace {
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
}  // namespace

void ApiImpl::handle(HttpRequest req, Responder respond_raw) {
  auto ctx = std::make_shared<ReqCtx>();
  ctx->id = new_request_id(&req);
  ctx->route = "unmatched";
  const std::string method = req.method;
  const std::string path = req.path;
  // Counting and logging wrapper: every answer passes here once.
  Responder respond = [self = shared_from_this(), ctx, method, path, respond_raw](HttpResponse r) {
    r.headers.emplace_back("X-Request-Id", ctx->id);
    self->http_requests_->inc({ctx->route, method, std::to_string(r.status)});
    double ms = ms_since(ctx->t0);
    if (r.status >= 500) log::daemon()->error("{} {} {} -> {} ({:.1f} ms) {}", ctx->id, method, path, r.status, ms, r.body);
    else if (r.status >= 400) log::daemon()->info("{} {} {} -> {} ({:.1f} ms) {}", ctx->id, method, path, r.status, ms, r.body);
    else log::daemon()->debug("{} {} {} -> {} ({:.1f} ms)", ctx->id, method, path, r.status, ms);
    respond_raw(std::move(r));
  };
  auto fail = [&](const ApiError& e) { respond(to_response(e)); };
  auto seg = split_path(path);
  auto method_not_allowed = [&](const char* allow) {
    ApiError e{405, "method_not_allowed", "method " + method + " is not allowed on " + path + " (allowed: " + allow + ")", "", {{"Allow", allow}}};
    fail(e);
  };

  // Operations (no auth).
  if (seg.size() == 1 && (seg[0] == "healthz" || seg[0] == "readyz" || seg[0] == "metrics")) {
    ctx->route = "/" + std::string(seg[0]);
    if (method != "GET" && method != "HEAD") return method_not_allowed("GET");
    HttpResponse r;
    if (seg[0] == "healthz") {
      r.body = R"({"status":"ok"})";
    } else if (seg[0] == "readyz") {
      ApiError e = require_ready();
      if (e.failed()) return fail(e);
      r.body = R"({"status":"ready"})";
    } else {
      r.content_type = "text/plain; version=0.0.4; charset=utf-8";
      r.body = render_metrics();
    }
    return respond(std::move(r));
  }
  if (seg.empty() || seg[0] != "v1") {
    return fail({404, "route_not_found", "no route for " + method + " " + path, "", {}});
  }
  ApiError auth = authenticate(req, ctx.get());
  if (auth.failed()) {
    ctx->route = "auth";
    return fail(auth);
  }
  auto need_ready = [&]() {
    ApiError e = require_ready();
    if (e.failed()) fail(e);
    return !e.failed();
  };
  auto decoded = [&](std::string_view s, std::string* out) {
    bool ok = false;
    *out = percent_decode(s, &ok);
    if (!ok) fail(bad_request("path", "bad percent-encoding in path segment '" + std::string(s) + "'"));
    return ok;
  };

  // /v1/pipelines[...]
  if (seg.size() >= 2 && seg[1] == "pipelines") {
    if (seg.size() == 2) {
      ctx->route = "/v1/pipelines";
      if (method != "GET") return method_not_allowed("GET");
      if (!need_ready()) return;
      JsonWriter w;
      w.begin_object().key("object").value("list").key("data").begin_array();
      for (const auto& p : executor()->pipelines()) {
        w.begin_object().key("name").value(p.name).key("description").value(p.description);
        w.key("reuse").value(p.reuse).key("top_k").value(p.top_k).key("index").value(p.index);
        w.key("max_tokens").value(p.max_tokens).end_object();
      }
      w.end_array().end_object();
      HttpResponse r;
      r.body = w.take();
      return respond(std::move(r));
    }
    std::string name;
    if (!decoded(seg[2], &name)) return;
    if (seg.size() == 3) {
      ctx->route = "/v1/pipelines/{name}";
      if (method != "GET") return method_not_allowed("GET");
      if (!need_ready()) return;
      for (const auto& p : executor()->pipelines()) {
        if (p.name != name) continue;
        JsonWriter w;
        w.begin_object().key("name").value(p.name).key("description").value(p.description);
        w.key("reuse").value(p.reuse).key("top_k").value(p.top_k).key("index").value(p.index);
        w.key("max_tokens").value(p.max_tokens).end_object();
        HttpResponse r;
        r.body = w.take();
        return respond(std::move(r));
      }
      return fail({404, "pipeline_not_found", "unknown pipeline '" + name + "'", "name", {}});
    }
    if (seg.size() == 4 && seg[3] == "runs") {
      ctx->route = "/v1/pipelines/{name}/runs";
      if (method != "POST") return method_not_allowed("POST");
      if (!need_ready()) return;
      return pipeline_run(*ctx, name, req, respond);
    }
  }
  if (seg.size() >= 2 && seg[1] == "documents") {
    if (seg.size() == 2) {
      ctx->route = "/v1/documents";
      if (method != "POST") return method_not_allowed("POST");
      if (!need_ready()) return;
      return documents_post(*ctx, req, respond);
    }
    if (seg.size() == 3) {
      ctx->route = "/v1/documents/{id}";
      std::string id;
      if (!decoded(seg[2], &id)) return;
      if (method != "GET" && method != "DELETE") return method_not_allowed("GET, DELETE");
      if (!need_ready()) return;
      if (method == "GET") return documents_get(*ctx, id, respond);
      return documents_delete(*ctx, id, respond);
    }
  }
  if (seg.size() == 3 && seg[1] == "chat" && seg[2] == "completions") {
    ctx->route = "/v1/chat/completions";
    if (method != "POST") return method_not_allowed("POST");
    if (!need_ready()) return;
    return chat_completions(*ctx, req, respond, true);
  }
  if (seg.size() == 2 && seg[1] == "completions") {
    ctx->route = "/v1/completions";
    if (method != "POST") return method_not_allowed("POST");
    if (!need_ready()) return;
    return chat_completions(*ctx, req, respond, false);
  }
  if (seg.size() == 2 && seg[1] == "embeddings") {
    ctx->route = "/v1/embeddings";
    if (method != "POST") return method_not_allowed("POST");
    if (!need_ready()) return;
    return embeddings(*ctx, req, respond);
  }
  if (seg.size() >= 2 && seg.size() <= 3 && seg[1] == "models") {
    ctx->route = seg.size() == 2 ? "/v1/models" : "/v1/models/{id}";
    if (method != "GET") return method_not_allowed("GET");
    if (!need_ready()) return;
    std::string id;
    if (seg.size() == 3 && !decoded(seg[2], &id)) return;
    return models(*ctx, id, respond);
  }
  if (seg.size() == 3 && seg[1] == "cache" && seg[2] == "stats") {
    ctx->route = "/v1/cache/stats";
    if (method != "GET") return method_not_allowed("GET");
    HttpResponse r;
    r.body = cache_stats_json();
    return respond(std::move(r));
  }
  if (seg.size() == 2 && seg[1] == "stream") {
    ctx->route = "/v1/stream";
    return fail({426, "upgrade_required", "/v1/stream is a WebSocket endpoint: send an Upgrade: websocket request", "",
                 {{"Upgrade", "websocket"}}});
  }
  fail({404, "route_not_found", "no route for " + method + " " + path, "", {}});
}

std::shared_ptr<WsHandler> ApiImpl::open_ws(const HttpRequest& req, std::shared_ptr<StreamWriter> out, HttpResponse* reject) {
  ReqCtx ctx;
  ctx.id = new_request_id(&req);
  ctx.route = "/v1/stream";
  auto rejected = [&](const ApiError& e) {
    *reject = to_response(e);
    reject->headers.emplace_back("X-Request-Id", ctx.id);
    http_requests_->inc({ctx.route, "GET", std::to_string(e.status)});
    log::daemon()->info("{} websocket {} rejected: {} {}", ctx.id, req.path, e.status, e.message);
    return nullptr;
  };
  if (req.path != "/v1/stream") return rejected({404, "route_not_found", "no WebSocket endpoint at " + req.path, "", {}});
  ApiError e = authenticate(req, &ctx);
  if (e.failed()) return rejected(e);
  http_requests_->inc({ctx.route, "GET", "101"});
  log::daemon()->info("{} websocket opened from {} (tenant {})", ctx.id, req.remote, ctx.tenant);
  return make_ws_handler(std::move(ctx), std::move(out));
}

// ---------------------------------------------------------------------------------------------
// documents

namespace {
void write_summary(JsonWriter& w, const pipelines::IngestSummary& s) {
  w.begin_object();
  w.key("ingested").value(s.ingested).key("unchanged").value(s.unchanged).key("replaced").value(s.replaced);
  w.key("skipped").value(s.skipped).key("chunks").value(s.chunks).key("skip_reasons").begin_array();
  for (const auto& r : s.skip_reasons) w.value(r);
  w.end_array().end_object();
}

ApiError parse_document(simdjson::dom::element el, const std::string& where, pipelines::DocumentInput* d) {
  simdjson::dom::object o;
  if (el.get_object().get(o)) return bad_request(where, "'" + where + "' must be an object with 'id' and 'text'");
  Fields f(o, where + ".");
  if (auto e = f.only({"id", "title", "text", "source", "metadata"}); e.failed()) return e;
  if (auto e = f.str("id", &d->id, true); e.failed()) return e;
  if (d->id.empty()) return bad_request(where + ".id", "field '" + where + ".id' must not be empty");
  if (d->id.size() > 512) return bad_request(where + ".id", "field '" + where + ".id' is longer than 512 bytes");
  for (char c : d->id)
    if (static_cast<unsigned char>(c) < 0x20)
      return bad_request(where + ".id", "field '" + where + ".id' must not contain control characters");
  if (auto e = f.str("text", &d->text, true); e.failed()) return e;
  if (auto e = f.str("title", &d->title); e.failed()) return e;
  if (auto e = f.str("source", &d->source); e.failed()) return e;
  return {};
}
}  // namespace

void ApiImpl::documents_post(const ReqCtx& ctx, const HttpRequest& req, Responder respond) {
  // Accepts {"id",...} (one), {"documents":[...]} (many) or a top-level array.
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (req.body.empty()) return respond(to_response(bad_request("", "request body is empty; expected a document or {\"documents\": [...]}")));
  if (auto err = parser.parse(req.body.data(), req.body.size(), true).get(doc); err)
    return respond(to_response({400, "invalid_json", std::string("malformed JSON: ") + simdjson::error_message(err), "", {}}));
  std::vector<pipelines::DocumentInput> docs;
  simdjson::dom::array arr;
  std::string where = "documents";
  bool is_array = !doc.get_array().get(arr);
  if (!is_array) {
    simdjson::dom::object o;
    if (doc.get_object().get(o)) return respond(to_response(bad_request("", "request body must be a JSON object or array")));
    simdjson::dom::element inner;
    if (!o["documents"].get(inner)) {
      if (inner.get_array().get(arr)) return respond(to_response(bad_request("documents", "field 'documents' must be an array")));
      is_array = true;
      Fields top(o);
      if (auto e = top.only({"documents"}); e.failed()) return respond(to_response(e));
    } else {
      pipelines::DocumentInput d;
      if (auto e = parse_document(doc, "document", &d); e.failed()) return respond(to_response(e));
      docs.push_back(std::move(d));
    }
  }
  if (is_array) {
    size_t i = 0;
    for (auto el : arr) {
      pipelines::DocumentInput d;
      if (auto e = parse_document(el, where + "[" + std::to_string(i) + "]", &d); e.failed()) return respond(to_response(e));
      docs.push_back(std::move(d));
      ++i;
    }
    if (docs.empty()) return respond(to_response(bad_request("documents", "field 'documents' is empty")));
  }
  // Ownership: refuse ids owned by another tenant; claim new ones (released again on failure).
  std::vector<std::string> claimed;
  for (const auto& d : docs) {
    bool newly = false;
    if (!owners_.claim(d.id, ctx.tenant, &newly)) {
      for (const auto& c : claimed) owners_.release(c);
      return respond(to_response({403, "forbidden", "document '" + d.id + "' belongs to another tenant", "id", {}}));
    }
    if (newly) claimed.push_back(d.id);
  }
  auto self = shared_from_this();
  std::string rid = ctx.id;
  bool queued = blocking_.submit([self, rid, docs = std::move(docs), claimed, respond]() mutable {
    size_t n = docs.size();
    pipelines::DocumentApi* api = self->documents();
    if (!api) return respond(to_response({503, "not_ready", "runtime is not available", "", {}}));
    auto res = api->ingest(std::move(docs));
    if (!res.ok()) {
      for (const auto& c : claimed) self->owners_.release(c);
      return respond(to_response(from_status(res.status(), self->cfg_.limits.retry_after_s)));
    }
    log::daemon()->info("{} ingested {} document(s): {} new, {} replaced, {} unchanged, {} skipped", rid, n,
                        res->ingested, res->replaced, res->unchanged, res->skipped);
    JsonWriter w;
    write_summary(w, *res);
    HttpResponse r;
    r.body = w.take();
    respond(std::move(r));
  });
  if (!queued) {
    for (const auto& c : claimed) owners_.release(c);
    respond(to_response({429, "overloaded", "document queue is full", "", {{"Retry-After", std::to_string(cfg_.limits.retry_after_s)}}}));
  }
}

void ApiImpl::documents_get(const ReqCtx& ctx, const std::string& id, Responder respond) {
  auto owner = owners_.owner(id);
  if (owner && *owner != ctx.tenant)
    return respond(to_response({403, "forbidden", "document '" + id + "' belongs to another tenant", "id", {}}));
  auto self = shared_from_this();
  bool queued = blocking_.submit([self, id, respond] {
    pipelines::DocumentApi* api = self->documents();
    if (!api) return respond(to_response({503, "not_ready", "runtime is not available", "", {}}));
    auto res = api->get(id);
    if (!res.ok()) {
      ApiError e = from_status(res.status(), self->cfg_.limits.retry_after_s);
      if (res.status().code() == StatusCode::kNotFound) e = {404, "document_not_found", "no document with id '" + id + "'", "id", {}};
      return respond(to_response(e));
    }
    JsonWriter w;
    w.begin_object().key("id").value(res->id).key("title").value(res->title).key("source").value(res->source);
    w.key("content_hash").value(res->content_hash).key("chunk_ids").begin_array();
    for (uint64_t c : res->chunk_ids) w.value(c);
    w.end_array().key("text").value(res->text).end_object();
    HttpResponse r;
    r.body = w.take();
    respond(std::move(r));
  });
  if (!queued) respond(to_response({429, "overloaded", "document queue is full", "", {{"Retry-After", "1"}}}));
}

void ApiImpl::documents_delete(const ReqCtx& ctx, const std::string& id, Responder respond) {
  auto owner = owners_.owner(id);
  if (owner && *owner != ctx.tenant)
    return respond(to_response({403, "forbidden", "document '" + id + "' belongs to another tenant", "id", {}}));
  auto self = shared_from_this();
  std::string rid = ctx.id;
  bool queued = blocking_.submit([self, id, rid, respond] {
    pipelines::DocumentApi* api = self->documents();
    if (!api) return respond(to_response({503, "not_ready", "runtime is not available", "", {}}));
    Status st = api->remove(id);
    if (!st.ok()) {
      ApiError e = from_status(st, self->cfg_.limits.retry_after_s);
      if (st.code() == StatusCode::kNotFound) e = {404, "document_not_found", "no document with id '" + id + "'", "id", {}};
      return respond(to_response(e));
    }
    self->owners_.release(id);
    log::daemon()->info("{} deleted document '{}'", rid, id);
    JsonWriter w;
    w.begin_object().key("id").value(id).key("deleted").value(true).end_object();
    HttpResponse r;
    r.body = w.take();
    respond(std::move(r));
  });
  if (!queued) respond(to_response({429, "overloaded", "document queue is full", "", {{"Retry-After", "1"}}}));
}

// ---------------------------------------------------------------------------------------------
// operations

namespace {
// Walks the executor's stats JSON; calls fn(path, value) for every numeric leaf.
void walk_numbers(simdjson::dom::element e, const std::string& path,
                  const std::function<void(const std::string&, double)>& fn) {
  switch (e.type()) {
    case simdjson::dom::element_type::OBJECT: {
      simdjson::dom::object o;
      if (e.get_object().get(o)) break;
      for (auto [k, v] : o) walk_numbers(v, path.empty() ? std::string(k) : path + "." + std::string(k), fn);
      break;
    }
    case simdjson::dom::element_type::INT64:
    case simdjson::dom::element_type::UINT64:
    case simdjson::dom::element_type::DOUBLE: {
      double d = 0;
      if (!e.get_double().get(d)) fn(path, d);
      break;
    }
    case simdjson::dom::element_type::BOOL: {
      bool b = false;
      if (!e.get_bool().get(b)) fn(path, b ? 1 : 0);
      break;
    }
    default: break;
  }
}

}  // namespace

std::string ApiImpl::render_metrics() {
  running_g_->set({}, running_.load());
  waiting_g_->set({}, waiting_.load());
  pipelines::Executor* ex = executor();
  ready_g_->set({}, (ex && ex->ready() && !shutting_down_.load()) ? 1 : 0);
  if (ex) {
    const pipelines::ExecutorStats st = ex->stats();
    const std::string js = st.to_json();
    thread_local simdjson::dom::parser parser;
    simdjson::dom::element doc;
    executor_stat_g_->clear();
    if (!parser.parse(js.data(), js.size(), true).get(doc))
      walk_numbers(doc, "", [&](const std::string& path, double v) { executor_stat_g_->set({path}, v); });
    static constexpr const char* kTiers[] = {"hbm", "dram", "ssd"};  // index = kvstore::Tier
    for (size_t t = 0; t < st.tiers.size(); ++t) {
      kv_bytes_g_->set({kTiers[t]}, static_cast<double>(st.tiers[t].used_bytes));
      cache_hits_->set({kTiers[t]}, static_cast<double>(st.tiers[t].hits));
      cache_misses_->set({kTiers[t]}, static_cast<double>(st.tiers[t].misses));
    }
  }
  return reg_.render();
}

std::string ApiImpl::cache_stats_json() {
  JsonWriter w;
  w.begin_object();
  pipelines::Executor* ex = executor();
  std::string js = ex ? ex->stats_json() : "";
  w.key("ready").value(ex != nullptr && ex->ready());
  w.key("requests").begin_object().key("running").value(running_.load()).key("waiting").value(waiting_.load());
  {
    std::lock_guard<std::mutex> l(runs_mu_);
    w.key("in_flight").value(static_cast<int64_t>(runs_.size()));
  }
  w.end_object();
  // The executor's stats, verbatim when it is valid JSON.
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (!js.empty() && !parser.parse(js.data(), js.size(), true).get(doc)) w.key("executor").raw(js);
  else w.key("executor").null();
  w.end_object();
  return w.take();
}

// ---------------------------------------------------------------------------------------------
// Api

Api::Api(const DaemonConfig& cfg) : impl_(std::make_shared<ApiImpl>(cfg)) {}
Api::~Api() = default;

void Api::set_runtime(pipelines::Executor* executor, pipelines::DocumentApi* documents) {
  impl_->docs_.store(documents);
  impl_->ex_.store(executor);
}
void Api::begin_shutdown() { impl_->shutting_down_.store(true); }
int Api::in_flight() const {
  std::lock_guard<std::mutex> l(impl_->runs_mu_);
  return static_cast<int>(impl_->runs_.size());
}
void Api::cancel_all() {
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> l(impl_->runs_mu_);
    for (const auto& [id, t] : impl_->runs_) ids.push_back(id);
  }
  for (const auto& id : ids) impl_->cancel_run(id);
}
void Api::stop_background() { impl_->blocking_.stop(); }
MetricsRegistry& Api::metrics() { return impl_->reg_; }
void Api::handle(HttpRequest req, Responder respond) { impl_->handle(std::move(req), std::move(respond)); }
std::shared_ptr<WsHandler> Api::open_ws(const HttpRequest& req, std::shared_ptr<StreamWriter> out, HttpResponse* reject) {
  return impl_->open_ws(req, std::move(out), reject);
}
HttpResponse Api::transport_error(int status, const std::string& code, const std::string& message) {
  return impl_->transport_error(status, code, message);
}

}  // namespace ragd::daemon
