#include "draft_budget.h"

#include <algorithm>
#include <cmath>
#include <queue>

namespace ragd::pipelines {

void StepCostModel::observe(int prefill_rows, int logit_rows, double seconds) {
  if (prefill_rows < 0 || logit_rows < 0 || prefill_rows + logit_rows == 0 || !(seconds > 0) || !std::isfinite(seconds))
    return;
  if (window_.size() < static_cast<size_t>(kWindow)) {
    window_.push_back({prefill_rows, logit_rows, seconds});
  } else {
    window_[next_] = {prefill_rows, logit_rows, seconds};
    next_ = (next_ + 1) % kWindow;
  }
  refit();
}

namespace {

// Least squares of y over (1, x1[, x2]) on the points `use` keeps; false when singular.
bool least_squares(const std::vector<double>& x1, const std::vector<double>& x2, const std::vector<double>& y,
                   const std::vector<char>& use, bool with_x2, double coef[3]) {
  const int k = with_x2 ? 3 : 2;
  double m[3][4] = {};
  for (size_t i = 0; i < y.size(); ++i) {
    if (!use[i]) continue;
    const double v[3] = {1.0, x1[i], x2[i]};
    for (int r = 0; r < k; ++r) {
      for (int c = 0; c < k; ++c) m[r][c] += v[r] * v[c];
      m[r][3] += v[r] * y[i];
    }
  }
  for (int c = 0; c < k; ++c) {  // Gauss-Jordan with partial pivoting
    int p = c;
    for (int r = c + 1; r < k; ++r)
      if (std::abs(m[r][c]) > std::abs(m[p][c])) p = r;
    if (std::abs(m[p][c]) < 1e-9 * (1.0 + std::abs(m[0][0]))) return false;
    for (int j = 0; j < 4; ++j) std::swap(m[c][j], m[p][j]);
    for (int r = 0; r < k; ++r) {
      if (r == c) continue;
      const double f = m[r][c] / m[c][c];
      for (int j = c; j < 4; ++j) m[r][j] -= f * m[c][j];
    }
  }
  coef[2] = 0;
  for (int r = 0; r < k; ++r) coef[r] = m[r][3] / m[r][r];
  return true;
}

}  // namespace

void StepCostModel::refit() {
  const size_t n = window_.size();
  if (n < static_cast<size_t>(kMinSteps)) return;
  std::vector<double> pre(n), lg(n), y(n);
  bool logit_vary = false, prefill_vary = false;
  for (size_t i = 0; i < n; ++i) {
    pre[i] = window_[i].prefill, lg[i] = window_[i].logits, y[i] = window_[i].seconds;
    logit_vary = logit_vary || window_[i].logits != window_[0].logits;
    prefill_vary = prefill_vary || window_[i].prefill != window_[0].prefill;
  }
  if (!logit_vary) {
    // Every recent step had the same logit-row count: the slope is not identifiable from them, so
    // the last fit keeps its shape, and its level follows them (a machine that became busier or
    // quieter, a longer context): all three costs scale by the median of observed / modelled time.
    if (!fitted_) return;
    std::vector<double> ratio;
    ratio.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const double p = fixed_ + per_row_ * lg[i] + per_prefill_row_ * pre[i];
      if (p > 0) ratio.push_back(y[i] / p);
    }
    if (ratio.empty()) return;
    std::nth_element(ratio.begin(), ratio.begin() + static_cast<std::ptrdiff_t>(ratio.size() / 2), ratio.end());
    const double scale = ratio[ratio.size() / 2];
    if (!(scale > 0) || !std::isfinite(scale)) return;
    fixed_ *= scale;
    per_row_ *= scale;
    per_prefill_row_ *= scale;
    return;
  }
  std::vector<char> use(n, 1);
  double c[3];
  // Twice: the second fit leaves out the steps far slower than the first predicts (another process,
  // a page fault: one-sided noise a plain fit would read as cost).
  for (int pass = 0; pass < 2; ++pass) {
    if (!least_squares(lg, pre, y, use, prefill_vary, c)) return;
    if (pass == 1) break;
    std::vector<double> res(n);
    for (size_t i = 0; i < n; ++i) res[i] = y[i] - (c[0] + c[1] * lg[i] + c[2] * pre[i]);
    std::vector<double> a = res;
    for (double& v : a) v = std::abs(v);
    std::nth_element(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n / 2), a.end());
    const double mad = a[n / 2];
    for (size_t i = 0; i < n; ++i) use[i] = res[i] <= 3.0 * mad + 1e-12;
  }
  // Costs are not negative: a negative slope is noise (the fixed part then takes the mean), a
  // negative intercept likewise (the rows take it all).
  double a = c[0], b = std::max(0.0, c[1]), bp = std::max(0.0, c[2]);
  if (a < 0) {
    double sy = 0, sl = 0, sp = 0;
    for (size_t i = 0; i < n; ++i) sy += y[i], sl += lg[i], sp += pre[i];
    a = 0;
    if (b > 0 || bp == 0) b = (sy - bp * sp) / std::max(1.0, sl);
    b = std::max(0.0, b);
  }
  fixed_ = a;
  per_row_ = b;
  per_prefill_row_ = bp;
  fitted_ = true;
}

