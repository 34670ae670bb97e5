// Structured output through the executor: constrained runs on random-weight models, batched, with
// every reuse mode and iterative RAG (whose speculative overlap rolls runs back), validated by an
// independent validator (validate_structured.py: Debian's python3-jsonschema, Python's re and list
// membership). The property: 100 % of outputs parse and validate, for 125 JSON schemas (15
// hand-written, 110 generated from seeds) x 2 random weight sets x 2 sampling seeds, 20 regular
// expressions and 7 choice lists.
#include "executor_fixture.h"

#include <cstdio>

#include "ragd/engine/constraint_cache.h"
#include "ragd/engine/constraint_matcher.h"
#include "ragd/engine/constraint_spec.h"
#include "structured_schemas.h"

namespace ragd::pipelines {
namespace {

struct Job {
  std::string kind;       // json_schema | json_object | regex | choice
  std::string spec_json;  // what the validator gets as "spec" (the schema, the pattern, the choices)
  std::shared_ptr<const engine::ConstraintSpec> spec;
  RunOutput out;
};

std::string json_string(std::string_view s) {
  std::string o = "\"";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"') o += "\\\"";
    else if (c == '\\') o += "\\\\";
    else if (c < 0x20 || c == 0x7F) o += fmt::format("\\u{:04x}", c);
    else o.push_back(ch);
  }
  return o + "\"";
}

std::vector<Job> make_jobs(int random_schemas, uint64_t seed) {
  std::vector<Job> jobs;
  auto add = [&](std::string kind, std::string spec_json, engine::ConstraintSpec spec) {
    jobs.push_back(Job{std::move(kind), std::move(spec_json), std::make_shared<const engine::ConstraintSpec>(std::move(spec)), {}});
  };
  for (const auto& s : testing::handwritten_schemas()) add("json_schema", s, {"json_schema", s, {}, 0});
  testing::SchemaGenerator gen(seed);
  for (int i = 0; i < random_schemas; ++i) {
    const std::string s = gen.top();
    add("json_schema", s, {"json_schema", s, {}, i % 7 == 0 ? 1 : 0});
  }
  add("json_object", "{}", {"json_object", "", {}, 0});
  for (const auto& p : testing::handwritten_patterns()) add("regex", json_string(p), {"regex", p, {}, 0});
  for (const auto& c : testing::handwritten_choices()) {
    std::string list;
    for (const auto& x : c) list += (list.empty() ? "" : ",") + json_string(x);
    add("choice", "[" + list + "]", {"choice", "", c, 0});
  }
  return jobs;
}

// Writes one model per weight seed: the fixture's tiny Llama with other random weights.
std::string make_model_with_seed(const std::string& dir, uint64_t weight_seed) {
  make_model(dir);
  auto cfg_text = [&] {
    std::ifstream f(fs::path(dir) / "config.json");
    return std::string(std::istreambuf_iterator<char>(f), {});
  }();
  auto c = engine::ModelConfig::from_json(cfg_text, "config.json");
  EXPECT_TRUE(c.ok());
  const auto t = engine::random_weight_tensors(*c, weight_seed);
  EXPECT_TRUE(engine::write_safetensors((fs::path(dir) / "model.safetensors").string(), t).ok());
  return dir;
}

class StructuredOutputTest : public ExecutorTest {
 protected:
  RuntimeOptions big_options(const std::string& data, const std::string& model_dir) {
    RuntimeOptions o = options(data);
    o.model_dir = model_dir;
    o.model.kv_pool_bytes = 64ull << 20;
    o.scheduler.max_batch_tokens = 256;
    return o;
  }

  // Submits the jobs in waves of `wave` (they share scheduler steps) and waits for them.
  void run_all(Executor& ex, std::vector<Job>& jobs, size_t wave, const std::function<void(RunRequest&, size_t)>& tweak) {
    for (size_t at = 0; at < jobs.size(); at += wave) {
      Collector c;
      const size_t end = std::min(jobs.size(), at + wave);
      for (size_t i = at; i < end; ++i) {
        RunRequest r;
        r.prompt = "Reply with the value: ";
        r.sampling.max_tokens = 1500;
        r.sampling.constraint = jobs[i].spec;
        tweak(r, i);
        Status st = ex.submit(r, c.sink(&jobs[i].out));
        ASSERT_TRUE(st.ok()) << jobs[i].spec_json << ": " << st.to_string();
      }
      for (size_t i = at; i < end; ++i) ASSERT_TRUE(c.wait(&jobs[i].out, 600)) << jobs[i].spec_json;
    }
  }

