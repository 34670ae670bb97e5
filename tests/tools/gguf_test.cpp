// convert-gguf (tools/ragctl/gguf_writer.h) on tiny random models written with ragd's own writers
// (config.json, model.safetensors, a trained byte-level BPE tokenizer.json), read back by a small
// GGUF v3 reader written here from the format description, independent of the writer:
//   - header, every hparam / tokenizer key and value, tensor names, shapes and types, alignment;
//   - f32 data round-trips bit for bit; Q/K rows carry llama.cpp's RoPE permutation, checked
//     against a naive per-head re-ordering (Llama) and absent for Qwen2;
//   - f16 / bf16 within half an ulp; q8_0 blocks dequantize within amax/254 (plus the f16
//     rounding of the block scale);
//   - malformed inputs fail with a Status naming the problem and leave no output file.
#include "gguf_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <variant>

#include <unistd.h>
#include <vector>

#include "ragd/engine/bert_model.h"
#include "ragd/engine/encoder_dir.h"
#include "ragd/engine/model_config.h"
#include "ragd/engine/random_weights.h"
#include "ragd/engine/safetensors.h"
#include "ragd/engine/tokenizer.h"

namespace ragd::tools {
namespace {

using namespace ragd::engine;
namespace fs = std::filesystem;

// ---- a minimal GGUF reader ------------------------------------------------------------------

using GgufValue = std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<std::string>,
                               std::vector<int64_t>>;

struct GgufTensor {
  std::vector<uint64_t> dims;  // ne[0] first (row length)
  uint32_t type = 0;
  uint64_t offset = 0;
};

struct GgufFile {
  uint32_t version = 0;
  std::map<std::string, GgufValue> kv;
  std::vector<std::string> order;  // tensor names in file order
  std::map<std::string, GgufTensor> tensors;
  uint64_t data_start = 0;
  std::vector<uint8_t> bytes;

