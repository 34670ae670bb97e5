// ragctl make-model --preset {tiny,small,qwen2-0.5b,llama3-8b | bert-tiny,bge-small,bge-base [--pooling P] [--reranker]}
//                   [--shard-mb N] (--out DIR | --dry-run)
// Writes a random-weight Hugging Face model directory of a real shape: config.json,
// model.safetensors (or shards + model.safetensors.index.json), tokenizer.json (a real byte-level
// BPE trained deterministically on a built-in English sample), tokenizer_config.json and
// generation_config.json.
//
// Weights: every matrix ~ N(0, 1/fan_in) (so each projection preserves the RMS of its input),
// lm_head ~ N(0, 4/hidden) (logits with std 2: a peaked but non-degenerate distribution),
// embeddings ~ N(0, 1) (tied: N(0, 4/hidden), as they double as lm_head), RMSNorm weights = 1,
// q/k/v biases ~ N(0, 0.1^2). The embedding / lm_head rows of the reserved padding tokens are zero
// (as in real checkpoints, where reserved tokens are untrained), so generation stays on text.
// With RMSNorm before every block the residual stream grows roughly like sqrt(2 x layers) and
// stays finite. Each tensor is filled from its own stream (seed, tensor name, 1M-element chunk),
// so the bytes do not depend on sharding or thread count.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "command.h"
#include "make_encoder.h"
#include "ragd/common/text_file.h"
#include "ragd/common/hash.h"
#include "ragd/engine/model_config.h"
#include "ragd/engine/presets.h"
#include "ragd/engine/safetensors.h"
#include "ragd/engine/sentence_pooling.h"
#include "ragd/engine/tokenizer.h"

namespace ragd::tools {
namespace {

using namespace ragd::engine;
namespace fs = std::filesystem;

struct Preset {
  ModelConfig cfg;
  int tokenizer_target = 512;  // bytes + merges + specials before padding to vocab_size
  DType dtype = DType::kBF16;
  std::string chat_template = "llama3";
};

Result<Preset> preset(const std::string& name) {
  Preset p;
  RAGD_ASSIGN_OR_RETURN(p.cfg, preset_config(name));
  if (name == "tiny") {
    p.tokenizer_target = 512;
    p.dtype = DType::kF32;
  } else {
    p.tokenizer_target = 4096;
  }
  if (name == "qwen2-0.5b") p.chat_template = "chatml";
  return p;
}

// splitmix64: a tiny, fast generator; one stream per (tensor, chunk).
struct SplitMix {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1)
};

// Fills dst with N(0, std^2) (Box-Muller), or a constant when std == 0.
void fill_normal(uint64_t seed, const std::string& name, float mean, float std, DType dtype, std::span<uint8_t> dst) {
  const size_t n = dst.size() / dtype_size(dtype);
  constexpr size_t kChunk = 1 << 20;
  const size_t chunks = (n + kChunk - 1) / kChunk;
  Hasher128 h;
  const uint64_t base = h.u64(seed).str(name).digest().lo;
  auto work = [&](size_t c0, size_t c1) {
    std::vector<float> buf(kChunk);
    for (size_t c = c0; c < c1; ++c) {
      const size_t b = c * kChunk, m = std::min(kChunk, n - b);
      SplitMix rng{base ^ (c * 0xD1B54A32D192ED03ULL)};
      for (size_t i = 0; i < m; i += 2) {
        const double r = std::sqrt(-2.0 * std::log(rng.uniform())), t = 6.283185307179586 * rng.uniform();
        buf[i] = mean + std * static_cast<float>(r * std::cos(t));
        if (i + 1 < m) buf[i + 1] = mean + std * static_cast<float>(r * std::sin(t));
      }
      if (std == 0) std::fill(buf.begin(), buf.begin() + m, mean);
      convert_from_f32(buf.data(), m, dtype, dst.data() + b * dtype_size(dtype));
    }
  };
  const size_t threads = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), chunks);
  if (threads <= 1) {
    work(0, chunks);
    return;
  }
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) pool.emplace_back(work, chunks * t / threads, chunks * (t + 1) / threads);
  for (auto& th : pool) th.join();
}

struct Init {
  float mean = 0, std = 0;
};

