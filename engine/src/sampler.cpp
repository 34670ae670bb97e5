// Sampler: penalties, greedy / temperature / top-k / top-p / min-p, seeded draws.
#include "ragd/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include <fmt/format.h>

namespace ragd::engine {

Status SamplingParams::validate() const {
  auto bad = [](std::string_view field, std::string msg) {
    return Status::InvalidArgument(fmt::format("sampling parameter '{}' {}", field, msg));
  };
  if (!std::isfinite(temperature) || temperature < 0) return bad("temperature", fmt::format("must be >= 0 (got {})", temperature));
  if (top_k < 0) return bad("top_k", fmt::format("must be >= 0 (got {})", top_k));
  if (!(top_p > 0 && top_p <= 1)) return bad("top_p", fmt::format("must be in (0, 1] (got {})", top_p));
  if (!(min_p >= 0 && min_p <= 1)) return bad("min_p", fmt::format("must be in [0, 1] (got {})", min_p));
  if (!std::isfinite(repetition_penalty) || repetition_penalty <= 0)
    return bad("repetition_penalty", fmt::format("must be > 0 (got {})", repetition_penalty));
  if (!(presence_penalty >= -2 && presence_penalty <= 2))
    return bad("presence_penalty", fmt::format("must be in [-2, 2] (got {})", presence_penalty));
  if (!(frequency_penalty >= -2 && frequency_penalty <= 2))
    return bad("frequency_penalty", fmt::format("must be in [-2, 2] (got {})", frequency_penalty));
  if (max_tokens < 1) return bad("max_tokens", fmt::format("must be >= 1 (got {})", max_tokens));
  for (int32_t id : stop_token_ids)
    if (id < 0) return bad("stop_token_ids", fmt::format("contains a negative id ({})", id));
  for (const auto& s : stop)
    if (s.empty()) return bad("stop", "contains an empty string");
  return Status::OK();
}

void apply_penalties(std::span<float> logits, std::span<const int32_t> history, const SamplingParams& p) {
  if (history.empty() ||
      (p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f))
    return;
  std::unordered_map<int32_t, int> counts;
  counts.reserve(history.size());
  const auto v = static_cast<int32_t>(logits.size());
  for (int32_t id : history)
    if (id >= 0 && id < v) ++counts[id];
  for (const auto& [id, n] : counts) {
    float& x = logits[id];
    if (p.repetition_penalty != 1.0f) x = x > 0 ? x / p.repetition_penalty : x * p.repetition_penalty;
    x -= p.presence_penalty + p.frequency_penalty * static_cast<float>(n);
  }
}

float log_softmax_at(std::span<const float> logits, int32_t id) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - mx);
  return static_cast<float>(static_cast<double>(logits[id]) - mx - std::log(sum));
}

Sampler::Sampler(const SamplingParams& p) : p_(p), rng_(p.seed) {}

SampleResult Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  SampleResult r;
  const auto v = static_cast<int32_t>(logits.size());
  if (v == 0) return r;
  scratch_.assign(logits.begin(), logits.end());
  apply_penalties(scratch_, history, p_);

  if (p_.temperature == 0.0f) {
    int32_t best = 0;
    for (int32_t i = 1; i < v; ++i)
      if (scratch_[i] > scratch_[best]) best = i;  // strict: ties keep the lowest id
    r.token = best;
    r.logprob = log_softmax_at(logits, best);
    return r;
  }

  const float inv_t = 1.0f / p_.temperature;
  for (float& x : scratch_) x *= inv_t;
  // Candidates sorted by logit descending (ties: lower id first) when a filter needs the order.
  idx_.resize(v);
  std::iota(idx_.begin(), idx_.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) { return scratch_[a] != scratch_[b] ? scratch_[a] > scratch_[b] : a < b; };
  size_t n = static_cast<size_t>(v);
  if (p_.top_k > 0 && p_.top_k < v) {
    std::nth_element(idx_.begin(), idx_.begin() + p_.top_k, idx_.end(), by_logit);
    n = static_cast<size_t>(p_.top_k);
  }
  const bool need_sort = p_.top_p < 1.0f || n < static_cast<size_t>(v);
  if (need_sort) std::sort(idx_.begin(), idx_.begin() + n, by_logit);

  float mx = -INFINITY;
  for (size_t i = 0; i < n; ++i) mx = std::max(mx, scratch_[idx_[i]]);
  std::vector<double> probs(n);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += probs[i] = std::exp(static_cast<double>(scratch_[idx_[i]]) - mx);
  if (p_.top_p < 1.0f) {
    double cum = 0;
    size_t keep = n;
    for (size_t i = 0; i < n; ++i) {
      cum += probs[i] / sum;
      if (cum >= p_.top_p) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
    probs.resize(n);
    sum = std::accumulate(probs.begin(), probs.end(), 0.0);
  }
  if (p_.min_p > 0.0f) {
    // The most likely candidate has weight exp(0) = 1 after the max shift.
    for (size_t i = 0; i < n; ++i)
      if (probs[i] < p_.min_p) probs[i] = 0;
    sum = std::accumulate(probs.begin(), probs.end(), 0.0);
  }
  std::uniform_real_distribution<double> u(0.0, sum);
  const double target = u(rng_);
  double acc = 0;
  size_t pick = n;
  for (size_t i = 0; i < n; ++i) {
    if (probs[i] <= 0) continue;
    acc += probs[i];
    pick = i;
    if (acc > target) break;
  }
  r.token = idx_[pick];
  r.logprob = log_softmax_at(logits, r.token);
  return r;
}

}  // namespace ragd::engine
