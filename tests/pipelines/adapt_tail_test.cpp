// The adaptive policy's tail target and history (adapt_policy.h, adapt_history.h): an SLO bounds
// the predicted TTFT quantile, not the mean; the quantile follows the work queued ahead; profiles
// without a quantile model keep the mean; the quantile model's file keys are checked by name; the
// per tenant and pipeline history counts, agrees, calibrates and stays bounded, from many threads.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "ragd/pipelines/adapt_history.h"
#include "ragd/pipelines/adapt_policy.h"

namespace ragd::pipelines {
namespace {

// k1 (one passage) and k4-rerank1 (four scored, one kept), with mean models and a p99 model whose
// tail grows with the work ahead (the reranker's queue).
AdaptSpec tail_spec() {
  AdaptSpec s;
  AdaptCandidate one, rr;
  one.name = "k1";
  one.top_k = 1;
  rr.name = "k4-rerank1";
  rr.top_k = 4;
  rr.rerank = 1;
  s.candidates = {one, rr};
  AdaptModel m1, m4;
  m1.quality = {0.0, 0, 0, 0, 0};  // 0.5
  m1.ttft_idle_ms = 20;
  m1.ttft_per_run_ms = 5;
  m1.ttft_q = {40, 5, 30};  // p99: 40 ms + 5 per run + 30 per 1000 tokens ahead
  m1.has_ttft_q = true;
  m4.quality = {3.0, 0, 0, 0, 0};  // ~0.95
  m4.ttft_idle_ms = 45;
  m4.ttft_per_run_ms = 10;
  m4.ttft_q = {90, 5, 30};
  m4.has_ttft_q = true;
  s.profile.models = {{"k1", m1}, {"k4-rerank1", m4}};
  s.profile.ttft_quantile = 0.99;
  return s;
}

AdaptGoal all_of(const AdaptSpec& s, AdaptObjective o, double slo) {
  AdaptGoal g;
  g.objective = o;
  g.slo_ttft_ms = slo;
  for (size_t i = 0; i < s.candidates.size(); ++i) g.allowed.push_back(i);
  return g;
}

QuerySignals query() {
  QuerySignals q;
  q.retrieved = true;
  q.question_tokens = 12;
  q.passage_tokens = 60;
  return q;
}

const std::string& name(const AdaptSpec& s, const AdaptChoice& c) { return s.candidates[c.index].name; }

TEST(AdaptTail, WorkTokensCountPrefillAndScoring) {
  const AdaptSpec s = tail_spec();
  const QuerySignals q = query();
  // k1: 32 overhead + 12 question + 60 passage. k4-rerank1: the same prompt (one kept passage) and
  // four scoring passes of 32 + 12 + 60.
  EXPECT_NEAR(adapt_work_tokens(s.candidates[0], q), 104.0, 1e-9);
  EXPECT_NEAR(adapt_work_tokens(s.candidates[1], q), 104.0 + 4 * 104.0, 1e-9);
  EXPECT_NEAR(estimate_candidate(s, 1, q, LoadSignals{}).work_tokens, 520.0, 1e-9);
}

TEST(AdaptTail, TheSloBoundsThePredictedQuantileNotTheMean) {
  const AdaptSpec s = tail_spec();
  LoadSignals load;
  load.ahead = 4;
  load.work_ahead_tokens = 2000;
  // k4-rerank1: mean 45 + 4 * 10 = 85 ms; p99 90 + 4 * 5 + 2 * 30 = 170 ms. k1: mean 40, p99 40 + 20 + 60 = 120.
  AdaptEstimate e = estimate_candidate(s, 1, query(), load);
  EXPECT_NEAR(e.ttft_ms, 85.0, 1e-9);
  EXPECT_NEAR(e.ttft_q_ms, 170.0, 1e-9);
  EXPECT_NEAR(estimate_candidate(s, 0, query(), load).ttft_q_ms, 120.0, 1e-9);
  // A 150 ms target: the mean of k4-rerank1 is within it, its p99 is not -> k1, for both objectives.
  for (AdaptObjective o : {AdaptObjective::kLatency, AdaptObjective::kBalanced}) {
    const AdaptChoice c = choose_adapt(s, all_of(s, o, 150), query(), load);
    EXPECT_EQ(name(s, c), "k1") << enum_name(o);
    EXPECT_EQ(c.reason, "best_within_slo") << enum_name(o);
  }
  // 180 ms: k4-rerank1's p99 fits.
  AdaptChoice c = choose_adapt(s, all_of(s, AdaptObjective::kLatency, 180), query(), load);
  EXPECT_EQ(name(s, c), "k4-rerank1");
  // Less work queued ahead (the same number of runs, cheaper ones): 90 + 20 + 0.5 * 30 = 125 ms fits 150.
  load.work_ahead_tokens = 500;
  c = choose_adapt(s, all_of(s, AdaptObjective::kLatency, 150), query(), load);
  EXPECT_EQ(name(s, c), "k4-rerank1");
  EXPECT_NEAR(c.chosen().ttft_q_ms, 125.0, 1e-9);
  // 70 ms: neither's p99 fits (k1: 40 + 20 + 15 = 75) -> the fastest by the mean.
  c = choose_adapt(s, all_of(s, AdaptObjective::kLatency, 70), query(), load);
  EXPECT_EQ(name(s, c), "k1");
  EXPECT_EQ(c.reason, "fastest_over_slo");
}

TEST(AdaptTail, AProfileWithoutTheQuantileModelKeepsTheMean) {
  AdaptSpec s = tail_spec();
  s.profile.ttft_quantile = 0;
  for (auto& [n, m] : s.profile.models) m.has_ttft_q = false;
  LoadSignals load;
  load.ahead = 4;
  load.work_ahead_tokens = 2000;
  const AdaptEstimate e = estimate_candidate(s, 1, query(), load);
  EXPECT_DOUBLE_EQ(e.ttft_q_ms, e.ttft_ms);
  // 150 ms: the mean (85 ms) fits, as before the quantile model.
  const AdaptChoice c = choose_adapt(s, all_of(s, AdaptObjective::kLatency, 150), query(), load);
  EXPECT_EQ(name(s, c), "k4-rerank1");
}

TEST(AdaptTail, AnUpperQuantileIsNeverBelowTheMeanAndScalesWithHistory) {
  AdaptSpec s = tail_spec();
  s.profile.models["k1"].ttft_q = {0, 0, 0};  // a degenerate line
  LoadSignals load;
  load.ahead = 2;
  EXPECT_NEAR(estimate_candidate(s, 0, query(), load).ttft_q_ms, 30.0, 1e-9);  // the mean: 20 + 2 * 5
  QuerySignals q = query();
  q.history.ttft_scale = 1.5;
  EXPECT_NEAR(estimate_candidate(s, 1, q, load).ttft_q_ms, 1.5 * (90 + 10), 1e-9);
  q.history.ttft_scale = 0.5;  // never loosens
  EXPECT_NEAR(estimate_candidate(s, 1, q, load).ttft_q_ms, 100.0, 1e-9);
}

TEST(AdaptTail, QuantileModelRoundTripsAndBadKeysAreNamed) {
  AdaptProfile p = tail_spec().profile;
  p.models["k1"].ttft_q = {41.5, 2.25, -0.125};
  auto back = parse_adapt_profile(adapt_profile_toml(p), "q.profile");
  ASSERT_TRUE(back.ok()) << back.status().to_string() << "\n" << adapt_profile_toml(p);
  EXPECT_DOUBLE_EQ(back->ttft_quantile, 0.99);
  for (const auto& [n, m] : p.models) {
    ASSERT_TRUE(back->models.at(n).has_ttft_q) << n;
    for (size_t i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(back->models.at(n).ttft_q[i], m.ttft_q[i]) << n << " " << i;
  }
  const std::string model = "[candidates.k1]\nquality = [1, 2, 3, 4, 5]\nttft_idle_ms = 3\n";
  // Older profiles (no quantile keys) still parse, without a quantile model.
  auto old = parse_adapt_profile(model, "old.profile");
  ASSERT_TRUE(old.ok()) << old.status().to_string();
  EXPECT_EQ(old->ttft_quantile, 0);
  EXPECT_FALSE(old->models.at("k1").has_ttft_q);
  struct Bad {
    std::string text, needle;
  } bad[] = {
      {"ttft_quantile = 1.5\n" + model + "ttft_q_ms = [1, 2, 3]\n", "q.profile: ttft_quantile: must be in (0, 1), got 1.5"},
      {"ttft_quantile = 0\n" + model, "ttft_quantile: must be in (0, 1)"},
      {"ttft_quantile = \"p99\"\n" + model, "ttft_quantile: must be a number"},
      {model + "ttft_q_ms = [1, 2, 3]\n", "[candidates.k1].ttft_q_ms: needs the profile's ttft_quantile"},
      {"ttft_quantile = 0.99\n" + model, "[candidates.k1].ttft_q_ms: missing"},
      {"ttft_quantile = 0.99\n" + model + "ttft_q_ms = [1, 2]\n", "[candidates.k1].ttft_q_ms: must be an array of 3"},
      {"ttft_quantile = 0.99\n" + model + "ttft_q_ms = [1, \"x\", 2]\n", "[candidates.k1].ttft_q_ms: must hold numbers"},
      {"ttft_quantile = 0.99\n" + model + "ttft_q_ms = [1, 2, inf]\n", "[candidates.k1].ttft_q_ms: must hold finite"},
  };
  for (const auto& b : bad) {
    auto r = parse_adapt_profile(b.text, "q.profile");
    ASSERT_FALSE(r.ok()) << b.text;
    EXPECT_NE(r.status().message().find(b.needle), std::string::npos) << r.status().message();
  }
}

TEST(AdaptHistory, CountsRerankAgreementPerTenantAndPipeline) {
  AdaptHistory h;
  EXPECT_EQ(h.signals("a", "qa").runs, 0);
  EXPECT_DOUBLE_EQ(h.signals("a", "qa").ttft_scale, 1.0);
  for (int i = 0; i < 10; ++i) h.record_rerank("a", "qa", i < 7);
  h.record_rerank("b", "qa", false);
  h.record_rerank("a", "other", true);
  for (int i = 0; i < 5; ++i) h.record_ttft("a", "qa", 10, 0, 0);  // no quantile model: counted only
  AdaptHistorySignals s = h.signals("a", "qa");
  EXPECT_EQ(s.runs, 5);
  EXPECT_EQ(s.reranked, 10);
  EXPECT_DOUBLE_EQ(s.rerank_agreement, 0.7);
  EXPECT_DOUBLE_EQ(s.ttft_scale, 1.0);
  EXPECT_DOUBLE_EQ(h.signals("b", "qa").rerank_agreement, 0.0);
  EXPECT_DOUBLE_EQ(h.signals("a", "other").rerank_agreement, 1.0);
  // The key is the pair: tenant "a\0q" + pipeline "a" is not tenant "a" + pipeline "q\0a".
  EXPECT_EQ(h.signals("", "qa").reranked, 0);
  EXPECT_EQ(h.size(), 3u);
}

// The calibration against a naive replay of its rule: log_scale += step * (miss - (1 - q)),
// clamped to [0, log(max)].
TEST(AdaptHistory, TtftScaleFollowsTheExceedanceRule) {
  AdaptHistoryOptions o;
  o.scale_step = 0.1;
  o.max_scale = 3;
  o.exceed_alpha = 0.5;
  AdaptHistory h(o);
  const double q = 0.9;
  double ref = 0, rate = 0;
  const int pattern[] = {1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0};
  for (int miss : pattern) {
    h.record_ttft("t", "p", miss ? 200 : 50, 100, q);
    ref = std::clamp(ref + 0.1 * (miss - (1 - q)), 0.0, std::log(3.0));
    rate += 0.5 * (miss - rate);
    const AdaptHistorySignals s = h.signals("t", "p");
    EXPECT_NEAR(s.ttft_scale, std::exp(ref), 1e-12);
    EXPECT_NEAR(s.ttft_exceed_rate, rate, 1e-12);
  }
  EXPECT_NEAR(h.signals("t", "p").ttft_scale, 3.0 * std::exp(-0.01), 1e-9);  // at the cap, then one hit
  // At exactly 1 - q misses the scale stays where it is (q = 0.9: one miss in ten).
  AdaptHistory g(o);
  for (int i = 0; i < 10; ++i) g.record_ttft("t", "p", i == 0 ? 200 : 50, 100, q);
  const double after_ten = g.signals("t", "p").ttft_scale;
  for (int i = 0; i < 100; ++i) g.record_ttft("t", "p", i % 10 == 0 ? 200 : 50, 100, q);
  EXPECT_NEAR(g.signals("t", "p").ttft_scale, after_ten, 1e-9);
  // Off: scale_step 0.
  o.scale_step = 0;
  AdaptHistory off(o);
  for (int i = 0; i < 20; ++i) off.record_ttft("t", "p", 200, 100, q);
  EXPECT_DOUBLE_EQ(off.signals("t", "p").ttft_scale, 1.0);
  EXPECT_GT(off.signals("t", "p").ttft_exceed_rate, 0.9);
}

// A miss of the run's target counts though the TTFT was within its prediction (a run that had to
// take the fastest candidate over the target); no target, no such miss.
TEST(AdaptHistory, AMissedTargetCountsAsAnExceedance) {
  AdaptHistory h;
  h.record_ttft("t", "p", 300, 400, 0.99, 250);  // predicted 400, got 300: over the 250 ms target
  const AdaptHistorySignals s = h.signals("t", "p");
  EXPECT_NEAR(s.ttft_scale, std::exp(0.05 * 0.99), 1e-12);
  EXPECT_NEAR(s.ttft_exceed_rate, 0.02, 1e-12);
  AdaptHistory g;
  g.record_ttft("t", "p", 300, 400, 0.99);  // no target
  g.record_ttft("t", "p", 200, 400, 0.99, 250);
  EXPECT_DOUBLE_EQ(g.signals("t", "p").ttft_scale, 1.0);
  EXPECT_DOUBLE_EQ(g.signals("t", "p").ttft_exceed_rate, 0.0);
  // Bounded by max_scale (default 2) however long the misses go on.
  for (int i = 0; i < 1000; ++i) h.record_ttft("t", "p", 300, 100, 0.99, 250);
  EXPECT_NEAR(h.signals("t", "p").ttft_scale, 2.0, 1e-12);
}

TEST(AdaptHistory, KeepsAtMostMaxKeysDroppingTheLeastRecentlyUsed) {
  AdaptHistoryOptions o;
  o.max_keys = 3;
  AdaptHistory h(o);
  h.record_rerank("a", "p", true);
  h.record_rerank("b", "p", true);
  h.record_rerank("c", "p", true);
  h.record_rerank("a", "p", true);  // a is now the most recent
  h.record_rerank("d", "p", true);  // drops b
  EXPECT_EQ(h.size(), 3u);
  EXPECT_EQ(h.signals("b", "p").reranked, 0);
  EXPECT_EQ(h.signals("a", "p").reranked, 2);
  EXPECT_EQ(h.signals("c", "p").reranked, 1);
  EXPECT_EQ(h.signals("d", "p").reranked, 1);
}

TEST(AdaptHistory, ManyThreadsLoseNoRecord) {
  AdaptHistory h;
  constexpr int kThreads = 8, kEach = 2000;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&h, t] {
      for (int i = 0; i < kEach; ++i) {
        h.record_rerank("tenant", "qa", (i + t) % 4 == 0);
        h.record_ttft("tenant", "qa", 10, 20, 0.99);
        (void)h.signals("tenant", "qa");
      }
    });
  for (auto& t : ts) t.join();
  const AdaptHistorySignals s = h.signals("tenant", "qa");
  EXPECT_EQ(s.runs, kThreads * kEach);
  EXPECT_EQ(s.reranked, kThreads * kEach);
  EXPECT_DOUBLE_EQ(s.rerank_agreement, 0.25);
  EXPECT_DOUBLE_EQ(s.ttft_scale, 1.0);  // never a miss: stays at the floor
}

}  // namespace
}  // namespace ragd::pipelines
