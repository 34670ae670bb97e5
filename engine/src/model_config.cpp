// ModelConfig parsing (simdjson DOM), validation, serialisation and shape hashing.
#include "ragd/engine/model_config.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <simdjson.h>

namespace ragd::engine {

namespace {

std::string_view model_type_name(Architecture a) { return enum_name_in(kArchitectureModelTypes, a); }
std::optional<Architecture> arch_from_class(std::string_view s) { return enum_from_name<Architecture>(s); }
std::optional<Architecture> arch_from_model_type(std::string_view s) { return enum_from_name_in(kArchitectureModelTypes, s); }

// Field readers over one JSON object; every error names the source and the field.
class Fields {
 public:
  Fields(simdjson::dom::object obj, std::string_view src, std::string prefix = "")
      : obj_(obj), src_(src), prefix_(std::move(prefix)) {}

  // nullopt when the field is absent or JSON null.
  std::optional<simdjson::dom::element> find(std::string_view key) const {
    simdjson::dom::element e;
    if (obj_[key].get(e) != simdjson::SUCCESS) return std::nullopt;
    if (e.is_null()) return std::nullopt;
    return e;
  }
  Status error(std::string_view key, std::string_view what) const {
    return Status::InvalidArgument(fmt::format("{}: field '{}{}' {}", src_, prefix_, key, what));
  }

  Status get_int(std::string_view key, int* out, bool required, int64_t min_value) const {
    auto e = find(key);
    if (!e) return required ? error(key, "is missing") : Status::OK();
    int64_t v = 0;
    if (e->is_int64()) {
      v = e->get_int64().value_unsafe();
    } else if (e->is_double()) {
      double d = e->get_double().value_unsafe();
      if (d != std::floor(d) || std::fabs(d) > 2e9) return error(key, "must be an integer");
      v = static_cast<int64_t>(d);
    } else {
      return error(key, "must be an integer");
    }
    if (v < min_value || v > INT32_MAX)
      return error(key, fmt::format("must be an integer >= {} (got {})", min_value, v));
    *out = static_cast<int>(v);
    return Status::OK();
  }

  Status get_float(std::string_view key, float* out, bool positive) const {
    auto e = find(key);
    if (!e) return Status::OK();
    double d = 0;
    if (e->is_int64()) d = static_cast<double>(e->get_int64().value_unsafe());
    else if (e->is_uint64()) d = static_cast<double>(e->get_uint64().value_unsafe());
    else if (e->is_double()) d = e->get_double().value_unsafe();
    else return error(key, "must be a number");
    if (!std::isfinite(d) || (positive && d <= 0)) return error(key, fmt::format("must be a positive number (got {})", d));
    *out = static_cast<float>(d);
    return Status::OK();
  }

  Status get_bool(std::string_view key, bool* out) const {
    auto e = find(key);
    if (!e) return Status::OK();
    if (!e->is_bool()) return error(key, "must be true or false");
    *out = e->get_bool().value_unsafe();
    return Status::OK();
  }

  Status get_string(std::string_view key, std::string* out) const {
    auto e = find(key);
    if (!e) return Status::OK();
    if (!e->is_string()) return error(key, "must be a string");
    *out = std::string(e->get_string().value_unsafe());
    return Status::OK();
  }

