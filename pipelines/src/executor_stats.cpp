// ExecutorStats: the scheduler-side snapshot (publish_stats, scheduler thread) merged with the
// kvstore's own counters (thread-safe) at read time, and its JSON form for /v1/cache/stats.
#include "executor_impl.h"

#include "ragd/common/json_writer.h"

namespace ragd::pipelines {

void ExecutorImpl::publish_stats() {
  const SchedulerStats s = sched_->stats();
  const LengthPredictorStats p = sched_->predictor().stats();
  const auto& pool = model_->kv_pool();
  std::lock_guard<std::mutex> lk(stats_mu_);
  ExecutorStats& x = stats_;
  x.model = model_name_;
  x.policy = std::string(sched_policy_name(sched_->options().policy));
  x.steps = s.steps;
  x.admitted = s.admitted;
  x.finished = s.finished;
  x.cancelled = s.cancelled;
  x.swaps_out = s.swaps_out;
  x.swaps_in = s.swaps_in;
  x.drops = s.drops;
  x.tokens_prefill = s.tokens_prefill;
  x.tokens_decode = s.tokens_decode;
  x.waiting = s.waiting;
  x.running = s.running;
  x.swapped = s.swapped;
  x.loading = static_cast<int>(loading_.size());
  x.length_samples = p.samples;
  x.length_mae = p.mae;
  x.length_within_2x = p.within_2x;
  x.pool_blocks = pool.num_blocks();
  x.pool_free_blocks = pool.free_blocks();
  x.pool_block_size = static_cast<uint64_t>(pool.layout().block_size);
  x.pool_bytes = pool.bytes();
  x.swap_bytes = swap_bytes_;
}

ExecutorStats ExecutorImpl::stats() const {
  ExecutorStats x;
  {
    std::lock_guard<std::mutex> lk(stats_mu_);
    x = stats_;
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    x.queued = pending_ + static_cast<int>(inbox_.size());
  }
  const kvstore::Stats k = store_->stats();
  x.eviction = k.policy;
  for (int t = 0; t < kvstore::kNumTiers; ++t) {
    const kvstore::TierStats& a = k.tiers[t];
    TierUsage& b = x.tiers[t];
    b.enabled = a.enabled;
    b.capacity_bytes = a.capacity_bytes;
    b.used_bytes = a.used_bytes;
    b.entries = a.nodes;
    b.hits = a.hits;
    b.hit_tokens = a.hit_tokens;
    b.evictions = a.evictions;
    b.loads = a.loads;
  }
  x.cache_nodes = k.tree_nodes;
  x.cache_pinned = k.pinned_nodes;
  x.cache_lookups = k.lookups;
  x.cache_lookup_misses = k.lookup_misses;
  x.load_failures = k.load_failures;
  x.checksum_failures = k.checksum_failures;
  x.restored_segments = k.restored_segments;
  x.ssd_error = k.ssd_error;
  return x;
}

std::string ExecutorStats::to_json() const {
  static constexpr const char* kTierNames[] = {"hbm", "dram", "ssd"};
  JsonWriter w;
  w.begin_object();
  w.key("model").value(model);
  w.key("scheduler").begin_object();
  w.key("policy").value(policy).key("steps").value(int64_t{steps}).key("waiting").value(waiting);
  w.key("running").value(running).key("swapped").value(swapped).key("loading").value(loading).key("queued").value(queued);
  w.key("admitted").value(int64_t{admitted}).key("finished").value(int64_t{finished});
  w.key("cancelled").value(int64_t{cancelled}).key("swaps_out").value(int64_t{swaps_out});
  w.key("swaps_in").value(int64_t{swaps_in}).key("drops").value(int64_t{drops});
  w.key("tokens_prefill").value(int64_t{tokens_prefill}).key("tokens_decode").value(int64_t{tokens_decode});
  w.key("length_predictor").begin_object().key("samples").value(int64_t{length_samples}).key("mae").value(length_mae);
  w.key("within_2x").value(length_within_2x).end_object();
  w.end_object();
  w.key("kv_pool").begin_object().key("blocks").value(pool_blocks).key("free_blocks").value(pool_free_blocks);
  w.key("block_size").value(pool_block_size).key("bytes").value(pool_bytes).key("swap_bytes").value(swap_bytes);
  w.end_object();
  w.key("cache").begin_object().key("eviction").value(eviction).key("nodes").value(cache_nodes);
  w.key("pinned").value(cache_pinned).key("lookups").value(cache_lookups).key("lookup_misses").value(cache_lookup_misses);
  w.key("load_failures").value(load_failures).key("checksum_failures").value(checksum_failures);
  w.key("restored_segments").value(restored_segments).key("ssd_error").value(ssd_error);
  w.key("tiers").begin_object();
  for (size_t t = 0; t < tiers.size(); ++t) {
    const TierUsage& u = tiers[t];
    w.key(kTierNames[t]).begin_object().key("enabled").value(u.enabled).key("capacity_bytes").value(u.capacity_bytes);
    w.key("used_bytes").value(u.used_bytes).key("entries").value(u.entries).key("hits").value(u.hits);
    w.key("hit_tokens").value(u.hit_tokens).key("evictions").value(u.evictions).key("loads").value(u.loads);
    w.end_object();
  }
  w.end_object().end_object();
  w.key("reuse").begin_object().key("runs").value(int64_t{runs_with_reuse}).key("hbm_tokens").value(int64_t{reused_hbm});
  w.key("dram_tokens").value(int64_t{reused_dram}).key("ssd_tokens").value(int64_t{reused_ssd});
  w.key("recomputed_tokens").value(int64_t{recomputed}).end_object();
  w.end_object();
  return w.take();
}

}  // namespace ragd::pipelines
