// Iterative RAG on the executor (iterative.h), end to end on the real stack of executor_fixture.h.
//
// The central properties:
//  - speculative and both give the tokens (and the contexts, at the same token indices) of the
//    sequential run, greedy and sampled, on many seeds, including rollbacks forced at every
//    boundary; rolled-back tokens are never sent, and a finished run leaves every pool block free;
//  - piperag equals the sequential run whose query lags one interval (query_lag = 1).
// The retrieval models (speculation cache, search-time model, OS3 stride) are checked against
// naive references.
#include <algorithm>
#include <cmath>
#include <set>

#include "executor_fixture.h"
#include "overlap_models.h"
#include "speculation_cache.h"

namespace ragd::pipelines {
namespace {

class IterativeTest : public ExecutorTest {
 protected:
  // Dense retrieval: these tests need contexts that the generated text changes, and only the
  // hashing embedder's vectors move with every generated token (a lexical search of the random
  // model's byte-level text matches no document word, so its context would never change).
  RuntimeOptions options(const std::string& data) {
    RuntimeOptions o = ExecutorTest::options(data);
    o.retrieval_mode = retrieval::RetrievalMode::kDense;
    return o;
  }
  // Contexts as (from_token, sorted ids): speculated and real scores may rank equal sets apart.
  static std::vector<std::pair<int, std::vector<std::string>>> contexts(const RunOutput& o) {
    auto c = o.contexts;
    for (auto& [from, ids] : c) std::sort(ids.begin(), ids.end());
    return c;
  }
  static void expect_same_run(const RunOutput& ref, const RunOutput& got, const std::string& what) {
    EXPECT_EQ(contexts(ref), contexts(got)) << what;
    ASSERT_EQ(ref.tokens, got.tokens) << what;
    EXPECT_EQ(ref.finish, got.finish) << what;
    ASSERT_EQ(ref.logprobs.size(), got.logprobs.size());
    for (size_t i = 0; i < ref.logprobs.size(); ++i) EXPECT_NEAR(ref.logprobs[i], got.logprobs[i], 2e-3) << what << " token " << i;
  }
  static std::function<void(RunRequest&)> with(RetrievalOverlap o, float temperature = 0, uint64_t seed = 0) {
    return [=](RunRequest& r) {
      r.overlap = o;
      r.sampling.temperature = temperature;
      r.sampling.seed = seed;
    };
  }
};

const char* kIterQueries[] = {"volcano magma eruption", "chess knight gambit", "harbor ship tide",
                              "coffee roast espresso", "glacier arctic ice", "satellite orbit rocket"};

TEST_F(IterativeTest, SpeculativeAndBothEqualSequentialOnManySeeds) {
  const std::string data = tmpdir("iter_seeds");
  Runtime rt = open(options(data), true);
  int changes = 0, hits = 0;
  for (int i = 0; i < 12; ++i) {
    const char* q = kIterQueries[i % 6];
    const float temp = i < 6 ? 0.0f : 1.0f;  // greedy, then sampled with a seed
    const uint64_t seed = 100 + i;
    RunOutput none = run(*rt.executor, "iter", q, 24, with(RetrievalOverlap::kNone, temp, seed));
    ASSERT_EQ(none.tokens.size(), 24u);
    EXPECT_EQ(none.usage.overlap, "none");
    EXPECT_EQ(none.usage.searches, 6) << "the first search and one at each of tokens 4, 8, .., 20";
    EXPECT_EQ(static_cast<int>(none.contexts.size()), none.usage.context_changes + 1);
    for (size_t c = 1; c < none.contexts.size(); ++c) {
      EXPECT_EQ(none.contexts[c].first % 4, 0) << "a context applies from a boundary";
      EXPECT_GT(none.contexts[c].first, none.contexts[c - 1].first);
    }
    changes += none.usage.context_changes;
    for (RetrievalOverlap o : {RetrievalOverlap::kSpeculative, RetrievalOverlap::kBoth}) {
      RunOutput spec = run(*rt.executor, "iter", q, 24, with(o, temp, seed));
      expect_same_run(none, spec, std::string(overlap_name(o)) + " " + q + " seed " + std::to_string(seed));
      EXPECT_EQ(spec.usage.speculative_hits + spec.usage.speculative_misses, 5) << "every boundary verified";
      hits += spec.usage.speculative_hits;
    }
  }
  EXPECT_GT(changes, 0) << "the generated text never changed the context: the test shows nothing";
  EXPECT_GT(hits, 0);
  rt.stop();  // the last stats snapshot, after every run's release
  const ExecutorStats st = rt.executor->stats();
  EXPECT_EQ(st.pool_free_blocks, st.pool_blocks) << "a finished iterative run holds no KV block";
  close(rt);
  fs::remove_all(data);
}

TEST_F(IterativeTest, ForcedRollbacksAtEveryBoundaryKeepTheSequentialOutput) {
  const std::string data = tmpdir("iter_rollback");
  RuntimeOptions o = options(data);
  std::mutex mu;
  std::set<int> force;  // boundaries to force wrong; -1 = all
  o.test_hooks.force_misspeculation = [&](const std::string&, int b) {
    std::lock_guard<std::mutex> lk(mu);
    return force.count(b) > 0 || force.count(-1) > 0;
  };
  Runtime rt = open(o, true);
  for (const char* q : {"volcano magma eruption", "harbor ship tide"}) {
    RunOutput none = run(*rt.executor, "iter", q, 24, with(RetrievalOverlap::kNone));
    for (int b : {4, 8, 12, 16, 20, -1}) {
      {
        std::lock_guard<std::mutex> lk(mu);
        force = {b};
      }
      for (RetrievalOverlap ov : {RetrievalOverlap::kSpeculative, RetrievalOverlap::kBoth}) {
        const std::string what = std::string(overlap_name(ov)) + " " + q + " forced at " + std::to_string(b);
        RunOutput spec = run(*rt.executor, "iter", q, 24, with(ov));
        expect_same_run(none, spec, what);
        EXPECT_GE(spec.usage.speculative_misses, 1) << what;
        EXPECT_EQ(spec.usage.speculative_hits + spec.usage.speculative_misses, 5) << what;
        if (b == -1) {
          EXPECT_EQ(spec.usage.speculative_misses, 5) << what;
        }
      }
    }
  }
  // Rollbacks with tokens to discard happened (speculative verifies every few boundaries).
  {
    std::lock_guard<std::mutex> lk(mu);
    force = {-1};
  }
  RunOutput spec = run(*rt.executor, "iter", "chess knight gambit", 24, with(RetrievalOverlap::kSpeculative));
  EXPECT_GT(spec.usage.rolled_back_tokens, 0);
  EXPECT_EQ(spec.tokens.size(), 24u) << "rolled-back tokens were sent";
  rt.stop();  // the last stats snapshot, after every run's release
  const ExecutorStats st = rt.executor->stats();
  EXPECT_EQ(st.pool_free_blocks, st.pool_blocks) << "rollbacks leaked KV blocks";
  close(rt);
  fs::remove_all(data);
}

TEST_F(IterativeTest, PipeRagEqualsSequentialWithAOneIntervalStaleQuery) {
  const std::string data = tmpdir("iter_piperag");
  Runtime rt = open(options(data), true);
  int differ = 0;
  for (const char* q : kIterQueries) {
    RunOutput lagged = run(*rt.executor, "iter-lag", q, 24, with(RetrievalOverlap::kNone));
    RunOutput pipe = run(*rt.executor, "iter", q, 24, with(RetrievalOverlap::kPipeRag));
    expect_same_run(lagged, pipe, std::string("piperag ") + q);
    EXPECT_EQ(pipe.usage.overlap, "piperag");
    RunOutput fresh = run(*rt.executor, "iter", q, 24, with(RetrievalOverlap::kNone));
    differ += contexts(fresh) != contexts(pipe);
  }
  // Not a requirement, a sanity check of the test: the stale query changes something somewhere.
  EXPECT_GT(differ, 0) << "the one-interval-stale query never changed a context";
  close(rt);
  fs::remove_all(data);
}

TEST_F(IterativeTest, ConcurrentIterativeRunsWithKnowledgeTreeReuseMatchSequentialOnes) {
  const std::string data = tmpdir("iter_concurrent");
  RuntimeOptions o = options(data);
  o.scheduler.max_running = 4;
  Runtime rt = open(o, true);
  std::vector<RunOutput> ref;
  for (const char* q : kIterQueries) ref.push_back(run(*rt.executor, "iter-kt", q, 30, with(RetrievalOverlap::kNone)));
  for (RetrievalOverlap ov : {RetrievalOverlap::kSpeculative, RetrievalOverlap::kBoth, RetrievalOverlap::kNone}) {
    std::vector<RunOutput> outs(6);
    Collector c;
    for (int i = 0; i < 6; ++i) {
      RunRequest r;
      r.pipeline = "iter-kt";
      r.query = kIterQueries[i];
      r.sampling.ignore_eos = true;
      r.overlap = ov;
      ASSERT_TRUE(rt.executor->submit(r, c.sink(&outs[i])).ok());
    }
    for (int i = 0; i < 6; ++i) {
      ASSERT_TRUE(c.wait(&outs[i]));
      ASSERT_TRUE(outs[i].error.ok()) << outs[i].error.to_string();
      expect_same_run(ref[i], outs[i], std::string("concurrent ") + std::string(overlap_name(ov)) + " " + kIterQueries[i]);
    }
  }
  close(rt);
  fs::remove_all(data);
}

TEST_F(IterativeTest, RequestsAreValidated) {
  const std::string data = tmpdir("iter_bad");
  Runtime rt = open(options(data), true);
  Collector c;
  RunOutput out;
  RunRequest r;
  r.pipeline = "none";
  r.query = "q";
  r.overlap = RetrievalOverlap::kPipeRag;
  Status st = rt.executor->submit(r, c.sink(&out));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("iterative pipelines only"), std::string::npos) << st.to_string();
  r.pipeline = "iter";
  r.overlap.reset();
  r.retrieval_interval = 0;
  st = rt.executor->submit(r, c.sink(&out));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("retrieval_interval"), std::string::npos) << st.to_string();
  r.retrieval_interval.reset();
  r.retrieval_top_k = 0;
  st = rt.executor->submit(r, c.sink(&out));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  bool listed = false;
  for (const auto& p : rt.executor->pipelines())
    if (p.name == "iter") listed = p.kind == "iterative" && p.overlap == "none" && p.retrieval_interval == 4;
  EXPECT_TRUE(listed);
  close(rt);
  fs::remove_all(data);
}

