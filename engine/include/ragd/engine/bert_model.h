// BERT-family encoders (BertModel, BertForSequenceClassification; XLM-RoBERTa's encoder, whose
// shapes are BERT's with positions offset by pad_token_id + 1) loaded from a Hugging Face
// directory: config.json, model.safetensors (or shards), tokenizer.json (WordPiece, wordpiece.h).
//
// Forward pass (post-LN blocks, as BERT):
//   x = LayerNorm(word[id] + position[pos] + token_type[type])
//   per layer: a = LayerNorm(x + Wo · Attention(Wq x, Wk x, Wv x) + bo)        (bidirectional)
//              x = LayerNorm(a + W2 · GELU(W1 a + b1) + b2)
// Batches are packed, not padded: the rows of all sequences form one [Σ len, hidden] matrix for
// every projection (OpenBLAS sgemm), and attention runs per sequence through the engine's prefill
// attention kernel (kernels/attention.h) with causal = false, so no token sees another sequence and
// padding costs nothing. Weights are held as f32 (bf16 / f16 checkpoints are widened at load).
// Tensor names are Hugging Face's, with or without the "bert." / "roberta." prefix.
// Thread-safety: a loaded BertModel is immutable; forward / classify are safe from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/hash.h"
#include "ragd/common/status.h"
#include "ragd/engine/safetensors.h"
#include "ragd/engine/wordpiece.h"

namespace ragd::engine {

struct BertConfig {
  std::string architecture = "BertModel";  // config.json "architectures"[0]
  std::string model_type = "bert";         // "bert" | "xlm-roberta" | "roberta"
  int vocab_size = 0;
  int hidden_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int intermediate_size = 0;
  int max_position_embeddings = 0;
  int type_vocab_size = 2;
  float layer_norm_eps = 1e-12f;
  std::string hidden_act = "gelu";  // "gelu" (erf) | "gelu_new" | "gelu_pytorch_tanh"
  int pad_token_id = 0;
  int num_labels = 0;  // sequence classification heads: outputs per input (0: no head)

  // Parses and validates config.json; errors name the file and the field or the architecture.
  static Result<BertConfig> from_json_file(const std::string& path);
  static Result<BertConfig> from_json(std::string_view json, std::string_view source_name);
  std::string to_json() const;  // HF-compatible config.json text
  Status validate() const;
  // True when config.json text describes an encoder this file handles (architectures or model_type).
  static bool is_encoder_config(std::string_view json);

  bool is_classifier() const { return architecture.ends_with("ForSequenceClassification"); }
  int head_dim() const { return hidden_size / num_attention_heads; }
  // First position id (XLM-RoBERTa: pad_token_id + 1; BERT: 0).
  int position_offset() const { return model_type == "bert" ? 0 : pad_token_id + 1; }
  // Longest input the position table allows.
  int max_tokens() const { return max_position_embeddings - position_offset(); }
  Hash128 shape_hash() const;
};

// Named encoder shapes for `ragctl make-model` and tests:
//   bert-tiny   2 layers × 64, 4 heads, intermediate 256, vocab 4096, 128 positions (tests)
//   bge-small   12 × 384, 12 heads, intermediate 1536, vocab 30522, 512 positions
//   bge-base    12 × 768, 12 heads, intermediate 3072, vocab 30522, 512 positions
Result<BertConfig> bert_preset_config(std::string_view name);
std::vector<std::string_view> bert_preset_names();

class BertModel {
 public:
  // Loads config.json and the safetensors of `dir`. Errors name the file: unknown architecture,
  // missing tensors, tensors whose shape disagrees with config.json.
  static Result<std::unique_ptr<BertModel>> load(const std::string& dir);
  // From tensors already in memory (tests, benchmarks); `source` names them in errors.
  static Result<std::unique_ptr<BertModel>> create(const BertConfig& cfg, const WeightStore& weights,
                                                   std::string_view source);
  ~BertModel();

  const BertConfig& config() const;
  // Architecture, shapes and weight checksum.
  Hash128 fingerprint() const;

  // Final hidden states of every token of every input, packed in input order:
  // hidden: [Σ inputs[i].ids.size(), hidden_size] row-major. InvalidArgument naming the input for an
  // empty input, one longer than max_tokens(), or an id / type id outside its table.
  Status forward(std::span<const EncoderInput> inputs, std::vector<float>* hidden) const;
  // Sequence-classification logits: [inputs.size(), num_labels] (pooler tanh(Wp h[CLS] + bp), then
  // the classifier). FailedPrecondition when the checkpoint has no classification head.
  Status classify(std::span<const EncoderInput> inputs, std::vector<float>* logits) const;

 private:
  struct Impl;
  explicit BertModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Every tensor a model of `cfg` needs (HF names without prefix; pooler + classifier when
// cfg.num_labels > 0), f32. Matrices uniform with std 1/sqrt(fan_in), embeddings std 1, LayerNorm
// weights 1 ± 0.05, biases ± 0.02. Deterministic in `seed`.
std::map<std::string, OwnedTensor> random_bert_tensors(const BertConfig& cfg, uint64_t seed);

}  // namespace ragd::engine
