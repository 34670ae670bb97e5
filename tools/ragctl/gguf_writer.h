// GGUF export of a ragd model directory (`ragctl convert-gguf`): reads config.json, the safetensors
// weights and tokenizer.json through the engine API and writes one GGUF v3 file that llama.cpp
// loads as architecture "llama" (Llama, Mistral) or "qwen2" (Qwen2); BERT encoders: write_bert_gguf
// below. The container itself: gguf_file.h.
//
// What the file holds:
//   - hparams under "<arch>.": context_length, embedding_length, block_count, feed_forward_length,
//     attention.head_count / head_count_kv / layer_norm_rms_epsilon, rope.freq_base,
//     rope.dimension_count, key_length / value_length (only when head_dim != hidden / heads),
//     vocab_size; linear RoPE scaling as rope.scaling.*, Llama-3 RoPE scaling as a
//     rope_freqs.weight tensor; general.architecture / name / file_type.
//   - the tokenizer as tokenizer.ggml.model "gpt2" (pre "default"): tokens, token_type and merges
//     from tokenizer.json, padded with unused tokens up to vocab_size; BOS / EOS from config.json.
//   - tensors under llama.cpp's names (token_embd, blk.N.attn_q, ..., output_norm, output). HF
//     Llama Q/K rows are permuted from the half-split RoPE layout to llama.cpp's interleaved one
//     (Qwen2 uses NEOX RoPE and is not permuted). Tied embeddings write no output.weight.
//   - types: 2-D weight matrices (embedding and output included) in the target type; 1-D tensors
//     (norms, biases, rope_freqs) always f32. q8_0 is ggml's block_q8_0: per 32 weights one f16
//     scale d = amax / 127 followed by 32 int8 q = round(x / d).
//
// Every problem (bad config, missing tensor, wrong shape, row length not a multiple of 32 for
// q8_0, unusable tokenizer) is reported before the output file is created, as a Status naming it.
// The file is written under a temporary name and renamed into place when complete.
// Thread-safety: pure functions; concurrent calls must use different output paths.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ragd/common/enum_names.h"
#include "ragd/common/status.h"
#include "ragd/engine/bert_model.h"
#include "ragd/engine/model_config.h"
#include "ragd/engine/safetensors.h"

namespace ragd::tools {

// Target type of the 2-D weight matrices.
enum class GgufType : uint8_t { kF32, kF16, kBF16, kQ8_0 };
inline constexpr auto kGgufTypeNames = make_enum_names<GgufType>(
    "GGUF type", {{GgufType::kF32, "f32"}, {GgufType::kF16, "f16"}, {GgufType::kBF16, "bf16"}, {GgufType::kQ8_0, "q8_0"}});
constexpr const auto& ragd_enum_names(GgufType) { return kGgufTypeNames; }
static_assert(enum_names_valid(kGgufTypeNames));
inline std::string_view gguf_type_name(GgufType t) { return enum_name(t); }  // "f32", "f16", "bf16", "q8_0"
// The names above; InvalidArgument listing them otherwise.
inline Result<GgufType> parse_gguf_type(std::string_view s) { return parse_enum<GgufType>(s); }

struct GgufStats {
  std::string architecture;  // "llama" or "qwen2"
  int64_t tensors = 0;
  int64_t kv_pairs = 0;
  uint64_t bytes = 0;  // file size
};

// Converts the model directory `dir` (config.json, model.safetensors or shards, tokenizer.json):
// a decoder as above, a BERT encoder (bert_model.h) as write_bert_gguf, with the pooling of its
// sentence-transformers files (sentence_pooling.h) when it has them.
Status convert_to_gguf(const std::string& dir, const std::string& out_path, GgufType type,
                       GgufStats* stats = nullptr);

// Same, from parts already loaded (tests, other front ends). `name` goes into general.name.
Status write_gguf(const engine::ModelConfig& cfg, const engine::WeightStore& weights,
                  std::string_view tokenizer_json, std::string_view name, const std::string& out_path,
                  GgufType type, GgufStats* stats = nullptr);

// A BERT encoder as llama.cpp's "bert" architecture (gguf_bert.cpp): bert.* hparams with
// attention.causal = false and pooling_type (cls / mean / lasttoken; rank for a sequence
// classifier, whose pooler and classifier become cls.* and cls.output.*), tensors token_embd,
// token_types (always f32: llama.cpp adds its row to f32 activations), position_embd,
// token_embd_norm, blk.N.attn_{q,k,v,output} (+ bias), attn_output_norm, ffn_up / ffn_down
// (+ bias), layer_output_norm; the WordPiece vocabulary as
// tokenizer.ggml.model "bert" in llama.cpp's phantom-space spelling, with the token type count and
// the [CLS] / [SEP] / [UNK] / [PAD] / [MASK] ids. Only model_type "bert" with the erf GELU.
Status write_bert_gguf(const engine::BertConfig& cfg, const engine::WeightStore& weights,
                       std::string_view tokenizer_json, std::string_view pooling, std::string_view name,
                       const std::string& out_path, GgufType type, GgufStats* stats = nullptr);

}  // namespace ragd::tools
