#include "ragd/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "ragd/sim/event_queue.h"
#include "ragd/sim/shared_remote.h"
#include "mix64.h"
#include "replica.h"

namespace ragd::sim {

Status SimOptions::validate() const {
  auto bad = [](const std::string& m) { return Status::InvalidArgument("simulate: " + m); };
  if (replicas < 1 || replicas > 4096) return bad("replicas must be in [1, 4096], got " + std::to_string(replicas));
  if (retrieval_threads < 1) return bad("retrieval_threads must be >= 1, got " + std::to_string(retrieval_threads));
  if (max_queue < 1) return bad("max_queue must be >= 1, got " + std::to_string(max_queue));
  if (kv.block_size < 1) return bad("kv_block_size must be >= 1, got " + std::to_string(kv.block_size));
  if (kv.pool_blocks < 1) return bad("kv_pool_bytes holds no KV block (pool_blocks " + std::to_string(kv.pool_blocks) + ")");
  if (scheduler.max_batch_tokens < 1) return bad("max_batch_tokens must be >= 1");
  if (scheduler.max_running < 1) return bad("max_running must be >= 1");
  if (series_period_s < 0) return bad("series_period_s must be >= 0");
  if (closed_loop_clients < 0) return bad("concurrency must be >= 0, got " + std::to_string(closed_loop_clients));
  if (long_context.has_value()) {
    if (long_context->workers < 1) return bad("sp_workers must be >= 1, got " + std::to_string(long_context->workers));
    if (long_context->threshold_tokens < 1)
      return bad("sp_threshold_tokens must be >= 1, got " + std::to_string(long_context->threshold_tokens));
    if (long_context->model.num_hidden_layers < 1) return bad("the long-context route needs the model's layers");
  }
  return Status::OK();
}

SimMemoryEstimate estimate_memory_per_request(const WorkloadSpec& spec, const SimOptions& opts) {
  // A heap block: the bytes asked for, rounded up to 16, plus malloc's 16-byte header.
  auto heap = [](uint64_t bytes) -> uint64_t { return bytes == 0 ? 0 : (bytes + 15) / 16 * 16 + 16; };
  // A vector filled by push_back: its capacity is the next power of two.
  auto grown = [](uint64_t n) -> uint64_t {
    uint64_t c = 1;
    while (c < n) c *= 2;
    return n == 0 ? 0 : c;
  };
  const uint64_t segments = spec.docs > 0 && spec.reuse ? (spec.prefix_tokens > 0) + spec.docs_per_query : 0;
  // The gaps of a request: answer_tokens - 1 doubles, as expected over the answer-length mixture.
  double itl = 0, weights = 0;
  for (const auto& [len, w] : spec.answer_tokens.parts) {
    itl += w * static_cast<double>(heap(grown(static_cast<uint64_t>(std::max(len, 1))) * sizeof(double)));
    weights += w;
  }
  SimMemoryEstimate e;
  const uint64_t request = 2 * sizeof(SimRequest) + heap(grown(segments) * sizeof(PathSegment));
  e.request = request * (opts.closed_loop_clients > 0 ? 2 : 1) + sizeof(LiveRequest) + 2 * sizeof(Event);
  e.record = sizeof(SimRecord) + (opts.keep_itl && weights > 0 ? static_cast<uint64_t>(std::ceil(itl / weights)) : 0);
  return e;
}

namespace {

class Router {
 public:
  Router(RouterKind kind, int max_running) : kind_(kind), slack_(std::max(1, max_running / 2)) {}

