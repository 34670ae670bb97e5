// A running record, per tenant and pipeline, of what adaptive runs showed: how often reranking kept
// the retriever's first passage (the one-passage candidate would have given the same answer) and
// how often a run's time to first token exceeded the quantile predicted for it or the run's TTFT
// target. Its signals are part of the per-query profile (QuerySignals::history, adapt_policy.h) and
// of usage.adapt; the policy multiplies predicted TTFT quantiles by ttft_scale.
//
// ttft_scale is adaptive calibration (Gibbs and Candes, "Adaptive conformal inference under
// distribution shift", 2021), on the log of a scale: after each run,
//   log_scale += scale_step * (exceeded - (1 - quantile)),  clamped to [0, log(max_scale)],
// where `exceeded` is 1 when the TTFT was over the quantile predicted for the chosen candidate or
// over the run's target (a miss of the target is a miss whatever was predicted: a run that had to
// take the fastest candidate over the target counts, so the runs before it learn to leave room).
// An exceedance raises the scale by about scale_step, and (1 - quantile) / quantile exceedances per
// run on average keep it where it is: when the fitted model underestimates this replica's tail now
// (another process on the machine, a longer corpus, the policy's own mix of candidates), the policy
// becomes more careful until the observed rate is back at 1 - quantile. It never goes below 1 (the
// fitted model is not loosened by history).
//
// Thread-safety: thread-safe (one mutex, held for a map lookup). Memory: at most max_keys records;
// the least recently used one is dropped first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "ragd/pipelines/adapt_policy.h"

namespace ragd::pipelines {

struct AdaptHistoryOptions {
  size_t max_keys = 4096;     // tenant+pipeline records kept (>= 1)
  double exceed_alpha = 0.02; // weight of the newest run in ttft_exceed_rate (0..1]
  double scale_step = 0.05;   // step of log(ttft_scale) per run; 0 = no correction (scale stays 1)
  double max_scale = 2;       // upper bound of ttft_scale (>= 1): how far history may tighten, and so
                              // how long it takes to relax after an overload (about log(max) /
                              // (scale_step * (1 - quantile)) runs under their targets)
};

class AdaptHistory {
 public:
  explicit AdaptHistory(AdaptHistoryOptions o = {});

  // The record of `tenant` on `pipeline`; zero counts and scale 1 when there is none.
  AdaptHistorySignals signals(std::string_view tenant, std::string_view pipeline) const;
  // A run reranked its passages; `kept_first`: the passage kept was the retriever's first.
  void record_rerank(std::string_view tenant, std::string_view pipeline, bool kept_first);
  // A run's first token came `ttft_ms` after submit, where `predicted_q_ms` was predicted for the
  // `quantile` (0..1) of its TTFT and `slo_ms` was its target (0 = none). quantile <= 0 (no
  // quantile model): counted, not checked.
  void record_ttft(std::string_view tenant, std::string_view pipeline, double ttft_ms, double predicted_q_ms,
                   double quantile, double slo_ms = 0);

  size_t size() const;

 private:
  struct Entry {
    int64_t runs = 0, reranked = 0, kept_first = 0;
    double exceed_rate = 0, log_scale = 0;
    uint64_t last_use = 0;
  };
  Entry& entry(std::string_view tenant, std::string_view pipeline);  // mu_ held
  static AdaptHistorySignals to_signals(const Entry& e);

  const AdaptHistoryOptions opts_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;  // guarded by mu_; key: tenant '\0' pipeline
  uint64_t tick_ = 0;                               // guarded by mu_
};

}  // namespace ragd::pipelines
