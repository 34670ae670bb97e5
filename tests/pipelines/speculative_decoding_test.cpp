// Speculative decoding with n-gram drafts (ngram_drafter.h, ExecutorImpl::verify_draft): the
// drafter against a naive search; then through the executor, the output of every run with drafts
// is the output without them — greedy and seeded sampling, every reuse mode and pipeline kind,
// plain runs with a copy-heavy prompt, batched runs, a constraint, stop tokens and max_tokens
// mid-draft — while drafts were in fact verified and accepted; and the KV pool ends as it does
// without drafts. The step budget (draft_budget.h) against a brute-force optimum, and sampled
// outputs with drafts against the model's exact distribution (chi-square).
#include "executor_fixture.h"

#include <algorithm>
#include <map>

#include "draft_budget.h"
#include "draft_budget_testing.h"
#include "ngram_drafter.h"
#include "output_ngrams.h"
#include "ragd/engine/model.h"

namespace ragd::pipelines {
namespace {

// The naive drafter: for n = max..min, scan every earlier start from the latest.
std::vector<int32_t> naive_draft(const std::vector<int32_t>& t, int k, int max_n, int min_n) {
  for (int n = max_n; n >= min_n; --n) {
    if (static_cast<int>(t.size()) < n + 1) continue;
    for (int s = static_cast<int>(t.size()) - n - 1; s >= 0; --s) {
      bool eq = true;
      for (int j = 0; j < n; ++j) eq = eq && t[static_cast<size_t>(s + j)] == t[t.size() - static_cast<size_t>(n) + static_cast<size_t>(j)];
      if (!eq) continue;
      std::vector<int32_t> d;
      for (int j = s + n; j < static_cast<int>(t.size()) && static_cast<int>(d.size()) < k; ++j) d.push_back(t[static_cast<size_t>(j)]);
      return d;
    }
  }
  return {};
}

TEST(NgramDrafter, MatchesNaiveSearchAndAdaptsK) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 2000; ++trial) {
    const int len = static_cast<int>(rng() % 60);
    const int alphabet = 2 + static_cast<int>(rng() % 6);
    std::vector<int32_t> t(static_cast<size_t>(len));
    for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint64_t>(alphabet));
    const int k = 1 + static_cast<int>(rng() % 9);
    ASSERT_EQ(ngram_draft(t, k, 4, 2), naive_draft(t, k, 4, 2)) << "trial " << trial;
  }
  NgramDrafter d(8);
  EXPECT_EQ(d.k(), 4);
  d.observe(4, 4);
  EXPECT_EQ(d.k(), 6);
  d.observe(6, 6);
  d.observe(8, 8);
  EXPECT_EQ(d.k(), 8);  // bounded by max_k
  d.observe(8, 0);
  EXPECT_EQ(d.k(), 4);
  d.observe(4, 2);
  EXPECT_EQ(d.k(), 3);
  EXPECT_TRUE(ngram_draft(std::vector<int32_t>{1, 2, 3, 4}, 4).empty());
  // Two drafts in a row with nothing accepted: no drafts for kCoolSteps steps, then drafts again.
  const std::vector<int32_t> loop = {5, 6, 7, 5, 6, 7, 5, 6};
  NgramDrafter c(8);
  EXPECT_FALSE(c.draft(loop).empty());
  c.observe(4, 0);
  c.observe(2, 0);
  for (int i = 0; i < NgramDrafter::kCoolSteps; ++i) EXPECT_TRUE(c.draft(loop).empty()) << i;
  EXPECT_FALSE(c.draft(loop).empty());
}


