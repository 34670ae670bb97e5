// ragctl simulate --real: a prediction beside measured runs (measured_compare.h), against values
// computed here by hand from random runs.
#include "measured_compare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include <unistd.h>

namespace ragd::tools {
namespace {

BenchRun random_run(std::mt19937_64& rng, double* prompt_out, double* reused_out) {
  BenchRun r;
  r.label = "r";
  std::uniform_real_distribution<double> u(0, 1);
  r.ttft_ms.p50 = 20 + 80 * u(rng);
  r.ttft_ms.p99 = r.ttft_ms.p50 * (1.5 + u(rng));
  r.req_per_s = 0.5 + 5 * u(rng);
  r.tpot_ms.p50 = 3 + 5 * u(rng);
  r.has_samples = true;
  double prompt = 0, reused = 0;
  const int n = 3 + static_cast<int>(rng() % 37);
  for (int i = 0; i < n; ++i) {
    BenchSample s;
    s.ok = rng() % 7 != 0;  // failed requests do not count in the hit rate
    s.has_usage = s.ok;
    s.ttft_ms = s.ok ? 5 + static_cast<double>(rng() % 100) : -1;
    s.prompt_tokens = 50 + static_cast<int>(rng() % 700);
    s.reused_hbm = static_cast<int>(rng() % (s.prompt_tokens / 2 + 1));
    s.reused_dram = static_cast<int>(rng() % (s.prompt_tokens / 3 + 1));
    s.reused_ssd = s.ok ? 0 : 17;
    if (s.ok) {
      prompt += s.prompt_tokens;
      reused += s.reused_hbm + s.reused_dram;
    }
    r.samples.push_back(s);
  }
  *prompt_out = prompt;
  *reused_out = reused;
  return r;
}

TEST(MeasuredCompare, ErrorsSpreadAndTargetsAgainstHandComputation) {
  std::mt19937_64 rng(2026);
  // failed requests and requests without a first token are left out of the hit rate (run_metrics)
  for (int trial = 0; trial < 50; ++trial) {
    const int runs = 1 + trial % 5;
    std::vector<RunMetrics> real;
    for (int k = 0; k < runs; ++k) {
      double prompt = 0, reused = 0;
      const BenchRun r = random_run(rng, &prompt, &reused);
      real.push_back(run_metrics(r));
      EXPECT_NEAR(real.back().hit_pct, prompt > 0 ? 100 * reused / prompt : 0, 1e-9);
      EXPECT_EQ(real.back().ttft_p99_ms, r.ttft_ms.p99);
    }
    std::uniform_real_distribution<double> f(0.7, 1.3);
    RunMetrics pred = real[0];
    pred.ttft_p50_ms *= f(rng);
    pred.ttft_p99_ms *= f(rng);
    pred.req_per_s *= f(rng);
    pred.hit_pct += 6 * (f(rng) - 1) / 0.3;
    const std::vector<CompareRow> rows = compare_with_real(pred, real);
    ASSERT_EQ(rows.size(), 5u);
    const double RunMetrics::*fields[] = {&RunMetrics::ttft_p50_ms, &RunMetrics::ttft_p99_ms,
                                            &RunMetrics::req_per_s, &RunMetrics::tpot_p50_ms,
                                            &RunMetrics::hit_pct};
    const double targets[] = {10, 20, 10, 0, 2};
    for (size_t m = 0; m < 5; ++m) {
      double sum = 0, lo = 1e300, hi = -1e300;
      for (const RunMetrics& p : real) {
        sum += p.*fields[m];
        lo = std::min(lo, p.*fields[m]);
        hi = std::max(hi, p.*fields[m]);
      }
      const double mean = sum / runs;
      const CompareRow& r = rows[m];
      ASSERT_EQ(r.real.size(), static_cast<size_t>(runs));
      EXPECT_NEAR(r.real_mean, mean, 1e-9 * std::abs(mean));
      const bool points = m == 4;
      const double err = points ? pred.*fields[m] - mean : 100 * (pred.*fields[m] / mean - 1);
      const double spread = points ? (hi - lo) / 2 : 100 * (hi - lo) / 2 / mean;
      EXPECT_NEAR(r.error, err, 1e-9);
      EXPECT_NEAR(r.spread, spread, 1e-9);
      EXPECT_EQ(r.target, targets[m]);
      EXPECT_EQ(r.within, targets[m] == 0 || std::abs(err) <= targets[m]) << r.metric;
    }
  }
}

TEST(MeasuredCompare, TheTableMarksMissesAndTheRunsOwnSpread) {
  auto m = [](double p50, double p99, double rps, double hit) {
    RunMetrics r;
    r.ttft_p50_ms = p50, r.ttft_p99_ms = p99, r.req_per_s = rps, r.tpot_p50_ms = 5, r.hit_pct = hit;
    return r;
  };
  const RunMetrics a = m(100, 200, 4, 50), b = m(140, 260, 4.4, 53);
  RunMetrics pred = m(131, 230, 4.2, 51);  // p50 +9.2 % of 120: within; hit -0.5 pt
  auto rows = compare_with_real(pred, {a, b});
  EXPECT_TRUE(rows[0].within);
  pred.ttft_p50_ms = 138;  // +15 %: missed, but inside the runs' +-16.7 % spread
  rows = compare_with_real(pred, {a, b});
  EXPECT_FALSE(rows[0].within);
  const std::string t = format_comparison(rows, "the deterministic run");
  EXPECT_NE(t.find("MISSED 10 %"), std::string::npos) << t;
  EXPECT_NE(t.find("inside the real runs' spread"), std::string::npos) << t;
  EXPECT_NE(t.find("2 runs"), std::string::npos) << t;
  pred.ttft_p50_ms = 200;  // +67 %: outside the spread
  rows = compare_with_real(pred, {a, b});
  EXPECT_EQ(format_comparison(rows, "x").find("inside the real runs' spread"), std::string::npos);
  EXPECT_NE(comparison_json(rows).find("\"within\":false"), std::string::npos);
}

TEST(MeasuredCompare, RealRunFilesAreRefusedByName) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("measured_compare_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const BenchResult& br) {
    std::ofstream(dir / name) << bench_result_json(br);
    return (dir / name).string();
  };
  std::mt19937_64 rng(5);
  double p = 0, r = 0;
  BenchResult one;
  one.runs.push_back(random_run(rng, &p, &r));
  summarize_bench_run(one.runs[0]);
  BenchResult two = one;
  two.runs.push_back(one.runs[0]);
  const std::string good = write("one.json", one), bad = write("two.json", two);
  auto ok = load_real_runs({good, good});
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(ok->size(), 2u);
  auto multi = load_real_runs({good, bad});
  ASSERT_FALSE(multi.ok());
  EXPECT_NE(multi.status().message().find("two.json: holds 2 runs"), std::string::npos) << multi.status().message();
  auto missing = load_real_runs({(dir / "nope.json").string()});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nope.json"), std::string::npos);
  std::ofstream(dir / "broken.json") << "{\"runs\": [";
  auto broken = load_real_runs({(dir / "broken.json").string()});
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("broken.json"), std::string::npos);
  EXPECT_FALSE(load_real_runs({}).ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ragd::tools
