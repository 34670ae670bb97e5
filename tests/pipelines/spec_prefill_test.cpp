// Speculative prefill of one-shot RAG runs (RAGCache's speculative pipelining) over a real IVF
// corpus: prefill starts on the candidates of an unfinished progressive search, restarts when they
// change, and the run's output (tokens, log-probabilities, sources) is that of the run that waited
// for the search, alone or with other runs in the batch; no KV block is left behind.
#include "executor_fixture.h"
#include "ragd/retrieval/corpus.h"

namespace ragd::pipelines {
namespace {

class SpecPrefillTest : public ExecutorTest {
 protected:
  // 240 passages over 40 topics in an IVF index of 8 lists (or `index`), then the runtime on the
  // same data dir, searching in `mode`: dense by default, the staged vector search that speculative
  // prefill speculates on. With `private_docs`, tenant "alpha" owns 24 more passages, on the same
  // topics, each holding a secret word.
  Runtime open_ivf(const std::string& data, const std::string& index = "IVF8,Flat", bool private_docs = false,
                   retrieval::RetrievalMode mode = retrieval::RetrievalMode::kDense) {
    {
      auto tok = engine::Tokenizer::from_file(*root_ + "/model/tokenizer.json");
      EXPECT_TRUE(tok.ok());
      retrieval::CorpusOptions co;
      co.index_spec = index;
      co.embedder.dim = 256;
      auto c = retrieval::Corpus::open(data, co, std::shared_ptr<const engine::Tokenizer>(std::move(tok).value()));
      EXPECT_TRUE(c.ok()) << c.status().to_string();
      std::vector<retrieval::Document> docs;
      std::mt19937 rng(3);
      for (int i = 0; i < 240; ++i) {
        retrieval::Document d;
        d.id = "p" + std::to_string(i);
        d.text = std::string(kTopics[i % 12]) + " part " + std::to_string(i % 40);
        for (int w = 0; w < 12; ++w) d.text += std::string(" ") + kTopics[rng() % 12];
        docs.push_back(std::move(d));
      }
      if (private_docs) {
        for (int i = 0; i < 24; ++i) {
          retrieval::Document d;
          d.id = "secret" + std::to_string(i);
          d.tenant = "alpha";
          d.text = std::string(kTopics[i % 12]) + " part " + std::to_string(i) + " " + kSecretWord;
          for (int w = 0; w < 6; ++w) d.text += std::string(" ") + kTopics[i % 12];
          docs.push_back(std::move(d));
        }
      }
      auto s = (*c)->ingest(docs);
      EXPECT_TRUE(s.ok()) << s.status().to_string();
      EXPECT_TRUE((*c)->stats().index_trained);
    }
    write_file(fs::path(*root_) / "pipelines" / "spec.toml",
               "[pipeline]\nname = \"spec\"\n[retriever]\ntop_k = 3\nnprobe = 8\n[reuse]\nmode = \"none\"\n"
               "[generation]\nmax_tokens = 6\n");
    RuntimeOptions o = options(data);
    o.retrieval_mode = mode;
    return open(o, false);
  }
  static std::function<void(RunRequest&)> spec(bool on) {
    return [on](RunRequest& r) { r.speculative_prefill = on; };
  }
  static constexpr const char* kSecretWord = "zanzibarquartz";
  static std::function<void(RunRequest&)> as(const std::string& tenant, bool spec_on, int top_k) {
    return [=](RunRequest& r) {
      r.tenant = tenant;
      r.kv_scope = tenant;
      r.speculative_prefill = spec_on;
      r.retrieval_top_k = top_k;
    };
  }
  static std::vector<std::string> ids(const RunOutput& o) {
    std::vector<std::string> v;
    for (const auto& s : o.sources) v.push_back(s.doc_id);
    return v;
  }
};

TEST_F(SpecPrefillTest, OutputEqualsTheRunThatWaitedForTheSearch) {
  const std::string data = tmpdir("spec_prefill");
  Runtime rt = open_ivf(data);
  int restarts = 0, speculated = 0;
  std::vector<std::string> queries;
  for (int i = 0; i < 24; ++i) queries.push_back(std::string(kTopics[i % 12]).substr(0, 12 + i % 9) + " part " + std::to_string(i));
  std::vector<RunOutput> ref;
  for (const auto& q : queries) {
    RunOutput plain = run(*rt.executor, "spec", q, 6, spec(false));
    RunOutput sp = run(*rt.executor, "spec", q, 6, spec(true));
    EXPECT_FALSE(plain.usage.speculative_prefill);
    EXPECT_EQ(ids(plain), ids(sp)) << q;
    expect_same(plain, sp, "speculative prefill: " + q);
    EXPECT_EQ(sp.usage.prompt_tokens, plain.usage.prompt_tokens) << q;
    speculated += sp.usage.speculative_prefill;
    restarts += sp.usage.prefill_restarts;
    ref.push_back(std::move(plain));
  }
  EXPECT_GT(speculated, 0) << "no run started its prefill before the search ended";
  EXPECT_GT(restarts, 0) << "the candidates never changed: the restart path was not exercised";
  // Many at once: speculation shares the batch (or waits for room) and changes nothing.
  std::vector<RunOutput> outs(queries.size());
  Collector c;
  for (size_t i = 0; i < queries.size(); ++i) {
    RunRequest r;
    r.pipeline = "spec";
    r.query = queries[i];
    r.sampling.max_tokens = 6;
    r.sampling.ignore_eos = true;
    r.speculative_prefill = true;
    ASSERT_TRUE(rt.executor->submit(r, c.sink(&outs[i])).ok());
  }
  for (size_t i = 0; i < queries.size(); ++i) {
    ASSERT_TRUE(c.wait(&outs[i]));
    ASSERT_TRUE(outs[i].error.ok()) << outs[i].error.to_string();
    EXPECT_EQ(ids(ref[i]), ids(outs[i]));
    expect_same(ref[i], outs[i], "concurrent speculative prefill: " + queries[i]);
  }
  rt.stop();  // the last stats snapshot, after every run's release
  const ExecutorStats st = rt.executor->stats();
  EXPECT_EQ(st.pool_free_blocks, st.pool_blocks) << "speculative prefill left KV blocks behind";
  close(rt);
  fs::remove_all(data);
  fs::remove(fs::path(*root_) / "pipelines" / "spec.toml");
}

// A tenant's speculative prefill searches in its own scope at every stage: tenant beta never gets
// alpha's private passages (ids or snippets), with the flag or without, while alpha, asking the
// same questions, does (so the check can fail).
TEST_F(SpecPrefillTest, EveryStageIsSearchedInTheRunsTenantScope) {
  const std::string data = tmpdir("spec_prefill_scope");
  Runtime rt = open_ivf(data, "IVF8,Flat", true);
  int alpha_saw = 0, speculated = 0;
  for (int i = 0; i < 12; ++i) {
    const std::string q = std::string(kTopics[i % 12]) + " part " + std::to_string(i) + " " + kSecretWord;
    for (int k : {1, 3}) {
      for (bool on : {false, true}) {
        SCOPED_TRACE(q + " top_k " + std::to_string(k) + (on ? " speculative" : " plain"));
        RunOutput b = run(*rt.executor, "spec", q, 3, as("beta", on, k));
        ASSERT_EQ(b.sources.size(), static_cast<size_t>(k));
        for (const auto& src : b.sources) {
          EXPECT_EQ(src.doc_id.rfind("secret", 0), std::string::npos) << "beta got alpha's " << src.doc_id;
          EXPECT_EQ(src.snippet.find(kSecretWord), std::string::npos);
        }
        speculated += b.usage.speculative_prefill;
        RunOutput a = run(*rt.executor, "spec", q, 3, as("alpha", on, k));
        for (const auto& src : a.sources) alpha_saw += src.doc_id.rfind("secret", 0) == 0;
      }
    }
  }
  EXPECT_GT(alpha_saw, 24) << "alpha's own passages were not retrieved: the check cannot fail";
  EXPECT_GT(speculated, 0) << "no run speculated";
  // context_must_include: alpha's document forced into alpha's own run; for beta it does not
  // exist (a client error naming the id, not an outage), with or without the flag.
  RunOutput forced = run(*rt.executor, "spec", "volcano", 2, [](RunRequest& r) {
    as("alpha", true, 3)(r);
    r.context_must_include = "secret5";
  });
  ASSERT_FALSE(forced.sources.empty()) << forced.error.to_string();
  EXPECT_TRUE(std::any_of(forced.sources.begin(), forced.sources.end(),
                          [](const Source& x) { return x.doc_id == "secret5"; }));
  for (bool on : {false, true}) {
    for (const std::string id : {"secret5", "no-such-document"}) {
      RunRequest r;
      r.pipeline = "spec";
      r.query = "volcano";
      r.sampling.max_tokens = 2;
      as("beta", on, 3)(r);
      r.context_must_include = id;
      RunOutput out;
      Collector c;
      ASSERT_TRUE(rt.executor->submit(r, c.sink(&out)).ok());
      ASSERT_TRUE(c.wait(&out));
      EXPECT_EQ(out.error.code(), StatusCode::kInvalidArgument) << id << ": " << out.error.to_string();
      EXPECT_NE(out.error.message().find("context_must_include"), std::string::npos) << out.error.to_string();
      EXPECT_TRUE(out.sources.empty());
      EXPECT_TRUE(out.tokens.empty());
    }
  }
  close(rt);
  fs::remove_all(data);
  fs::remove(fs::path(*root_) / "pipelines" / "spec.toml");
}

// On an index with a single search stage (Flat) the flag changes nothing: the run is the plain
// one, with its passages (not an empty context).
TEST_F(SpecPrefillTest, SingleStageIndexRunsThePlainRun) {
  const std::string data = tmpdir("spec_prefill_flat");
  Runtime rt = open_ivf(data, "Flat");
  for (int i = 0; i < 8; ++i) {
    const std::string q = std::string(kTopics[(i * 5) % 12]) + " part " + std::to_string(i);
    RunOutput plain = run(*rt.executor, "spec", q, 6, spec(false));
    RunOutput sp = run(*rt.executor, "spec", q, 6, spec(true));
    ASSERT_EQ(plain.sources.size(), 3u) << q;
    EXPECT_EQ(ids(plain), ids(sp)) << q;
    EXPECT_EQ(sp.usage.prompt_tokens, plain.usage.prompt_tokens) << q;
    expect_same(plain, sp, "flat index: " + q);
  }
  close(rt);
  fs::remove_all(data);
  fs::remove(fs::path(*root_) / "pipelines" / "spec.toml");
}

// Lexical and hybrid searches have no stages: the flag changes nothing, the run is the plain one
// with that mode's passages (not the vector index's, which the staged search would give).
TEST_F(SpecPrefillTest, LexicalAndHybridSearchesRunThePlainRun) {
  for (retrieval::RetrievalMode mode : {retrieval::RetrievalMode::kLexical, retrieval::RetrievalMode::kHybrid}) {
    SCOPED_TRACE(std::string(enum_name(mode)));
    const std::string data = tmpdir(std::string("spec_prefill_") + std::string(enum_name(mode)));
    Runtime rt = open_ivf(data, "IVF8,Flat", false, mode);
    for (int i = 0; i < 8; ++i) {
      const std::string q = std::string(kTopics[(i * 5) % 12]) + " part " + std::to_string(i);
      RunOutput plain = run(*rt.executor, "spec", q, 6, spec(false));
      RunOutput sp = run(*rt.executor, "spec", q, 6, spec(true));
      ASSERT_EQ(plain.sources.size(), 3u) << q;
      EXPECT_FALSE(sp.usage.speculative_prefill) << q;
      EXPECT_EQ(ids(plain), ids(sp)) << q;
      EXPECT_EQ(sp.usage.prompt_tokens, plain.usage.prompt_tokens) << q;
      expect_same(plain, sp, std::string(enum_name(mode)) + ": " + q);
    }
    close(rt);
    fs::remove_all(data);
  }
  fs::remove(fs::path(*root_) / "pipelines" / "spec.toml");
}

}  // namespace
}  // namespace ragd::pipelines
