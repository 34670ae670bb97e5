// How far approximate KV reuse (CacheBlend / EPIC, kv_blend.h) moves a model's outputs from a full
// prefill of the same prompt: the reuse self-check's measurement and the fidelity benchmark's.
//
// Per case, the prompt [head][doc 1]..[doc n][tail] runs twice on the model: full prefill, and
// head prefill + each document's chunk KV computed after the head, placed in order, repaired by
// the mode, then the tail. Both then decode greedily.
//   max_abs_logit     max |Δ| over the first generated token's logits (max over cases)
//   first_token_kl    KL(full || blended) of the first token's distribution (mean over cases)
//   greedy_agreement  tokens generated before the first disagreement / greedy_tokens (mean)
//   first_token_match fraction of cases whose first greedy token is the same
// Naive concatenation is cacheblend with recompute_ratio 0.
//
// Thread-safety: runs on the thread that owns the model and its pool (scheduler thread, or a tool
// with its own model). Needs pool room for two copies of the longest case.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/engine/model.h"
#include "ragd/pipelines/executor.h"

namespace ragd::pipelines {

struct BlendCase {
  std::vector<int32_t> head;               // BOS, system prompt, context header
  std::vector<std::vector<int32_t>> docs;  // documents (with their separators), in prompt order
  std::vector<int32_t> tail;               // question and chat template
};

struct Fidelity {
  int cases = 0;
  double max_abs_logit = 0;
  double first_token_kl = 0;
  double greedy_agreement = 0;
  double first_token_match = 0;
};

// The reuse self-check: before an approximate mode (with given parameters) is used with a model,
// its fidelity is measured on the first prompt that would place a displaced document (its
// documents in two new orders). Below the thresholds, runs of that mode and parameter serve exact
// reuse with a logged, user-visible reason (usage.reuse_note). The verdict is kept for the model's
// lifetime in the executor.
struct BlendCheckOptions {
  bool enabled = true;
  double min_greedy_agreement = 0.5;  // mean fraction of greedy tokens before the first disagreement
  double max_first_token_kl = 1.0;    // mean KL(full || blended) of the first token, nats
  int greedy_tokens = 8;
  // reuse "auto" picks a mode for the user, so a candidate must also meet these (stricter) bounds:
  // on the trained model EPIC-16 (KL ~0.35) costs 3.5 points of exact match, EPIC-32 (~0.014) not.
  double auto_min_greedy_agreement = 0.75;
  double auto_max_first_token_kl = 0.1;
};

// KL(p || q) of the softmax distributions of logits a (p) and b (q), in nats (>= 0).
double logits_kl(std::span<const float> a, std::span<const float> b);
// Index of the largest logit (the first on ties).
int logits_argmax(std::span<const float> x);

Result<Fidelity> measure_fidelity(engine::Model& model, std::span<const BlendCase> cases, ReuseMode mode,
                                  const BlendParams& params, int greedy_tokens);

}  // namespace ragd::pipelines
