// ExecutorStats: the scheduler-side snapshot (publish_stats, scheduler thread) merged with the
// kvstore's own counters (thread-safe) at read time, and its JSON form for /v1/cache/stats.
#include "executor_impl.h"


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
  x.share_preemptions = s.share_preemptions;
  x.srtf_preemptions = s.srtf_preemptions;
  planner_->stats(&x);
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
  x.pool_kv_dtype = std::string(kernels::kv_dtype_name(pool.layout().dtype));
  x.swap_bytes = kv_host_->swap_bytes();
  x.spec_ngram = spec_counts_;
  x.spec_draft = spec_draft_counts_;
  x.spec_draft_models = {};
  for (const auto& [dir, d] : draft_models_) {
    const ModelDrafter::Stats ds = d->stats();
    x.spec_draft_models.steps += ds.steps;
    x.spec_draft_models.fed_tokens += ds.fed_tokens;
    x.spec_draft_models.ms += ds.seconds * 1e3;
    x.spec_draft_models.pool_blocks += ds.pool_blocks;
    x.spec_draft_models.pool_used_blocks += ds.pool_used_blocks;
    x.spec_draft_models.ms_per_token = std::max(x.spec_draft_models.ms_per_token, d->token_seconds() * 1e3);
    x.spec_draft_models.ms_per_fed_token = std::max(x.spec_draft_models.ms_per_fed_token, d->feed_token_seconds() * 1e3);
  }
  x.spec_step_fixed_ms = step_cost_.fixed_s() * 1e3;
  x.spec_step_per_row_ms = step_cost_.per_row_s() * 1e3;
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
  if (reranker_) {
    const Reranker::Stats r = reranker_->stats();
    x.rerank_head_hits = r.head_hits;
    x.rerank_head_misses = r.head_misses;
  }
  if (constraints_ready_.load(std::memory_order_acquire)) {
    const engine::ConstraintCache::Stats c = constraints_->stats();
    x.constraint_hits = c.hits;
    x.constraint_misses = c.misses;
    x.constraint_entries = c.entries;
    x.constraint_compile_ms = c.compile_ms;
  }
  const SemanticCache::Stats sc = semantic_->stats();
  x.semantic_hits = sc.hits;
  x.semantic_misses = sc.misses;
  x.semantic_inserts = sc.inserts;
  x.semantic_invalidated = sc.invalidated;
  x.semantic_evicted = sc.evicted;
  x.semantic_entries = sc.entries;
  const kvstore::Stats k = store_->stats();
  x.eviction = k.policy;
  x.tiers.clear();
  std::vector<int> ids;  // x.tiers[i] is tier ids[i]
  for (int t = 0; t < kvstore::kMaxTiers; ++t) {
    const kvstore::TierStats& a = k.tiers[t];
    if (a.kind != kvstore::TierKind::kMemory && a.kind != kvstore::TierKind::kStored) continue;
    ids.push_back(t);
    TierUsage& b = x.tiers.emplace_back();
    b.name = a.name;
    b.enabled = a.enabled;
    b.capacity_bytes = a.capacity_bytes;
    b.used_bytes = a.used_bytes;
    b.entries = a.nodes;
    b.hits = a.hits;
    b.hit_tokens = a.hit_tokens;
    b.evictions = a.evictions;
    b.loads = a.loads;
  }
  uint64_t slower = k.lookup_misses;  // a document past the cached path missed every tier
  for (size_t i = x.tiers.size(); i-- > 0;) {
    x.tiers[i].misses = slower;
    slower += k.tiers[ids[i]].hits;
  }
  x.cache_nodes = k.tree_nodes;
  x.cache_pinned = k.pinned_nodes;
  x.cache_lookups = k.lookups;
  x.cache_lookup_misses = k.lookup_misses;
  x.load_failures = k.load_failures;
  x.checksum_failures = k.checksum_failures;
  x.restored_segments = k.restored_segments;
  x.ssd_error = k.ssd_error;
  x.copies = k.copies;
  x.copies_skipped = k.copies_skipped;
  const kvstore::RemoteStats& r = k.remote;
  x.remote = {r.enabled, r.breaker == "open", r.hits, r.misses, r.hit_bytes, r.puts, r.put_bytes, r.puts_dropped, r.errors,
              r.skipped, r.checksum_failures, r.format_rejects, r.partial_misses, r.breaker_trips, k.remote_load_tokens,
              0, r.last_error};
  x.remote.mac_failures = r.mac_failures;
  x.kv_events_batches = k.kv_events_batches;
  x.kv_events_events = k.kv_events_events;
  x.kv_events_dropped = k.kv_events_dropped;
  x.kv_events_replays = k.kv_events_replays;
  x.kv_events_auth_denied = k.kv_events_auth_denied;
  return x;
}

}  // namespace ragd::pipelines
