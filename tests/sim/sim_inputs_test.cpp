// Inputs of the simulator: rates files, workload specs, sweeps. Good ones parse to the values
// written; bad ones are refused with a message that names the key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "ragd/sim/cost_model.h"
#include "ragd/sim/sweep.h"
#include "ragd/sim/workload.h"

namespace ragd::sim {
namespace {

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

const std::string kRates =
    R"({"dense_tokens_per_s": 1000, "attn_pairs_per_s": 2e9, "masked_pairs_per_s": 2e9, "decode_dense_s": 0.01,
        "kv_read_bytes_per_s": 1e10, "link_bytes_per_s": 1e9, "link_latency_s": 0)";

void expect_refused(const Status& st, const std::string& needle) {
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(needle), std::string::npos) << "message: " << st.message();
}

TEST(SimCostModel, ParsesTheH200RatesFile) {
  auto c = parse_cost_model(read(std::string(RAGD_SOURCE_DIR) + "/bench/rates/h200-llama3-8b.json"), ModelShape{});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_DOUBLE_EQ(c->engine.dense_tokens_per_s, 41599);
  EXPECT_DOUBLE_EQ(c->engine.decode_dense_s, 0.005824);
  EXPECT_DOUBLE_EQ(c->serving.retrieval_s, ServingRates{}.retrieval_s);  // defaults kept
  // llama3-8b, bf16: 2 * 32 layers * 8 heads * 128 * 2 bytes = 128 KiB per token.
  EXPECT_DOUBLE_EQ(c->shape.kv_bytes_per_token(), 131072);
}

TEST(SimCostModel, StepCostsFollowTheRates) {
  auto c = parse_cost_model(kRates + R"(, "serving": {"retrieval_s": 0.05, "ssd_bytes_per_s": 1e9}})", ModelShape{2, 2, 8, 4});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_DOUBLE_EQ(c->serving.retrieval_s, 0.05);
  EXPECT_DOUBLE_EQ(c->dense_s(1), 0.01);         // the decode floor
  EXPECT_DOUBLE_EQ(c->dense_s(100), 0.1);        // 100 tokens at 1000/s
  EXPECT_DOUBLE_EQ(c->prefill_attention_s(0, 4), 10 / 2e9);    // 4*5/2 causal pairs
  EXPECT_DOUBLE_EQ(c->prefill_attention_s(10, 2), 23 / 2e9);   // 2*10 + 3
  EXPECT_DOUBLE_EQ(c->decode_attention_s(100), 100 * 256 / 1e10);  // 2*2*2*8*4 = 256 B/token
}

TEST(SimCostModel, MeasuredDenseCurveIsInterpolated) {
  // Points at 1, 8 and 32 tokens; between them a straight line, below the first its value, past
  // the last 1 / dense_tokens_per_s (1 ms at 1000 tokens/s) per token more.
  auto c = parse_cost_model(kRates + R"(, "serving": {"dense_model": "measured",
                                          "dense_curve": [[1, 0.004], [8, 0.011], [32, 0.023]]}})",
                            ModelShape{2, 2, 8, 4});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  // A naive reference: find the segment by a linear scan.
  const std::vector<std::pair<double, double>> pts = {{1, 0.004}, {8, 0.011}, {32, 0.023}};
  auto reference = [&](int t) {
    if (t <= 1) return 0.004;
    if (t >= 32) return 0.023 + (t - 32) * 0.001;
    for (size_t i = 1; i < pts.size(); ++i)
      if (t <= pts[i].first)
        return pts[i - 1].second + (pts[i].second - pts[i - 1].second) * (t - pts[i - 1].first) / (pts[i].first - pts[i - 1].first);
    return -1.0;
  };
  for (int t : {1, 2, 5, 8, 9, 20, 31, 32, 33, 100}) EXPECT_NEAR(c->dense_s(t), reference(t), 1e-15) << t;
  EXPECT_DOUBLE_EQ(c->dense_s(4), 0.007);   // 4 ms + 3 / 7 of 7 ms
  EXPECT_DOUBLE_EQ(c->dense_s(20), 0.017);  // 11 ms + 12 / 24 of 12 ms
  EXPECT_DOUBLE_EQ(c->dense_s(132), 0.123); // 23 ms + 100 ms
  EXPECT_EQ(c->dense_s(0), 0);
  // PGDSF's whole-prefill cost takes the same dense part.
  EXPECT_DOUBLE_EQ(c->prefill_s(0, 20), 0.017 + 210 / 2e9);
}

