// Sampler: penalties, greedy / temperature / top-k / top-p / min-p, seeded draws.
#include "ragd/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include <fmt/format.h>

#include "ragd/kernels/softmax.h"

namespace ragd::engine {

bool SamplingParams::has_penalties() const {
  return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
}

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
  const float mx = logits[kernels::argmax(logits.data(), logits.size())];
  const double sum = kernels::sum_exp(logits.data(), logits.size(), mx);
  return static_cast<float>(static_cast<double>(logits[id]) - mx - std::log(sum));
}

SampleResult greedy_pick(std::span<const float> logits) {
  SampleResult r;
  if (logits.empty()) return r;
  r.token = static_cast<int32_t>(kernels::argmax(logits.data(), logits.size()));  // ties: the lowest id
  r.logprob = log_softmax_at(logits, r.token);
  return r;
}

namespace {

// Top-p without sorting the vocabulary: the candidates at or above a floor are a prefix of the sorted
// order, so once they hold at least top_p of the mass they contain the nucleus. The floor starts
// kFloorStep below the max and moves down by doubling until they do (a real model's nucleus is a few
// hundred tokens of a large vocabulary; a flat distribution ends with every candidate and the full
// sort). The mass test runs on fp32 e^x (relative error ~1e-7) with a margin of kMassMargin, so a
// candidate set that passes holds the nucleus of the exact arithmetic too.
constexpr float kFloorStep = 4.0f;
constexpr int kFloorSteps = 5;  // floors max − 4, − 8, − 16, − 32, − 64, then everything
// (top-k uses the same floors, with a count of at least k instead of the mass.)
constexpr double kMassMargin = 1e-5;

// The index the draw `target` (uniform in [0, Σ w)) lands on walking w in order (zero weights
// skipped; the last positive weight when rounding leaves the target past the end).
template <typename W>
size_t draw_index(std::span<const W> w, double target) {
  double acc = 0;
  size_t pick = w.size();
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] <= 0) continue;
    acc += w[i];
    pick = i;
    if (acc > target) break;
  }
  return pick;
}

}  // namespace

SampleResult sample_reference(std::span<const float> logits, std::span<const int32_t> history,
                              const SamplingParams& p, std::mt19937_64& rng, const TokenMask* mask) {
  SampleResult r;
  std::vector<float> l(logits.begin(), logits.end());
  const int v = static_cast<int>(l.size());
  if (v == 0) return r;
  if (mask)
    for (int i = 0; i < v; ++i)
      if (!mask->allows(i)) l[static_cast<size_t>(i)] = -INFINITY;
  apply_penalties(l, history, p);
  auto log_softmax = [&](int32_t id) {
    const double mx = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (float x : logits) sum += std::exp(static_cast<double>(x) - mx);
    return static_cast<float>(static_cast<double>(logits[id]) - mx - std::log(sum));
  };
  if (p.temperature == 0.0f) {
    r.token = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    r.logprob = log_softmax(r.token);
    return r;
  }
  for (float& x : l) x /= p.temperature;
  std::vector<int32_t> idx(v);
  std::iota(idx.begin(), idx.end(), 0);
  if (p.top_p < 1.0f || p.top_k > 0) {  // a filter needs the order; otherwise ids in order
    std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
  }
  size_t n = p.top_k > 0 ? std::min<size_t>(p.top_k, v) : v;
  const double mx = *std::max_element(l.begin(), l.end());
  std::vector<double> w(n);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += w[i] = std::exp(static_cast<double>(l[idx[i]]) - mx);
  if (p.top_p < 1.0f) {
    double cum = 0;
    size_t keep = n;
    for (size_t i = 0; i < n; ++i) {
      cum += w[i] / sum;
      if (cum >= p.top_p) {
        keep = i + 1;
        break;
      }
    }
    w.resize(keep);
    n = keep;
  }
  for (double& x : w) x = p.min_p > 0.0f && x < p.min_p ? 0.0 : x;
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  std::uniform_real_distribution<double> u(0.0, total);
  const double target = u(rng);
  double acc = 0;
  size_t pick = n;
  for (size_t i = 0; i < n; ++i) {
    if (w[i] <= 0) continue;
    acc += w[i];
    pick = i;
    if (acc > target) break;
  }
  r.token = idx[pick];
  r.logprob = log_softmax(r.token);
  return r;
}

Sampler::Sampler(const SamplingParams& p) : p_(p), rng_(p.seed) {}

void apply_token_mask(std::span<float> logits, const TokenMask& mask) {
  const size_t v = logits.size();
  for (size_t b = 0; b < v; b += 64) {
    const size_t n = std::min<size_t>(64, v - b);
    const uint64_t valid = n == 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
    const uint64_t bits = (b / 64 < mask.words.size() ? mask.words[b / 64] : 0) & valid;
    if (bits == valid) continue;
    if (bits == 0) {
      std::fill_n(logits.data() + b, n, -INFINITY);
      continue;
    }
    for (uint64_t z = ~bits & valid; z != 0; z &= z - 1) logits[b + static_cast<size_t>(__builtin_ctzll(z))] = -INFINITY;
  }
}

