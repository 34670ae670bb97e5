// RunState: checkpoints and rollback of sampler (RNG), stream decoder and stop state, and the
// emitter that only releases committed tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "extractive.h"
#include "ragd/engine/tokenizer.h"
#include "tiny_bpe.h"
#include "run_state.h"

namespace ragd::pipelines {
namespace {

std::unique_ptr<engine::Tokenizer> tokenizer() { return testing::tiny_bpe_tokenizer(); }

// Seeded pseudo-random logits that depend on the whole history (like a model would), over the
// byte tokens only so every token decodes to text.
std::vector<float> logits_for(const std::vector<int32_t>& history, uint64_t salt = 0) {
  uint64_t h = 1469598103934665603ull ^ salt;
  for (int32_t t : history) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
  std::mt19937_64 rng(h);
  std::normal_distribution<float> d(0.f, 2.f);
  std::vector<float> l(512, -1e9f);
  for (int i = 'a'; i <= 'z'; ++i) l[i] = d(rng);
  l[' '] = d(rng);
  return l;
}

struct Client {
  std::vector<RunEvent> seen;
  EventSink sink() {
    return [this](const RunEvent& ev) {
      seen.push_back(ev);
      return true;
    };
  }
};

engine::SamplingParams sampling() {
  engine::SamplingParams p;
  p.temperature = 0.9f;  // sampled, so the RNG state matters
  p.top_p = 0.95f;
  p.seed = 42;
  p.stop = {"zzzq"};  // a stop string that keeps the matcher's text buffer in use
  return p;
}

void generate(RunState& s, int n, uint64_t salt = 0) {
  for (int i = 0; i < n && s.finish_reason().empty(); ++i) s.advance(logits_for(s.tokens(), salt));
}

TEST(RunState, CheckpointRestoreRegeneratesIdenticalCommittedOutput) {
  auto tok = tokenizer();
  const std::vector<int32_t> prompt = {'t', 'h', 'e', ' '};
  // Reference: one uninterrupted run of 11 tokens.
  RunState ref(prompt, sampling(), *tok, {}, 11);
  Client ref_client;
  generate(ref, 11);
  ASSERT_TRUE(ref.release(ref_client.sink()));
  ASSERT_EQ(ref_client.seen.size(), 11u);
  EXPECT_EQ(ref.finish_reason(), "length");

  RunState s(prompt, sampling(), *tok, {}, 11);
  s.set_auto_commit(false);
  Client client;
  generate(s, 5);
  s.commit();
  ASSERT_TRUE(s.release(client.sink()));
  ASSERT_EQ(client.seen.size(), 5u);
  const RunState::Checkpoint cp = s.checkpoint();
  generate(s, 6);  // tentative: reaches max_new_tokens
  EXPECT_EQ(s.finish_reason(), "length");
  ASSERT_TRUE(s.release(client.sink()));
  EXPECT_EQ(client.seen.size(), 5u) << "uncommitted tokens were released";
  const std::vector<int32_t> tentative = s.tokens();
  s.restore(cp);
  EXPECT_EQ(s.tokens().size(), prompt.size() + 5);
  EXPECT_EQ(s.finish_reason(), "");
  generate(s, 6);
  EXPECT_EQ(s.tokens(), tentative) << "sampler / RNG state not restored";
  s.commit();
  ASSERT_TRUE(s.release(client.sink()));
  ASSERT_EQ(client.seen.size(), 11u);
  for (size_t i = 0; i < 11; ++i) {
    EXPECT_EQ(client.seen[i].index, static_cast<int>(i));
    EXPECT_EQ(client.seen[i].token_id, ref_client.seen[i].token_id) << i;
    EXPECT_EQ(client.seen[i].text, ref_client.seen[i].text) << i;
    EXPECT_FLOAT_EQ(client.seen[i].logprob, ref_client.seen[i].logprob) << i;
  }
  EXPECT_EQ(s.tokens(), ref.tokens());
}

TEST(RunState, RolledBackTokensAreNeverSeen) {
  auto tok = tokenizer();
  RunState s({'a', ' '}, sampling(), *tok, {}, 40);
  s.set_auto_commit(false);
  Client client;
  generate(s, 3);
  s.commit();
  const RunState::Checkpoint cp = s.checkpoint();
  generate(s, 8, /*salt=*/1);  // a guess that turns out wrong
  const std::vector<int32_t> wrong(s.tokens().begin() + 5, s.tokens().end());
  s.restore(cp);
  generate(s, 8, /*salt=*/2);  // the verified continuation
  s.commit();
  ASSERT_TRUE(s.release(client.sink()));
  ASSERT_EQ(client.seen.size(), 11u);
  std::vector<int32_t> seen;
  for (size_t i = 3; i < client.seen.size(); ++i) seen.push_back(client.seen[i].token_id);
  EXPECT_EQ(seen, std::vector<int32_t>(s.tokens().begin() + 5, s.tokens().end()));
  EXPECT_NE(seen, wrong);  // salts give different continuations
  // Restoring behind the commit point is a broken invariant.
  EXPECT_DEATH(s.restore(cp), "committed");
}

TEST(RunState, AutoCommitReleasesEveryTokenAndStopStringsEndTheRun) {
  auto tok = tokenizer();
  engine::SamplingParams p;
  p.stop = {" "};
  RunState s({'x'}, p, *tok, {}, 50);
  Client client;
  // Greedy over logits that prefer 'q', then ' ': "q" then stop.
  std::vector<float> l(512, -1e9f);
  l['q'] = 1;
  s.advance(l);
  ASSERT_TRUE(s.release(client.sink()));
  ASSERT_EQ(client.seen.size(), 1u);
  EXPECT_EQ(client.seen[0].text, "q");
  l[' '] = 2;
  s.advance(l);
  EXPECT_EQ(s.finish_reason(), "stop");
  ASSERT_TRUE(s.release(client.sink()));
  ASSERT_EQ(client.seen.size(), 2u);
  EXPECT_EQ(client.seen[1].text, "");  // the stop string is not sent
}

// top_logprobs: every token event carries the n likeliest tokens of its step, best first (ties:
// lower id), with their log-softmax under the raw logits, against a double-precision reference;
// such a run never takes the greedy-pick shortcut.
TEST(RunState, TopLogprobsAreTheLikeliestTokensOfTheRawLogits) {
  auto tok = tokenizer();
  RunState s({'a', 'b'}, sampling(), *tok, {}, 9);
  s.set_top_logprobs(5);
  EXPECT_FALSE(s.greedy_pick_suffices());
  Client client;
  for (int step = 0; step < 9 && s.finish_reason().empty(); ++step) {
    std::vector<float> l = logits_for(s.tokens());
    l['c'] = l['d'];  // a tie: 'c' (the lower id) ranks first of the two
    double m = -1e300, z = 0;
    for (float x : l) m = std::max(m, static_cast<double>(x));
    for (float x : l) z += std::exp(static_cast<double>(x) - m);
    std::vector<int32_t> order(l.size());
    for (size_t i = 0; i < l.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
    s.advance(l);
    ASSERT_TRUE(s.release(client.sink()));
    const RunEvent& ev = client.seen.back();
    ASSERT_EQ(ev.top_logprobs.size(), 5u);
    for (size_t k = 0; k < 5; ++k) {
      EXPECT_EQ(ev.top_logprobs[k].token_id, order[k]) << "step " << step << " rank " << k;
      EXPECT_NEAR(ev.top_logprobs[k].logprob, static_cast<double>(l[order[k]]) - m - std::log(z), 1e-4);
      EXPECT_EQ(ev.top_logprobs[k].bytes, tok->token_bytes(order[k]));
    }
  }
  RunState plain({'a'}, engine::SamplingParams{}, *tok, {}, 2);
  EXPECT_TRUE(plain.greedy_pick_suffices());
  plain.advance(logits_for(plain.tokens()));
  Client c2;
  ASSERT_TRUE(plain.release(c2.sink()));
  EXPECT_TRUE(c2.seen.back().top_logprobs.empty());
}

// Extractive answers: the naive reference is "is the answer so far a run of the prompt, and is the
// next token one that follows such a run".
bool occurs(const std::vector<int32_t>& hay, const std::vector<int32_t>& needle) {
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end()) != hay.end();
}

TEST(Extractive, MaskAllowsExactlyTheContinuationsOfPromptRuns) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const int vocab = 13;
    std::vector<int32_t> prompt(1 + rng() % 40);
    for (auto& t : prompt) t = static_cast<int32_t>(rng() % 9);  // ids 9..12 never in the prompt
    // The answer so far: a run of the prompt (or, every 7th trial, something that is not).
    std::vector<int32_t> gen;
    if (trial % 7 == 6) {
      gen = {12};
    } else {
      const size_t a = rng() % prompt.size(), len = rng() % std::min<size_t>(4, prompt.size() - a + 1);
      gen.assign(prompt.begin() + a, prompt.begin() + a + len);
    }
    const std::vector<int32_t> stop = {11};
    std::vector<float> logits(vocab, 1.0f);
    mask_to_prompt_spans(prompt, gen, stop, logits);
    for (int v = 0; v < vocab; ++v) {
      std::vector<int32_t> next = gen;
      next.push_back(v);
      const bool continues = occurs(prompt, next);
      const bool stop_ok = v == 11 && (!gen.empty() || !occurs(prompt, {}));
      const bool nothing_else = !occurs(prompt, gen) && v == 11;  // stuck: only a stop is left
      const bool want = continues || stop_ok || nothing_else;
      EXPECT_EQ(std::isfinite(logits[v]), want) << "trial " << trial << " token " << v << " answer size " << gen.size();
    }
  }
}

