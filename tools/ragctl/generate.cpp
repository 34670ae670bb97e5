// ragctl generate --model DIR (--prompt TEXT | --prompt-ids 1,2,3) [--max-tokens N] [--temperature T]
//                 [--top-k K] [--top-p P] [--min-p P] [--repetition-penalty R] [--seed S] [--chat]
//                 [--stop STR]... [--ignore-eos] [--device cpu|cuda:N] [--threads N] [--kv-mb N] [--json]
// Runs one sequence through the engine: prefill of the prompt, then one decode step per token.
// --json prints exactly one JSON object {"prompt_ids":[...],"ids":[...],"text":"...","logprobs":[...]}
// (logprobs[i] = natural-log probability of ids[i] under the raw model distribution); otherwise the
// text streams to stdout as it is produced and prefill / decode speeds go to stderr.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "command.h"
#include "enum_option.h"
#include "ragd/common/json_writer.h"
#include "ragd/common/utf8.h"
#include "ragd/engine/model.h"
#include "ragd/engine/model_chat_template.h"
#include "ragd/engine/sampler.h"
#include "ragd/engine/tokenizer.h"

namespace ragd::tools {
namespace {

using namespace ragd::engine;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

struct Args {
  std::string model;
  std::string prompt;
  std::string prompt_ids;
  int max_tokens = 64;
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  uint64_t seed = 0;
  bool chat = false;
  bool ignore_eos = false;
  bool json = false;
  std::vector<std::string> stop;  // stop strings: generation ends at the first; it is not printed
  std::string device = "cpu";
  WeightFormat weights = ModelOptions{}.weights;
  kernels::KvDtype kv_dtype = ModelOptions{}.kv_dtype;
  bool verbose = false;
  int threads = 0;
  double kv_mb = 0;  // 0: enough for prompt + max_tokens
};

Result<std::vector<int32_t>> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (*end != '\0' || v < 0 || v > INT32_MAX)
      return Status::InvalidArgument(fmt::format("--prompt-ids: '{}' is not a non-negative integer", item));
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) return Status::InvalidArgument("--prompt-ids: no ids given");
  return ids;
}

// The built-in chat template: tokenizer_config.json "ragd_chat_template" if present, else by architecture.
ChatTemplate pick_template(const std::string& dir, const ModelConfig& cfg, const Tokenizer& tok) {
  std::ifstream in(fs::path(dir) / "tokenizer_config.json");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  for (const char* name : {"llama3", "chatml", "mistral"})
    if (text.find(fmt::format("\"ragd_chat_template\": \"{}\"", name)) != std::string::npos)
      return *parse_chat_template(name);
  if (cfg.architecture == Architecture::kQwen2) return ChatTemplate::kChatML;
  if (tok.token_to_id("<|start_header_id|>")) return ChatTemplate::kLlama3;
  if (tok.token_to_id("<|im_start|>")) return ChatTemplate::kChatML;
  return ChatTemplate::kMistral;
}

