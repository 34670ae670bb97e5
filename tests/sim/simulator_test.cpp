// The simulator's behaviour: determinism, conservation, and the policy effects of the real
// scheduler and knowledge tree it runs (PGDSF vs LRU, SJF vs FCFS, reuse vs no reuse).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "ragd/sim/simulator.h"
#include "ragd/sim/workload.h"
#include "sim_test_util.h"

namespace ragd::sim {
namespace {

WorkloadSpec rag_workload() {
  WorkloadSpec w;
  w.rate = 20;
  w.requests = 3000;
  w.docs = 400;
  w.zipf = 0.9;
  w.docs_per_query = 2;
  w.doc_tokens = 256;
  w.prefix_tokens = 32;
  w.query_tokens = 16;
  w.answer_tokens = {{{8, 1.0}}};
  w.tenants = 2;
  w.seed = 3;
  return w;
}

Result<SimResult> run(const SimOptions& o, const WorkloadSpec& w) {
  auto reqs = generate_requests(w);
  if (!reqs.ok()) return reqs.status();
  return simulate(o, testing::simple_cost(), *reqs);
}

// Share of prompt tokens served from cache.
double hit_rate(const SimResult& r) {
  double reused = 0, prompt = 0;
  for (const auto& x : r.records) {
    reused += x.reused.total();
    prompt += x.prompt_tokens;
  }
  return reused / prompt;
}

double mean_ttft(const SimResult& r) {
  double s = 0;
  for (const auto& x : r.records) s += x.ttft_ms;
  return s / r.records.size();
}

TEST(Simulator, SameSeedSameResult) {
  SimOptions o = testing::small_fleet();
  o.replicas = 3;
  o.router = RouterKind::kKvAware;
  o.kv.pool_blocks = 600;
  o.kv.dram_bytes = 8 << 20;
  o.remote_bytes = 16 << 20;
  auto a = run(o, rag_workload());
  auto b = run(o, rag_workload());
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->records.size(), b->records.size());
  EXPECT_EQ(a->events, b->events);
  EXPECT_EQ(a->steps, b->steps);
  for (size_t i = 0; i < a->records.size(); ++i) {
    const SimRecord &x = a->records[i], &y = b->records[i];
    ASSERT_EQ(x.replica, y.replica) << i;
    ASSERT_EQ(x.ttft_ms, y.ttft_ms) << i;  // bit-identical, not merely close
    ASSERT_EQ(x.e2e_ms, y.e2e_ms) << i;
    ASSERT_EQ(x.reused.total(), y.reused.total()) << i;
    ASSERT_EQ(x.itl_ms, y.itl_ms) << i;
  }
  // A different seed is a different workload (the comparison above can fail).
  WorkloadSpec w = rag_workload();
  w.seed = 4;
  auto c = run(o, w);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->records[10].ttft_ms, c->records[10].ttft_ms);
}

TEST(Simulator, EveryRequestFinishesAndTheBlocksComeBack) {
  SimOptions o = testing::small_fleet();
  o.replicas = 2;
  o.kv.pool_blocks = 700;  // tight: preemptions and evictions happen
  o.kv.dram_bytes = 4 << 20;
  o.max_queue = 1 << 30;   // no refusals: every request must come through
  WorkloadSpec w = rag_workload();
  w.rate = 60;
  w.answer_tokens = {{{8, 0.5}, {64, 0.5}}};
  auto r = run(o, w);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->unfinished, 0);
  long tokens = 0, expected = 0;
  for (const auto& x : r->records) {
    ASSERT_TRUE(x.ok) << x.id;
    EXPECT_GT(x.ttft_ms, 0);
    EXPECT_GE(x.e2e_ms, x.ttft_ms);
    tokens += x.tokens;
  }
  auto reqs = generate_requests(w);
  for (const auto& q : *reqs) expected += q.answer_tokens;
  EXPECT_EQ(tokens, expected);
  // At the end only the tree's pool copies hold blocks: pool bytes in use == HBM tier bytes
  // rounded to blocks, never more than the pool.
  const SimSeriesPoint& last = r->series.back();
  EXPECT_EQ(last.running, 0);
  EXPECT_EQ(last.waiting, 0);
  EXPECT_LE(last.pool_used_bytes, 2ull * 700 * 16 * 512);
  EXPECT_GE(last.pool_used_bytes, last.hbm_cache_bytes);
  EXPECT_EQ(last.swap_bytes, 0u);
  long preemptions = 0;
  for (const auto& s : r->scheduler) preemptions += s.swaps_out + s.drops;
  EXPECT_GT(preemptions, 0) << "the pool was meant to be tight";
}