TEST(StepCostModel, RecoversBothRatesAndFollowsTheLevelWhileRowsDoNotVary) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 50; ++trial) {
    const double a = 1e-3 * (0.5 + static_cast<double>(rng() % 1000) / 100.0);   // 0.5 .. 10.5 ms
    const double b = 1e-5 * (1.0 + static_cast<double>(rng() % 1000) / 10.0);    // 0.01 .. 1 ms per logit row
    const double bp = b * (0.2 + static_cast<double>(rng() % 100) / 100.0);     // a prefill row: 0.2 .. 1.2 of it
    std::normal_distribution<double> noise(0.0, 0.01);                            // 1 % noise
    StepCostModel m;
    EXPECT_FALSE(m.fitted());
    for (int i = 0; i < 300; ++i) {
      const int rows = 1 + static_cast<int>(rng() % 97);
      const int pre = rng() % 3 == 0 ? static_cast<int>(rng() % 512) : 0;
      double t = (a + b * rows + bp * pre) * (1.0 + noise(rng));
      if (i % 17 == 0) t *= 3;  // now and then a step slowed by something else
      m.observe(pre, rows, t);
    }
    ASSERT_TRUE(m.fitted());
    EXPECT_NEAR(m.fixed_s(), a, 0.1 * a + b) << trial;
    EXPECT_NEAR(m.per_row_s(), b, 0.05 * b) << trial;
    EXPECT_NEAR(m.per_prefill_row_s(), bp, 0.05 * b) << trial;
    // Once the window holds one logit-row count only, that slope is unidentified: the fit keeps
    // its shape and follows the steps' level — here the machine becomes twice as slow.
    for (int i = 0; i < StepCostModel::kWindow; ++i) m.observe(0, 64, a + b * 64);
    EXPECT_NEAR(m.seconds(64), a + b * 64, 1e-9 * (a + b * 64)) << trial;
    const double fixed = m.fixed_s(), per_row = m.per_row_s(), per_pre = m.per_prefill_row_s();
    for (int i = 0; i < StepCostModel::kWindow / 2 - 1; ++i) m.observe(0, 64, 2 * (a + b * 64));
    EXPECT_NEAR(m.fixed_s(), fixed, 1e-9 * fixed) << "a minority of slow steps is noise";
    for (int i = 0; i < StepCostModel::kWindow / 2 + 1; ++i) m.observe(0, 64, 2 * (a + b * 64));
    EXPECT_NEAR(m.fixed_s(), 2 * fixed, 1e-9 * fixed) << trial;
    EXPECT_NEAR(m.per_row_s(), 2 * per_row, 1e-9 * per_row) << trial;
    EXPECT_NEAR(m.per_prefill_row_s(), 2 * per_pre, 1e-9 * per_pre + 1e-15) << trial;
  }
  StepCostModel same;
  for (int i = 0; i < 50; ++i) same.observe(i * 7, 4, 0.01 + 1e-5 * i * 7);
  EXPECT_FALSE(same.fitted());  // never two logit-row counts: no fit; drafts ride at small batches only
  const std::vector<DraftCandidate> c = {{5, 0.1}, {3, 0.9}};
  EXPECT_EQ(choose_draft_lengths(same, 2, c), (std::vector<int>{5, 3}));
  EXPECT_EQ(choose_draft_lengths(same, kUnfittedMaxDecodes + 1, c), (std::vector<int>{0, 0}));  // not at a batch
}

TEST(DraftBudget, MaximisesExpectedTokensPerSecondLikeBruteForce) {
  // The budget's choice against every choice: expected tokens per modelled second over all
  // combinations of prefix lengths (small cases), and the expected shapes at the extremes.
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 400; ++trial) {
    const draft_testing::RandomCost cost = draft_testing::random_fitted_cost(rng);
    const StepCostModel& m = cost.model;
    ASSERT_TRUE(m.fitted());
    const int decodes = 1 + static_cast<int>(rng() % 6);
    const int n = 1 + static_cast<int>(rng() % 3);
    std::vector<DraftCandidate> c(static_cast<size_t>(n));
    for (auto& x : c) x = {static_cast<int>(rng() % 5), static_cast<double>(rng() % 101) / 100.0};
    const std::vector<int> got = choose_draft_lengths(m, decodes, c);
    const double best = draft_testing::best_rate(m, decodes, c);
    for (size_t i = 0; i < c.size(); ++i) ASSERT_LE(got[i], c[i].available);
    EXPECT_NEAR(draft_testing::expected_rate(m, decodes, c, got), best, 1e-9 * best) << "trial " << trial;
  }
  // Batch 1, a step mostly fixed cost: a well-accepted draft rides whole. Batch 64 with rows as
  // dear as the fixed part: a half-accepted draft does not, a fully accepted one does.
  const StepCostModel cheap = draft_testing::fitted_cost(10e-3, 0.1e-3, 9), dear = draft_testing::fitted_cost(1e-3, 1e-3, 9);
  const std::vector<DraftCandidate> good = {{8, 0.9}};
  EXPECT_EQ(choose_draft_lengths(cheap, 1, good), (std::vector<int>{8}));
  const std::vector<DraftCandidate> half(64, DraftCandidate{8, 0.5}), whole(64, DraftCandidate{8, 1.0});
  const std::vector<int> none = choose_draft_lengths(dear, 64, half), full = choose_draft_lengths(dear, 64, whole);
  EXPECT_EQ(std::count(none.begin(), none.end(), 0), 64);
  EXPECT_EQ(std::count(full.begin(), full.end(), 8), 64);
}