Status run(const Args& a) {
  SamplingParams sp;
  sp.temperature = a.temperature;
  sp.top_k = a.top_k;
  sp.top_p = a.top_p;
  sp.min_p = a.min_p;
  sp.repetition_penalty = a.repetition_penalty;
  sp.seed = a.seed;
  sp.max_tokens = a.max_tokens;
  sp.ignore_eos = a.ignore_eos;
  sp.stop = a.stop;
  RAGD_RETURN_IF_ERROR(sp.validate());
  if (a.prompt.empty() == a.prompt_ids.empty()) return Status::InvalidArgument("give exactly one of --prompt or --prompt-ids");

  RAGD_ASSIGN_OR_RETURN(auto tok, Tokenizer::from_file((fs::path(a.model) / "tokenizer.json").string()));
  RAGD_ASSIGN_OR_RETURN(ModelConfig cfg, ModelConfig::from_json_file((fs::path(a.model) / "config.json").string()));

  std::vector<int32_t> prompt;
  if (!a.prompt_ids.empty()) {
    RAGD_ASSIGN_OR_RETURN(prompt, parse_ids(a.prompt_ids));
  } else if (a.chat) {
    // The model's own chat template when it ships one, else a built-in.
    const ChatMessage msg{"user", a.prompt};
    RAGD_ASSIGN_OR_RETURN(std::unique_ptr<ModelChatTemplate> own, ModelChatTemplate::load(a.model));
    std::string text;
    if (own != nullptr) {
      RAGD_ASSIGN_OR_RETURN(text, own->render(std::span<const ChatMessage>(&msg, 1)));
    } else {
      text = apply_chat_template(pick_template(a.model, cfg, *tok), {&msg, 1});
    }
    prompt = tok->encode(text, /*add_bos=*/false);
  } else {
    prompt = tok->encode(a.prompt, /*add_bos=*/true);
  }
  for (int32_t id : prompt)
    if (id >= cfg.vocab_size)
      return Status::InvalidArgument(fmt::format("prompt id {} is outside the vocabulary (vocab_size {})", id, cfg.vocab_size));
  if (prompt.empty()) return Status::InvalidArgument("the prompt encodes to no tokens");
  const int max_new = std::min<int>(a.max_tokens, cfg.max_position_embeddings - static_cast<int>(prompt.size()));
  if (max_new <= 0)
    return Status::InvalidArgument(fmt::format("prompt of {} tokens leaves no room under max_position_embeddings {}",
                                               prompt.size(), cfg.max_position_embeddings));

  ModelOptions mo;
  mo.device = a.device;
  mo.num_threads = a.threads;
  mo.weights = a.weights;
  mo.kv_dtype = a.kv_dtype;
  const size_t per_token = kv_layout(cfg, mo).token_bytes();
  const size_t need = per_token * (prompt.size() + max_new + 2 * mo.kv_block_size);
  mo.kv_pool_bytes = a.kv_mb > 0 ? static_cast<size_t>(a.kv_mb * 1024 * 1024) : need;
  const auto t_load0 = Clock::now();
  RAGD_ASSIGN_OR_RETURN(auto model, Model::load(a.model, mo));
  const double load_s = std::chrono::duration<double>(Clock::now() - t_load0).count();

  std::vector<int32_t> eos = cfg.eos_token_ids;
  if (eos.empty()) eos = tok->eos_ids();
  Sampler sampler(sp);
  BlockTable table;
  KvPool& pool = model->kv_pool();
  std::vector<int32_t> history = prompt, ids;
  std::vector<float> logprobs;
  StreamDecoder stream(*tok, /*skip_special=*/true);
  StepOutput out;
  // Streamed text: `produced` holds complete characters, `emitted` of them are printed. The last
  // (longest stop string - 1) bytes are held back so that a stop string is never half printed.
  std::string produced;
  bool stop_hit = false;
  size_t emitted = 0, hold = 0;
  for (const auto& st : sp.stop) hold = std::max(hold, st.size() - 1);
  auto find_stop = [&](const std::string& text) {
    size_t best = std::string::npos;
    for (const auto& st : sp.stop) best = std::min(best, text.find(st));
    return best;
  };
  auto print = [](std::string_view t) {
    std::fwrite(t.data(), 1, t.size(), stdout);
    std::fflush(stdout);
  };

  auto step = [&](std::span<const int32_t> toks) -> Status {
    SeqStep s;
    s.table = &table;
    s.tokens = toks;
    s.logits = SeqStep::Logits::kLast;
    Status st = model->forward({&s, 1}, &out);
    if (st.code() == StatusCode::kResourceExhausted)
      return Status::ResourceExhausted(st.message() + " (raise --kv-mb)");
    return st;
  };

  const auto t0 = Clock::now();
  Status st = step(prompt);
  const auto t1 = Clock::now();
  while (st.ok()) {
    SampleResult r = sampler.sample(out.row(out.row_begin[0]), history);
    ids.push_back(r.token);
    logprobs.push_back(r.logprob);
    history.push_back(r.token);
    bool stop = !sp.ignore_eos && std::find(eos.begin(), eos.end(), r.token) != eos.end();
    produced += stream.push(r.token);
    if (const size_t at = find_stop(produced); at != std::string::npos) {
      produced.resize(at);
      stop = stop_hit = true;
    }
    if (!a.json && !stop) {
      size_t safe = produced.size() > hold ? produced.size() - hold : 0;
      while (safe > emitted && utf8_continuation(produced[safe])) --safe;  // char start
      if (safe > emitted) {
        print(std::string_view(produced).substr(emitted, safe - emitted));
        emitted = safe;
      }
    }
    if (stop || static_cast<int>(ids.size()) >= max_new) break;
    const int32_t last = r.token;
    st = step({&last, 1});
  }
  const auto t2 = Clock::now();
  table.release(pool);
  RAGD_RETURN_IF_ERROR(st);

  if (!stop_hit) {
    produced += stream.flush();
    if (const size_t at = find_stop(produced); at != std::string::npos) produced.resize(at);
  }
  if (a.json) {
    auto list = [](const auto& v, auto fmt_one) {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + fmt_one(v[i]);
      return s + "]";
    };
    auto id_str = [](int32_t x) { return std::to_string(x); };
    auto lp_str = [](float x) { return std::isfinite(x) ? fmt::format("{}", x) : std::string("null"); };
    std::printf("{\"prompt_ids\":%s,\"ids\":%s,\"text\":%s,\"logprobs\":%s}\n", list(prompt, id_str).c_str(),
                list(ids, id_str).c_str(), json_quote(produced).c_str(), list(logprobs, lp_str).c_str());
    return Status::OK();
  }
  print(std::string_view(produced).substr(std::min(emitted, produced.size())));
  print("\n");
  const double prefill_s = std::chrono::duration<double>(t1 - t0).count();
  const double decode_s = std::chrono::duration<double>(t2 - t1).count();
  const size_t decode_steps = ids.size() > 0 ? ids.size() - 1 : 0;
  std::fprintf(stderr,
               "load %.2f s | prefill %zu tokens in %.1f ms (%.1f tok/s) | decode %zu tokens in %.1f ms (%.1f tok/s) "
               "on %s\n",
               load_s, prompt.size(), prefill_s * 1e3, prompt.size() / std::max(prefill_s, 1e-9), decode_steps,
               decode_s * 1e3, decode_steps / std::max(decode_s, 1e-9), std::string(model->device()).c_str());
  if (a.verbose) {
    const ModelLoadInfo& li = model->load_info();
    std::fprintf(stderr,
                 "model: %s weights, %.1f MiB, %s KV, loaded in %.2f s, resident %.1f MiB after load; kernels %s\n",
                 li.weights.c_str(), li.weight_bytes / 1048576.0, li.kv_dtype.c_str(), li.seconds,
                 li.resident_bytes / 1048576.0, li.kernels.c_str());
  }
  return Status::OK();
}

