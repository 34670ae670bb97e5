// Shared by the in-process benchmarks that serve a random-weight model from a directory: a
// Llama-shaped model (hidden H, L layers, H/32 heads of 32, H/64 KV heads, intermediate 3H, vocab
// 512) with a byte-level BPE tokenizer trained on the built-in text, written as config.json,
// tokenizer.json and model.safetensors. Thread-safety: pure function (writes its directory).
#pragma once

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>

#include "ragd/common/text_file.h"
#include "ragd/engine/model_config.h"
#include "ragd/engine/random_weights.h"
#include "ragd/engine/safetensors.h"
#include "ragd/engine/tokenizer.h"

namespace ragd::bench {

// False when the tokenizer cannot be trained or a file cannot be written.
inline bool make_random_model_dir(const std::string& dir, int hidden, int layers) {
  namespace fs = std::filesystem;
  engine::BpeTrainOptions topts;
  topts.vocab_size = 480;
  topts.pad_to = 512;
  auto tok_json = engine::train_byte_level_bpe(engine::builtin_training_text(), topts);
  if (!tok_json.ok()) return false;
  auto tok = engine::Tokenizer::from_json(*tok_json, "tokenizer.json");
  if (!tok.ok()) return false;
  engine::ModelConfig c;
  c.architecture = engine::Architecture::kLlama;
  c.hidden_size = hidden;
  c.intermediate_size = 3 * hidden;
  c.num_hidden_layers = layers;
  c.num_attention_heads = hidden / 32;
  c.num_key_value_heads = std::max(1, hidden / 64);
  c.head_dim = 32;
  c.vocab_size = 512;
  c.max_position_embeddings = 4096;
  c.rms_norm_eps = 1e-5f;
  c.bos_token_id = (*tok)->bos_id().value_or(-1);
  const std::map<std::string, engine::OwnedTensor> t = engine::random_weight_tensors(c, 99);
  fs::create_directories(dir);
  if (!write_text_file((fs::path(dir) / "config.json").string(), c.to_json()).ok()) return false;
  if (!write_text_file((fs::path(dir) / "tokenizer.json").string(), *tok_json).ok()) return false;
  return engine::write_safetensors((fs::path(dir) / "model.safetensors").string(), t).ok();
}

}  // namespace ragd::bench