TEST(SimCostModel, RefusesBadDenseCurvesNamingTheField) {
  auto with = [](const std::string& serving) {
    return parse_cost_model(kRates + R"(, "serving": {)" + serving + "}}", ModelShape{}).status();
  };
  expect_refused(with(R"("dense_model": "measured")"), "needs serving.dense_curve");
  expect_refused(with(R"("dense_model": "additive", "dense_curve": [[1, 0.1]])"), "only with");
  expect_refused(with(R"("dense_curve": [[1, 0.1]])"), "only with");
  expect_refused(with(R"("dense_model": "measured", "dense_curve": [])"), "serving.dense_curve");
  expect_refused(with(R"("dense_model": "measured", "dense_curve": [[2, 0.1], [2, 0.2]])"), "serving.dense_curve");
  expect_refused(with(R"("dense_model": "measured", "dense_curve": [[1, 0.2], [2, 0.1]])"), "serving.dense_curve");
  expect_refused(with(R"("dense_model": "measured", "dense_curve": [[0, 0.1]])"), "serving.dense_curve");
  expect_refused(with(R"("dense_model": "measured", "dense_curve": [[1.5, 0.1]])"), "serving.dense_curve");
  expect_refused(with(R"("dense_model": "measured", "dense_curve": [[1, 0]])"), "serving.dense_curve");
  expect_refused(with(R"("dense_model": "measured", "dense_curve": [[1, 0.1, 3]])"), "serving.dense_curve");
  expect_refused(with(R"("dense_model": "measured", "dense_curve": {"1": 0.1})"), "serving.dense_curve");
  expect_refused(with(R"("dense_model": "linear")"), "serving.dense_model");
}

TEST(SimCostModel, ParsesWakeQuantilesAndRefusesBadOnes) {
  auto c = parse_cost_model(kRates + R"(, "serving": {"wake_quantiles": [-0.001, 0.001, 0.002, 0.02]}})", ModelShape{});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->serving.wake_quantiles, (std::vector<double>{-0.001, 0.001, 0.002, 0.02}));
  // The piecewise-linear distribution's mean: the mean of its segments' midpoints.
  EXPECT_DOUBLE_EQ(c->wake_mean(), (0.0 + 0.0015 + 0.011) / 3);
  auto with = [](const std::string& serving) {
    return parse_cost_model(kRates + R"(, "serving": {)" + serving + "}}", ModelShape{}).status();
  };
  expect_refused(with(R"("wake_quantiles": [0.001])"), "serving.wake_quantiles");
  expect_refused(with(R"("wake_quantiles": [0.002, 0.001])"), "serving.wake_quantiles");
  expect_refused(with(R"("wake_quantiles": [0.001, "x"])"), "serving.wake_quantiles");
  expect_refused(with(R"("wake_quantiles": [0, 1e9])"), "serving.wake_quantiles");
  expect_refused(with(R"("wake_quantiles": 0.001)"), "serving.wake_quantiles");
  expect_refused(with(R"("wake_s": 0.003, "wake_quantiles": [0, 0.001])"), "exclude each other");
}

TEST(SimCostModel, ParsesNetworkQuantilesAndRefusesBadOnes) {
  auto c = parse_cost_model(kRates + R"(, "serving": {"network_quantiles": [0.0003, 0.0005, 0.004]}})", ModelShape{});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->serving.network_quantiles, (std::vector<double>{0.0003, 0.0005, 0.004}));
  auto with = [](const std::string& serving) {
    return parse_cost_model(kRates + R"(, "serving": {)" + serving + "}}", ModelShape{}).status();
  };
  expect_refused(with(R"("network_quantiles": [0.001])"), "serving.network_quantiles");
  expect_refused(with(R"("network_quantiles": [-0.001, 0.001])"), "serving.network_quantiles");
  expect_refused(with(R"("network_quantiles": [0.002, 0.001])"), "serving.network_quantiles");
  expect_refused(with(R"("network_quantiles": "x")"), "serving.network_quantiles");
  auto d = parse_cost_model(kRates + R"(, "serving": {"step_noise_quantiles": [-0.02, 0.0, 0.07]}})", ModelShape{});
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->serving.step_noise_quantiles, (std::vector<double>{-0.02, 0.0, 0.07}));
  expect_refused(with(R"("step_noise_quantiles": [-1, 0.1])"), "serving.step_noise_quantiles");
  expect_refused(with(R"("step_noise_quantiles": [0.1, 0.0])"), "serving.step_noise_quantiles");
}

