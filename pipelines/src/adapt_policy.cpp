// The adaptive-configuration policy: signals -> per-candidate estimates -> choice (adapt_policy.h).
#include "ragd/pipelines/adapt_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

#include "ragd/common/check.h"

namespace ragd::pipelines {

namespace {

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }
double logit(double p) {
  p = std::clamp(p, 1e-4, 1.0 - 1e-4);
  return std::log(p / (1.0 - p));
}

// Passages that end up in the prompt, and passages scored by the reranker.
int kept_passages(const AdaptCandidate& c) { return c.rerank > 0 ? c.rerank : c.top_k; }
int scored_passages(const AdaptCandidate& c) { return c.rerank > 0 ? c.top_k : 0; }

// Prompt tokens besides the passages and the question: system prefix, headers, chat template.
constexpr double kPromptOverheadTokens = 32;
// Prior time per passage prefilled or scored (ms), when a candidate gives no prior of its own.
constexpr double kPriorMsPerPassage = 10;

}  // namespace

const AdaptCandidate* AdaptSpec::find(std::string_view name) const {
  for (const auto& c : candidates)
    if (c.name == name) return &c;
  return nullptr;
}

const AdaptEstimate& AdaptChoice::chosen() const {
  for (const auto& e : estimates)
    if (e.index == index) return e;
  RAGD_CHECK(false) << "adapt choice " << index << " has no estimate";
  return estimates.front();
}

AdaptModel adapt_model(const AdaptSpec& spec, size_t index, bool* fitted) {
  RAGD_CHECK(index < spec.candidates.size()) << "adapt candidate " << index << " out of range";
  const AdaptCandidate& c = spec.candidates[index];
  if (auto it = spec.profile.models.find(c.name); it != spec.profile.models.end()) {
    if (fitted) *fitted = true;
    return it->second;
  }
  if (fitted) *fitted = false;
  AdaptModel m;
  const double q = c.prior_quality.value_or(0.5);
  m.quality[0] = logit(q);
  m.fit_accuracy = q;
  m.ttft_idle_ms = c.prior_ttft_ms.value_or(kPriorMsPerPassage * (kept_passages(c) + scored_passages(c)));
  m.ttft_per_run_ms = m.ttft_idle_ms;
  return m;
}

double adapt_work_tokens(const AdaptCandidate& c, const QuerySignals& q) {
  const double prompt = kPromptOverheadTokens + q.question_tokens + kept_passages(c) * q.passage_tokens;
  const double scoring = scored_passages(c) * (kPromptOverheadTokens + q.question_tokens + q.passage_tokens);
  return prompt + scoring;
}

AdaptEstimate estimate_candidate(const AdaptSpec& spec, size_t index, const QuerySignals& q, const LoadSignals& load) {
  AdaptEstimate e;
  e.index = index;
  const AdaptModel m = adapt_model(spec, index, &e.fitted);
  const AdaptCandidate& c = spec.candidates[index];
  if (q.retrieved) {
    const auto f = q.features();
    double z = m.quality[0];
    for (size_t i = 0; i < kNumAdaptSignals; ++i) z += m.quality[i + 1] * f[i];
    e.quality = sigmoid(z);
  } else {
    e.quality = m.fit_accuracy;  // no retrieval signal yet: the candidate's mean
  }
  e.work_tokens = adapt_work_tokens(c, q);
  const double per_run = std::max(0.0, m.ttft_per_run_ms);
  const int ahead = std::max(0, load.ahead);
  // Waits that neither model saw in its fit, added to both (in mean run times).
  double extra = 0;
  // The prompt's KV must fit the free blocks; otherwise the run waits for running ones to end.
  const double prompt = kPromptOverheadTokens + q.question_tokens + kept_passages(c) * q.passage_tokens;
  const int64_t blocks = static_cast<int64_t>(std::ceil(prompt / std::max(1, load.block_size))) + 1;
  e.fits_kv = load.free_blocks < 0 || blocks <= load.free_blocks;
  if (!e.fits_kv) extra += per_run * std::max(1, load.running);
  // A prompt over the step token budget is prefilled over several steps, each shared with the batch.
  const int steps = static_cast<int>(std::ceil(prompt / std::max(1, load.max_batch_tokens)));
  if (steps > 1) extra += per_run * (steps - 1);
  e.ttft_ms = std::max(0.0, m.ttft_idle_ms) + per_run * ahead + extra;
  if (m.has_ttft_q) {
    const double q_ms = m.ttft_q[0] + m.ttft_q[1] * ahead + m.ttft_q[2] * std::max(0.0, load.work_ahead_tokens) / 1000.0;
    e.ttft_q_ms = std::max(0.0, q_ms) + extra;
    // An upper quantile of a right-skewed wait is not below its mean (guards a line extrapolated
    // outside the loads it was fitted on).
    if (spec.profile.ttft_quantile >= 0.5) e.ttft_q_ms = std::max(e.ttft_q_ms, e.ttft_ms);
  } else {
    e.ttft_q_ms = e.ttft_ms;
  }
  e.ttft_q_ms *= std::max(1.0, q.history.ttft_scale);
  return e;
}

