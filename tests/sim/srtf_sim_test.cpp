// The simulator runs srtf with the same trained length head and scheduler code as the daemon:
// requests whose lengths the scheduler is not told (max_tokens high for all, the length a hidden
// stop) are ordered by the head's prediction from their question.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>

#include "ragd/pipelines/length_model.h"
#include "ragd/sim/simulator.h"
#include "sim_test_util.h"

namespace ragd::sim {
namespace {

// Short answers ("when ...", 4 tokens) and long generations ("list ...", 60 tokens), max_tokens
// 512 for all; Poisson arrivals near the one replica's capacity (max_running 4).
std::vector<SimRequest> mixed(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(40.0);
  std::vector<SimRequest> v;
  double t = 0;
  for (int i = 0; i < n; ++i) {
    SimRequest r;
    r.id = i + 1;
    r.arrival_s = (t += gap(rng));
    r.prompt_tokens = 40;
    const bool longq = rng() % 4 == 0;
    r.answer_tokens = longq ? 60 : 4;
    r.max_tokens = 512;
    r.text = longq ? "list every w" + std::to_string(rng() % 9) : "when was w" + std::to_string(rng() % 9);
    r.pipeline = "qa";
    v.push_back(r);
  }
  return v;
}

std::shared_ptr<const pipelines::LengthModel> head() {
  std::vector<pipelines::LengthSample> train;
  for (const SimRequest& r : mixed(300, 9)) {
    pipelines::LengthSample s;
    s.features = {r.pipeline, r.text, r.prompt_tokens, r.max_tokens};
    s.output_tokens = r.answer_tokens;
    train.push_back(s);
  }
  auto m = pipelines::LengthModel::train(train, pipelines::LengthTrainOptions{.dim = 256});
  EXPECT_TRUE(m.ok());
  return *m;
}

double mean_e2e(const SimResult& r) {
  double s = 0;
  for (const auto& x : r.records) s += x.e2e_ms;
  return s / r.records.size();
}

TEST(SimulatorSrtf, TrainedHeadOrdersLikeTheOracleAndBeatsFcfs) {
  const auto reqs = mixed(400, 1);
  SimOptions o = testing::small_fleet();
  o.scheduler.max_running = 4;
  auto run = [&](pipelines::SchedPolicy p, std::shared_ptr<const pipelines::LengthModel> m, bool oracle) {
    SimOptions x = o;
    x.scheduler.policy = p;
    x.scheduler.length_model = std::move(m);
    x.scheduler.oracle_lengths = oracle;
    auto r = simulate(x, testing::simple_cost(), reqs);
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r->unfinished, 0);
    return *r;
  };
  const SimResult fcfs = run(pipelines::SchedPolicy::kFcfs, nullptr, false);
  const SimResult blind = run(pipelines::SchedPolicy::kSrtf, nullptr, false);  // fallback estimate
  const SimResult srtf = run(pipelines::SchedPolicy::kSrtf, head(), false);
  const SimResult oracle = run(pipelines::SchedPolicy::kSrtf, nullptr, true);
  if (getenv("RAGD_TEST_VERBOSE"))
    std::fprintf(stderr, "fcfs %.1f blind %.1f srtf %.1f oracle %.1f\n", mean_e2e(fcfs), mean_e2e(blind), mean_e2e(srtf), mean_e2e(oracle));
  EXPECT_GT(srtf.scheduler[0].srtf_preemptions, 0);
  EXPECT_LT(mean_e2e(srtf), 0.8 * mean_e2e(fcfs)) << mean_e2e(srtf) << " vs fcfs " << mean_e2e(fcfs);
  EXPECT_LT(mean_e2e(srtf), mean_e2e(blind)) << "the head should beat the length-blind estimate";
  EXPECT_LT(mean_e2e(srtf), 1.2 * mean_e2e(oracle)) << mean_e2e(srtf) << " vs oracle " << mean_e2e(oracle);
  // Every request still finishes with its own length.
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(srtf.records[i].tokens, reqs[i].answer_tokens);
}

}  // namespace
}  // namespace ragd::sim