TEST(DraftAcceptance, IsTheGeometricEstimateByState) {
  DraftAcceptance a;
  EXPECT_DOUBLE_EQ(a.alpha(0.3), 0.3);  // no drafts of its own: the prior
  a.observe(4, 4);                        // 4 accepted, no rejection
  a.observe(4, 1);                        // 1 accepted, then a rejection
  EXPECT_EQ(a.accepted, 5);
  EXPECT_EQ(a.rejections, 1);
  EXPECT_DOUBLE_EQ(a.alpha(0.5, 0.0), 5.0 / 6.0);
  EXPECT_DOUBLE_EQ(a.alpha(0.5, 4.0), 7.0 / 10.0);
  a.observe(2, 0, 0.5);  // decayed: earlier counts halve
  EXPECT_DOUBLE_EQ(a.accepted, 2.5);
  EXPECT_DOUBLE_EQ(a.rejections, 1.5);
  a.fade(0.5);  // aged without a verification: the estimate moves back towards the prior
  EXPECT_DOUBLE_EQ(a.accepted, 1.25);
  EXPECT_DOUBLE_EQ(a.rejections, 0.75);
  for (int i = 0; i < 60; ++i) a.fade(0.5);
  EXPECT_NEAR(a.alpha(0.5, 2.0), 0.5, 1e-12);
  // A run that copies in bursts: whole drafts taken while copying, rejections after a miss. Its
  // two states learn apart: high acceptance in a copy, low out of one.
  DraftHistory h, server;
  for (int i = 0; i < 20; ++i) {
    h.observe(4, 0);  // a miss (from state "after a miss")
    h.observe(4, 4);  // still "after a miss": a copy starts
    h.observe(6, 6);  // "copying": taken whole
    h.observe(8, 2);  // "copying": the copy ends
  }
  EXPECT_FALSE(h.copying);
  EXPECT_NEAR(h.state[1].alpha(0.5, 0.0), 8.0 / 9.0, 1e-12);    // 160 accepted, 20 rejections
  EXPECT_NEAR(h.state[0].alpha(0.5, 0.0), 80.0 / 100.0, 1e-12);  // 80 accepted, 20 rejections
  EXPECT_NEAR(h.alpha(server), (80.0 + 0.5 * 4) / (100.0 + 4), 1e-12);  // server prior: (0 + 1) / (0 + 2)
  h.observe(3, 3);
  EXPECT_TRUE(h.copying);
  // Probes: a proposal left out probe_interval steps in a row gets one token verified; a kept one
  // or no proposal resets the count.
  for (const int decodes : {1, 3, 16, 64}) {
    DraftHistory p;
    const int every = DraftHistory::probe_interval(decodes);
    for (int round = 0; round < 3; ++round) {
      for (int i = 1; i < every; ++i) EXPECT_EQ(p.settle_take(5, 0, decodes), 0) << decodes << " " << i;
      EXPECT_EQ(p.settle_take(5, 0, decodes), 1) << decodes;
    }
    EXPECT_EQ(p.settle_take(5, 0, decodes), 0);
    EXPECT_EQ(p.settle_take(5, 3, decodes), 3);  // kept: the count restarts
    for (int i = 1; i < every; ++i) EXPECT_EQ(p.settle_take(5, 0, decodes), 0);
    EXPECT_EQ(p.settle_take(0, 0, decodes), 0);  // nothing proposed: restarts too
    EXPECT_EQ(p.settle_take(5, 0, decodes), 0);
  }
  EXPECT_NEAR(h.alpha(server), (160.0 + 0.5 * 4) / (180.0 + 4), 1e-12);  // now in a copy
}

// The naive answer cache: the scope's answers from the newest, in each the last occurrence of the
// last OutputNgrams::kOrder tokens that has a token after it; what followed, up to kSpan and k.
std::vector<int32_t> naive_answer_draft(const std::vector<std::pair<std::string, std::vector<int32_t>>>& answers,
                                        const std::string& scope, const std::vector<int32_t>& t, int k) {
  constexpr int n = OutputNgrams::kOrder;
  if (static_cast<int>(t.size()) < n || k <= 0) return {};
  for (auto a = answers.rbegin(); a != answers.rend(); ++a) {
    if (a->first != scope) continue;
    const std::vector<int32_t>& o = a->second;
    for (int s = static_cast<int>(o.size()) - n - 1; s >= 0; --s) {
      if (!std::equal(o.begin() + s, o.begin() + s + n, t.end() - n)) continue;
      std::vector<int32_t> d;
      for (int j = s + n; j < static_cast<int>(o.size()) && static_cast<int>(d.size()) < std::min(k, OutputNgrams::kSpan); ++j)
        d.push_back(o[static_cast<size_t>(j)]);
      return d;
    }
  }
  return {};
}

