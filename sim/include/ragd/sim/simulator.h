// The discrete-event simulation of a ragd fleet in virtual time.
//
// Every replica runs the real pipelines::Scheduler over a SimKvHost (the real knowledge tree and
// eviction policy); a router spreads arrivals over replicas; engine steps, retrieval, tier loads
// and the network take the time the CostModel gives them. One request's life:
//   arrival (+ network) -> router -> retrieval (retrieval_threads servers per replica, FIFO)
//   -> lookup (match, pin, loads on per-tier channels) -> Scheduler::add -> admitted in a step
//   -> prefill chunks -> first token (TTFT, + network back) -> publish -> decode steps -> finish.
// A replica steps back to back while its scheduler has work and sleeps otherwise. A request that
// finds max_queue requests waiting is refused (as the daemon's 429). A replica whose scheduler plans
// nothing while requests wait (no block can be freed) stalls until its next arrival; requests still
// waiting at the end are counted as unfinished.
//
// Deterministic: the same inputs give the same result (events at equal times run in the order
// they were scheduled; no wall clock, no unseeded randomness).
// Thread-safety: simulate() is reentrant; it shares nothing between calls.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/enum_names.h"
#include "ragd/common/status.h"
#include "ragd/pipelines/long_context_policy.h"
#include "ragd/pipelines/scheduler.h"
#include "ragd/sim/cost_model.h"
#include "ragd/sim/sim_kv_host.h"
#include "ragd/sim/workload.h"

namespace ragd::sim {

enum class RouterKind : uint8_t { kLeastConn, kHash, kKvAware };
inline constexpr auto kRouterKindNames = make_enum_names<RouterKind>(
    "router", {{RouterKind::kLeastConn, "leastconn"}, {RouterKind::kHash, "hash"}, {RouterKind::kKvAware, "kv-aware"}});
constexpr const auto& ragd_enum_names(RouterKind) { return kRouterKindNames; }
static_assert(enum_names_valid(kRouterKindNames));
inline Result<RouterKind> parse_router_kind(std::string_view s) { return parse_enum<RouterKind>(s); }

struct SimOptions {
  int replicas = 1;
  RouterKind router = RouterKind::kLeastConn;
  pipelines::SchedulerOptions scheduler;
  KvHostOptions kv;                 // per replica
  uint64_t remote_bytes = 0;        // shared remote tier capacity; 0 = no remote tier
  int retrieval_threads = 4;        // per replica
  int max_queue = 256;              // waiting requests per replica before refusals
  int max_concurrent_per_tenant = 64;  // a tenant's runs in flight per replica before refusals (the
                                       // daemon's limits.max_concurrent_per_tenant); 0 = no limit
  double series_period_s = 0;       // time-series sampling period; 0 = duration / 200
  bool keep_itl = true;             // record every inter-token gap (memory: one double per token)
  // Closed loop: this many clients, each sending its next request (in request order) when the
  // previous one's stream ended; request arrival times are then ignored. 0 = open loop (default).
  int closed_loop_clients = 0;
  // Per-request noise (cost_model.h: network_quantiles drawn per request, the wake-up draws
  // shifted): 0 (default) = none, the deterministic run; any other value seeds the draws, so the
  // same seed gives the same result and replications take one seed each (simulate_replications).
  uint64_t noise_seed = 0;
  // The long-context route (pipelines/long_context_policy.h, the daemon's rule): runs it takes go to
  // a sequence-parallel group of long_context->workers beside each replica's batch, one at a time,
  // timed by the performance model with the cost model's kernel rates (long_context_route.h in
  // sim/src). None (default): every run goes to the batch.
  std::optional<pipelines::LongContextPolicy> long_context;
  Status validate() const;          // InvalidArgument naming the field
};

// One request's outcome (times in ms from its arrival at the client).
struct SimRecord {
  uint64_t id = 0;
  int replica = -1;
  int tenant = 0;
  bool ok = false;                   // finished
  bool refused = false;              // the replica's queue or the tenant's limit was full (429)
  double arrival_s = 0;
  double ttft_ms = -1, e2e_ms = 0;
  double retrieval_ms = 0, kv_load_ms = 0, queue_ms = 0, prefill_ms = 0;
  int prompt_tokens = 0, tokens = 0;
  int sp_degree = 0;                 // workers of the long-context route that prefilled it; 0 = the batch
  int sp_decode_degree = 0;          // ... and decoded it (fewer after its KV moved)
  ReuseCounts reused;
  std::vector<double> itl_ms;
};

// Fleet totals at one instant.
struct SimSeriesPoint {
  double t_s = 0;
  uint64_t pool_used_bytes = 0;      // engine pools: runs + cached document KV
  uint64_t hbm_cache_bytes = 0;      // knowledge tree's HBM tier
  uint64_t dram_bytes = 0, ssd_bytes = 0, remote_bytes = 0, swap_bytes = 0;
  int waiting = 0, running = 0;
};

struct SimResult {
  std::vector<SimRecord> records;     // by request, in arrival order
  std::vector<SimSeriesPoint> series;
  double duration_s = 0;              // virtual time of the last event
  long events = 0, steps = 0;
  std::vector<double> engine_busy_s;  // per replica: virtual time its engine spent stepping
  uint64_t remote_hits = 0, remote_misses = 0;
  // Requests that never finished: a replica was left with waiting requests it could not admit and
  // nothing running (e.g. its pool full of KV pinned by waiting requests' lookups).
  long unfinished = 0;
  PublishCounters publish;            // lower-tier copies of new nodes, over every replica
  std::vector<pipelines::SchedulerStats> scheduler;  // per replica
  std::vector<std::array<kvstore::TierCounters, 3>> tiers;  // per replica, at the end
};

// Memory a simulation of a generated workload holds per request, an upper estimate in bytes, so
// that a workload that cannot fit is refused before anything is allocated (ragctl simulate).
// `request`: the generated request and its path, the simulator's per-request state and arrival
// event, and the closed loop's copy of the requests; held once. `record`: its SimRecord, with one
// double per generated token when opts.keep_itl; held once per SimResult kept (replications).
// Vectors grown by doubling count at twice their size.
struct SimMemoryEstimate {
  uint64_t request = 0;
  uint64_t record = 0;
};
SimMemoryEstimate estimate_memory_per_request(const WorkloadSpec& spec, const SimOptions& opts);

// Runs the requests (ids must be unique, arrival order) through a fleet of opts.replicas.
[[nodiscard]] Result<SimResult> simulate(const SimOptions& opts, const CostModel& cost, const std::vector<SimRequest>& requests);

// Replications: the same requests n times, replication r (0-based) with noise_seed = seed + r
// (seed >= 1), so that a closed loop's phases (which requests collide) are sampled rather than
// fixed by one deterministic run. Results in replication order.
[[nodiscard]] Result<std::vector<SimResult>> simulate_replications(const SimOptions& opts, const CostModel& cost,
                                                                   const std::vector<SimRequest>& requests, int n,
                                                                   uint64_t seed);

// A metric over replications: median, 10th and 90th percentiles (linear interpolation between
// order statistics, numpy's default), smallest and largest. Empty input: all zero.
struct Spread {
  double median = 0, p10 = 0, p90 = 0, min = 0, max = 0;
};
Spread spread_of(std::vector<double> values);

}  // namespace ragd::sim
