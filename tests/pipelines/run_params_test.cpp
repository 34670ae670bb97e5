// The run parameter table (run_params.h): every row decodes, range-checks and sets its field;
// docs/api.md lists exactly the table's rows; resolve_run applies every default in one place.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "ragd/pipelines/pipeline_spec.h"
#include "ragd/pipelines/run_params.h"

namespace ragd::pipelines {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(RunParams, DocsListEveryRowOfTheTable) {
  const std::string api = read_file(std::string(RAGD_SOURCE_DIR) + "/docs/api.md");
  ASSERT_FALSE(api.empty());
  std::istringstream rows(run_param_doc_rows());
  std::string row;
  int n = 0;
  while (std::getline(rows, row)) {
    ++n;
    EXPECT_NE(api.find(row), std::string::npos) << "docs/api.md lacks the row (generated from run_params.h):\n" << row;
  }
  int ragd_rows = 0;
  for (const ParamDef& d : run_param_defs()) ragd_rows += d.on(RunRoute::kRagd) ? 1 : 0;
  EXPECT_EQ(n, ragd_rows);
  // The OpenAI section names every field the table decodes on those routes.
  const size_t openai = api.find("## OpenAI-compatible");
  ASSERT_NE(openai, std::string::npos);
  for (const ParamDef& d : run_param_defs()) {
    if (!d.on(RunRoute::kOpenAi)) continue;
    EXPECT_NE(api.find("`" + std::string(d.names.openai) + "`", openai), std::string::npos)
        << "docs/api.md's OpenAI section does not name " << d.names.openai;
  }
}


TEST(RunParams, NamesAreUniquePerRouteAndEveryRowSetsItsField) {
  std::set<std::string_view> names[2];
  for (const ParamDef& d : run_param_defs()) {
    EXPECT_NE(d.routes(), 0) << "a row on no route: " << d.names.ragd << d.names.openai;
    for (RunRoute route : kRunRoutes) {
      if (!d.on(route)) continue;
      EXPECT_TRUE(names[static_cast<int>(route)].insert(d.name(route)).second) << d.name(route);
      EXPECT_EQ(find_run_param(route, d.name(route)), &d);
    }
    RunRequest r;
    ParamValue v;
    switch (d.type) {
      case ParamType::kInt: v = static_cast<int64_t>(d.range.hi); break;
      case ParamType::kNumber: v = d.range.hi; break;
      case ParamType::kBool: v = true; break;
      case ParamType::kString: v = std::string("doc-7"); break;
      case ParamType::kStringList: v = std::vector<std::string>{"END"}; break;
      case ParamType::kSeed: v = uint64_t{12345}; break;
      case ParamType::kObject: v = std::string(R"({"lang":"en"})"); break;
      case ParamType::kTokenIds: v = std::vector<int32_t>{7, 9}; break;
      case ParamType::kEnum:
        ASSERT_NE(d.choices, nullptr) << d.names.ragd;
        v = d.choice_names().front();
        break;
    }
    const RunRequest before = r;
    ASSERT_TRUE(d.set(r, v).ok()) << d.names.ragd << d.names.openai;
    // The request changed (a field took the value).
    const RunSampling& a = r.sampling;
    const RunSampling& b = before.sampling;
    const bool changed = r.retrieval_top_k != before.retrieval_top_k || a.max_tokens != b.max_tokens ||
                         a.temperature != b.temperature || a.top_p != b.top_p || a.top_k != b.top_k || a.seed != b.seed ||
                         a.stop != b.stop || a.extractive != b.extractive || a.min_p != b.min_p ||
                         a.presence_penalty != b.presence_penalty || a.frequency_penalty != b.frequency_penalty ||
                         a.repetition_penalty != b.repetition_penalty || a.stop_token_ids != b.stop_token_ids ||
                         a.ignore_eos != b.ignore_eos || a.constraint != b.constraint || r.reuse != before.reuse ||
                         r.recompute_ratio != before.recompute_ratio || r.epic_k != before.epic_k || r.overlap != before.overlap ||
                         r.retrieval_interval != before.retrieval_interval ||
                         r.speculative_prefill != before.speculative_prefill || r.want_logprobs != before.want_logprobs ||
                         r.speculative_k != before.speculative_k || r.min_score_ratio != before.min_score_ratio ||
                         r.context_must_include != before.context_must_include || r.cache_salt != before.cache_salt ||
                         r.adapt != before.adapt || r.adapt_objective != before.adapt_objective ||
                         r.slo_ttft_ms != before.slo_ttft_ms || r.retrieval_mode != before.retrieval_mode ||
                         r.filter_json != before.filter_json || r.speculative_method != before.speculative_method ||
                         r.draft_model != before.draft_model;
    EXPECT_TRUE(changed) << d.names.ragd << d.names.openai << " set nothing";
  }
  for (RunRoute route : kRunRoutes) {
    EXPECT_EQ(find_run_param(route, "query"), nullptr);  // a route field, not a run parameter
    EXPECT_EQ(find_run_param(route, ""), nullptr);       // "" is "absent on this route", never a name
  }
  EXPECT_EQ(find_run_param(RunRoute::kRagd, "retrieval_top_k"), nullptr);
  EXPECT_EQ(find_run_param(RunRoute::kRagd, "presence_penalty"), nullptr);
  EXPECT_EQ(find_run_param(RunRoute::kOpenAi, "reuse"), nullptr);
}

// A pipeline spec under which every choice of `row` resolves (iterative for overlap, adaptive for
// adapt_objective), and the resolved value's name.
struct EnumRowCase {
  std::function<void(PipelineSpec&, RunRequest&)> prepare;
  std::function<std::string(const ResolvedRun&)> resolved;
};

std::map<std::string_view, EnumRowCase> enum_row_cases() {
  std::map<std::string_view, EnumRowCase> m;
  m["retrieval_mode"] = {[](PipelineSpec&, RunRequest&) {},
                         [](const ResolvedRun& r) { return std::string(enum_name(r.retrieval_mode)); }};
  m["speculative_method"] = {[](PipelineSpec&, RunRequest&) {},
                             [](const ResolvedRun& r) {
                               return r.speculative_method ? std::string(enum_name(*r.speculative_method)) : "(server's)";
                             }};
  m["reuse"] = {[](PipelineSpec&, RunRequest&) {}, [](const ResolvedRun& r) { return std::string(enum_name(r.reuse)); }};
  m["overlap"] = {[](PipelineSpec& s, RunRequest&) { s.iterative = IterativeParams{}; },
                  [](const ResolvedRun& r) { return r.iterative ? std::string(enum_name(r.iterative->overlap)) : "(not iterative)"; }};
  m["adapt_objective"] = {[](PipelineSpec& s, RunRequest& req) {
                            AdaptSpec a;
                            a.candidates.resize(2);
                            a.candidates[0].name = "small";
                            a.candidates[1].name = "large";
                            a.candidates[1].top_k = 4;
                            s.adapt = std::move(a);
                            req.slo_ttft_ms = 100;  // latency needs a target
                          },
                          [](const ResolvedRun& r) { return r.adapt ? std::string(enum_name(r.adapt->objective)) : "(not adaptive)"; }};
  return m;
}

// Every choice of every enum row, decoded on every route that has the row, resolves to the value of
// that name; a name outside the choices is refused naming the field and listing them.
TEST(RunParams, EveryEnumChoiceResolvesToItsValue) {
  const auto cases = enum_row_cases();
  int rows = 0;
  for (const ParamDef& d : run_param_defs()) {
    if (d.type != ParamType::kEnum) continue;
    ++rows;
    const std::string_view key = d.on(RunRoute::kRagd) ? d.names.ragd : d.names.openai;
    auto c = cases.find(key);
    ASSERT_NE(c, cases.end()) << "enum row '" << key << "' has no case here: add how its value resolves";
    const std::vector<std::string> choices = d.choice_names();
    ASSERT_GE(choices.size(), 2u) << key;
    for (RunRoute route : kRunRoutes) {
      if (!d.on(route)) continue;
      for (const std::string& name : choices) {
        PipelineSpec spec;
        spec.top_k = 2;
        RunRequest req;
        req.pipeline = spec.name;
        req.query = "q";
        c->second.prepare(spec, req);
        ASSERT_TRUE(set_run_param(d, route, req, name).ok()) << key << " " << name;
        Result<ResolvedRun> r = resolve_run(req, &spec);
        ASSERT_TRUE(r.ok()) << key << " " << name << ": " << r.status().to_string();
        EXPECT_EQ(c->second.resolved(*r), name) << key;
      }
      RunRequest req;
      Status st = set_run_param(d, route, req, std::string("no-such-choice"));
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << key;
      EXPECT_EQ(st.message(), "field '" + std::string(d.name(route)) + "' must be one of " + d.choices() + "; got 'no-such-choice'");
      for (const std::string& name : choices) EXPECT_NE(st.message().find(name), std::string::npos) << name;
    }
  }
  EXPECT_EQ(rows, static_cast<int>(cases.size())) << "a case for an enum row the table no longer has";
}

// `top_k` is the passages retrieved on the ragd routes and sampling top-k on the OpenAI routes,
// where the passages are `retrieval_top_k`.
TEST(RunParams, TopKIsPassagesOnRagdAndSamplingOnOpenAi) {
  const ParamDef* ragd = find_run_param(RunRoute::kRagd, "top_k");
  const ParamDef* oai = find_run_param(RunRoute::kOpenAi, "top_k");
  ASSERT_NE(ragd, nullptr);
  ASSERT_NE(oai, nullptr);
  EXPECT_NE(ragd, oai);
  EXPECT_EQ(find_run_param(RunRoute::kOpenAi, "retrieval_top_k"), ragd);
  EXPECT_FALSE(oai->on(RunRoute::kRagd));
  PipelineSpec spec;
  spec.top_k = 3;
  spec.sampling_top_k = 0;
  auto resolved = [&](const ParamDef* d, RunRoute route) {
    RunRequest req;
    req.pipeline = spec.name;
    req.query = "q";
    EXPECT_TRUE(set_run_param(*d, route, req, int64_t{5}).ok());
    Result<ResolvedRun> r = resolve_run(req, &spec);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return *r;
  };
  ResolvedRun r = resolved(ragd, RunRoute::kRagd);
  EXPECT_EQ(r.retrieval_k, 5);
  EXPECT_EQ(r.sampling.top_k, 0);
  r = resolved(oai, RunRoute::kOpenAi);
  EXPECT_EQ(r.retrieval_k, 3);
  EXPECT_EQ(r.sampling.top_k, 5);
  EXPECT_EQ(oai->range.hi, kRangeSamplingTopK.hi);
  EXPECT_EQ(ragd->range.hi, kRangeRetrievalTopK.hi);
}

// cache_salt counts characters (code points) as documented, not bytes; a salt that is not UTF-8 is
// refused naming the field (security issue 48).
TEST(RunParams, CacheSaltLimitIsInCharacters) {
  const ParamDef* d = find_run_param(RunRoute::kRagd, "cache_salt");
  ASSERT_NE(d, nullptr);
  auto set = [&](std::string s) {
    RunRequest r;
    Status st = d->set(r, ParamValue(s));
    if (st.ok()) EXPECT_EQ(r.cache_salt, s);
    return st;
  };
  std::string three;  // 256 three-byte characters (U+20AC)
  for (int i = 0; i < 256; ++i) three += "\xE2\x82\xAC";
  EXPECT_TRUE(set(three).ok());
  EXPECT_EQ(set(three + "a").message(), "cache_salt must be 1..256 characters");
  EXPECT_TRUE(set(std::string(256, 'a')).ok());
  EXPECT_FALSE(set(std::string(257, 'a')).ok());
  EXPECT_FALSE(set("").ok());
  for (const char* bad : {"\xC3", "ok\xFF", "\xED\xA0\x80" /* a surrogate */, "\xC0\xAF" /* overlong */}) {
    Status st = set(bad);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(st.message(), "cache_salt is not valid UTF-8");
  }
}

TEST(RunParams, RangesGiveOneMessage) {
  EXPECT_TRUE(kRangeRecomputeRatio.check("recompute_ratio", 0.5).ok());
  Status st = kRangeEpicK.check("epic_k", 5000);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "epic_k must be in [0, 4096], got 5000");
  st = kRangeRecomputeRatio.check("recompute_ratio", 1.5);
  EXPECT_EQ(st.message(), "recompute_ratio must be in [0, 1], got 1.5");
  // The executor's own checks use the same ranges.
  BlendParams b;
  b.epic_k = 5000;
  EXPECT_EQ(b.validate().message(), "epic_k must be in [0, 4096], got 5000");
}