TEST(OutputNgrams, MatchesTheNaiveLatestAnswerAndKeepsScopesApart) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    OutputNgrams cache(1u << 20);  // no forgetting here
    std::vector<std::pair<std::string, std::vector<int32_t>>> answers;
    const int alphabet = 2 + static_cast<int>(rng() % 5);
    const int count = 1 + static_cast<int>(rng() % 6);
    for (int a = 0; a < count; ++a) {
      std::vector<int32_t> o(rng() % 40);
      for (auto& x : o) x = static_cast<int32_t>(rng() % static_cast<uint64_t>(alphabet));
      const std::string scope = rng() % 3 == 0 ? "tenant-b" : "tenant-a";
      cache.add(scope, o);
      answers.emplace_back(scope, o);
    }
    for (int q = 0; q < 20; ++q) {
      std::vector<int32_t> t(rng() % 8);
      for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint64_t>(alphabet));
      const int k = 1 + static_cast<int>(rng() % 20);
      for (const std::string scope : {"tenant-a", "tenant-b", "tenant-c"})
        ASSERT_EQ(cache.draft(scope, t, k), naive_answer_draft(answers, scope, t, k)) << "trial " << trial << " " << scope;
    }
  }
}

TEST(OutputNgrams, ForgetsTheOldestPastItsBound) {
  OutputNgrams cache(8);
  std::vector<int32_t> first = {1, 2, 3, 4, 5, 6};  // 3 n-grams with a token after them
  cache.add("s", first);
  EXPECT_EQ(cache.draft("s", std::vector<int32_t>{1, 2, 3}, 4), (std::vector<int32_t>{4, 5, 6}));
  std::vector<int32_t> later(20);
  for (int i = 0; i < 20; ++i) later[static_cast<size_t>(i)] = 100 + i;  // 17 new n-grams
  cache.add("s", later);
  EXPECT_LE(cache.size(), 8u);
  EXPECT_TRUE(cache.draft("s", std::vector<int32_t>{1, 2, 3}, 4).empty());  // the oldest went first
  EXPECT_EQ(cache.draft("s", std::vector<int32_t>{115, 116, 117}, 4), (std::vector<int32_t>{118, 119}));
  OutputNgrams off(0);
  off.add("s", first);
  EXPECT_TRUE(off.draft("s", std::vector<int32_t>{1, 2, 3}, 4).empty());
}


class SpeculativeDecodingTest : public ExecutorTest {
 protected:
  // A prompt that quotes itself: the answer's n-grams recur in it.
  static std::string copy_prompt(int i) {
    const std::string passage = std::string("The ") + kTopics[i % 12] + " report says " + kTopics[(i + 3) % 12] + " and " + kTopics[(i + 7) % 12] + ".";
    return passage + "\n" + passage + "\nQuote the report: " + passage.substr(0, 20);
  }
};

