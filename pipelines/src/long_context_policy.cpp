#include "ragd/pipelines/long_context_policy.h"

#include <algorithm>
#include <limits>

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

int LongContextPolicy::degree(int64_t prompt_tokens, int64_t max_new_tokens) const {
  if (!rates.has_value() || workers == 1) return workers;
  int best = workers;
  double best_s = std::numeric_limits<double>::infinity();
  for (int d = 1; d <= workers; ++d) {
    if (!spills && exceeds_pool(prompt_tokens, max_new_tokens, d)) continue;
    const seqparallel::Prediction p = predict(prompt_tokens, d);
    const double s = p.prefill_s + static_cast<double>(max_new_tokens) * p.decode_s;
    if (s < best_s) {
      best = d;
      best_s = s;
    }
  }
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