TEST(SpeculationCache, TopKMatchesANaiveRanking) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  const int dim = 13;
  SpeculationCache cache(40);
  std::vector<std::pair<uint64_t, std::vector<float>>> all;
  for (uint64_t id = 1; id <= 57; ++id) {  // more than the capacity: the oldest go
    std::vector<float> v(dim);
    for (float& x : v) x = nd(rng);
    ContextDoc d;
    d.chunk_id = id * 3;
    cache.add(d, v);
    all.emplace_back(d.chunk_id, v);
  }
  EXPECT_EQ(cache.size(), 40u);
  const std::vector<std::pair<uint64_t, std::vector<float>>> kept(all.end() - 40, all.end());
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> q(dim);
    for (float& x : q) x = nd(rng);
    std::vector<std::pair<double, uint64_t>> ref;
    for (const auto& [id, v] : kept) {
      double s = 0;
      for (int i = 0; i < dim; ++i) s += static_cast<double>(q[i]) * v[i];
      ref.emplace_back(-s, id);
    }
    std::sort(ref.begin(), ref.end());
    const int k = 1 + trial % 7;
    auto got = cache.top_k(q, k);
    ASSERT_EQ(got.size(), static_cast<size_t>(k));
    for (int i = 0; i < k; ++i) {
      EXPECT_EQ(got[i].chunk_id, ref[i].second) << "rank " << i;
      EXPECT_NEAR(got[i].source.score, -ref[i].first, 1e-4);
    }
  }
}