TEST_F(SpeculativeDecodingTest, OutputsAreThoseWithoutDraftsOnEveryPath) {
  const std::string data = tmpdir("specdec");
  RuntimeOptions o = options(data);
  o.model.kv_pool_bytes = 16ull << 20;
  o.test_hooks.draft_budget_off = true;  // every proposal verified, whatever the measured step times
  Runtime rt = open(o, true);
  Executor& ex = *rt.executor;
  int drafted = 0, accepted = 0;
  auto both = [&](const std::string& what, const std::string& pipeline, const std::string& query, int max_tokens,
                  const std::function<void(RunRequest&)>& tweak) {
    RunOutput a = run(ex, pipeline, query, max_tokens, [&](RunRequest& r) {
      tweak(r);
      r.speculative_k = 0;
    });
    RunOutput b = run(ex, pipeline, query, max_tokens, [&](RunRequest& r) {
      tweak(r);
      r.speculative_k = 8;
    });
    ASSERT_TRUE(a.error.ok() && b.error.ok()) << what << ": " << a.error.to_string() << " / " << b.error.to_string();
    EXPECT_EQ(a.tokens, b.tokens) << what;
    EXPECT_EQ(a.finish, b.finish) << what;
    EXPECT_EQ(a.usage.completion_tokens, b.usage.completion_tokens) << what;
    EXPECT_EQ(a.usage.draft_steps, 0) << what;
    drafted += b.usage.drafted_tokens;
    accepted += b.usage.accepted_tokens;
  };
  for (int i = 0; i < 6; ++i) {
    const std::string p = copy_prompt(i);
    both("greedy plain " + std::to_string(i), "", "", 40, [&](RunRequest& r) {
      r.prompt = p;
      r.sampling.temperature = 0;
    });
    both("sampled plain " + std::to_string(i), "", "", 40, [&](RunRequest& r) {
      r.prompt = p;
      r.sampling.temperature = 0.9f;
      r.sampling.top_p = 0.95f;
      r.sampling.seed = 100 + static_cast<uint64_t>(i);
    });
    both("penalties " + std::to_string(i), "", "", 30, [&](RunRequest& r) {
      r.prompt = p;
      r.sampling.temperature = 0.7f;
      r.sampling.repetition_penalty = 1.2f;
      r.sampling.seed = 7;
    });
  }
  // Every reuse mode and pipeline kind (iterative runs decode without drafts).
  for (const char* pl : {"none", "prefix", "knowledge_tree", "cacheblend", "epic", "iter", "hot"})
    for (int i = 0; i < 2; ++i)
      both(std::string("pipeline ") + pl, pl, kTopics[i * 5], 24, [&](RunRequest& r) {
        r.sampling.max_tokens = 24;
        r.sampling.temperature = i == 0 ? 0.0f : 1.0f;
        r.sampling.seed = 5;
      });
  // max_tokens that ends inside a draft, a stop token, a constraint, logprobs.
  both("max_tokens mid-draft", "", "", 5, [&](RunRequest& r) { r.prompt = copy_prompt(1); r.sampling.temperature = 0; });
  both("logprobs", "", "", 20, [&](RunRequest& r) {
    r.prompt = copy_prompt(2);
    r.sampling.temperature = 0;
    r.want_logprobs = true;
    r.top_logprobs = 3;
  });
  both("constrained", "", "", 60, [&](RunRequest& r) {
    r.prompt = copy_prompt(3);
    r.sampling.temperature = 0.8f;
    r.sampling.seed = 11;
    r.sampling.constraint = std::make_shared<const engine::ConstraintSpec>(
        engine::ConstraintSpec{"regex", "(ab|ba){2,12}c?", {}, 0, ""});
  });
  {
    RunOutput g = run(ex, "", "", 40, [&](RunRequest& r) { r.prompt = copy_prompt(4); r.sampling.temperature = 0; });
    ASSERT_GE(g.tokens.size(), 6u);
    const int32_t stop = g.tokens[4];
    both("stop token mid-draft", "", "", 40, [&](RunRequest& r) {
      r.prompt = copy_prompt(4);
      r.sampling.temperature = 0;
      r.sampling.stop_token_ids = {stop};
    });
  }
  std::printf("drafted %d tokens, accepted %d\n", drafted, accepted);
  EXPECT_GT(drafted, 0);
  EXPECT_GT(accepted, 0);
  // The pool ends as it ends without drafts: nothing held beyond the cached prefixes.
  ASSERT_TRUE(wait_until([&] { return ex.stats().running == 0; }));
  close(rt);
  fs::remove_all(data);
}

TEST_F(SpeculativeDecodingTest, BatchedRunsMatchAndThePoolIsTheSame) {
  // The same 6 runs at once, with and without drafts, in two runtimes without caches: identical
  // outputs, and every pool block free at the end (rejected drafts' KV went back).
  std::vector<std::vector<int32_t>> outs[2];
  for (int spec = 0; spec < 2; ++spec) {
    const std::string data = tmpdir("specdec-batch-" + std::to_string(spec));
    RuntimeOptions o = options(data);
    o.model.kv_pool_bytes = 16ull << 20;
    o.hbm_cache = false;
    o.speculative.k = spec ? 6 : 0;
    o.speculative.max_decodes = 8;
    // Every proposal verified: this is about batched rollback, not about which drafts pay (the step
    // budget's choice follows measured step times, so whether a tiny model's drafts ride varies).
    o.test_hooks.draft_budget_off = true;
    Runtime rt = open(o, false);
    Collector c;
    std::vector<RunOutput> out(6);
    for (int i = 0; i < 6; ++i) {
      RunRequest r;
      r.prompt = copy_prompt(i);
      r.sampling.max_tokens = 32;
      r.sampling.ignore_eos = true;
      r.sampling.temperature = i % 2 ? 0.8f : 0.0f;
      r.sampling.seed = 40 + static_cast<uint64_t>(i);
      ASSERT_TRUE(rt.executor->submit(r, c.sink(&out[static_cast<size_t>(i)])).ok());
    }
    int accepted = 0;
    for (auto& x : out) {
      ASSERT_TRUE(c.wait(&x));
      ASSERT_TRUE(x.error.ok()) << x.error.to_string();
      outs[spec].push_back(x.tokens);
      accepted += x.usage.accepted_tokens;
    }
    if (spec) EXPECT_GT(accepted, 0);
    ASSERT_TRUE(wait_until([&] { const ExecutorStats s = rt.executor->stats(); return s.running == 0 && s.pool_free_blocks == s.pool_blocks; }))
        << rt.executor->stats_json();
    close(rt);
    fs::remove_all(data);
  }
  EXPECT_EQ(outs[0], outs[1]);
}