  // Writes the outputs and runs the validator; false (and a failure) when an output fails.
  void validate(const std::vector<Job>& jobs, const engine::Tokenizer& tok, const std::string& name) {
    const std::string path = (fs::temp_directory_path() / ("ragd_structured_" + name + "_" + std::to_string(::getpid()) + ".jsonl")).string();
    {
      std::ofstream f(path, std::ios::binary);
      for (const Job& j : jobs) {
        EXPECT_TRUE(j.out.error.ok()) << j.spec_json << ": " << j.out.error.to_string();
        const std::string text = tok.decode(j.out.tokens, true);
        f << "{\"kind\":\"" << j.kind << "\",\"spec\":" << j.spec_json << ",\"output\":" << json_string(text)
          << ",\"finish\":\"" << j.out.finish << "\"}\n";
      }
    }
    const std::string cmd = "/usr/bin/python3 " + std::string(RAGD_SOURCE_DIR) + "/tests/pipelines/validate_structured.py " + path + " 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string report;
    char buf[4096];
    while (size_t n = std::fread(buf, 1, sizeof buf, p)) report.append(buf, n);
    const int rc = ::pclose(p);
    const int code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    std::printf("%s", report.c_str());
    if (code == 77 || code == 127) GTEST_SKIP() << "no /usr/bin/python3 or python3-jsonschema: " << report;
    EXPECT_EQ(code, 0) << report;
    if (code == 0) fs::remove(path);
  }
};

TEST_F(StructuredOutputTest, EveryOutputValidatesAcrossSchemasWeightsAndSeeds) {
  auto tok = testing::tiny_bpe_tokenizer();
  std::vector<Job> all;
  for (uint64_t weights : {1234u, 99u}) {
    const std::string model = make_model_with_seed(*root_ + "/model-" + std::to_string(weights), weights);
    const std::string data = tmpdir("structured-" + std::to_string(weights));
    Runtime rt = open(big_options(data, model), false);
    for (uint64_t seed : {1u, 2u}) {
      std::vector<Job> jobs = make_jobs(110, 1000 + seed);
      run_all(*rt.executor, jobs, 16, [&](RunRequest& r, size_t i) {
        r.sampling.seed = seed * 7919 + i;
        // Greedy, plain sampling, and the filters with a penalty, in turn.
        r.sampling.temperature = i % 3 == 0 ? 0.0f : 1.0f;
        if (i % 3 == 2) r.sampling.top_p = 0.9f, r.sampling.top_k = 40, r.sampling.repetition_penalty = 1.1f;
      });
      if (HasFatalFailure()) return;
      for (auto& j : jobs) all.push_back(std::move(j));
    }
    close(rt);
    fs::remove_all(data);
  }
  size_t stops = 0, tokens = 0, longest = 0;
  std::string longest_text;
  for (const Job& j : all) {
    stops += j.out.finish == "stop";
    tokens += j.out.tokens.size();
    const std::string text = tok->decode(j.out.tokens, true);
    if (text.size() > longest) longest = text.size(), longest_text = text;
  }
  std::printf("%zu constrained runs, %zu ended complete (stop), %zu tokens; the longest output (%zu bytes): %s\n",
              all.size(), stops, tokens, longest, longest_text.c_str());
  validate(all, *tok, "property");
}

// The same property over a real 151 k-token byte-level vocabulary (Qwen3's, when
// tests/engine_io/fetch_tokenizer_references.sh has fetched it), without a model: each step draws
// among the allowed tokens (a third of the time among those holding a closing character, so that
// strings end), and the walk stops when the value is complete or, once accepting, by chance.
TEST_F(StructuredOutputTest, RealVocabularyWalksValidate) {
  const std::string path = std::string(RAGD_SOURCE_DIR) + "/examples/tokenizers/qwen3/tokenizer.json";
  if (!fs::exists(path)) GTEST_SKIP() << "no " << path << " (tests/engine_io/fetch_tokenizer_references.sh)";
  auto tok = engine::Tokenizer::from_file(path);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  engine::ConstraintCache cache(engine::TokenVocabulary::from_tokenizer(**tok));
  const auto& vocab = *cache.vocabulary();
  std::vector<char> closing(static_cast<size_t>(vocab.size()), 0);
  for (int32_t id = 0; id < vocab.size(); ++id)
    closing[static_cast<size_t>(id)] = vocab.bytes(id).find_first_of("\"]}") != std::string::npos;
  std::vector<Job> jobs = make_jobs(110, 77);
  std::mt19937_64 rng(21);
  size_t unfinished = 0;
  for (Job& j : jobs) {
    auto c = cache.get(*j.spec);
    ASSERT_TRUE(c.ok()) << j.spec_json << ": " << c.status().to_string();
    engine::ConstraintMatcher m(*c, {});
    std::vector<int32_t> allowed, closers;
    for (int step = 0; step < 800 && !m.complete(); ++step) {
      if (m.accepting() && rng() % 4 == 0) break;
      const engine::TokenMask mk = m.mask();
      allowed.clear();
      closers.clear();
      for (size_t w = 0; w < mk.words.size(); ++w)
        for (uint64_t bits = mk.words[w]; bits != 0; bits &= bits - 1) {
          const auto id = static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits)));
          allowed.push_back(id);
          if (closing[static_cast<size_t>(id)]) closers.push_back(id);
        }
      if (allowed.empty()) break;
      const auto& from = !closers.empty() && rng() % 3 == 0 ? closers : allowed;
      const int32_t t = from[rng() % from.size()];
      ASSERT_TRUE(m.accept(t));
      j.out.tokens.push_back(t);
    }
    j.out.finish = m.accepting() ? "stop" : "length";
    unfinished += !m.accepting();
  }
  size_t tokens = 0;
  for (const Job& j : jobs) tokens += j.out.tokens.size();
  std::printf("%zu walks over %d ids (%zu tokens), %zu unfinished after 800 tokens (left out); e.g. %s\n", jobs.size(),
              vocab.size(), tokens, unfinished, (*tok)->decode(jobs[20].out.tokens, true).c_str());
  EXPECT_LT(unfinished, jobs.size() / 10);
  std::erase_if(jobs, [](const Job& j) { return j.out.finish != "stop"; });
  validate(jobs, **tok, "qwen_vocab");
}

