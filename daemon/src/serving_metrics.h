// The daemon's own metric families, registered once in one registry and grouped by what they
// describe. Families marked restricted are rendered only for callers with operator rights (they
// reveal what the KV cache holds and serves: see operations.cpp).
// Thread-safety: the pointers are set once at construction; MetricFamily is thread-safe.
#pragma once

#include "ragd/daemon/metrics.h"

namespace ragd::daemon {

struct ServingMetrics {
  explicit ServingMetrics(MetricsRegistry& reg);

  // HTTP edge.
  MetricFamily* http_requests;     // by route, method, status
  // Run latencies.
  MetricFamily* ttft;
  MetricFamily* tpot;
  MetricFamily* itl;
  MetricFamily* e2e;
  MetricFamily* queue_time;
  // Runs and tokens.
  MetricFamily* runs_total;        // by route, finish reason
  MetricFamily* prompt_tokens;
  MetricFamily* generated_tokens;
  MetricFamily* running;           // gauges mirrored from the scheduler
  MetricFamily* waiting;
  MetricFamily* ready;
  // KV cache (restricted).
  MetricFamily* reused_tokens;     // by tier
  MetricFamily* recomputed_tokens;
  MetricFamily* blend_runs;        // by mode, outcome
  MetricFamily* blended_tokens;
  MetricFamily* repaired_tokens;
  MetricFamily* kv_bytes;          // by tier
  MetricFamily* cache_hits;
  MetricFamily* cache_misses;
  MetricFamily* executor_stat;     // every numeric executor stat, by JSON path
  MetricFamily* remote_events;     // the remote tier: hits, misses, puts, errors, ... by event
  MetricFamily* remote_bytes;      // by direction (read | written)
  MetricFamily* remote_breaker;    // 1 while its circuit breaker is open
  MetricFamily* reuse_auto;        // reuse "auto": 1 for the mode it chose on this model
  MetricFamily* adapt_choices;     // adaptive pipelines: runs by pipeline, chosen candidate, reason
  // KV events (events.kv_endpoint): batches, events, dropped events, replay requests
  MetricFamily* kv_events_batches;
  MetricFamily* kv_events_events;
  MetricFamily* kv_events_dropped;
  MetricFamily* kv_events_replays;
  MetricFamily* kv_events_auth_denied;
};

}  // namespace ragd::daemon