TEST_F(SpeculativeDecodingTest, KnowledgeTreeAndPoolEndAsWithoutDrafts) {
  // The same RAG runs (knowledge-tree reuse) in two runtimes, one after the other, with and
  // without drafts: the same outputs, and the cache ends the same — the same tree nodes and
  // tokens in each tier, the same pool blocks in use (rejected drafts' KV went back and no draft
  // KV entered the tree).
  ExecutorStats end[2];
  std::vector<std::vector<int32_t>> outs[2];
  long accepted = 0;
  for (int spec = 0; spec < 2; ++spec) {
    const std::string data = tmpdir("specdec-tree-" + std::to_string(spec));
    RuntimeOptions o = options(data);
    o.model.kv_pool_bytes = 16ull << 20;
    o.speculative.k = spec ? 6 : 0;
    o.test_hooks.draft_budget_off = true;  // every proposal verified: this is about rollback
    Runtime rt = open(o, true);
    for (int i = 0; i < 8; ++i) {
      RunOutput x = run(*rt.executor, "knowledge_tree", kTopics[i % 5], 24, [&](RunRequest& r) {
        r.sampling.temperature = i % 2 ? 0.9f : 0.0f;
        r.sampling.seed = 3 + static_cast<uint64_t>(i);
      });
      outs[spec].push_back(x.tokens);
      accepted += x.usage.accepted_tokens;
    }
    ASSERT_TRUE(wait_until([&] { return rt.executor->stats().running == 0; }));
    // Copies to DRAM and SSD finish in the background: read once the tiers stay still for 0.5 s.
    auto tiers = [&] {
      const ExecutorStats x = rt.executor->stats();
      std::vector<uint64_t> v;
      for (const TierUsage& t : x.tiers) v.push_back(t.entries), v.push_back(t.used_bytes);
      return v;
    };
    std::vector<uint64_t> last = tiers();
    for (int still = 0, i = 0; still < 5 && i < 100; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const std::vector<uint64_t> now = tiers();
      still = now == last ? still + 1 : 0;
      last = now;
    }
    end[spec] = rt.executor->stats();
    close(rt);
    fs::remove_all(data);
  }
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_GT(accepted, 0);
  EXPECT_EQ(end[0].cache_nodes, end[1].cache_nodes);
  EXPECT_EQ(end[0].pool_free_blocks, end[1].pool_free_blocks);
  for (int t = 0; t < 3; ++t) {
    EXPECT_EQ(end[0].tiers[t].entries, end[1].tiers[t].entries) << t;
    EXPECT_EQ(end[0].tiers[t].used_bytes, end[1].tiers[t].used_bytes) << t;
  }
  EXPECT_GT(end[1].spec_ngram.drafted, 0u);
  EXPECT_EQ(end[1].spec_ngram.accepted, static_cast<uint64_t>(accepted));
  EXPECT_EQ(end[0].spec_ngram.drafted, 0u);
}

TEST_F(SpeculativeDecodingTest, EarlierAnswersDraftForTheirOwnScopeOnly) {
  // The same question asked again in one scope (tenant and cache salt) drafts from the first
  // answer; asked in another scope it drafts only from its own prompt and output. Outputs equal.
  const std::string data = tmpdir("specdec-answers");
  RuntimeOptions o = options(data);
  o.test_hooks.draft_budget_off = true;  // every proposal verified: this is about where drafts come from
  Runtime rt = open(o, true);
  long same = 0, other = 0;
  for (int i = 0; i < 4; ++i) {
    const std::string prompt = std::string("Tell me about ") + kTopics[i] + " and " + kTopics[(i + 5) % 12] + ".";
    auto ask = [&](const std::string& scope, const std::string& salt) {
      return run(*rt.executor, "", "", 40, [&](RunRequest& r) {
        r.prompt = prompt;
        r.sampling.temperature = 0;
        r.speculative_k = 8;
        r.kv_scope = scope;
        r.cache_salt = salt;
        r.reuse = ReuseMode::kNone;
      });
    };
    RunOutput first = ask("tenant-a", "");
    RunOutput again = ask("tenant-a", "");
    RunOutput b = ask("tenant-b", "");
    RunOutput salted = ask("tenant-a", "salt-" + std::to_string(i));
    EXPECT_EQ(first.tokens, again.tokens) << i;
    EXPECT_EQ(first.tokens, b.tokens) << i;
    EXPECT_EQ(first.tokens, salted.tokens) << i;
    EXPECT_EQ(b.usage.accepted_tokens, salted.usage.accepted_tokens) << i;  // neither saw an earlier answer
    same += again.usage.accepted_tokens;
    other += b.usage.accepted_tokens;
  }
  EXPECT_GT(same, other);
  const ExecutorStats st = rt.executor->stats();
  EXPECT_GT(st.spec_ngram.answers_drafted, 0u);  // counted apart from the prompt lookup's drafts
  EXPECT_LE(st.spec_ngram.answers_accepted, st.spec_ngram.answers_drafted);
  EXPECT_LT(st.spec_ngram.answers_drafted, st.spec_ngram.drafted);
  close(rt);
  fs::remove_all(data);
}

