#include "ragd/engine/presets.h"

#include <string>

namespace ragd::engine {

std::vector<std::string_view> preset_names() { return {"tiny", "small", "qwen2-0.5b", "llama3-8b"}; }

Result<ModelConfig> preset_config(std::string_view name) {
  ModelConfig c;
  c.architecture = Architecture::kLlama;
  c.rms_norm_eps = 1e-5f;
  if (name == "tiny") {
    c.hidden_size = 64, c.num_hidden_layers = 2, c.num_attention_heads = 4, c.num_key_value_heads = 2;
    c.intermediate_size = 176, c.vocab_size = 512, c.max_position_embeddings = 2048;
  } else if (name == "small") {
    c.hidden_size = 512, c.num_hidden_layers = 8, c.num_attention_heads = 8, c.num_key_value_heads = 4;
    c.intermediate_size = 1408, c.vocab_size = 32000, c.max_position_embeddings = 4096;
  } else if (name == "qwen2-0.5b") {
    c.architecture = Architecture::kQwen2;
    c.hidden_size = 896, c.num_hidden_layers = 24, c.num_attention_heads = 14, c.num_key_value_heads = 2;
    c.intermediate_size = 4864, c.vocab_size = 151936, c.max_position_embeddings = 32768;
    c.rope_theta = 1000000.0f;
    c.rms_norm_eps = 1e-6f;
    c.tie_word_embeddings = true;
    c.attention_bias = true;
  } else if (name == "llama3-8b") {
    c.hidden_size = 4096, c.num_hidden_layers = 32, c.num_attention_heads = 32, c.num_key_value_heads = 8;
    c.intermediate_size = 14336, c.vocab_size = 128256, c.max_position_embeddings = 131072;
    c.rope_theta = 500000.0f;
    c.rope_scaling = {RopeScaling::Type::kLlama3, 8.0f, 1.0f, 4.0f, 8192};
  } else {
    std::string names;
    for (std::string_view n : preset_names()) names += (names.empty() ? "" : ", ") + std::string(n);
    return Status::InvalidArgument("unknown preset '" + std::string(name) + "' (" + names + ")");
  }
  c.head_dim = c.hidden_size / c.num_attention_heads;
  return c;
}

}  // namespace ragd::engine
