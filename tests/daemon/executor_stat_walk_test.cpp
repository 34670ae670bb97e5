// ExecutorStats::for_each_number (the /metrics executor stat walk) against the walk it replaced:
// every numeric and bool leaf of to_json(), parsed back with simdjson. Same paths, same values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>

#include <simdjson.h>

#include "ragd/pipelines/executor_stats.h"

namespace ragd::pipelines {
namespace {

using Numbers = std::map<std::string, double>;

void json_walk(simdjson::dom::element e, const std::string& path, Numbers* out) {
  switch (e.type()) {
    case simdjson::dom::element_type::OBJECT: {
      simdjson::dom::object o;
      ASSERT_FALSE(e.get_object().get(o));
      for (auto [k, v] : o) json_walk(v, path.empty() ? std::string(k) : path + "." + std::string(k), out);
      break;
    }
    case simdjson::dom::element_type::INT64:
    case simdjson::dom::element_type::UINT64:
    case simdjson::dom::element_type::DOUBLE: {
      double d = 0;
      ASSERT_FALSE(e.get_double().get(d));
      EXPECT_TRUE(out->emplace(path, d).second) << path;
      break;
    }
    case simdjson::dom::element_type::BOOL: {
      bool b = false;
      ASSERT_FALSE(e.get_bool().get(b));
      EXPECT_TRUE(out->emplace(path, b ? 1 : 0).second) << path;
      break;
    }
    default: break;
  }
}

Numbers through_json(const ExecutorStats& st) {
  const std::string js = st.to_json();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  EXPECT_FALSE(parser.parse(js).get(doc)) << js;
  Numbers out;
  json_walk(doc, "", &out);
  return out;
}

Numbers typed(const ExecutorStats& st) {
  Numbers out;
  st.for_each_number([&](const std::string& path, double v) { EXPECT_TRUE(out.emplace(path, v).second) << path; });
  return out;
}

void expect_same(const Numbers& a, const Numbers& b) {
  ASSERT_EQ(a.size(), b.size());
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
    EXPECT_EQ(ia->first, ib->first);
    EXPECT_EQ(std::signbit(ia->second), std::signbit(ib->second)) << ia->first;
    EXPECT_EQ(ia->second, ib->second) << ia->first;  // bit-identical, not within a tolerance
  }
}

// Every field set to a distinct value: odd doubles (more digits than the JSON form keeps, tiny,
// huge, negative zero, NaN), integers beyond 2^53, negative counts, bools both ways.
ExecutorStats filled() {
  ExecutorStats s;
  long n = 1;
  auto next = [&n] { return n += 7919; };
  s.model = "m\xC3\xA9";
  s.policy = "fcfs";
  for (long* f : {&s.steps, &s.admitted, &s.finished, &s.cancelled, &s.swaps_out, &s.swaps_in, &s.drops,
                  &s.share_preemptions, &s.srtf_preemptions, &s.tokens_prefill, &s.tokens_decode, &s.length_samples, &s.runs_with_reuse,
                  &s.recomputed, &s.approximate_runs, &s.blended_tokens, &s.repaired_tokens, &s.blend_fallbacks})
    *f = next();
  for (int t = 0; t < kvstore::kNumBuiltinTiers; ++t) s.reused.n[static_cast<size_t>(t)] = next();
  s.drops = -3;
  for (int* f : {&s.waiting, &s.running, &s.swapped, &s.loading, &s.queued}) *f = static_cast<int>(next());
  s.length_mae = 3.14159265358979;
  s.length_within_2x = 1e-300;
  s.reuse_auto_kl = -0.0;
  s.reuse_auto_agreement = std::numeric_limits<double>::quiet_NaN();
  s.constraint_compile_ms = 123456789.987654321;
  for (uint64_t* f : {&s.pool_blocks, &s.pool_block_size, &s.pool_bytes, &s.swap_bytes, &s.cache_nodes, &s.cache_pinned,
                      &s.cache_lookups, &s.cache_lookup_misses, &s.load_failures, &s.checksum_failures,
                      &s.restored_segments, &s.copies, &s.copies_skipped, &s.kv_events_batches, &s.kv_events_events,
                      &s.kv_events_dropped, &s.kv_events_replays, &s.kv_events_auth_denied, &s.rerank_head_hits,
                      &s.rerank_head_misses, &s.constraint_hits, &s.constraint_misses, &s.constraint_entries,
                      &s.semantic_hits, &s.semantic_misses, &s.semantic_inserts, &s.semantic_invalidated,
                      &s.semantic_evicted, &s.semantic_entries, &s.spec_ngram.drafted, &s.spec_ngram.accepted,
                      &s.spec_ngram.steps, &s.spec_ngram.budget_skipped, &s.spec_ngram.answers_drafted,
                      &s.spec_ngram.answers_accepted})
    *f = static_cast<uint64_t>(next());
  s.spec_step_fixed_ms = 1.0 / 3.0;
  s.spec_step_per_row_ms = 2.5e-7;
  s.pool_free_blocks = 5;
  s.pool_bytes = (uint64_t{1} << 60) + 12345;  // beyond 2^53: rounded as a double either way
  s.cache_lookups = std::numeric_limits<uint64_t>::max();
  s.pool_kv_dtype = "bf16";
  s.eviction = "pgdsf";
  s.ssd_error = "disk \xFF full";  // invalid UTF-8 in a string the walk skips
  for (size_t t = 0; t < s.tiers.size(); ++t) {
    TierUsage& u = s.tiers[t];
    u.enabled = t != 1;
    for (uint64_t* f : {&u.capacity_bytes, &u.used_bytes, &u.entries, &u.hits, &u.misses, &u.hit_tokens, &u.evictions,
                        &u.loads})
      *f = static_cast<uint64_t>(next());
  }
  s.remote.enabled = true;
  s.remote.breaker_open = false;
  for (uint64_t* f : {&s.remote.hits, &s.remote.misses, &s.remote.hit_bytes, &s.remote.puts, &s.remote.put_bytes,
                      &s.remote.puts_dropped, &s.remote.errors, &s.remote.skipped, &s.remote.checksum_failures,
                      &s.remote.format_rejects, &s.remote.partial_misses, &s.remote.breaker_trips,
                      &s.remote.loaded_tokens, &s.remote.mac_failures})
    *f = static_cast<uint64_t>(next());
  s.remote.last_error = "timeout";
  s.reuse_auto = "epic:16";
  return s;
}

TEST(ExecutorStatWalk, SamePathsAndValuesAsTheJsonWalk) {
  const ExecutorStats s = filled();
  const Numbers typed_walk = typed(s);
  expect_same(typed_walk, through_json(s));
  EXPECT_EQ(typed_walk.count("reuse.auto.greedy_agreement"), 0u);  // NaN: null in JSON, no series
  EXPECT_EQ(typed_walk.at("constraints.compile_ms"), 123456800.0);
  EXPECT_EQ(typed_walk.at("kv_pool.used_blocks"), static_cast<double>(s.pool_blocks - 5));
  EXPECT_EQ(typed_walk.at("tiers.dram.enabled"), 0.0);
  EXPECT_EQ(typed_walk.at("remote.enabled"), 1.0);
  EXPECT_EQ(typed_walk.count("model"), 0u);
  EXPECT_EQ(typed_walk.at("speculative_decoding.ngram.drafted_tokens"), static_cast<double>(s.spec_ngram.drafted));
  EXPECT_EQ(typed_walk.count("speculative_decoding.step_per_row_ms"), 1u);
}

TEST(ExecutorStatWalk, DefaultStatsToo) {
  expect_same(typed(ExecutorStats{}), through_json(ExecutorStats{}));
}

}  // namespace
}  // namespace ragd::pipelines
