// ExecutorStats: a typed snapshot of the executor (scheduler, engine pool, the KV cache's tiers,
// reuse) for /v1/cache/stats and /metrics; to_json() is its JSON form, for_each_number() its
// numbers by JSON path. Header-only so that the daemon's HTTP layer can use it without linking the
// pipelines library.
// Thread-safety: a value type.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ragd/common/json_writer.h"
#include "ragd/kvstore/tier.h"

namespace ragd::pipelines {

// One KV tier's state: a tier of the knowledge tree (kvstore/tier.h), named by the store.
struct TierUsage {
  std::string name;          // hbm (the engine pool), dram, ssd, or a registered tier's name
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
  long srtf_preemptions = 0;   // of the preemptions, srtf's: a longer running request's slot to a shorter one
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
  // The tree's tiers in the store's order: hbm, dram, ssd, then any registered stored tier.
  std::vector<TierUsage> tiers{{"hbm"}, {"dram"}, {"ssd"}};
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
  kvstore::TierCounts reused;  // prompt tokens reused, by source tier
  long recomputed = 0;
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
  // Speculative decoding (draft_budget.h), per draft method ("ngram": drafts from the run's own
  // tokens, spec_ngram; "draft": from a draft model, spec_draft): draft tokens verified and accepted, verification steps, and draft tokens
  // the drafter proposed that the step budget left out (their rows would have cost more than they
  // were expected to save). The measured step-cost model the budget decides by (ms; 0 = no fit
  // yet): t(rows) = step_fixed_ms + step_per_row_ms * rows. Of the verified drafts, those taken
  // from earlier answers of the run's scope (output_ngrams.h): answers_drafted / answers_accepted.
  // spec_draft.turned_down: decode steps of runs of method draft in which the draft-model gate
  // (draft_model_pays) turned the model down (its drafts were not expected to repay what it had to
  // be fed first); those steps drafted from the n-gram lookup, counted in spec_ngram.
  struct Speculative {
    uint64_t drafted = 0, accepted = 0, steps = 0, budget_skipped = 0;
    uint64_t answers_drafted = 0, answers_accepted = 0;
    uint64_t turned_down = 0;
  } spec_ngram, spec_draft;
  // The draft models (all of them together): their engine steps, tokens fed, time (ms), KV pool
  // blocks (in all / in use: the runs' draft KV) and the largest measured ms per drafted token and
  // per token fed in a prefill.
  struct DraftModels {
    uint64_t steps = 0, fed_tokens = 0, pool_blocks = 0, pool_used_blocks = 0;
    double ms = 0, ms_per_token = 0;
    double ms_per_fed_token = 0;  // the largest measured ms per token fed in a prefill (a prompt)
  } spec_draft_models;
  double spec_step_fixed_ms = 0, spec_step_per_row_ms = 0;
  // The long-context route (sequence_parallel_route.h): runs it served, its group's workers, the
  // prefill progress of the run on it now (prompt tokens done / in all; 0 / 0 when none), the
  // blocks in use in its rank 0's own pool (as of the last prefill step or run end), and the KV its
  // runs moved out of that pool (tokens, and bytes read back from SSD), summed.
  struct LongContext {
    uint64_t runs = 0;
    int64_t workers = 0;         // the last run's prefill degree
    int64_t decode_workers = 0;  // ... and decode degree (fewer after its KV moved)
    int64_t prefill_done = 0, prefill_total = 0;
    int64_t pool_used_blocks = 0;
    uint64_t spilled_tokens = 0, spilled_ssd_tokens = 0, spill_ssd_bytes_read = 0;
  } long_context;

  std::string to_json() const;

  // Calls fn(path, value) for every number and bool of the JSON form, by its dotted path
  // ("scheduler.steps", "tiers.hbm.hits", "constraints.compile_ms"): bools as 1 / 0, doubles as the
  // JSON form carries them (7 significant digits; non-finite ones, written as null, are left out),
  // so that /metrics (ragd_executor_stat) and /v1/cache/stats show the same values.
  template <class Fn>
  void for_each_number(Fn&& fn) const;

