// Fitting an adaptive pipeline's profile (tools/ragctl/adapt_fit.h) on constructed samples: the
// signal that decides right answers gets the weight and an AUC of 1, a signal of noise does not;
// TTFT's idle time and time per run ahead come back; separable answers stay finite.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "adapt_fit.h"

namespace ragd::tools {
namespace {

double predict(const pipelines::AdaptModel& m, const FitSample& s) {
  double z = m.quality[0];
  for (size_t j = 0; j < pipelines::kNumAdaptSignals; ++j) z += m.quality[j + 1] * s.signals[j];
  return 1.0 / (1.0 + std::exp(-z));
}

TEST(AdaptFit, TheDecidingSignalGetsTheWeight) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<FitSample> xs;
  for (int i = 0; i < 400; ++i) {
    FitSample s;
    s.signals = {u(rng) * 0.3, u(rng) < 0.5 ? 1.0 : 0.0, u(rng), static_cast<double>(8 + i % 9)};
    // Right with probability sigmoid(30 * (margin - 0.1)): the margin decides, the rest is noise.
    s.right = u(rng) < 1.0 / (1.0 + std::exp(-30.0 * (s.signals[0] - 0.1)));
    s.ttft_ms = 20;
    xs.push_back(s);
  }
  const CandidateFit f = fit_candidate(xs);
  EXPECT_GT(f.signals[0].weight, 1.0);
  EXPECT_GT(f.signals[0].auc, 0.85);
  for (size_t j = 1; j < pipelines::kNumAdaptSignals; ++j) {
    EXPECT_LT(std::abs(f.signals[j].weight), 0.5) << j;
    EXPECT_NEAR(f.signals[j].auc, 0.5, 0.1) << j;
  }
  EXPECT_LT(f.log_loss, f.base_log_loss);
  // In raw units: low margin -> likely wrong, high margin -> likely right.
  FitSample lo = xs[0], hi = xs[0];
  lo.signals[0] = 0.0;
  hi.signals[0] = 0.3;
  EXPECT_LT(predict(f.model, lo), 0.3);
  EXPECT_GT(predict(f.model, hi), 0.9);
  EXPECT_EQ(f.model.fit_samples, 400);
}

TEST(AdaptFit, SeparableAnswersStayFinite) {
  std::vector<FitSample> xs;
  for (int i = 0; i < 60; ++i) {
    FitSample s;
    s.signals = {static_cast<double>(i % 2), 0, 0, 10};
    s.right = i % 2 == 1;  // the signal separates them perfectly
    xs.push_back(s);
  }
  const CandidateFit f = fit_candidate(xs);
  for (double w : f.model.quality) EXPECT_TRUE(std::isfinite(w) && std::abs(w) < 50) << w;
  EXPECT_DOUBLE_EQ(f.signals[0].auc, 1.0);
  FitSample zero = xs[0], one = xs[1];
  EXPECT_LT(predict(f.model, zero), 0.2);
  EXPECT_GT(predict(f.model, one), 0.8);
  // All right: a constant model near 1, finite.
  for (auto& s : xs) s.right = true;
  const CandidateFit all = fit_candidate(xs);
  EXPECT_DOUBLE_EQ(all.model.fit_accuracy, 1.0);
  EXPECT_GT(predict(all.model, xs[0]), 0.95);
  EXPECT_TRUE(std::isfinite(all.model.quality[0]));
}

TEST(AdaptFit, TtftIdleAndPerRunAhead) {
  std::vector<FitSample> xs;
  for (int ahead : {0, 0, 3, 3, 15, 15}) {
    FitSample s;
    s.ahead = ahead;
    s.ttft_ms = 25 + 12 * ahead + (xs.size() % 2 ? 1 : -1);
    xs.push_back(s);
  }
  CandidateFit f = fit_candidate(xs);
  EXPECT_NEAR(f.model.ttft_idle_ms, 25, 1e-9);
  EXPECT_NEAR(f.model.ttft_per_run_ms, 12, 1e-9);
  // One load level only: a run ahead is taken to cost one service time.
  for (auto& s : xs) s.ahead = 0;
  f = fit_candidate(xs);
  EXPECT_NEAR(f.model.ttft_idle_ms, f.model.ttft_per_run_ms, 1e-9);
}

TEST(AdaptFit, Auc) {
  EXPECT_DOUBLE_EQ(auc({0.1, 0.2, 0.3, 0.4}, {false, false, true, true}), 1.0);
  EXPECT_DOUBLE_EQ(auc({0.1, 0.2, 0.3, 0.4}, {true, true, false, false}), 0.0);
  EXPECT_DOUBLE_EQ(auc({1, 1, 1, 1}, {true, false, true, false}), 0.5);
  EXPECT_DOUBLE_EQ(auc({0.1, 0.2}, {true, true}), 0.5);
  EXPECT_DOUBLE_EQ(auc({0.1, 0.2, 0.2, 0.3}, {false, true, false, true}), 0.875);
}

}  // namespace
}  // namespace ragd::tools