TEST(Simulator, PgdsfKeepsMoreHitsThanLruUnderZipf) {
  // Pool-only cache far smaller than the corpus; documents of varied size so that PGDSF's
  // frequency x cost / size matters (RAGCache's comparison).
  SimOptions o = testing::small_fleet();
  o.kv.pool_blocks = 1500;
  o.scheduler.max_running = 8;
  WorkloadSpec w = rag_workload();
  w.docs = 3000;
  w.docs_per_query = 1;
  w.requests = 12000;
  w.rate = 15;
  o.kv.eviction = kvstore::EvictionPolicy::kLru;
  auto lru = run(o, w);
  o.kv.eviction = kvstore::EvictionPolicy::kPgdsf;
  auto pgdsf = run(o, w);
  ASSERT_TRUE(lru.ok() && pgdsf.ok());
  const double h_lru = hit_rate(*lru), h_pgdsf = hit_rate(*pgdsf);
  EXPECT_GT(h_lru, 0.05);  // the cache does something under both
  EXPECT_GT(h_pgdsf, h_lru + 0.02) << "pgdsf " << h_pgdsf << " lru " << h_lru;
}

TEST(Simulator, ShortestFirstBeatsFcfsOnMixedLengths) {
  SimOptions o = testing::small_fleet();
  o.scheduler.max_running = 4;
  o.scheduler.max_batch_tokens = 512;
  WorkloadSpec w;
  w.prompt_tokens = {{{64, 0.8}, {2048, 0.2}}};
  w.answer_tokens = {{{16, 0.8}, {128, 0.2}}};
  w.requests = 4000;
  w.rate = 8;  // busy: long prompts queue short ones under fcfs
  w.seed = 11;
  o.scheduler.policy = pipelines::SchedPolicy::kFcfs;
  auto fcfs = run(o, w);
  o.scheduler.policy = pipelines::SchedPolicy::kSjf;
  auto sjf = run(o, w);
  ASSERT_TRUE(fcfs.ok() && sjf.ok());
  EXPECT_LT(mean_ttft(*sjf), 0.8 * mean_ttft(*fcfs)) << "sjf " << mean_ttft(*sjf) << " fcfs " << mean_ttft(*fcfs);
}

TEST(Simulator, ReuseCutsTtftAndMissesCostTheLookup) {
  SimOptions o = testing::small_fleet();
  WorkloadSpec w = rag_workload();
  w.rate = 10;
  auto cached = run(o, w);
  o.kv.hbm_cache = false;  // no tier keeps KV: every request recomputes
  auto none = run(o, w);
  ASSERT_TRUE(cached.ok() && none.ok());
  EXPECT_GT(hit_rate(*cached), 0.3);
  EXPECT_EQ(hit_rate(*none), 0.0);
  EXPECT_LT(mean_ttft(*cached), mean_ttft(*none));
}

TEST(Simulator, SharedRemoteTierServesOtherReplicasMisses) {
  SimOptions o = testing::small_fleet();
  o.replicas = 4;
  o.router = RouterKind::kLeastConn;
  o.kv.pool_blocks = 400;
  o.kv.dram_bytes = 1 << 20;
  auto local = run(o, rag_workload());
  o.remote_bytes = 256 << 20;
  auto remote = run(o, rag_workload());
  ASSERT_TRUE(local.ok() && remote.ok());
  long remote_tokens = 0;
  for (const auto& x : remote->records) remote_tokens += x.reused[kvstore::Tier::kRemote];
  EXPECT_GT(remote_tokens, 0);
  EXPECT_GT(remote->remote_hits, 0u);
  EXPECT_GT(hit_rate(*remote), hit_rate(*local));
}

// n requests of a 200-token prompt and one answer token: one prefill step each.
WorkloadSpec single_step_requests(int n) {
  WorkloadSpec w;
  w.prompt_tokens = {{{200, 1.0}}};
  w.answer_tokens = {{{1, 1.0}}};
  w.requests = n;
  return w;
}

