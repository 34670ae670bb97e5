// Hugging Face tensor names → f32 host weights, with shape checks.
#include <algorithm>
#include <string>
#include <vector>

#include "backend.h"

namespace ragd::engine {

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Converts tensor `name` (expected shape `shape`) into dst + offset floats.
Status read_tensor(const WeightStore& store, const std::string& name, const std::vector<int64_t>& shape,
                   std::vector<float>* dst, size_t offset = 0) {
  if (!store.contains(name)) {
    return Status::NotFound("model weights: missing tensor '" + name + "' (expected shape " + shape_str(shape) + ")");
  }
  RAGD_ASSIGN_OR_RETURN(TensorView t, store.get(name));
  if (t.shape != shape) {
    return Status::InvalidArgument("model weights: tensor '" + name + "' has shape " + shape_str(t.shape) +
                                   ", expected " + shape_str(shape));
  }
  size_t numel = 1;
  for (int64_t d : shape) numel *= static_cast<size_t>(d);
  if (t.nbytes != numel * dtype_size(t.dtype)) {
    return Status::InvalidArgument("model weights: tensor '" + name + "' holds " + std::to_string(t.nbytes) +
                                   " bytes, expected " + std::to_string(numel * dtype_size(t.dtype)));
  }
  if (dst->size() < offset + numel) dst->resize(offset + numel);
  t.to_f32(dst->data() + offset);
  return Status::OK();
}

}  // namespace

size_t HostWeights::bytes() const {
  size_t n = embed.size() + final_norm.size() + lm_head.size();
  for (const auto& l : layers) {
    n += l.input_norm.size() + l.qkv.size() + l.qkv_bias.size() + l.o.size() + l.post_norm.size() +
         l.gate_up.size() + l.down.size();
  }
  return n * sizeof(float);
}

Result<HostWeights> load_host_weights(const ModelConfig& cfg, const WeightStore& store) {
  const int64_t h = cfg.hidden_size, q = cfg.q_dim(), kv = cfg.kv_dim(), im = cfg.intermediate_size,
                vocab = cfg.vocab_size;
  HostWeights w;
  RAGD_RETURN_IF_ERROR(read_tensor(store, "model.embed_tokens.weight", {vocab, h}, &w.embed));
  RAGD_RETURN_IF_ERROR(read_tensor(store, "model.norm.weight", {h}, &w.final_norm));
  if (!cfg.tie_word_embeddings) RAGD_RETURN_IF_ERROR(read_tensor(store, "lm_head.weight", {vocab, h}, &w.lm_head));
  w.layers.resize(cfg.num_hidden_layers);
  for (int i = 0; i < cfg.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerWeights& l = w.layers[i];
    RAGD_RETURN_IF_ERROR(read_tensor(store, p + "input_layernorm.weight", {h}, &l.input_norm));
    RAGD_RETURN_IF_ERROR(read_tensor(store, p + "post_attention_layernorm.weight", {h}, &l.post_norm));
    l.qkv.resize(static_cast<size_t>(q + 2 * kv) * h);
    RAGD_RETURN_IF_ERROR(read_tensor(store, p + "self_attn.q_proj.weight", {q, h}, &l.qkv, 0));
    RAGD_RETURN_IF_ERROR(read_tensor(store, p + "self_attn.k_proj.weight", {kv, h}, &l.qkv, q * h));
    RAGD_RETURN_IF_ERROR(read_tensor(store, p + "self_attn.v_proj.weight", {kv, h}, &l.qkv, (q + kv) * h));
    if (cfg.attention_bias) {
      l.qkv_bias.resize(q + 2 * kv);
      RAGD_RETURN_IF_ERROR(read_tensor(store, p + "self_attn.q_proj.bias", {q}, &l.qkv_bias, 0));
      RAGD_RETURN_IF_ERROR(read_tensor(store, p + "self_attn.k_proj.bias", {kv}, &l.qkv_bias, q));
      RAGD_RETURN_IF_ERROR(read_tensor(store, p + "self_attn.v_proj.bias", {kv}, &l.qkv_bias, q + kv));
    }
    RAGD_RETURN_IF_ERROR(read_tensor(store, p + "self_attn.o_proj.weight", {h, q}, &l.o));
    l.gate_up.resize(static_cast<size_t>(2 * im) * h);
    RAGD_RETURN_IF_ERROR(read_tensor(store, p + "mlp.gate_proj.weight", {im, h}, &l.gate_up, 0));
    RAGD_RETURN_IF_ERROR(read_tensor(store, p + "mlp.up_proj.weight", {im, h}, &l.gate_up, im * h));
    RAGD_RETURN_IF_ERROR(read_tensor(store, p + "mlp.down_proj.weight", {h, im}, &l.down));
  }
  return w;
}

}  // namespace ragd::engine
