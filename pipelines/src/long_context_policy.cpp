#include "ragd/pipelines/long_context_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ragd/common/check.h"
#include "ragd/seqparallel/sharded_sequence.h"

namespace ragd::pipelines {

int64_t LongContextPolicy::blocks_per_worker(int64_t prompt_tokens, int64_t max_new_tokens, int degree) const {
  if (degree <= 1) return run_kv_blocks(prompt_tokens + max_new_tokens, block_size);
  seqparallel::SpSequence s;
  s.prompt_tokens = prompt_tokens;
  s.decode_tokens = max_new_tokens;
  s.workers = std::min(degree, workers);
  s.kind = partition;
  s.max_chunk_tokens = chunk_tokens;
  s.block_size = block_size;
  return seqparallel::kv_blocks_per_worker(s);
}

seqparallel::Prediction LongContextPolicy::predict(int64_t prompt_tokens, int degree) const {
  RAGD_CHECK(rates.has_value()) << "LongContextPolicy::predict without rates";
  return seqparallel::predict(model, *rates, prompt_tokens, degree, kv_bytes_per_token_layer);
}

double LongContextPolicy::move_s(int64_t prompt_tokens, int from, int to) const {
  RAGD_CHECK(rates.has_value() && to >= 1 && from >= to) << "LongContextPolicy::move_s";
  return seqparallel::predict_shrink_s(model, *rates, prompt_tokens, from, to);
}

LongContextPolicy::Plan LongContextPolicy::plan(int64_t prompt_tokens, int64_t max_new_tokens) const {
  if (!rates.has_value() || workers == 1) return Plan{workers, workers, 0};
  Plan best{workers, workers, std::numeric_limits<double>::infinity()};
  // Per degree, once: its predicted times and whether its pools hold the share.
  std::vector<seqparallel::Prediction> at(static_cast<size_t>(workers) + 1);
  std::vector<char> fits(static_cast<size_t>(workers) + 1);
  for (int d = 1; d <= workers; ++d) {
    at[d] = predict(prompt_tokens, d);
    fits[d] = spills || !exceeds_pool(prompt_tokens, max_new_tokens, d);
  }
  for (int p = 1; p <= workers; ++p) {
    if (!fits[p]) continue;
    // Decode at p first: a move must gain strictly to be chosen.
    for (int d = p; d >= 1; --d) {
      if (!fits[d]) continue;
      const double s = at[p].prefill_s + move_s(prompt_tokens, p, d) + static_cast<double>(max_new_tokens) * at[d].decode_s;
      if (s < best.seconds) best = Plan{p, d, s};
    }
  }
  if (!std::isfinite(best.seconds)) return Plan{workers, workers, 0};  // nothing fits: every worker (spill refused later)
  return best;
}

bool LongContextPolicy::takes(int64_t prompt_tokens, int64_t max_new_tokens) const {
  if (workers > 1 && prompt_tokens >= threshold_tokens) {
    // A run the model gives to one worker and that fits its pool stays in the batch (prefix reuse).
    const int d = degree(prompt_tokens, max_new_tokens);
    return d > 1 || (spills && exceeds_pool(prompt_tokens, max_new_tokens, 1));
  }
  return spills && exceeds_pool(prompt_tokens, max_new_tokens, degree(prompt_tokens, max_new_tokens));
}

}  // namespace ragd::pipelines