TEST_F(SpeculativeDecodingTest, PipelineSpeculativeKAppliesUnlessTheRequestSetsOne) {
  // [generation] speculative_k of a pipeline drafts for its runs on a server without drafts; a
  // request's speculative_k = 0 turns it off; outputs equal either way.
  const std::string data = tmpdir("specdec-pipeline");
  const std::string pl = tmpdir("specdec-pipeline-specs");
  write_file(fs::path(pl) / "spec.toml",
             "[pipeline]\nname = \"spec\"\n[retriever]\ntop_k = 2\n[reuse]\nmode = \"none\"\n"
             "[generation]\nmax_tokens = 32\nspeculative_k = 6\n");
  RuntimeOptions o = options(data);
  o.pipelines_dir = pl;
  o.test_hooks.draft_budget_off = true;  // every proposal verified: this is about who sets k
  Runtime rt = open(o, true);
  long drafted = 0;
  for (int i = 0; i < 4; ++i) {
    RunOutput on = run(*rt.executor, "spec", kTopics[i], 32);
    RunOutput off = run(*rt.executor, "spec", kTopics[i], 32, [](RunRequest& r) { r.speculative_k = 0; });
    EXPECT_EQ(on.tokens, off.tokens) << i;
    EXPECT_EQ(off.usage.drafted_tokens, 0) << i;
    drafted += on.usage.drafted_tokens;
  }
  EXPECT_GT(drafted, 0);
  close(rt);
  fs::remove_all(data);
  fs::remove_all(pl);
}