TEST(Extractive, GreedyRunCopiesAPromptSpanAndStops) {
  auto tok = tokenizer();
  engine::SamplingParams p;  // greedy
  p.max_tokens = 12;
  const std::vector<int32_t> prompt = {'t', 'h', 'e', ' ', 'c', 'a', 't', ' ', 's', 'a', 't'};
  for (const bool extractive : {false, true}) {
    RunState s(prompt, p, *tok, {0}, 12);
    s.set_extractive(extractive);
    for (int i = 0; i < 12 && s.finish_reason().empty(); ++i) {
      std::vector<float> l = logits_for(s.tokens(), 3);
      l[0] = -5.0f;  // the stop id: allowed, never preferred
      s.advance(l);
    }
    std::vector<int32_t> answer(s.generated_tokens().begin(), s.generated_tokens().end());
    if (!answer.empty() && answer.back() == 0) answer.pop_back();
    if (extractive) {
      EXPECT_TRUE(occurs(prompt, answer)) << "the extractive answer is a run of the prompt";
      EXPECT_EQ(s.finish_reason(), "stop");  // the prompt runs out of continuations before max_tokens
    } else {
      EXPECT_FALSE(occurs(prompt, answer)) << "the unmasked logits pick tokens the prompt lacks (the test can fail)";
    }
  }
}

}  // namespace
}  // namespace ragd::pipelines
