// Shared by the step budget's tests (speculative_decoding_test.cpp: n-gram drafts;
// model_drafter_test.cpp: drafts that cost a draft model's time): step-cost models fitted to exact
// linear step times, and the brute-force reference the budget's choice is held against.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <span>
#include <vector>

#include "draft_budget.h"

namespace ragd::pipelines::draft_testing {

// A StepCostModel fitted to 20 steps of 1..max_rows logit rows costing exactly fixed + per_row ·
// rows seconds.
inline StepCostModel fitted_cost(double fixed, double per_row, int max_rows = 5) {
  StepCostModel m;
  for (int i = 0; i < 20; ++i) m.observe(0, 1 + i % max_rows, fixed + per_row * (1 + i % max_rows));
  return m;
}

// A random one: fixed 0.2 .. 10.1 ms, per row 0.01 .. 1 ms (two draws of `rng`).
struct RandomCost {
  double fixed = 0, per_row = 0;
  StepCostModel model;
};
inline RandomCost random_fitted_cost(std::mt19937_64& rng) {
  RandomCost c;
  c.fixed = 1e-3 * (0.2 + static_cast<double>(rng() % 100) / 10.0);
  c.per_row = 1e-4 * (0.1 + static_cast<double>(rng() % 100) / 10.0);
  c.model = fitted_cost(c.fixed, c.per_row);
  return c;
}

// Expected tokens per modelled second of a step that decodes `decodes` runs and verifies the first
// take[i] tokens of candidate i (token j accepted with probability alpha^j; each costs a row and
// its draft_s): what choose_draft_lengths maximises.
inline double expected_rate(const StepCostModel& m, int decodes, std::span<const DraftCandidate> c,
                            const std::vector<int>& take) {
  double tokens = decodes, rows = decodes, drafting = 0;
  for (size_t i = 0; i < c.size(); ++i)
    for (int j = 1; j <= take[i]; ++j) tokens += std::pow(c[i].alpha, j), rows += 1, drafting += c[i].draft_s;
  return tokens / (m.seconds(rows) + drafting);
}

// The best expected_rate over every combination of prefix lengths (brute force; small cases).
inline double best_rate(const StepCostModel& m, int decodes, std::span<const DraftCandidate> c) {
  double best = 0;
  std::vector<int> take(c.size(), 0);
  std::function<void(size_t)> all = [&](size_t i) {
    if (i == c.size()) return void(best = std::max(best, expected_rate(m, decodes, c, take)));
    for (int l = 0; l <= c[i].available; ++l) take[i] = l, all(i + 1);
  };
  all(0);
  return best;
}

}  // namespace ragd::pipelines::draft_testing
