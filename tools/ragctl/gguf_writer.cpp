// GGUF v3 export of Llama / Qwen2 decoders (see gguf_writer.h): plan every tensor and check it
// against the config first, then write the file (gguf_file.h). BERT encoders: gguf_bert.cpp.
#include "gguf_writer.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numbers>
#include <vector>

#include <fmt/format.h>
#include <simdjson.h>

#include "gguf_file.h"
#include "ragd/common/text_file.h"
#include "ragd/engine/bert_model.h"
#include "ragd/engine/sentence_pooling.h"

namespace ragd::tools {
namespace {

using namespace ragd::engine;
using namespace ragd::tools::gguf;
namespace fs = std::filesystem;


// Llama-3 RoPE scaling as llama.cpp expects it: per-frequency divisors in rope_freqs.weight.
std::vector<float> llama3_rope_factors(const ModelConfig& c) {
  const RopeScaling& s = c.rope_scaling;
  const double old = s.original_max_position_embeddings, low_wl = old / s.low_freq_factor,
               high_wl = old / s.high_freq_factor;
  std::vector<float> f(static_cast<size_t>(c.head_dim / 2));
  for (size_t i = 0; i < f.size(); ++i) {
    const double freq = 1.0 / std::pow(static_cast<double>(c.rope_theta), 2.0 * static_cast<double>(i) / c.head_dim);
    const double wl = 2 * std::numbers::pi / freq;
    if (wl < high_wl) {
      f[i] = 1.0f;
    } else if (wl > low_wl) {
      f[i] = s.factor;
    } else {
      const double smooth = (old / wl - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      f[i] = static_cast<float>(1.0 / ((1 - smooth) / s.factor + smooth));
    }
  }
  return f;
}

class Planner {
 public:
  Planner(const ModelConfig& c, const WeightStore& w, GgufType t) : c_(c), w_(w), type_(t) {}

  // The full tensor list in llama.cpp's order, every source checked.
  Result<std::vector<Planned>> plan(bool permute_qk) {
    const int64_t h = c_.hidden_size, q = c_.q_dim(), kv = c_.kv_dim(), im = c_.intermediate_size,
                  voc = c_.vocab_size;
    RAGD_RETURN_IF_ERROR(add("token_embd.weight", "model.embed_tokens.weight", {voc, h}));
    if (c_.rope_scaling.type == RopeScaling::Type::kLlama3) {
      Planned p;
      p.name = "rope_freqs.weight";
      p.generated = llama3_rope_factors(c_);
      p.rows = static_cast<int64_t>(p.generated.size());
      out_.push_back(std::move(p));
    }
    for (int l = 0; l < c_.num_hidden_layers; ++l) {
      const std::string hf = fmt::format("model.layers.{}.", l), gg = fmt::format("blk.{}.", l);
      const int qh = permute_qk ? c_.num_attention_heads : 0, kh = permute_qk ? c_.num_key_value_heads : 0;
      RAGD_RETURN_IF_ERROR(add(gg + "attn_norm.weight", hf + "input_layernorm.weight", {h}));
      RAGD_RETURN_IF_ERROR(add(gg + "attn_q.weight", hf + "self_attn.q_proj.weight", {q, h}, qh));
      RAGD_RETURN_IF_ERROR(add(gg + "attn_k.weight", hf + "self_attn.k_proj.weight", {kv, h}, kh));
      RAGD_RETURN_IF_ERROR(add(gg + "attn_v.weight", hf + "self_attn.v_proj.weight", {kv, h}));
      if (c_.attention_bias) {
        RAGD_RETURN_IF_ERROR(add(gg + "attn_q.bias", hf + "self_attn.q_proj.bias", {q}, qh));
        RAGD_RETURN_IF_ERROR(add(gg + "attn_k.bias", hf + "self_attn.k_proj.bias", {kv}, kh));
        RAGD_RETURN_IF_ERROR(add(gg + "attn_v.bias", hf + "self_attn.v_proj.bias", {kv}));
      }
      RAGD_RETURN_IF_ERROR(add(gg + "attn_output.weight", hf + "self_attn.o_proj.weight", {h, q}));
      RAGD_RETURN_IF_ERROR(add(gg + "ffn_norm.weight", hf + "post_attention_layernorm.weight", {h}));
      RAGD_RETURN_IF_ERROR(add(gg + "ffn_gate.weight", hf + "mlp.gate_proj.weight", {im, h}));
      RAGD_RETURN_IF_ERROR(add(gg + "ffn_up.weight", hf + "mlp.up_proj.weight", {im, h}));
      RAGD_RETURN_IF_ERROR(add(gg + "ffn_down.weight", hf + "mlp.down_proj.weight", {h, im}));
    }
    RAGD_RETURN_IF_ERROR(add("output_norm.weight", "model.norm.weight", {h}));
    if (!c_.tie_word_embeddings) RAGD_RETURN_IF_ERROR(add("output.weight", "lm_head.weight", {voc, h}));
    return std::move(out_);
  }

 private:
  Status add(std::string name, const std::string& source, std::vector<int64_t> shape, int permute_heads = 0) {
    return plan_tensor(w_, type_, std::move(name), source, std::move(shape), &out_, permute_heads);
  }

  const ModelConfig& c_;
  const WeightStore& w_;
  GgufType type_;
  std::vector<Planned> out_;
};

}  // namespace

Status write_gguf(const ModelConfig& cfg, const WeightStore& weights, std::string_view tokenizer_json,
                  std::string_view name, const std::string& out_path, GgufType type, GgufStats* stats) {
  RAGD_RETURN_IF_ERROR(cfg.validate());
  const bool qwen2 = cfg.architecture == Architecture::kQwen2;
  const std::string arch = qwen2 ? "qwen2" : "llama";
  if (qwen2 && cfg.q_dim() != cfg.hidden_size)
    return Status::InvalidArgument(fmt::format(
        "config: llama.cpp's qwen2 needs num_attention_heads x head_dim ({}) == hidden_size ({})", cfg.q_dim(),
        cfg.hidden_size));
  if (cfg.rope_scaling.type == RopeScaling::Type::kLlama3 && qwen2)
    return Status::InvalidArgument("config: Llama-3 RoPE scaling is not supported for qwen2 in llama.cpp");

  // Qwen2 is NEOX RoPE in llama.cpp (half-split, as HF): no permutation.
  RAGD_ASSIGN_OR_RETURN(std::vector<Planned> tensors, Planner(cfg, weights, type).plan(/*permute_qk=*/!qwen2));
  RAGD_ASSIGN_OR_RETURN(Vocab vocab, read_vocab(tokenizer_json, cfg.vocab_size, "BPE"));

  KvWriter kv;
  kv.str("general.architecture", arch);
  kv.str("general.name", name);
  kv.u32("general.file_type", file_type(type));
  if (type == GgufType::kQ8_0) kv.u32("general.quantization_version", 2);
  const std::string a = arch + ".";
  kv.u32(a + "vocab_size", static_cast<uint32_t>(cfg.vocab_size));
  kv.u32(a + "context_length", static_cast<uint32_t>(cfg.max_position_embeddings));
  kv.u32(a + "embedding_length", static_cast<uint32_t>(cfg.hidden_size));
  kv.u32(a + "block_count", static_cast<uint32_t>(cfg.num_hidden_layers));
  kv.u32(a + "feed_forward_length", static_cast<uint32_t>(cfg.intermediate_size));
  kv.u32(a + "attention.head_count", static_cast<uint32_t>(cfg.num_attention_heads));
  kv.u32(a + "attention.head_count_kv", static_cast<uint32_t>(cfg.num_key_value_heads));
  kv.f32(a + "attention.layer_norm_rms_epsilon", cfg.rms_norm_eps);
  kv.f32(a + "rope.freq_base", cfg.rope_theta);
  kv.u32(a + "rope.dimension_count", static_cast<uint32_t>(cfg.head_dim));
  if (cfg.head_dim * cfg.num_attention_heads != cfg.hidden_size) {
    kv.u32(a + "attention.key_length", static_cast<uint32_t>(cfg.head_dim));
    kv.u32(a + "attention.value_length", static_cast<uint32_t>(cfg.head_dim));
  }
  if (cfg.rope_scaling.type == RopeScaling::Type::kLinear) {
    kv.str(a + "rope.scaling.type", "linear");
    kv.f32(a + "rope.scaling.factor", cfg.rope_scaling.factor);
  }
  kv.str("tokenizer.ggml.model", "gpt2");
  kv.str("tokenizer.ggml.pre", "default");
  kv.str_array("tokenizer.ggml.tokens", vocab.tokens);
  kv.i32_array("tokenizer.ggml.token_type", vocab.types);
  kv.str_array("tokenizer.ggml.merges", vocab.merges);
  if (cfg.bos_token_id >= 0) kv.u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(cfg.bos_token_id));
  if (!cfg.eos_token_ids.empty())
    kv.u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(cfg.eos_token_ids.front()));
  kv.boolean("tokenizer.ggml.add_bos_token", cfg.bos_token_id >= 0);

