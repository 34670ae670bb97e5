#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "ragd/pipelines/pipeline_spec.h"

namespace ragd::pipelines {
namespace {

namespace fs = std::filesystem;

std::string tmpdir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("ragd_spec_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(PipelineSpec, ParsesEveryField) {
  auto s = parse_pipeline_spec(R"(
[pipeline]
name = "qa"
description = "d"
[retriever]
top_k = 7
mode = "lexical"
index = "IVF64,Flat"
nprobe = 3
[prompt]
system = "sys"
context_header = "C:"
separator = "|"
question_prefix = "Q:"
number_passages = true
chat_template = "chatml"
[reuse]
mode = "prefix"
[generation]
max_tokens = 33
temperature = 0.5
top_p = 0.9
top_k = 5
seed = 42
stop = ["END", "###"]
extractive = true
speculative_k = 6
)", "qa.toml");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->name, "qa");
  EXPECT_EQ(s->top_k, 7);
  EXPECT_EQ(s->index, "IVF64,Flat");
  EXPECT_EQ(s->nprobe, 3);
  EXPECT_EQ(s->system_prompt, "sys");
  EXPECT_EQ(s->context_header, "C:");
  EXPECT_EQ(s->separator, "|");
  EXPECT_EQ(s->question_prefix, "Q:");
  EXPECT_TRUE(s->number_passages);
  EXPECT_EQ(s->retrieval_mode, retrieval::RetrievalMode::kLexical);
  EXPECT_EQ(s->chat_template, "chatml");
  EXPECT_EQ(s->reuse, ReuseMode::kPrefix);
  EXPECT_EQ(s->max_tokens, 33);
  EXPECT_FLOAT_EQ(s->temperature, 0.5f);
  EXPECT_FLOAT_EQ(s->top_p, 0.9f);
  EXPECT_EQ(s->sampling_top_k, 5);
  EXPECT_EQ(s->seed, 42u);
  EXPECT_EQ(s->stop, (std::vector<std::string>{"END", "###"}));
  EXPECT_TRUE(s->extractive);
  EXPECT_EQ(s->speculative_k, 6);
  EXPECT_EQ(s->info().reuse, "prefix");
}

TEST(PipelineSpec, EmptyFileGivesDefaultsWithFileName) {
  auto s = parse_pipeline_spec("", "x.toml", "from-stem");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->name, "from-stem");
  EXPECT_EQ(s->top_k, 4);
  EXPECT_EQ(s->reuse, ReuseMode::kKnowledgeTree);
  EXPECT_FALSE(s->speculative_k);  // the server's
}

void expect_error(const std::string& text, const std::string& needle) {
  auto s = parse_pipeline_spec(text, "bad.toml");
  ASSERT_FALSE(s.ok()) << text;
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("bad.toml"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find(needle), std::string::npos) << s.status().message();
}

TEST(PipelineSpec, SyntaxErrorNamesFileAndLine) { expect_error("[retriever\ntop_k = 1", "bad.toml:1"); }
TEST(PipelineSpec, UnknownTable) { expect_error("[retreiver]\ntop_k = 1", "unknown table [retreiver]"); }
TEST(PipelineSpec, RetrieverModeIsOneOfTheModes) {
  expect_error("[retriever]\nmode = \"bm25\"", "mode");
  auto s = parse_pipeline_spec("", "d.toml");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->retrieval_mode, retrieval::RetrievalMode::kAuto);
  EXPECT_FALSE(s->number_passages);
}
TEST(PipelineSpec, UnknownKey) { expect_error("[retriever]\ntopk = 1", "unknown key 'topk'"); }
TEST(PipelineSpec, WrongType) { expect_error("[retriever]\ntop_k = \"four\"", "top_k: must be an integer"); }
TEST(PipelineSpec, OutOfRange) { expect_error("[retriever]\ntop_k = 1000", "top_k: must be in [0, 64], got 1000"); }
TEST(PipelineSpec, BadReuseMode) { expect_error("[reuse]\nmode = \"cacheblend2\"", "[reuse] mode: reuse must be one of none | prefix | knowledge_tree | cacheblend | epic | auto; got 'cacheblend2'"); }
TEST(PipelineSpec, BadTemplate) { expect_error("[prompt]\nchat_template = \"jinja\"", "[prompt] chat_template: must be one of model | auto | llama3 | chatml | mistral | none; got 'jinja'"); }
TEST(PipelineSpec, RerankKeepsAtMostTopKOfOneShotRuns) {
  auto s = parse_pipeline_spec("[retriever]\ntop_k = 5\nrerank = 2\n", "r.toml");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->rerank, 2);
  EXPECT_EQ(parse_pipeline_spec("", "d.toml")->rerank, 0);  // off by default
  expect_error("[retriever]\ntop_k = 3\nrerank = 4\n", "rerank: keeps 4 of top_k 3 passages");
  expect_error("[retriever]\nrerank = -1\n", "rerank: must be in [0, 64], got -1");
  expect_error("[retriever]\nrerank = 1\nspeculative_prefill = true\n", "cannot be combined with speculative_prefill");
  expect_error("[retriever]\nrerank = 1\n[iterative]\nretrieval_interval = 8\n", "not iterative ones");
}

