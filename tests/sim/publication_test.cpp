// The publication model (sim_kv_host.h): a new node's lower-tier copy runs on the store's copy
// thread while the engine is idle, costs serving.publish_s_per_byte of engine time per byte, and is
// skipped under pool pressure or past copy_inflight_bytes; and the retrieved lists that give a
// workload the documents a real retriever returned. Expected times are written down by hand from
// the round numbers of simple_cost().
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ragd/sim/simulator.h"
#include "ragd/sim/workload.h"
#include "sim_test_util.h"

namespace ragd::sim {
namespace {

// Every request retrieves documents nobody else retrieves (ids from a huge uniform corpus are
// distinct in these few draws) after a 32-token prefix: each one publishes docs_per_query x 256
// new tokens (the prefix only the first time).
WorkloadSpec all_miss(int requests, int docs_per_query) {
  WorkloadSpec w;
  w.docs = 10000000;
  w.zipf = 0;
  w.docs_per_query = docs_per_query;
  w.doc_tokens = 256;
  w.prefix_tokens = 32;
  w.query_tokens = 16;
  w.answer_tokens = {{{8, 1.0}}};
  w.requests = requests;
  w.seed = 5;
  return w;
}

// Single-prompt requests (no documents) at a fixed rate: `tokens` of prompt and one answer token
// each, so every request is one prefill step.
WorkloadSpec spaced_steps(int tokens, double rate, int requests) {
  WorkloadSpec w;
  w.prompt_tokens = {{{tokens, 1.0}}};
  w.answer_tokens = {{{1, 1.0}}};
  w.arrivals = Arrivals::kUniform;
  w.rate = rate;
  w.requests = requests;
  return w;
}

SimOptions with_dram() {
  SimOptions o = testing::small_fleet();
  o.kv.dram_bytes = 1ull << 30;  // copies have somewhere to go
  return o;
}

TEST(SimPublication, OneClientPaysEachCopyInItsSuccessorsFirstStep) {
  // One client, one new document per request: a request's copy waits while its own decode runs;
  // when it ends the engine is idle for the next request's retrieval (1 ms, no network), the copy
  // starts, and what is left of it lengthens the next request's first step. The first request
  // also publishes the prefix, whose copy runs first. So request 2 takes W_prefix + W_doc - 1 ms
  // longer than without publication cost, every later one W_doc - 1 ms, and the last copy runs
  // after the last request, in idle time.
  const double p = 2e-8;                         // 20 ns per byte
  const double w_doc = 256.0 * 512 * p;          // 512 bytes per token in simple_cost(): 2.6 ms
  const double w_prefix = 32.0 * 512 * p;        // 0.33 ms
  SimOptions o = with_dram();
  o.closed_loop_clients = 1;
  auto reqs = generate_requests(all_miss(20, 1));
  ASSERT_TRUE(reqs.ok());
  CostModel free = testing::simple_cost();
  CostModel paid = free;
  paid.serving.publish_s_per_byte = p;
  auto a = simulate(o, free, *reqs);
  auto b = simulate(o, paid, *reqs);
  ASSERT_TRUE(a.ok() && b.ok());
  double shift = 0;  // the client sends later by what the previous requests lost
  for (size_t i = 0; i < reqs->size(); ++i) {
    const double lost = i == 0 ? 0 : i == 1 ? w_prefix + w_doc - 0.001 : w_doc - 0.001;
    EXPECT_NEAR(b->records[i].e2e_ms - a->records[i].e2e_ms, lost * 1e3, 1e-6) << "request " << i + 1;
    EXPECT_NEAR(b->records[i].arrival_s - a->records[i].arrival_s, shift, 1e-9) << "request " << i + 1;
    shift += lost;
  }
  // Every node got its copy; the engine time is every published byte at p.
  EXPECT_EQ(b->publish.copies, 21u);
  EXPECT_EQ(b->publish.copies_skipped, 0u);
  EXPECT_EQ(b->publish.demotions, 0u);
  EXPECT_NEAR(b->publish.engine_s, 20 * w_doc + w_prefix, 1e-12);
  EXPECT_EQ(b->tiers[0][static_cast<int>(kvstore::Tier::kDram)].nodes, 21u);  // every node reached DRAM
}

TEST(SimPublication, CopiesInIdleTimeCostNothing) {
  // One request every 100 ms, each served in about 20 ms: every copy (2.6 ms) runs while the engine
  // is idle, so latencies are those without publication cost.
  SimOptions o = with_dram();
  WorkloadSpec w = all_miss(30, 2);
  w.arrivals = Arrivals::kUniform;
  w.rate = 10;
  auto reqs = generate_requests(w);
  ASSERT_TRUE(reqs.ok());
  CostModel paid = testing::simple_cost();
  paid.serving.publish_s_per_byte = 2e-8;
  auto a = simulate(o, testing::simple_cost(), *reqs);
  auto b = simulate(o, paid, *reqs);
  ASSERT_TRUE(a.ok() && b.ok());
  for (size_t i = 0; i < reqs->size(); ++i) EXPECT_DOUBLE_EQ(b->records[i].e2e_ms, a->records[i].e2e_ms);
  EXPECT_EQ(b->publish.copies, 61u);
}

TEST(SimPublication, CopiesPastTheInflightBoundAreSkippedAndDemotedOnEviction) {
  // A bound below one node's bytes: no copy is ever made, nothing reaches DRAM at publication, and
  // a pool too small for the whole run evicts (demoting, each costed in the evicting step).
  SimOptions o = with_dram();
  o.kv.copy_inflight_bytes = 1000;
  o.kv.pool_blocks = 128;  // 2048 tokens: 4 paths
  o.closed_loop_clients = 1;
  auto reqs = generate_requests(all_miss(20, 2));
  ASSERT_TRUE(reqs.ok());
  CostModel paid = testing::simple_cost();
  paid.serving.publish_s_per_byte = 2e-8;
  auto r = simulate(o, paid, *reqs);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->publish.copies, 0u);
  EXPECT_EQ(r->publish.copies_skipped, 41u);
  EXPECT_GT(r->publish.demotions, 20u);
  const auto& dram = r->tiers[0][static_cast<int>(kvstore::Tier::kDram)];
  EXPECT_EQ(dram.nodes, r->publish.demotions);  // what DRAM holds came there by demotion only
  // Each demotion a document's bytes at p (the prefix, when it goes too, is smaller).
  EXPECT_NEAR(r->publish.engine_s, r->publish.demotions * 256.0 * 512 * 2e-8, 256.0 * 512 * 2e-8);
  EXPECT_EQ(r->unfinished, 0);
}

TEST(SimPublication, NoCopyStartsWhileLessThanHalfThePoolIsFree) {
  // Eight clients keep the pool more than half full with their own tails (each run holds 560
  // prompt tokens = 35 blocks of 128): new nodes get no copy.
  SimOptions o = with_dram();
  o.kv.pool_blocks = 128;
  o.scheduler.max_running = 8;
  o.closed_loop_clients = 8;
  WorkloadSpec w = all_miss(40, 2);
  w.answer_tokens = {{{64, 1.0}}};
  auto reqs = generate_requests(w);
  ASSERT_TRUE(reqs.ok());
  auto r = simulate(o, testing::simple_cost(), *reqs);
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r->publish.copies_skipped, 0u);
  EXPECT_EQ(r->unfinished, 0);
}

