// Sampling: greedy, temperature, top-k, top-p, min-p, repetition and presence penalties, seeded.
// Stop conditions: stop token ids, stop strings, max tokens.
// Thread-safety: a Sampler is per sequence and not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/engine/token_mask.h"

namespace ragd::engine {

struct ConstraintSpec;  // constraint_spec.h

struct SamplingParams {
  float temperature = 0.0f;        // 0 = greedy
  int top_k = 0;                   // 0 = off
  float top_p = 1.0f;              // 1 = off
  float min_p = 0.0f;              // 0 = off
  float repetition_penalty = 1.0f; // 1 = off (HF semantics: divide positive logits, multiply negative)
  float presence_penalty = 0.0f;   // 0 = off (OpenAI semantics: subtract once per seen token)
  float frequency_penalty = 0.0f;  // 0 = off (subtract per occurrence)
  uint64_t seed = 0;
  int max_tokens = 256;
  std::vector<int32_t> stop_token_ids;  // in addition to the model's EOS unless ignore_eos
  std::vector<std::string> stop;        // stop strings (matched on decoded text)
  bool ignore_eos = false;
  // Structured output (constraint_spec.h): the output must match this JSON Schema / regex / choice;
  // null = unconstrained. The executor compiles it (ConstraintCache) and masks every step.
  std::shared_ptr<const ConstraintSpec> constraint;

  Status validate() const;  // ranges: temperature >= 0, 0 < top_p <= 1, 0 <= min_p <= 1, ...
  bool has_penalties() const;  // any of repetition / presence / frequency is on
};

struct SampleResult {
  int32_t token = -1;
  float logprob = 0.0f;  // natural-log probability of `token` under the raw logits (before filters)
};

// Applies repetition (HF: divide positive logits, multiply negative ones, once per distinct seen
// token), then presence (once per distinct token) and frequency (per occurrence) penalties to
// logits in place. Ids outside [0, logits.size()) in history are ignored.
void apply_penalties(std::span<float> logits, std::span<const int32_t> history, const SamplingParams& p);
// Sets the logits of the ids `mask` does not allow to -inf, in place.
void apply_token_mask(std::span<float> logits, const TokenMask& mask);

// Natural-log softmax of one id under logits (fp32 e^x, fp64 sum: kernels::sum_exp).
float log_softmax_at(std::span<const float> logits, int32_t id);

// The greedy pick of a logits row: the argmax (lowest id on ties) and its log_softmax_at. What a
// temperature-0 Sampler without penalties draws, and what SeqStep::Logits::kGreedy returns.
SampleResult greedy_pick(std::span<const float> logits);

// The plain algorithm Sampler::sample must equal, for tests and benchmarks: penalties; greedy argmax;
// or temperature, then (when a filter is on) every candidate sorted by logit descending with ids
// ascending on ties (else ids in order), fp64 weights, top-k, top-p over the fp64 total, min-p, one
// draw from `rng`; logprob by an fp64 log-softmax. O(V log V) per call.
// With `mask` (constrained decoding), the logits of the ids it does not allow are -inf first.
SampleResult sample_reference(std::span<const float> logits, std::span<const int32_t> history,
                              const SamplingParams& p, std::mt19937_64& rng, const TokenMask* mask = nullptr);

// Order of operations: constraint mask (disallowed ids -> -inf) -> penalties -> greedy argmax (temperature 0; ties -> lowest id) or
// temperature -> top-k -> top-p -> min-p -> draw from the renormalised distribution with a
// mt19937_64 seeded by params.seed.
class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);
  // history: prompt + generated ids (for penalties). mask: the ids a constraint allows (null = all);
  // it must allow at least one id of the row. logprob stays that of the raw logits.
  SampleResult sample(std::span<const float> logits, std::span<const int32_t> history, const TokenMask* mask = nullptr);
  const SamplingParams& params() const { return p_; }

 private:
  SamplingParams p_;
  std::mt19937_64 rng_;
  std::vector<float> scratch_;
  std::vector<float> weights_;  // unfiltered sampling: e^(x − max) of every id
  std::vector<int32_t> idx_;
};

}  // namespace ragd::engine
