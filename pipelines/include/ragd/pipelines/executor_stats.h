// ExecutorStats: a typed snapshot of the executor (scheduler, engine pool, the KV cache's tiers,
// reuse) for /v1/cache/stats and /metrics; to_json() is its JSON form. Header-only so that the
// daemon's HTTP layer can use it without linking the pipelines library.
// Thread-safety: a value type.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "ragd/common/json_writer.h"

namespace ragd::pipelines {

// One KV tier's state (index = kvstore::Tier: 0 hbm = the engine pool, 1 dram, 2 ssd).
struct TierUsage {
  bool enabled = false;
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t entries = 0;      // knowledge-tree nodes holding a copy here
  uint64_t hits = 0;         // looked-up nodes whose fastest copy was here
  uint64_t misses = 0;       // looked-up documents not here: fastest copy slower, or not cached
  uint64_t hit_tokens = 0;
  uint64_t evictions = 0;
  uint64_t loads = 0;        // segments read from here
};

struct ExecutorStats {
  std::string model;
  // scheduler
  std::string policy;
  long steps = 0, admitted = 0, finished = 0, cancelled = 0;
  long swaps_out = 0, swaps_in = 0, drops = 0;
  long share_preemptions = 0;  // of the preemptions, those that gave a tenant's slot to another tenant
  long tokens_prefill = 0, tokens_decode = 0;
  int waiting = 0, running = 0, swapped = 0;
  int loading = 0;  // requests waiting for their KV to come up from DRAM / SSD
  int queued = 0;   // submitted, still in retrieval / prompt building
  double length_mae = 0, length_within_2x = 0;
  long length_samples = 0;
  // engine pool
  uint64_t pool_blocks = 0, pool_free_blocks = 0, pool_block_size = 0, pool_bytes = 0, swap_bytes = 0;
  std::string pool_kv_dtype = "f32";  // how the pool stores K and V (runtime.kv_dtype)
  // KV cache (one knowledge tree over every tier)
  std::string eviction;
  std::array<TierUsage, 3> tiers{};
  uint64_t cache_nodes = 0, cache_pinned = 0, cache_lookups = 0, cache_lookup_misses = 0;
  uint64_t load_failures = 0, checksum_failures = 0, restored_segments = 0;
  uint64_t copies = 0, copies_skipped = 0;  // pool-to-DRAM copies of new nodes: made / skipped (bound, pool pressure)
  std::string ssd_error;  // why the SSD tier is off ("" = fine)
  // The shared remote tier (kvstore::RemoteStats): enabled, breaker state, traffic and misses.
  struct Remote {
    bool enabled = false, breaker_open = false;
    uint64_t hits = 0, misses = 0, hit_bytes = 0, puts = 0, put_bytes = 0, puts_dropped = 0, errors = 0, skipped = 0;
    uint64_t checksum_failures = 0, format_rejects = 0, partial_misses = 0, breaker_trips = 0, loaded_tokens = 0;
    uint64_t mac_failures = 0;  // values whose MAC did not verify (forged, or another fleet secret)
    std::string last_error;
  } remote;
  // KV events (events.kv_endpoint): batches / events published, events dropped, replays served
  uint64_t kv_events_batches = 0, kv_events_events = 0, kv_events_dropped = 0, kv_events_replays = 0;
  uint64_t kv_events_auth_denied = 0;  // CURVE handshakes refused
  // reuse, summed over finished runs
  long runs_with_reuse = 0;
  long reused_hbm = 0, reused_dram = 0, reused_ssd = 0, reused_remote = 0, recomputed = 0;
  long approximate_runs = 0;   // runs that placed blended KV (cacheblend / epic)
  long blended_tokens = 0, repaired_tokens = 0;
  long blend_fallbacks = 0;    // approximate runs that served exact reuse instead (reuse_note)
  // reuse "auto": the mode it last chose on this model ("epic:16", ..., "exact"; "" = not used
  // yet) and that mode's self-check fidelity.
  std::string reuse_auto;
  double reuse_auto_kl = 0, reuse_auto_agreement = 0;
  // The generator's reranker (rerank pipelines without a rerank_model): passage prompt heads found
  // in its cache / prefilled (cached per request KV scope: tenant and cache_salt).
  uint64_t rerank_head_hits = 0, rerank_head_misses = 0;
  // Structured output's compiled constraints (engine::ConstraintCache): lookups that found one /
  // compiled one, schemas held, and the compile time of the misses.
  uint64_t constraint_hits = 0, constraint_misses = 0, constraint_entries = 0;
  double constraint_compile_ms = 0;
  // Semantic reuse of answers ([semantic_cache] pipelines): questions answered from the cache /
  // not, answers kept, entries invalidated by document changes, evicted, held.
  uint64_t semantic_hits = 0, semantic_misses = 0, semantic_inserts = 0, semantic_invalidated = 0, semantic_evicted = 0,
           semantic_entries = 0;