TEST(Simulator, ClosedLoopClientsSendBackToBack) {
  // One client, a constant 20 ms single-step request, no network: the n requests run back to back,
  // never queue, and take n * 20 ms. Two clients on one slot: each request waits for the other's.
  SimOptions o = testing::small_fleet();
  o.scheduler.max_running = 1;
  const WorkloadSpec w = single_step_requests(500);
  const CostModel cost = testing::simple_cost();
  const double service = cost.dense_s(200) + cost.prefill_attention_s(0, 200);
  auto reqs = generate_requests(w);
  ASSERT_TRUE(reqs.ok());
  o.closed_loop_clients = 1;
  auto one = simulate(o, cost, *reqs);
  ASSERT_TRUE(one.ok());
  EXPECT_NEAR(one->duration_s, 500 * service, 1e-9);
  for (const auto& x : one->records) EXPECT_EQ(x.queue_ms, 0.0);
  o.closed_loop_clients = 2;
  auto two = simulate(o, cost, *reqs);
  ASSERT_TRUE(two.ok());
  EXPECT_NEAR(two->duration_s, 500 * service, 1e-9);  // the slot is the bottleneck either way
  double ttft = 0;
  for (const auto& x : two->records) ttft += x.ttft_ms;
  EXPECT_NEAR(ttft / 500, 2 * service * 1e3, 0.05);  // every request waits for one service time
}

TEST(Simulator, RequestLatencyBesideTheEngineIsHiddenByAnotherClient) {
  // The constant 20 ms single-step request of ClosedLoopClientsSendBackToBack with 5 ms of
  // request_s (on the request's way to the scheduler, beside the engine). One client pays it in
  // series: 25 ms per request, TTFT 25 ms. Two clients on one slot: each request's 5 ms pass while
  // the other one runs, so only the first is paid (500 x 20 ms + 5 ms). admit_s = 5 ms instead
  // is engine time: 500 x 25 ms whatever the clients.
  SimOptions o = testing::small_fleet();
  o.scheduler.max_running = 1;
  const WorkloadSpec w = single_step_requests(500);
  CostModel beside = testing::simple_cost();
  const double service = beside.dense_s(200) + beside.prefill_attention_s(0, 200);
  beside.serving.request_s = 0.005;
  CostModel inside = testing::simple_cost();
  inside.serving.admit_s = 0.005;
  auto reqs = generate_requests(w);
  ASSERT_TRUE(reqs.ok());
  o.closed_loop_clients = 1;
  auto one = simulate(o, beside, *reqs);
  ASSERT_TRUE(one.ok());
  EXPECT_NEAR(one->duration_s, 500 * (service + 0.005), 1e-9);
  for (const auto& x : one->records) EXPECT_NEAR(x.ttft_ms, (service + 0.005) * 1e3, 1e-9);
  o.closed_loop_clients = 2;
  auto two = simulate(o, beside, *reqs);
  auto two_inside = simulate(o, inside, *reqs);
  ASSERT_TRUE(two.ok() && two_inside.ok());
  EXPECT_NEAR(two->duration_s, 500 * service + 0.005, 1e-9);
  EXPECT_NEAR(two_inside->duration_s, 500 * (service + 0.005), 1e-9);
}

// Two 24-token prompts for 2 answer tokens each, and a cost with a measured dense curve (1 token
// 4 ms, 8 tokens 11 ms, 32 tokens 23 ms) and 1 ms per sampled row.
WorkloadSpec two_short_prompts() {
  WorkloadSpec w;
  w.prompt_tokens = {{{24, 1.0}}};
  w.answer_tokens = {{{2, 1.0}}};
  w.requests = 2;
  return w;
}
CostModel curve_cost() {
  CostModel cost = testing::simple_cost();
  cost.serving.dense_curve = {{1, 0.004}, {8, 0.011}, {32, 0.023}};
  cost.serving.sample_s = 0.001;
  return cost;
}

TEST(Simulator, BatchedStepsCostTheMeasuredCurveAtTheirTokenCount) {
  // A measured dense curve (1 token 4 ms, 8 tokens 11 ms, 32 tokens 23 ms) and 1 ms per sampled
  // row. Two clients send a 24-token prompt for 2 answer tokens at 0; the first is admitted alone:
  // step A = dense(24) + one row = 19 + 1 ms. Step B batches its decode with the second prompt:
  // 25 tokens, dense(25) = 11 + 17 / 24 * 12 = 19.5 ms, two rows 2 ms. So the first request ends
  // at 41.5 ms, and the second gets its first token then.
  SimOptions o = testing::small_fleet();
  const WorkloadSpec w = two_short_prompts();
  CostModel cost = curve_cost();
  auto reqs = generate_requests(w);
  ASSERT_TRUE(reqs.ok());
  o.closed_loop_clients = 2;
  auto r = simulate(o, cost, *reqs);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->records.size(), 2u);
  EXPECT_NEAR(r->records[0].ttft_ms, 20.0, 1e-6);
  EXPECT_NEAR(r->records[0].e2e_ms, 41.5, 1e-6);
  EXPECT_NEAR(r->records[1].ttft_ms, 41.5, 1e-6);
}

