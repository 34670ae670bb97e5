// Hugging Face tensor names → host weights in the chosen format, with shape checks. Each tensor is
// widened to f32 (one at a time) and packed into the kernels' grouped layout: rounded to 16 bits
// (exact when the checkpoint already holds that format) or quantized to q8.
#include <algorithm>
#include <cstdlib>
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

// Opens tensor `name` and checks its shape and byte count.
Result<TensorView> checked_view(const WeightStore& store, const std::string& name, const std::vector<int64_t>& shape) {
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
  return t;
}

// Converts 1-D / small tensor `name` (expected shape `shape`) into dst + offset floats.
Status read_tensor(const WeightStore& store, const std::string& name, const std::vector<int64_t>& shape,
                   std::vector<float>* dst, size_t offset = 0) {
  RAGD_ASSIGN_OR_RETURN(TensorView t, checked_view(store, name, shape));
  const size_t numel = static_cast<size_t>(t.numel());
  if (dst->size() < offset + numel) dst->resize(offset + numel);
  t.to_f32(dst->data() + offset);
  return Status::OK();
}

bool same_format(DType d, kernels::WeightType t) {
  return (d == DType::kF32 && t == kernels::WeightType::kF32) || (d == DType::kBF16 && t == kernels::WeightType::kBF16) ||
         (d == DType::kF16 && t == kernels::WeightType::kF16);
}

// Writes the 2-D tensor `name` ([rows, cols]) into rows [row0, row0 + rows) of dst.
Status read_matrix(const WeightStore& store, const std::string& name, int64_t rows, int64_t cols, PackedWeight* dst,
                   int64_t row0 = 0) {
  RAGD_ASSIGN_OR_RETURN(TensorView t, checked_view(store, name, {rows, cols}));
  const kernels::WeightMatrix& v = dst->view();
  // Widened one tensor at a time and repacked into the grouped layout: exact for a checkpoint
  // already in the target format (bf16 / f16 -> f32 -> bf16 / f16 round-trips).
  std::vector<float> f32(static_cast<size_t>(rows) * cols);
  t.to_f32(f32.data());
  kernels::pack_weight_rows(f32.data(), static_cast<int>(rows), static_cast<int>(row0), v.type, v.rows, v.cols,
                            dst->storage());
  return Status::OK();
}

kernels::WeightType resolve(WeightFormat f, DType checkpoint) {
  switch (f) {
    case WeightFormat::kF32: return kernels::WeightType::kF32;
    case WeightFormat::kBF16: return kernels::WeightType::kBF16;
    case WeightFormat::kF16: return kernels::WeightType::kF16;
    case WeightFormat::kQ8: return kernels::WeightType::kQ8;
    case WeightFormat::kAuto: break;
  }
  return checkpoint == DType::kBF16 ? kernels::WeightType::kBF16
         : checkpoint == DType::kF16 ? kernels::WeightType::kF16
                                     : kernels::WeightType::kF32;
}

}  // namespace

PackedWeight::PackedWeight(kernels::WeightType type, int rows, int cols)
    : mem_((kernels::weight_bytes(type, rows, cols) + 63) & ~size_t{63}) {  // whole 64-byte lines
  view_ = kernels::make_view(type, rows, cols, mem_.data());
  kernels::init_weight_storage(type, rows, cols, mem_.data());
}

size_t HostWeights::bytes() const {
  size_t n = embed.bytes() + lm_head.bytes() + final_norm.size() * sizeof(float);
  for (const auto& l : layers) {
    n += (l.input_norm.size() + l.qkv_bias.size() + l.post_norm.size()) * sizeof(float) + l.qkv.bytes() + l.o.bytes() +
         l.gate_up.bytes() + l.down.bytes();
  }
  return n;
}

bool HostWeights::exact() const {
  return type == kernels::WeightType::kF32 || same_format(checkpoint_dtype, type);
}

Result<HostWeights> load_host_weights(const ModelConfig& cfg, const WeightStore& store, WeightFormat format) {
  const int64_t h = cfg.hidden_size, q = cfg.q_dim(), kv = cfg.kv_dim(), im = cfg.intermediate_size,
                vocab = cfg.vocab_size;
  HostWeights w;
  RAGD_ASSIGN_OR_RETURN(TensorView emb, checked_view(store, "model.embed_tokens.weight", {vocab, h}));
  w.checkpoint_dtype = emb.dtype;
  w.type = resolve(format, emb.dtype);
  const kernels::WeightType t = w.type;
  auto matrix = [t](int64_t rows, int64_t cols) { return PackedWeight(t, static_cast<int>(rows), static_cast<int>(cols)); };
  w.embed = matrix(vocab, h);
  RAGD_RETURN_IF_ERROR(read_matrix(store, "model.embed_tokens.weight", vocab, h, &w.embed));
  RAGD_RETURN_IF_ERROR(read_tensor(store, "model.norm.weight", {h}, &w.final_norm));
  if (!cfg.tie_word_embeddings) {
    w.lm_head = matrix(vocab, h);
    RAGD_RETURN_IF_ERROR(read_matrix(store, "lm_head.weight", vocab, h, &w.lm_head));
  }
  w.layers.resize(cfg.num_hidden_layers);
  for (int i = 0; i < cfg.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerWeights& l = w.layers[i];
    RAGD_RETURN_IF_ERROR(read_tensor(store, p + "input_layernorm.weight", {h}, &l.input_norm));
    RAGD_RETURN_IF_ERROR(read_tensor(store, p + "post_attention_layernorm.weight", {h}, &l.post_norm));
    l.qkv = matrix(q + 2 * kv, h);
    RAGD_RETURN_IF_ERROR(read_matrix(store, p + "self_attn.q_proj.weight", q, h, &l.qkv, 0));
    RAGD_RETURN_IF_ERROR(read_matrix(store, p + "self_attn.k_proj.weight", kv, h, &l.qkv, q));
    RAGD_RETURN_IF_ERROR(read_matrix(store, p + "self_attn.v_proj.weight", kv, h, &l.qkv, q + kv));
    if (cfg.attention_bias) {
      l.qkv_bias.resize(q + 2 * kv);
      RAGD_RETURN_IF_ERROR(read_tensor(store, p + "self_attn.q_proj.bias", {q}, &l.qkv_bias, 0));
      RAGD_RETURN_IF_ERROR(read_tensor(store, p + "self_attn.k_proj.bias", {kv}, &l.qkv_bias, q));
      RAGD_RETURN_IF_ERROR(read_tensor(store, p + "self_attn.v_proj.bias", {kv}, &l.qkv_bias, q + kv));
    }
    l.o = matrix(h, q);
    RAGD_RETURN_IF_ERROR(read_matrix(store, p + "self_attn.o_proj.weight", h, q, &l.o));
    l.gate_up = matrix(2 * im, h);
    RAGD_RETURN_IF_ERROR(read_matrix(store, p + "mlp.gate_proj.weight", im, h, &l.gate_up, 0));
    RAGD_RETURN_IF_ERROR(read_matrix(store, p + "mlp.up_proj.weight", im, h, &l.gate_up, im));
    l.down = matrix(h, im);
    RAGD_RETURN_IF_ERROR(read_matrix(store, p + "mlp.down_proj.weight", h, im, &l.down));
  }
  return w;
}

}  // namespace ragd::engine