TEST(SearchTimeModel, FitsALinearLatencyAndPicksTheLargestNprobeInBudget) {
  SearchTimeModel m;
  EXPECT_EQ(m.choose(10.0, 64), 64) << "no data: the largest";
  for (int p : {1, 4, 16, 64, 2, 8, 32}) m.observe(p, 2.0 + 0.5 * p);  // 2 ms + 0.5 ms per list
  EXPECT_NEAR(m.predict(10), 7.0, 1e-6);
  EXPECT_EQ(m.choose(10.001, 64), 16);  // 2 + 0.5 * 16 = 10 ms
  EXPECT_EQ(m.choose(9.99, 64), 8);
  EXPECT_EQ(m.choose(1000.0, 48), 48);
  EXPECT_EQ(m.choose(0.5, 64), 1) << "nothing fits: the smallest";
}

TEST(SpecStride, FollowsTheOs3Objective) {
  SpecStride s;
  EXPECT_EQ(s.stride(8), 2) << "no timings yet";
  s.observe_step_ms(10);
  s.observe_verify_ms(1);
  for (int i = 0; i < 5; ++i) s.observe(false);
  EXPECT_DOUBLE_EQ(s.accuracy(), 0.0);
  EXPECT_EQ(s.stride(8), 1) << "speculation always wrong: verify every step";
  for (int i = 0; i < 5; ++i) s.observe(true);
  EXPECT_DOUBLE_EQ(s.accuracy(), 0.6) << "capped";
  // Naive reference: argmax over s of (1 - g^s) / (1 - g) / (s a + b) with a = 10, b = 1, g = 0.6.
  int best = 1;
  double best_rate = 0;
  for (int k = 1; k <= 8; ++k) {
    const double rate = (1 - std::pow(0.6, k)) / 0.4 / (k * 10.0 + 1.0);
    if (rate > best_rate) best_rate = rate, best = k;
  }
  EXPECT_EQ(s.stride(8), best);
  SpecStride slow_verify;
  slow_verify.observe_step_ms(1);
  slow_verify.observe_verify_ms(50);
  for (int i = 0; i < 5; ++i) slow_verify.observe(true);
  EXPECT_GT(slow_verify.stride(8), 3) << "expensive verification: longer strides";
}

}  // namespace
}  // namespace ragd::pipelines
