// Adaptive pipelines through the real executor (tiny random model, real corpus): each run reports
// its choice in usage.adapt, the chosen candidate's passages make the prompt, forced candidates
// and request knobs outside the candidates are refused at submit.
#include "executor_fixture.h"

namespace ragd::pipelines {
namespace {

class AdaptExecutorTest : public ExecutorTest {
 protected:
  static void SetUpTestSuite() {
    ExecutorTest::SetUpTestSuite();
    // Priors only (no fitted profile): "wide" is believed better and costs more.
    write_file(fs::path(*root_) / "pipelines" / "adapt.toml",
               "[pipeline]\nname = \"adapt\"\n[reuse]\nmode = \"none\"\n[generation]\nmax_tokens = 4\n"
               "[adapt]\nobjective = \"balanced\"\ncandidates = [\n"
               "  { name = \"one\", top_k = 1, quality = 0.5, ttft_ms = 10 },\n"
               "  { name = \"wide\", top_k = 3, quality = 0.9, ttft_ms = 30 },\n"
               "  { name = \"rerank\", top_k = 3, rerank = 1, quality = 0.8, ttft_ms = 40 },\n]\n");
    write_file(fs::path(*root_) / "pipelines" / "adapt-iter.toml",
               "[pipeline]\nname = \"adapt-iter\"\n[retriever]\ntop_k = 2\n[reuse]\nmode = \"none\"\n"
               "[iterative]\nretrieval_interval = 4\nquery_window = 6\n[generation]\nmax_tokens = 12\n"
               "[adapt]\nobjective = \"latency\"\nslo_ttft_ms = 1000\ncandidates = [\n"
               "  { top_k = 2, retrieval_interval = 3, quality = 0.7, ttft_ms = 10 },\n"
               "  { top_k = 1, retrieval_interval = 6, quality = 0.6, ttft_ms = 5 },\n]\n");
  }

  Status submit(Executor& ex, RunRequest r) {
    RunOutput out;
    Collector c;
    return ex.submit(std::move(r), c.sink(&out));
  }
};

TEST_F(AdaptExecutorTest, RunsReportTheirChoiceAndUseItsPassages) {
  const std::string data = tmpdir("adapt");
  Runtime rt = open(options(data), true);
  const char* q = "harbor ship sailor anchor";
  // Auto, balanced: "wide" (0.9) is best; "rerank" (0.8) and "one" (0.5) are not within 0.02.
  RunOutput a = run(*rt.executor, "adapt", q);
  ASSERT_TRUE(a.usage.adapt.has_value());
  const AdaptReport& rep = *a.usage.adapt;
  EXPECT_EQ(rep.pipeline, "adapt");
  EXPECT_EQ(rep.choice, "wide");
  EXPECT_EQ(rep.reason, "best_quality");
  EXPECT_EQ(rep.objective, "balanced");
  EXPECT_TRUE(rep.signals.retrieved);
  EXPECT_GT(rep.signals.question_tokens, 0);
  EXPECT_GT(rep.signals.passage_tokens, 0);
  EXPECT_GE(rep.load.free_blocks, 0);
  ASSERT_EQ(rep.estimates.size(), 3u);
  EXPECT_EQ(rep.estimates[1].first, "wide");
  EXPECT_NEAR(rep.estimates[1].second.quality, 0.9, 1e-9);
  EXPECT_EQ(a.sources.size(), 3u);
  // Forced candidates: their passages, reranking included.
  RunOutput one = run(*rt.executor, "adapt", q, 4, [](RunRequest& r) { r.adapt = "one"; });
  ASSERT_TRUE(one.usage.adapt.has_value());
  EXPECT_EQ(one.usage.adapt->choice, "one");
  EXPECT_EQ(one.usage.adapt->reason, "forced");
  EXPECT_EQ(one.sources.size(), 1u);
  EXPECT_EQ(one.sources[0].doc_id, a.sources[0].doc_id);  // the retriever's first passage
  EXPECT_LT(one.usage.prompt_tokens, a.usage.prompt_tokens);
  RunOutput rr = run(*rt.executor, "adapt", q, 4, [](RunRequest& r) { r.adapt = "rerank"; });
  EXPECT_EQ(rr.usage.adapt->choice, "rerank");
  EXPECT_EQ(rr.sources.size(), 1u);
  EXPECT_GT(rr.timings.rerank_ms, 0.0);
  // A request top_k narrows to the candidates with it; latency objective with a tiny target: the
  // fastest predicted one.
  RunOutput k1 = run(*rt.executor, "adapt", q, 4, [](RunRequest& r) { r.retrieval_top_k = 1; });
  EXPECT_EQ(k1.usage.adapt->choice, "one");
  RunOutput fast = run(*rt.executor, "adapt", q, 4, [](RunRequest& r) {
    r.adapt_objective = AdaptObjective::kLatency;
    r.slo_ttft_ms = 1;
  });
  EXPECT_EQ(fast.usage.adapt->choice, "one");
  EXPECT_EQ(fast.usage.adapt->reason, "fastest_over_slo");
  // Plain pipelines report nothing.
  RunOutput plain = run(*rt.executor, "none", q);
  EXPECT_FALSE(plain.usage.adapt.has_value());
  close(rt);
  fs::remove_all(data);
}

TEST_F(AdaptExecutorTest, OverridesOutsideTheCandidatesAreRefusedAtSubmit) {
  const std::string data = tmpdir("adapt_refuse");
  Runtime rt = open(options(data), true);
  RunRequest r;
  r.pipeline = "adapt";
  r.query = "harbor";
  r.adapt = "huge";
  Status st = submit(*rt.executor, r);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("adapt: 'huge' is not a candidate of pipeline 'adapt'"), std::string::npos) << st.to_string();
  r.adapt.reset();
  r.retrieval_top_k = 2;
  st = submit(*rt.executor, r);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("top_k: 2 is not among"), std::string::npos) << st.to_string();
  r.retrieval_top_k = -1;
  r.pipeline = "none";
  r.adapt = "one";
  st = submit(*rt.executor, r);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  close(rt);
  fs::remove_all(data);
}

TEST_F(AdaptExecutorTest, IterativePipelinesChooseBeforeTheFirstSearch) {
  const std::string data = tmpdir("adapt_iter");
  Runtime rt = open(options(data), true);
  RunOutput a = run(*rt.executor, "adapt-iter", "volcano lava magma", 12);
  ASSERT_TRUE(a.usage.adapt.has_value());
  EXPECT_FALSE(a.usage.adapt->signals.retrieved);
  EXPECT_EQ(a.usage.adapt->choice, "k2-interval3");  // within the SLO and the better prior
  EXPECT_EQ(a.sources.size(), 2u);
  EXPECT_GE(a.usage.searches, 12 / 3);  // a search every 3 tokens (the first included)
  RunOutput b = run(*rt.executor, "adapt-iter", "volcano lava magma", 12, [](RunRequest& r) { r.retrieval_interval = 6; });
  EXPECT_EQ(b.usage.adapt->choice, "k1-interval6");
  EXPECT_EQ(b.sources.size(), 1u);
  EXPECT_LT(b.usage.searches, a.usage.searches);
  close(rt);
  fs::remove_all(data);
}

}  // namespace
}  // namespace ragd::pipelines