 private:
  simdjson::dom::object obj_;
  std::string_view src_;
  std::string prefix_;
};

Status parse_rope_scaling(const Fields& f, RopeScaling* rs) {
  auto e = f.find("rope_scaling");
  if (!e) return Status::OK();
  if (!e->is_object()) return f.error("rope_scaling", "must be an object or null");
  Fields r(e->get_object().value_unsafe(), "", "");
  std::string type;
  if (!r.get_string("rope_type", &type).ok()) return f.error("rope_scaling.rope_type", "must be a string");
  if (type.empty()) {
    if (!r.get_string("type", &type).ok()) return f.error("rope_scaling.type", "must be a string");
  }
  if (type.empty()) return f.error("rope_scaling.type", "is missing");
  auto sub = [&](std::string_view key, float* out) -> Status {
    if (!r.get_float(key, out, true).ok()) return f.error(fmt::format("rope_scaling.{}", key), "must be a positive number");
    return Status::OK();
  };
  if (type == "default") {
    rs->type = RopeScaling::Type::kNone;
    return Status::OK();
  }
  if (type == "linear") {
    rs->type = RopeScaling::Type::kLinear;
    if (!r.find("factor")) return f.error("rope_scaling.factor", "is missing");
    return sub("factor", &rs->factor);
  }
  if (type == "llama3") {
    rs->type = RopeScaling::Type::kLlama3;
    for (const char* k : {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
      if (!r.find(k)) return f.error(fmt::format("rope_scaling.{}", k), "is missing");
    RAGD_RETURN_IF_ERROR(sub("factor", &rs->factor));
    RAGD_RETURN_IF_ERROR(sub("low_freq_factor", &rs->low_freq_factor));
    RAGD_RETURN_IF_ERROR(sub("high_freq_factor", &rs->high_freq_factor));
    if (!r.get_int("original_max_position_embeddings", &rs->original_max_position_embeddings, true, 1).ok())
      return f.error("rope_scaling.original_max_position_embeddings", "must be a positive integer");
    if (rs->high_freq_factor <= rs->low_freq_factor)
      return f.error("rope_scaling.high_freq_factor", "must be greater than low_freq_factor");
    return Status::OK();
  }
  return f.error("rope_scaling.type", fmt::format("'{}' is not supported (linear, llama3)", type));
}

}  // namespace

Result<ModelConfig> ModelConfig::from_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(fmt::format("{}: cannot open config file", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return from_json(ss.str(), path);
}

Result<ModelConfig> ModelConfig::from_json(std::string_view json, std::string_view src) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc); err)
    return Status::InvalidArgument(fmt::format("{}: invalid JSON: {}", src, simdjson::error_message(err)));
  if (!doc.is_object()) return Status::InvalidArgument(fmt::format("{}: top level must be a JSON object", src));
  Fields f(doc.get_object().value_unsafe(), src);
  ModelConfig c;

  // Architecture: "architectures": ["LlamaForCausalLM"] wins; else "model_type".
  std::optional<Architecture> arch;
  if (auto a = f.find("architectures")) {
    if (!a->is_array()) return f.error("architectures", "must be a list of strings");
    std::string names;
    simdjson::dom::array arr = a->get_array().value_unsafe();
    for (auto item : arr) {
      if (!item.is_string()) return f.error("architectures", "must be a list of strings");
      std::string_view s = item.get_string().value_unsafe();
      if (!names.empty()) names += ", ";
      names += s;
      if (!arch) arch = arch_from_class(s);
    }
    if (!arch)
      return Status::InvalidArgument(fmt::format(
          "{}: field 'architectures': unsupported architecture [{}] (supported: LlamaForCausalLM, "
          "MistralForCausalLM, Qwen2ForCausalLM)", src, names));
  }
  if (!arch) {
    std::string mt;
    RAGD_RETURN_IF_ERROR(f.get_string("model_type", &mt));
    if (mt.empty()) return f.error("architectures", "is missing (and no 'model_type' either)");
    arch = arch_from_model_type(mt);
    if (!arch)
      return Status::InvalidArgument(fmt::format(
          "{}: field 'model_type': unsupported architecture '{}' (supported: llama, mistral, qwen2)", src, mt));
  }
  c.architecture = *arch;