  int pick(const SimRequest& r, std::vector<std::unique_ptr<Replica>>& reps) {
    const int n = static_cast<int>(reps.size());
    if (n == 1) return 0;
    if (kind_ == RouterKind::kHash) {
      uint64_t key = r.id;
      for (const PathSegment& p : r.path)
        if (p.doc != kPrefixDoc) {
          key = p.doc;
          break;
        }
      return static_cast<int>(mix64(key) % static_cast<uint64_t>(n));
    }
    // Least connections, ties by rotation (so equal replicas share the load).
    int best = -1;
    for (int k = 0; k < n; ++k) {
      const int j = (next_ + k) % n;
      if (best < 0 || reps[j]->outstanding() < reps[best]->outstanding()) best = j;
    }
    next_ = (next_ + 1) % n;
    if (kind_ == RouterKind::kLeastConn || r.path.empty()) return best;
    // KV-aware: among replicas within `slack` requests of the least loaded, the one holding the
    // longest cached prefix of the request's path (ties: fewer outstanding, then rotation).
    const int limit = reps[best]->outstanding() + slack_;
    int pick = best, pick_cached = reps[best]->host().cached_tokens(r);
    for (int k = 0; k < n; ++k) {
      const int j = (best + k) % n;
      if (j == best || reps[j]->outstanding() > limit) continue;
      const int c = reps[j]->host().cached_tokens(r);
      if (c > pick_cached || (c == pick_cached && reps[j]->outstanding() < reps[pick]->outstanding())) {
        pick = j;
        pick_cached = c;
      }
    }
    return pick;
  }

