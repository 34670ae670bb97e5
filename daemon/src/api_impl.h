// Private to the daemon: the state behind Api and the handlers of every route.
//
//   router.cpp       route table, dispatch, WebSocket admission, transport errors
//   auth.cpp         API keys -> tenants (admin keys), request ids, tenant concurrency slots
//   documents.cpp    /v1/documents
//   operations.cpp   /healthz /readyz /metrics /v1/cache/stats /v1/pipelines
//   console.cpp      / and /console/{file}: the embedded web console
//   run_bridge.cpp   executor submission with metrics and accounting, SSE responses
//   pipeline_runs.cpp  the ragd run body, POST /v1/pipelines/{name}/runs
//   ws_stream.cpp    WebSocket /v1/stream
//   openai*.cpp      OpenAI-compatible routes
//   api.cpp          construction and the public Api facade
//
// Thread-safety: every handler runs on any io thread, concurrently with the others; ApiImpl's
// state is atomics, the thread-safe pool / limiter / registry, and runs_ under runs_mu_. Handlers
// answer through their Responder exactly once, from any thread.
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

#include "errors.h"
#include "json_fields.h"
#include "ragd/common/json_writer.h"
#include "ragd/common/thread_pool.h"
#include "ragd/daemon/api.h"
#include "ragd/daemon/metrics.h"
#include "serving_metrics.h"
#include "tenant_limiter.h"

namespace ragd::daemon {

class SseBridge;    // run_events.h
struct OaiRequest;  // openai_encode.h
struct OaiState;    // openai_encode.h

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Per-request context, created by handle().
struct ReqCtx {
  std::string id;      // request id, on every log line
  std::string tenant;  // authenticated tenant ("default" when auth is off)
  bool authed_by_key = false;
  bool admin = false;  // operator rights: auth is off, or the key is an admin key
  std::string route;   // metric label, e.g. "/v1/pipelines/{name}/runs"
  Clock::time_point t0 = Clock::now();

  // Owner scope of the documents this caller writes: its tenant, or "" (shared) for operators.
  std::string document_scope() const { return admin ? std::string() : tenant; }
};

// Accounting for one executor run (metrics, tenant slot, cancel-all registry).
struct RunTrack {
  std::string id, route, tenant;
  Clock::time_point t0 = Clock::now();
  Clock::time_point first_token{}, last_token{};
  int tokens = 0;
  bool finished = false;                   // executor-thread only
  // The consumer refused an event (the client went away): later events are not passed on, and
  // the run's final event, which the executor always sends, is counted as "disconnected".
  bool client_gone = false;                // executor-thread only
  // The transport saw the client hang up (any thread) and cancelled the run; its final event is
  // counted as "disconnected" even when no event was refused first.
  std::atomic<bool> hung_up{false};
  std::shared_ptr<void> slot;              // tenant concurrency slot
};

using RunConsumer = std::function<bool(const pipelines::RunEvent&)>;

// console.cpp: the embedded console file `name` ("index.html", ...) with its caching and security
// headers; 304 when If-None-Match names its ETag, 404 for an unknown name.
HttpResponse console_response(const HttpRequest& req, const std::string& name);

class ApiImpl : public std::enable_shared_from_this<ApiImpl> {
 public:
  explicit ApiImpl(const DaemonConfig& cfg);
  ~ApiImpl();

  // router.cpp
  void handle(HttpRequest req, Responder respond);
  std::shared_ptr<WsHandler> open_ws(const HttpRequest& req, std::shared_ptr<StreamWriter> out, HttpResponse* reject);
  HttpResponse transport_error(int status, const std::string& code, const std::string& message);
  ApiError require_ready() const;

  // auth.cpp
  // `allow_query_key`: accept ?api_key= (only the WebSocket, whose browsers cannot set headers).
  ApiError authenticate(const HttpRequest& req, ReqCtx* ctx, bool allow_query_key) const;
  ApiError acquire_slot(const std::string& tenant, std::shared_ptr<void>* slot);
  // GET /metrics: 401 when server.metrics_require_key and no valid key, or when a key is sent and
  // is wrong; *full (the restricted families too) for operator rights: an admin key, or auth off.
  ApiError metrics_access(const HttpRequest& req, bool* full) const;
  std::string new_request_id(const HttpRequest* req);

  pipelines::Executor* executor() const { return ex_.load(); }
  pipelines::DocumentApi* documents() const { return docs_.load(); }

