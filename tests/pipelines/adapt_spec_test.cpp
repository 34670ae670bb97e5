// [adapt] tables in pipeline specs (refusals name the key), the fitted profile beside a spec, and
// how a request's knobs narrow an adaptive pipeline's candidates (resolve_run).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "ragd/pipelines/pipeline_spec.h"
#include "ragd/pipelines/run_params.h"

namespace ragd::pipelines {
namespace {

namespace fs = std::filesystem;

const char* kAdaptSpec = R"(
[pipeline]
name = "qa-adapt"
[retriever]
top_k = 4
[adapt]
objective = "latency"
slo_ttft_ms = 250
quality_tolerance = 0.05
candidates = [
  { top_k = 1 },
  { name = "best", top_k = 4, rerank = 1, quality = 0.97, ttft_ms = 90 },
  { top_k = 2, extractive = true },
]
)";

// The refusal of a spec whose [adapt] table is `adapt` (after a one-shot [retriever]).
std::string refusal(const std::string& adapt, const std::string& extra = "") {
  auto s = parse_pipeline_spec("[retriever]\ntop_k = 4\n" + extra + "[adapt]\n" + adapt, "bad.toml");
  return s.ok() ? std::string("accepted") : s.status().message();
}

TEST(AdaptSpec, ParsesCandidatesObjectiveAndPriors) {
  auto s = parse_pipeline_spec(kAdaptSpec, "qa.toml");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ASSERT_TRUE(s->adapt.has_value());
  const AdaptSpec& a = *s->adapt;
  EXPECT_EQ(a.objective, AdaptObjective::kLatency);
  EXPECT_DOUBLE_EQ(a.slo_ttft_ms, 250);
  EXPECT_DOUBLE_EQ(a.quality_tolerance, 0.05);
  ASSERT_EQ(a.candidates.size(), 3u);
  EXPECT_EQ(a.candidates[0].name, "k1");  // a name made of its knobs
  EXPECT_EQ(a.candidates[0].top_k, 1);
  EXPECT_EQ(a.candidates[1].name, "best");
  EXPECT_EQ(a.candidates[1].rerank, 1);
  EXPECT_DOUBLE_EQ(*a.candidates[1].prior_quality, 0.97);
  EXPECT_DOUBLE_EQ(*a.candidates[1].prior_ttft_ms, 90);
  EXPECT_EQ(a.candidates[2].name, "k2-extractive");
  EXPECT_TRUE(a.candidates[2].extractive);
  // The array-of-tables form is the same table.
  auto t = parse_pipeline_spec("[[adapt.candidates]]\ntop_k = 1\n[[adapt.candidates]]\ntop_k = 3\nrerank = 2\n", "t.toml");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  ASSERT_EQ(t->adapt->candidates.size(), 2u);
  EXPECT_EQ(t->adapt->candidates[1].name, "k3-rerank2");
  EXPECT_EQ(t->adapt->objective, AdaptObjective::kBalanced);
  EXPECT_FALSE(parse_pipeline_spec("[retriever]\ntop_k = 4\n", "plain.toml")->adapt.has_value());
}

TEST(AdaptSpec, BadTablesAreRefusedNamingTheKey) {
  EXPECT_EQ(refusal("candidates = []\n"), "bad.toml: [adapt] candidates: must not be empty");
  EXPECT_EQ(refusal("objective = \"quality\"\n"), "bad.toml: [adapt] candidates: missing: list the candidate configurations");
  EXPECT_NE(refusal("candidates = [{ top_k = 1 }, { top_k = 2, tempo = 3 }]\n")
                .find("bad.toml: [adapt] candidates[1].tempo: unknown knob (name | top_k | rerank"),
            std::string::npos);
  EXPECT_EQ(refusal("slo_ttft_ms = 0\ncandidates = [{ top_k = 1 }]\n"), "bad.toml: [adapt] slo_ttft_ms: must be > 0 ms, got 0");
  EXPECT_EQ(refusal("slo_ttft_ms = -5.5\ncandidates = [{ top_k = 1 }]\n"),
            "bad.toml: [adapt] slo_ttft_ms: must be > 0 ms, got -5.5");
  EXPECT_NE(refusal("objective = \"latency\"\ncandidates = [{ top_k = 1 }]\n").find("[adapt] slo_ttft_ms: objective \"latency\" needs"),
            std::string::npos);
  EXPECT_NE(refusal("objective = \"fastest\"\ncandidates = [{ top_k = 1 }]\n").find("[adapt] objective: objective must be one of quality | balanced | latency"),
            std::string::npos);
  EXPECT_EQ(refusal("candidates = [{ rerank = 1 }]\n"), "bad.toml: [adapt] candidates[0].top_k: every candidate needs top_k");
  EXPECT_NE(refusal("candidates = [{ top_k = 2, rerank = 3 }]\n").find("candidates[0].rerank: keeps 3 of top_k 2"), std::string::npos);
  EXPECT_NE(refusal("candidates = [{ top_k = 0 }]\n").find("candidates[0].top_k: must be in [1, 64], got 0"), std::string::npos);
  EXPECT_NE(refusal("candidates = [{ top_k = 1, retrieval_interval = 8 }]\n").find("candidates[0].retrieval_interval: applies to iterative pipelines only"),
            std::string::npos);
  EXPECT_NE(refusal("candidates = [{ top_k = 1 }, { top_k = 1 }]\n").find("candidates[1].name: 'k1' names two candidates"),
            std::string::npos);
  EXPECT_NE(refusal("candidates = [{ top_k = 1, name = \"auto\" }]\n").find("candidates[0].name: must be"), std::string::npos);
  EXPECT_NE(refusal("candidates = [{ top_k = 1, quality = 1.5 }]\n").find("candidates[0].quality: must be in [0, 1]"),
            std::string::npos);
  EXPECT_NE(refusal("candidates = [ 3 ]\n").find("candidates[0]: must be a table of knobs"), std::string::npos);
  EXPECT_NE(refusal("candidate = [{ top_k = 1 }]\n").find("[adapt] unknown key 'candidate'"), std::string::npos);
  EXPECT_NE(refusal("candidates = [{ top_k = 1 }]\n", "speculative_prefill = true\n")
                .find("[retriever] speculative_prefill: an adaptive pipeline"),
            std::string::npos);
  // Iterative pipelines: the retrieval interval is a knob, reranking is not.
  const std::string iter = "[iterative]\nretrieval_interval = 4\n";
  auto it = parse_pipeline_spec("[retriever]\ntop_k = 2\n" + iter + "[adapt]\ncandidates = [{ top_k = 2, retrieval_interval = 8 }]\n", "it.toml");
  ASSERT_TRUE(it.ok()) << it.status().to_string();
  EXPECT_EQ(it->adapt->candidates[0].name, "k2-interval8");
  EXPECT_NE(refusal("candidates = [{ top_k = 2, rerank = 1 }]\n", iter).find("candidates[0].rerank: reranking is for one-shot"),
            std::string::npos);
}

fs::path fresh_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("ragd_adapt_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

TEST(AdaptSpec, TheFittedProfileBesideTheSpecIsLoaded) {
  const fs::path dir = fresh_dir("profile");
  std::ofstream(dir / "qa-adapt.toml") << kAdaptSpec;
  auto specs = load_pipeline_dir(dir.string());
  ASSERT_TRUE(specs.ok()) << specs.status().to_string();
  const PipelineSpec* qa = nullptr;
  for (const auto& s : *specs)
    if (s.name == "qa-adapt") qa = &s;
  ASSERT_NE(qa, nullptr);
  EXPECT_TRUE(qa->adapt->profile.models.empty());  // no profile yet: priors
  AdaptProfile p;
  p.source = "fit.jsonl";
  AdaptModel m;
  m.quality = {1, 2, 3, 4, 5};
  m.ttft_idle_ms = 42;
  p.models["best"] = m;
  std::ofstream(dir / "qa-adapt.profile") << adapt_profile_toml(p);
  specs = load_pipeline_dir(dir.string());
  ASSERT_TRUE(specs.ok()) << specs.status().to_string();
  for (const auto& s : *specs)
    if (s.name == "qa-adapt") {
      ASSERT_EQ(s.adapt->profile.models.count("best"), 1u);
      EXPECT_DOUBLE_EQ(s.adapt->profile.models.at("best").ttft_idle_ms, 42);
      EXPECT_EQ(s.adapt->profile.source, "fit.jsonl");
    }
  // A profile naming a candidate the spec lacks is refused, naming both files.
  p.models["gone"] = m;
  std::ofstream(dir / "qa-adapt.profile") << adapt_profile_toml(p);
  specs = load_pipeline_dir(dir.string());
  ASSERT_FALSE(specs.ok());
  EXPECT_NE(specs.status().message().find("[candidates.gone] names no candidate of"), std::string::npos) << specs.status().message();
  // A named profile that does not exist is an error; an absent default one is not.
  std::ofstream(dir / "qa-adapt.toml") << std::string(kAdaptSpec) + "profile = \"nope.profile\"\n";
  fs::remove(dir / "qa-adapt.profile");
  specs = load_pipeline_dir(dir.string());
  ASSERT_FALSE(specs.ok());
  EXPECT_NE(specs.status().message().find("[adapt] profile:"), std::string::npos) << specs.status().message();
  fs::remove_all(dir);
}

class AdaptResolve : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = parse_pipeline_spec(kAdaptSpec, "qa.toml");
    ASSERT_TRUE(s.ok());
    spec_ = std::move(*s);
  }
  RunRequest req() const {
    RunRequest r;
    r.pipeline = "qa-adapt";
    r.query = "who?";
    return r;
  }
  PipelineSpec spec_;
};