TEST_F(SpeculativeDecodingTest, SampledTokensFollowTheTargetDistribution) {
  // Four tokens sampled at temperature 1.3 among the top 2 after a fixed prompt of ids: the exact
  // distribution of the 16 outputs comes from the model's logits at every prefix. Runs with drafts
  // (the most likely continuation, so that rows are both accepted and rejected, from the first
  // verification row on) over 3,000 seeds must follow it: chi-square over the 16 outputs below
  // the 0.1 % critical value (15 degrees of freedom: 37.70). The same counts against the
  // distribution at temperature 0.8 must exceed it (the test can tell distributions apart).
  constexpr int kTokens = 4, kRuns = 3000;
  constexpr float kTemp = 1.3f;
  const std::vector<int32_t> prompt = {17, 230, 5, 101, 77, 400, 12, 9, 301};
  engine::ModelOptions mo;
  mo.num_threads = 1;
  mo.kv_pool_bytes = 4ull << 20;
  auto model = engine::Model::load(*root_ + "/model", mo);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  auto logits_after = [&](const std::vector<int32_t>& seq) {
    engine::BlockTable t;
    engine::SeqStep s;
    s.table = &t;
    s.tokens = seq;
    s.logits = engine::SeqStep::Logits::kLast;
    engine::StepOutput out;
    EXPECT_TRUE((*model)->forward(std::span<engine::SeqStep>(&s, 1), &out).ok());
    std::vector<float> row(out.row(0).begin(), out.row(0).end());
    t.release((*model)->kv_pool());
    return row;
  };
  // The top 2 of a row (logit descending, id ascending on ties) and their probabilities at temp.
  auto top2 = [](const std::vector<float>& l, float temp) {
    std::vector<int32_t> idx(l.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(i);
    std::partial_sort(idx.begin(), idx.begin() + 2, idx.end(), [&](int32_t x, int32_t y) {
      return l[static_cast<size_t>(x)] > l[static_cast<size_t>(y)] || (l[static_cast<size_t>(x)] == l[static_cast<size_t>(y)] && x < y);
    });
    const double d = (static_cast<double>(l[static_cast<size_t>(idx[1])]) - l[static_cast<size_t>(idx[0])]) / temp;
    const double p0 = 1.0 / (1.0 + std::exp(d));
    return std::vector<std::pair<int32_t, double>>{{idx[0], p0}, {idx[1], 1.0 - p0}};
  };
  std::map<std::vector<int32_t>, std::vector<float>> rows;  // prefix of outputs -> logits after it
  std::function<void(std::vector<int32_t>)> expand = [&](std::vector<int32_t> out) {
    if (static_cast<int>(out.size()) == kTokens) return;
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), out.begin(), out.end());
    const std::vector<float>& l = rows[out] = logits_after(seq);
    for (const auto& [tok, p] : top2(l, kTemp)) {
      std::vector<int32_t> next = out;
      next.push_back(tok);
      expand(next);
    }
  };
  expand({});
  auto exact = [&](float temp) {
    std::map<std::vector<int32_t>, double> dist;
    std::function<void(std::vector<int32_t>, double)> walk = [&](std::vector<int32_t> out, double p) {
      if (static_cast<int>(out.size()) == kTokens) return void(dist[out] = p);
      for (const auto& [tok, q] : top2(rows.at(out), temp)) {
        std::vector<int32_t> next = out;
        next.push_back(tok);
        walk(next, p * q);
      }
    };
    walk({}, 1.0);
    return dist;
  };
  const auto target = exact(kTemp);
  ASSERT_EQ(target.size(), 16u);
  // Drafts: the most likely continuation of the run's outputs so far.
  const std::string data = tmpdir("specdec-chi2");
  RuntimeOptions o = options(data);
  o.speculative.k = 4;
  o.hbm_cache = false;
  o.test_hooks.draft_budget_off = true;  // every proposal verified: this is about the sampling rule
  o.test_hooks.draft_source = [&](const std::string&, std::span<const int32_t> tokens, int generated, int len) {
    std::vector<int32_t> out(tokens.end() - generated, tokens.end()), d;
    while (static_cast<int>(d.size()) < len && rows.count(out)) {
      const int32_t t = top2(rows.at(out), kTemp)[0].first;
      d.push_back(t);
      out.push_back(t);
    }
    return d;
  };
  Runtime rt = open(o, false);
  std::map<std::vector<int32_t>, int> counts;
  long drafted = 0, accepted = 0;
  for (int base = 0; base < kRuns; base += 100) {
    Collector c;
    std::vector<RunOutput> out(100);
    for (int i = 0; i < 100; ++i) {
      RunRequest r;
      r.prompt_ids = prompt;
      r.sampling.max_tokens = kTokens;
      r.sampling.ignore_eos = true;
      r.sampling.temperature = kTemp;
      r.sampling.top_k = 2;
      r.sampling.seed = 1000 + static_cast<uint64_t>(base + i);
      ASSERT_TRUE(rt.executor->submit(r, c.sink(&out[static_cast<size_t>(i)])).ok());
    }
    for (auto& x : out) {
      ASSERT_TRUE(c.wait(&x));
      ASSERT_TRUE(x.error.ok()) << x.error.to_string();
      ASSERT_EQ(x.tokens.size(), static_cast<size_t>(kTokens));
      ++counts[x.tokens];
      drafted += x.usage.drafted_tokens;
      accepted += x.usage.accepted_tokens;
    }
  }
  close(rt);
  fs::remove_all(data);
  std::printf("drafted %ld, accepted %ld\n", drafted, accepted);
  EXPECT_GT(accepted, kRuns / 2);            // verification rows drew many tokens
  EXPECT_GT(drafted - accepted, kRuns / 4);  // and rejected many drafts
  auto chi2 = [&](const std::map<std::vector<int32_t>, double>& dist) {
    double x = 0;
    for (const auto& [seq, p] : dist) {
      const double e = p * kRuns, n = counts.count(seq) ? counts.at(seq) : 0;
      x += (n - e) * (n - e) / e;
    }
    return x;
  };
  int outside = 0;
  for (const auto& [seq, n] : counts) outside += target.count(seq) ? 0 : n;
  EXPECT_EQ(outside, 0);  // only top-2 tokens were drawn
  const double x_target = chi2(target), x_other = chi2(exact(0.8f));
  std::printf("chi-square: %.2f against the target, %.2f against temperature 0.8 (critical 37.70)\n", x_target, x_other);
  EXPECT_LT(x_target, 37.70);
  EXPECT_GT(x_other, 37.70);
}

}  // namespace
}  // namespace ragd::pipelines
