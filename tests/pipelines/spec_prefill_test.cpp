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
  // 240 passages over 40 topics in an IVF index of 8 lists, then the runtime on the same data dir.
  Runtime open_ivf(const std::string& data) {
    {
      auto tok = engine::Tokenizer::from_file(*root_ + "/model/tokenizer.json");
      EXPECT_TRUE(tok.ok());
      retrieval::CorpusOptions co;
      co.index_spec = "IVF8,Flat";
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
      auto s = (*c)->ingest(docs);
      EXPECT_TRUE(s.ok()) << s.status().to_string();
      EXPECT_TRUE((*c)->stats().index_trained);
    }
    write_file(fs::path(*root_) / "pipelines" / "spec.toml",
               "[pipeline]\nname = \"spec\"\n[retriever]\ntop_k = 3\nnprobe = 8\n[reuse]\nmode = \"none\"\n"
               "[generation]\nmax_tokens = 6\n");
    return open(options(data), false);
  }
  static std::function<void(RunRequest&)> spec(bool on) {
    return [on](RunRequest& r) { r.speculative_prefill = on; };
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
    r.overrides.max_tokens = 6;
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

}  // namespace
}  // namespace ragd::pipelines
