// Per-request noise and replications (simulate_replications): seeded determinism, the noise draws
// against the distribution they are drawn from, a closed loop whose time is written down by hand,
// and replications of an M/D/1 workload against Pollaczek-Khinchine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "ragd/sim/simulator.h"
#include "ragd/sim/workload.h"
#include "sim_test_util.h"

namespace ragd::sim {
namespace {

// A bimodal client side like the measured one (docs/benchmarks.md): most requests 0.3-0.6 ms,
// about a third 2-7 ms (strictly increasing here, so that the distribution has no atoms and the
// Kolmogorov-Smirnov distance below needs no ties).
const std::vector<double> kNetwork = {0.00028, 0.00032, 0.00034, 0.00036, 0.00037, 0.00038, 0.000385,
                                      0.0004,  0.00042, 0.00043, 0.00045, 0.00048, 0.00051, 0.00079,
                                      0.00215, 0.00317, 0.00348, 0.00397, 0.00427, 0.00474, 0.00676};

// Relative step deviations like the fitted ones (-2 % .. +7 %, mean about 0).
const std::vector<double> kStepNoise = {-0.021, -0.012, -0.005, 0.0, 0.006, 0.011, 0.073};

CostModel noisy_cost() {
  CostModel c = testing::simple_cost();
  c.serving.network_quantiles = kNetwork;
  c.serving.network_s = 0.000775;
  return c;
}

// The piecewise-linear distribution function of q at x (the inverse of CostModel::quantile_at).
double cdf(const std::vector<double>& q, double x) {
  if (x <= q.front()) return 0;
  if (x >= q.back()) return 1;
  const double step = 1.0 / static_cast<double>(q.size() - 1);
  for (size_t i = 0; i + 1 < q.size(); ++i)
    if (x < q[i + 1]) return step * (static_cast<double>(i) + (q[i + 1] > q[i] ? (x - q[i]) / (q[i + 1] - q[i]) : 1.0));
  return 1;
}

WorkloadSpec mixed_closed_loop() {
  WorkloadSpec w;
  w.prompt_tokens = {{{40, 0.75}, {600, 0.25}}};
  w.answer_tokens = {{{8, 0.75}, {32, 0.25}}};
  w.requests = 300;
  w.seed = 11;
  return w;
}

void expect_same(const SimResult& a, const SimResult& b) {
  ASSERT_EQ(a.records.size(), b.records.size());
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.steps, b.steps);
  for (size_t i = 0; i < a.records.size(); ++i) {
    ASSERT_EQ(a.records[i].ttft_ms, b.records[i].ttft_ms) << i;  // bit-identical
    ASSERT_EQ(a.records[i].e2e_ms, b.records[i].e2e_ms) << i;
    ASSERT_EQ(a.records[i].itl_ms, b.records[i].itl_ms) << i;
  }
}

TEST(Replications, SameSeedSameResultsOtherSeedsOtherPhases) {
  SimOptions o = testing::small_fleet();
  o.closed_loop_clients = 2;
  o.scheduler.max_batch_tokens = 256;
  CostModel cost = noisy_cost();
  cost.serving.wake_quantiles = {-0.001, 0.0, 0.001, 0.004, 0.02};
  cost.serving.step_noise_quantiles = kStepNoise;
  auto reqs = generate_requests(mixed_closed_loop());
  ASSERT_TRUE(reqs.ok());
  auto a = simulate_replications(o, cost, *reqs, 4, 7);
  auto b = simulate_replications(o, cost, *reqs, 4, 7);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), 4u);
  for (size_t r = 0; r < a->size(); ++r) expect_same((*a)[r], (*b)[r]);
  // Replication r is the run with noise seed 7 + r.
  SimOptions o2 = o;
  o2.noise_seed = 9;
  auto c = simulate(o2, cost, *reqs);
  ASSERT_TRUE(c.ok());
  expect_same((*a)[2], *c);
  // Other seeds move the phases: some request's TTFT differs between every two replications.
  for (size_t r = 1; r < a->size(); ++r) {
    int differ = 0;
    for (size_t i = 0; i < reqs->size(); ++i) differ += (*a)[0].records[i].ttft_ms != (*a)[r].records[i].ttft_ms;
    EXPECT_GT(differ, 100) << "replication " << r;
  }
  EXPECT_FALSE(simulate_replications(o, cost, *reqs, 0, 1).ok());
  EXPECT_FALSE(simulate_replications(o, cost, *reqs, 2, 0).ok());
}

