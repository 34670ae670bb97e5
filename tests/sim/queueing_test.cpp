// The simulator against closed-form queueing theory (and its busy share against rho): one replica serving one request at a time,
// a constant service time, Poisson arrivals = M/D/1, whose mean wait in queue is
//   Wq = rho * S / (2 (1 - rho))        (Pollaczek-Khinchine with zero service variance).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "ragd/sim/simulator.h"
#include "ragd/sim/workload.h"
#include "sim_test_util.h"

namespace ragd::sim {
namespace {

struct Md1 {
  double rho;
  double tolerance;  // relative, on the mean wait
};

class Md1Test : public ::testing::TestWithParam<Md1> {};

TEST_P(Md1Test, MeanWaitMatchesPollaczekKhinchine) {
  const CostModel cost = testing::simple_cost();
  // A plain prompt of 200 tokens and one answer token: one step of max(5 ms, 200 * 0.1 ms) = 20 ms
  // plus a negligible attention term.
  const double service_s = cost.dense_s(200) + cost.prefill_attention_s(0, 200);
  ASSERT_NEAR(service_s, 0.020, 1e-6);
  SimOptions o = testing::small_fleet();
  o.scheduler.max_running = 1;
  o.scheduler.max_batch_tokens = 512;
  o.max_queue = 1 << 30;
  WorkloadSpec w;
  w.prompt_tokens = {{{200, 1.0}}};
  w.answer_tokens = {{{1, 1.0}}};
  w.rate = GetParam().rho / service_s;  // rho = lambda * S
  w.requests = 200000;
  w.seed = 7;
  auto reqs = generate_requests(w);
  ASSERT_TRUE(reqs.ok()) << reqs.status().to_string();
  auto res = simulate(o, cost, *reqs);
  ASSERT_TRUE(res.ok()) << res.status().to_string();
  double wait = 0, service = 0;
  long n = 0;
  for (const SimRecord& r : res->records) {
    ASSERT_TRUE(r.ok);
    wait += r.ttft_ms / 1e3 - service_s;
    service += r.prefill_ms / 1e3;
    ++n;
  }
  wait /= n;
  service /= n;
  EXPECT_NEAR(service, service_s, 1e-9) << "the service time must be constant";
  const double rho = GetParam().rho;
  const double expected = rho * service_s / (2 * (1 - rho));
  EXPECT_NEAR(wait, expected, GetParam().tolerance * expected) << "rho " << rho;
  // The engine's busy time is the service of every request: over the span of the arrivals it is
  // rho (the busy share ragctl simulate reports and warns on), within the arrival count's noise.
  ASSERT_EQ(res->engine_busy_s.size(), 1u);
  EXPECT_NEAR(res->engine_busy_s[0], n * service_s, 1e-6 * n * service_s);
  const double span = res->duration_s - reqs->front().arrival_s;
  EXPECT_NEAR(res->engine_busy_s[0] / span, rho, 0.01) << "busy share at rho " << rho;
  std::printf("rho %.2f: mean wait %.4f ms, M/D/1 %.4f ms (%+.2f %%)\n", rho, wait * 1e3, expected * 1e3,
              100 * (wait / expected - 1));
}

// 200k arrivals: the sample mean's relative standard error grows with rho (long busy periods);
// the tolerances are about four of them.
INSTANTIATE_TEST_SUITE_P(Loads, Md1Test, ::testing::Values(Md1{0.3, 0.04}, Md1{0.5, 0.04}, Md1{0.7, 0.06}, Md1{0.85, 0.10}));

}  // namespace
}  // namespace ragd::sim