TEST_F(StructuredOutputTest, ReuseModesAndIterativeRag) {
  auto tok = testing::tiny_bpe_tokenizer();
  const std::string data = tmpdir("structured-reuse");
  Runtime rt = open(big_options(data, *root_ + "/model"), true);
  std::vector<Job> jobs;
  const std::vector<std::string> pipelines = {"none", "prefix", "knowledge_tree", "cacheblend", "epic", "iter", "iter-kt"};
  const auto hand = testing::handwritten_schemas();
  for (size_t p = 0; p < pipelines.size(); ++p)
    for (size_t k = 0; k < 4; ++k) {
      const std::string& s = hand[(p * 4 + k) % hand.size()];
      jobs.push_back(Job{"json_schema", s, std::make_shared<const engine::ConstraintSpec>(engine::ConstraintSpec{"json_schema", s, {}, 0}), {}});
    }
  run_all(*rt.executor, jobs, 8, [&](RunRequest& r, size_t i) {
    const std::string& p = pipelines[i / 4];
    r.pipeline = p;
    r.query = kTopics[i % 12];
    r.prompt.clear();
    r.sampling.max_tokens = 1500;
    r.sampling.temperature = i % 2 == 0 ? 0.0f : 1.0f;
    r.sampling.seed = i;
    if (p.rfind("iter", 0) == 0) r.overlap = i % 2 == 0 ? RetrievalOverlap::kSpeculative : RetrievalOverlap::kBoth;
  });
  if (HasFatalFailure()) return;
  // The same runs again: the knowledge tree and chunk caches now hit.
  std::vector<Job> again = jobs;
  for (auto& j : again) j.out = RunOutput{};
  run_all(*rt.executor, again, 8, [&](RunRequest& r, size_t i) {
    const std::string& p = pipelines[i / 4];
    r.pipeline = p;
    r.query = kTopics[i % 12];
    r.prompt.clear();
    r.sampling.max_tokens = 1500;
    r.sampling.temperature = i % 2 == 0 ? 0.0f : 1.0f;
    r.sampling.seed = i;
    if (p.rfind("iter", 0) == 0) r.overlap = i % 2 == 0 ? RetrievalOverlap::kSpeculative : RetrievalOverlap::kBoth;
  });
  if (HasFatalFailure()) return;
  int reused = 0, rollbacks = 0;
  for (auto& j : again) {
    reused += j.out.usage.reused_tokens() > 0;
    rollbacks += j.out.usage.rollbacks;
    jobs.push_back(j);
  }
  std::printf("second pass: %d runs reused KV, %d rollbacks in iterative runs\n", reused, rollbacks);
  EXPECT_GT(reused, 0);
  close(rt);
  validate(jobs, *tok, "reuse");
}

