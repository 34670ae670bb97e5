// CpuBackend: runs a step on the host with the kernels in ragd/kernels (OpenBLAS + OpenMP).
//   per layer: RMSNorm → fused QKV GEMM (+bias) → RoPE → [hook: see / change K/V, narrow rows]
//   → K/V into their slots → paged attention (prefill kernel per multi-token sequence, one batched
//   decode call for all 1-token sequences; per-query positions when the step is not a contiguous
//   append; [hook: may replace it]) → o_proj GEMM (+residual) → RMSNorm → fused gate_up GEMM →
//   SwiGLU → down GEMM (+residual).
// KV lives in HostKvStorage (make_kv_storage).
// Every projection is one GEMM over all rows of the batch; decode rows of a batch share one pass
// over the weights.
// Thread-safety: one thread at a time (scratch buffers are members); weights are immutable, so
// backends that share them (share()) step on different threads at once.
#pragma once

#include <cmath>
#include <memory>
#include <string_view>
#include <vector>

#include "backend.h"
#include "ragd/kernels/attention.h"

namespace ragd::engine {

class CpuBackend final : public Backend {
 public:
  CpuBackend(const ModelConfig& cfg, std::shared_ptr<const HostWeights> weights, const CpuBackendOptions& opts);

  std::string_view device() const override { return "cpu"; }
  Result<std::unique_ptr<KvStorage>> make_kv_storage(const KvLayout& layout, size_t num_blocks) override;
  Status forward(const StepPlan& plan, KvPool& pool, float* logits, SampleResult* picks, float* hidden,
                 LayerHook* hook) override;
  Status attend(KvPool& pool, const BlockTable& table, int layer, const float* q, int n_q, const int32_t* q_pos,
                float* out, float* lse) override;
  void rerotate_keys(float* k, size_t rows, int64_t delta) const override;
  // Layers in parallel, each re-rotated in a per-thread copy while it is in cache.
  void write_rerotated(KvStorage& st, std::span<const int32_t> blocks, int t0, int n, const float* k, const float* v,
                       int64_t delta) const override;
  size_t weight_bytes() const override { return weight_bytes_; }
  // Another CpuBackend over the same (immutable) weights, with scratch of its own.
  Result<std::unique_ptr<Backend>> share(int num_threads) const override;

 private:
  // The pool's storage as host memory; FailedPrecondition naming the device otherwise.
  static Result<HostKvStorage*> host_storage(KvPool& pool);
  // One layer of kvs as the kernels' paged view of a sequence (key_pos null: slot j holds position j).
  kernels::PagedKv paged_view(HostKvStorage& kvs, int layer, const int32_t* blocks, int kv_len,
                              const int32_t* key_pos) const;
  float softmax_scale() const { return 1.0f / std::sqrt(static_cast<float>(cfg_.head_dim)); }
  void write_kv(const StepPlan& plan, HostKvStorage& kv, int layer, int rows);
  Status attention(const StepPlan& plan, HostKvStorage& kv, int layer);
  // Keeps only the active rows `keep` (ascending, distinct, < rows); updates rows and runs_.
  Status compact(const std::vector<int>& keep, int* rows);

  ModelConfig cfg_;
  std::shared_ptr<const HostWeights> w_;  // shared with the backends share() made
  size_t weight_bytes_ = 0;
  int threads_ = 0;  // OpenMP threads per step (CpuBackendOptions::num_threads; 0 = the default)
  std::vector<float> inv_freq_;  // [head_dim / 2]
  std::vector<float> rope_cs_, rope_sn_;  // a step's per-row cos / sin: [rows, head_dim / 2]
  // Per-step scratch, resized to the step's row count.
  std::vector<float> x_, h_, qkv_, q_, attn_, lse_, gu_, act_;
  std::vector<float> pick_logits_;  // logits rows of the step's greedy picks
  // Per active row: position, slot, step row; row_info_ only with a hook.
  std::vector<int32_t> pos_, slot_;
  std::vector<int> step_row_;
  std::vector<StepRow> row_info_;
  std::vector<SeqRun> runs_;  // per plan sequence
};

}  // namespace ragd::engine
