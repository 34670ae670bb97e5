// Cost of structured output: decode tokens/s of a random-weight model with and without a JSON
// schema constraint, at several batch sizes, counting the whole decode loop a server runs (forward
// step, then per sequence: constraint mask, masked sampling, matcher advance); plus schema compile
// times and the per-step mask time.
//
//   bench_constraint --preset small|qwen2-0.5b [--batches 1,16] [--prompt 32] [--decode 32]
//                    [--threads N] [--tokenizer PATH] [--reps 2] [--schema record|long|tools]
// --schema long: {"content": a string of maxLength 10000} (the schema of XGrammar issue #852).
// --schema tools: tool calling with tool_choice auto (grammar kind tool_calls, hermes format): free
// text that cannot hold "<tool_call>", or calls of two tools whose arguments are the record above
// and a small object.
//
// The vocabulary the masks run over: --tokenizer (a tokenizer.json), else examples/tokenizers/
// qwen3/tokenizer.json for qwen2-0.5b (151 k byte-level tokens; fetched by
// tests/engine_io/fetch_tokenizer_references.sh) and examples/tokenizers/llama2/tokenizer.json (32 k SentencePiece)
// for small when they exist, else a byte-level BPE trained on the built-in sample and padded
// with reserved special tokens to the model's vocabulary (what `ragctl make-model` writes; few
// real tokens, so masks are cheap: say which one a number used).
//
// Sampling is temperature 0.8 (a random walk through the schema on random weights); a sequence
// whose value is complete starts the next one (matcher rolled back to 0), so every step is
// constrained. "cold" is the first run of a freshly compiled schema (its DFA states and token masks
// are built as they are met), "warm" the same compiled schema again (what a server sees after the
// first requests of a schema: the ConstraintCache keeps it).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ragd/engine/constraint_matcher.h"
#include "ragd/engine/grammar.h"
#include "ragd/engine/model.h"
#include "ragd/engine/presets.h"
#include "ragd/engine/random_weights.h"
#include "ragd/engine/sampler.h"
#include "ragd/engine/token_constraint.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/kernels/threads.h"
#include "bench_args.h"

using namespace ragd;
using namespace ragd::engine;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// The schema decoded under: a record with bounded strings, numbers, an enum, nested array of objects.
const char* kSchema = R"({"type":"object","properties":{
  "answer":{"type":"string","maxLength":60},
  "confidence":{"type":"number","minimum":0,"maximum":1},
  "label":{"enum":["supported","refuted","not enough info"]},
  "citations":{"type":"array","minItems":1,"maxItems":4,"items":{"type":"object","properties":{
     "doc":{"type":"integer","minimum":1,"maximum":20},"quote":{"type":"string","maxLength":40}},
     "required":["doc","quote"],"additionalProperties":false}}},
  "required":["answer","confidence","label","citations"],"additionalProperties":false})";

// Schemas timed for compile time (grammar only, then with the vocabulary bound: no masks yet).
const std::vector<std::pair<std::string, std::string>> kCompileSet = {
    {"record (above)", kSchema},
    {"flat object, 8 fields", R"({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"},"c":{"type":"number"},"d":{"type":"boolean"},"e":{"type":"null"},"f":{"enum":["x","y"]},"g":{"type":"string","format":"date"},"h":{"type":"string","format":"uuid"}},"required":["a","b"]})"},
    {"array of 50 strings <= 100 chars", R"({"type":"array","items":{"type":"string","maxLength":100},"maxItems":50})"},
    {"recursive tree ($ref)", R"({"$defs":{"n":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/n"}}},"required":["v"]}},"$ref":"#/$defs/n"})"},
    {"integer range -123456..987654", R"({"type":"integer","minimum":-123456,"maximum":987654})"},
    {"any JSON value ({}, 5 levels)", "{}"},
};

struct Args {
  std::string preset = "small";
  std::vector<int> batches = {1, 16};
  int prompt = 32, decode = 32, threads = 1, reps = 2;
  std::string tokenizer;
  std::string schema = "record";
};

