// The executor test fixture: a real (random-weight) tiny Llama model with a trained BPE tokenizer,
// a real corpus (RocksDB + FAISS) and the real kvstore, all in temp directories; pipelines of
// every reuse mode and iterative ones; a collector of run events. Shared by executor_test.cpp and
// iterative_test.cpp (each includes it once).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include "ragd/engine/model_config.h"
#include "ragd/engine/random_weights.h"
#include "ragd/engine/safetensors.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/pipelines/runtime.h"
#include "run_state.h"
#include "tiny_bpe.h"
#include "tiny_model.h"

namespace ragd::pipelines {
namespace {

namespace fs = std::filesystem;

std::string tmpdir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("ragd_exec_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

void write_file(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

// A tiny random Llama (2 layers, 4 heads, 2 KV heads, head_dim 16, vocab 512) with N(0, 1/fan_in)
// weights and a byte-level BPE trained on the built-in sample.
std::string make_model(const std::string& dir) {
  const std::string tok_json = testing::tiny_bpe_json();
  auto tok = engine::Tokenizer::from_json(tok_json, "tokenizer.json");
  EXPECT_TRUE(tok.ok());
  engine::ModelConfig c = engine::testing::tiny_config(engine::testing::Variant::kLlama);
  c.vocab_size = 512;
  c.max_position_embeddings = 2048;
  c.bos_token_id = (*tok)->bos_id().value_or(-1);
  if (auto e = (*tok)->token_to_id("<|eot_id|>")) c.eos_token_ids.push_back(*e);
  EXPECT_TRUE(c.validate().ok());
  const std::map<std::string, engine::OwnedTensor> t = engine::random_weight_tensors(c, 1234);
  fs::create_directories(dir);
  write_file(fs::path(dir) / "config.json", c.to_json());
  write_file(fs::path(dir) / "tokenizer.json", tok_json);
  EXPECT_TRUE(engine::write_safetensors((fs::path(dir) / "model.safetensors").string(), t).ok());
  return dir;
}

const char* kTopics[] = {"volcano lava magma eruption ash crater",   "violin orchestra symphony concerto bow",
                         "glacier ice valley moraine frozen arctic", "compiler parser syntax token grammar",
                         "harbor ship sailor anchor tide port",      "bakery bread flour oven yeast dough",
                         "satellite orbit rocket launch gravity",    "garden tomato soil seed harvest rain",
                         "chess bishop knight opening gambit rook",  "river delta sediment flood bank water",
                         "castle knight tower siege moat wall",      "coffee bean roast espresso grinder cup"};

std::vector<DocumentInput> corpus_docs() {
  std::vector<DocumentInput> docs;
  for (int i = 0; i < 12; ++i) {
    DocumentInput d;
    d.id = "doc-" + std::to_string(i);
    d.title = kTopics[i];
    d.text = std::string("Notes about ") + kTopics[i] + ". The " + std::string(kTopics[i]).substr(0, 7) +
             " entry number " + std::to_string(i * 37 + 11) + " describes " + kTopics[i] + " in detail.";
    docs.push_back(d);
  }
  return docs;
}

void write_pipelines(const std::string& dir) {
  fs::create_directories(dir);
  for (const char* mode : {"none", "prefix", "knowledge_tree", "cacheblend", "epic"}) {
    write_file(fs::path(dir) / (std::string(mode) + ".toml"),
               std::string("[pipeline]\nname = \"") + mode + "\"\n[retriever]\ntop_k = 2\nmin_score_ratio = 0\n[reuse]\nmode = \"" + mode +
                   "\"\n[generation]\nmax_tokens = 7\n");
  }
  // Iterative pipelines (retrieval every 4 tokens; overlap per request); no document KV is cached,
  // so a finished run leaves every pool block free.
  write_file(fs::path(dir) / "iter.toml",
             "[pipeline]\nname = \"iter\"\n[retriever]\ntop_k = 2\n[reuse]\nmode = \"none\"\n"
             "[iterative]\nretrieval_interval = 4\nquery_window = 6\n[generation]\nmax_tokens = 24\n");
  write_file(fs::path(dir) / "iter-lag.toml",
             "[pipeline]\nname = \"iter-lag\"\n[retriever]\ntop_k = 2\n[reuse]\nmode = \"none\"\n"
             "[iterative]\nretrieval_interval = 4\nquery_window = 6\nquery_lag = 1\n[generation]\nmax_tokens = 24\n");
  write_file(fs::path(dir) / "iter-kt.toml",
             "[pipeline]\nname = \"iter-kt\"\n[retriever]\ntop_k = 3\n[reuse]\nmode = \"knowledge_tree\"\n"
             "[iterative]\nretrieval_interval = 5\nquery_window = 8\nspeculation_cache = 3\nmax_stride = 3\n"
             "[generation]\nmax_tokens = 30\n");
  // Generation defaults that differ from the built-in ones (temperature 0, max_tokens 256).
  write_file(fs::path(dir) / "hot.toml",
             "[pipeline]\nname = \"hot\"\n[retriever]\ntop_k = 2\n[reuse]\nmode = \"none\"\n"
             "[generation]\nmax_tokens = 5\ntemperature = 1.5\nseed = 9\n");
}

struct RunOutput {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<Source> sources;  // the first context
  // Every context: (first token it applies to, its document ids in rank order).
  std::vector<std::pair<int, std::vector<std::string>>> contexts;
  std::string finish;
  Usage usage;
  Timings timings;
  Status error;
  bool done = false;
};

class Collector {
 public:
  EventSink sink(RunOutput* out, int cancel_after = -1) {
    return [this, out, cancel_after](const RunEvent& ev) {
      std::lock_guard<std::mutex> lk(mu_);
      switch (ev.kind) {
        case RunEvent::Kind::kSources: {
          if (out->contexts.empty()) out->sources = ev.sources;
          std::vector<std::string> ids;
          for (const auto& src : ev.sources) ids.push_back(src.doc_id + "#" + std::to_string(src.chunk_id));
          out->contexts.emplace_back(ev.from_token, std::move(ids));
          break;
        }
        case RunEvent::Kind::kToken:
          out->tokens.push_back(ev.token_id);
          out->logprobs.push_back(ev.logprob);
          if (cancel_after >= 0 && static_cast<int>(out->tokens.size()) >= cancel_after) return false;
          break;
        case RunEvent::Kind::kDone:
          out->finish = ev.finish_reason;
          out->usage = ev.usage;
          out->timings = ev.timings;
          out->done = true;
          cv_.notify_all();
          break;
        case RunEvent::Kind::kError:
          out->error = ev.error;
          out->done = true;
          cv_.notify_all();
          break;
      }
      return true;
    };
  }
  bool wait(RunOutput* out, int seconds = 120) {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, std::chrono::seconds(seconds), [&] { return out->done; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
};

class ExecutorTest : public ::testing::Test {
 protected:
  // Polls `done` for up to 30 s (work that finishes off the scheduler thread, e.g. tier copies).
  static bool wait_until(const std::function<bool()>& done) {
    for (int i = 0; i < 3000; ++i) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return done();
  }
  static void SetUpTestSuite() {
    root_ = new std::string(tmpdir("suite"));
    make_model(*root_ + "/model");
    write_pipelines(*root_ + "/pipelines");
  }
  static void TearDownTestSuite() {
    fs::remove_all(*root_);
    delete root_;
  }

  RuntimeOptions options(const std::string& data) {
    RuntimeOptions o;
    o.model_dir = *root_ + "/model";
    o.data_dir = data;
    o.pipelines_dir = *root_ + "/pipelines";
    o.embedder = EmbedderKind::kHashing;  // the executor's tests rank with hashed words unless they say
    o.model.kv_pool_bytes = 4ull << 20;
    o.model.num_threads = 1;
    o.retrieval_threads = 1;
    o.scheduler.max_batch_tokens = 64;  // several prefill chunks per prompt
    return o;
  }

  // A runtime over the corpus (ingested) whose pipelines are one spec, `file` with `toml`, in the
  // directory `pipelines` (created).
  Runtime open_with_pipeline(const std::string& data, const std::string& pipelines, const std::string& file,
                             const std::string& toml) {
    write_file(fs::path(pipelines) / file, toml);
    RuntimeOptions o = options(data);
    o.pipelines_dir = pipelines;
    return open(o, true);
  }

  Runtime open(const RuntimeOptions& o, bool ingest) {
    auto rt = open_runtime(o);
    EXPECT_TRUE(rt.ok()) << rt.status().to_string();
    if (ingest) {
      auto s = rt->documents->ingest(corpus_docs());
      EXPECT_TRUE(s.ok()) << s.status().to_string();
      EXPECT_EQ(s->ingested, 12);
    }
    return std::move(rt).value();
  }

  RunOutput run(Executor& ex, const std::string& pipeline, const std::string& query, int max_tokens = 7,
                const std::function<void(RunRequest&)>& tweak = {}) {
    RunRequest r;
    r.pipeline = pipeline;
    r.query = query;
    r.sampling.max_tokens = max_tokens;
    r.sampling.ignore_eos = true;
    if (tweak) tweak(r);
    RunOutput out;
    Collector c;
    Status st = ex.submit(r, c.sink(&out));
    EXPECT_TRUE(st.ok()) << st.to_string();
    if (st.ok()) {
      EXPECT_TRUE(c.wait(&out));
    }
    EXPECT_TRUE(out.error.ok()) << out.error.to_string();
    return out;
  }

  static void close(Runtime& rt) {
    rt.stop();
    rt.executor.reset();
    rt.documents.reset();
  }

  static void expect_same(const RunOutput& a, const RunOutput& b, const std::string& what) {
    ASSERT_EQ(a.tokens, b.tokens) << what;
    ASSERT_EQ(a.logprobs.size(), b.logprobs.size());
    for (size_t i = 0; i < a.logprobs.size(); ++i) EXPECT_NEAR(a.logprobs[i], b.logprobs[i], 2e-3) << what << " token " << i;
  }

  static std::string* root_;
};
std::string* ExecutorTest::root_ = nullptr;

}  // namespace
}  // namespace ragd::pipelines