TEST(Simulator, EngineSlowdownScalesTheEngineTermsOnly) {
  // The two-client case above with a 25 % engine slowdown and 2 ms of step overhead: the engine
  // terms (dense part, rows) take 1.25 times as long, the overhead does not. Step A = 2 + 1.25 * 20
  // = 27 ms, step B = 2 + 1.25 * 21.5 = 28.875 ms.
  SimOptions o = testing::small_fleet();
  const WorkloadSpec w = two_short_prompts();
  CostModel cost = curve_cost();
  cost.serving.step_overhead_s = 0.002;
  cost.serving.engine_slowdown = 0.25;
  auto reqs = generate_requests(w);
  ASSERT_TRUE(reqs.ok());
  o.closed_loop_clients = 2;
  auto r = simulate(o, cost, *reqs);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->records.size(), 2u);
  EXPECT_NEAR(r->records[0].ttft_ms, 27.0, 1e-6);
  EXPECT_NEAR(r->records[1].ttft_ms, 27.0 + 28.875, 1e-6);
}

TEST(Simulator, RetrievalNoiseLowersTheHitRateOnly) {
  SimOptions o = testing::small_fleet();
  WorkloadSpec w = rag_workload();
  w.topic_docs = 4;
  w.docs_per_query = 4;
  w.docs = 48;
  auto clean = run(o, w);
  w.retrieval_noise = 0.3;
  auto noisy = run(o, w);
  ASSERT_TRUE(clean.ok() && noisy.ok());
  EXPECT_LT(hit_rate(*noisy), hit_rate(*clean) - 0.05);
  auto a = generate_requests(rag_workload());
  WorkloadSpec wn = rag_workload();
  wn.retrieval_noise = 0.3;
  auto b = generate_requests(wn);
  ASSERT_TRUE(a.ok() && b.ok());
  int changed = 0;
  for (size_t i = 0; i < a->size(); ++i) {
    ASSERT_EQ((*a)[i].arrival_s, (*b)[i].arrival_s);  // the noise draws from its own engine
    ASSERT_EQ((*a)[i].answer_tokens, (*b)[i].answer_tokens);
    changed += (*a)[i].path.size() != (*b)[i].path.size() ||
               !std::equal((*a)[i].path.begin(), (*a)[i].path.end(), (*b)[i].path.begin(),
                           [](const PathSegment& x, const PathSegment& y) { return x.doc == y.doc; });
  }
  // 3000 requests: 30 % perturbed, less the draws that picked a document already in the list
  // (2 of 400); binomial standard deviation 0.8 points.
  EXPECT_NEAR(changed / 3000.0, 0.3, 0.04);
}

TEST(Simulator, ATinyPoolServesEveryRequestAtModerateLoad) {
  // 12 topics of 4 documents in a pool of 256 blocks (4096 tokens, about 5 paths), a DRAM tier
  // below it: paths are evicted, demoted, loaded back and promoted all the time, and every block
  // must come back (a leak in the pool accounting, or pins that outlive admission, stall the
  // replica with requests waiting and nothing running).
  SimOptions o = testing::small_fleet();
  o.kv.pool_blocks = 256;
  o.kv.dram_bytes = 1ull << 30;  // evicted paths come back through loads (which do pin)
  o.max_queue = 1 << 30;
  CostModel cost = testing::simple_cost();
  cost.engine.dense_tokens_per_s = 4000;  // a CPU's prefill: requests wait while others prefill
  WorkloadSpec w;
  w.docs = 48;
  w.topic_docs = 4;
  w.docs_per_query = 4;
  w.doc_tokens = 172;
  w.prefix_tokens = 45;
  w.query_tokens = 22;
  w.answer_tokens = {{{16, 1.0}}};
  w.rate = 2;
  w.requests = 240;
  auto reqs = generate_requests(w);
  ASSERT_TRUE(reqs.ok());
  auto r = simulate(o, cost, *reqs);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->unfinished, 0);
  for (const auto& x : r->records) ASSERT_TRUE(x.ok) << x.id;
}

TEST(Simulator, QueueLimitRefuses) {
  SimOptions o = testing::small_fleet();
  o.max_queue = 4;
  o.scheduler.max_running = 1;
  WorkloadSpec w;
  w.prompt_tokens = {{{400, 1.0}}};
  w.rate = 500;  // far above one request per 40 ms
  w.requests = 200;
  auto r = run(o, w);
  ASSERT_TRUE(r.ok());
  int refused = 0;
  for (const auto& x : r->records) {
    refused += x.refused;
    EXPECT_NE(x.ok, x.refused);
  }
  EXPECT_GT(refused, 100);
  EXPECT_EQ(r->unfinished, 0);
}

}  // namespace
}  // namespace ragd::sim
