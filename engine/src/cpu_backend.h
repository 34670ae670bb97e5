// CpuBackend: runs a step on the host with the kernels in ragd/kernels (OpenBLAS + OpenMP).
//   per layer: RMSNorm → fused QKV GEMM (+bias) → RoPE → K/V into pages → paged attention
//   (prefill kernel per multi-token sequence, one batched decode call for all 1-token sequences)
//   → o_proj GEMM (+residual) → RMSNorm → fused gate_up GEMM → SwiGLU → down GEMM (+residual).
// Every projection is one GEMM over all rows of the batch; decode rows of a batch share one pass
// over the weights.
// Thread-safety: one thread at a time (scratch buffers are members); weights are immutable.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "backend.h"

namespace ragd::engine {

class CpuBackend final : public Backend {
 public:
  CpuBackend(const ModelConfig& cfg, HostWeights weights, const CpuBackendOptions& opts);

  std::string_view device() const override { return "cpu"; }
  Status forward(const StepPlan& plan, KvPool& pool, float* logits, float* hidden) override;
  void rerotate_keys(float* k, size_t rows, int64_t delta) const override;
  size_t weight_bytes() const override { return weight_bytes_; }

 private:
  void write_kv(const StepPlan& plan, KvPool& pool, int layer);
  Status attention(const StepPlan& plan, KvPool& pool, int layer);

  ModelConfig cfg_;
  HostWeights w_;
  size_t weight_bytes_ = 0;
  std::vector<float> inv_freq_;  // [head_dim / 2]
  // Per-step scratch, resized to the step's row count.
  std::vector<float> x_, h_, qkv_, q_, attn_, lse_, gu_, act_;
  std::vector<int32_t> pos_;
};

}  // namespace ragd::engine