Registration reg("generate", "run one prompt through the engine and print the completion",
                 [](CLI::App& sub) -> Action {
                   auto a = std::make_shared<Args>();
                   sub.add_option("--model", a->model, "model directory (config.json, safetensors, tokenizer.json)")
                       ->required();
                   sub.add_option("--prompt", a->prompt, "prompt text");
                   sub.add_option("--prompt-ids", a->prompt_ids, "prompt as comma-separated token ids");
                   sub.add_option("--max-tokens", a->max_tokens, "tokens to generate (default 64)");
                   sub.add_option("--temperature", a->temperature, "0 = greedy (default 0)");
                   sub.add_option("--top-k", a->top_k, "0 = off");
                   sub.add_option("--top-p", a->top_p, "1 = off");
                   sub.add_option("--min-p", a->min_p, "0 = off");
                   sub.add_option("--repetition-penalty", a->repetition_penalty, "1 = off");
                   sub.add_option("--seed", a->seed, "sampling seed (default 0)");
                   sub.add_flag("--chat", a->chat, "wrap the prompt in the model's chat template");
                   sub.add_option("--stop", a->stop, "stop string (repeatable); not included in the output");
                   sub.add_flag("--ignore-eos", a->ignore_eos, "keep generating past end-of-sequence tokens");
                   sub.add_flag("--json", a->json, "print one JSON object with ids, text and logprobs");
                   sub.add_option("--device", a->device, "cpu or cuda:N (default cpu)");
                   sub.add_option("--threads", a->threads, "CPU threads (default: all cores)");
                   add_enum_option(sub, "--weights", &a->weights, "weights in memory (auto = the checkpoint's dtype)");
                   add_enum_option(sub, "--kv-dtype", &a->kv_dtype, "KV pool storage");
                   sub.add_flag("--verbose", a->verbose, "also print the weight format, KV dtype, load time and resident memory");
                   sub.add_option("--kv-mb", a->kv_mb, "KV pool size in MiB (default: what the request needs)");
                   return [a]() -> int {
                     Status st = run(*a);
                     if (!st.ok()) {
                       std::fprintf(stderr, "generate: %s\n", st.to_string().c_str());
                       return 1;
                     }
                     return 0;
                   };
                 });

}  // namespace
}  // namespace ragd::tools
