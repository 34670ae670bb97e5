// The adaptive-configuration policy (adapt_policy.h) on constructed signals and loads: which
// candidate each objective picks, how load and free KV blocks move the choice, the signals of a
// retrieval result, and the fitted profile's file format.
#include <gtest/gtest.h>

#include <cmath>

#include "ragd/pipelines/adapt_policy.h"

namespace ragd::pipelines {
namespace {

// Two candidates as on the QA set: one passage (cheap; right when the retriever is confident) and
// four passages reranked down to one (about four times the work; right almost always).
AdaptSpec qa_spec() {
  AdaptSpec s;
  AdaptCandidate one;
  one.name = "k1";
  one.top_k = 1;
  AdaptCandidate rr;
  rr.name = "k4-rerank1";
  rr.top_k = 4;
  rr.rerank = 1;
  s.candidates = {one, rr};
  AdaptModel m1;  // P(right) rises steeply with the score margin
  m1.quality = {-1.0, 40.0, 0.0, 0.0, 0.0};
  m1.ttft_idle_ms = 30;
  m1.ttft_per_run_ms = 10;
  m1.fit_accuracy = 0.86;
  AdaptModel m4;  // right almost always, whatever the margin
  m4.quality = {3.5, 0.0, 0.0, 0.0, 0.0};
  m4.ttft_idle_ms = 60;
  m4.ttft_per_run_ms = 25;
  m4.fit_accuracy = 0.97;
  s.profile.models = {{"k1", m1}, {"k4-rerank1", m4}};
  return s;
}

AdaptGoal goal(const AdaptSpec& s, AdaptObjective o, double slo = 0) {
  AdaptGoal g;
  g.objective = o;
  g.slo_ttft_ms = slo;
  g.quality_tolerance = s.quality_tolerance;
  for (size_t i = 0; i < s.candidates.size(); ++i) g.allowed.push_back(i);
  return g;
}

QuerySignals margin(double m) {
  QuerySignals q;
  q.retrieved = true;
  q.score_margin = m;
  q.question_tokens = 12;
  q.passage_tokens = 60;
  return q;
}

const std::string& chosen(const AdaptSpec& s, const AdaptChoice& c) { return s.candidates[c.index].name; }

TEST(AdaptPolicy, BalancedTakesTheCheapCandidateOnlyWhenTheRetrieverIsConfident) {
  const AdaptSpec s = qa_spec();
  const LoadSignals idle;
  // Margin 0.11: P(k1) = sigmoid(3.4) ~ 0.968 is within 0.02 of P(k4-rerank1) = sigmoid(3.5)
  // ~ 0.971, and k1 is faster.
  AdaptChoice c = choose_adapt(s, goal(s, AdaptObjective::kBalanced), margin(0.11), idle);
  EXPECT_EQ(chosen(s, c), "k1");
  EXPECT_EQ(c.reason, "cheapest_near_best");
  // Margin 0.2: P(k1) = sigmoid(7) ~ 0.999, the best outright.
  c = choose_adapt(s, goal(s, AdaptObjective::kBalanced), margin(0.2), idle);
  EXPECT_EQ(chosen(s, c), "k1");
  EXPECT_EQ(c.reason, "best_quality");
  // Margin 0.09: P(k1) = sigmoid(2.6) ~ 0.931, not within 0.02.
  c = choose_adapt(s, goal(s, AdaptObjective::kBalanced), margin(0.09), idle);
  EXPECT_EQ(chosen(s, c), "k4-rerank1");
  // Margin 0: P(k1) = sigmoid(-1) ~ 0.27: reranking.
  c = choose_adapt(s, goal(s, AdaptObjective::kBalanced), margin(0.0), idle);
  EXPECT_EQ(chosen(s, c), "k4-rerank1");
  EXPECT_EQ(c.reason, "best_quality");
  ASSERT_EQ(c.estimates.size(), 2u);
  EXPECT_NEAR(c.estimates[0].quality, 1.0 / (1.0 + std::exp(1.0)), 1e-9);
  EXPECT_NEAR(c.estimates[1].ttft_ms, 60.0, 1e-9);
}

TEST(AdaptPolicy, QualityObjectiveIgnoresLoad) {
  const AdaptSpec s = qa_spec();
  LoadSignals busy;
  busy.ahead = 40;
  const AdaptChoice c = choose_adapt(s, goal(s, AdaptObjective::kQuality, 100), margin(0.05), busy);
  EXPECT_EQ(chosen(s, c), "k4-rerank1");
  EXPECT_EQ(c.reason, "best_quality");
}

TEST(AdaptPolicy, LoadTurnsTheSloIntoTheCheaperCandidate) {
  const AdaptSpec s = qa_spec();
  const AdaptGoal g = goal(s, AdaptObjective::kBalanced, 150);
  LoadSignals load;
  // 3 runs ahead: k4-rerank1 predicted 60 + 3 * 25 = 135 ms <= 150: it answers the unsure question.
  load.ahead = 3;
  AdaptChoice c = choose_adapt(s, g, margin(0.0), load);
  EXPECT_EQ(chosen(s, c), "k4-rerank1");
  EXPECT_NEAR(c.chosen().ttft_ms, 135.0, 1e-9);
  // 6 ahead: 210 ms > 150, k1 60 + 60 = 90 ms fits: the best one within the SLO.
  load.ahead = 6;
  c = choose_adapt(s, g, margin(0.0), load);
  EXPECT_EQ(chosen(s, c), "k1");
  EXPECT_EQ(c.reason, "best_within_slo");
  // 20 ahead: neither fits (k1 230 ms): the fastest.
  load.ahead = 20;
  c = choose_adapt(s, g, margin(0.0), load);
  EXPECT_EQ(chosen(s, c), "k1");
  EXPECT_EQ(c.reason, "fastest_over_slo");
}

TEST(AdaptPolicy, LatencyObjectiveTakesTheBestCandidateWithinTheSlo) {
  const AdaptSpec s = qa_spec();
  LoadSignals idle;
  AdaptChoice c = choose_adapt(s, goal(s, AdaptObjective::kLatency, 100), margin(0.2), idle);
  // Both fit (30 and 60 ms); P(k1) = sigmoid(7) ~ 0.9991 > P(k4-rerank1) = sigmoid(3.5) ~ 0.9707.
  EXPECT_EQ(chosen(s, c), "k1");
  EXPECT_EQ(c.reason, "best_within_slo");
  c = choose_adapt(s, goal(s, AdaptObjective::kLatency, 100), margin(0.0), idle);
  EXPECT_EQ(chosen(s, c), "k4-rerank1");
  c = choose_adapt(s, goal(s, AdaptObjective::kLatency, 40), margin(0.0), idle);
  EXPECT_EQ(chosen(s, c), "k1");  // only k1 is predicted within 40 ms
}

TEST(AdaptPolicy, APromptThatDoesNotFitTheFreeKvBlocksWaitsForRunningOnes) {
  AdaptSpec s = qa_spec();
  s.candidates[1].rerank = 0;  // k4 without reranking: four passages in the prompt
  s.candidates[1].name = "k4";
  s.profile.models["k4"] = s.profile.models["k4-rerank1"];
  s.profile.models.erase("k4-rerank1");
  LoadSignals load;
  load.running = 4;
  load.block_size = 16;
  // Prompt estimate: 32 + 12 + 4 * 60 = 284 tokens -> 19 blocks (18 + 1); k1: 104 -> 8 blocks.
  load.free_blocks = 19;
  AdaptEstimate e = estimate_candidate(s, 1, margin(0.0), load);
  EXPECT_TRUE(e.fits_kv);
  EXPECT_NEAR(e.ttft_ms, 60.0, 1e-9);
  load.free_blocks = 18;
  e = estimate_candidate(s, 1, margin(0.0), load);
  EXPECT_FALSE(e.fits_kv);
  EXPECT_NEAR(e.ttft_ms, 60.0 + 4 * 25.0, 1e-9);
  EXPECT_TRUE(estimate_candidate(s, 0, margin(0.0), load).fits_kv);
  // A step budget below the prompt: prefilled over ceil(284 / 100) = 3 steps, 2 extra.
  load.free_blocks = -1;
  load.max_batch_tokens = 100;
  e = estimate_candidate(s, 1, margin(0.0), load);
  EXPECT_NEAR(e.ttft_ms, 60.0 + 2 * 25.0, 1e-9);
}

TEST(AdaptPolicy, ForcedAndNarrowedCandidates) {
  const AdaptSpec s = qa_spec();
  AdaptGoal g = goal(s, AdaptObjective::kBalanced);
  g.allowed = {1};
  g.forced = true;
  AdaptChoice c = choose_adapt(s, g, margin(0.5), LoadSignals{});
  EXPECT_EQ(chosen(s, c), "k4-rerank1");
  EXPECT_EQ(c.reason, "forced");
  ASSERT_EQ(c.estimates.size(), 1u);
  g.forced = false;
  g.allowed = {0};
  c = choose_adapt(s, g, margin(0.0), LoadSignals{});
  EXPECT_EQ(chosen(s, c), "k1");
}

TEST(AdaptPolicy, PriorsStandInForAnUnfittedCandidate) {
  AdaptSpec s = qa_spec();
  s.profile.models.clear();
  s.candidates[0].prior_quality = 0.6;
  s.candidates[1].prior_quality = 0.95;
  bool fitted = true;
  const AdaptModel m = adapt_model(s, 1, &fitted);
  EXPECT_FALSE(fitted);
  EXPECT_NEAR(m.ttft_idle_ms, 10.0 * (1 + 4), 1e-9);  // one passage prefilled + four scored
  AdaptChoice c = choose_adapt(s, goal(s, AdaptObjective::kBalanced), margin(0.3), LoadSignals{});
  EXPECT_EQ(chosen(s, c), "k4-rerank1");  // no margin weight in a prior: 0.95 vs 0.6
  EXPECT_NEAR(c.estimates[0].quality, 0.6, 1e-9);
  // Without retrieval signals (iterative pipelines) a fitted model's mean accuracy stands in.
  s = qa_spec();
  QuerySignals none;
  none.question_tokens = 10;
  EXPECT_NEAR(estimate_candidate(s, 0, none, LoadSignals{}).quality, 0.86, 1e-12);
}

TEST(AdaptSignals, MarginAgreementAndLexicalMargin) {
  const std::vector<int32_t> question = {1, 2, 3, 4};
  // Retriever order: p0 holds 2 of 4 question tokens, p1 all 4, p2 one.
  const std::vector<std::vector<int32_t>> passages = {{1, 2, 9, 9, 9, 9}, {4, 3, 2, 1, 8, 8}, {1, 7}};
  const float scores[] = {0.8f, 0.5f, 0.4f};
  QuerySignals q = query_signals(scores, passages, question);
  EXPECT_TRUE(q.retrieved);
  EXPECT_NEAR(q.score_margin, 0.3, 1e-6);
  EXPECT_EQ(q.lexical_agreement, 0.0);  // the lexical best is p1, not the retriever's p0
  EXPECT_NEAR(q.lexical_margin, 1.0 - 0.5, 1e-12);
  EXPECT_EQ(q.question_tokens, 4);
  EXPECT_NEAR(q.passage_tokens, 14.0 / 3.0, 1e-12);
  // Swap the first two: now they agree.
  const std::vector<std::vector<int32_t>> agree = {passages[1], passages[0], passages[2]};
  q = query_signals(scores, agree, question);
  EXPECT_EQ(q.lexical_agreement, 1.0);
  // One passage: no margins.
  q = query_signals(std::span<const float>(scores, 1), std::span(agree).first(1), question);
  EXPECT_EQ(q.score_margin, 0.0);
  EXPECT_EQ(q.lexical_margin, 0.0);
}

TEST(AdaptProfile, RoundTripsThroughItsFile) {
  AdaptProfile p = qa_spec().profile;
  p.source = "fit \"set\" 400";
  p.models["k1"].fit_samples = 400;
  p.models["k1"].quality[3] = -0.125;
  const std::string text = adapt_profile_toml(p);
  auto back = parse_adapt_profile(text, "x.profile");
  ASSERT_TRUE(back.ok()) << back.status().to_string() << "\n" << text;
  EXPECT_EQ(back->source, p.source);
  ASSERT_EQ(back->models.size(), 2u);
  for (const auto& [name, m] : p.models) {
    const AdaptModel& b = back->models.at(name);
    for (size_t i = 0; i < m.quality.size(); ++i) EXPECT_DOUBLE_EQ(b.quality[i], m.quality[i]) << name << " " << i;
    EXPECT_DOUBLE_EQ(b.ttft_idle_ms, m.ttft_idle_ms);
    EXPECT_DOUBLE_EQ(b.ttft_per_run_ms, m.ttft_per_run_ms);
    EXPECT_EQ(b.fit_samples, m.fit_samples);
    EXPECT_DOUBLE_EQ(b.fit_accuracy, m.fit_accuracy);
  }
}

TEST(AdaptProfile, MalformedFilesAreRefusedNamingTheKey) {
  auto r = parse_adapt_profile("[candidates.k1]\nquality = [1, 2]\nttft_idle_ms = 3\n", "p.profile");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("p.profile: [candidates.k1].quality"), std::string::npos) << r.status().message();
  r = parse_adapt_profile("[candidates.k1]\nquality = [1, 2, 3, 4, 5]\n", "p.profile");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ttft_idle_ms"), std::string::npos) << r.status().message();
  r = parse_adapt_profile("[candidates.k1]\nquality = [1, 2, 3, 4, 5]\nttft_idle_ms = 3\nspeed = 2\n", "p.profile");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown key 'speed'"), std::string::npos) << r.status().message();
  r = parse_adapt_profile("[candidates.k1]\nquality = [1, 2, 3, 4, 5]\nttft_idle_ms = -3\n", "p.profile");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ttft_idle_ms"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace ragd::pipelines