std::vector<std::pair<TensorSpec, Init>> tensor_plan(const ModelConfig& c, DType dt) {
  std::vector<std::pair<TensorSpec, Init>> v;
  const int64_t h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), im = c.intermediate_size, voc = c.vocab_size;
  auto mat = [&](std::string name, int64_t out, int64_t in) {
    v.push_back({{std::move(name), dt, {out, in}}, {0.0f, static_cast<float>(1.0 / std::sqrt(double(in)))}});
  };
  auto vec = [&](std::string name, int64_t n, Init init) { v.push_back({{std::move(name), dt, {n}}, init}); };
  const float head_std = static_cast<float>(2.0 / std::sqrt(double(h)));
  v.push_back({{"model.embed_tokens.weight", dt, {voc, h}}, {0.0f, c.tie_word_embeddings ? head_std : 1.0f}});
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    vec(p + "input_layernorm.weight", h, {1.0f, 0.0f});
    mat(p + "self_attn.q_proj.weight", q, h);
    mat(p + "self_attn.k_proj.weight", kv, h);
    mat(p + "self_attn.v_proj.weight", kv, h);
    if (c.attention_bias) {
      vec(p + "self_attn.q_proj.bias", q, {0.0f, 0.1f});
      vec(p + "self_attn.k_proj.bias", kv, {0.0f, 0.1f});
      vec(p + "self_attn.v_proj.bias", kv, {0.0f, 0.1f});
    }
    mat(p + "self_attn.o_proj.weight", h, q);
    vec(p + "post_attention_layernorm.weight", h, {1.0f, 0.0f});
    mat(p + "mlp.gate_proj.weight", im, h);
    mat(p + "mlp.up_proj.weight", im, h);
    mat(p + "mlp.down_proj.weight", h, im);
  }
  vec("model.norm.weight", h, {1.0f, 0.0f});
  if (!c.tie_word_embeddings) v.push_back({{"lm_head.weight", dt, {voc, h}}, {0.0f, head_std}});
  return v;
}


struct Args {
  std::string preset = "small";
  uint64_t seed = 0;
  std::string dtype;
  std::string out;
  double shard_mb = 0;  // 0 = 2 GiB shards
  bool dry_run = false;  // print the tensor plan and sizes, write nothing
  // Shape overrides of the preset (0 = the preset's): other depths / widths of the same family, e.g.
  // the depth of 0.5B-8B models at a width this machine runs quickly.
  int layers = 0, hidden = 0, heads = 0, kv_heads = 0, intermediate = 0;
  // Pooling of an embedding model: encoder presets (make_encoder.h; default cls, as BGE); given for a
  // decoder preset, it makes a decoder embedder (sentence-transformers files, normalised).
  std::string pooling;
  bool reranker = false;
};