TEST_F(AdaptResolve, AutoAllowsEveryCandidateAndSearchesForTheLargest) {
  auto r = resolve_run(req(), &spec_);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_TRUE(r->adapt.has_value());
  EXPECT_EQ(r->adapt->allowed, (std::vector<size_t>{0, 1, 2}));
  EXPECT_FALSE(r->adapt->forced);
  EXPECT_EQ(r->retrieval_k, 4);
  EXPECT_EQ(r->adapt->objective, AdaptObjective::kLatency);
  EXPECT_DOUBLE_EQ(r->adapt->slo_ttft_ms, 250);
  EXPECT_FALSE(r->speculative_prefill);
  apply_adapt_choice(*r, spec_.adapt->candidates[2]);
  EXPECT_EQ(r->retrieval_k, 2);
  EXPECT_EQ(r->rerank, 0);
  EXPECT_TRUE(r->extractive);
  apply_adapt_choice(*r, spec_.adapt->candidates[1]);
  EXPECT_EQ(r->retrieval_k, 4);
  EXPECT_EQ(r->rerank, 1);
  EXPECT_FALSE(r->extractive);
}

TEST_F(AdaptResolve, RequestKnobsNarrowTheCandidatesOrAre400) {
  RunRequest q = req();
  q.adapt = "best";
  auto r = resolve_run(q, &spec_);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->adapt->forced);
  EXPECT_EQ(r->adapt->allowed, (std::vector<size_t>{1}));
  q.adapt = "k3";
  r = resolve_run(q, &spec_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "adapt: 'k3' is not a candidate of pipeline 'qa-adapt' (auto | k1 | best | k2-extractive)");
  q = req();
  q.retrieval_top_k = 2;
  r = resolve_run(q, &spec_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->adapt->allowed, (std::vector<size_t>{2}));
  EXPECT_EQ(r->retrieval_k, 4);  // the search stays that of every candidate
  q.retrieval_top_k = 3;
  r = resolve_run(q, &spec_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "top_k: 3 is not among the [adapt] candidates of pipeline 'qa-adapt' (1 | 4 | 2)");
  q = req();
  q.sampling.extractive = false;
  r = resolve_run(q, &spec_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->adapt->allowed, (std::vector<size_t>{0, 1}));
  q.adapt = "k2-extractive";  // forced, then narrowed to nothing
  r = resolve_run(q, &spec_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("extractive: 0 is not among"), std::string::npos) << r.status().message();
  // Objective and SLO overrides.
  q = req();
  q.adapt_objective = AdaptObjective::kQuality;
  q.slo_ttft_ms = 80;
  r = resolve_run(q, &spec_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->adapt->objective, AdaptObjective::kQuality);
  EXPECT_DOUBLE_EQ(r->adapt->slo_ttft_ms, 80);
}

