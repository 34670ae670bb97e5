// What `ragctl calibrate` takes from its runs (tools/ragctl/calibration_runs.h), on hand-built bench
// results: the one-client service rate, the share of arrivals that found the replica busy, the prompt
// head's length, the metrics its self-check compares and the members it adds to the rates file.
#include <gtest/gtest.h>

#include <simdjson.h>

#include <cmath>
#include <random>

#include "calibration_runs.h"

namespace ragd::tools {
namespace {

BenchSample sample(double sent_s, double ttft_ms, double e2e_ms, int prompt = 0, int reused = 0, bool ok = true) {
  BenchSample s;
  s.ok = ok;
  s.sent_s = sent_s;
  s.ttft_ms = ttft_ms;
  s.e2e_ms = e2e_ms;
  s.tokens = 16;
  s.has_usage = prompt > 0;
  s.prompt_tokens = prompt;
  s.reused_hbm = reused;
  return s;
}

TEST(CalibrationRuns, ServiceRateLeavesOutEachRunsColdRequestAndFailures) {
  BenchRun a, b;
  a.samples = {sample(0, 50, 1000), sample(1, 10, 100), sample(2, 10, 300), sample(3, 0, 5, 0, 0, false)};
  b.samples = {sample(0, 50, 900), sample(1, 10, 200)};
  // 100, 300 and 200 ms: 200 ms each on average, 5 requests per second.
  EXPECT_DOUBLE_EQ(one_client_service_rate({&a, &b}), 5.0);
  BenchRun cold_only;
  cold_only.samples = {sample(0, 50, 1000)};
  EXPECT_EQ(one_client_service_rate({&cold_only}), 0.0);
}

TEST(CalibrationRuns, RunSpeedIsThePooledSdOfLogRunTimes) {
  // Random groups of repeated runs: each run's mean e2e (failed requests left out) against the
  // pooled standard deviation computed here by hand; a group of one run adds nothing.
  std::mt19937_64 rng(55);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::vector<BenchRun>> runs(4);
  double squares = 0;
  long dof = 0;
  for (size_t g = 0; g < runs.size(); ++g) {
    const int n = g == 3 ? 1 : 2 + static_cast<int>(g);  // 2, 3, 4 runs, then a lone one
    std::vector<double> logs;
    for (int k = 0; k < n; ++k) {
      BenchRun r;
      double sum = 0;
      const int reqs = 3 + static_cast<int>(rng() % 20);
      for (int i = 0; i < reqs; ++i) {
        const double e2e = 50 + 500 * u(rng);
        r.samples.push_back(sample(i, 10, e2e));
        sum += e2e;
      }
      r.samples.push_back(sample(reqs, 0, 1e6, 0, 0, /*ok=*/false));
      logs.push_back(std::log(sum / reqs));
      runs[g].push_back(r);
    }
    if (n < 2) continue;
    double mean = 0;
    for (double x : logs) mean += x / n;
    for (double x : logs) squares += (x - mean) * (x - mean);
    dof += n - 1;
  }
  std::vector<std::vector<const BenchRun*>> groups;
  for (auto& g : runs) {
    groups.emplace_back();
    for (BenchRun& r : g) groups.back().push_back(&r);
  }
  EXPECT_NEAR(run_speed_sd(groups), std::sqrt(squares / dof), 1e-12);
  // Two runs of the same speed: 0; one run of each kind: 0 (nothing to compare).
  BenchRun a, b;
  a.samples = {sample(0, 10, 100), sample(1, 10, 300)};
  b.samples = {sample(0, 10, 200), sample(1, 10, 200)};
  EXPECT_EQ(run_speed_sd({{&a, &b}}), 0.0);
  EXPECT_EQ(run_speed_sd({{&a}, {&b}}), 0.0);
  // Two runs 20 % apart: |log 1.2| / sqrt(2).
  BenchRun c;
  c.samples = {sample(0, 10, 240)};
  EXPECT_NEAR(run_speed_sd({{&b, &c}}), std::log(1.2) / std::sqrt(2.0), 1e-12);
}

TEST(CalibrationRuns, BusyArrivalsAreTheOnesSentWhileAnotherWasInFlight) {
  BenchRun r;
  // [0, 0.125), [0.0625, 0.09375) inside it, [0.09375, 0.19375) still inside the first, [0.25, 0.5),
  // [0.5, 0.6) starting exactly when the previous one ended (not busy); unordered on purpose.
  r.samples = {sample(0.5, 1, 100), sample(0, 1, 125), sample(0.09375, 1, 100), sample(0.0625, 1, 31.25),
               sample(0.25, 1, 250)};
  EXPECT_DOUBLE_EQ(busy_arrival_share(r), 2.0 / 5.0);
  r.samples.push_back(sample(-1, 1, 10));  // an older file without send instants
  EXPECT_EQ(busy_arrival_share(r), -1.0);
}

TEST(CalibrationRuns, PrefixIsTheLeastPositiveReuse) {
  BenchRun r;
  r.samples = {sample(0, 1, 2, 900, 0), sample(0, 1, 2, 880, 45), sample(0, 1, 2, 870, 412), sample(0, 1, 2, 860, 45),
               sample(0, 1, 2, 850, 7, false)};  // a failed request counts for nothing
  EXPECT_EQ(prefix_tokens(r), 45);
  r.samples = {sample(0, 1, 2, 900, 0)};
  EXPECT_EQ(prefix_tokens(r), 0);
}

TEST(CalibrationRuns, MetricsAndTheirComparison) {
  BenchRun r;
  r.samples = {sample(0, 10, 50, 100, 0), sample(0, 20, 60, 300, 150), sample(0, 99, 99, 500, 500, false)};
  r.wall_s = 0.5;
  summarize_bench_run(r);
  const RunMetrics m = run_metrics(r);
  EXPECT_DOUBLE_EQ(m.ttft_mean_ms, 15.0);
  EXPECT_DOUBLE_EQ(m.hit_pct, 100.0 * 150 / 400);  // prompt tokens reused / prompt tokens, finished requests
  EXPECT_DOUBLE_EQ(m.req_per_s, r.req_per_s);
  EXPECT_DOUBLE_EQ(m.ttft_p50_ms, r.ttft_ms.p50);

  RunMetrics a, b;
  a.ttft_p50_ms = 10, a.ttft_mean_ms = 20, a.req_per_s = 4, a.hit_pct = 50, a.ttft_p99_ms = 100, a.tpot_p50_ms = 2;
  b = a;
  b.ttft_p50_ms = 30, b.ttft_mean_ms = 40, b.req_per_s = 8, b.hit_pct = 60, b.ttft_p99_ms = 300, b.tpot_p50_ms = 4;
  const RunMetrics mean = mean_metrics({a, b});
  EXPECT_DOUBLE_EQ(mean.ttft_p50_ms, 20);
  EXPECT_DOUBLE_EQ(mean.hit_pct, 55);

  RunMetrics sim = mean;
  sim.ttft_p50_ms = 21.9;  // +9.5 %: within 10 %
  sim.ttft_mean_ms = 33.3;  // +11 %: a miss
  sim.req_per_s = 6;
  sim.hit_pct = 52.5;       // -2.5 points: a miss
  sim.ttft_p99_ms = 400;    // +100 %: shown, not counted
  sim.tpot_p50_ms = 1;
  int misses = 0;
  for (const MetricCheck& c : compare_metrics(mean, sim)) {
    misses += !c.within;
    if (c.metric == "ttft_p50_ms") {
      EXPECT_TRUE(c.within && c.counted) << c.error;
    } else if (c.metric == "ttft_mean_ms") {
      EXPECT_FALSE(c.within) << c.error;
    } else if (c.metric == "ttft_p99_ms") {
      EXPECT_TRUE(c.within && !c.counted) << c.error;
    } else if (c.metric == "tpot_p50_ms") {
      EXPECT_FALSE(c.counted);
    } else if (c.metric == "hit_pct") {
      EXPECT_DOUBLE_EQ(c.error, -2.5);
      EXPECT_FALSE(c.within);
    } else if (c.metric == "req_per_s") {
      EXPECT_NEAR(c.error, 0.0, 1e-12);
    }
  }
  EXPECT_EQ(misses, 2);
}

TEST(CalibrationRuns, MembersAreAppendedToTheObject) {
  auto parsed = [](const std::string& text, const char* key) {
    simdjson::dom::parser p;
    simdjson::dom::element e;
    int64_t v = -1;
    EXPECT_EQ(p.parse(text).get(e), simdjson::SUCCESS) << text;
    return e[key].get(v) == simdjson::SUCCESS ? v : -1;
  };
  auto r = append_json_members("{\n \"a\": 1,\n \"b\": {\"c\": [1, 2]}\n}\n", "\"calibration\": 7");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(parsed(*r, "a"), 1);
  EXPECT_EQ(parsed(*r, "calibration"), 7);
  r = append_json_members("{}", "\"x\": 3");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(parsed(*r, "x"), 3);
  EXPECT_FALSE(append_json_members("[1, 2]", "\"x\": 3").ok());
  EXPECT_FALSE(append_json_members("{\"a\": ", "\"x\": 3").ok());
}

}  // namespace
}  // namespace ragd::tools