TEST(PipelineSpec, RerankModelNamesACrossEncoderThatSomethingUses) {
  auto s = parse_pipeline_spec("[retriever]\ntop_k = 5\nrerank = 1\nrerank_model = \"/models/bge-reranker\"\n", "r.toml");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->rerank_model, "/models/bge-reranker");
  EXPECT_EQ(parse_pipeline_spec("", "d.toml")->rerank_model, "") << "the generator reranks by default";
  expect_error("[retriever]\nrerank_model = \"/m\"\n", "rerank_model: names a cross-encoder, but nothing reranks");
  expect_error("[retriever]\nrerank = 1\nrerank_model = 3\n", "rerank_model");
  // Loaded from a file, a relative directory is relative to the spec's directory.
  const auto dir = std::filesystem::temp_directory_path() / ("ragd_spec_rm_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "ce.toml") << "[retriever]\ntop_k = 4\nrerank = 1\nrerank_model = \"../rerankers/ce\"\n";
  auto f = load_pipeline_spec((dir / "ce.toml").string());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->rerank_model, (dir.parent_path() / "rerankers" / "ce").string());
  std::filesystem::remove_all(dir);
}

TEST(PipelineSpec, IterativeTableMakesAnIterativePipeline) {
  auto s = parse_pipeline_spec("[retriever]\ntop_k = 2\nspeculative_prefill = true\n[iterative]\nretrieval_interval = 8\n"
                               "query_window = 24\noverlap = \"both\"\nspeculation_cache = 7\nmax_stride = 3\n"
                               "max_nprobe = 32\nquery_lag = 1\n",
                               "it.toml");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ASSERT_TRUE(s->iterative.has_value());
  EXPECT_EQ(s->iterative->retrieval_interval, 8);
  EXPECT_EQ(s->iterative->query_window, 24);
  EXPECT_EQ(s->iterative->overlap, RetrievalOverlap::kBoth);
  EXPECT_EQ(s->iterative->speculation_cache, 7);
  EXPECT_EQ(s->iterative->max_stride, 3);
  EXPECT_EQ(s->iterative->max_nprobe, 32);
  EXPECT_EQ(s->iterative->query_lag, 1);
  EXPECT_TRUE(s->speculative_prefill);
  EXPECT_EQ(s->info().kind, "iterative");
  EXPECT_EQ(s->info().overlap, "both");
  auto plain = parse_pipeline_spec("", "plain.toml");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->iterative.has_value());
  EXPECT_FALSE(plain->speculative_prefill);
  EXPECT_EQ(plain->info().kind, "one_shot");
}
TEST(PipelineSpec, BadIterativeFields) {
  expect_error("[iterative]\noverlap = \"eager\"", "[iterative] overlap: overlap must be one of none | piperag | speculative | both; got 'eager'");
  expect_error("[iterative]\nretrieval_interval = 0", "retrieval_interval: must be in [1, 4096], got 0");
  expect_error("[iterative]\nstride = 2", "[iterative] unknown key 'stride'");
  expect_error("[retriever]\ntop_k = 0\n[iterative]\n", "needs [retriever] top_k > 0");
  expect_error("[retriever]\nspeculative_prefill = 1", "speculative_prefill: must be true or false");
}
TEST(PipelineSpec, BadName) { expect_error("[pipeline]\nname = \"a b\"", "name: must be 1-64"); }
TEST(PipelineSpec, BadTopP) { expect_error("[generation]\ntop_p = 1.5", "top_p: must be in"); }
TEST(PipelineSpec, SpeculativeKInRange) {
  expect_error("[generation]\nspeculative_k = 17", "speculative_k");
  expect_error("[generation]\nspeculative_k = -1", "speculative_k");
  expect_error("[generation]\nspeculative_k = \"8\"", "speculative_k: must be an integer");
  auto off = parse_pipeline_spec("[generation]\nspeculative_k = 0", "x.toml");
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->speculative_k, 0);  // set to off: the server's default does not apply
}
TEST(PipelineSpec, SpeculativeTableSetsMethodKAndDraftModel) {
  auto d = parse_pipeline_spec("[generation]\nspeculative = { method = \"draft\", k = 4, draft_model = \"models/ragd-draft\" }", "x.toml");
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->speculative_method, DraftMethod::kDraft);
  EXPECT_EQ(d->speculative_k, 4);
  EXPECT_EQ(d->draft_model, "models/ragd-draft");
  auto implied = parse_pipeline_spec("[generation]\nspeculative = { draft_model = \"m\" }", "x.toml");
  ASSERT_TRUE(implied.ok());
  EXPECT_EQ(implied->speculative_method, DraftMethod::kDraft);
  auto ngram = parse_pipeline_spec("[generation]\nspeculative = { method = \"ngram\", k = 8 }", "x.toml");
  ASSERT_TRUE(ngram.ok());
  EXPECT_EQ(ngram->speculative_method, DraftMethod::kNgram);
  EXPECT_TRUE(ngram->draft_model.empty());
  expect_error("[generation]\nspeculative = { method = \"tree\" }", "speculative: speculative method must be one of ngram | draft");
  expect_error("[generation]\nspeculative = { k = 17 }", "k must be an integer in 0..16");
  expect_error("[generation]\nspeculative = { model = \"m\" }", "unknown key 'model'");
  expect_error("[generation]\nspeculative_k = 2\nspeculative = { k = 4 }", "k and speculative_k disagree");
  expect_error("[generation]\nspeculative = \"draft\"", "must be a table");
}
TEST(PipelineSpec, BadExtractive) { expect_error("[generation]\nextractive = \"yes\"", "extractive: must be true or false"); }
TEST(PipelineSpec, BadStop) { expect_error("[generation]\nstop = [1]", "stop: must be an array of strings"); }
TEST(PipelineSpec, NonTableSection) { expect_error("reuse = \"none\"", "'reuse' must be a table"); }