  RAGD_RETURN_IF_ERROR(f.get_int("hidden_size", &c.hidden_size, true, 1));
  RAGD_RETURN_IF_ERROR(f.get_int("intermediate_size", &c.intermediate_size, true, 1));
  RAGD_RETURN_IF_ERROR(f.get_int("num_hidden_layers", &c.num_hidden_layers, true, 1));
  RAGD_RETURN_IF_ERROR(f.get_int("num_attention_heads", &c.num_attention_heads, true, 1));
  RAGD_RETURN_IF_ERROR(f.get_int("vocab_size", &c.vocab_size, true, 1));
  c.num_key_value_heads = c.num_attention_heads;
  RAGD_RETURN_IF_ERROR(f.get_int("num_key_value_heads", &c.num_key_value_heads, false, 1));
  if (c.hidden_size % c.num_attention_heads != 0 && !f.find("head_dim"))
    return f.error("num_attention_heads",
                   fmt::format("({}) must divide hidden_size ({}) when head_dim is absent",
                               c.num_attention_heads, c.hidden_size));
  c.head_dim = c.hidden_size / c.num_attention_heads;
  RAGD_RETURN_IF_ERROR(f.get_int("head_dim", &c.head_dim, false, 1));
  c.max_position_embeddings = 2048;
  RAGD_RETURN_IF_ERROR(f.get_int("max_position_embeddings", &c.max_position_embeddings, false, 1));
  RAGD_RETURN_IF_ERROR(f.get_float("rms_norm_eps", &c.rms_norm_eps, true));
  RAGD_RETURN_IF_ERROR(f.get_float("rope_theta", &c.rope_theta, true));
  RAGD_RETURN_IF_ERROR(parse_rope_scaling(f, &c.rope_scaling));
  RAGD_RETURN_IF_ERROR(f.get_bool("tie_word_embeddings", &c.tie_word_embeddings));
  c.attention_bias = c.architecture == Architecture::kQwen2;
  if (c.architecture != Architecture::kQwen2) RAGD_RETURN_IF_ERROR(f.get_bool("attention_bias", &c.attention_bias));
  // Qwen2 records a window but only uses it with use_sliding_window = true.
  bool use_window = c.architecture != Architecture::kQwen2;
  RAGD_RETURN_IF_ERROR(f.get_bool("use_sliding_window", &use_window));
  if (use_window) RAGD_RETURN_IF_ERROR(f.get_int("sliding_window", &c.sliding_window, false, 0));
  RAGD_RETURN_IF_ERROR(f.get_int("bos_token_id", &c.bos_token_id, false, 0));
  if (auto e = f.find("eos_token_id")) {
    if (e->is_array()) {
      simdjson::dom::array arr = e->get_array().value_unsafe();
      for (auto item : arr) {
        if (!item.is_int64() || item.get_int64().value_unsafe() < 0 || item.get_int64().value_unsafe() > INT32_MAX)
          return f.error("eos_token_id", "must be a non-negative integer or a list of them");
        c.eos_token_ids.push_back(static_cast<int>(item.get_int64().value_unsafe()));
      }
    } else {
      int v = 0;
      if (!f.get_int("eos_token_id", &v, true, 0).ok())
        return f.error("eos_token_id", "must be a non-negative integer or a list of them");
      c.eos_token_ids.push_back(v);
    }
  }
  RAGD_RETURN_IF_ERROR(f.get_string("torch_dtype", &c.torch_dtype));
  if (c.torch_dtype != "float32" && c.torch_dtype != "float16" && c.torch_dtype != "bfloat16")
    return f.error("torch_dtype", fmt::format("'{}' is not one of float32, float16, bfloat16", c.torch_dtype));