TEST(SimCostModel, ParsesArrivalContentionAndAppliesItOnlyWhenTheEngineFillsTheCores) {
  auto c = parse_cost_model(kRates + R"(, "serving": {"arrival_cpu_s": 0.001, "host_cores": 2}})", ModelShape{});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_DOUBLE_EQ(c->serving.arrival_cpu_s, 0.001);
  c->engine.threads = 2;  // the engine's threads hold both cores
  EXPECT_DOUBLE_EQ(c->arrival_contention_s(), 0.001);
  c->serving.host_cores = 4;  // two cores left to the other threads
  EXPECT_DOUBLE_EQ(c->arrival_contention_s(), 0.0);
  c->serving.host_cores = 0;  // not given: charged as set
  EXPECT_DOUBLE_EQ(c->arrival_contention_s(), 0.001);
  auto with = [](const std::string& serving) {
    return parse_cost_model(kRates + R"(, "serving": {)" + serving + "}}", ModelShape{}).status();
  };
  expect_refused(with(R"("arrival_cpu_s": -0.001)"), "serving.arrival_cpu_s");
  expect_refused(with(R"("host_cores": 2.5)"), "serving.host_cores");
}

TEST(SimCostModel, WakeDrawsFollowTheQuantilesAndDependOnTheKeyOnly) {
  CostModel c;
  c.serving.wake_s = 0.004;
  EXPECT_EQ(c.wake_draw(7), 0.004);  // no quantiles: the constant
  c.serving.wake_s = 0;
  c.serving.wake_quantiles = {-0.001, 0.0005, 0.002, 0.003, 0.012};
  // Naive reference: the empirical distribution of 200,000 draws (keys 1..N) against the inverse
  // distribution function written out by hand; u spreads evenly over [0, 1), so each of the four
  // segments is equally likely and uniform inside, and the empirical p-quantile is the exact one
  // within a tolerance of 0.01 in probability (far above an even spread's 1 / N), turned into
  // seconds by the steepest segment's slope, 0.009 s over a quarter: 0.036 s per unit.
  const int n = 200000;
  std::vector<double> d;
  for (int k = 1; k <= n; ++k) d.push_back(c.wake_draw(static_cast<uint64_t>(k)));
  EXPECT_EQ(c.wake_draw(12345), c.wake_draw(12345));  // a key's draw is fixed
  double sum = 0;
  for (double v : d) sum += v;
  EXPECT_NEAR(sum / n, c.wake_mean(), 0.0002);
  // Every run of 40 consecutive ids, and every 7th id, sees the mean within 10 % of the range.
  for (int start : {1, 1000, 77777}) {
    double run = 0, every = 0;
    for (int k = 0; k < 40; ++k) run += d[static_cast<size_t>(start - 1 + k)], every += c.wake_draw(static_cast<uint64_t>(start + 7 * k));
    EXPECT_NEAR(run / 40, c.wake_mean(), 0.0013) << "from " << start;
    EXPECT_NEAR(every / 40, c.wake_mean(), 0.0013) << "every 7th from " << start;
  }
  EXPECT_DOUBLE_EQ(c.wake_mean(), (-0.00025 + 0.00125 + 0.0025 + 0.0075) / 4);
  std::sort(d.begin(), d.end());
  EXPECT_GE(d.front(), -0.001);
  EXPECT_LE(d.back(), 0.012);
  auto exact = [](double p) {  // by hand: segments of probability 1/4 each
    const double q[] = {-0.001, 0.0005, 0.002, 0.003, 0.012};
    const int i = std::min(3, static_cast<int>(p * 4));
    return q[i] + (q[i + 1] - q[i]) * (p * 4 - i);
  };
  for (double p : {0.05, 0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9, 0.95, 0.99})
    EXPECT_NEAR(d[static_cast<size_t>(p * n)], exact(p), 0.01 * 0.036) << "p " << p;
}