 private:
  RouterKind kind_;
  int slack_;
  int next_ = 0;
};

}  // namespace

Result<SimResult> simulate(const SimOptions& opts, const CostModel& cost, const std::vector<SimRequest>& given) {
  RAGD_RETURN_IF_ERROR(opts.validate());
  // Closed loop: send instants are decided as the run goes, so the simulation keeps its own copy.
  std::vector<SimRequest> closed;
  if (opts.closed_loop_clients > 0) {
    closed = given;
    for (SimRequest& r : closed) r.arrival_s = 0;
  }
  const std::vector<SimRequest>& requests = opts.closed_loop_clients > 0 ? closed : given;
  RAGD_RETURN_IF_ERROR(cost.shape.validate());
  for (size_t i = 1; i < requests.size(); ++i)
    if (requests[i].arrival_s < requests[i - 1].arrival_s)
      return Status::InvalidArgument("simulate: requests must be in arrival order (request " + std::to_string(requests[i].id) + ")");
  for (const SimRequest& r : requests) {
    if (r.prompt_tokens < 1 || r.answer_tokens < 1)
      return Status::InvalidArgument("simulate: request " + std::to_string(r.id) + " needs positive prompt and answer tokens");
    int path = 0;
    for (const PathSegment& p : r.path) path += p.tokens;
    if (path > r.prompt_tokens)
      return Status::InvalidArgument("simulate: request " + std::to_string(r.id) + ": path longer than the prompt");
  }
  SimResult res;
  res.records.resize(requests.size());
  std::vector<LiveRequest> live(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    res.records[i].id = requests[i].id;
    res.records[i].tenant = requests[i].tenant;
    res.records[i].arrival_s = requests[i].arrival_s;
    res.records[i].prompt_tokens = requests[i].prompt_tokens;
  }
  std::unique_ptr<SharedRemote> remote;
  if (opts.remote_bytes > 0) remote = std::make_unique<SharedRemote>(opts.remote_bytes);
  std::vector<std::unique_ptr<Replica>> reps;
  for (int k = 0; k < opts.replicas; ++k)
    reps.push_back(std::make_unique<Replica>(k, opts, cost, remote.get(), requests, res.records, live));
  Router router(opts.router, opts.scheduler.max_running);

  EventQueue q;
  const double horizon = requests.empty() ? 0 : requests.back().arrival_s;
  // Closed loop: no arrival horizon is known beforehand; sample every second.
  const double period = opts.series_period_s > 0 ? opts.series_period_s : horizon > 0 ? std::max(1e-3, horizon / 200) : 1.0;
  size_t next_send = 0;  // closed loop: the next request a client sends
  auto leg = [&](size_t i) { return cost.network_leg_s(requests[i].id, opts.noise_seed); };
  auto send = [&](double t) {
    if (next_send >= requests.size()) return;
    closed[next_send].arrival_s = t;
    res.records[next_send].arrival_s = t;
    q.push(t + leg(next_send), EventKind::kArrival, -1, next_send);
    ++next_send;
  };
  if (opts.closed_loop_clients > 0) {
    for (int c = 0; c < opts.closed_loop_clients; ++c) send(0);
  } else {
    for (size_t i = 0; i < requests.size(); ++i)
      q.push(requests[i].arrival_s + leg(i), EventKind::kArrival, -1, i);
  }
  q.push(0, EventKind::kSample, -1, 0);
  auto sample = [&](double t) {
    SimSeriesPoint p;
    p.t_s = t;
    for (auto& r : reps) {
      SimKvHost& h = r->host();
      p.pool_used_bytes += static_cast<uint64_t>(h.used_blocks()) * h.block_bytes();
      p.hbm_cache_bytes += h.tier(kvstore::Tier::kHbm).used_bytes;
      p.dram_bytes += h.tier(kvstore::Tier::kDram).used_bytes;
      p.ssd_bytes += h.tier(kvstore::Tier::kSsd).used_bytes;
      p.swap_bytes += h.swap_used_bytes();
      const auto st = r->scheduler().stats();
      p.waiting += st.waiting;
      p.running += st.running;
    }
    p.remote_bytes = remote ? remote->used_bytes() : 0;
    res.series.push_back(p);
  };
  while (!q.empty()) {
    const Event e = q.pop();
    ++res.events;
    switch (e.kind) {
      case EventKind::kArrival: {
        const int k = router.pick(requests[e.index], reps);
        // A refusal leaves the record not ok; its client (closed loop) sends the next one.
        if (!reps[k]->accept(e.index, e.t, q) && opts.closed_loop_clients > 0) send(e.t + leg(e.index));
        break;
      }
      case EventKind::kRetrievalDone: reps[e.replica]->on_retrieval_done(e.index, e.t, q); break;
      case EventKind::kLoadDone: reps[e.replica]->on_load_done(e.index, e.t, q); break;
      case EventKind::kStepDone:
      case EventKind::kRouteDone:
        if (e.kind == EventKind::kStepDone) reps[e.replica]->on_step_done(e.t, q);
        else reps[e.replica]->on_route_done(e.index, e.t, q);
        for (size_t i : reps[e.replica]->take_finished())
          if (opts.closed_loop_clients > 0) send(e.t + leg(i));  // the stream's end reached the client
        break;
      case EventKind::kSample:
        sample(e.t);
        if (!q.empty()) q.push(e.t + period, EventKind::kSample, -1, 0);
        break;
    }
    if (e.kind != EventKind::kSample) res.duration_s = e.t;
  }
  sample(res.duration_s);
  for (auto& r : reps) {
    r->host().drain_copies();  // the copies still queued run in the idle time after the end
    res.steps += r->steps();
    res.engine_busy_s.push_back(r->busy_s());
    const PublishCounters& pc = r->host().publish_counters();
    res.publish.copies += pc.copies;
    res.publish.copies_skipped += pc.copies_skipped;
    res.publish.demotions += pc.demotions;
    res.publish.engine_s += pc.engine_s;
    res.scheduler.push_back(r->scheduler().stats());
    std::array<kvstore::TierCounters, 3> t{};
    for (int k = 0; k < 3; ++k) t[k] = r->host().tier(static_cast<kvstore::Tier>(k));
    res.tiers.push_back(t);
  }
  for (const SimRecord& r : res.records) res.unfinished += !r.ok && !r.refused;
  if (remote) {
    res.remote_hits = remote->hits();
    res.remote_misses = remote->misses();
  }
  return res;
}

Result<std::vector<SimResult>> simulate_replications(const SimOptions& opts, const CostModel& cost,
                                                     const std::vector<SimRequest>& requests, int n, uint64_t seed) {
  if (n < 1) return Status::InvalidArgument("simulate: replications must be >= 1, got " + std::to_string(n));
  if (seed < 1) return Status::InvalidArgument("simulate: a replication seed must be >= 1 (0 is the run without noise)");
  std::vector<SimResult> out;
  out.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    SimOptions o = opts;
    o.noise_seed = seed + static_cast<uint64_t>(r);
    auto res = simulate(o, cost, requests);
    if (!res.ok()) return res.status();
    out.push_back(std::move(res).value());
  }
  return out;
}

Spread spread_of(std::vector<double> v) {
  Spread s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.median = CostModel::quantile_at(v, 0.5);
  s.p10 = CostModel::quantile_at(v, 0.1);
  s.p90 = CostModel::quantile_at(v, 0.9);
  s.min = v.front();
  s.max = v.back();
  return s;
}

}  // namespace ragd::sim