const char* kLongSchema = R"({"type":"object","properties":{"content":{"type":"string","maxLength":10000}},"required":["content"]})";

ConstraintSpec decode_spec(const std::string& which) {
  if (which == "long") return ConstraintSpec{"json_schema", kLongSchema, {}, 0, ""};
  if (which == "tools")
    return ConstraintSpec{"tool_calls",
                          std::string(R"({"format":"hermes","text":true,"tools":[{"name":"record_answer","parameters":)") + kSchema +
                              R"(},{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":30},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city","unit"]}}]})",
                          {}, 0, ""};
  return ConstraintSpec{"json_schema", kSchema, {}, 0, ""};
}

// False (after printing why and the usage line) on a bad command line.
bool parse(int argc, char** argv, Args* a) {
  bench::BenchArgs args("bench_constraint");
  args.opt("preset", &a->preset).list("batches", &a->batches).opt("prompt", &a->prompt).opt("decode", &a->decode);
  args.opt("threads", &a->threads).opt("reps", &a->reps).opt("tokenizer", &a->tokenizer, "PATH").opt("schema", &a->schema);
  return args.parse(argc, argv);
}

std::unique_ptr<Tokenizer> load_tokenizer(const Args& a, const ModelConfig& c, std::string* source) {
  std::string path = a.tokenizer;
  if (path.empty()) {
    const std::string root = RAGD_SOURCE_DIR;
    const std::string cand = root + (a.preset == "qwen2-0.5b" ? "/examples/tokenizers/qwen3/tokenizer.json"
                                                               : "/examples/tokenizers/llama2/tokenizer.json");
    if (std::filesystem::exists(cand)) path = cand;
  }
  if (!path.empty()) {
    auto t = Tokenizer::from_file(path);
    if (t.ok()) {
      *source = path;
      return std::move(t).value();
    }
    std::fprintf(stderr, "tokenizer %s: %s\n", path.c_str(), t.status().to_string().c_str());
  }
  BpeTrainOptions o;
  o.vocab_size = 2000;
  o.pad_to = c.vocab_size;
  auto json = train_byte_level_bpe(builtin_training_text(), o);
  auto t = Tokenizer::from_json(*json, "trained");
  *source = "trained byte-level BPE padded to the model's vocabulary";
  return std::move(t).value();
}

struct RunStats {
  double decode_ms = 0, mask_ms = 0, sample_ms = 0, accept_ms = 0;
  int tokens = 0, values = 0;
};