TEST(Replications, NoSeedIsTheDeterministicRun) {
  // Noise seed 0 (the default): network_quantiles are not drawn and the wake-up sequence is not
  // shifted, so the rates' noise fields change nothing.
  SimOptions o = testing::small_fleet();
  o.closed_loop_clients = 2;
  CostModel plain = testing::simple_cost();
  plain.serving.network_s = 0.000775;
  plain.serving.wake_quantiles = {-0.001, 0.0, 0.001, 0.004, 0.02};
  CostModel noisy = plain;
  noisy.serving.network_quantiles = kNetwork;
  noisy.serving.step_noise_quantiles = kStepNoise;
  noisy.serving.run_speed_sd = 0.1;
  auto reqs = generate_requests(mixed_closed_loop());
  ASSERT_TRUE(reqs.ok());
  auto a = simulate(o, plain, *reqs);
  auto b = simulate(o, noisy, *reqs);
  ASSERT_TRUE(a.ok() && b.ok());
  expect_same(*a, *b);
  for (uint64_t id = 1; id < 100; ++id) {
    EXPECT_EQ(noisy.network_leg_s(id, 0), 0.000775);
    EXPECT_EQ(noisy.wake_draw(id, 0), plain.wake_draw(id));
    EXPECT_EQ(noisy.step_noise_factor(0, id, 0), 1.0);
    EXPECT_EQ(noisy.run_speed_factor(static_cast<int>(id), 0), 1.0);
  }
}

TEST(NoiseDraws, RunSpeedFactorIsLogNormal) {
  // 40,000 (seed, replica) factors: log(factor) / run_speed_sd against the standard normal
  // distribution function (KS below 0.01), its mean within 0.02 and its standard deviation within
  // 2 %; the same seed and replica give the same factor, and one seed's replicas are uncorrelated
  // with another seed's (|r| < 0.02). Without the field every factor is 1.
  CostModel c = testing::simple_cost();
  EXPECT_EQ(c.run_speed_factor(0, 7), 1.0);
  c.serving.run_speed_sd = 0.083;
  constexpr int kN = 40000;
  std::vector<double> x(kN), y(kN);
  for (int i = 0; i < kN; ++i) {
    const uint64_t seed = 1 + static_cast<uint64_t>(i / 4);
    x[i] = std::log(c.run_speed_factor(i % 4, seed)) / 0.083;
    y[i] = std::log(c.run_speed_factor(i % 4, seed + 100000)) / 0.083;
    ASSERT_EQ(c.run_speed_factor(i % 4, seed), c.run_speed_factor(i % 4, seed));
  }
  std::vector<double> s = x;
  std::sort(s.begin(), s.end());
  double ks = 0, mean = 0, var = 0, xy = 0, yy = 0, my = 0;
  for (int i = 0; i < kN; ++i) {
    const double f = 0.5 * std::erfc(-s[i] / std::sqrt(2.0));
    ks = std::max({ks, std::fabs(f - static_cast<double>(i) / kN), std::fabs(f - static_cast<double>(i + 1) / kN)});
    mean += x[i] / kN;
    my += y[i] / kN;
  }
  for (int i = 0; i < kN; ++i) {
    var += (x[i] - mean) * (x[i] - mean) / kN;
    xy += (x[i] - mean) * (y[i] - my);
    yy += (y[i] - my) * (y[i] - my);
  }
  EXPECT_LT(ks, 0.01);
  EXPECT_LT(std::fabs(mean), 0.02);
  EXPECT_NEAR(std::sqrt(var), 1.0, 0.02);
  EXPECT_LT(std::fabs(xy / std::sqrt(var * kN * yy)), 0.02);
}

TEST(NoiseDraws, NetworkDrawsFollowTheirDistribution) {
  // 40,000 requests' draws (both legs: 2 x network_leg_s) against the piecewise-linear
  // distribution: the largest gap between the empirical and the given distribution function
  // (Kolmogorov-Smirnov) below 0.01 (the 1 % critical value at n = 40,000 is 0.008), the mean within
  // 1 % of the distribution's; two seeds' draws of the same requests uncorrelated (|r| < 0.02).
  const CostModel c = noisy_cost();
  constexpr int kN = 40000;
  std::vector<double> x(kN), y(kN);
  for (int i = 0; i < kN; ++i) {
    x[i] = 2 * c.network_leg_s(static_cast<uint64_t>(i + 1), 3);
    y[i] = 2 * c.network_leg_s(static_cast<uint64_t>(i + 1), 4);
  }
  std::vector<double> s = x;
  std::sort(s.begin(), s.end());
  double ks = 0;
  for (int i = 0; i < kN; ++i) {
    const double f = cdf(kNetwork, s[i]);
    ks = std::max({ks, std::fabs(f - static_cast<double>(i) / kN), std::fabs(f - static_cast<double>(i + 1) / kN)});
  }
  EXPECT_LT(ks, 0.01);
  double mean = 0, want = 0;
  for (double v : x) mean += v / kN;
  for (size_t i = 0; i + 1 < kNetwork.size(); ++i) want += 0.5 * (kNetwork[i] + kNetwork[i + 1]) / (kNetwork.size() - 1);
  EXPECT_NEAR(mean, want, 0.01 * want);
  double my = 0;
  for (double v : y) my += v / kN;
  double sxy = 0, sxx = 0, syy = 0;
  for (int i = 0; i < kN; ++i) {
    sxy += (x[i] - mean) * (y[i] - my);
    sxx += (x[i] - mean) * (x[i] - mean);
    syy += (y[i] - my) * (y[i] - my);
  }
  EXPECT_LT(std::fabs(sxy / std::sqrt(sxx * syy)), 0.02);
  std::printf("network draws: KS %.4f, mean %.4f ms (distribution %.4f ms)\n", ks, mean * 1e3, want * 1e3);
}

