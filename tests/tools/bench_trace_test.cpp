// ragctl simulate's trace replay: a bench result's requests at the instants the bench sent them, or
// at the arrivals its recorded seed draws (bench_trace.h).
#include "bench_trace.h"

#include <gtest/gtest.h>

#include <random>

namespace ragd::tools {
namespace {

BenchSample sample(double sent, bool ok = true, int prompt = 100, int tokens = 8) {
  BenchSample s;
  s.ok = ok;
  s.has_usage = ok;
  s.prompt_tokens = prompt;
  s.tokens = tokens;
  s.sent_s = sent;
  return s;
}

TEST(BenchTrace, RecordedSendInstantsAreReplayedExactly) {
  BenchResult br;
  BenchRun a;
  a.label = "a";
  a.rate = 5;
  a.seed = 3;
  a.samples = {sample(0.125), sample(0.5, /*ok=*/false), sample(0.75, true, 321, 40)};
  a.has_samples = true;
  BenchRun b;  // closed loop: sent as its workers freed up, recorded out of order
  b.label = "b";
  b.samples = {sample(0.0), sample(0.3), sample(0.1)};
  b.has_samples = true;
  br.runs = {a, b};
  // Through the JSON the bench writes, as simulate reads it.
  auto back = parse_bench_result(bench_result_json(br), "mem");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  ASSERT_EQ(back->runs.size(), 2u);
  ASSERT_EQ(back->runs[0].samples.size(), 3u);
  EXPECT_EQ(back->runs[0].seed, 3u);
  EXPECT_DOUBLE_EQ(back->runs[0].samples[2].sent_s, 0.75);
  auto reqs = trace_requests(*back, "mem", 99);
  ASSERT_TRUE(reqs.ok()) << reqs.status().to_string();
  ASSERT_EQ(reqs->size(), 5u);  // the failed request is not replayed
  const double want[] = {0.125, 0.75, 0.75, 0.85, 1.05};  // run b starts at run a's last send (0.75)
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_DOUBLE_EQ((*reqs)[i].arrival_s, want[i]) << i;
    EXPECT_EQ((*reqs)[i].id, i + 1);
    EXPECT_TRUE((*reqs)[i].retrieval);
  }
  EXPECT_EQ((*reqs)[1].prompt_tokens, 321);
  EXPECT_EQ((*reqs)[1].answer_tokens, 40);
}

// Files without send instants: the run's recorded seed draws the arrivals as the bench did, the
// fallback seed only when none was recorded.
TEST(BenchTrace, OlderFilesReplayTheRunsSeed) {
  for (uint64_t recorded : {uint64_t{0}, uint64_t{42}}) {
    BenchResult br;
    BenchRun r;
    r.label = "r";
    r.rate = 4;
    r.seed = recorded;
    for (int i = 0; i < 6; ++i) r.samples.push_back(sample(-1));
    br.runs = {r};
    auto reqs = trace_requests(br, "old.json", 7);
    ASSERT_TRUE(reqs.ok());
    std::mt19937_64 rng(recorded != 0 ? recorded : 7);
    std::exponential_distribution<double> gap(4.0);
    double t = 0;
    ASSERT_EQ(reqs->size(), 6u);
    for (size_t i = 0; i < 6; ++i) {
      t += gap(rng);
      EXPECT_DOUBLE_EQ((*reqs)[i].arrival_s, t) << "seed " << recorded << " request " << i;
    }
  }
  BenchResult none;
  BenchRun closed;
  closed.label = "c";
  closed.samples = {sample(-1)};
  none.runs = {closed};
  auto r = trace_requests(none, "c.json", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("c.json: run 'c' has no rate to replay"), std::string::npos);
}

}  // namespace
}  // namespace ragd::tools
