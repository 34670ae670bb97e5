// Operations: Prometheus metrics, cache statistics, pipeline listing.
#include <map>

#include "api_impl.h"

namespace ragd::daemon {

namespace {

// Runs as the scheduler counts them: running = in its running batch; waiting = every other run
// the executor holds (in retrieval / prompt building, loading KV from DRAM / SSD, waiting for
// admission, preempted). One snapshot serves /metrics and /v1/cache/stats, so the two agree.
struct RunCounts {
  int running = 0, waiting = 0;
};
RunCounts run_counts(const pipelines::ExecutorStats& st) {
  return {st.running, st.queued + st.loading + st.waiting + st.swapped};
}

}  // namespace

std::string ApiImpl::render_metrics(bool full) {
  pipelines::Executor* ex = executor();
  metrics_.ready->set({}, (ex && ex->ready() && !shutting_down_.load()) ? 1 : 0);
  if (!ex) {
    metrics_.running->set({}, 0);
    metrics_.waiting->set({}, 0);
  } else {
    const pipelines::ExecutorStats st = ex->stats();
    const RunCounts rc = run_counts(st);
    metrics_.running->set({}, rc.running);
    metrics_.waiting->set({}, rc.waiting);
    metrics_.executor_stat->clear();
    st.for_each_number([&](const std::string& path, double v) { metrics_.executor_stat->set({path}, v); });
    for (const pipelines::TierUsage& u : st.tiers) {
      metrics_.kv_bytes->set({u.name}, static_cast<double>(u.used_bytes));
      metrics_.cache_hits->set({u.name}, static_cast<double>(u.hits));
      metrics_.cache_misses->set({u.name}, static_cast<double>(u.misses));
    }
    metrics_.reuse_auto->clear();
    if (!st.reuse_auto.empty()) metrics_.reuse_auto->set({st.reuse_auto}, 1);
    if (st.remote.enabled) {
      const auto& r = st.remote;
      metrics_.cache_hits->set({"remote"}, static_cast<double>(r.hits));
      metrics_.cache_misses->set({"remote"}, static_cast<double>(r.misses));
      const std::pair<const char*, uint64_t> ev[] = {
          {"hits", r.hits}, {"misses", r.misses}, {"puts", r.puts}, {"puts_dropped", r.puts_dropped},
          {"errors", r.errors}, {"skipped", r.skipped}, {"checksum_failures", r.checksum_failures}, {"mac_failures", r.mac_failures},
          {"format_rejects", r.format_rejects}, {"partial_misses", r.partial_misses}, {"breaker_trips", r.breaker_trips}};
      for (const auto& [name, v] : ev) metrics_.remote_events->set({name}, static_cast<double>(v));
      metrics_.remote_bytes->set({"read"}, static_cast<double>(r.hit_bytes));
      metrics_.remote_bytes->set({"written"}, static_cast<double>(r.put_bytes));
      metrics_.remote_breaker->set({}, r.breaker_open ? 1 : 0);
    }
    metrics_.kv_events_batches->set({}, static_cast<double>(st.kv_events_batches));
    metrics_.kv_events_events->set({}, static_cast<double>(st.kv_events_events));
    metrics_.kv_events_dropped->set({}, static_cast<double>(st.kv_events_dropped));
    metrics_.kv_events_replays->set({}, static_cast<double>(st.kv_events_replays));
    metrics_.kv_events_auth_denied->set({}, static_cast<double>(st.kv_events_auth_denied));
  }
  return reg_.render(full);
}

std::string ApiImpl::readiness_json() {
  pipelines::Executor* ex = executor();
  const bool ssd_off = ex != nullptr && !ex->stats().ssd_error.empty();
  if (!ssd_off) return R"({"status":"ready"})";
  JsonWriter w;
  w.begin_object().key("status").value("degraded");
  w.key("degraded").begin_array().value("ssd_kv_tier").end_array();
  w.key("reason").value("the SSD KV tier was switched off after a storage error; KV is served from the engine pool and "
                        "DRAM until restart");
  w.end_object();
  return w.take();
}

std::string ApiImpl::cache_stats_json(const ReqCtx& ctx) {
  JsonWriter w;
  w.begin_object();
  pipelines::Executor* ex = executor();
  w.key("ready").value(ex != nullptr && ex->ready());
  if (!ctx.admin) {
    // A tenant sees its own requests only: cache contents, hit counts and other tenants' load
    // would tell it what others asked. The full view needs an admin key.
    int64_t mine = 0;
    {
      std::lock_guard<std::mutex> l(runs_mu_);
      for (const auto& [id, t] : runs_) mine += t->tenant == ctx.tenant;
    }
    w.key("tenant").value(ctx.tenant);
    w.key("requests").begin_object().key("in_flight").value(mine).end_object();
    w.end_object();
    return w.take();
  }
  const pipelines::ExecutorStats st = ex ? ex->stats() : pipelines::ExecutorStats{};
  const RunCounts rc = ex ? run_counts(st) : RunCounts{};
  w.key("requests").begin_object().key("running").value(rc.running).key("waiting").value(rc.waiting);
  {
    std::lock_guard<std::mutex> l(runs_mu_);
    w.key("in_flight").value(static_cast<int64_t>(runs_.size()));
  }
  w.end_object();
  // The executor's stats (JsonWriter output: valid JSON); null before the runtime is up.
  if (ex) w.key("executor").raw(st.to_json());
  else w.key("executor").null();
  w.end_object();
  return w.take();
}

std::string ApiImpl::pipelines_json(const std::string& name, bool* found) const {
  auto write_one = [](JsonWriter& w, const pipelines::PipelineInfo& p) {
    w.begin_object().key("name").value(p.name).key("description").value(p.description);
    w.key("reuse").value(p.reuse).key("top_k").value(p.top_k).key("index").value(p.index);
    w.key("max_tokens").value(p.max_tokens).key("kind").value(p.kind);
    if (p.kind == "iterative") w.key("overlap").value(p.overlap).key("retrieval_interval").value(p.retrieval_interval);
    if (!p.adapt_candidates.empty()) {
      w.key("adapt").begin_object().key("objective").value(p.adapt_objective);
      if (p.adapt_slo_ttft_ms > 0) w.key("slo_ttft_ms").value(p.adapt_slo_ttft_ms);
      w.key("candidates").begin_array();
      for (const auto& c : p.adapt_candidates) w.value(c);
      w.end_array().end_object();
    }
    w.end_object();
  };
  JsonWriter w;
  *found = false;
  if (name.empty()) {
    *found = true;
    w.begin_object().key("object").value("list").key("data").begin_array();
    for (const auto& p : executor()->pipelines()) write_one(w, p);
    w.end_array().end_object();
    return w.take();
  }
  for (const auto& p : executor()->pipelines()) {
    if (p.name != name) continue;
    *found = true;
    write_one(w, p);
    return w.take();
  }
  return {};
}

}  // namespace ragd::daemon
