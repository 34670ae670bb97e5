// kvstore benchmark (docs/benchmarks.md, section "KV store"):
//   1. prefill-time model T(cached, new) profiled on the running CPU engine (random-weight model);
//   2. hit rate of pgdsf vs lru / lfu / gdsf on a Zipf(0.9) trace of top-4 document sequences over
//      1,000 documents of 256-512 tokens, across a sweep of cache capacities;
//   3. per-tier load bandwidth (lookup + async load + checksum + append into the engine's
//      BlockTable) against the engine's recompute (prefill) time, and the break-even segment size.
// Usage: bench_kvstore [--requests N] [--quick] [--hit-only] [--ssd-dir DIR]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "ragd/common/log.h"
#include "ragd/engine/model.h"
#include "ragd/engine/random_weights.h"
#include "ragd/kvstore/engine_io.h"
#include "ragd/kvstore/kv_store.h"

#include "bench_args.h"

namespace {

using namespace ragd;
using namespace ragd::kvstore;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

[[noreturn]] void die(const std::string& what, const Status& st) {
  std::fprintf(stderr, "bench_kvstore: %s: %s\n", what.c_str(), st.to_string().c_str());
  std::exit(1);
}

// ---- a small random-weight Llama model on the CPU engine -------------------------------------

std::unique_ptr<engine::Model> make_model(size_t kv_pool_bytes) {
  engine::ModelConfig c;
  c.hidden_size = 256;
  c.intermediate_size = 688;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 64;
  c.vocab_size = 2048;
  c.max_position_embeddings = 8192;
  auto w = engine::make_random_weights(c, 7);
  engine::ModelOptions o;
  o.kv_pool_bytes = kv_pool_bytes;
  auto m = engine::Model::create(c, std::move(w), o);
  if (!m.ok()) die("model", m.status());
  return std::move(m).value();
}

std::vector<int32_t> random_tokens(int n, std::mt19937& rng, int vocab) {
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return t;
}

// Seconds to prefill `fresh` tokens after `cached` tokens already in KV (best of `reps`).
double time_prefill(engine::Model& m, int cached, int fresh, int reps) {
  std::mt19937 rng(cached * 131 + fresh);
  const int vocab = m.config().vocab_size;
  engine::KvPool& pool = m.kv_pool();
  engine::BlockTable base;
  if (cached > 0) {
    auto toks = random_tokens(cached, rng, vocab);
    engine::SeqStep s{&base, toks, engine::SeqStep::Logits::kNone};
    engine::StepOutput out;
    if (Status st = m.forward(std::span<engine::SeqStep>(&s, 1), &out); !st.ok()) die("prefill", st);
  }
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    engine::BlockTable t = base.fork(pool);
    auto toks = random_tokens(fresh, rng, vocab);
    engine::SeqStep s{&t, toks, engine::SeqStep::Logits::kLast};
    engine::StepOutput out;
    auto t0 = Clock::now();
    if (Status st = m.forward(std::span<engine::SeqStep>(&s, 1), &out); !st.ok()) die("prefill", st);
    best = std::min(best, since(t0));
    t.release(pool);
  }
  base.release(pool);
  return best;
}

// ---- 2. hit rate on a Zipf trace ---------------------------------------------------------------
struct Trace {
  std::vector<int> doc_tokens;              // per document
  std::vector<std::array<int, 4>> requests;  // top-4 documents, in retrieval order
};

