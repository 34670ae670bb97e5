// CudaBackend: runs a step on one GPU with the CUDA launchers in ragd/kernels/cuda and cuBLAS.
//   embedding gather (bf16) → f32 residual stream; per layer: RMSNorm (f32) → bf16 → fused QKV GEMM
//   (f32 out, + bias) → RoPE (f32) → bf16 → K/V scattered into their pool slots → paged attention
//   (flash prefill per multi-token sequence, one split-KV decode launch for all 1-token sequences)
//   → o_proj GEMM accumulating into the residual → RMSNorm → gate_up GEMM (bf16) → SwiGLU → down
//   GEMM accumulating into the residual; final RMSNorm and the LM head only for the logit rows.
// Weights live on the device as bf16 (row-major, HF layout), norms and biases as f32; KV in
// CudaKvStorage (bf16). Activations between GEMMs are bf16, the residual stream and every
// reduction f32: the CPU backend with bf16 weights and bf16 KV is its oracle (tolerance in the tests).
// One stream per backend; a step ends with one synchronisation (the logits' copy to the host).
//
// Steps that are not a contiguous append (explicit positions, sparse slots) use the position-masked
// flash prefill. Layer hooks see host views: each hooked layer copies its Q/K/V rows to pinned host
// memory and back (the hook may change them), narrows rows on the device by gathers, and a hook
// that replaces attention gets `local()` as device attention copied to the host. Model::attend
// runs the position-masked prefill over a table's KV. These paths cost host round trips; the
// contiguous, hook-free step stays on the device from the embedding to the logits.
//
// Decode steps (every row a one-token append, no hook) replay their layers as a CUDA graph: the
// kernel arguments of such a step depend only on the batch size, the KV-length bucket (block tables
// padded to a multiple of kDecodeBlockQuantum blocks, so the split-KV plan is fixed) and the scratch
// buffers' addresses; tokens, positions, slots, tables and lengths are read from the step metadata
// uploaded before the replay. A shape is captured the second time it is seen (one-off shapes are not
// worth a capture) and kept in a small LRU cache. RAGD_CUDA_GRAPHS=0 turns graphs off (measurement).
// Thread-safety: one thread at a time (scratch buffers and the cuBLAS handle are members).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend.h"
#include "cuda_kv_storage.h"
#include "ragd/kernels/cuda/gemm.h"
#include "ragd/kernels/cuda/graph.h"
#include "ragd/kernels/cuda/memory.h"

namespace ragd::engine {

struct CudaStepMeta;  // cuda_backend.cpp: one step's block tables, slots and row maps

class CudaBackend final : public Backend {
 public:
  // Use make_cuda_backend (backend.h), which loads this module and calls create_cuda_backend.
  CudaBackend(const ModelConfig& cfg, int device, std::shared_ptr<kernels::cuda::Stream> stream,
              kernels::cuda::CublasHandle cublas);
  // Uploads every matrix as bf16 and the norms / biases as f32; frees host matrices as it goes.
  Status upload(HostWeights weights);

  std::string_view device() const override { return name_; }
  Result<std::unique_ptr<KvStorage>> make_kv_storage(const KvLayout& layout, size_t num_blocks) override;
  Status forward(const StepPlan& plan, KvPool& pool, float* logits, SampleResult* picks, float* hidden,
                 LayerHook* hook) override;
  Status attend(KvPool& pool, const BlockTable& table, int layer, const float* q, int n_q, const int32_t* q_pos,
                float* out, float* lse) override;
  void rerotate_keys(float* k, size_t rows, int64_t delta) const override;
  size_t weight_bytes() const override { return weight_bytes_; }

 private:
  struct DeviceLayer {
    kernels::cuda::DeviceBuffer input_norm, qkv, qkv_bias, o, post_norm, gate_up, down;
  };
  // Grows device scratch to `rows` step rows and `logit_rows` logit rows.
  Status reserve(int rows, int logit_rows);
  // The pool's storage as device memory of this backend; FailedPrecondition naming its device otherwise.
  Result<CudaKvStorage*> device_storage(KvPool& pool) const;
  // Builds and uploads the metadata of the active rows (after the start and after a narrowing).
  Status upload_meta(const StepPlan& plan, int rows, int bs, CudaStepMeta* m);
  // Attention of every active row of one layer; the f32 output [rows, q_dim] in row order is at
  // attn_rows(m) afterwards.
  Status attention(const StepPlan& plan, CudaKvStorage& kv, int layer, int rows, const CudaStepMeta& m);
  float* attn_rows(const CudaStepMeta& m);
  float* lse_rows(const CudaStepMeta& m);  // the LSE [rows, num_heads] in row order likewise
  // Keeps only the active rows `keep` (ascending, distinct, < rows) on the device and the host.
  Status compact(const std::vector<int>& keep, int* rows);
  void* stream() const { return stream_->get(); }

  // What a decode step's captured graph depends on.
  struct DecodeGraphKey {
    int rows = 0, max_blocks = 0, splits = 0, keys_per_split = 0;
    int variant = 0;  // RAGD_CUDA_GEMV / RAGD_CUDA_FUSED off bits: graphs of other kernels
    std::array<const void*, 14> buffers{};
    bool operator==(const DecodeGraphKey&) const = default;
  };
  struct DecodeGraph {
    DecodeGraphKey key;
    kernels::cuda::Graph graph;  // empty until the second sighting
    uint64_t last_use = 0;
    bool failed = false;  // the capture failed once: this shape runs without a graph
  };
  // Runs `layers` (the step's embedding and layers) through the graph cache.
  Status run_decode_graph(const CudaStepMeta& m, int rows, const CudaKvStorage& kv, const std::function<Status()>& layers);

  ModelConfig cfg_;
  int device_ = 0;
  std::string name_;
  std::shared_ptr<kernels::cuda::Stream> stream_;
  kernels::cuda::CublasHandle cublas_;
  int num_sms_ = 0;
  size_t weight_bytes_ = 0;
  std::vector<float> inv_freq_host_;  // [head_dim / 2], for rerotate_keys on host rows

  kernels::cuda::DeviceBuffer embed_, lm_head_, final_norm_, inv_freq_;
  std::vector<DeviceLayer> layers_;

  // Scratch, sized for rows_cap_ rows (logits for logit_cap_ rows).
  int rows_cap_ = 0, logit_cap_ = 0;
  kernels::cuda::DeviceBuffer x_, hf_, hb_, qkv_, qkvb_, qb_, attn_, lse_, lse_rows_, gu_, act_, logits_, qdec_;
  kernels::cuda::DeviceBuffer picks_;  // greedy picks of the step: int32 tokens, then f32 log-probabilities
  kernels::cuda::DeviceBuffer gemm_ws_, decode_ws_, meta_, keep_;
  kernels::cuda::PinnedBuffer meta_host_, qkv_host_, attn_host_;  // hooks: host views of one layer
  // Per active row (host): token, position, global pool slot, step row, hook's row info.
  std::vector<int32_t> pos_, slot_, tok_;
  std::vector<int> step_row_;
  std::vector<StepRow> row_info_;
  std::vector<SeqRun> runs_;  // per plan sequence
  std::vector<DecodeGraph> graphs_;
  uint64_t graph_clock_ = 0;
};

}  // namespace ragd::engine
