// reuse "auto": per model, the cheapest approximate mode whose fidelity passes auto's bounds, else
// exact (knowledge tree). Its candidates are every mode's auto_candidates(), cheapest first; each
// is measured on the documents of the first kAutoRuns runs that would blend (exact meanwhile), and
// the choice is then made once for the model. The run takes the chosen mode and parameters
// (plan.mode / blend) before its blend, so everything after is that mode's.
#include <algorithm>

#include <fmt/format.h>

#include "ragd/common/log.h"

#include "reuse_blend.h"

namespace ragd::pipelines {

namespace {

class AutoReuse final : public BlendReuse {
 public:
  void install_rest(ReuseContext& ctx, ReusePlan& p, std::span<const int32_t> prompt, size_t d,
                    engine::BlockTable& table, const std::function<bool(int)>& ensure_free, Installed* in) override {
    BlendReuse::install_rest(ctx, p, prompt, d, table, ensure_free, in);
    if (p.mode == ReuseMode::kAuto) {  // nothing to blend (the whole path cached, or no head): exact
      p.mode = ReuseMode::kKnowledgeTree;
      if (p.note.empty()) p.auto_note = "auto: exact (the documents' KV was cached in this order)";
    }
  }
  void stats(ExecutorStats* x) const override {
    x->reuse_auto = choice_;
    x->reuse_auto_kl = fidelity_.first_token_kl;
    x->reuse_auto_agreement = fidelity_.greedy_agreement;
  }

 protected:
  // Picks the mode (sets plan.mode / blend); false = exact (plan.note or auto_note says why). Auto's
  // own measurement stands in for the self-check.
  bool admit(ReuseContext& ctx, ReusePlan& p, std::span<const int32_t> prompt) override;

 private:
  static constexpr int kAutoRuns = 4;
  std::map<std::string, std::vector<Fidelity>> samples_;  // check key -> one measurement per run
  int runs_ = 0;
  bool decided_ = false;
  std::string choice_, why_;  // "epic:16", "cacheblend:0.15", ..., "exact"; "" = none yet
  Fidelity fidelity_;         // the chosen mode's mean fidelity
};

// Every mode's candidates, cheapest first (ascending cost_rank; ties in registry order).
std::vector<AutoCandidate> candidates_of(const ReuseContext& ctx, const BlendParams& base) {
  std::vector<AutoCandidate> all;
  for (const auto& s : ctx.strategies) {
    std::vector<AutoCandidate> c = s->auto_candidates(base);
    all.insert(all.end(), c.begin(), c.end());
  }
  std::stable_sort(all.begin(), all.end(), [](const AutoCandidate& a, const AutoCandidate& b) { return a.cost_rank < b.cost_rank; });
  return all;
}

bool AutoReuse::admit(ReuseContext& ctx, ReusePlan& p, std::span<const int32_t> prompt) {
  const std::vector<AutoCandidate> candidates = candidates_of(ctx, p.blend);
  auto key_of = [&](const AutoCandidate& c) { return ctx.strategy(c.mode).check_key(c.params); };
  auto use = [&](const AutoCandidate& c, const std::string& why) {
    p.mode = c.mode;
    p.blend = c.params;
    p.auto_note = "auto: " + choice_ + " (" + why + ")";
    return true;
  };
  if (candidates.empty()) {
    p.mode = ReuseMode::kKnowledgeTree;
    p.auto_note = "auto: exact (no reuse mode is a candidate)";
    return false;
  }
  if (!ctx.check.enabled) {  // no measurement: the cheapest mode
    choice_ = key_of(candidates[0]);
    return use(candidates[0], "self-check off");
  }
  if (decided_) {
    for (const AutoCandidate& c : candidates)
      if (key_of(c) == choice_) return use(c, why_);
    p.mode = ReuseMode::kKnowledgeTree;
    p.auto_note = "auto: exact (" + why_ + ")";
    return false;
  }
  // Deciding: every candidate measured on the documents of the first kAutoRuns runs that blend
  // (one run's documents can be easy for every mode); exact meanwhile.
  if (p.docs.size() >= 3) {
    const std::vector<BlendCase> cases = reorder_cases(p, prompt);
    for (const AutoCandidate& c : candidates) {
      Result<Fidelity> f = measure_fidelity(ctx.model, cases, c.mode, c.params, ctx.check.greedy_tokens);
      if (!f.ok()) {
        p.mode = ReuseMode::kKnowledgeTree;
        p.note = "auto: the reuse self-check could not run (" + f.status().message() + ")";
        return false;
      }
      samples_[key_of(c)].push_back(*f);
    }
    ++runs_;
  }
  if (runs_ < kAutoRuns) {
    p.mode = ReuseMode::kKnowledgeTree;
    p.auto_note = fmt::format("auto: measuring the modes on this model ({} of {} runs); exact meanwhile", runs_, kAutoRuns);
    return false;
  }
  decided_ = true;
  std::string failed;
  for (const AutoCandidate& c : candidates) {
    const std::string key = key_of(c);
    Fidelity mean;
    const auto& v = samples_[key];
    for (const Fidelity& f : v) {
      mean.greedy_agreement += f.greedy_agreement / v.size();
      mean.first_token_kl += f.first_token_kl / v.size();
    }
    log::pipelines()->info("reuse auto: {} over {} runs: greedy agreement {:.2f}, first-token KL {:.4f}", key, v.size(),
                           mean.greedy_agreement, mean.first_token_kl);
    const bool ok = mean.greedy_agreement >= std::max(ctx.check.min_greedy_agreement, ctx.check.auto_min_greedy_agreement) &&
                    mean.first_token_kl <= std::min(ctx.check.max_first_token_kl, ctx.check.auto_max_first_token_kl);
    if (!ok) {
      failed += fmt::format("{}{} {:.2f} / {:.4f}", failed.empty() ? "" : ", ", key, mean.greedy_agreement, mean.first_token_kl);
      continue;
    }
    choice_ = key;
    fidelity_ = mean;
    why_ = fmt::format("self-check over {} runs on this model: greedy agreement {:.2f}, first-token KL {:.4f}", v.size(),
                       mean.greedy_agreement, mean.first_token_kl);
    return use(c, why_);
  }
  choice_ = "exact";
  why_ = "no approximate mode passed the self-check on this model: " + failed;
  p.mode = ReuseMode::kKnowledgeTree;
  p.auto_note = "auto: exact (" + why_ + ")";
  return false;
}

}  // namespace

std::unique_ptr<ReuseStrategy> make_auto_reuse() { return std::make_unique<AutoReuse>(); }

}  // namespace ragd::pipelines