  // run_bridge.cpp
  // Submits with metrics and accounting around `consumer`. On failure nothing was submitted.
  ApiError start_run(pipelines::RunRequest req, const std::string& route, std::shared_ptr<void> slot,
                     RunConsumer consumer);
  void cancel_run(const std::string& id);
  // The client of run `id` hung up: cancels it, counted as "disconnected" (any thread).
  void hang_up(const std::string& id);
  // A non-streaming run: a client that goes away before the answer cancels it (its tenant slot is
  // given back when the executor ends the run).
  void cancel_on_disconnect(const HttpRequest& req, const std::string& id);
  // The streaming (SSE) response of a started run: frames flow from `bridge`; a client that goes
  // away cancels the run.
  HttpResponse sse_response(std::shared_ptr<SseBridge> bridge, const std::string& rid);

  // pipeline_runs.cpp
  void pipeline_run(const ReqCtx& ctx, const std::string& name, const HttpRequest& req, Responder respond);
  // Parses the ragd run body (REST and WebSocket share it) into `out`.
  ApiError parse_run_body(const Fields& f, const ReqCtx& ctx, pipelines::RunRequest* out, bool* stream,
                          bool allow_pipeline_field);

  // ws_stream.cpp
  std::shared_ptr<WsHandler> make_ws_handler(ReqCtx ctx, std::shared_ptr<StreamWriter> out);

  // openai.cpp
  void chat_completions(const ReqCtx& ctx, const HttpRequest& req, Responder respond, bool chat);
  void embeddings(const ReqCtx& ctx, const HttpRequest& req, Responder respond);
  // rerank.cpp: POST /v1/rerank (Cohere / Jina shape)
  void rerank(const ReqCtx& ctx, const HttpRequest& req, Responder respond);
  void models(const ReqCtx& ctx, const std::string& id, Responder respond);
  // openai.cpp: a request of several choices (n > 1, several prompts), parsed.
  void choices(const ReqCtx& ctx, const HttpRequest& req, Responder respond, OaiRequest parsed,
               pipelines::RunRequest run, std::shared_ptr<OaiState> st, std::shared_ptr<void> slot);
  // openai_fanout.cpp: the runs of one request's choices (n > 1, several prompts), consumers[k]
  // for runs[k]: the first now, the others once it has published the prompt's KV (its second token
  // or its end) so that they reuse it. A later run that cannot start gets an error event. On
  // failure of the first nothing was submitted.
  ApiError start_choices(std::vector<pipelines::RunRequest> runs, std::vector<RunConsumer> consumers,
                         const std::string& route, std::shared_ptr<void> slot);

  // documents.cpp
  void documents_post(const ReqCtx& ctx, const HttpRequest& req, Responder respond);
  void documents_get(const ReqCtx& ctx, const std::string& id, Responder respond);
  // GET /v1/documents: the caller's own and the shared documents, by id; ?limit=&after= pages.
  void documents_list(const ReqCtx& ctx, const HttpRequest& req, Responder respond);
  void documents_delete(const ReqCtx& ctx, const std::string& id, Responder respond);

  // operations.cpp
  // Prometheus text; `full` adds the restricted families (cache contents: KV tiers, reuse, the
  // executor's stats), which only callers with operator rights see.
  std::string render_metrics(bool full);
  // /readyz body once the runtime serves: {"status":"ready"}, or "degraded" with the parts that
  // are off (the SSD KV tier after an I/O error: serving goes on from the pool and DRAM). Names a
  // category, never the raw error (paths, device messages stay in the log and /v1/cache/stats for
  // operators).
  std::string readiness_json();
  std::string cache_stats_json(const ReqCtx& ctx);
  std::string pipelines_json(const std::string& name, bool* found) const;  // name "" = the list

 private:
  friend class Api;  // the public facade installs the runtime and drains runs

  DaemonConfig cfg_;
  MetricsRegistry reg_;
  ServingMetrics metrics_;  // families registered in reg_ (after it)

  std::atomic<pipelines::Executor*> ex_{nullptr};
  std::atomic<pipelines::DocumentApi*> docs_{nullptr};
  std::atomic<bool> shutting_down_{false};
  std::atomic<uint64_t> next_id_{0};
  uint64_t id_prefix_ = 0;
  int64_t created_unix_ = 0;
  ThreadPool blocking_;  // documents and embeddings (may block on storage / compute)
  TenantLimiter limiter_;

  mutable std::mutex runs_mu_;
  std::unordered_map<std::string, std::shared_ptr<RunTrack>> runs_;  // guarded by runs_mu_
};

}  // namespace ragd::daemon
