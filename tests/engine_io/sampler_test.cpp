// Sampler: greedy, top-k = 1, seeded reproducibility, empirical frequencies vs softmax, nucleus and
// min-p support, penalties on a hand-computed case, logprob == log_softmax (double reference).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <numeric>
#include <set>
#include <span>

#include "ragd/engine/sampler.h"

using namespace ragd::engine;
using ::testing::HasSubstr;

namespace {

std::vector<float> random_logits(int v, uint64_t seed, float scale = 2.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> l(v);
  for (auto& x : l) x = nd(rng);
  return l;
}

std::vector<double> softmax_ref(const std::vector<float>& l, double t) {
  double mx = -1e300;
  for (float x : l) mx = std::max(mx, x / t);
  std::vector<double> p(l.size());
  double s = 0;
  for (size_t i = 0; i < l.size(); ++i) s += p[i] = std::exp(l[i] / t - mx);
  for (auto& x : p) x /= s;
  return p;
}

}  // namespace

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
  auto l = random_logits(129, 1);
  const int want = static_cast<int>(std::max_element(l.begin(), l.end()) - l.begin());
  Sampler s(SamplingParams{});
  EXPECT_EQ(s.sample(l, {}).token, want);
  std::vector<float> ties = {0.5f, 3.0f, -1.0f, 3.0f, 3.0f};
  EXPECT_EQ(s.sample(ties, {}).token, 1);
}

TEST(Sampler, TopK1EqualsGreedy) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    auto l = random_logits(33, seed);
    SamplingParams p;
    p.temperature = 1.3f;
    p.top_k = 1;
    p.seed = seed;
    Sampler s(p), g(SamplingParams{});
    EXPECT_EQ(s.sample(l, {}).token, g.sample(l, {}).token);
  }
}

TEST(Sampler, SeededReproducibility) {
  auto l = random_logits(129, 2, 1.0f);
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 1234;
  Sampler a(p), b(p);
  p.seed = 1235;
  Sampler c(p);
  std::vector<int32_t> ta, tb, tc;
  for (int i = 0; i < 200; ++i) {
    ta.push_back(a.sample(l, {}).token);
    tb.push_back(b.sample(l, {}).token);
    tc.push_back(c.sample(l, {}).token);
  }
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
}

TEST(Sampler, TemperatureFrequenciesMatchSoftmax) {
  // Pearson chi-square over 20k draws, 6 degrees of freedom: the 99.99th percentile is 27.9.
  const std::vector<float> l = {1.0f, 0.2f, -0.5f, 1.7f, 0.0f, -1.2f, 0.9f};
  for (float t : {0.7f, 1.0f, 1.8f}) {
    SamplingParams p;
    p.temperature = t;
    p.seed = 99;
    Sampler s(p);
    std::vector<int> counts(l.size());
    const int n = 20000;
    for (int i = 0; i < n; ++i) ++counts[s.sample(l, {}).token];
    auto want = softmax_ref(l, t);
    double chi2 = 0;
    for (size_t i = 0; i < l.size(); ++i) {
      const double e = want[i] * n;
      chi2 += (counts[i] - e) * (counts[i] - e) / e;
    }
    EXPECT_LT(chi2, 27.9) << "temperature " << t;
  }
}

TEST(Sampler, TopPNeverLeavesTheNucleus) {
  auto l = random_logits(33, 5, 1.5f);
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.6f;
  p.seed = 7;
  // Reference nucleus: smallest set of most likely tokens whose mass reaches top_p.
  auto probs = softmax_ref(l, 1.0);
  std::vector<int> order(l.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return probs[a] > probs[b]; });
  std::set<int> nucleus;
  double cum = 0;
  for (int i : order) {
    nucleus.insert(i);
    cum += probs[i];
    if (cum >= p.top_p) break;
  }
  ASSERT_GT(nucleus.size(), 1u);
  Sampler s(p);
  std::set<int> seen;
  for (int i = 0; i < 5000; ++i) {
    int tok = s.sample(l, {}).token;
    ASSERT_TRUE(nucleus.count(tok)) << tok;
    seen.insert(tok);
  }
  EXPECT_EQ(seen, nucleus);
}

