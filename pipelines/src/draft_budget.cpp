#include "draft_budget.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>

namespace ragd::pipelines {

void StepCostModel::observe(int rows, double seconds) {
  if (rows <= 0 || !(seconds > 0) || !std::isfinite(seconds)) return;
  if (window_.size() < static_cast<size_t>(kWindow)) {
    window_.push_back({rows, seconds});
  } else {
    window_[next_] = {rows, seconds};
    next_ = (next_ + 1) % kWindow;
  }
  refit();
}

void StepCostModel::refit() {
  if (window_.size() < static_cast<size_t>(kMinSteps)) return;
  // The median step time of each row count, weighted by its steps: a step slowed by something
  // else on the machine (another process, a page fault) is one-sided noise that a plain least
  // squares fit would read as cost.
  std::map<int, std::vector<double>> by_rows;
  for (const Obs& o : window_) by_rows[o.rows].push_back(o.seconds);
  // Every step had the same row count: the slope is not identifiable; the last fit stays.
  if (by_rows.size() < 2) return;
  double sw = 0, sx = 0, sy = 0;
  std::vector<std::pair<double, double>> points;  // (rows, median seconds), weight = steps
  std::vector<double> weights;
  for (auto& [rows, t] : by_rows) {
    std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(t.size() / 2), t.end());
    const double w = static_cast<double>(t.size());
    points.emplace_back(rows, t[t.size() / 2]);
    weights.push_back(w);
    sw += w, sx += w * rows, sy += w * t[t.size() / 2];
  }
  const double mx = sx / sw, my = sy / sw;
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    const double dx = points[i].first - mx;
    sxx += weights[i] * dx * dx;
    sxy += weights[i] * dx * (points[i].second - my);
  }
  // A slope below zero is noise (a step never gets cheaper with rows); the fixed part then takes
  // the mean. Likewise a negative intercept: the rows take it all.
  double b = std::max(0.0, sxy / sxx);
  double a = my - b * mx;
  if (a < 0) a = 0, b = my / mx;
  fixed_ = a;
  per_row_ = b;
  fitted_ = true;
}

std::vector<int> choose_draft_lengths(const StepCostModel& cost, int decodes, std::span<const DraftCandidate> candidates) {
  std::vector<int> take(candidates.size(), 0);
  if (!cost.fitted()) {
    for (size_t i = 0; i < candidates.size(); ++i) take[i] = std::max(0, candidates[i].available);
    return take;
  }
  // Draft tokens by expected value alpha^j, highest first; each run's tokens come in order since
  // alpha^j falls with j (alpha <= 1).
  struct Next {
    double value;
    size_t run;
    bool operator<(const Next& o) const { return value < o.value || (value == o.value && run > o.run); }
  };
  std::priority_queue<Next> heap;
  for (size_t i = 0; i < candidates.size(); ++i)
    if (candidates[i].available > 0) heap.push({std::clamp(candidates[i].alpha, 0.0, 1.0), i});
  double tokens = std::max(1, decodes);
  double rows = tokens;
  const double b = cost.per_row_s();
  while (!heap.empty()) {
    const Next n = heap.top();
    heap.pop();
    // Adding the row raises tokens/second iff value / b > tokens / time.
    if (n.value * cost.seconds(rows) <= tokens * b) break;  // the rest are worth less still
    ++take[n.run];
    tokens += n.value;
    rows += 1;
    const DraftCandidate& c = candidates[n.run];
    if (take[n.run] < c.available) heap.push({n.value * std::clamp(c.alpha, 0.0, 1.0), n.run});
  }
  return take;
}

}  // namespace ragd::pipelines
