// ModelConfig: the shape and hyper-parameters of a Llama-family model, parsed from a Hugging Face
// config.json (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM).
// Thread-safety: value type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ragd/common/enum_names.h"
#include "ragd/common/hash.h"
#include "ragd/common/status.h"

namespace ragd::engine {

enum class Architecture : uint8_t { kLlama, kMistral, kQwen2 };
// Names: the HF class name (config.json "architectures"); kArchitectureModelTypes: "model_type".
inline constexpr auto kArchitectureNames = make_enum_names<Architecture>(
    "architecture", {{Architecture::kLlama, "LlamaForCausalLM"},
                     {Architecture::kMistral, "MistralForCausalLM"},
                     {Architecture::kQwen2, "Qwen2ForCausalLM"}});
constexpr const auto& ragd_enum_names(Architecture) { return kArchitectureNames; }
static_assert(enum_names_valid(kArchitectureNames));
inline constexpr auto kArchitectureModelTypes = make_enum_names<Architecture>(
    "model_type", {{Architecture::kLlama, "llama"}, {Architecture::kMistral, "mistral"}, {Architecture::kQwen2, "qwen2"}});
static_assert(enum_names_valid(kArchitectureModelTypes));
inline std::string_view architecture_name(Architecture a) { return enum_name(a); }  // e.g. "LlamaForCausalLM"

// RoPE frequency scaling (config.json "rope_scaling"); kNone when absent or null.
struct RopeScaling {
  enum class Type : uint8_t { kNone, kLinear, kLlama3 };
  Type type = Type::kNone;
  float factor = 1.0f;                 // linear and llama3
  float low_freq_factor = 1.0f;        // llama3
  float high_freq_factor = 4.0f;       // llama3
  int original_max_position_embeddings = 8192;  // llama3
};

struct ModelConfig {
  Architecture architecture = Architecture::kLlama;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;   // defaults to num_attention_heads when absent
  int head_dim = 0;              // defaults to hidden_size / num_attention_heads when absent
  int vocab_size = 0;
  int max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;   // q/k/v projections carry a bias (Qwen2: always true)
  int sliding_window = 0;        // 0 = none (Mistral may set one; recorded, full attention used)
  int bos_token_id = -1;
  std::vector<int> eos_token_ids;  // config.json eos_token_id: int or list
  std::string torch_dtype = "float32";

  // Parses and validates config.json. Errors name the file and the field:
  //   "config.json: field 'num_attention_heads' must be a positive integer".
  static Result<ModelConfig> from_json_file(const std::string& path);
  static Result<ModelConfig> from_json(std::string_view json, std::string_view source_name);
  std::string to_json() const;  // HF-compatible config.json text

  // Checks cross-field consistency (heads divide, head_dim even, ...).
  Status validate() const;

  int q_dim() const { return num_attention_heads * head_dim; }
  int kv_dim() const { return num_key_value_heads * head_dim; }
  // Hash of architecture + every shape/hyper-parameter that changes KV. Part of the model
  // fingerprint (with the weight checksum) used in kvstore keys.
  Hash128 shape_hash() const;
};

}  // namespace ragd::engine
