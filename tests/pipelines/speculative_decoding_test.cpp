// Speculative decoding with n-gram drafts (ngram_drafter.h, ExecutorImpl::verify_draft): the
// drafter against a naive search; then through the executor, the output of every run with drafts
// is the output without them — greedy and seeded sampling, every reuse mode and pipeline kind,
// plain runs with a copy-heavy prompt, batched runs, a constraint, stop tokens and max_tokens
// mid-draft — while drafts were in fact verified and accepted; and the KV pool ends as it does
// without drafts.
#include "executor_fixture.h"

#include "ngram_drafter.h"

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
  o.kv_pool_bytes = 16ull << 20;
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
        r.overrides.max_tokens = 24;
        r.overrides.temperature = i == 0 ? 0.0f : 1.0f;
        r.overrides.seed = 5;
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
    o.kv_pool_bytes = 16ull << 20;
    o.hbm_cache = false;
    o.speculative_k = spec ? 6 : 0;
    o.speculative_max_decodes = 8;
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

}  // namespace
}  // namespace ragd::pipelines
