#include "ragd/engine/random_weights.h"

#include <cmath>
#include <map>
#include <string>

#include "ragd/common/hash.h"

namespace ragd::engine {
namespace {

// Uniform in [offset - half, offset + half] from a per-tensor xorshift stream; parallel chunks
// are seeded from (tensor seed, chunk) so the result does not depend on the thread count.
OwnedTensor random_tensor(std::vector<int64_t> shape, uint64_t seed, float half, float offset) {
  size_t n = 1;
  for (auto d : shape) n *= static_cast<size_t>(d);
  OwnedTensor t;
  t.dtype = DType::kF32;
  t.shape = std::move(shape);
  t.bytes.resize(n * sizeof(float));
  float* p = reinterpret_cast<float*>(t.bytes.data());
  constexpr size_t kChunk = 1 << 16;
  const int64_t chunks = static_cast<int64_t>((n + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    uint64_t s = (seed ^ (static_cast<uint64_t>(c) * 0x9E3779B97F4A7C15ULL)) | 1;
    const size_t end = std::min(n, static_cast<size_t>(c + 1) * kChunk);
    for (size_t i = static_cast<size_t>(c) * kChunk; i < end; ++i) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      const float u = static_cast<float>(s >> 40) / static_cast<float>(1 << 24) - 0.5f;  // [-0.5, 0.5)
      p[i] = offset + 2.0f * half * u;
    }
  }
  return t;
}

}  // namespace

std::map<std::string, OwnedTensor> random_weight_tensors(const ModelConfig& c, uint64_t seed) {
  std::map<std::string, OwnedTensor> w;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float half, float offset) {
    const uint64_t s = xxh3_64(name.data(), name.size()) ^ (seed * 0xD1B54A32D192ED03ULL);
    w.emplace(name, random_tensor(std::move(shape), s, half, offset));
  };
  // Uniform with std 1/sqrt(fan_in): half-width sqrt(3)/sqrt(fan_in).
  auto proj = [](int64_t fan_in) { return std::sqrt(3.0f / static_cast<float>(fan_in)); };
  const int64_t h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), im = c.intermediate_size, v = c.vocab_size;
  add("model.embed_tokens.weight", {v, h}, proj(h), 0.0f);
  add("model.norm.weight", {h}, 0.05f, 1.0f);
  if (!c.tie_word_embeddings) add("lm_head.weight", {v, h}, proj(h), 0.0f);
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", {h}, 0.05f, 1.0f);
    add(p + "post_attention_layernorm.weight", {h}, 0.05f, 1.0f);
    add(p + "self_attn.q_proj.weight", {q, h}, proj(h), 0.0f);
    add(p + "self_attn.k_proj.weight", {kv, h}, proj(h), 0.0f);
    add(p + "self_attn.v_proj.weight", {kv, h}, proj(h), 0.0f);
    add(p + "self_attn.o_proj.weight", {h, q}, proj(q), 0.0f);
    if (c.attention_bias) {
      add(p + "self_attn.q_proj.bias", {q}, 0.02f, 0.0f);
      add(p + "self_attn.k_proj.bias", {kv}, 0.02f, 0.0f);
      add(p + "self_attn.v_proj.bias", {kv}, 0.02f, 0.0f);
    }
    add(p + "mlp.gate_proj.weight", {im, h}, proj(h), 0.0f);
    add(p + "mlp.up_proj.weight", {im, h}, proj(h), 0.0f);
    add(p + "mlp.down_proj.weight", {h, im}, proj(im), 0.0f);
  }
  return w;
}

std::unique_ptr<WeightStore> make_random_weights(const ModelConfig& cfg, uint64_t seed) {
  return WeightStore::from_tensors(random_weight_tensors(cfg, seed));
}

}  // namespace ragd::engine