TEST(SimCostModel, AcceptsPlanJsonOutput) {
  auto c = parse_cost_model(R"({"tokens": 4096, "threads_per_worker": 2, "rates": )" + kRates +
                                R"(}, "plans": [], "serving": {"step_overhead_s": 0.001}})",
                            ModelShape{});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_DOUBLE_EQ(c->engine.dense_tokens_per_s, 1000);
  EXPECT_DOUBLE_EQ(c->serving.step_overhead_s, 0.001);
}

TEST(SimCostModel, RefusesBadRatesNamingTheField) {
  expect_refused(parse_cost_model("{", ModelShape{}).status(), "not JSON");
  expect_refused(parse_cost_model(R"({"dense_tokens_per_s": 1000})", ModelShape{}).status(), "attn_pairs_per_s");
  expect_refused(parse_cost_model(kRates + R"(, "dense_token_per_s": 5})", ModelShape{}).status(), "dense_token_per_s");
  expect_refused(parse_cost_model(kRates + R"(, "serving": {"ssd_bytes_per_s": 0}})", ModelShape{}).status(),
                 "serving.ssd_bytes_per_s");
  expect_refused(parse_cost_model(kRates + R"(, "serving": {"retrieval_ms": 3}})", ModelShape{}).status(), "retrieval_ms");
  expect_refused(parse_cost_model(kRates + R"(, "serving": 3})", ModelShape{}).status(), "serving");
  expect_refused(parse_cost_model(kRates + R"(, "serving": {"run_speed_sd": 1.5}})", ModelShape{}).status(),
                 "serving.run_speed_sd");
  expect_refused(parse_cost_model(kRates + R"(, "serving": {"run_speed_sd": -0.1}})", ModelShape{}).status(),
                 "serving.run_speed_sd");
  auto speed = parse_cost_model(kRates + R"(, "serving": {"run_speed_sd": 0.07}})", ModelShape{});
  ASSERT_TRUE(speed.ok()) << speed.status().to_string();
  EXPECT_EQ(speed->serving.run_speed_sd, 0.07);
  expect_refused(parse_cost_model(kRates + "}", ModelShape{0, 8, 128, 2}).status(), "layers");
  // calibrate.py's report of clamped terms is for people: accepted, the rates unchanged.
  auto with = parse_cost_model(kRates + R"(, "fit_warnings": [{"term": "admit_s", "raw": -0.002, "used": 0}]})",
                               ModelShape{});
  ASSERT_TRUE(with.ok()) << with.status().to_string();
  auto without = parse_cost_model(kRates + "}", ModelShape{});
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(with->engine.dense_tokens_per_s, without->engine.dense_tokens_per_s);
}

TEST(SimWorkload, ParsesSpecsAndMixtures) {
  WorkloadSpec w;
  ASSERT_TRUE(parse_workload_spec(w, "rate=5, docs=100, zipf=1.1\n# a comment\nprompt_tokens=64:0.8,1024:0.2\n"
                                     "answer_tokens=32, topic_docs=4, docs_per_query=2, doc_order=shuffled",
                                  "w").ok());
  EXPECT_DOUBLE_EQ(w.rate, 5);
  EXPECT_EQ(w.docs, 100);
  EXPECT_DOUBLE_EQ(w.zipf, 1.1);
  ASSERT_EQ(w.prompt_tokens.parts.size(), 2u);
  EXPECT_EQ(w.prompt_tokens.parts[1].first, 1024);
  EXPECT_DOUBLE_EQ(w.prompt_tokens.mean(), 64 * 0.8 + 1024 * 0.2);
  EXPECT_TRUE(w.shuffle_docs);
}