  const uint8_t* data(const std::string& name) const { return bytes.data() + data_start + tensors.at(name).offset; }
  uint64_t u(const std::string& key) const { return std::get<uint64_t>(kv.at(key)); }
  double f(const std::string& key) const { return std::get<double>(kv.at(key)); }
  const std::string& s(const std::string& key) const { return std::get<std::string>(kv.at(key)); }
};

class Reader {
 public:
  explicit Reader(const std::vector<uint8_t>& b) : b_(b) {}
  template <typename T>
  T get() {
    if (pos_ + sizeof(T) > b_.size()) throw std::runtime_error("truncated");
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str() {
    const auto n = get<uint64_t>();
    if (pos_ + n > b_.size()) throw std::runtime_error("truncated string");
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  // Scalar of gguf_type t, widened.
  GgufValue scalar(uint32_t t) {
    switch (t) {
      case 0: return uint64_t{get<uint8_t>()};
      case 1: return int64_t{get<int8_t>()};
      case 2: return uint64_t{get<uint16_t>()};
      case 3: return int64_t{get<int16_t>()};
      case 4: return uint64_t{get<uint32_t>()};
      case 5: return int64_t{get<int32_t>()};
      case 6: return double{get<float>()};
      case 7: return get<uint8_t>() != 0;
      case 8: return str();
      case 10: return get<uint64_t>();
      case 11: return get<int64_t>();
      case 12: return get<double>();
    }
    throw std::runtime_error("bad value type " + std::to_string(t));
  }
  GgufValue value(uint32_t t) {
    if (t != 9) return scalar(t);
    const auto et = get<uint32_t>();
    const auto n = get<uint64_t>();
    if (et == 8) {
      std::vector<std::string> v;
      for (uint64_t i = 0; i < n; ++i) v.push_back(str());
      return v;
    }
    std::vector<int64_t> v;
    for (uint64_t i = 0; i < n; ++i) {
      GgufValue e = scalar(et);
      v.push_back(std::holds_alternative<int64_t>(e) ? std::get<int64_t>(e) : static_cast<int64_t>(std::get<uint64_t>(e)));
    }
    return v;
  }
  size_t pos() const { return pos_; }

 private:
  const std::vector<uint8_t>& b_;
  size_t pos_ = 0;
};

GgufFile read_gguf(const std::string& path) {
  GgufFile g;
  std::ifstream in(path, std::ios::binary);
  g.bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  Reader r(g.bytes);
  EXPECT_EQ(r.get<uint32_t>(), 0x46554747u) << "magic";
  g.version = r.get<uint32_t>();
  const auto n_tensors = r.get<uint64_t>();
  const auto n_kv = r.get<uint64_t>();
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = r.str();
    const auto t = r.get<uint32_t>();
    EXPECT_FALSE(g.kv.count(key)) << "duplicate key " << key;
    g.kv[key] = r.value(t);
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    std::string name = r.str();
    GgufTensor t;
    const auto nd = r.get<uint32_t>();
    for (uint32_t d = 0; d < nd; ++d) t.dims.push_back(r.get<uint64_t>());
    t.type = r.get<uint32_t>();
    t.offset = r.get<uint64_t>();
    g.order.push_back(name);
    g.tensors[name] = t;
  }
  const uint64_t align = g.kv.count("general.alignment") ? g.u("general.alignment") : 32;
  g.data_start = (r.pos() + align - 1) / align * align;
  return g;
}

// ---- independent decoders --------------------------------------------------------------------

float half_to_float(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  double v;
  if (exp == 0) v = std::ldexp(static_cast<double>(man), -24);
  else if (exp == 31) v = man ? NAN : INFINITY;
  else v = std::ldexp(1.0 + man / 1024.0, exp - 15);
  return static_cast<float>(sign ? -v : v);
}
float bfloat_to_float(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t load16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// ---- fixtures --------------------------------------------------------------------------------

class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("ragd_gguf_" + std::to_string(rd()) + "_" + std::to_string(::getpid()));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

ModelConfig tiny_config(bool qwen2) {
  ModelConfig c;
  c.architecture = qwen2 ? Architecture::kQwen2 : Architecture::kLlama;
  c.hidden_size = 64;
  c.intermediate_size = 96;  // a multiple of 32 (q8_0 rows of the down projection)
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.vocab_size = 301;  // odd, padded by reserved tokens
  c.max_position_embeddings = 1024;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = qwen2 ? 1000000.0f : 50000.0f;
  c.attention_bias = qwen2;
  c.tie_word_embeddings = qwen2;
  return c;
}

struct TinyModel {
  ModelConfig cfg;
  std::map<std::string, OwnedTensor> tensors;
};

// Writes config.json, model.safetensors and tokenizer.json into dir; returns what it wrote.
TinyModel write_model(const fs::path& dir, bool qwen2, uint64_t seed = 7) {
  TinyModel m;
  m.cfg = tiny_config(qwen2);
  BpeTrainOptions topts;
  topts.vocab_size = 290;
  topts.pad_to = m.cfg.vocab_size;
  auto tok_json = train_byte_level_bpe(builtin_training_text(), topts);
  EXPECT_TRUE(tok_json.ok()) << tok_json.status().to_string();
  auto tok = Tokenizer::from_json(*tok_json, "tokenizer.json");
  EXPECT_TRUE(tok.ok());
  m.cfg.bos_token_id = (*tok)->bos_id().value_or(-1);
  m.cfg.eos_token_ids = {*(*tok)->token_to_id("<|end_of_text|>")};
  EXPECT_TRUE(m.cfg.validate().ok());
  m.tensors = random_weight_tensors(m.cfg, seed);
  std::ofstream(dir / "config.json") << m.cfg.to_json();
  std::ofstream(dir / "tokenizer.json") << *tok_json;
  EXPECT_TRUE(write_safetensors((dir / "model.safetensors").string(), m.tensors).ok());
  return m;
}

std::vector<float> values(const OwnedTensor& t) {
  EXPECT_EQ(t.dtype, DType::kF32);
  std::vector<float> v(t.bytes.size() / 4);
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

// The HF tensor that each GGUF tensor comes from.
std::map<std::string, std::string> expected_names(const ModelConfig& c) {
  std::map<std::string, std::string> m = {{"token_embd.weight", "model.embed_tokens.weight"},
                                          {"output_norm.weight", "model.norm.weight"}};
  if (!c.tie_word_embeddings) m["output.weight"] = "lm_head.weight";
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".", h = "model.layers." + std::to_string(l) + ".";
    m[b + "attn_norm.weight"] = h + "input_layernorm.weight";
    m[b + "ffn_norm.weight"] = h + "post_attention_layernorm.weight";
    m[b + "attn_q.weight"] = h + "self_attn.q_proj.weight";
    m[b + "attn_k.weight"] = h + "self_attn.k_proj.weight";
    m[b + "attn_v.weight"] = h + "self_attn.v_proj.weight";
    m[b + "attn_output.weight"] = h + "self_attn.o_proj.weight";
    m[b + "ffn_gate.weight"] = h + "mlp.gate_proj.weight";
    m[b + "ffn_up.weight"] = h + "mlp.up_proj.weight";
    m[b + "ffn_down.weight"] = h + "mlp.down_proj.weight";
    if (c.attention_bias) {
      m[b + "attn_q.bias"] = h + "self_attn.q_proj.bias";
      m[b + "attn_k.bias"] = h + "self_attn.k_proj.bias";
      m[b + "attn_v.bias"] = h + "self_attn.v_proj.bias";
    }
  }
  return m;
}

// Expected GGUF row order of a Llama Q or K projection. HF rotates dimension i of a head with
// dimension i + d/2; llama.cpp rotates dimensions 2i and 2i + 1. So llama.cpp's rows of head h are
// HF's rows h*d + 0, h*d + d/2, h*d + 1, h*d + d/2 + 1, ... (naive re-ordering, row by row).
std::vector<float> interleave_halves(const std::vector<float>& hf, int heads, int64_t cols) {
  const int64_t rows = static_cast<int64_t>(hf.size()) / cols, d = rows / heads;
  std::vector<float> out;
  for (int h = 0; h < heads; ++h)
    for (int64_t i = 0; i < d / 2; ++i)
      for (int64_t src : {h * d + i, h * d + d / 2 + i})
        out.insert(out.end(), hf.begin() + src * cols, hf.begin() + (src + 1) * cols);
  return out;
}

bool is_qk(const std::string& name) { return name.find("attn_q.") != std::string::npos || name.find("attn_k.") != std::string::npos; }

// The values llama.cpp should see for GGUF tensor `name` (HF values, permuted for Llama Q/K).
std::vector<float> expected_values(const TinyModel& m, const std::string& name, const std::string& hf) {
  std::vector<float> v = values(m.tensors.at(hf));
  if (m.cfg.architecture != Architecture::kQwen2 && is_qk(name)) {
    const int heads = name.find("attn_q.") != std::string::npos ? m.cfg.num_attention_heads : m.cfg.num_key_value_heads;
    const auto& shape = m.tensors.at(hf).shape;
    v = interleave_halves(v, heads, shape.size() == 2 ? shape[1] : 1);
  }
  return v;
}

GgufFile convert(const fs::path& dir, GgufType type) {
  const std::string out = (dir / ("model-" + std::string(gguf_type_name(type)) + ".gguf")).string();
  GgufStats st;
  Status s = convert_to_gguf(dir.string(), out, type, &st);
  EXPECT_TRUE(s.ok()) << s.to_string();
  GgufFile g = read_gguf(out);
  EXPECT_EQ(st.bytes, g.bytes.size());
  EXPECT_EQ(st.tensors, static_cast<int64_t>(g.tensors.size()));
  EXPECT_EQ(st.kv_pairs, static_cast<int64_t>(g.kv.size()));
  return g;
}

void check_header_and_keys(const GgufFile& g, const TinyModel& m, GgufType type) {
  const ModelConfig& c = m.cfg;
  const std::string arch = c.architecture == Architecture::kQwen2 ? "qwen2" : "llama", a = arch + ".";
  EXPECT_EQ(g.version, 3u);
  EXPECT_EQ(g.s("general.architecture"), arch);
  const std::map<GgufType, uint64_t> ftype = {
      {GgufType::kF32, 0}, {GgufType::kF16, 1}, {GgufType::kQ8_0, 7}, {GgufType::kBF16, 32}};
  EXPECT_EQ(g.u("general.file_type"), ftype.at(type));
  EXPECT_EQ(g.u(a + "context_length"), 1024u);
  EXPECT_EQ(g.u(a + "embedding_length"), 64u);
  EXPECT_EQ(g.u(a + "block_count"), 2u);
  EXPECT_EQ(g.u(a + "feed_forward_length"), 96u);
  EXPECT_EQ(g.u(a + "attention.head_count"), 4u);
  EXPECT_EQ(g.u(a + "attention.head_count_kv"), 2u);
  EXPECT_EQ(g.u(a + "rope.dimension_count"), 16u);
  EXPECT_EQ(g.u(a + "vocab_size"), 301u);
  EXPECT_FLOAT_EQ(static_cast<float>(g.f(a + "attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_FLOAT_EQ(static_cast<float>(g.f(a + "rope.freq_base")), c.rope_theta);
  EXPECT_FALSE(g.kv.count(a + "attention.key_length")) << "head_dim == hidden / heads: no key_length";
  EXPECT_EQ(g.s("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(g.s("tokenizer.ggml.pre"), "default");
  EXPECT_EQ(g.u("tokenizer.ggml.bos_token_id"), static_cast<uint64_t>(c.bos_token_id));
  EXPECT_EQ(g.u("tokenizer.ggml.eos_token_id"), static_cast<uint64_t>(c.eos_token_ids[0]));

  const auto& tokens = std::get<std::vector<std::string>>(g.kv.at("tokenizer.ggml.tokens"));
  const auto& types = std::get<std::vector<int64_t>>(g.kv.at("tokenizer.ggml.token_type"));
  const auto& merges = std::get<std::vector<std::string>>(g.kv.at("tokenizer.ggml.merges"));
  ASSERT_EQ(tokens.size(), 301u);
  ASSERT_EQ(types.size(), 301u);
  EXPECT_EQ(tokens[c.bos_token_id], "<|begin_of_text|>");
  EXPECT_EQ(types[c.bos_token_id], 3) << "special tokens are control tokens";
  EXPECT_EQ(tokens['a'], "a");
  EXPECT_EQ(tokens[32], "\xC4\xA0") << "byte-level: space is U+0120";
  EXPECT_EQ(types['a'], 1);
  EXPECT_EQ(std::set<std::string>(tokens.begin(), tokens.end()).size(), tokens.size()) << "token strings are unique";
  ASSERT_FALSE(merges.empty());
  for (const auto& mg : merges) EXPECT_NE(mg.find(' '), std::string::npos) << mg;
  // Every merge yields a token of the vocabulary.
  const std::set<std::string> vocab(tokens.begin(), tokens.end());
  for (const auto& mg : merges) {
    const size_t sp = mg.find(' ');
    EXPECT_TRUE(vocab.count(mg.substr(0, sp) + mg.substr(sp + 1))) << mg;
  }
}

void check_tensors(const GgufFile& g, const TinyModel& m, GgufType type) {
  const auto names = expected_names(m.cfg);
  ASSERT_EQ(g.tensors.size(), names.size());
  const uint32_t mat_type = type == GgufType::kF32 ? 0 : type == GgufType::kF16 ? 1 : type == GgufType::kBF16 ? 30 : 8;
  uint64_t end = 0;
  for (const std::string& name : g.order) {
    ASSERT_TRUE(names.count(name)) << "unexpected tensor " << name;
    const GgufTensor& t = g.tensors.at(name);
    const OwnedTensor& src = m.tensors.at(names.at(name));
    // ggml dims are the HF shape reversed.
    ASSERT_EQ(t.dims.size(), src.shape.size()) << name;
    for (size_t d = 0; d < t.dims.size(); ++d)
      EXPECT_EQ(t.dims[d], static_cast<uint64_t>(src.shape[src.shape.size() - 1 - d])) << name;
    EXPECT_EQ(t.type, src.shape.size() == 2 ? mat_type : 0u) << name << ": matrices in the target type, 1-D in f32";
    EXPECT_EQ(t.offset % 32, 0u) << name;
    EXPECT_GE(t.offset, end) << name << " overlaps the previous tensor";

    const std::vector<float> want = expected_values(m, name, names.at(name));
    const uint8_t* p = g.data(name);
    uint64_t nbytes = 0;
    switch (t.type) {
      case 0: {
        nbytes = 4 * want.size();
        std::vector<float> got(want.size());
        std::memcpy(got.data(), p, nbytes);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), nbytes)) << name << ": f32 must round-trip exactly";
        break;
      }
      case 1:
      case 30: {
        nbytes = 2 * want.size();
        const double rel = t.type == 1 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);  // half an ulp
        for (size_t i = 0; i < want.size(); ++i) {
          const float got = t.type == 1 ? half_to_float(load16(p + 2 * i)) : bfloat_to_float(load16(p + 2 * i));
          ASSERT_LE(std::fabs(got - want[i]), rel * std::fabs(want[i]) + 1e-7) << name << "[" << i << "]";
        }
        break;
      }
      case 8: {
        ASSERT_EQ(want.size() % 32, 0u);
        nbytes = want.size() / 32 * 34;
        for (size_t b = 0; b < want.size() / 32; ++b) {
          const uint8_t* blk = p + 34 * b;
          const float d = half_to_float(load16(blk));
          float amax = 0;
          for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(want[32 * b + j]));
          ASSERT_GT(amax, 0.0f);
          // round(x / d) is within d/2 = amax/254 of x; storing d as f16 moves q*d by at most
          // 127 * d * 2^-11 = amax/2048.
          const float tol = amax / 254.0f + amax / 2048.0f;
          int qmax = 0;
          for (int j = 0; j < 32; ++j) {
            const auto q = static_cast<int8_t>(blk[2 + j]);
            qmax = std::max(qmax, std::abs(static_cast<int>(q)));
            ASSERT_LE(std::fabs(q * d - want[32 * b + j]), tol) << name << " block " << b << " [" << j << "]";
          }
          ASSERT_EQ(qmax, 127) << name << " block " << b << ": the scale is amax / 127";
        }
        break;
      }
      default: FAIL() << name << ": unexpected type " << t.type;
    }
    end = t.offset + nbytes;
    EXPECT_LE(g.data_start + end, g.bytes.size()) << name << " runs past the end of the file";
  }
}

TEST(GgufTest, LlamaF32KeysTensorsAndExactData) {
  TempDir dir;
  const TinyModel m = write_model(dir.path(), /*qwen2=*/false);
  const GgufFile g = convert(dir.path(), GgufType::kF32);
  check_header_and_keys(g, m, GgufType::kF32);
  check_tensors(g, m, GgufType::kF32);
  EXPECT_FALSE(g.kv.count("general.quantization_version"));
  EXPECT_FALSE(fs::exists(dir.path() / "model-f32.gguf.tmp"));
}

TEST(GgufTest, LlamaQkPermutationIsNotIdentity) {
  // The permutation check above would be vacuous if the rows happened to coincide.
  TempDir dir;
  const TinyModel m = write_model(dir.path(), false);
  const GgufFile g = convert(dir.path(), GgufType::kF32);
  const std::vector<float> hf = values(m.tensors.at("model.layers.1.self_attn.k_proj.weight"));
  EXPECT_NE(0, std::memcmp(g.data("blk.1.attn_k.weight"), hf.data(), 4 * hf.size()));
  // Row 1 of head 0 in GGUF is HF row d/2 = 8.
  EXPECT_EQ(0, std::memcmp(g.data("blk.1.attn_k.weight") + 4 * 64, hf.data() + 8 * 64, 4 * 64));
}

TEST(GgufTest, LlamaF16AndBf16) {
  TempDir dir;
  const TinyModel m = write_model(dir.path(), false);
  for (GgufType t : {GgufType::kF16, GgufType::kBF16}) {
    SCOPED_TRACE(std::string(gguf_type_name(t)));
    const GgufFile g = convert(dir.path(), t);
    check_header_and_keys(g, m, t);
    check_tensors(g, m, t);
  }
}

TEST(GgufTest, LlamaQ8_0BlocksWithinHalfAStep) {
  TempDir dir;
  const TinyModel m = write_model(dir.path(), false);
  const GgufFile g = convert(dir.path(), GgufType::kQ8_0);
  check_header_and_keys(g, m, GgufType::kQ8_0);
  check_tensors(g, m, GgufType::kQ8_0);
  EXPECT_EQ(g.u("general.quantization_version"), 2u);
}

TEST(GgufTest, Qwen2KeepsQkOrderBiasesAndTiedHead) {
  TempDir dir;
  const TinyModel m = write_model(dir.path(), /*qwen2=*/true);
  const GgufFile g = convert(dir.path(), GgufType::kF32);
  check_header_and_keys(g, m, GgufType::kF32);
  check_tensors(g, m, GgufType::kF32);  // expected_values() does not permute for Qwen2
  EXPECT_FALSE(g.tensors.count("output.weight")) << "tied embeddings: llama.cpp reuses token_embd";
  EXPECT_TRUE(g.tensors.count("blk.0.attn_q.bias"));
}

TEST(GgufTest, MissingTensorIsNamedAndNothingIsWritten) {
  TempDir dir;
  TinyModel m = write_model(dir.path(), false);
  m.tensors.erase("model.layers.1.mlp.up_proj.weight");
  ASSERT_TRUE(write_safetensors((dir.path() / "model.safetensors").string(), m.tensors).ok());
  const fs::path out = dir.path() / "out.gguf";
  Status st = convert_to_gguf(dir.path().string(), out.string(), GgufType::kF32);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("model.layers.1.mlp.up_proj.weight"), std::string::npos) << st.to_string();
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out.string() + ".tmp"));
}

TEST(GgufTest, MalformedInputsFailWithTheProblemNamed) {
  TempDir dir;
  TinyModel m = write_model(dir.path(), false);
  const fs::path out = dir.path() / "out.gguf";
  {  // q8_0 rows must be whole blocks of 32: intermediate 88 gives down_proj rows of 88.
    ModelConfig c = m.cfg;
    c.intermediate_size = 88;
    auto w = WeightStore::from_tensors(random_weight_tensors(c, 3));
    Status st = write_gguf(c, *w, "{}", "x", out.string(), GgufType::kQ8_0);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("mlp.down_proj.weight"), std::string::npos) << st.to_string();
    EXPECT_NE(st.message().find("32"), std::string::npos) << st.to_string();
  }
  {  // A tensor of the wrong shape.
    auto t = m.tensors;
    t["model.layers.0.self_attn.v_proj.weight"].shape = {16, 128};
    Status st = write_gguf(m.cfg, *WeightStore::from_tensors(t), "{}", "x", out.string(), GgufType::kF32);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("model.layers.0.self_attn.v_proj.weight"), std::string::npos) << st.to_string();
  }
  {  // A tokenizer id beyond the embedding rows.
    const std::string tok = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 301}, "merges": []}})";
    Status st = write_gguf(m.cfg, *WeightStore::from_tensors(m.tensors), tok, "x", out.string(), GgufType::kF32);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("301"), std::string::npos) << st.to_string();
  }
  {  // Bad type name and bad config.
    EXPECT_FALSE(parse_gguf_type("q4_0").ok());
    std::ofstream(dir.path() / "config.json") << "{\"hidden_size\": 64}";
    EXPECT_FALSE(convert_to_gguf(dir.path().string(), out.string(), GgufType::kF32).ok());
  }
  EXPECT_FALSE(fs::exists(out));
}