Status run(const Args& a) {
  if (is_encoder_preset(a.preset))
    return make_encoder_model({.preset = a.preset, .out = a.out, .seed = a.seed, .dtype = a.dtype, .pooling = a.pooling.empty() ? "cls" : a.pooling,
                               .reranker = a.reranker, .dry_run = a.dry_run, .layers = a.layers});
  const auto t0 = std::chrono::steady_clock::now();
  RAGD_ASSIGN_OR_RETURN(Preset p, preset(a.preset));
  if (!a.dtype.empty()) {
    RAGD_ASSIGN_OR_RETURN(p.dtype, parse_dtype(a.dtype));
  }
  ModelConfig& c = p.cfg;
  if (a.layers > 0) c.num_hidden_layers = a.layers;
  if (a.heads > 0) c.num_attention_heads = a.heads;
  if (a.kv_heads > 0) c.num_key_value_heads = a.kv_heads;
  if (a.intermediate > 0) c.intermediate_size = a.intermediate;
  if (a.hidden > 0) {
    c.hidden_size = a.hidden;
    if (a.intermediate == 0) c.intermediate_size = (a.hidden * 8 / 3 + 63) / 64 * 64;  // SwiGLU's usual 8/3
  }
  if (c.num_attention_heads <= 0 || c.hidden_size % c.num_attention_heads != 0 || c.num_key_value_heads <= 0 ||
      c.num_attention_heads % c.num_key_value_heads != 0)
    return Status::InvalidArgument(fmt::format("make-model: hidden {} / heads {} / kv heads {} do not divide", c.hidden_size,
                                               c.num_attention_heads, c.num_key_value_heads));
  c.head_dim = c.hidden_size / c.num_attention_heads;
  c.torch_dtype = p.dtype == DType::kF32 ? "float32" : p.dtype == DType::kF16 ? "float16" : "bfloat16";

  // Tokenizer: trained on the built-in sample, padded with reserved special tokens to vocab_size.
  BpeTrainOptions topts;
  topts.vocab_size = p.tokenizer_target;
  topts.pad_to = c.vocab_size;
  RAGD_ASSIGN_OR_RETURN(std::string tok_json, train_byte_level_bpe(builtin_training_text(), topts));
  RAGD_ASSIGN_OR_RETURN(auto tok, Tokenizer::from_json(tok_json, "tokenizer.json"));
  if (tok->vocab_size() > c.vocab_size)
    return Status::Internal(fmt::format("tokenizer has {} ids, more than vocab_size {}", tok->vocab_size(), c.vocab_size));
  c.bos_token_id = tok->bos_id().value_or(-1);
  c.eos_token_ids.clear();
  for (const char* name : {"<|end_of_text|>", p.chat_template == "chatml" ? "<|im_end|>" : "<|eot_id|>"})
    if (auto id = tok->token_to_id(name)) c.eos_token_ids.push_back(*id);
  RAGD_RETURN_IF_ERROR(c.validate());
  const auto t_tok = std::chrono::steady_clock::now();

  if (a.dry_run) {
    int64_t params = 0;
    size_t bytes = 0;
    for (const auto& [s, init] : tensor_plan(c, p.dtype)) {
      params += static_cast<int64_t>(s.nbytes() / dtype_size(s.dtype));
      bytes += s.nbytes();
    }
    std::printf("%s%.3fB parameters, %.2f GB as %s, tokenizer %d ids\n", c.to_json().c_str(), params / 1e9, bytes / 1e9,
                std::string(dtype_name(p.dtype)).c_str(), tok->vocab_size());
    return Status::OK();
  }
  std::error_code ec;
  fs::create_directories(a.out, ec);
  if (ec) return Status::IOError(fmt::format("{}: cannot create directory: {}", a.out, ec.message()));
  const fs::path dir(a.out);
  RAGD_RETURN_IF_ERROR(write_text_file((dir / "config.json").string(), c.to_json()));
  RAGD_RETURN_IF_ERROR(write_text_file((dir / "tokenizer.json").string(), tok_json));
  std::string eos_list;
  for (size_t i = 0; i < c.eos_token_ids.size(); ++i) eos_list += fmt::format("{}{}", i ? ", " : "", c.eos_token_ids[i]);
  RAGD_RETURN_IF_ERROR(write_text_file(
      (dir / "generation_config.json").string(),
      fmt::format("{{\n  \"bos_token_id\": {},\n  \"eos_token_id\": [{}],\n  \"do_sample\": false,\n"
                  "  \"temperature\": 1.0,\n  \"top_p\": 1.0,\n  \"max_new_tokens\": 256\n}}\n",
                  c.bos_token_id, eos_list)));
  RAGD_RETURN_IF_ERROR(write_text_file(
      (dir / "tokenizer_config.json").string(),
      fmt::format("{{\n  \"tokenizer_class\": \"PreTrainedTokenizerFast\",\n  \"bos_token\": \"<|begin_of_text|>\",\n"
                  "  \"eos_token\": \"{}\",\n  \"model_max_length\": {},\n  \"ragd_chat_template\": \"{}\"\n}}\n",
                  p.chat_template == "chatml" ? "<|im_end|>" : "<|eot_id|>", c.max_position_embeddings,
                  p.chat_template)));

  // Ids below `trained` are bytes, merges and the named special tokens; the rest is padding.
  const int trained = tok->token_to_id("<|reserved_special_token_0|>").value_or(c.vocab_size);
  auto plan = tensor_plan(c, p.dtype);
  std::vector<TensorSpec> specs;
  std::map<std::string, Init> init;
  size_t total = 0;
  for (auto& [s, i] : plan) {
    total += s.nbytes();
    init[s.name] = i;
    specs.push_back(s);
  }
  const size_t shard = a.shard_mb > 0 ? static_cast<size_t>(a.shard_mb * 1024 * 1024) : (2ull << 30);
  size_t done = 0;
  auto last = std::chrono::steady_clock::now();
  RAGD_RETURN_IF_ERROR(write_safetensors_dir(
      a.out, specs,
      [&](const TensorSpec& s, std::span<uint8_t> dst) {
        const Init& in = init.at(s.name);
        fill_normal(a.seed, s.name, in.mean, in.std, s.dtype, dst);
        if (s.name == "model.embed_tokens.weight" || s.name == "lm_head.weight") {
          const size_t row = static_cast<size_t>(s.shape[1]) * dtype_size(s.dtype);
          std::fill(dst.begin() + static_cast<size_t>(trained) * row, dst.end(), uint8_t{0});  // +0.0 in every dtype
        }
        done += dst.size();
        auto now = std::chrono::steady_clock::now();
        if (total > (1ull << 30) && now - last > std::chrono::seconds(2)) {
          std::fprintf(stderr, "\r  weights %.1f / %.1f GB", done / 1e9, total / 1e9);
          last = now;
        }
        return Status::OK();
      },
      shard, {{"format", "pt"}}));
  if (total > (1ull << 30)) std::fprintf(stderr, "\n");
  if (!a.pooling.empty()) {
    RAGD_ASSIGN_OR_RETURN(SentencePooling pooling, parse_sentence_pooling(a.pooling));
    RAGD_RETURN_IF_ERROR(write_sentence_pooling(a.out, c.hidden_size, {.pooling = pooling, .normalize = true, .max_seq_length = 0}));
  }
  const auto t1 = std::chrono::steady_clock::now();
  int64_t params = 0;
  for (const auto& s : specs) params += static_cast<int64_t>(s.nbytes() / dtype_size(s.dtype));
  std::fprintf(stderr,
               "wrote %s: preset %s, %s, %.1fM parameters (%.1f MB %s), tokenizer %d trained ids + %d reserved "
               "(%.0f ms), total %.1f s\n",
               a.out.c_str(), a.preset.c_str(), std::string(architecture_name(c.architecture)).c_str(), params / 1e6,
               total / 1e6, std::string(dtype_name(p.dtype)).c_str(), trained,
               c.vocab_size - trained,
               std::chrono::duration<double, std::milli>(t_tok - t0).count(),
               std::chrono::duration<double>(t1 - t0).count());
  return Status::OK();
}