namespace {

// dst = src with the ids `mask` does not allow at -inf: whole words copied or filled, mixed words
// bit by bit over their allowed ids.
void copy_masked(std::span<const float> src, const TokenMask& mask, std::vector<float>& dst) {
  const size_t v = src.size();
  dst.resize(v);
  for (size_t b = 0; b < v; b += 64) {
    const size_t n = std::min<size_t>(64, v - b);
    const uint64_t valid = n == 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
    const uint64_t bits = (b / 64 < mask.words.size() ? mask.words[b / 64] : 0) & valid;
    if (bits == valid) {
      std::copy_n(src.data() + b, n, dst.data() + b);
      continue;
    }
    std::fill_n(dst.data() + b, n, -INFINITY);
    for (uint64_t a = bits; a != 0; a &= a - 1) {
      const size_t i = b + static_cast<size_t>(__builtin_ctzll(a));
      dst[i] = src[i];
    }
  }
}

}  // namespace

SampleResult Sampler::sample(std::span<const float> logits, std::span<const int32_t> history, const TokenMask* mask) {
  SampleResult r;
  const auto v = static_cast<int32_t>(logits.size());
  if (v == 0) return r;
  // Masked, then penalised logits: a copy only when there is a mask or penalties (a 128 k row is
  // half a megabyte).
  std::span<const float> x = logits;
  if (mask) {
    copy_masked(logits, *mask, scratch_);
    x = scratch_;
  }
  if (p_.has_penalties() && !history.empty()) {
    if (x.data() != scratch_.data()) scratch_.assign(logits.begin(), logits.end());
    apply_penalties(scratch_, history, p_);
    x = scratch_;
  }

  if (p_.temperature == 0.0f) {
    if (x.data() == logits.data()) return greedy_pick(logits);
    r.token = static_cast<int32_t>(kernels::argmax(x.data(), x.size()));  // ties: the lowest id
    r.logprob = log_softmax_at(logits, r.token);  // under the raw logits
    return r;
  }

  if (x.data() != scratch_.data()) scratch_.assign(x.begin(), x.end());
  const float inv_t = 1.0f / p_.temperature;
  for (float& y : scratch_) y *= inv_t;
  // The largest scaled logit: every candidate set below contains it, and weights are e^(x − top).
  const float top = scratch_[kernels::argmax(scratch_.data(), scratch_.size())];
  const bool nucleus = p_.top_p < 1.0f;
  const bool top_k = p_.top_k > 0 && p_.top_k < v;
  if (!nucleus && !top_k) {
    // No filter needs the order (the OpenAI default top_p = 1): the draw walks the ids in order over
    // fp32 weights e^(x − max) (vectorised) with fp64 sums. The same token as fp64 weights except
    // where the draw lands within ~1e-7 of a boundary between two tokens.
    weights_.resize(v);
    double sum = kernels::exp_shifted(scratch_.data(), scratch_.size(), top, weights_.data());
    if (p_.min_p > 0.0f) {  // the most likely token has weight e^0 = 1
      sum = 0.0;
      for (float& w : weights_) sum += w = w < p_.min_p ? 0.0f : w;
    }
    std::uniform_real_distribution<double> u(0.0, sum);
    r.token = static_cast<int32_t>(draw_index(std::span<const float>(weights_), u(rng_)));
    r.logprob = log_softmax_at(logits, r.token);
    return r;
  }
  // Candidates sorted by logit descending (ties: lower id first) for the filters.
  auto by_logit = [&](int32_t a, int32_t b) { return scratch_[a] != scratch_[b] ? scratch_[a] > scratch_[b] : a < b; };
  auto collect_at_least = [&](float floor) {  // ids in order
    idx_.clear();
    for (int32_t i = 0; i < v; ++i) {
      if (scratch_[i] >= floor) idx_.push_back(i);
    }
  };
  size_t n = static_cast<size_t>(v);
  double total = 0.0;      // the nucleus: Σ e^(x − top) over every id (fp32 e^x, fp64 sum)
  bool windowed = false;   // idx_ holds the candidates above the floor, sorted; they hold the nucleus
  if (nucleus && !top_k) {
    total = kernels::sum_exp(scratch_.data(), scratch_.size(), top);
    const double need = total * p_.top_p * (1.0 + kMassMargin);
    float step = kFloorStep;
    for (int k = 0; k < kFloorSteps && !windowed; ++k, step *= 2.0f) {
      windowed = kernels::sum_exp(scratch_.data(), scratch_.size(), top, top - step) >= need;
      if (!windowed) continue;
      collect_at_least(top - step);
      std::sort(idx_.begin(), idx_.end(), by_logit);
      n = idx_.size();
    }
  }
  if (!windowed) {
    idx_.resize(v);
    std::iota(idx_.begin(), idx_.end(), 0);
    if (top_k) {
      // The k largest are among the candidates at or above a floor that at least k reach: select
      // within those (a few hundred) instead of the whole vocabulary.
      float step = kFloorStep;
      for (int k = 0; k < kFloorSteps; ++k, step *= 2.0f) {
        if (kernels::count_at_least(scratch_.data(), scratch_.size(), top - step) < static_cast<size_t>(p_.top_k)) continue;
        collect_at_least(top - step);
        break;
      }
      std::nth_element(idx_.begin(), idx_.begin() + p_.top_k, idx_.end(), by_logit);
      n = static_cast<size_t>(p_.top_k);
    }
    const bool need_sort = nucleus || n < static_cast<size_t>(v);
    if (need_sort) std::sort(idx_.begin(), idx_.begin() + n, by_logit);
  }

  std::vector<double> probs(n);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += probs[i] = std::exp(static_cast<double>(scratch_[idx_[i]]) - top);
  if (windowed) sum = total;  // the whole vocabulary's, not the candidates'
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
  r.token = idx_[draw_index(std::span<const double>(probs), u(rng_))];
  r.logprob = log_softmax_at(logits, r.token);
  return r;
}

}  // namespace ragd::engine
