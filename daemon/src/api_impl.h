// Private to the daemon: the state behind Api, split over api.cpp (routing, auth, operations,
// documents), runs.cpp (pipeline runs, SSE, WebSocket) and openai.cpp (OpenAI-compatible routes).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <simdjson.h>

#include "document_owners.h"
#include "ragd/common/thread_pool.h"
#include "ragd/daemon/api.h"
#include "ragd/common/json_writer.h"
#include "ragd/daemon/metrics.h"
#include "tenant_limiter.h"

namespace ragd::daemon {

class SseBridge;  // run_events.h

using Clock = std::chrono::steady_clock;

// An HTTP-level failure: status, machine code, human message naming the field/problem.
struct ApiError {
  int status = 0;
  std::string code, message, param;
  std::vector<std::pair<std::string, std::string>> headers;
  bool failed() const { return status != 0; }
};
HttpResponse to_response(const ApiError& e);
ApiError bad_request(const std::string& param, const std::string& message);
// Status from a module -> HTTP error (InvalidArgument 400, NotFound 404, ResourceExhausted 429, ...).
ApiError from_status(const Status& st, int retry_after_s);

// Typed field access on a parsed JSON object. `null` counts as absent. Each error names the field.
class Fields {
 public:
  explicit Fields(simdjson::dom::object obj, std::string prefix = "") : obj_(obj), prefix_(std::move(prefix)) {}
  bool has(const char* key) const;
  ApiError str(const char* key, std::string* out, bool required = false) const;
  ApiError integer(const char* key, int64_t* out, int64_t lo, int64_t hi, bool* present = nullptr) const;
  ApiError uinteger(const char* key, uint64_t* out, bool* present = nullptr) const;
  ApiError number(const char* key, double* out, double lo, double hi, bool* present = nullptr) const;
  ApiError boolean(const char* key, bool* out, bool* present = nullptr) const;
  // Rejects keys not in `allowed` (typo protection on the ragd-native API).
  ApiError only(std::initializer_list<const char*> allowed) const;
  std::optional<simdjson::dom::element> get(const char* key) const;
  std::string name(const char* key) const { return prefix_ + key; }
  simdjson::dom::object object() const { return obj_; }

 private:
  simdjson::dom::object obj_;
  std::string prefix_;
};

// Parses `body` as one JSON object (thread-local parser; the result lives until the next parse
// on this thread).
ApiError parse_object(const std::string& body, simdjson::dom::object* out);

std::string percent_decode(std::string_view s, bool* ok);
double ms_since(Clock::time_point t0);

// Per-request context, created by handle().
struct ReqCtx {
  std::string id;      // request id, on every log line
  std::string tenant;  // authenticated tenant ("default" when auth is off)
  bool authed_by_key = false;
  std::string route;   // metric label, e.g. "/v1/pipelines/{name}/runs"
  Clock::time_point t0 = Clock::now();
};

// Accounting for one executor run (metrics, tenant slot, cancel-all registry).
struct RunTrack {
  std::string id, route, tenant;
  Clock::time_point t0 = Clock::now();
  Clock::time_point first_token{}, last_token{};
  int tokens = 0;
  bool started = false, finished = false;  // executor-thread only
  std::shared_ptr<void> slot;              // tenant concurrency slot
};

using RunConsumer = std::function<bool(const pipelines::RunEvent&)>;

class ApiImpl : public std::enable_shared_from_this<ApiImpl> {
 public:
  explicit ApiImpl(const DaemonConfig& cfg);
  ~ApiImpl();

  // api.cpp
  void handle(HttpRequest req, Responder respond);
  std::shared_ptr<WsHandler> open_ws(const HttpRequest& req, std::shared_ptr<StreamWriter> out, HttpResponse* reject);
  HttpResponse transport_error(int status, const std::string& code, const std::string& message);
  ApiError authenticate(const HttpRequest& req, ReqCtx* ctx) const;
  ApiError acquire_slot(const std::string& tenant, std::shared_ptr<void>* slot);
  pipelines::Executor* executor() const { return ex_.load(); }
  pipelines::DocumentApi* documents() const { return docs_.load(); }
  ApiError require_ready() const;
  std::string new_request_id(const HttpRequest* req);

  // runs.cpp
  // Submits with metrics and accounting around `consumer`. On failure nothing was submitted.
  ApiError start_run(pipelines::RunRequest req, const std::string& route, std::shared_ptr<void> slot,
                     RunConsumer consumer);
  void cancel_run(const std::string& id);
  // The streaming (SSE) response of a started run: frames flow from `bridge`; a client that goes
  // away cancels the run.
  HttpResponse sse_response(std::shared_ptr<SseBridge> bridge, const std::string& rid);
  void pipeline_run(const ReqCtx& ctx, const std::string& name, const HttpRequest& req, Responder respond);
  // Parses the ragd run body (REST and WebSocket share it) into `out`.
  ApiError parse_run_body(const Fields& f, const ReqCtx& ctx, pipelines::RunRequest* out, bool* stream,
                          bool allow_pipeline_field);
  std::shared_ptr<WsHandler> make_ws_handler(ReqCtx ctx, std::shared_ptr<StreamWriter> out);

  // openai.cpp
  void chat_completions(const ReqCtx& ctx, const HttpRequest& req, Responder respond, bool chat);
  void embeddings(const ReqCtx& ctx, const HttpRequest& req, Responder respond);
  void models(const ReqCtx& ctx, const std::string& id, Responder respond);

  // api.cpp (documents, operations)
  void documents_post(const ReqCtx& ctx, const HttpRequest& req, Responder respond);
  void documents_get(const ReqCtx& ctx, const std::string& id, Responder respond);
  void documents_delete(const ReqCtx& ctx, const std::string& id, Responder respond);
  std::string render_metrics();
  std::string cache_stats_json();

  DaemonConfig cfg_;
  MetricsRegistry reg_;
  MetricFamily* http_requests_;
  MetricFamily* ttft_;
  MetricFamily* tpot_;
  MetricFamily* itl_;
  MetricFamily* e2e_;
  MetricFamily* queue_time_;
  MetricFamily* prompt_tokens_;
  MetricFamily* generated_tokens_;
  MetricFamily* reused_tokens_;
  MetricFamily* recomputed_tokens_;
  MetricFamily* runs_total_;
  MetricFamily* running_g_;
  MetricFamily* waiting_g_;
  MetricFamily* kv_bytes_g_;
  MetricFamily* cache_hits_;
  MetricFamily* cache_misses_;
  MetricFamily* executor_stat_g_;
  MetricFamily* connections_g_;
  MetricFamily* ready_g_;

  std::atomic<pipelines::Executor*> ex_{nullptr};
  std::atomic<pipelines::DocumentApi*> docs_{nullptr};
  std::atomic<bool> shutting_down_{false};
  std::atomic<int> running_{0}, waiting_{0};
  std::atomic<uint64_t> next_id_{0};
  uint64_t id_prefix_ = 0;
  int64_t created_unix_ = 0;
  ThreadPool blocking_;  // documents and embeddings (may block on storage / compute)
  TenantLimiter limiter_;
  DocumentOwners owners_;

  std::mutex runs_mu_;
  std::unordered_map<std::string, std::shared_ptr<RunTrack>> runs_;  // guarded by runs_mu_
};

// JSON fragments shared by the REST, SSE and WebSocket encoders.
void write_sources(JsonWriter& w, const std::vector<pipelines::Source>& s);
void write_usage(JsonWriter& w, const pipelines::Usage& u);
void write_timings(JsonWriter& w, const pipelines::Timings& t);

}  // namespace ragd::daemon