Trace make_trace(int docs, int requests, double zipf_s, uint64_t seed) {
  Trace t;
  std::mt19937_64 rng(seed);
  t.doc_tokens.resize(docs);
  for (auto& n : t.doc_tokens) n = 256 + static_cast<int>(rng() % 257);
  std::vector<double> cdf(docs);
  double sum = 0;
  for (int r = 0; r < docs; ++r) cdf[r] = (sum += 1.0 / std::pow(r + 1.0, zipf_s));
  std::uniform_real_distribution<double> u(0.0, sum);
  // Popularity rank -> document id is a fixed random permutation (ids carry no meaning).
  std::vector<int> perm(docs);
  for (int i = 0; i < docs; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  for (int q = 0; q < requests; ++q) {
    std::array<int, 4> r{};
    for (int i = 0; i < 4; ++i) {
      int d;
      do {
        d = perm[std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin()];
      } while (std::find(r.begin(), r.begin() + i, d) != r.begin() + i);
      r[i] = d;
    }
    t.requests.push_back(r);
  }
  return t;
}

Hash128 doc_hash(int d) {
  const int32_t v[2] = {d, 0x6b76};
  return doc_key(std::span<const int32_t>(v, 2));
}

struct HitResult {
  double token_hit = 0, time_saved = 0;
  uint64_t evictions = 0;
};

// `cost` drives the policy; `metric` (the engine profile) scores the time saved.
HitResult run_trace(const Trace& t, const std::string& policy, uint64_t capacity, const PrefillCostModel& cost, int warmup,
                    size_t history, const PrefillCostModel& metric) {
  KvFormat f;
  f.model_fingerprint = {1, 2};
  f.num_layers = 1;
  f.num_kv_heads = 1;
  f.head_dim = 4;  // 32 bytes/token: the policies only see relative sizes
  Options o;
  o.eviction = *parse_eviction_policy(policy);
  o.hbm_bytes = capacity;
  o.dram_bytes = 0;
  o.io_threads = 1;
  o.cost = cost;
  o.frequency_history = history;
  auto s = KvStore::open(o, f);
  if (!s.ok()) die("open", s.status());
  KvStore& store = **s;
  std::vector<float> k(static_cast<size_t>(520) * 4, 0.5f), v(k.size(), 0.25f);
  double hit_tok = 0, all_tok = 0, saved = 0, all_cost = 0;
  for (size_t q = 0; q < t.requests.size(); ++q) {
    const auto& r = t.requests[q];
    std::vector<Hash128> docs;
    for (int d : r) docs.push_back(doc_hash(d));
    auto hit = store.lookup(docs);
    const size_t h = hit.nodes.size();
    int prefix = 0;
    for (size_t i = 0; i < 4; ++i) {
      const int n = t.doc_tokens[r[i]];
      const double c = metric.seconds(prefix, n);
      if (static_cast<int>(q) >= warmup) {
        all_tok += n;
        all_cost += c;
        if (i < h) {
          hit_tok += n;
          saved += c;
        }
      }
      if (i >= h) {
        auto ins = store.insert(std::span<const Hash128>(docs.data(), i), docs[i], KvData{n, prefix, k.data(), v.data()});
        if (!ins.ok()) die("insert", ins.status());
        if (ins->outcome != KnowledgeTree::InsertOutcome::kInserted) break;  // no room: the rest is recomputed
      }
      prefix += n;
    }
  }
  HitResult res;
  res.token_hit = hit_tok / all_tok;
  res.time_saved = saved / all_cost;
  res.evictions = store.stats().tiers[0].evictions;
  return res;
}

// ---- 3. load bandwidth per tier ------------------------------------------------------------------
struct LoadResult {
  double seconds_per_segment = 0;
  double gbps = 0;
};

LoadResult measure_loads(engine::Model& m, Tier tier, int tokens, const std::string& ssd_dir, double budget_s) {
  const KvFormat f = KvFormat::from_layout(m.kv_pool().layout(), m.fingerprint());
  Options o;
  o.hbm_bytes = 0;
  o.dram_bytes = tier == Tier::kDram ? (1ull << 30) : 0;
  o.ssd_dir = tier == Tier::kSsd ? ssd_dir : "";
  o.promote_on_load = false;
  o.io_threads = 2;
  std::filesystem::remove_all(ssd_dir);
  auto s = KvStore::open(o, f);
  if (!s.ok()) die("open", s.status());
  KvStore& store = **s;
  const int kSegments = 8;
  std::mt19937 rng(tokens);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const size_t elems = static_cast<size_t>(f.num_layers) * tokens * f.token_elems();
  std::vector<float> k(elems), v(elems);
  for (auto& x : k) x = u(rng);
  for (auto& x : v) x = u(rng);
  for (int d = 0; d < kSegments; ++d) {
    auto r = store.insert({}, doc_hash(d), KvData{tokens, 0, k.data(), v.data()});
    if (!r.ok() || r->outcome != KnowledgeTree::InsertOutcome::kInserted) die("insert", r.ok() ? Status::Internal("no room") : r.status());
  }
  if (Status st = store.flush(); !st.ok()) die("flush", st);
  engine::KvPool& pool = m.kv_pool();
  uint64_t segs = 0;
  auto t0 = Clock::now();
  while (since(t0) < budget_s || segs < 16) {
    for (int d = 0; d < kSegments; ++d) {
      const Hash128 key = doc_hash(d);
      auto hit = store.lookup(std::span<const Hash128>(&key, 1));
      if (hit.nodes.size() != 1 || hit.nodes[0].tier != tier) die("lookup", Status::Internal("segment not in the expected tier"));
      auto h = store.load(hit.nodes);
      h->wait();
      if (!h->status().ok()) die("load", h->status());
      engine::BlockTable t;
      if (Status st = append_segment(*h->segment(0), pool, t); !st.ok()) die("append", st);
      t.release(pool);
      ++segs;
    }
  }
  const double el = since(t0);
  LoadResult r;
  r.seconds_per_segment = el / static_cast<double>(segs);
  r.gbps = static_cast<double>(f.bytes_per_token()) * tokens * static_cast<double>(segs) / el / 1e9;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int requests = 4000;
  bool quick = false;
  bool hit_only = false;
  std::string ssd_dir = (std::filesystem::temp_directory_path() / ("ragd_kvbench_" + std::to_string(::getpid()))).string();
  ragd::bench::BenchArgs args("bench_kvstore");
  args.opt("requests", &requests).flag("quick", &quick).flag("hit-only", &hit_only).opt("ssd-dir", &ssd_dir, "DIR");
  if (!args.parse(argc, argv)) return 2;
  if (quick) requests = std::min(requests, 2000);
  log::kvstore()->set_level(spdlog::level::warn);
  const auto t_start = Clock::now();

  // 1. Engine and its prefill-time model.
  auto model = make_model(256ull << 20);
  const auto& cfg = model->config();
  std::printf("# bench_kvstore: engine model hidden=%d layers=%d heads=%d kv_heads=%d head_dim=%d (random weights, CPU)\n",
              cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim);
  const std::vector<int> grid_cached = quick ? std::vector<int>{0, 1024} : std::vector<int>{0, 512, 1536};
  const std::vector<int> grid_new = {64, 256, 512};
  auto cost = PrefillCostModel::profile(
      [&](int c, int n) -> Result<double> { return time_prefill(*model, c, n, quick ? 1 : 2); }, grid_cached, grid_new);
  if (!cost.ok()) die("profile", cost.status());
  std::printf("\n## prefill-time model T(cached, new), seconds (profiled on the engine)\n%-8s", "cached");
  for (int n : grid_new) std::printf(" %10s", ("new=" + std::to_string(n)).c_str());
  std::printf("\n");
  for (int c : grid_cached) {
    std::printf("%-8d", c);
    for (int n : grid_new) std::printf(" %10.4f", cost->seconds(c, n));
    std::printf("\n");
  }

  // 2. Hit rates.
  const Trace trace = make_trace(1000, requests, 0.9, 42);
  const PrefillCostModel analytic_cost;
  uint64_t all_bytes = 0;
  for (int n : trace.doc_tokens) all_bytes += static_cast<uint64_t>(n) * 32 + segment_header_size(1);
  std::printf("\n## hit rate: Zipf(0.9), top-4 of 1000 docs (256-512 tokens), %d requests (first %d warm-up)\n", requests,
              requests / 5);
  std::printf("# capacity as a share of all 1000 documents' KV; token hit = reused doc tokens / doc tokens;\n");
  std::printf("# time saved = profiled prefill time of reused docs / of all docs (what PGDSF optimises)\n");
  std::printf("# 'no history' = access counts forgotten when a node leaves the cache (frequency_history = 0)\n");
  std::printf("%-9s %-7s %10s %11s %10s %22s\n", "capacity", "policy", "token hit", "time saved", "evictions",
              "time saved, no history");
  const std::vector<double> shares = quick ? std::vector<double>{0.05, 0.2} : std::vector<double>{0.025, 0.05, 0.1, 0.2, 0.4};
  for (double share : shares) {
    double lru_saved = 0;
    for (const char* p : {"lru", "lfu", "gdsf", "pgdsf", "pgdsf-a"}) {
      // pgdsf-a: PGDSF with the analytic default T (deterministic; the profile is noisy on a busy box).
      const bool analytic = std::string(p) == "pgdsf-a";
      const PrefillCostModel& cm = analytic ? analytic_cost : *cost;
      const std::string policy = analytic ? "pgdsf" : p;
      const uint64_t cap = static_cast<uint64_t>(share * static_cast<double>(all_bytes));
      HitResult r = run_trace(trace, policy, cap, cm, requests / 5, 65536, *cost);
      HitResult r0 = std::string(p) == "lru" ? r : run_trace(trace, policy, cap, cm, requests / 5, 0, *cost);
      if (std::string(p) == "lru") lru_saved = r.time_saved;
      std::printf("%-8.1f%% %-7s %9.1f%% %10.1f%% %10llu %21.1f%%", share * 100, p, r.token_hit * 100, r.time_saved * 100,
                  static_cast<unsigned long long>(r.evictions), r0.time_saved * 100);
      if (std::string(p) != "lru") std::printf("   (x%.2f vs lru)", lru_saved > 0 ? r.time_saved / lru_saved : 0.0);
      std::printf("\n");
    }
  }
  if (hit_only) return 0;

  // 3. Load bandwidth vs recompute.
  const KvFormat f = KvFormat::from_layout(model->kv_pool().layout(), model->fingerprint());
  std::printf("\n## load (lookup + async load + checksum + BlockTable append) vs recompute; KV %zu bytes/token\n",
              f.bytes_per_token());
  std::printf("# SSD = RocksDB/BlobDB in %s (OS page cache warm: the segments fit in RAM)\n", ssd_dir.c_str());
  std::printf("%-7s %12s %10s %12s %10s %12s %10s\n", "tokens", "recompute ms", "dram ms", "dram GB/s", "ssd ms", "ssd GB/s",
              "");
  const std::vector<int> sizes = quick ? std::vector<int>{1, 16, 256} : std::vector<int>{1, 4, 16, 64, 256, 1024};
  struct Row {
    int n;
    double rec, dram, ssd;
  };
  std::vector<Row> rows;
  for (int n : sizes) {
    const double rec = time_prefill(*model, 0, n, 2);
    LoadResult d = measure_loads(*model, Tier::kDram, n, ssd_dir, quick ? 0.05 : 0.15);
    LoadResult s = measure_loads(*model, Tier::kSsd, n, ssd_dir, quick ? 0.05 : 0.15);
    rows.push_back({n, rec, d.seconds_per_segment, s.seconds_per_segment});
    std::printf("%-7d %12.3f %10.4f %12.2f %10.4f %12.2f   load/recompute: dram %.4f ssd %.4f\n", n, rec * 1e3,
                d.seconds_per_segment * 1e3, d.gbps, s.seconds_per_segment * 1e3, s.gbps, d.seconds_per_segment / rec,
                s.seconds_per_segment / rec);
  }
  // Break-even: the segment size from which loading beats recomputing. Measured: the smallest
  // size where it does. Model: load(n) = fixed + n * per_token_load (fixed = the 1-token load
  // latency, per-token slope fitted), recompute(n) = n * marginal per-token prefill time (fitted
  // slope, i.e. what a batched prefill would spend on these tokens), n* = fixed / (rec - load).
  auto slope = [](const std::vector<std::pair<double, double>>& xy) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (auto [x, y] : xy) sx += x, sy += y, sxx += x * x, sxy += x * y;
    const double n = static_cast<double>(xy.size());
    return (n * sxy - sx * sy) / (n * sxx - sx * sx);
  };
  for (int which = 0; which < 2; ++which) {
    std::vector<std::pair<double, double>> load_xy, rec_xy;
    int first = -1;
    for (const Row& r : rows) {
      const double l = which == 0 ? r.dram : r.ssd;
      load_xy.emplace_back(r.n, l);
      rec_xy.emplace_back(r.n, r.rec);
      if (first < 0 && l < r.rec) first = r.n;
    }
    const double fixed = which == 0 ? rows.front().dram : rows.front().ssd;
    const double lb = std::max(0.0, slope(load_xy)), rb = slope(rec_xy);
    const double nstar = rb > lb ? fixed / (rb - lb) : INFINITY;
    std::printf("# break-even %s: loading wins from %s tokens (measured); fixed %.3f ms + %.2f us/token load vs %.1f us/token "
                "marginal recompute -> n* = %.2f tokens\n",
                which == 0 ? "DRAM" : "SSD ", first < 0 ? "none of the" : std::to_string(first).c_str(), fixed * 1e3, lb * 1e6,
                rb * 1e6, nstar);
  }
  std::filesystem::remove_all(ssd_dir);
  std::printf("# total %.1f s\n", since(t_start));
  return 0;
}