AdaptChoice choose_adapt(const AdaptSpec& spec, const AdaptGoal& goal, const QuerySignals& q, const LoadSignals& load) {
  RAGD_CHECK(!goal.allowed.empty()) << "adapt: no allowed candidate";
  AdaptChoice out;
  for (size_t i : goal.allowed) out.estimates.push_back(estimate_candidate(spec, i, q, load));
  const auto& es = out.estimates;
  // Better quality first; equal quality: the faster one; then the spec's order.
  auto best_quality = [&](auto keep) -> const AdaptEstimate* {
    const AdaptEstimate* b = nullptr;
    for (const auto& e : es)
      if (keep(e) && (!b || e.quality > b->quality + 1e-9 ||
                      (std::abs(e.quality - b->quality) <= 1e-9 && e.ttft_ms < b->ttft_ms)))
        b = &e;
    return b;
  };
  auto fastest = [&](auto keep) -> const AdaptEstimate* {
    const AdaptEstimate* b = nullptr;
    for (const auto& e : es)
      if (keep(e) && (!b || e.ttft_ms < b->ttft_ms || (e.ttft_ms == b->ttft_ms && e.quality > b->quality))) b = &e;
    return b;
  };
  auto all = [](const AdaptEstimate&) { return true; };
  const double slo = goal.slo_ttft_ms;
  // The target bounds the predicted quantile (the mean when the profile has no quantile model).
  auto within_slo = [&](const AdaptEstimate& e) { return e.ttft_q_ms <= slo; };
  auto pick = [&](const AdaptEstimate* e, const char* reason) {
    out.index = e->index;
    out.reason = reason;
  };
  if (goal.forced) {
    pick(&es.front(), "forced");
    return out;
  }
  // Keeps to the SLO when some candidate is predicted within it; else the fastest.
  auto keep_slo = [&]() {
    if (const AdaptEstimate* w = best_quality(within_slo)) pick(w, "best_within_slo");
    else pick(fastest(all), "fastest_over_slo");
  };
  switch (goal.objective) {
    case AdaptObjective::kQuality:
      pick(best_quality(all), "best_quality");
      break;
    case AdaptObjective::kBalanced: {
      const AdaptEstimate* top = best_quality(all);
      const double floor = top->quality - goal.quality_tolerance;
      const AdaptEstimate* cheap = fastest([&](const AdaptEstimate& e) { return e.quality >= floor; });
      pick(cheap, cheap->index == top->index ? "best_quality" : "cheapest_near_best");
      if (slo > 0 && cheap->ttft_q_ms > slo) keep_slo();
      break;
    }
    case AdaptObjective::kLatency:
      if (slo > 0) keep_slo();
      else pick(fastest(all), "fastest_over_slo");
      break;
  }
  return out;
}

AdaptReport adapt_report(const AdaptSpec& spec, std::string pipeline, const AdaptGoal& goal, const AdaptChoice& choice,
                         const QuerySignals& q, const LoadSignals& load) {
  AdaptReport r;
  r.pipeline = std::move(pipeline);
  r.choice = spec.candidates.at(choice.index).name;
  r.reason = choice.reason;
  r.objective = std::string(enum_name(goal.objective));
  r.slo_ttft_ms = goal.slo_ttft_ms;
  r.ttft_quantile = spec.profile.ttft_quantile;
  r.signals = q;
  r.load = load;
  for (const auto& e : choice.estimates) r.estimates.emplace_back(spec.candidates.at(e.index).name, e);
  return r;
}

QuerySignals query_signals(std::span<const float> scores, std::span<const std::vector<int32_t>> passages,
                           std::span<const int32_t> question) {
  QuerySignals s;
  s.retrieved = true;
  s.question_tokens = static_cast<int>(question.size());
  if (scores.size() >= 2) s.score_margin = static_cast<double>(scores[0]) - scores[1];
  if (passages.empty()) return s;
  double total = 0;
  for (const auto& p : passages) total += static_cast<double>(p.size());
  s.passage_tokens = total / static_cast<double>(passages.size());
  // The cheap reranker: the fraction of the question's distinct tokens each passage contains.
  const std::unordered_set<int32_t> qset(question.begin(), question.end());
  std::vector<double> overlap;
  for (const auto& p : passages) {
    std::unordered_set<int32_t> seen;
    for (int32_t t : p)
      if (qset.count(t)) seen.insert(t);
    overlap.push_back(qset.empty() ? 0.0 : static_cast<double>(seen.size()) / static_cast<double>(qset.size()));
  }
  const size_t best = static_cast<size_t>(std::max_element(overlap.begin(), overlap.end()) - overlap.begin());
  s.lexical_agreement = best == 0 ? 1.0 : 0.0;
  std::vector<double> sorted = overlap;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  s.lexical_margin = sorted.size() >= 2 ? sorted[0] - sorted[1] : 0.0;
  return s;
}

}  // namespace ragd::pipelines