// ---- BERT encoders ------------------------------------------------------------------------------

// A bert-tiny directory (random weights, the built-in WordPiece vocabulary) as make-model writes it.
BertConfig write_encoder(const fs::path& dir, const std::string& pooling, int num_labels = 0) {
  BertConfig cfg = bert_preset_config("bert-tiny").value();
  if (num_labels > 0) {
    cfg.architecture = "BertForSequenceClassification";
    cfg.num_labels = num_labels;
  }
  EncoderDirOptions o;
  o.config = cfg;
  o.seed = 7;
  o.pooling = pooling;
  Status st = write_random_encoder_dir(dir.string(), o);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return cfg;
}

TEST(GgufBertTest, KeysVocabularyTensorsAndExactData) {
  TempDir dir;
  const BertConfig c = write_encoder(dir.path(), "mean");
  const GgufFile g = convert(dir.path(), GgufType::kF32);
  EXPECT_EQ(g.s("general.architecture"), "bert");
  EXPECT_EQ(g.u("bert.embedding_length"), static_cast<uint64_t>(c.hidden_size));
  EXPECT_EQ(g.u("bert.block_count"), static_cast<uint64_t>(c.num_hidden_layers));
  EXPECT_EQ(g.u("bert.feed_forward_length"), static_cast<uint64_t>(c.intermediate_size));
  EXPECT_EQ(g.u("bert.attention.head_count"), static_cast<uint64_t>(c.num_attention_heads));
  EXPECT_EQ(g.u("bert.context_length"), static_cast<uint64_t>(c.max_position_embeddings));
  EXPECT_FLOAT_EQ(static_cast<float>(g.f("bert.attention.layer_norm_epsilon")), c.layer_norm_eps);
  EXPECT_EQ(std::get<bool>(g.kv.at("bert.attention.causal")), false);
  EXPECT_EQ(g.u("bert.pooling_type"), 1u) << "mean pooling is llama_pooling_type 1";
  EXPECT_EQ(g.s("tokenizer.ggml.model"), "bert");
  EXPECT_EQ(g.u("tokenizer.ggml.token_type_count"), static_cast<uint64_t>(c.type_vocab_size));
  EXPECT_EQ(g.u("tokenizer.ggml.cls_token_id"), 101u);
  EXPECT_EQ(g.u("tokenizer.ggml.seperator_token_id"), 102u);
  EXPECT_EQ(g.u("tokenizer.ggml.unknown_token_id"), 100u);
  EXPECT_EQ(g.u("tokenizer.ggml.padding_token_id"), 0u);
  EXPECT_EQ(g.u("tokenizer.ggml.mask_token_id"), 103u);

  // Vocabulary in phantom-space spelling, checked against tokenizer.json read here independently.
  std::ifstream in(dir.path() / "tokenizer.json");
  const std::string tj((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto& tokens = std::get<std::vector<std::string>>(g.kv.at("tokenizer.ggml.tokens"));
  const auto& types = std::get<std::vector<int64_t>>(g.kv.at("tokenizer.ggml.token_type"));
  ASSERT_EQ(tokens.size(), static_cast<size_t>(c.vocab_size));
  EXPECT_EQ(tokens[101], "[CLS]");
  EXPECT_EQ(types[101], 3) << "special tokens are control tokens";
  int words = 0, pieces = 0;
  for (size_t id = 0; id < tokens.size(); ++id) {
    // Find the original spelling: "<tok>": id in the JSON.
    if (types[id] != 1) continue;
    const std::string& t = tokens[id];
    if (t.find_first_of("\"\\") != std::string::npos) continue;  // JSON-escaped in the file
    if (t.rfind("\xE2\x96\x81", 0) == 0) {
      ++words;
      EXPECT_NE(tj.find("\"" + t.substr(3) + "\": " + std::to_string(id)), std::string::npos) << id;
    } else {
      ++pieces;
      EXPECT_NE(tj.find("\"##" + t + "\": " + std::to_string(id)), std::string::npos) << id;
    }
  }
  EXPECT_GT(words, 100);
  EXPECT_GT(pieces, 10);

  // Tensors: names, shapes (ggml order) and f32 data bit for bit.
  const auto w = WeightStore::open_dir(dir.path().string()).value();
  const std::map<std::string, std::string> some = {
      {"token_embd.weight", "embeddings.word_embeddings.weight"},
      {"token_types.weight", "embeddings.token_type_embeddings.weight"},
      {"position_embd.weight", "embeddings.position_embeddings.weight"},
      {"blk.1.attn_k.bias", "encoder.layer.1.attention.self.key.bias"},
      {"blk.0.ffn_down.weight", "encoder.layer.0.output.dense.weight"},
      {"blk.1.layer_output_norm.weight", "encoder.layer.1.output.LayerNorm.weight"}};
  EXPECT_EQ(g.tensors.size(), 5u + 16u * static_cast<size_t>(c.num_hidden_layers));
  for (const auto& [gg, hf] : some) {
    SCOPED_TRACE(gg);
    ASSERT_TRUE(g.tensors.count(gg));
    const TensorView v = w->get(hf).value();
    const GgufTensor& t = g.tensors.at(gg);
    ASSERT_EQ(t.dims.size(), v.shape.size());
    for (size_t d = 0; d < t.dims.size(); ++d) EXPECT_EQ(t.dims[d], static_cast<uint64_t>(v.shape[v.shape.size() - 1 - d]));
    EXPECT_EQ(0, std::memcmp(g.data(gg), v.data, v.nbytes));
  }
}

TEST(GgufBertTest, ClassifierHeadAndPoolingFromTheFiles) {
  TempDir cls_dir, rank_dir;
  write_encoder(cls_dir.path(), "cls");
  const GgufFile f16 = convert(cls_dir.path(), GgufType::kF16);
  EXPECT_EQ(f16.u("bert.pooling_type"), 2u);
  EXPECT_EQ(f16.tensors.at("token_embd.weight").type, 1u) << "matrices in the target type";
  EXPECT_EQ(f16.tensors.at("token_types.weight").type, 0u) << "token types stay f32 (ggml adds no f32 + f16)";
  write_encoder(rank_dir.path(), "cls", /*num_labels=*/1);
  const GgufFile g = convert(rank_dir.path(), GgufType::kF32);
  EXPECT_EQ(g.u("bert.pooling_type"), 4u) << "a sequence classifier exports as rank pooling";
  ASSERT_TRUE(g.tensors.count("cls.weight"));
  ASSERT_TRUE(g.tensors.count("cls.output.weight"));
  EXPECT_EQ(g.tensors.at("cls.output.weight").dims, (std::vector<uint64_t>{64, 1}));
}

TEST(GgufBertTest, UnsupportedEncodersAreRefusedByName) {
  TempDir dir;
  write_encoder(dir.path(), "cls");
  const fs::path out = dir.path() / "out.gguf";
  // GELU variant llama.cpp's bert does not run.
  std::ifstream in(dir.path() / "config.json");
  std::string cfg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const size_t at = cfg.find("\"gelu\"");
  ASSERT_NE(at, std::string::npos);
  std::string tanh = cfg;
  tanh.replace(at, 6, "\"gelu_new\"");
  std::ofstream(dir.path() / "config.json") << tanh;
  Status st = convert_to_gguf(dir.path().string(), out.string(), GgufType::kF32);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("gelu_new"), std::string::npos) << st.to_string();
  EXPECT_FALSE(fs::exists(out));
  // A Dense module in modules.json is named.
  std::ofstream(dir.path() / "config.json") << cfg;
  std::ofstream(dir.path() / "modules.json")
      << R"([{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},)"
      << R"({"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"},)"
      << R"({"idx":2,"name":"2","path":"2_Dense","type":"sentence_transformers.models.Dense"}])";
  st = convert_to_gguf(dir.path().string(), out.string(), GgufType::kF32);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("Dense"), std::string::npos) << st.to_string();
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace ragd::tools
