// GGUF export of BERT-family encoders (gguf_writer.h: write_bert_gguf) as llama.cpp's "bert"
// architecture: non-causal attention, the pooling of the sentence-transformers files, WordPiece
// vocabulary in llama.cpp's "phantom space" spelling (a word-initial piece gets a leading U+2581,
// a "##" continuation loses its "##", special tokens stay as they are), and for sequence
// classifiers the pooler as cls.* and the classifier as cls.output.* (pooling "rank").
#include <map>

#include <fmt/format.h>

#include "gguf_file.h"
#include "gguf_writer.h"

namespace ragd::tools {
namespace {

using namespace ragd::engine;
using namespace ragd::tools::gguf;

// The WordPiece vocabulary in llama.cpp's "phantom space" spelling, and the original spelling's ids
// (for the special-token ids).
struct WordPieceVocab {
  std::vector<std::string> tokens;  // [vocab_size]
  std::vector<int32_t> types;       // TokenType
  std::map<std::string, int32_t, std::less<>> ids;  // original spelling -> id
  std::string unk_token;
};

Result<WordPieceVocab> read_wordpiece_vocab(std::string_view json, int vocab_size) {
  RAGD_ASSIGN_OR_RETURN(Vocab raw, read_vocab(json, vocab_size, "WordPiece"));
  WordPieceVocab v;
  v.unk_token = raw.unk_token.empty() ? "[UNK]" : raw.unk_token;
  v.types = std::move(raw.types);
  v.tokens.resize(raw.tokens.size());
  for (size_t id = 0; id < raw.tokens.size(); ++id) {
    const std::string& t = raw.tokens[id];
    if (v.types[id] != kUnused) v.ids.emplace(t, static_cast<int32_t>(id));
    if (v.types[id] == kUnused || v.types[id] == kControl) {
      v.tokens[id] = t;
    } else if (t.starts_with("##")) {
      v.tokens[id] = t.substr(2);
    } else {
      v.tokens[id] = "\xE2\x96\x81" + t;  // U+2581
    }
  }
  if (!v.ids.contains(v.unk_token))
    return Status::InvalidArgument(fmt::format("tokenizer.json: model.unk_token '{}' is not in the vocabulary", v.unk_token));
  return v;
}

}  // namespace

Status write_bert_gguf(const BertConfig& cfg, const WeightStore& weights, std::string_view tokenizer_json,
                       std::string_view pooling, std::string_view name, const std::string& out_path, GgufType type,
                       GgufStats* stats) {
  RAGD_RETURN_IF_ERROR(cfg.validate());
  if (cfg.model_type != "bert")
    return Status::InvalidArgument(fmt::format(
        "config: model_type '{}': only BERT encoders export to GGUF (XLM-RoBERTa's positions differ)", cfg.model_type));
  if (cfg.hidden_act != "gelu")
    return Status::InvalidArgument(
        fmt::format("config: hidden_act '{}': llama.cpp's bert uses the erf GELU ('gelu')", cfg.hidden_act));
  uint32_t pooling_type = 0;  // llama_pooling_type: NONE 0, MEAN 1, CLS 2, LAST 3, RANK 4
  if (cfg.is_classifier()) {
    pooling_type = 4;
  } else if (pooling == "mean") {
    pooling_type = 1;
  } else if (pooling == "cls") {
    pooling_type = 2;
  } else if (pooling == "lasttoken") {
    pooling_type = 3;
  } else if (!pooling.empty()) {
    return Status::InvalidArgument(fmt::format("pooling '{}' is not one of cls, mean, lasttoken", pooling));
  }
  // Tensor names with or without the "bert." prefix, as the loader accepts them.
  const std::string pre = weights.contains("bert.embeddings.word_embeddings.weight") ? "bert." : "";
  const int64_t h = cfg.hidden_size, im = cfg.intermediate_size;
  std::vector<Planned> t;
  auto add = [&](std::string gg, const std::string& hf, std::vector<int64_t> shape, bool prefixed = true) {
    return plan_tensor(weights, type, std::move(gg), (prefixed ? pre : std::string()) + hf, std::move(shape), &t);
  };
  RAGD_RETURN_IF_ERROR(add("token_embd.weight", "embeddings.word_embeddings.weight", {cfg.vocab_size, h}));
  RAGD_RETURN_IF_ERROR(add("token_types.weight", "embeddings.token_type_embeddings.weight", {cfg.type_vocab_size, h}));
  t.back().type = GgmlType::kF32;  // llama.cpp adds a row of it to f32 activations: ggml has no f32 + f16 add
  RAGD_RETURN_IF_ERROR(add("position_embd.weight", "embeddings.position_embeddings.weight", {cfg.max_position_embeddings, h}));
  RAGD_RETURN_IF_ERROR(add("token_embd_norm.weight", "embeddings.LayerNorm.weight", {h}));
  RAGD_RETURN_IF_ERROR(add("token_embd_norm.bias", "embeddings.LayerNorm.bias", {h}));
  for (int l = 0; l < cfg.num_hidden_layers; ++l) {
    const std::string hf = fmt::format("encoder.layer.{}.", l), gg = fmt::format("blk.{}.", l);
    const std::pair<const char*, const char*> qkv[] = {
        {"attn_q", "attention.self.query"}, {"attn_k", "attention.self.key"}, {"attn_v", "attention.self.value"}};
    for (const auto& [g, s] : qkv) {
      RAGD_RETURN_IF_ERROR(add(gg + g + ".weight", hf + s + ".weight", {h, h}));
      RAGD_RETURN_IF_ERROR(add(gg + g + ".bias", hf + s + ".bias", {h}));
    }
    RAGD_RETURN_IF_ERROR(add(gg + "attn_output.weight", hf + "attention.output.dense.weight", {h, h}));
    RAGD_RETURN_IF_ERROR(add(gg + "attn_output.bias", hf + "attention.output.dense.bias", {h}));
    RAGD_RETURN_IF_ERROR(add(gg + "attn_output_norm.weight", hf + "attention.output.LayerNorm.weight", {h}));
    RAGD_RETURN_IF_ERROR(add(gg + "attn_output_norm.bias", hf + "attention.output.LayerNorm.bias", {h}));
    RAGD_RETURN_IF_ERROR(add(gg + "ffn_up.weight", hf + "intermediate.dense.weight", {im, h}));
    RAGD_RETURN_IF_ERROR(add(gg + "ffn_up.bias", hf + "intermediate.dense.bias", {im}));
    RAGD_RETURN_IF_ERROR(add(gg + "ffn_down.weight", hf + "output.dense.weight", {h, im}));
    RAGD_RETURN_IF_ERROR(add(gg + "ffn_down.bias", hf + "output.dense.bias", {h}));
    RAGD_RETURN_IF_ERROR(add(gg + "layer_output_norm.weight", hf + "output.LayerNorm.weight", {h}));
    RAGD_RETURN_IF_ERROR(add(gg + "layer_output_norm.bias", hf + "output.LayerNorm.bias", {h}));
  }
  if (cfg.is_classifier()) {
    RAGD_RETURN_IF_ERROR(add("cls.weight", "pooler.dense.weight", {h, h}));
    RAGD_RETURN_IF_ERROR(add("cls.bias", "pooler.dense.bias", {h}));
    RAGD_RETURN_IF_ERROR(add("cls.output.weight", "classifier.weight", {cfg.num_labels, h}, false));
    RAGD_RETURN_IF_ERROR(add("cls.output.bias", "classifier.bias", {cfg.num_labels}, false));
  }
  RAGD_ASSIGN_OR_RETURN(WordPieceVocab vocab, read_wordpiece_vocab(tokenizer_json, cfg.vocab_size));

  KvWriter kv;
  const std::string a = "bert.";
  kv.str("general.architecture", "bert");
  kv.str("general.name", name);
  kv.u32("general.file_type", file_type(type));
  if (type == GgufType::kQ8_0) kv.u32("general.quantization_version", 2);
  kv.u32(a + "context_length", static_cast<uint32_t>(cfg.max_position_embeddings));
  kv.u32(a + "embedding_length", static_cast<uint32_t>(h));
  kv.u32(a + "block_count", static_cast<uint32_t>(cfg.num_hidden_layers));
  kv.u32(a + "feed_forward_length", static_cast<uint32_t>(im));
  kv.u32(a + "attention.head_count", static_cast<uint32_t>(cfg.num_attention_heads));
  kv.f32(a + "attention.layer_norm_epsilon", cfg.layer_norm_eps);
  kv.boolean(a + "attention.causal", false);
  if (pooling_type != 0) kv.u32(a + "pooling_type", pooling_type);
  kv.str("tokenizer.ggml.model", "bert");
  kv.str("tokenizer.ggml.pre", "default");
  kv.str_array("tokenizer.ggml.tokens", vocab.tokens);
  kv.i32_array("tokenizer.ggml.token_type", vocab.types);
  kv.u32("tokenizer.ggml.token_type_count", static_cast<uint32_t>(cfg.type_vocab_size));
  auto special = [&](const char* key, std::string_view tok) {
    if (auto it = vocab.ids.find(tok); it != vocab.ids.end()) kv.u32(key, static_cast<uint32_t>(it->second));
  };
  special("tokenizer.ggml.unknown_token_id", vocab.unk_token);
  special("tokenizer.ggml.bos_token_id", "[CLS]");
  special("tokenizer.ggml.cls_token_id", "[CLS]");
  special("tokenizer.ggml.seperator_token_id", "[SEP]");  // llama.cpp's spelling of the key
  special("tokenizer.ggml.padding_token_id", "[PAD]");
  special("tokenizer.ggml.mask_token_id", "[MASK]");

  uint64_t bytes = 0;
  RAGD_RETURN_IF_ERROR(write_file(kv, t, out_path, &bytes));
  if (stats) {
    stats->architecture = "bert";
    stats->tensors = static_cast<int64_t>(t.size());
    stats->kv_pairs = kv.count();
    stats->bytes = bytes;
  }
  return Status::OK();
}

}  // namespace ragd::tools