TEST(SimWake, AStepAfterALongIdleGapCostsWakeS) {
  // One request every 100 ms, each a single 20 ms step: every request finds the engine asleep and
  // pays wake_s once. One client with 1 ms between requests (its retrieval; the first one too)
  // never lets it sleep past wake_after_s (5 ms) and never pays it.
  SimOptions o = testing::small_fleet();
  const WorkloadSpec w = spaced_steps(200, 10, 50);
  auto reqs = generate_requests(w);
  ASSERT_TRUE(reqs.ok());
  CostModel base = testing::simple_cost();
  CostModel woken = base;
  woken.serving.wake_s = 0.003;
  auto a = simulate(o, base, *reqs);
  auto b = simulate(o, woken, *reqs);
  ASSERT_TRUE(a.ok() && b.ok());
  for (size_t i = 0; i < reqs->size(); ++i) EXPECT_NEAR(b->records[i].ttft_ms - a->records[i].ttft_ms, 3.0, 1e-9);
  // Closed loop, one client, RAG requests (1 ms retrieval between the previous end and the next step).
  WorkloadSpec rag = all_miss(30, 1);
  auto rr = generate_requests(rag);
  ASSERT_TRUE(rr.ok());
  o.closed_loop_clients = 1;
  auto c = simulate(o, base, *rr);
  auto d = simulate(o, woken, *rr);
  ASSERT_TRUE(c.ok() && d.ok());
  EXPECT_DOUBLE_EQ(d->duration_s, c->duration_s);
}