TEST(SimWorkload, RefusesBadSpecsNamingTheKey) {
  WorkloadSpec w;
  expect_refused(parse_workload_spec(w, "rate=fast", "w"), "rate");
  expect_refused(parse_workload_spec(w, "rate=-1", "w"), "rate");
  expect_refused(parse_workload_spec(w, "rates=1", "w"), "unknown key 'rates'");
  expect_refused(parse_workload_spec(w, "zipf", "w"), "key=value");
  expect_refused(parse_workload_spec(w, "arrivals=bursty", "w"), "arrivals");
  expect_refused(parse_workload_spec(w, "answer_tokens=16:0", "w"), "answer_tokens");
  expect_refused(parse_workload_spec(w, "docs=10\ntopic_docs=4\ndocs_per_query=5", "w.txt"), "docs_per_query");
  WorkloadSpec v;
  const Status st = parse_workload_spec(v, "rate=1\ndocs=x", "w.txt");
  expect_refused(st, "w.txt:2: workload: docs");
}

TEST(SimWorkload, GeneratorIsSeededAndFollowsTheSpec) {
  WorkloadSpec w;
  w.rate = 50;
  w.requests = 20000;
  w.docs = 1000;
  w.zipf = 1.0;
  w.docs_per_query = 1;
  w.prefix_tokens = 0;
  w.doc_tokens = 100;
  w.query_tokens = 10;
  auto a = generate_requests(w);
  auto b = generate_requests(w);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), 20000u);
  for (size_t i = 0; i < a->size(); ++i) ASSERT_EQ((*a)[i].path[0].doc, (*b)[i].path[0].doc);
  // Mean gap 1 / rate within 3 %; Zipf(1): P(rank 0) = 1 / H_1000 = 0.1336, rank 1 half of it.
  EXPECT_NEAR(a->back().arrival_s / a->size(), 1.0 / 50, 0.03 / 50);
  std::map<uint64_t, int> count;
  for (const auto& r : *a) {
    EXPECT_EQ(r.prompt_tokens, 110);
    ++count[r.path[0].doc];
  }
  EXPECT_NEAR(count[0] / 20000.0, 0.1336, 0.01);
  EXPECT_NEAR(count[1] / 20000.0, 0.0668, 0.008);
}

TEST(SimSweep, ParsesRangesAndLists) {
  auto d = parse_sweep("rate=1..64");
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->values, (std::vector<std::string>{"1", "2", "4", "8", "16", "32", "64"}));
  auto l = parse_sweep("rate=2..10:4");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->values, (std::vector<std::string>{"2", "6", "10"}));
  auto b = parse_sweep("dram_cache_bytes=256MiB..1GiB");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->values, (std::vector<std::string>{"268435456", "536870912", "1073741824"}));
  auto s = parse_sweep("scheduler=fcfs,sjf");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->values.size(), 2u);
  auto odd = parse_sweep("replicas=1..12");
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd->values.back(), "12");
}

TEST(SimSweep, RefusesBadSweepsNamingTheProblem) {
  expect_refused(parse_sweep("rate").status(), "key=a..b");
  expect_refused(parse_sweep("rate=").status(), "no values");
  expect_refused(parse_sweep("rate=8..2").status(), "ends below");
  expect_refused(parse_sweep("rate=0..8").status(), "positive start");
  expect_refused(parse_sweep("rate=1..x").status(), "'x' is not a number");
  expect_refused(parse_sweep("rate=1..1000:1").status(), "more than 64");
  expect_refused(parse_sweep("speed=1..4").status(), "unknown key 'speed'");
  SimOptions o;
  WorkloadSpec w;
  expect_refused(apply_key(o, w, ModelShape{}, "router", "random"), "router");
  expect_refused(apply_key(o, w, ModelShape{}, "dram_cache_bytes", "lots"), "dram_cache_bytes");
  expect_refused(apply_key(o, w, ModelShape{}, "kv_pool_bytes", "1K"), "kv_pool_bytes");
  EXPECT_TRUE(apply_key(o, w, ModelShape{}, "kv_pool_bytes", "1GiB").ok());
  EXPECT_EQ(o.kv.pool_blocks, (1 << 30) / (131072 * 16));
}

}  // namespace
}  // namespace ragd::sim