  uint64_t bytes = 0;
  RAGD_RETURN_IF_ERROR(write_file(kv, tensors, out_path, &bytes));
  if (stats) {
    stats->architecture = arch;
    stats->tensors = static_cast<int64_t>(tensors.size());
    stats->kv_pairs = kv.count();
    stats->bytes = bytes;
  }
  return Status::OK();
}

Status convert_to_gguf(const std::string& dir, const std::string& out_path, GgufType type, GgufStats* stats) {
  const fs::path d(dir);
  const fs::path cfg_path = d / "config.json";
  RAGD_ASSIGN_OR_RETURN(const std::string cfg_json, read_text_file(cfg_path.string(), "the model config"));
  RAGD_ASSIGN_OR_RETURN(auto weights, WeightStore::open_dir(dir));
  RAGD_ASSIGN_OR_RETURN(const std::string tok_json,
                        read_text_file((d / "tokenizer.json").string(), "the tokenizer (a GGUF file needs it)"));
  std::string name = fs::absolute(d).lexically_normal().filename().string();
  if (name.empty()) name = fs::absolute(d).lexically_normal().parent_path().filename().string();
  if (BertConfig::is_encoder_config(cfg_json)) {
    RAGD_ASSIGN_OR_RETURN(BertConfig bert, BertConfig::from_json(cfg_json, cfg_path.string()));
    std::string pooling;
    if (!bert.is_classifier() && has_sentence_pooling(dir)) {
      RAGD_ASSIGN_OR_RETURN(PoolingSpec spec, read_sentence_pooling(dir));
      pooling = std::string(sentence_pooling_name(spec.pooling));
    }
    return write_bert_gguf(bert, *weights, tok_json, pooling, name, out_path, type, stats);
  }
  RAGD_ASSIGN_OR_RETURN(ModelConfig cfg, ModelConfig::from_json(cfg_json, cfg_path.string()));
  return write_gguf(cfg, *weights, tok_json, name, out_path, type, stats);
}

}  // namespace ragd::tools
