// The run parameter table (run_params.h): every row decodes, range-checks and sets its field;
// docs/api.md lists exactly the table's rows; resolve_run applies every default in one place.
#include <gtest/gtest.h>

#include <fstream>
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
  EXPECT_EQ(n, static_cast<int>(run_param_defs().size()));
}

TEST(RunParams, NamesAreUniqueAndEveryRowSetsItsField) {
  std::set<std::string_view> names;
  for (const ParamDef& d : run_param_defs()) {
    EXPECT_TRUE(names.insert(d.name).second) << d.name;
    EXPECT_EQ(find_run_param(d.name), &d);
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
      case ParamType::kEnum: {
        // Every choice the table lists sets the field; a name outside them is refused.
        ASSERT_NE(d.choices, nullptr) << d.name;
        const std::string all = d.choices();
        std::vector<std::string> names;
        for (size_t b = 0, e; b < all.size(); b = e + 3) {
          e = all.find(" | ", b);
          if (e == std::string::npos) e = all.size();
          names.push_back(all.substr(b, e - b));
        }
        ASSERT_GE(names.size(), 2u) << d.name << ": " << all;
        for (const std::string& n : names) {
          RunRequest each;
          EXPECT_TRUE(d.set(each, n).ok()) << d.name << " " << n;
        }
        EXPECT_FALSE(d.set(r, std::string("no-such-choice")).ok()) << d.name;
        v = names.front();
        break;
      }
    }
    const RunRequest before = r;
    ASSERT_TRUE(d.set(r, v).ok()) << d.name;
    // The request changed (a field took the value): compared through the resolved run or the fields.
    const bool changed = r.retrieval_top_k != before.retrieval_top_k || r.overrides.max_tokens != before.overrides.max_tokens ||
                         r.overrides.temperature != before.overrides.temperature || r.overrides.top_p != before.overrides.top_p ||
                         r.overrides.seed != before.overrides.seed || r.overrides.stop != before.overrides.stop ||
                         r.overrides.extractive != before.overrides.extractive || r.reuse != before.reuse ||
                         r.recompute_ratio != before.recompute_ratio || r.epic_k != before.epic_k || r.overlap != before.overlap ||
                         r.retrieval_interval != before.retrieval_interval ||
                         r.speculative_prefill != before.speculative_prefill || r.want_logprobs != before.want_logprobs ||
                         r.speculative_k != before.speculative_k || r.min_score_ratio != before.min_score_ratio ||
                         r.sampling.ignore_eos != before.sampling.ignore_eos || r.sampling.min_p != before.sampling.min_p ||
                         r.context_must_include != before.context_must_include || r.cache_salt != before.cache_salt ||
                         r.adapt != before.adapt || r.adapt_objective != before.adapt_objective ||
                         r.slo_ttft_ms != before.slo_ttft_ms || r.retrieval_mode != before.retrieval_mode ||
                         r.filter_json != before.filter_json || r.sampling.constraint != before.sampling.constraint;
    EXPECT_TRUE(changed) << d.name << " set nothing";
  }
  EXPECT_EQ(find_run_param("query"), nullptr);  // a route field, not a run parameter
}

// cache_salt counts characters (code points) as documented, not bytes; a salt that is not UTF-8 is
// refused naming the field (security issue 48).
TEST(RunParams, CacheSaltLimitIsInCharacters) {
  const ParamDef* d = find_run_param("cache_salt");
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
  req.overrides.max_tokens = 4;
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