TEST(SimWake, EachWokenStepPaysItsRequestsDrawAndTheRunIsDeterministic) {
  // One request every 100 ms, each a single 20 ms step: every request wakes the engine and pays
  // the wake-up drawn for its own id, negative draws included (they shorten the step). Reference:
  // the run without a wake-up, plus CostModel::wake_draw of each request's id; the differences'
  // mean against the distribution's (200 draws spread over 14 ms: within 0.9 ms, 3 standard errors
  // of independent draws); a second run gives the same records.
  SimOptions o = testing::small_fleet();
  const WorkloadSpec w = spaced_steps(200, 10, 200);
  auto reqs = generate_requests(w);
  ASSERT_TRUE(reqs.ok());
  CostModel base = testing::simple_cost();
  CostModel drawn = base;
  drawn.serving.wake_quantiles = {-0.002, 0.0, 0.001, 0.002, 0.012};
  auto a = simulate(o, base, *reqs);
  auto b = simulate(o, drawn, *reqs);
  auto b2 = simulate(o, drawn, *reqs);
  ASSERT_TRUE(a.ok() && b.ok() && b2.ok());
  double sum = 0, lo = 1, hi = -1;
  for (size_t i = 0; i < reqs->size(); ++i) {
    const double d = b->records[i].ttft_ms - a->records[i].ttft_ms;
    EXPECT_NEAR(d, drawn.wake_draw((*reqs)[i].id) * 1e3, 1e-9);
    EXPECT_EQ(b->records[i].ttft_ms, b2->records[i].ttft_ms);
    sum += d, lo = std::min(lo, d), hi = std::max(hi, d);
  }
  EXPECT_NEAR(sum / static_cast<double>(reqs->size()), drawn.wake_mean() * 1e3, 0.9);
  EXPECT_LT(lo, 0.0);  // some requests drew below zero
  EXPECT_GT(hi, 2.0);  // and some from the tail
}

TEST(SimContention, EachArrivalAtABusyEngineAddsArrivalCpuSToItsBusyTime) {
  // Prompts only (no retrieval), 400 tokens, one output token, 100 requests/s for 1 s: 40 ms of
  // work arrives every 10 ms, so after the first request the engine never idles and every other
  // arrival finds it stepping. With the roofline and free attention every step costs 0.1 ms per
  // token it feeds (each feeds at least 50; attention at 1e12 pairs/s adds 8 us in all), so the
  // naive reference is a single server that finishes all tokens plus one arrival_cpu_s per busy
  // arrival: the last step ends at first arrival + tokens x 0.1 ms (within 20 us) + (n - 1) x
  // arrival_cpu_s (that difference exact up to rounding).
  SimOptions o = testing::small_fleet();
  o.max_queue = 1000;
  const WorkloadSpec w = spaced_steps(400, 100, 100);
  auto reqs = generate_requests(w);
  ASSERT_TRUE(reqs.ok());
  CostModel base = testing::simple_cost();
  CostModel busy = base;
  busy.serving.arrival_cpu_s = 0.002;
  auto a = simulate(o, base, *reqs);
  auto b = simulate(o, busy, *reqs);
  auto b2 = simulate(o, busy, *reqs);
  ASSERT_TRUE(a.ok() && b.ok() && b2.ok());
  const double first = (*reqs)[0].arrival_s, tokens = 400.0 * 100;
  EXPECT_NEAR(a->duration_s, first + tokens * 1e-4, 2e-5);
  EXPECT_NEAR(b->duration_s - a->duration_s, 99 * 0.002, 1e-9);
  for (size_t i = 0; i < reqs->size(); ++i) {
    EXPECT_TRUE(b->records[i].ok);
    EXPECT_GE(b->records[i].ttft_ms, a->records[i].ttft_ms - 1e-9);  // only ever later
    EXPECT_EQ(b->records[i].ttft_ms, b2->records[i].ttft_ms);          // seeded: the same records
  }
  // A core left to the other threads (host_cores above the engine's threads): nothing is charged.
  CostModel spare = busy;
  spare.engine.threads = 2;
  spare.serving.host_cores = 4;
  auto c = simulate(o, spare, *reqs);
  ASSERT_TRUE(c.ok());
  EXPECT_DOUBLE_EQ(c->duration_s, a->duration_s);
}