// Tool calls: each format x tool_choice (required / auto) x parallel or single calls, tools whose
// parameters are generated schemas; and runs through the chat path (RunRequest::tools), whose
// format is the model's. The validator parses calls with its own reader of each format and
// validates every call's arguments against its tool's schema.
TEST_F(StructuredOutputTest, ToolCallsParseAndValidate) {
  auto tok = testing::tiny_bpe_tokenizer();
  const std::string data = tmpdir("structured-tools");
  Runtime rt = open(big_options(data, *root_ + "/model"), false);
  testing::SchemaGenerator gen(4242);
  auto tools_json = [&](size_t n, std::vector<engine::ToolDef>* defs) {
    std::string t = "[";
    for (size_t k = 0; k < n; ++k) {
      const std::string params = R"({"type":"object","properties":{"value":)" + gen.schema() + R"(,"note":{"type":"string","maxLength":8}},"required":["value"]})";
      const std::string name = "fn_" + std::to_string(k) + (k % 2 ? "-x" : "");
      t += (k ? "," : "") + std::string(R"({"name":")") + name + R"(","parameters":)" + params + "}";
      if (defs) defs->push_back({name, "", params});
    }
    return t + "]";
  };
  std::vector<Job> jobs;
  for (const std::string& format : engine::tool_call_format_names())
    for (int mode = 0; mode < 4; ++mode)
      for (int rep = 0; rep < 4; ++rep) {
        const std::string spec = R"({"format":")" + format + R"(","tools":)" + tools_json(1 + rep % 3, nullptr) +
                                 R"(,"min_calls":1,"max_calls":)" + (mode % 2 ? "1" : "0") + R"(,"text":)" + (mode >= 2 ? "true" : "false") + "}";
        jobs.push_back(Job{"tool_calls", spec, std::make_shared<const engine::ConstraintSpec>(engine::ConstraintSpec{"tool_calls", spec, {}, rep % 2, "tools"}), {}});
      }
  run_all(*rt.executor, jobs, 16, [&](RunRequest& r, size_t i) {
    r.sampling.max_tokens = 400;
    r.sampling.seed = 31 + i;
    r.sampling.temperature = i % 3 == 0 ? 0.0f : 1.0f;
  });
  if (HasFatalFailure()) return;
  // The chat path: tools and tool_choice on the request, the model's format.
  const std::string format = rt.executor->tool_call_format().name;
  std::vector<Job> chat;
  std::vector<std::vector<engine::ToolDef>> defs(24);
  for (size_t i = 0; i < defs.size(); ++i) {
    const std::string tj = tools_json(1 + i % 3, &defs[i]);
    const bool one = i % 3 == 0;
    const std::string spec = R"({"format":")" + format + R"(","tools":)" + tj + R"(,"min_calls":1,"max_calls":)" + (one ? "1" : "0") +
                             R"(,"text":)" + (i % 2 ? "true" : "false") + "}";
    chat.push_back(Job{"tool_calls", spec, nullptr, {}});
  }
  run_all(*rt.executor, chat, 8, [&](RunRequest& r, size_t i) {
    r.prompt.clear();
    r.sampling.max_tokens = 400;
    r.sampling.constraint = nullptr;
    r.messages = {{"user", "Call a function."}};
    r.tools = defs[i];
    r.tool_choice.mode = i % 2 ? ToolChoice::Mode::kAuto : ToolChoice::Mode::kRequired;
    r.parallel_tool_calls = i % 3 != 0;
    r.sampling.seed = 7 + i;
    r.sampling.temperature = 1.0f;
  });
  if (HasFatalFailure()) return;
  for (auto& j : chat) jobs.push_back(std::move(j));
  close(rt);
  // A random model rarely ends an answer: free text (auto) runs to max_tokens, which the validator
  // accepts when no call was started; calls cut by max_tokens (parallel calls that go on) are
  // left out and counted.
  size_t cut_calls = 0;
  std::erase_if(jobs, [&](const Job& j) {
    if (j.out.finish == "stop") return false;
    const std::string fmt_name = j.spec_json.substr(11, j.spec_json.find('"', 11) - 11);
    const engine::ToolCallFormat f = *engine::tool_call_format(fmt_name);
    const std::string text = tok->decode(j.out.tokens, true);
    const bool calls_started = f.trigger().empty() ? text.rfind('{', 0) == 0 : text.find(f.trigger().substr(0, f.trigger().find('\n'))) != std::string::npos;
    cut_calls += calls_started;
    return calls_started;
  });
  std::printf("%zu tool-call runs validated, %zu left out (calls cut by max_tokens)\n", jobs.size(), cut_calls);
  EXPECT_LT(cut_calls * 5, jobs.size()) << "most runs end their calls";
  validate(jobs, *tok, "tools");
}

TEST_F(StructuredOutputTest, LengthCutAndBadSchemas) {
  const std::string data = tmpdir("structured-misc");
  Runtime rt = open(big_options(data, *root_ + "/model"), false);
  RunOutput out = run(*rt.executor, "", "", 3, [](RunRequest& r) {
    r.prompt = "x";
    r.sampling.ignore_eos = false;
    r.sampling.constraint = std::make_shared<const engine::ConstraintSpec>(engine::ConstraintSpec{
        "json_schema", R"({"type":"object","properties":{"a":{"type":"string","minLength":20}},"required":["a"]})", {}, 0});
  });
  EXPECT_EQ(out.finish, "length");
  EXPECT_EQ(out.tokens.size(), 3u);
  // The same schema again is a cache hit; the stats say so (/v1/cache/stats, /metrics).
  const ExecutorStats s1 = rt.executor->stats();
  EXPECT_EQ(s1.constraint_misses, 1u);
  EXPECT_EQ(s1.constraint_entries, 1u);
  run(*rt.executor, "", "", 2, [](RunRequest& r) {
    r.prompt = "y";
    r.sampling.constraint = std::make_shared<const engine::ConstraintSpec>(engine::ConstraintSpec{
        "json_schema", R"({"type":"object","properties":{"a":{"type":"string","minLength":20}},"required":["a"]})", {}, 0});
  });
  const ExecutorStats s2 = rt.executor->stats();
  EXPECT_EQ(s2.constraint_hits, s1.constraint_hits + 1);
  EXPECT_EQ(s2.constraint_misses, 1u);
  EXPECT_NE(s2.to_json().find("\"constraints\":{\"hits\":"), std::string::npos);
  RunRequest r;
  r.prompt = "x";
  r.sampling.constraint = std::make_shared<const engine::ConstraintSpec>(
      engine::ConstraintSpec{"json_schema", R"({"type":"object","patternProperties":{"^a":{}}})", {}, 0});
  Collector c;
  RunOutput o2;
  Status st = rt.executor->submit(r, c.sink(&o2));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("patternProperties"), std::string::npos) << st.to_string();
  close(rt);
}

}  // namespace
}  // namespace ragd::pipelines
