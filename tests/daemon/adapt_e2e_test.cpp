// Adaptive pipelines ([adapt]) through the real daemon: usage.adapt in the answer, the choice
// counted in /metrics, request overrides outside the candidates answered 400, a bad [adapt] table
// refused at start naming the key (ragd exits 1). Skipped with a message when bin/ragd or bin/ragctl is missing.
#include <fstream>

#include "real_daemon.h"

namespace ragd::testing {
namespace {

constexpr const char* kSpec =
    "[pipeline]\nname = \"qa-adapt\"\n[generation]\nmax_tokens = 4\n"
    "[adapt]\nobjective = \"balanced\"\ncandidates = [\n"
    "  { name = \"one\", top_k = 1, quality = 0.6, ttft_ms = 10 },\n"
    "  { name = \"two\", top_k = 2, quality = 0.95, ttft_ms = 20 },\n]\n";

class AdaptE2eTest : public E2eTest {
 protected:
  std::string pipelines(const std::string& name, const std::string& text) {
    const fs::path dir = dir_ / name;
    fs::create_directories(dir);
    std::ofstream(dir / "qa-adapt.toml") << text;
    return dir.string();
  }
};

TEST_F(AdaptE2eTest, UsageAdaptMetricsAndOverridesOutsideTheCandidates) {
  start_daemon("data_adapt", {"--pipelines", pipelines("adapt_ok", kSpec)});
  // Both documents match the question's words (the daemon's auto retrieval is lexical with the
  // hashing embedder), so candidate "two" (top_k 2) finds two sources.
  auto r = call("POST", "/v1/documents",
                R"({"documents":[{"id":"kv","text":"The KV cache stores attention keys and values for reuse."},)"
                R"({"id":"rag","text":"Retrieval augmented generation puts retrieved documents in the prompt; )"
                R"(the KV cache stores their keys and values."}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  r = get("/v1/pipelines/qa-adapt");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).str("/adapt/objective"), "balanced");
  ASSERT_EQ(Json(r.body).size("/adapt/candidates"), 2u);
  EXPECT_EQ(Json(r.body).str("/adapt/candidates/1"), "two");
  EXPECT_FALSE(Json(get("/v1/pipelines/default").body).has("/adapt"));
  const std::string runs = "/v1/pipelines/qa-adapt/runs";
  r = call("POST", runs, R"({"query":"what does the KV cache store?","temperature":0})");
  ASSERT_EQ(r.status, 200) << r.body;
  Json a(r.body);
  EXPECT_EQ(a.str("/usage/adapt/choice"), "two");  // priors: 0.95 against 0.6
  EXPECT_EQ(a.str("/usage/adapt/reason"), "best_quality");
  EXPECT_EQ(a.str("/usage/adapt/objective"), "balanced");
  EXPECT_EQ(a.size("/usage/adapt/candidates"), 2u);
  EXPECT_GT(a.num("/usage/adapt/signals/question_tokens"), 0);
  EXPECT_EQ(a.size("/sources"), 2u);
  r = call("POST", runs, R"({"query":"what does the KV cache store?","adapt":"one"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).str("/usage/adapt/choice"), "one");
  EXPECT_EQ(Json(r.body).str("/usage/adapt/reason"), "forced");
  EXPECT_EQ(Json(r.body).size("/sources"), 1u);
  // The second run of this pipeline sees the first in its history; nothing was in flight.
  Json second(r.body);
  EXPECT_EQ(second.num("/usage/adapt/history/runs"), 1);
  EXPECT_EQ(second.dbl("/usage/adapt/history/ttft_scale"), 1.0);
  EXPECT_EQ(second.dbl("/usage/adapt/load/work_ahead_tokens"), 0.0);
  EXPECT_GT(second.dbl("/usage/adapt/candidates/0/work_tokens"), 0.0);
  EXPECT_GE(second.dbl("/usage/adapt/candidates/0/ttft_q_ms"), second.dbl("/usage/adapt/candidates/0/ttft_ms"));
  EXPECT_FALSE(second.has("/usage/adapt/ttft_quantile"));  // priors only: no quantile model
  // Outside the candidates: 400 naming the field.
  expect_error(call("POST", runs, R"({"query":"q","adapt":"three"})"), 400, "invalid_request",
               "adapt: 'three' is not a candidate of pipeline 'qa-adapt' (auto | one | two)");
  expect_error(call("POST", runs, R"({"query":"q","top_k":4})"), 400, "invalid_request",
               "top_k: 4 is not among the [adapt] candidates of pipeline 'qa-adapt' (1 | 2)");
  expect_error(call("POST", runs, R"({"query":"q","slo_ttft_ms":0})"), 400, "invalid_request", "slo_ttft_ms");
  expect_error(call("POST", runs, R"({"query":"q","adapt_objective":"fastest"})"), 400, "invalid_request",
               "quality | balanced | latency");
  expect_error(call("POST", "/v1/pipelines/default/runs", R"({"query":"q","adapt":"one"})"), 400, "invalid_request",
               "adaptive pipelines only");
  // /metrics counts the two served choices.
  const std::string m = get("/metrics").body;
  EXPECT_NE(m.find("ragd_adapt_choices_total{pipeline=\"qa-adapt\",choice=\"two\",reason=\"best_quality\"} 1"),
            std::string::npos) << m;
  EXPECT_NE(m.find("ragd_adapt_choices_total{pipeline=\"qa-adapt\",choice=\"one\",reason=\"forced\"} 1"), std::string::npos);
  EXPECT_EQ(d_.stop(), 0);
}

TEST_F(AdaptE2eTest, ABadAdaptTableStopsTheDaemonNamingTheKey) {
  const std::string bad = std::string(kSpec).replace(std::string(kSpec).find("objective"), 0, "slo_ttft_ms = -1\n");
  const fs::path log = dir_ / "adapt_bad.log";
  std::string err;
  // ragd listens before the runtime has loaded; a runtime that cannot load ends it with status 1.
  if (d_.start(daemon_args("data_adapt_bad", {"--pipelines", pipelines("adapt_bad", bad)}), &err, log.string()))
    EXPECT_EQ(d_.wait_exit(30000), 1) << "ragd kept running with slo_ttft_ms = -1";
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("[adapt] slo_ttft_ms: must be > 0 ms, got -1"), std::string::npos) << text;
}

}  // namespace
}  // namespace ragd::testing
