// ApiImpl construction (metric families) and the public Api facade.
#include <random>

#include "api_impl.h"

namespace ragd::daemon {

ServingMetrics::ServingMetrics(MetricsRegistry& reg) {
  http_requests = &reg.counter("ragd_http_requests_total", "HTTP requests by route, method and status", {"route", "method", "status"});
  ttft = &reg.histogram("ragd_time_to_first_token_seconds", "Time from request arrival to the first generated token", {}, token_latency_buckets());
  tpot = &reg.histogram("ragd_time_per_output_token_seconds", "Mean time per output token after the first, per request", {}, token_latency_buckets());
  itl = &reg.histogram("ragd_inter_token_latency_seconds", "Time between consecutive tokens of a request", {}, token_latency_buckets());
  e2e = &reg.histogram("ragd_e2e_request_latency_seconds", "Request latency from arrival to done or error", {}, request_latency_buckets());
  queue_time = &reg.histogram("ragd_request_queue_time_seconds", "Time a run waited in the executor queue", {}, request_latency_buckets());
  prompt_tokens = &reg.counter("ragd_prompt_tokens_total", "Prompt tokens of finished runs");
  generated_tokens = &reg.counter("ragd_generation_tokens_total", "Generated tokens of finished runs");
  // Restricted (operators only, as /v1/cache/stats' executor view): what the KV cache holds and
  // serves. Hits and reuse move when anyone's request reuses KV, so a tenant watching them would
  // learn what others asked.
  reused_tokens = &reg.counter("ragd_reused_tokens_total", "Prompt tokens served from cached KV, by tier", {"tier"}).restrict();
  recomputed_tokens = &reg.counter("ragd_recomputed_tokens_total", "Prompt tokens whose KV was computed").restrict();
  blend_runs = &reg.counter("ragd_blend_runs_total", "Runs of the approximate reuse modes, by mode and outcome (blended | exact)", {"mode", "outcome"}).restrict();
  blended_tokens = &reg.counter("ragd_blended_tokens_total", "Reused document tokens placed by CacheBlend / EPIC, by mode", {"mode"}).restrict();
  repaired_tokens = &reg.counter("ragd_blend_repaired_tokens_total", "Placed tokens recomputed by the blend repair step, by mode", {"mode"}).restrict();
  runs_total = &reg.counter("ragd_runs_total", "Finished runs by route and finish reason", {"route", "finish_reason"});
  running = &reg.gauge("ragd_requests_running", "Runs in the scheduler's running batch (being prefilled or decoded)");
  waiting = &reg.gauge("ragd_requests_waiting",
                           "Submitted runs not in the running batch: in retrieval or prompt building, loading KV, "
                           "waiting for admission, or preempted");
  kv_bytes = &reg.gauge("ragd_kv_cache_bytes", "KV bytes held per tier", {"tier"}).restrict();
  cache_hits = &reg.gauge("ragd_kv_cache_hits", "KV cache hits per tier (cumulative, mirrored from the executor)", {"tier"}).restrict();
  cache_misses = &reg.gauge("ragd_kv_cache_misses", "KV cache misses per tier (cumulative, mirrored from the executor)", {"tier"}).restrict();
  remote_events = &reg.gauge("ragd_kv_remote_events",
                             "Remote KV tier (Redis) events since start: hits, misses, puts, puts_dropped, errors, skipped "
                             "(breaker open), checksum_failures, mac_failures (forged or another fleet secret), format_rejects, "
                             "partial_misses, breaker_trips",
                             {"event"}).restrict();
  remote_bytes = &reg.gauge("ragd_kv_remote_bytes", "Bytes read from / written to the remote KV tier since start", {"direction"}).restrict();
  remote_breaker = &reg.gauge("ragd_kv_remote_breaker_open", "1 while the remote KV tier's circuit breaker is open (serving by recompute)").restrict();
  reuse_auto = &reg.gauge("ragd_reuse_auto_choice",
                          "reuse \"auto\": 1 for the mode it chose on this model (its measured fidelity: "
                          "ragd_executor_stat{key=\"reuse.auto.first_token_kl\" / \"reuse.auto.greedy_agreement\"})",
                          {"choice"}).restrict();
  adapt_choices = &reg.counter("ragd_adapt_choices_total",
                               "Runs of adaptive pipelines ([adapt]) by pipeline, chosen candidate configuration and "
                               "reason (forced | best_quality | cheapest_near_best | best_within_slo | fastest_over_slo)",
                               {"pipeline", "choice", "reason"});
  executor_stat = &reg.gauge("ragd_executor_stat", "Every numeric field of the executor's stats, by JSON path", {"key"}).restrict();
  kv_events_batches = &reg.gauge("ragd_kv_events_batches", "KV-event batches published (events.kv_endpoint; cumulative)");
  kv_events_events = &reg.gauge("ragd_kv_events_events", "KV events published (cumulative)");
  kv_events_dropped = &reg.gauge("ragd_kv_events_dropped", "KV events dropped because the publisher's queue was full (subscribers then get AllBlocksCleared and a resync)");
  kv_events_replays = &reg.gauge("ragd_kv_events_replays", "KV-event replay requests served (cumulative)");
  kv_events_auth_denied = &reg.gauge("ragd_kv_events_auth_denied",
                                     "KV-event subscribers refused by CURVE: a client key not in the allowed list (cumulative)");
  ready = &reg.gauge("ragd_ready", "1 when the runtime is loaded and serving");
}

ApiImpl::ApiImpl(const DaemonConfig& cfg)
    : cfg_(cfg), metrics_(reg_), blocking_(2, 256, "ragd-blocking"), limiter_(cfg.limits) {
  std::random_device rd;
  id_prefix_ = (static_cast<uint64_t>(rd()) << 16 ^ rd()) & 0xffffffull;
  created_unix_ = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

ApiImpl::~ApiImpl() { blocking_.stop(); }

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