  Status st = c.validate();
  if (!st.ok()) return st.with_context(src);
  return c;
}

Status ModelConfig::validate() const {
  auto bad = [](std::string_view field, std::string msg) {
    return Status::InvalidArgument(fmt::format("field '{}' {}", field, msg));
  };
  if (hidden_size <= 0) return bad("hidden_size", "must be a positive integer");
  if (intermediate_size <= 0) return bad("intermediate_size", "must be a positive integer");
  if (num_hidden_layers <= 0) return bad("num_hidden_layers", "must be a positive integer");
  if (num_attention_heads <= 0) return bad("num_attention_heads", "must be a positive integer");
  if (num_key_value_heads <= 0) return bad("num_key_value_heads", "must be a positive integer");
  if (vocab_size <= 0) return bad("vocab_size", "must be a positive integer");
  if (max_position_embeddings <= 0) return bad("max_position_embeddings", "must be a positive integer");
  if (num_attention_heads % num_key_value_heads != 0)
    return bad("num_key_value_heads", fmt::format("({}) must divide num_attention_heads ({})", num_key_value_heads,
                                                  num_attention_heads));
  if (head_dim <= 0 || head_dim % 2 != 0) return bad("head_dim", fmt::format("({}) must be a positive even number", head_dim));
  // Derived sizes (q_dim(), kv_dim(), matrix element counts) are computed in int / int64: each must
  // fit, or every buffer sized from them would wrap.
  constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();
  auto product = [&](std::string_view what, int64_t a, int64_t b, int64_t limit) -> Status {
    if (a * b > limit) return bad(what, fmt::format("({} x {}) is too large", a, b));
    return Status::OK();
  };
  RAGD_RETURN_IF_ERROR(product("(num_attention_heads + 2 x num_key_value_heads) x head_dim",
                               int64_t{num_attention_heads} + 2 * int64_t{num_key_value_heads}, head_dim, kIntMax));
  RAGD_RETURN_IF_ERROR(product("2 x intermediate_size", 2, intermediate_size, kIntMax));
  RAGD_RETURN_IF_ERROR(product("hidden_size x intermediate_size", hidden_size, intermediate_size, int64_t{1} << 40));
  RAGD_RETURN_IF_ERROR(product("vocab_size x hidden_size", vocab_size, hidden_size, int64_t{1} << 40));
  RAGD_RETURN_IF_ERROR(product("num_attention_heads x head_dim x hidden_size",
                               int64_t{num_attention_heads} * head_dim, hidden_size, int64_t{1} << 40));
  if (!(rms_norm_eps > 0)) return bad("rms_norm_eps", "must be positive");
  if (!(rope_theta > 0)) return bad("rope_theta", "must be positive");
  if (sliding_window < 0) return bad("sliding_window", "must be >= 0");
  if (bos_token_id >= vocab_size) return bad("bos_token_id", fmt::format("({}) must be < vocab_size ({})", bos_token_id, vocab_size));
  for (int e : eos_token_ids)
    if (e < 0 || e >= vocab_size) return bad("eos_token_id", fmt::format("({}) must be in [0, vocab_size={})", e, vocab_size));
  if (rope_scaling.type != RopeScaling::Type::kNone && !(rope_scaling.factor > 0))
    return bad("rope_scaling.factor", "must be positive");
  return Status::OK();
}

std::string ModelConfig::to_json() const {
  std::string s = "{\n";
  auto add = [&](std::string_view key, const std::string& value) { s += fmt::format("  \"{}\": {},\n", key, value); };
  add("architectures", fmt::format("[\"{}\"]", architecture_name(architecture)));
  add("model_type", fmt::format("\"{}\"", model_type_name(architecture)));
  add("hidden_size", std::to_string(hidden_size));
  add("intermediate_size", std::to_string(intermediate_size));
  add("num_hidden_layers", std::to_string(num_hidden_layers));
  add("num_attention_heads", std::to_string(num_attention_heads));
  add("num_key_value_heads", std::to_string(num_key_value_heads));
  add("head_dim", std::to_string(head_dim));
  add("vocab_size", std::to_string(vocab_size));
  add("max_position_embeddings", std::to_string(max_position_embeddings));
  add("rms_norm_eps", fmt::format("{}", rms_norm_eps));
  add("rope_theta", fmt::format("{:.1f}", rope_theta));
  switch (rope_scaling.type) {
    case RopeScaling::Type::kNone: add("rope_scaling", "null"); break;
    case RopeScaling::Type::kLinear:
      add("rope_scaling", fmt::format("{{\"type\": \"linear\", \"rope_type\": \"linear\", \"factor\": {}}}", rope_scaling.factor));
      break;
    case RopeScaling::Type::kLlama3:
      add("rope_scaling",
          fmt::format("{{\"rope_type\": \"llama3\", \"factor\": {}, \"low_freq_factor\": {}, \"high_freq_factor\": {}, "
                      "\"original_max_position_embeddings\": {}}}",
                      rope_scaling.factor, rope_scaling.low_freq_factor, rope_scaling.high_freq_factor,
                      rope_scaling.original_max_position_embeddings));
      break;
  }
  add("tie_word_embeddings", tie_word_embeddings ? "true" : "false");
  if (architecture != Architecture::kQwen2) add("attention_bias", attention_bias ? "true" : "false");
  if (architecture == Architecture::kQwen2) add("use_sliding_window", sliding_window > 0 ? "true" : "false");
  add("sliding_window", sliding_window > 0 ? std::to_string(sliding_window) : "null");
  add("hidden_act", "\"silu\"");
  if (bos_token_id >= 0) add("bos_token_id", std::to_string(bos_token_id));
  if (eos_token_ids.size() == 1) {
    add("eos_token_id", std::to_string(eos_token_ids[0]));
  } else if (!eos_token_ids.empty()) {
    std::string l = "[";
    for (size_t i = 0; i < eos_token_ids.size(); ++i) l += (i ? ", " : "") + std::to_string(eos_token_ids[i]);
    add("eos_token_id", l + "]");
  }
  s += fmt::format("  \"torch_dtype\": \"{}\"\n}}\n", torch_dtype);
  return s;
}

Hash128 ModelConfig::shape_hash() const {
  Hasher128 h;
  auto f32 = [&](float v) { h.u64(std::bit_cast<uint32_t>(v)); };
  h.str("ragd.model_config.v1").u64(static_cast<uint64_t>(architecture));
  for (int v : {hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim,
                vocab_size, sliding_window})
    h.u64(static_cast<uint64_t>(static_cast<int64_t>(v)));
  f32(rms_norm_eps);
  f32(rope_theta);
  h.u64(static_cast<uint64_t>(rope_scaling.type));
  if (rope_scaling.type != RopeScaling::Type::kNone) {
    f32(rope_scaling.factor);
    if (rope_scaling.type == RopeScaling::Type::kLlama3) {
      f32(rope_scaling.low_freq_factor);
      f32(rope_scaling.high_freq_factor);
      h.u64(static_cast<uint64_t>(rope_scaling.original_max_position_embeddings));
    }
  }
  h.u64(tie_word_embeddings).u64(attention_bias);
  return h.digest();
}

}  // namespace ragd::engine