TEST_F(AdaptResolve, AdaptFieldsOnOtherPipelinesAre400) {
  PipelineSpec plain;
  RunRequest q = req();
  q.adapt = "auto";
  auto r = resolve_run(q, &plain);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("apply to adaptive pipelines only; 'default' has no [adapt] table"), std::string::npos);
  q = req();
  q.slo_ttft_ms = 100;
  EXPECT_FALSE(resolve_run(q, &plain).ok());
  RunRequest chat;
  chat.prompt = "hi";
  chat.adapt_objective = AdaptObjective::kLatency;
  EXPECT_FALSE(resolve_run(chat, nullptr).ok());
  // latency without a target anywhere.
  auto b = parse_pipeline_spec("[adapt]\ncandidates = [{ top_k = 1 }]\n", "b.toml");
  ASSERT_TRUE(b.ok());
  q = req();
  q.adapt_objective = AdaptObjective::kLatency;
  r = resolve_run(q, &*b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("slo_ttft_ms: objective 'latency' needs a TTFT target"), std::string::npos);
}

TEST(AdaptParams, RequestRowsDecodeAndCheckRanges) {
  const ParamDef* a = find_run_param(RunRoute::kRagd, "adapt");
  ASSERT_NE(a, nullptr);
  RunRequest r;
  ASSERT_TRUE(a->set(r, ParamValue(std::string("best"))).ok());
  EXPECT_EQ(r.adapt, "best");
  EXPECT_FALSE(a->set(r, ParamValue(std::string(""))).ok());
  const ParamDef* o = find_run_param(RunRoute::kRagd, "adapt_objective");
  ASSERT_NE(o, nullptr);
  ASSERT_TRUE(o->set(r, ParamValue(std::string("latency"))).ok());
  EXPECT_EQ(r.adapt_objective, AdaptObjective::kLatency);
  EXPECT_FALSE(o->set(r, ParamValue(std::string("fast"))).ok());
  const ParamDef* slo = find_run_param(RunRoute::kRagd, "slo_ttft_ms");
  ASSERT_NE(slo, nullptr);
  EXPECT_FALSE(slo->range.contains(0));
  EXPECT_FALSE(slo->range.contains(-1));
  EXPECT_TRUE(slo->range.contains(0.5));
}

}  // namespace
}  // namespace ragd::pipelines
