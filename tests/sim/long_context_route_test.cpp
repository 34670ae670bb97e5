// The long-context route in the simulator (sim/src/long_context_route.h) and the policy it shares
// with the daemon (pipelines/long_context_policy.h): which runs go to the sequence-parallel group,
// at which degree, and what they cost in virtual time.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "ragd/pipelines/long_context_policy.h"
#include "ragd/sim/simulator.h"
#include "ragd/sim/workload.h"
#include "ragd/seqparallel/sharded_sequence.h"
#include "sim_test_util.h"

namespace ragd::sim {
namespace {

engine::ModelConfig model4() {
  engine::ModelConfig m;
  m.num_hidden_layers = 4;
  m.num_attention_heads = 4;
  m.num_key_value_heads = 2;
  m.head_dim = 16;
  m.hidden_size = 64;
  m.intermediate_size = 128;
  m.vocab_size = 256;
  return m;
}

pipelines::LongContextPolicy policy(int workers, const CostModel& cost) {
  pipelines::LongContextPolicy p;
  p.workers = workers;
  p.threshold_tokens = 4096;
  p.pool_blocks = 100000;
  p.block_size = 16;
  p.model = model4();
  p.kv_bytes_per_token_layer = cost.shape.kv_bytes_per_token() / cost.shape.layers;
  return p;
}

// The plan is the argmin of predicted prefill at P + the move of ranks [D, P)'s shards to the first
// D + max_new decode steps at D, over the pairs whose pools hold their shares (the fewer prefill
// workers, then no move, on ties), checked against a brute force over random rates, lengths and
// pools.
TEST(LongContextPolicy, PlanIsTheSoonestPredictedEndAmongDegreesThatFit) {
  std::mt19937 g(5);
  std::uniform_real_distribution<double> u(0, 1);
  int moves = 0, stays = 0;
  for (int trial = 0; trial < 400; ++trial) {
    CostModel c = testing::simple_cost();
    c.engine.dense_tokens_per_s = 1e3 * std::pow(10, 2 * u(g));
    c.engine.attn_pairs_per_s = 1e7 * std::pow(10, 3 * u(g));
    c.engine.masked_pairs_per_s = c.engine.attn_pairs_per_s * (0.3 + u(g));
    c.engine.decode_dense_s = 1e-3 * (1 + 9 * u(g));
    c.engine.kv_read_bytes_per_s = 1e8 * std::pow(10, 3 * u(g));
    c.engine.link_bytes_per_s = 1e8 * std::pow(10, 3 * u(g));
    c.engine.link_latency_s = 1e-5 * std::pow(10, 3 * u(g));
    pipelines::LongContextPolicy p = policy(1 + static_cast<int>(g() % 8), c);
    p.rates = c.engine;
    p.spills = g() % 2 == 0;
    p.pool_blocks = 50 + static_cast<int64_t>(g() % 5000);
    const int64_t prompt = 1 + static_cast<int64_t>(g() % 200000);
    const int64_t max_new = static_cast<int64_t>(g() % 3000);
    auto fits = [&](int d) {
      seqparallel::SpSequence s;
      s.prompt_tokens = prompt;
      s.decode_tokens = max_new;
      s.workers = d;
      s.block_size = p.block_size;
      const int64_t blocks = d == 1 ? (prompt + max_new + 15) / 16 + 1 : seqparallel::kv_blocks_per_worker(s);
      return p.spills || blocks <= p.pool_blocks;
    };
    auto at = [&](int d) { return seqparallel::predict(p.model, c.engine, prompt, d, p.kv_bytes_per_token_layer); };
    // The move: each sender packs its shard of prompt / P tokens (every layer's K and V as f32 rows)
    // at the KV rate; the fullest receiver takes ceil((P - D) / D) of them over the link (bytes and
    // a position each, three messages) and writes each at the KV rate.
    auto move = [&](int from, int to) {
      if (from == to) return 0.0;
      const double rows = static_cast<double>(prompt) / from * (2.0 * 4 * 2 * 16 * 4);
      const double bytes = rows + static_cast<double>(prompt) / from * 4;
      return rows / c.engine.kv_read_bytes_per_s +
             std::ceil(static_cast<double>(from - to) / to) *
                 (bytes / c.engine.link_bytes_per_s + 3 * c.engine.link_latency_s + rows / c.engine.kv_read_bytes_per_s);
    };
    int want_p = p.workers, want_d = p.workers;
    double best = std::numeric_limits<double>::infinity();
    for (int pf = 1; pf <= p.workers; ++pf) {
      if (!fits(pf)) continue;
      for (int d = pf; d >= 1; --d) {
        if (d < pf && !fits(d)) continue;
        const double t = at(pf).prefill_s + move(pf, d) + max_new * at(d).decode_s;
        if (t < best) best = t, want_p = pf, want_d = d;
      }
    }
    const pipelines::LongContextPolicy::Plan got = p.plan(prompt, max_new);
    ASSERT_EQ(got.prefill, want_p) << "trial " << trial << " workers " << p.workers << " prompt " << prompt;
    ASSERT_EQ(got.decode, want_d) << "trial " << trial << " workers " << p.workers << " prompt " << prompt;
    ASSERT_EQ(p.degree(prompt, max_new), want_p);
    (want_d < want_p ? moves : stays) += 1;
    // Without rates every worker, no move.
    p.rates.reset();
    ASSERT_EQ(p.degree(prompt, max_new), p.workers);
    ASSERT_EQ(p.plan(prompt, max_new).decode, p.workers);
  }
  EXPECT_GT(moves, 10);  // both outcomes are exercised
  EXPECT_GT(stays, 10);
}

TEST(LongContextPolicy, WhatTheRouteTakes) {
  const CostModel c = testing::simple_cost();
  pipelines::LongContextPolicy p = policy(1, c);
  p.pool_blocks = 100;  // 1,600 tokens
  EXPECT_FALSE(p.takes(100000, 16));  // one worker, no spill: the batch (which refuses it)
  p.spills = true;
  EXPECT_TRUE(p.takes(100000, 16));   // one worker that spills takes what exceeds the pool
  EXPECT_FALSE(p.takes(1000, 16));    // and leaves what fits to the batch
  p.workers = 4;
  p.spills = false;
  p.pool_blocks = 100000;
  EXPECT_TRUE(p.takes(4096, 16));     // 2+ workers: at the threshold
  EXPECT_FALSE(p.takes(4095, 16));
  // With rates that make one worker the soonest (a slow link), a long prompt that fits stays.
  CostModel slow = c;
  slow.engine.link_latency_s = 10;
  p.rates = slow.engine;
  EXPECT_EQ(p.degree(8192, 16), 1);
  EXPECT_FALSE(p.takes(8192, 16));
}

SimOptions route_fleet(int workers, const CostModel& c) {
  SimOptions o = testing::small_fleet();
  o.long_context = policy(workers, c);
  o.keep_itl = true;
  return o;
}

// A long prompt on an 8-worker route: its TTFT is the model's prefill at 8 workers, each further
// token one predicted decode step, nothing of it in the batch's steps.
TEST(SimLongContextRoute, ALongRunTakesThePredictedTimesAtItsDegree) {
  const CostModel c = testing::simple_cost();
  const SimOptions o = route_fleet(8, c);
  SimRequest r;
  r.id = 1;
  r.arrival_s = 0.25;
  r.prompt_tokens = 1 << 20;
  r.answer_tokens = 16;
  auto res = simulate(o, c, {r});
  ASSERT_TRUE(res.ok()) << res.status().to_string();
  const SimRecord& rec = res->records[0];
  ASSERT_TRUE(rec.ok);
  EXPECT_EQ(rec.sp_degree, 8);
  const seqparallel::Prediction p = seqparallel::predict(model4(), c.engine, r.prompt_tokens, 8, o.long_context->kv_bytes_per_token_layer);
  EXPECT_NEAR(rec.ttft_ms, p.prefill_s * 1e3, 1e-6 * p.prefill_s * 1e3);
  EXPECT_NEAR(rec.e2e_ms - rec.ttft_ms, 15 * p.decode_s * 1e3, 1e-6);
  ASSERT_EQ(rec.itl_ms.size(), 15u);
  EXPECT_NEAR(rec.itl_ms[3], p.decode_s * 1e3, 1e-9);
  EXPECT_EQ(rec.tokens, 16);
  EXPECT_EQ(res->steps, 0);  // the batch never stepped
  // Without the route the same request is the batch's (it stepped, and no degree is recorded).
  SimOptions batch = o;
  batch.long_context.reset();
  auto b = simulate(batch, c, {r});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->records[0].sp_degree, 0);
  EXPECT_GT(b->steps, 0);
}

// Two long runs arriving together run one after the other; short requests meanwhile are the
// batch's and finish as if the route were idle.
TEST(SimLongContextRoute, LongRunsQueueOnTheRouteWhileTheBatchServesShortOnes) {
  const CostModel c = testing::simple_cost();
  const SimOptions o = route_fleet(4, c);
  std::vector<SimRequest> reqs;
  for (int i = 0; i < 2; ++i) {
    SimRequest r;
    r.id = reqs.size() + 1;
    r.arrival_s = 0;
    r.prompt_tokens = 200000;
    r.answer_tokens = 4;
    reqs.push_back(r);
  }
  for (int i = 0; i < 5; ++i) {
    SimRequest r;
    r.id = reqs.size() + 1;
    r.arrival_s = 0.1 * (i + 1);
    r.prompt_tokens = 100 + 37 * i;
    r.answer_tokens = 3;
    reqs.push_back(r);
  }
  auto res = simulate(o, c, reqs);
  ASSERT_TRUE(res.ok());
  const SimRecord &a = res->records[0], &b = res->records[1];
  ASSERT_TRUE(a.ok && b.ok);
  EXPECT_EQ(a.sp_degree, 4);
  EXPECT_EQ(b.sp_degree, 4);
  EXPECT_DOUBLE_EQ(a.queue_ms, 0);
  EXPECT_NEAR(b.queue_ms, a.e2e_ms, 1e-6);  // waited for a's whole run
  EXPECT_NEAR(b.ttft_ms, a.e2e_ms + b.prefill_ms, 1e-6);
  // The short ones, alone in the same fleet without the long runs: the same times.
  std::vector<SimRequest> shorts(reqs.begin() + 2, reqs.end());
  for (size_t i = 0; i < shorts.size(); ++i) shorts[i].id = i + 1;  // the simulator's ids are 1, 2, ..
  auto alone = simulate(o, c, shorts);
  ASSERT_TRUE(alone.ok());
  for (size_t i = 0; i < shorts.size(); ++i) {
    EXPECT_EQ(res->records[2 + i].sp_degree, 0);
    EXPECT_DOUBLE_EQ(res->records[2 + i].ttft_ms, alone->records[i].ttft_ms) << i;
    EXPECT_DOUBLE_EQ(res->records[2 + i].e2e_ms, alone->records[i].e2e_ms) << i;
  }
}

}  // namespace
}  // namespace ragd::sim