TEST(NoiseDraws, StepNoiseFollowsItsDistribution) {
  // 40,000 steps' factors less 1 against the piecewise-linear distribution (KS below 0.01, as
  // above); another replica or seed draws independently (|r| < 0.02).
  CostModel c = testing::simple_cost();
  c.serving.step_noise_quantiles = kStepNoise;
  constexpr int kN = 40000;
  std::vector<double> x(kN), y(kN), z(kN);
  for (int i = 0; i < kN; ++i) {
    x[i] = c.step_noise_factor(0, static_cast<uint64_t>(i + 1), 5) - 1;
    y[i] = c.step_noise_factor(1, static_cast<uint64_t>(i + 1), 5) - 1;
    z[i] = c.step_noise_factor(0, static_cast<uint64_t>(i + 1), 6) - 1;
  }
  std::vector<double> s = x;
  std::sort(s.begin(), s.end());
  double ks = 0;
  for (int i = 0; i < kN; ++i) {
    const double f = cdf(kStepNoise, s[i]);
    ks = std::max({ks, std::fabs(f - static_cast<double>(i) / kN), std::fabs(f - static_cast<double>(i + 1) / kN)});
  }
  EXPECT_LT(ks, 0.01);
  auto corr = [&](const std::vector<double>& a, const std::vector<double>& b) {
    double ma = 0, mb = 0;
    for (int i = 0; i < kN; ++i) {
      ma += a[i] / kN;
      mb += b[i] / kN;
    }
    double sab = 0, saa = 0, sbb = 0;
    for (int i = 0; i < kN; ++i) {
      sab += (a[i] - ma) * (b[i] - mb);
      saa += (a[i] - ma) * (a[i] - ma);
      sbb += (b[i] - mb) * (b[i] - mb);
    }
    return sab / std::sqrt(saa * sbb);
  };
  EXPECT_LT(std::fabs(corr(x, y)), 0.02);
  EXPECT_LT(std::fabs(corr(x, z)), 0.02);
}

TEST(NoiseDraws, ShiftedWakeDrawsKeepTheirEvenSpread) {
  // A seed shifts the Weyl sequence by a fraction: 1,000 consecutive requests still cover the
  // distribution evenly (KS below 0.005, where independent draws would give about 0.04 at the
  // 1 % level), but each request draws another value than unseeded.
  CostModel c = testing::simple_cost();
  c.serving.wake_quantiles = {-0.001, 0.0, 0.001, 0.004, 0.02};
  const std::vector<double>& q = c.serving.wake_quantiles;
  for (uint64_t seed : {1u, 2u, 17u}) {
    std::vector<double> s;
    int moved = 0;
    for (uint64_t id = 1; id <= 1000; ++id) {
      s.push_back(c.wake_draw(id, seed));
      moved += std::fabs(s.back() - c.wake_draw(id)) > 1e-7;
    }
    std::sort(s.begin(), s.end());
    double ks = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      const double f = cdf(q, s[i]);
      ks = std::max({ks, std::fabs(f - static_cast<double>(i) / 1000), std::fabs(f - static_cast<double>(i + 1) / 1000)});
    }
    EXPECT_LT(ks, 0.005) << "seed " << seed;
    EXPECT_GT(moved, 900) << "seed " << seed;
  }
}

