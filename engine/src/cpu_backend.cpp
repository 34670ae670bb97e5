#include "cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "ragd/kernels/activation.h"
#include "ragd/kernels/attention.h"
#include "ragd/kernels/gemm.h"
#include "ragd/kernels/norm.h"
#include "ragd/kernels/rope.h"
#include "ragd/kernels/threads.h"

namespace ragd::engine {

namespace {

kernels::RopeConfig rope_config(const ModelConfig& cfg) {
  kernels::RopeConfig r;
  r.head_dim = cfg.head_dim;
  r.theta = cfg.rope_theta;
  switch (cfg.rope_scaling.type) {
    case RopeScaling::Type::kNone: r.scaling = kernels::RopeConfig::Scaling::kNone; break;
    case RopeScaling::Type::kLinear: r.scaling = kernels::RopeConfig::Scaling::kLinear; break;
    case RopeScaling::Type::kLlama3: r.scaling = kernels::RopeConfig::Scaling::kLlama3; break;
  }
  r.factor = cfg.rope_scaling.factor;
  r.low_freq_factor = cfg.rope_scaling.low_freq_factor;
  r.high_freq_factor = cfg.rope_scaling.high_freq_factor;
  r.original_max_position_embeddings = cfg.rope_scaling.original_max_position_embeddings;
  return r;
}

template <typename T>
void grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace

CpuBackend::CpuBackend(const ModelConfig& cfg, HostWeights weights, const CpuBackendOptions& opts)
    : cfg_(cfg), w_(std::move(weights)) {
  kernels::set_num_threads(opts.num_threads);
  weight_bytes_ = w_.bytes();
  inv_freq_.resize(cfg_.head_dim / 2);
  kernels::rope_inv_freq(rope_config(cfg_), inv_freq_.data());
}

Result<std::unique_ptr<Backend>> make_cpu_backend(const ModelConfig& cfg, HostWeights weights,
                                                  const CpuBackendOptions& opts) {
  return std::unique_ptr<Backend>(new CpuBackend(cfg, std::move(weights), opts));
}

void CpuBackend::rerotate_keys(float* k, size_t rows, int64_t delta) const {
  const int hd = cfg_.head_dim, nkv = cfg_.num_key_value_heads;
  const size_t row_floats = static_cast<size_t>(nkv) * hd;
  constexpr size_t kChunk = 1 << 20;  // kernel takes an int row count
  for (size_t r0 = 0; r0 < rows; r0 += kChunk) {
    const int n = static_cast<int>(std::min(kChunk, rows - r0));
    kernels::rope_rerotate(k + r0 * row_floats, n, nkv, hd, static_cast<int>(row_floats), delta, inv_freq_.data());
  }
}

void CpuBackend::write_kv(const StepPlan& plan, KvPool& pool, int layer) {
  const int q_dim = cfg_.q_dim(), kv_dim = cfg_.kv_dim();
  const int stride = q_dim + 2 * kv_dim;
  const int bs = pool.layout().block_size;
  for (const SeqPlan& s : plan.seqs) {
    const auto& blocks = s.table->blocks();
    for (int i = 0; i < s.n; ++i) {
      const int t = s.start + i;
      const int32_t b = blocks[t / bs];
      const size_t off = static_cast<size_t>(t % bs) * kv_dim;
      const float* row = qkv_.data() + static_cast<size_t>(s.row0 + i) * stride;
      std::memcpy(pool.k(layer, b) + off, row + q_dim, sizeof(float) * kv_dim);
      std::memcpy(pool.v(layer, b) + off, row + q_dim + kv_dim, sizeof(float) * kv_dim);
    }
  }
}

Status CpuBackend::attention(const StepPlan& plan, KvPool& pool, int layer) {
  const int nh = cfg_.num_attention_heads, hd = cfg_.head_dim;
  const size_t q_dim = cfg_.q_dim();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  auto view = [&](const SeqPlan& s) {
    kernels::PagedKv kv;
    kv.k = pool.k(layer, 0);
    kv.v = pool.v(layer, 0);
    kv.block_table = s.table->blocks().data();
    kv.block_size = pool.layout().block_size;
    kv.num_kv_heads = cfg_.num_key_value_heads;
    kv.head_dim = hd;
    kv.kv_len = s.start + s.n;
    return kv;
  };
  std::vector<kernels::DecodeItem> decodes;
  for (const SeqPlan& s : plan.seqs) {
    const float* q = q_.data() + s.row0 * q_dim;
    float* o = attn_.data() + s.row0 * q_dim;
    float* l = lse_.data() + static_cast<size_t>(s.row0) * nh;
    if (s.n == 1) {
      decodes.push_back({q, view(s), o, l});
    } else {
      RAGD_RETURN_IF_ERROR(kernels::attention_prefill(q, s.n, nh, view(s), scale, true, s.start, o, l));
    }
  }
  if (!decodes.empty()) RAGD_RETURN_IF_ERROR(kernels::attention_decode(decodes, nh, scale, 0));
  return Status::OK();
}

Status CpuBackend::forward(const StepPlan& plan, KvPool& pool, float* logits, float* hidden) {
  const int rows = plan.total_rows;
  if (rows <= 0) return Status::OK();
  const int hs = cfg_.hidden_size, im = cfg_.intermediate_size, nh = cfg_.num_attention_heads,
            nkv = cfg_.num_key_value_heads, hd = cfg_.head_dim;
  const int q_dim = cfg_.q_dim(), kv_dim = cfg_.kv_dim(), qkv_dim = q_dim + 2 * kv_dim;
  const float eps = cfg_.rms_norm_eps;
  grow(x_, static_cast<size_t>(rows) * hs);
  grow(h_, static_cast<size_t>(rows) * hs);
  grow(qkv_, static_cast<size_t>(rows) * qkv_dim);
  grow(q_, static_cast<size_t>(rows) * q_dim);
  grow(attn_, static_cast<size_t>(rows) * q_dim);
  grow(lse_, static_cast<size_t>(rows) * nh);
  grow(gu_, static_cast<size_t>(rows) * 2 * im);
  grow(act_, static_cast<size_t>(rows) * im);
  grow(pos_, static_cast<size_t>(rows));

  for (const SeqPlan& s : plan.seqs) {
    for (int i = 0; i < s.n; ++i) {
      std::memcpy(x_.data() + static_cast<size_t>(s.row0 + i) * hs, w_.embed.data() + static_cast<size_t>(s.tokens[i]) * hs,
                  sizeof(float) * hs);
      pos_[s.row0 + i] = s.start + i;
    }
  }

  for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
    const LayerWeights& w = w_.layers[l];
    kernels::rmsnorm(x_.data(), rows, hs, hs, w.input_norm.data(), eps, h_.data(), hs);
    kernels::linear(h_.data(), rows, hs, w.qkv.data(), qkv_dim, w.qkv_bias.empty() ? nullptr : w.qkv_bias.data(),
                    qkv_.data());
    kernels::rope_apply(qkv_.data(), rows, nh, hd, qkv_dim, pos_.data(), inv_freq_.data());
    kernels::rope_apply(qkv_.data() + q_dim, rows, nkv, hd, qkv_dim, pos_.data(), inv_freq_.data());
    write_kv(plan, pool, l);
    for (int r = 0; r < rows; ++r) {
      std::memcpy(q_.data() + static_cast<size_t>(r) * q_dim, qkv_.data() + static_cast<size_t>(r) * qkv_dim,
                  sizeof(float) * q_dim);
    }
    RAGD_RETURN_IF_ERROR(attention(plan, pool, l));
    kernels::linear(attn_.data(), rows, q_dim, w.o.data(), hs, nullptr, x_.data(), /*accumulate=*/true);
    kernels::rmsnorm(x_.data(), rows, hs, hs, w.post_norm.data(), eps, h_.data(), hs);
    kernels::linear(h_.data(), rows, hs, w.gate_up.data(), 2 * im, nullptr, gu_.data());
    kernels::swiglu(rows, im, gu_.data(), 2 * im, gu_.data() + im, 2 * im, act_.data(), im);
    kernels::linear(act_.data(), rows, im, w.down.data(), hs, nullptr, x_.data(), /*accumulate=*/true);
  }

  const float* head = w_.lm_head.empty() ? w_.embed.data() : w_.lm_head.data();
  if (hidden != nullptr) kernels::rmsnorm(x_.data(), rows, hs, hs, w_.final_norm.data(), eps, hidden, hs);
  const int nl = static_cast<int>(plan.logit_rows.size());
  if (nl > 0 && logits != nullptr) {
    for (int i = 0; i < nl; ++i) {
      const float* src = x_.data() + static_cast<size_t>(plan.logit_rows[i]) * hs;
      kernels::rmsnorm(src, 1, hs, hs, w_.final_norm.data(), eps, h_.data() + static_cast<size_t>(i) * hs, hs);
    }
    kernels::linear(h_.data(), nl, hs, head, cfg_.vocab_size, nullptr, logits);
  }
  return Status::OK();
}

}  // namespace ragd::engine