  // Every field in the JSON form's order and nesting: v.begin(key) / v.end() around an object,
  // v.field(key, value) with a std::string, bool, int64_t, uint64_t or double (each returns the
  // visitor, so calls chain). to_json() and for_each_number() are the two visitors, so the names
  // exist once.
  template <class V>
  void visit(V& v) const;
};

template <class V>
void ExecutorStats::visit(V& v) const {
  v.field("model", model);
  v.begin("scheduler").field("policy", policy).field("steps", int64_t{steps}).field("waiting", int64_t{waiting});
  v.field("running", int64_t{running}).field("swapped", int64_t{swapped}).field("loading", int64_t{loading});
  v.field("queued", int64_t{queued}).field("admitted", int64_t{admitted}).field("finished", int64_t{finished});
  v.field("cancelled", int64_t{cancelled}).field("swaps_out", int64_t{swaps_out}).field("swaps_in", int64_t{swaps_in});
  v.field("drops", int64_t{drops}).field("share_preemptions", int64_t{share_preemptions});
  v.field("srtf_preemptions", int64_t{srtf_preemptions});
  v.field("tokens_prefill", int64_t{tokens_prefill}).field("tokens_decode", int64_t{tokens_decode});
  v.begin("length_predictor").field("samples", int64_t{length_samples}).field("mae", length_mae);
  v.field("within_2x", length_within_2x).end();
  v.end();
  v.begin("kv_pool").field("blocks", pool_blocks).field("free_blocks", pool_free_blocks);
  v.field("used_blocks", pool_blocks - pool_free_blocks).field("block_size", pool_block_size);
  v.field("bytes", pool_bytes).field("swap_bytes", swap_bytes).field("kv_dtype", pool_kv_dtype);
  v.end();
  v.begin("cache").field("eviction", eviction).field("nodes", cache_nodes).field("pinned", cache_pinned);
  v.field("lookups", cache_lookups).field("lookup_misses", cache_lookup_misses).field("load_failures", load_failures);
  v.field("checksum_failures", checksum_failures).field("restored_segments", restored_segments);
  v.field("ssd_error", ssd_error).field("copies", copies).field("copies_skipped", copies_skipped);
  v.begin("kv_events").field("batches", kv_events_batches).field("events", kv_events_events);
  v.field("dropped", kv_events_dropped).field("replays", kv_events_replays).field("auth_denied", kv_events_auth_denied);
  v.end();
  v.end();
  v.begin("remote").field("enabled", remote.enabled).field("breaker_open", remote.breaker_open);
  v.field("hits", remote.hits).field("misses", remote.misses).field("hit_bytes", remote.hit_bytes);
  v.field("loaded_tokens", remote.loaded_tokens).field("puts", remote.puts).field("put_bytes", remote.put_bytes);
  v.field("puts_dropped", remote.puts_dropped).field("errors", remote.errors).field("skipped", remote.skipped);
  v.field("checksum_failures", remote.checksum_failures).field("mac_failures", remote.mac_failures);
  v.field("format_rejects", remote.format_rejects).field("partial_misses", remote.partial_misses);
  v.field("breaker_trips", remote.breaker_trips).field("last_error", remote.last_error);
  v.end();
  v.begin("tiers");
  for (size_t t = 0; t < tiers.size(); ++t) {
    const TierUsage& u = tiers[t];
    v.begin(u.name.c_str()).field("enabled", u.enabled).field("capacity_bytes", u.capacity_bytes);
    v.field("used_bytes", u.used_bytes).field("entries", u.entries).field("hits", u.hits);
    v.field("hit_tokens", u.hit_tokens).field("evictions", u.evictions).field("loads", u.loads);
    v.end();
  }
  v.end();
  v.begin("reuse").field("runs", int64_t{runs_with_reuse});
  reused.for_each([&](std::string_view name, int64_t n) { v.field((std::string(name) + "_tokens").c_str(), n); });
  v.field("recomputed_tokens", int64_t{recomputed});
  v.field("approximate_runs", int64_t{approximate_runs}).field("blended_tokens", int64_t{blended_tokens});
  v.field("repaired_tokens", int64_t{repaired_tokens}).field("blend_fallbacks", int64_t{blend_fallbacks});
  v.begin("auto").field("choice", reuse_auto).field("first_token_kl", reuse_auto_kl);
  v.field("greedy_agreement", reuse_auto_agreement).end();
  v.end();
  v.begin("reranker").field("head_hits", rerank_head_hits).field("head_misses", rerank_head_misses).end();
  v.begin("constraints").field("hits", constraint_hits).field("misses", constraint_misses);
  v.field("entries", constraint_entries).field("compile_ms", constraint_compile_ms).end();
  v.begin("semantic_cache").field("hits", semantic_hits).field("misses", semantic_misses);
  v.field("inserts", semantic_inserts).field("invalidated", semantic_invalidated);
  v.field("evicted", semantic_evicted).field("entries", semantic_entries).end();
  v.begin("speculative_decoding").begin("ngram").field("drafted_tokens", spec_ngram.drafted);
  v.field("accepted_tokens", spec_ngram.accepted).field("steps", spec_ngram.steps);
  v.field("acceptance", spec_ngram.drafted ? static_cast<double>(spec_ngram.accepted) / static_cast<double>(spec_ngram.drafted) : 0.0);
  v.field("budget_skipped_tokens", spec_ngram.budget_skipped);
  v.begin("answers").field("drafted_tokens", spec_ngram.answers_drafted).field("accepted_tokens", spec_ngram.answers_accepted).end();
  v.end();
  v.begin("draft").field("drafted_tokens", spec_draft.drafted);
  v.field("accepted_tokens", spec_draft.accepted).field("steps", spec_draft.steps);
  v.field("acceptance", spec_draft.drafted ? static_cast<double>(spec_draft.accepted) / static_cast<double>(spec_draft.drafted) : 0.0);
  v.field("budget_skipped_tokens", spec_draft.budget_skipped).field("turned_down_steps", spec_draft.turned_down);
  v.field("model_steps", spec_draft_models.steps).field("model_fed_tokens", spec_draft_models.fed_tokens);
  v.field("model_ms", spec_draft_models.ms).field("model_ms_per_token", spec_draft_models.ms_per_token);
  v.field("model_ms_per_fed_token", spec_draft_models.ms_per_fed_token);
  v.field("pool_blocks", spec_draft_models.pool_blocks).field("pool_used_blocks", spec_draft_models.pool_used_blocks);
  v.end();
  v.field("step_fixed_ms", spec_step_fixed_ms).field("step_per_row_ms", spec_step_per_row_ms).end();
  v.begin("long_context").field("runs", long_context.runs).field("workers", long_context.workers)
      .field("decode_workers", long_context.decode_workers);
  v.field("prefill_done_tokens", long_context.prefill_done).field("prefill_total_tokens", long_context.prefill_total);
  v.field("pool_used_blocks", long_context.pool_used_blocks);
  v.field("spilled_tokens", long_context.spilled_tokens).field("spilled_ssd_tokens", long_context.spilled_ssd_tokens);
  v.field("spill_ssd_bytes_read", long_context.spill_ssd_bytes_read).end();
}

inline std::string ExecutorStats::to_json() const {
  struct Writer {
    JsonWriter w;
    Writer& begin(const char* key) { return w.key(key).begin_object(), *this; }
    Writer& end() { return w.end_object(), *this; }
    Writer& field(const char* key, const std::string& s) { return w.key(key).value(s), *this; }
    Writer& field(const char* key, bool b) { return w.key(key).value(b), *this; }
    Writer& field(const char* key, int64_t n) { return w.key(key).value(n), *this; }
    Writer& field(const char* key, uint64_t n) { return w.key(key).value(n), *this; }
    Writer& field(const char* key, double d) { return w.key(key).value(d), *this; }
  } v;
  v.w.begin_object();
  visit(v);
  v.w.end_object();
  return v.w.take();
}

template <class Fn>
void ExecutorStats::for_each_number(Fn&& fn) const {
  struct Walker {
    Fn& fn;
    std::string path;
    std::vector<size_t> marks;  // path length before each open object
    std::string at(const char* key) const { return path.empty() ? std::string(key) : path + "." + key; }
    Walker& begin(const char* key) {
      marks.push_back(path.size());
      path = at(key);
      return *this;
    }
    Walker& end() {
      path.resize(marks.back());
      marks.pop_back();
      return *this;
    }
    Walker& field(const char*, const std::string&) { return *this; }
    Walker& field(const char* key, bool b) { return number(key, b ? 1.0 : 0.0); }
    Walker& field(const char* key, int64_t n) { return number(key, static_cast<double>(n)); }
    Walker& field(const char* key, uint64_t n) { return number(key, static_cast<double>(n)); }
    Walker& field(const char* key, double d) {
      if (!std::isfinite(d)) return *this;  // the JSON form writes null
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.7g", d);  // JsonWriter's precision
      const double v = std::strtod(buf, nullptr);
      return number(key, v == 0 ? 0.0 : v);  // -0 is written "-0", an integer: read back as 0
    }
    Walker& number(const char* key, double v) {
      fn(at(key), v);
      return *this;
    }
  } w{fn, {}, {}};
  visit(w);
}

}  // namespace ragd::pipelines