TEST(Replications, OneClientCyclesAreServicePlusTheirDraws) {
  // One client, a constant 20 ms single-step request: every request's end-to-end time is its
  // service times its step's noise factor and the replication's speed factor plus both its legs (2 x network_leg_s), and the run lasts
  // the sum of those cycles less the last request's way back, in every replication. (The service
  // is the dense part alone up to a 1e-8 s attention term, so the factor is applied to all of it.)
  SimOptions o = testing::small_fleet();
  o.scheduler.max_running = 1;
  o.closed_loop_clients = 1;
  WorkloadSpec w;
  w.prompt_tokens = {{{200, 1.0}}};
  w.answer_tokens = {{{1, 1.0}}};
  w.requests = 400;
  CostModel cost = noisy_cost();
  cost.serving.step_noise_quantiles = kStepNoise;
  cost.serving.run_speed_sd = 0.08;  // each replication's one replica draws its own speed
  const double service = cost.dense_s(200) + cost.prefill_attention_s(0, 200);
  auto reqs = generate_requests(w);
  ASSERT_TRUE(reqs.ok());
  auto reps = simulate_replications(o, cost, *reqs, 3, 21);
  ASSERT_TRUE(reps.ok());
  for (size_t r = 0; r < reps->size(); ++r) {
    const uint64_t seed = 21 + r;
    double total = 0;
    uint64_t step = 0;
    for (const SimRecord& x : (*reps)[r].records) {
      const double legs = 2 * cost.network_leg_s(x.id, seed);
      // request i runs step i, at the replication's speed
      const double own = service * cost.step_noise_factor(0, ++step, seed) * cost.run_speed_factor(0, seed);
      ASSERT_NEAR(x.e2e_ms, (own + legs) * 1e3, 1e-6) << x.id;
      ASSERT_EQ(x.queue_ms, 0.0);
      total += own + legs;
    }
    total -= cost.network_leg_s((*reps)[r].records.back().id, seed);
    EXPECT_NEAR((*reps)[r].duration_s, total, 1e-9) << "replication " << r;
  }
}

TEST(Replications, Md1MedianOverReplicationsMatchesPollaczekKhinchine) {
  // M/D/1 (queueing_test.cpp) with the client's side drawn per request: a Poisson process whose
  // points are each displaced by an independent delay is again a Poisson process at the same rate,
  // so the queue at the replica is still M/D/1. The median over 5 replications of the mean wait
  // in queue (admission less arrival at the scheduler) matches Wq = rho S / (2 (1 - rho)) within
  // the tolerance queueing_test.cpp uses for one run of 200,000 requests at rho 0.7 (6 %).
  const CostModel cost = noisy_cost();
  const double service_s = cost.dense_s(200) + cost.prefill_attention_s(0, 200);
  SimOptions o = testing::small_fleet();
  o.scheduler.max_running = 1;
  o.scheduler.max_batch_tokens = 512;
  o.max_queue = 1 << 30;
  o.keep_itl = false;
  WorkloadSpec w;
  w.prompt_tokens = {{{200, 1.0}}};
  w.answer_tokens = {{{1, 1.0}}};
  const double rho = 0.7;
  w.rate = rho / service_s;
  w.requests = 200000;
  w.seed = 7;
  auto reqs = generate_requests(w);
  ASSERT_TRUE(reqs.ok());
  auto reps = simulate_replications(o, cost, *reqs, 5, 1);
  ASSERT_TRUE(reps.ok());
  std::vector<double> waits;
  for (const SimResult& r : *reps) {
    double wait = 0;
    for (const SimRecord& x : r.records) {
      ASSERT_TRUE(x.ok);
      wait += x.queue_ms / 1e3;
    }
    waits.push_back(wait / static_cast<double>(r.records.size()));
  }
  const Spread s = spread_of(waits);
  const double expected = rho * service_s / (2 * (1 - rho));
  EXPECT_NEAR(s.median, expected, 0.06 * expected);
  EXPECT_LE(s.p10, s.median);
  EXPECT_LE(s.median, s.p90);
  std::printf("rho %.2f: median of 5 mean waits %.4f ms (p10 %.4f, p90 %.4f), M/D/1 %.4f ms (%+.2f %%)\n", rho,
              s.median * 1e3, s.p10 * 1e3, s.p90 * 1e3, expected * 1e3, 100 * (s.median / expected - 1));
}

TEST(Replications, SpreadOfInterpolatesLikeNumpy) {
  // numpy.percentile([3, 1, 4, 1, 5, 9, 2, 6, 5, 3], [10, 50, 90]) = [1.0, 3.5, 6.3].
  const Spread s = spread_of({3, 1, 4, 1, 5, 9, 2, 6, 5, 3});
  EXPECT_NEAR(s.p10, 1.0, 1e-12);
  EXPECT_NEAR(s.median, 3.5, 1e-12);
  EXPECT_NEAR(s.p90, 6.3, 1e-12);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 9);
  const Spread one = spread_of({2.5});
  EXPECT_EQ(one.median, 2.5);
  EXPECT_EQ(one.p10, 2.5);
  EXPECT_EQ(spread_of({}).median, 0);
}

}  // namespace
}  // namespace ragd::sim
