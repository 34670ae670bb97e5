// Per tenant and pipeline history of adaptive runs (adapt_history.h).
#include "ragd/pipelines/adapt_history.h"

#include <algorithm>
#include <cmath>

#include "ragd/common/check.h"

namespace ragd::pipelines {

namespace {

std::string history_key(std::string_view tenant, std::string_view pipeline) {
  std::string k(tenant);
  k.push_back('\0');
  k.append(pipeline);
  return k;
}

}  // namespace

AdaptHistory::AdaptHistory(AdaptHistoryOptions o) : opts_(o) {
  RAGD_CHECK(opts_.max_keys >= 1) << "adapt history: max_keys must be >= 1";
  RAGD_CHECK(opts_.exceed_alpha > 0 && opts_.exceed_alpha <= 1) << "adapt history: exceed_alpha must be in (0, 1]";
  RAGD_CHECK(opts_.scale_step >= 0 && opts_.max_scale >= 1) << "adapt history: scale_step >= 0, max_scale >= 1";
}

AdaptHistorySignals AdaptHistory::to_signals(const Entry& e) {
  AdaptHistorySignals s;
  s.runs = e.runs;
  s.reranked = e.reranked;
  s.rerank_agreement = e.reranked > 0 ? static_cast<double>(e.kept_first) / static_cast<double>(e.reranked) : 0.0;
  s.ttft_exceed_rate = e.exceed_rate;
  s.ttft_scale = std::exp(e.log_scale);
  return s;
}

AdaptHistorySignals AdaptHistory::signals(std::string_view tenant, std::string_view pipeline) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = entries_.find(history_key(tenant, pipeline));
  return it == entries_.end() ? AdaptHistorySignals{} : to_signals(it->second);
}

AdaptHistory::Entry& AdaptHistory::entry(std::string_view tenant, std::string_view pipeline) {
  std::string key = history_key(tenant, pipeline);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (entries_.size() >= opts_.max_keys) {
      auto lru = std::min_element(entries_.begin(), entries_.end(),
                                  [](const auto& a, const auto& b) { return a.second.last_use < b.second.last_use; });
      entries_.erase(lru);
    }
    it = entries_.emplace(std::move(key), Entry{}).first;
  }
  it->second.last_use = ++tick_;
  return it->second;
}

void AdaptHistory::record_rerank(std::string_view tenant, std::string_view pipeline, bool kept_first) {
  std::lock_guard<std::mutex> lk(mu_);
  Entry& e = entry(tenant, pipeline);
  ++e.reranked;
  e.kept_first += kept_first ? 1 : 0;
}

void AdaptHistory::record_ttft(std::string_view tenant, std::string_view pipeline, double ttft_ms, double predicted_q_ms,
                               double quantile, double slo_ms) {
  std::lock_guard<std::mutex> lk(mu_);
  Entry& e = entry(tenant, pipeline);
  ++e.runs;
  if (!(quantile > 0 && quantile < 1)) return;
  const double exceeded = ttft_ms > predicted_q_ms || (slo_ms > 0 && ttft_ms > slo_ms) ? 1.0 : 0.0;
  e.exceed_rate += opts_.exceed_alpha * (exceeded - e.exceed_rate);
  e.log_scale = std::clamp(e.log_scale + opts_.scale_step * (exceeded - (1.0 - quantile)), 0.0, std::log(opts_.max_scale));
}

size_t AdaptHistory::size() const {
  std::lock_guard<std::mutex> lk(mu_);
  return entries_.size();
}

}  // namespace ragd::pipelines