TEST(SimContention, ArrivalsAtAnIdleEngineCostNothing) {
  // One 20 ms request every 100 ms: every arrival finds the engine idle, so the records are those
  // of the run without contention.
  SimOptions o = testing::small_fleet();
  const WorkloadSpec w = spaced_steps(200, 10, 50);
  auto reqs = generate_requests(w);
  ASSERT_TRUE(reqs.ok());
  CostModel base = testing::simple_cost();
  CostModel busy = base;
  busy.serving.arrival_cpu_s = 0.002;
  auto a = simulate(o, base, *reqs);
  auto b = simulate(o, busy, *reqs);
  ASSERT_TRUE(a.ok() && b.ok());
  for (size_t i = 0; i < reqs->size(); ++i) EXPECT_EQ(b->records[i].ttft_ms, a->records[i].ttft_ms);
}

TEST(SimRetrieved, ParsesListsAndRefusesBadLinesNamingThem) {
  auto l = parse_retrieved_lists("{\"docs\": [[40, 183], [38, 181]]}\n\n{\"docs\": [[7, 12]]}\n", "r.jsonl");
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  ASSERT_EQ(l->size(), 2u);
  EXPECT_EQ((*l)[0][1].doc, 38u);
  EXPECT_EQ((*l)[0][1].tokens, 181);
  EXPECT_EQ((*l)[1][0].tokens, 12);
  auto expect_refused = [](const std::string& text, const std::string& needle) {
    auto r = parse_retrieved_lists(text, "r.jsonl");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  expect_refused("{\"docs\": [[1, 2]]}\n{\"docs\": [[1]]}\n", "r.jsonl:2:");
  expect_refused("{\"docs\": [[1, 0]]}\n", "tokens in [1");
  expect_refused("{\"docs\": []}\n", "no documents");
  expect_refused("[1, 2]\n", "expected {\"docs\"");
  expect_refused("nope\n", "not JSON");
  expect_refused("\n", "no retrieved lists");
}

TEST(SimRetrieved, ListsReplaceTheGeneratedDocuments) {
  WorkloadSpec w;
  w.docs = 48;
  w.topic_docs = 4;
  w.docs_per_query = 4;
  w.doc_tokens = 172;
  w.prefix_tokens = 45;
  w.query_tokens = 22;
  w.requests = 3;
  auto reqs = generate_requests(w);
  ASSERT_TRUE(reqs.ok());
  const std::vector<RetrievedList> lists = {{{40, 183}, {38, 181}}, {{7, 100}}, {{1, 10}, {2, 20}, {3, 30}}};
  std::vector<SimRequest> gen = *reqs;
  ASSERT_TRUE(apply_retrieved(gen, lists, 45, 22, /*keep_prompt=*/false, /*reuse=*/true).ok());
  ASSERT_EQ(gen[0].path.size(), 3u);
  EXPECT_EQ(gen[0].path[0].doc, kPrefixDoc);
  EXPECT_EQ(gen[0].path[2].doc, 38u);
  EXPECT_EQ(gen[0].prompt_tokens, 45 + 183 + 181 + 22);
  EXPECT_EQ(gen[1].prompt_tokens, 45 + 100 + 22);
  EXPECT_EQ(gen[2].arrival_s, (*reqs)[2].arrival_s);  // only the documents change
  // A trace keeps its measured prompt lengths (which must hold the path); reuse none keeps no path.
  std::vector<SimRequest> trace = *reqs;
  for (auto& r : trace) r.prompt_tokens = 500;
  ASSERT_TRUE(apply_retrieved(trace, lists, 45, 22, true, true).ok());
  EXPECT_EQ(trace[0].prompt_tokens, 500);
  EXPECT_EQ(trace[0].path.size(), 3u);
  std::vector<SimRequest> none = *reqs;
  ASSERT_TRUE(apply_retrieved(none, lists, 45, 22, false, false).ok());
  EXPECT_TRUE(none[0].path.empty());
  EXPECT_EQ(none[0].prompt_tokens, 45 + 183 + 181 + 22);
  for (auto& r : trace) r.prompt_tokens = 300;
  EXPECT_FALSE(apply_retrieved(trace, lists, 45, 22, true, true).ok());  // 409 path tokens > 300
  std::vector<SimRequest> short_lists = *reqs;
  EXPECT_FALSE(apply_retrieved(short_lists, {lists[0]}, 45, 22, false, true).ok());
}

}  // namespace
}  // namespace ragd::sim