// The sampler against the plain algorithm it must equal (when a filter is on, every candidate sorted
// by logit descending, ids ascending on ties, else ids in order; fp64 weights; top-k, then top-p
// over the fp64 total, then min-p; one draw from the same seeded generator): the same token for every seed, on a large vocabulary with a
// peaked (LM-like) and a flat distribution, with ties, and with and without penalties. The sampler
// reaches top-p through a floor on the logits instead of a full sort; it may differ only where the
// cumulative mass lands within ~1e-7 of top_p, which these cases do not.
TEST(Sampler, EqualsTheFullSortReferenceOnALargeVocabulary) {
  const int v = 50021;
  std::mt19937_64 gen(11);
  std::normal_distribution<float> nd(0.f, 3.f);
  std::vector<float> flat(v), peaked(v);
  for (auto& x : flat) x = nd(gen);
  for (int i = 0; i < v; ++i) peaked[i] = nd(gen) - 12.0f;
  for (int i = 0; i < 60; ++i) peaked[(i * 7919) % v] = 6.0f - 0.25f * i;
  peaked[17] = peaked[(3 * 7919) % v];  // a tie inside the nucleus
  const std::vector<int32_t> history = {5, 5, 7919, 17, 40000};
  int compared = 0;
  for (const auto* l : {&peaked, &flat}) {
    for (float top_p : {1.0f, 0.95f, 0.9f, 0.5f}) {
      for (int top_k : {0, 40}) {
        for (float min_p : {0.0f, 0.05f}) {
          for (bool penalties : {false, true}) {
            SamplingParams p;
            p.temperature = 0.8f;
            p.top_p = top_p;
            p.top_k = top_k;
            p.min_p = min_p;
            p.repetition_penalty = penalties ? 1.2f : 1.0f;
            p.seed = static_cast<uint64_t>(compared) * 977 + 3;
            Sampler s(p);
            std::mt19937_64 ref_rng(p.seed);
            for (int draw = 0; draw < 6; ++draw, ++compared) {
              ASSERT_EQ(s.sample(*l, history).token, sample_reference(*l, history, p, ref_rng).token)
                  << "top_p " << top_p << " top_k " << top_k << " min_p " << min_p << " draw " << draw;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(compared, 2 * 4 * 2 * 2 * 2 * 6);
}

TEST(Sampler, MinPNeverPicksBelowThreshold) {
  auto l = random_logits(129, 6, 1.5f);
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.2f;
  p.seed = 8;
  auto probs = softmax_ref(l, 1.0);
  const double pmax = *std::max_element(probs.begin(), probs.end());
  Sampler s(p);
  for (int i = 0; i < 5000; ++i) {
    int tok = s.sample(l, {}).token;
    ASSERT_GE(probs[tok], p.min_p * pmax * (1 - 1e-6));
  }
}

TEST(Sampler, TopKRestrictsToKLargest) {
  auto l = random_logits(129, 9);
  SamplingParams p;
  p.temperature = 2.0f;
  p.top_k = 5;
  p.seed = 3;
  std::vector<float> sorted = l;
  std::sort(sorted.rbegin(), sorted.rend());
  Sampler s(p);
  std::set<int> seen;
  for (int i = 0; i < 3000; ++i) {
    int tok = s.sample(l, {}).token;
    ASSERT_GE(l[tok], sorted[4]);
    seen.insert(tok);
  }
  EXPECT_EQ(seen.size(), 5u);
}

TEST(Sampler, PenaltiesHandComputed) {
  std::vector<float> l = {2.0f, -1.0f, 0.5f, 3.0f, 1.0f};
  const std::vector<int32_t> hist = {0, 1, 1, 3, 3, 3, 77};  // 77 is out of range: ignored
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  apply_penalties(l, hist, p);
  // token 0: 2/2 - 0.5 - 0.25 = 0.25; token 1: -1*2 - 0.5 - 0.5 = -3; token 3: 3/2 - 0.5 - 0.75 = 0.25
  EXPECT_FLOAT_EQ(l[0], 0.25f);
  EXPECT_FLOAT_EQ(l[1], -3.0f);
  EXPECT_FLOAT_EQ(l[2], 0.5f);
  EXPECT_FLOAT_EQ(l[3], 0.25f);
  EXPECT_FLOAT_EQ(l[4], 1.0f);
  // Greedy after penalties picks token 4 (it was 4th before); the logprob is under the raw logits.
  const std::vector<float> raw = {2.0f, -1.0f, 0.5f, 3.0f, 1.0f};
  Sampler s(p);
  auto r = s.sample(raw, hist);
  EXPECT_EQ(r.token, 4);
  EXPECT_NEAR(r.logprob, std::log(softmax_ref(raw, 1.0)[4]), 1e-6);
}

TEST(Sampler, LogprobIsRawLogSoftmax) {
  auto l = random_logits(129, 10, 3.0f);
  SamplingParams p;
  p.temperature = 0.5f;
  p.top_k = 10;
  p.top_p = 0.9f;
  p.seed = 4;
  auto ref = softmax_ref(l, 1.0);
  Sampler s(p);
  for (int i = 0; i < 100; ++i) {
    auto r = s.sample(l, {});
    EXPECT_NEAR(r.logprob, std::log(ref[r.token]), 1e-5);
  }
}

TEST(SamplingParams, Validate) {
  EXPECT_TRUE(SamplingParams{}.validate().ok());
  auto check = [](auto mutate, const char* field) {
    SamplingParams p;
    mutate(p);
    auto st = p.validate();
    EXPECT_FALSE(st.ok()) << field;
    EXPECT_THAT(st.message(), HasSubstr(std::string("'") + field + "'"));
  };
  check([](SamplingParams& p) { p.temperature = -0.1f; }, "temperature");
  check([](SamplingParams& p) { p.top_p = 0.0f; }, "top_p");
  check([](SamplingParams& p) { p.top_p = 1.5f; }, "top_p");
  check([](SamplingParams& p) { p.min_p = -0.5f; }, "min_p");
  check([](SamplingParams& p) { p.top_k = -1; }, "top_k");
  check([](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "repetition_penalty");
  check([](SamplingParams& p) { p.presence_penalty = 3.0f; }, "presence_penalty");
  check([](SamplingParams& p) { p.max_tokens = 0; }, "max_tokens");
  check([](SamplingParams& p) { p.stop = {""}; }, "stop");
}
