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

// Linear quantile regression against naive references: the pinball loss it reaches is no worse
// than the brute-force best constant, the true parameters' or any nearby point's (the loss is
// convex: a minimum is the minimum), and it recovers a known conditional quantile.
std::vector<double> losses_of(const QuantileFit& f, const std::vector<std::vector<FitSample>>& xs, double tau,
                              const std::vector<std::array<double, 3>>& models) {
  std::vector<double> y, pred;
  for (size_t c = 0; c < xs.size(); ++c)
    for (const auto& s : xs[c]) {
      y.push_back(s.ttft_ms);
      pred.push_back(predict_ttft_quantile(models[c], s));
    }
  (void)f;
  return {pinball_loss(y, pred, tau)};
}

TEST(AdaptFitQuantile, PinballLossByHand) {
  // tau 0.9: under-prediction by 10 costs 9, over-prediction by 10 costs 1.
  EXPECT_DOUBLE_EQ(pinball_loss({20, 0}, {10, 10}, 0.9), (9.0 + 1.0) / 2);
  EXPECT_DOUBLE_EQ(pinball_loss({}, {}, 0.9), 0.0);
}

TEST(AdaptFitQuantile, WithoutLoadItIsTheEmpiricalQuantile) {
  std::mt19937 rng(11);
  std::lognormal_distribution<double> ttft(3.5, 0.4);
  std::vector<std::vector<FitSample>> xs(1);
  for (int i = 0; i < 301; ++i) {
    FitSample s;
    s.ttft_ms = ttft(rng);
    xs[0].push_back(s);
  }
  for (double tau : {0.5, 0.9, 0.99}) {
    const QuantileFit f = fit_ttft_quantile(xs, tau);
    EXPECT_EQ(f.models[0][1], 0);  // ahead and work never vary: no slope
    EXPECT_EQ(f.models[0][2], 0);
    // Naive reference: the best constant among the observed values (a minimizer of the pinball
    // loss over constants is always one of them).
    double best = 1e300;
    std::vector<double> y;
    for (const auto& s : xs[0]) y.push_back(s.ttft_ms);
    for (double v : y) best = std::min(best, pinball_loss(y, std::vector<double>(y.size(), v), tau));
    EXPECT_LE(f.loss, best * (1 + 1e-6)) << tau;
    EXPECT_NEAR(f.coverage[0], tau, 2.0 / 301) << tau;
  }
}

TEST(AdaptFitQuantile, RecoversAKnownConditionalQuantile) {
  // TTFT = a_c + 4 * ahead + 10 * work/1000 + Exp(mean 2 + ahead): the 0.9 quantile is
  // a_c + 2 ln 10 + (4 + ln 10) * ahead + 10 * work/1000, linear in both.
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> ahead(0, 15);
  std::uniform_real_distribution<double> work(0, 8000);
  const double a[2] = {20, 60};
  std::vector<std::vector<FitSample>> xs(2);
  for (size_t c = 0; c < 2; ++c)
    for (int i = 0; i < 4000; ++i) {
      FitSample s;
      s.ahead = ahead(rng);
      s.work_ahead = work(rng);
      std::exponential_distribution<double> noise(1.0 / (2.0 + s.ahead));
      s.ttft_ms = a[c] + 4 * s.ahead + 10 * s.work_ahead / 1000 + noise(rng);
      xs[c].push_back(s);
    }
  const double tau = 0.9;
  const QuantileFit f = fit_ttft_quantile(xs, tau);
  std::vector<std::array<double, 3>> truth(2);
  for (size_t c = 0; c < 2; ++c) {
    truth[c] = {a[c] + 2 * std::log(10.0), 4 + std::log(10.0), 10};
    EXPECT_NEAR(f.models[c][0], truth[c][0], 1.5) << c;
    EXPECT_NEAR(f.models[c][1], truth[c][1], 0.25) << c;
    EXPECT_NEAR(f.models[c][2], truth[c][2], 0.4) << c;
    EXPECT_NEAR(f.coverage[c], tau, 0.02) << c;
  }
  // In-sample it is at least as good as the truth, and no nudge of a parameter improves it.
  EXPECT_LE(f.loss, losses_of(f, xs, tau, truth)[0] + 1e-9);
  for (size_t c = 0; c < 2; ++c)
    for (size_t k = 0; k < 3; ++k)
      for (double d : {-0.05, 0.05}) {
        auto m = f.models;
        if (k == 0) m[c][0] += d;
        else for (auto& mm : m) mm[k] += d;  // the slopes are shared
        EXPECT_LE(f.loss, losses_of(f, xs, tau, m)[0] + 1e-7) << c << " " << k << " " << d;
      }
}

TEST(AdaptFitQuantile, ANegativeSlopeIsDroppedAndTheRestRefitted) {
  // TTFT falls with the work ahead (a spurious relation): that slope is 0, the runs-ahead one stays.
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> ahead(0, 10);
  std::uniform_real_distribution<double> jitter(0, 5);
  std::vector<std::vector<FitSample>> xs(1);
  for (int i = 0; i < 500; ++i) {
    FitSample s;
    s.ahead = ahead(rng);
    s.work_ahead = 1000.0 * (i % 7);
    s.ttft_ms = 30 + 6 * s.ahead - 2 * s.work_ahead / 1000 + jitter(rng);
    xs[0].push_back(s);
  }
  const QuantileFit f = fit_ttft_quantile(xs, 0.9);
  EXPECT_EQ(f.models[0][2], 0);
  EXPECT_GT(f.models[0][1], 4);
  EXPECT_NEAR(f.coverage[0], 0.9, 0.03);
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