TEST(RunParams, ResolveRunAppliesEveryDefaultOnce) {
  PipelineSpec spec;  // the built-in default pipeline
  spec.top_k = 3;
  spec.max_tokens = 11;
  spec.speculative_prefill = true;
  RunRequest req;
  req.pipeline = spec.name;
  req.query = "q";
  auto r = resolve_run(req, &spec);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->retrieval_k, 3);
  EXPECT_EQ(r->sampling.max_tokens, 11);
  EXPECT_EQ(r->reuse, kDefaultPipelineReuse);
  EXPECT_TRUE(r->speculative_prefill);
  EXPECT_FALSE(r->iterative.has_value());
  // Request values win; a forced document turns speculative prefill off.
  req.retrieval_top_k = 2;
  req.sampling.max_tokens = 4;
  req.reuse = ReuseMode::kEpic;
  req.epic_k = 8;
  req.context_must_include = "d1";
  r = resolve_run(req, &spec);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->retrieval_k, 2);
  EXPECT_EQ(r->sampling.max_tokens, 4);
  EXPECT_EQ(r->reuse, ReuseMode::kEpic);
  EXPECT_EQ(r->blend.epic_k, 8);
  EXPECT_FALSE(r->speculative_prefill);
  // The retrieval mode: the request's, else the spec's (whose auto is the corpus's).
  EXPECT_EQ(r->retrieval_mode, retrieval::RetrievalMode::kAuto);
  spec.retrieval_mode = retrieval::RetrievalMode::kHybrid;
  EXPECT_EQ(resolve_run(req, &spec)->retrieval_mode, retrieval::RetrievalMode::kHybrid);
  req.retrieval_mode = retrieval::RetrievalMode::kDense;
  EXPECT_EQ(resolve_run(req, &spec)->retrieval_mode, retrieval::RetrievalMode::kDense);
  req.retrieval_mode.reset();
  // The weak-passage cut: the request's, else the spec's; a plain run has no passages to cut.
  EXPECT_DOUBLE_EQ(resolve_run(req, &spec)->min_score_ratio, spec.min_score_ratio);
  req.min_score_ratio = 0.25;
  EXPECT_DOUBLE_EQ(resolve_run(req, &spec)->min_score_ratio, 0.25);
  {
    RunRequest plain;
    plain.prompt = "hello";
    plain.min_score_ratio = 0.25;
    EXPECT_NE(resolve_run(plain, nullptr).status().message().find("min_score_ratio"), std::string::npos);
  }
  req.min_score_ratio.reset();
  // Reranking pipelines never speculate.
  spec.rerank = 1;
  req.context_must_include.clear();
  EXPECT_FALSE(resolve_run(req, &spec)->speculative_prefill);
  // Errors name the field.
  req.retrieval_top_k = 65;
  EXPECT_NE(resolve_run(req, &spec).status().message().find("top_k"), std::string::npos);
  req.retrieval_top_k = -1;
  req.overlap = RetrievalOverlap::kPipeRag;
  EXPECT_NE(resolve_run(req, &spec).status().message().find("iterative pipelines only"), std::string::npos);
  req.overlap.reset();
  req.epic_k = 5000;
  EXPECT_NE(resolve_run(req, &spec).status().message().find("epic_k"), std::string::npos);
  // Plain runs: prefix reuse by default, knowledge_tree has no documents to key, approximate modes refused.
  RunRequest plain;
  plain.prompt = "hello";
  r = resolve_run(plain, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->reuse, kDefaultPlainRunReuse);
  EXPECT_EQ(r->sampling.max_tokens, kDefaultMaxTokens);
  EXPECT_EQ(r->retrieval_k, 0);
  plain.reuse = ReuseMode::kKnowledgeTree;
  EXPECT_EQ(resolve_run(plain, nullptr)->reuse, ReuseMode::kPrefix);
  plain.reuse = ReuseMode::kCacheBlend;
  EXPECT_FALSE(resolve_run(plain, nullptr).ok());
  plain.reuse.reset();
  plain.retrieval_mode = retrieval::RetrievalMode::kLexical;  // a plain run searches nothing
  EXPECT_NE(resolve_run(plain, nullptr).status().message().find("retrieval_mode"), std::string::npos);
  plain.retrieval_mode.reset();
  // Iterative pipelines: the spec's parameters with the request's overrides.
  PipelineSpec iter;
  iter.iterative = IterativeParams{};
  RunRequest ir;
  ir.query = "q";
  ir.retrieval_interval = 9;
  r = resolve_run(ir, &iter);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->iterative.has_value());
  EXPECT_EQ(r->iterative->retrieval_interval, 9);
  ir.retrieval_top_k = 0;
  EXPECT_NE(resolve_run(ir, &iter).status().message().find("top_k > 0"), std::string::npos);
}

}  // namespace
}  // namespace ragd::pipelines