  std::string to_json() const;
};

inline std::string ExecutorStats::to_json() const {
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
  w.key("share_preemptions").value(int64_t{share_preemptions});
  w.key("tokens_prefill").value(int64_t{tokens_prefill}).key("tokens_decode").value(int64_t{tokens_decode});
  w.key("length_predictor").begin_object().key("samples").value(int64_t{length_samples}).key("mae").value(length_mae);
  w.key("within_2x").value(length_within_2x).end_object();
  w.end_object();
  w.key("kv_pool").begin_object().key("blocks").value(pool_blocks).key("free_blocks").value(pool_free_blocks);
  w.key("used_blocks").value(pool_blocks - pool_free_blocks).key("block_size").value(pool_block_size).key("bytes").value(pool_bytes).key("swap_bytes").value(swap_bytes);
  w.key("kv_dtype").value(pool_kv_dtype);
  w.end_object();
  w.key("cache").begin_object().key("eviction").value(eviction).key("nodes").value(cache_nodes);
  w.key("pinned").value(cache_pinned).key("lookups").value(cache_lookups).key("lookup_misses").value(cache_lookup_misses);
  w.key("load_failures").value(load_failures).key("checksum_failures").value(checksum_failures);
  w.key("restored_segments").value(restored_segments).key("ssd_error").value(ssd_error);
  w.key("copies").value(copies).key("copies_skipped").value(copies_skipped);
  w.key("kv_events").begin_object().key("batches").value(kv_events_batches).key("events").value(kv_events_events);
  w.key("dropped").value(kv_events_dropped).key("replays").value(kv_events_replays);
  w.key("auth_denied").value(kv_events_auth_denied).end_object();
  w.end_object();
  w.key("remote").begin_object().key("enabled").value(remote.enabled).key("breaker_open").value(remote.breaker_open);
  w.key("hits").value(remote.hits).key("misses").value(remote.misses).key("hit_bytes").value(remote.hit_bytes);
  w.key("loaded_tokens").value(remote.loaded_tokens).key("puts").value(remote.puts).key("put_bytes").value(remote.put_bytes);
  w.key("puts_dropped").value(remote.puts_dropped).key("errors").value(remote.errors).key("skipped").value(remote.skipped);
  w.key("checksum_failures").value(remote.checksum_failures).key("mac_failures").value(remote.mac_failures);
  w.key("format_rejects").value(remote.format_rejects);
  w.key("partial_misses").value(remote.partial_misses).key("breaker_trips").value(remote.breaker_trips);
  w.key("last_error").value(remote.last_error).end_object();
  w.key("tiers").begin_object();
  for (size_t t = 0; t < tiers.size(); ++t) {
    const TierUsage& u = tiers[t];
    w.key(kTierNames[t]).begin_object().key("enabled").value(u.enabled).key("capacity_bytes").value(u.capacity_bytes);
    w.key("used_bytes").value(u.used_bytes).key("entries").value(u.entries).key("hits").value(u.hits);
    w.key("hit_tokens").value(u.hit_tokens).key("evictions").value(u.evictions).key("loads").value(u.loads);
    w.end_object();
  }
  w.end_object();
  w.key("reuse").begin_object().key("runs").value(int64_t{runs_with_reuse}).key("hbm_tokens").value(int64_t{reused_hbm});
  w.key("dram_tokens").value(int64_t{reused_dram}).key("ssd_tokens").value(int64_t{reused_ssd});
  w.key("remote_tokens").value(int64_t{reused_remote});
  w.key("recomputed_tokens").value(int64_t{recomputed}).key("approximate_runs").value(int64_t{approximate_runs});
  w.key("blended_tokens").value(int64_t{blended_tokens}).key("repaired_tokens").value(int64_t{repaired_tokens});
  w.key("blend_fallbacks").value(int64_t{blend_fallbacks});
  w.key("auto").begin_object().key("choice").value(reuse_auto).key("first_token_kl").value(reuse_auto_kl);
  w.key("greedy_agreement").value(reuse_auto_agreement).end_object();
  w.end_object();
  w.key("reranker").begin_object().key("head_hits").value(rerank_head_hits);
  w.key("head_misses").value(rerank_head_misses).end_object();
  w.key("constraints").begin_object().key("hits").value(constraint_hits).key("misses").value(constraint_misses);
  w.key("entries").value(constraint_entries).key("compile_ms").value(constraint_compile_ms).end_object();
  w.key("semantic_cache").begin_object().key("hits").value(semantic_hits).key("misses").value(semantic_misses);
  w.key("inserts").value(semantic_inserts).key("invalidated").value(semantic_invalidated).key("evicted").value(semantic_evicted);
  w.key("entries").value(semantic_entries).end_object();
  w.end_object();
  return w.take();
}

}  // namespace ragd::pipelines