Registration reg("make-model", "write a random-weight HF model directory (config, safetensors, trained BPE tokenizer)",
                 [](CLI::App& sub) -> Action {
                   auto a = std::make_shared<Args>();
                   sub.add_option("--preset", a->preset,
                                  "tiny | small | qwen2-0.5b | llama3-8b | encoders: bert-tiny | bge-small | bge-base "
                                  "(default small)")
                       ->check(CLI::IsMember({"tiny", "small", "qwen2-0.5b", "llama3-8b", "bert-tiny", "bge-small", "bge-base"}));
                   sub.add_option("--pooling", a->pooling, "embedding pooling: cls | mean | lasttoken (encoder presets: default cls, as BGE; decoder presets: writes "
                                  "the sentence-transformers files of a decoder embedder, e.g. lasttoken as Qwen3-Embedding)")
                       ->check(CLI::IsMember({"cls", "mean", "lasttoken"}));
                   sub.add_flag("--reranker", a->reranker,
                                "encoder presets: a cross-encoder (BertForSequenceClassification, one label)");
                   sub.add_option("--seed", a->seed, "weight RNG seed (default 0)");
                   sub.add_option("--dtype", a->dtype, "bf16 | f16 | f32 (default: f32 for tiny, bf16 otherwise)")
                       ->check(CLI::IsMember({"bf16", "f16", "f32"}));
                   sub.add_option("--shard-mb", a->shard_mb, "max MB per safetensors shard (default 2048)");
                   sub.add_option("--out", a->out, "output directory");
                   sub.add_flag("--dry-run", a->dry_run, "print config.json and the parameter count, write nothing");
                   sub.add_option("--layers", a->layers, "override the preset's num_hidden_layers");
                   sub.add_option("--hidden", a->hidden, "override the preset's hidden_size (intermediate 8/3 of it unless --intermediate)");
                   sub.add_option("--heads", a->heads, "override the preset's num_attention_heads");
                   sub.add_option("--kv-heads", a->kv_heads, "override the preset's num_key_value_heads");
                   sub.add_option("--intermediate", a->intermediate, "override the preset's intermediate_size");
                   return [a]() -> int {
                     Status st = a->out.empty() && !a->dry_run ? Status::InvalidArgument("--out DIR is required")
                                                              : run(*a);
                     if (!st.ok()) {
                       std::fprintf(stderr, "make-model: %s\n", st.to_string().c_str());
                       return 1;
                     }
                     return 0;
                   };
                 });

}  // namespace
}  // namespace ragd::tools