std::vector<int> choose_draft_lengths(const StepCostModel& cost, int decodes, std::span<const DraftCandidate> candidates) {
  std::vector<int> take(candidates.size(), 0);
  if (!cost.fitted()) {
    if (decodes > kUnfittedMaxDecodes) return take;
    for (size_t i = 0; i < candidates.size(); ++i) take[i] = std::max(0, candidates[i].available);
    return take;
  }
  // Draft tokens by expected value per second of cost, alpha^j / (b + draft_s), highest first;
  // each run's tokens come in order since alpha^j falls with j (alpha <= 1).
  const double b = cost.per_row_s();
  auto price = [&](size_t i) { return b + std::max(0.0, candidates[i].draft_s); };
  struct Next {
    double rate;  // value / price
    double value;
    size_t run;
    bool operator<(const Next& o) const { return rate < o.rate || (rate == o.rate && run > o.run); }
  };
  std::priority_queue<Next> heap;
  auto push = [&](double value, size_t i) {
    const double p = price(i);
    heap.push({p > 0 ? value / p : value * 1e300, value, i});
  };
  for (size_t i = 0; i < candidates.size(); ++i)
    if (candidates[i].available > 0) push(std::clamp(candidates[i].alpha, 0.0, 1.0), i);
  double tokens = std::max(1, decodes);
  double seconds = cost.seconds(tokens);
  while (!heap.empty()) {
    const Next n = heap.top();
    heap.pop();
    // Adding the token raises tokens/second iff value / price > tokens / time.
    if (n.value * seconds <= tokens * price(n.run)) break;  // the rest are worth less still
    ++take[n.run];
    tokens += n.value;
    seconds += price(n.run);
    const DraftCandidate& c = candidates[n.run];
    if (take[n.run] < c.available) push(n.value * std::clamp(c.alpha, 0.0, 1.0), n.run);
  }
  return take;
}

double draft_saving(const StepCostModel& cost, int decodes, const DraftCandidate& c, double remaining) {
  const double rows = std::max(1, decodes);
  const double t = cost.seconds(rows);
  const double price = cost.per_row_s() + std::max(0.0, c.draft_s);
  const double alpha = std::clamp(c.alpha, 0.0, 1.0);
  const double r = std::max(0.0, remaining);
  double best = 0, expected = 0, p = 1;
  for (int k = 1; k <= c.available; ++k) {
    p *= alpha;
    expected += p;  // E_k
    best = std::max(best, r / (1 + expected) * (expected * t / rows - k * price));
  }
  return best;
}

bool draft_model_pays(const StepCostModel& cost, int decodes, const DraftCandidate& model, double remaining, double feed_s,
                      const DraftCandidate& lookup, double share) {
  if (model.available <= 0) return false;
  if (!cost.fitted()) return decodes <= kUnfittedMaxDecodes && lookup.available <= 0;
  const double tokens = std::max(0.0, remaining) * std::clamp(share, 0.0, 1.0);
  return draft_saving(cost, decodes, model, tokens) - std::max(0.0, feed_s) >
         (lookup.available > 0 ? draft_saving(cost, decodes, lookup, tokens) : 0.0);
}

}  // namespace ragd::pipelines