TEST(PipelineSpec, DirectoryAddsDefaultAndRejectsDuplicates) {
  const std::string d = tmpdir("dir");
  write(d + "/b.toml", "[reuse]\nmode = \"none\"\n");
  write(d + "/a.toml", "[pipeline]\nname = \"alpha\"\n");
  write(d + "/ignored.txt", "not toml");
  auto v = load_pipeline_dir(d);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  ASSERT_EQ(v->size(), 3u);
  EXPECT_EQ((*v)[0].name, "default");
  EXPECT_EQ((*v)[1].name, "alpha");
  EXPECT_EQ((*v)[2].name, "b");
  EXPECT_EQ((*v)[2].reuse, ReuseMode::kNone);
  write(d + "/c.toml", "[pipeline]\nname = \"alpha\"\n");
  auto dup = load_pipeline_dir(d);
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("already defined"), std::string::npos);
  EXPECT_NE(dup.status().message().find("a.toml"), std::string::npos);
  fs::remove_all(d);
}

TEST(PipelineSpec, MissingDirectoryIsNotFound) {
  auto v = load_pipeline_dir("/nonexistent/ragd/pipelines");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kNotFound);
  EXPECT_NE(v.status().message().find("/nonexistent/ragd/pipelines"), std::string::npos);
  auto only = load_pipeline_dir("");
  ASSERT_TRUE(only.ok());
  ASSERT_EQ(only->size(), 1u);
  EXPECT_EQ((*only)[0].name, "default");
}

TEST(PipelineSpec, ShippedConfigsParse) {
  const fs::path dir = fs::path(RAGD_SOURCE_DIR) / "configs" / "pipelines";
  auto v = load_pipeline_dir(dir.string());
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_GE(v->size(), 3u);
}

TEST(PipelineSpec, OverridesAreResolvedOnceAndExplicitValuesWin) {
  PipelineSpec spec;
  spec.max_tokens = 5;
  spec.temperature = 0.7f;
  spec.top_p = 0.9f;
  spec.sampling_top_k = 40;
  spec.seed = 3;
  spec.stop = {"END"};
  RunRequest req;
  req.query = "q";
  req.sampling.ignore_eos = true;
  engine::SamplingParams p = resolve_run(req, &spec).value().sampling;
  EXPECT_EQ(p.max_tokens, 5);
  EXPECT_FLOAT_EQ(p.temperature, 0.7f);
  EXPECT_FLOAT_EQ(p.top_p, 0.9f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_EQ(p.seed, 3u);
  EXPECT_EQ(p.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(p.ignore_eos);
  // Explicit values equal to the built-in defaults are honoured.
  const engine::SamplingParams builtin;
  req.sampling.max_tokens = builtin.max_tokens;
  req.sampling.temperature = builtin.temperature;
  req.sampling.top_p = builtin.top_p;
  req.sampling.top_k = builtin.top_k;
  req.sampling.seed = builtin.seed;
  req.sampling.stop = std::vector<std::string>{};
  p = resolve_run(req, &spec).value().sampling;
  EXPECT_EQ(p.max_tokens, builtin.max_tokens);
  EXPECT_FLOAT_EQ(p.temperature, 0.0f);
  EXPECT_FLOAT_EQ(p.top_p, 1.0f);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_EQ(p.seed, 0u);
  EXPECT_TRUE(p.stop.empty());
  // Plain runs: the request's values over the built-in defaults.
  RunRequest plain;
  plain.prompt = "p";
  plain.sampling.max_tokens = 9;
  plain.sampling.temperature = 0.5f;
  p = resolve_run(plain, nullptr).value().sampling;
  EXPECT_EQ(p.max_tokens, 9);
  EXPECT_FLOAT_EQ(p.temperature, 0.5f);
}

}  // namespace
}  // namespace ragd::pipelines