// One decode run of `decode` steps at `batch`; constrained when `c` is set.
RunStats decode_run(Model& model, int batch, const Args& a, const std::shared_ptr<const CompiledConstraint>& c,
                    const std::vector<int32_t>& stop_ids, uint64_t seed) {
  const int vocab = model.config().vocab_size;
  std::vector<BlockTable> tables(static_cast<size_t>(batch));
  std::vector<std::vector<int32_t>> hist(static_cast<size_t>(batch));
  std::vector<SeqStep> steps(static_cast<size_t>(batch));
  std::vector<Sampler> samplers;
  std::vector<std::optional<ConstraintMatcher>> matchers(static_cast<size_t>(batch));
  SamplingParams sp;
  sp.temperature = 0.8f;
  for (int b = 0; b < batch; ++b) {
    sp.seed = seed + static_cast<uint64_t>(b);
    samplers.emplace_back(sp);
    auto& h = hist[static_cast<size_t>(b)];
    for (int k = 0; k < a.prompt; ++k) h.push_back(static_cast<int32_t>((k * 7919 + b * 104729) % std::min(vocab, 2000)));
    steps[static_cast<size_t>(b)] = {&tables[static_cast<size_t>(b)], h, SeqStep::Logits::kLast};
    if (c) matchers[static_cast<size_t>(b)].emplace(c, stop_ids);
  }
  StepOutput out;
  if (!model.forward(steps, &out).ok()) std::exit(1);
  RunStats st;
  std::vector<int32_t> next(static_cast<size_t>(batch));
  const auto t0 = Clock::now();
  for (int s = 0; s < a.decode; ++s) {
    if (s > 0) {
      for (int b = 0; b < batch; ++b)
        steps[static_cast<size_t>(b)] = {&tables[static_cast<size_t>(b)], std::span<const int32_t>(&next[static_cast<size_t>(b)], 1),
                                         SeqStep::Logits::kLast};
      if (!model.forward(steps, &out).ok()) std::exit(1);
    }
    for (int b = 0; b < batch; ++b) {
      const auto row = out.row(out.row_begin[static_cast<size_t>(b)]);
      auto& m = matchers[static_cast<size_t>(b)];
      SampleResult r;
      if (m) {
        auto tm = Clock::now();
        const TokenMask mask = m->mask();
        st.mask_ms += ms_since(tm);
        tm = Clock::now();
        r = samplers[static_cast<size_t>(b)].sample(row, hist[static_cast<size_t>(b)], &mask);
        st.sample_ms += ms_since(tm);
        tm = Clock::now();
        const bool is_stop = std::find(stop_ids.begin(), stop_ids.end(), r.token) != stop_ids.end();
        if (is_stop || (m->accept(r.token) && m->complete())) {
          m->rollback(0);  // the next value
          ++st.values;
        }
        st.accept_ms += ms_since(tm);
      } else {
        const auto tm = Clock::now();
        r = samplers[static_cast<size_t>(b)].sample(row, hist[static_cast<size_t>(b)]);
        st.sample_ms += ms_since(tm);
      }
      next[static_cast<size_t>(b)] = r.token;
      hist[static_cast<size_t>(b)].push_back(r.token);
      ++st.tokens;
    }
  }
  st.decode_ms = ms_since(t0);
  for (auto& t : tables) t.release(model.kv_pool());
  return st;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parse(argc, argv, &a)) return 2;
  auto cfg = preset_config(a.preset);
  if (!cfg.ok()) {
    std::fprintf(stderr, "%s\n", cfg.status().to_string().c_str());
    return 2;
  }
  const ModelConfig& c = *cfg;
  kernels::set_num_threads(a.threads);
  std::string tok_source;
  auto tok = load_tokenizer(a, c, &tok_source);
  auto t0 = Clock::now();
  auto vocab = TokenVocabulary::from_tokenizer(*tok);
  const double vocab_ms = ms_since(t0);
  int real = 0;
  for (int32_t id = 0; id < vocab->size(); ++id) real += !vocab->bytes(id).empty();

  std::printf("# bench_constraint preset=%s threads=%d prompt=%d decode=%d reps=%d\n", a.preset.c_str(), kernels::num_threads(),
              a.prompt, a.decode, a.reps);
  std::printf("# vocabulary: %s: %d ids, %d with bytes, trie of %zu nodes built in %.1f ms\n", tok_source.c_str(),
              vocab->size(), real, vocab->trie().size(), vocab_ms);
  {
    char load[64] = "?";
    if (FILE* f = std::fopen("/proc/loadavg", "r")) {
      if (std::fgets(load, sizeof(load), f) == nullptr) std::strcpy(load, "?");
      std::fclose(f);
      load[std::strcspn(load, "\n")] = 0;
    }
    std::printf("# loadavg %s (shared machine: compare columns of one run)\n", load);
  }
  std::printf("\n## compile (median of 5)\n%-36s %10s %10s %12s\n", "schema", "NFA nodes", "grammar ms", "+ vocab ms");
  for (const auto& [name, schema] : kCompileSet) {
    std::vector<double> g_ms, b_ms;
    size_t nodes = 0;
    for (int k = 0; k < 5; ++k) {
      t0 = Clock::now();
      auto g = compile_grammar(ConstraintSpec{"json_schema", schema, {}, 0, ""});
      g_ms.push_back(ms_since(t0));
      if (!g.ok()) {
        std::fprintf(stderr, "%s: %s\n", name.c_str(), g.status().to_string().c_str());
        return 1;
      }
      nodes = (*g)->num_nodes();
      t0 = Clock::now();
      auto cc = std::make_shared<const CompiledConstraint>(*g, vocab);
      b_ms.push_back(ms_since(t0));
    }
    std::sort(g_ms.begin(), g_ms.end());
    std::sort(b_ms.begin(), b_ms.end());
    std::printf("%-36s %10zu %10.3f %12.3f\n", name.c_str(), nodes, g_ms[2], b_ms[2]);
  }

  ModelOptions opts;
  opts.num_threads = a.threads;
  opts.kv_block_size = 16;
  const int max_batch = *std::max_element(a.batches.begin(), a.batches.end());
  opts.kv_pool_bytes = kv_layout(c, opts).token_bytes() * static_cast<size_t>(max_batch) * (a.prompt + a.decode + 32) * 5 / 4;
  auto model_r = Model::create(c, make_random_weights(c, 1), opts);
  if (!model_r.ok()) {
    std::fprintf(stderr, "model: %s\n", model_r.status().to_string().c_str());
    return 1;
  }
  auto model = std::move(model_r).value();
  std::vector<int32_t> stop_ids = tok->eos_ids();
  for (int e : c.eos_token_ids) stop_ids.push_back(e);

  std::printf("\n## decode (forward + mask + sampling + advance; best of %d reps for plain and warm)\n", a.reps);
  // overhead: of the wall-clock tok/s (noisy on a shared machine: the forward step dominates and
  // varies); parts: (mask + advance + constrained sampling - plain sampling) per token over the
  // plain run's time per token (the forward step is the same work in both).
  std::printf("%-6s %-11s %10s %9s %8s %12s %13s %14s %7s\n", "batch", "mode", "tok/s", "overhead", "parts", "mask us/tok",
              "sample us/tok", "advance us/tok", "values");
  std::printf("# decode schema: %s\n", a.schema.c_str());
  auto grammar = compile_grammar(decode_spec(a.schema));
  for (int batch : a.batches) {
    (void)decode_run(*model, batch, a, nullptr, stop_ids, 1);  // warm-up
    RunStats plain, warm;
    plain.decode_ms = warm.decode_ms = 1e300;
    plain = decode_run(*model, batch, a, nullptr, stop_ids, 7);
    auto cold_c = std::make_shared<const CompiledConstraint>(*grammar, vocab);
    const RunStats cold = decode_run(*model, batch, a, cold_c, stop_ids, 7);
    for (int r = 0; r < a.reps; ++r) {
      RunStats p = decode_run(*model, batch, a, nullptr, stop_ids, 7);
      if (p.decode_ms < plain.decode_ms) plain = p;
      RunStats w = decode_run(*model, batch, a, cold_c, stop_ids, 7);
      if (w.decode_ms < warm.decode_ms) warm = w;
    }
    auto row = [&](const char* mode, const RunStats& s, bool constrained) {
      const double tps = s.tokens / (s.decode_ms / 1000.0);
      const double base = plain.tokens / (plain.decode_ms / 1000.0);
      const double per_tok = [](const RunStats& r) { return 1000.0 * r.decode_ms / r.tokens; }(plain);
      const double parts = 1000.0 * (s.mask_ms + s.accept_ms + s.sample_ms) / s.tokens - 1000.0 * plain.sample_ms / plain.tokens;
      std::printf("%-6d %-11s %10.2f %8.1f%% %7.2f%% %12.1f %13.1f %14.1f %7d\n", batch, mode, tps,
                  constrained ? 100.0 * (base / tps - 1.0) : 0.0, constrained ? 100.0 * parts / per_tok : 0.0,
                  1000.0 * s.mask_ms / s.tokens, 1000.0 * s.sample_ms / s.tokens, 1000.0 * s.accept_ms / s.tokens, s.values);
    };
    row("plain", plain, false);
    row("schema-cold", cold, true);
    row("schema-warm", warm, true);
    const auto cs = cold_c->stats();
    std::printf("#   batch %d: DFA states %zu, masks computed %zu, memo hits %zu, %.1f ms in masks and classes in all, "
                "%zu state classes, %zu states over the class budget\n",
                batch, cs.dfa_states, cs.masks_computed, cs.mask_hits, cs.mask_ms, cs.classes, cs.unclassed);
  }
  return 0;
}
