// Private seam between Model (batch validation, KV reservation, bookkeeping) and the device code
// that runs a step. The CPU backend always builds; a CUDA backend plugs in behind the same
// interface and the same block tables.
// Thread-safety: a Backend is used by one thread at a time (the model's owner).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "host_buffer.h"
#include "ragd/common/status.h"
#include "ragd/engine/kv_cache.h"
#include "ragd/engine/kv_storage.h"
#include "ragd/engine/layer_hook.h"
#include "ragd/engine/model.h"
#include "ragd/engine/model_config.h"
#include "ragd/engine/safetensors.h"
#include "ragd/kernels/weight_matrix.h"

namespace ragd::engine {

// One weight matrix in the format it is kept in (kernels/weight_matrix.h), owning 64-byte aligned
// storage. Thread-safety: immutable once filled; safe to read from any thread.
class PackedWeight {
 public:
  PackedWeight() = default;
  PackedWeight(kernels::WeightType type, int rows, int cols);  // storage allocated, unfilled
  const kernels::WeightMatrix& view() const { return view_; }
  void* storage() { return mem_.data(); }
  size_t bytes() const { return empty() ? 0 : view_.bytes(); }
  bool empty() const { return mem_.empty(); }

 private:
  HostBuffer mem_;  // huge pages from 2 MiB up (host_buffer.h)
  kernels::WeightMatrix view_;
};

// Weights of one decoder layer, HF nn.Linear layout ([out, in] row-major). Matrices in the model's
// weight type; norms and biases f32.
struct LayerWeights {
  std::vector<float> input_norm;  // [hidden]
  PackedWeight qkv;               // [q_dim + 2·kv_dim, hidden]: q_proj, k_proj, v_proj rows stacked
  std::vector<float> qkv_bias;    // [q_dim + 2·kv_dim], empty without attention_bias
  PackedWeight o;                 // [hidden, q_dim]
  std::vector<float> post_norm;   // [hidden]
  PackedWeight gate_up;           // [2·intermediate, hidden]: gate_proj rows, then up_proj rows
  PackedWeight down;              // [hidden, intermediate]
};

// The whole model in host memory, in one weight type for every matrix (embeddings and head
// included); norms f32.
struct HostWeights {
  kernels::WeightType type = kernels::WeightType::kF32;
  DType checkpoint_dtype = DType::kF32;  // dtype of the checkpoint's embedding tensor
  PackedWeight embed;                    // [vocab, hidden]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // [hidden]
  PackedWeight lm_head;           // [vocab, hidden]; empty when tie_word_embeddings (embed is used)
  size_t bytes() const;
  // False when the matrices hold other values than the checkpoint's (a narrower type: q8 from
  // anything, 16-bit from f32, f16 <-> bf16).
  bool exact() const;
};

// Reads and checks every HF tensor (model_weights.cpp) into matrices of the chosen format (kAuto:
// the checkpoint's dtype, no conversion). A missing tensor is NotFound, a wrong shape
// InvalidArgument; both name the tensor and the expected vs actual shape.
Result<HostWeights> load_host_weights(const ModelConfig& cfg, const WeightStore& store, WeightFormat format);

// One sequence of a planned step. Rows of the step are the new tokens of all sequences in order.
struct SeqPlan {
  BlockTable* table = nullptr;  // slots reserved; not yet committed
  const int32_t* tokens = nullptr;
  int n = 0;                    // new tokens
  int row0 = 0;                 // first row of this sequence in the step
  SeqStep::Logits logits = SeqStep::Logits::kLast;
  // Contiguous append onto a table whose slots hold their own positions (the fast path):
  // slot = position = start + i, kv_len = start + n, no key positions; slots/positions empty.
  bool contiguous = true;
  int start = 0;                   // table->num_tokens() before the step
  std::vector<int32_t> slots;      // [n] when !contiguous
  std::vector<int32_t> positions;  // [n] when !contiguous
  int kv_len = 0;                  // slots attention looks at: max(start, largest slot + 1)
  // [kv_len] position of every slot once this step's tokens are written (holes kNoPosition), or
  // empty when slot j holds position j for every j < kv_len (the mask is then a per-query limit).
  std::vector<int32_t> key_pos;
  int32_t slot(int i) const { return contiguous ? start + i : slots[i]; }
  int32_t position(int i) const { return contiguous ? start + i : positions[i]; }
};

struct StepPlan {
  std::vector<SeqPlan> seqs;
  int total_rows = 0;
  std::vector<int> logit_rows;  // step rows whose logits are wanted, in output order
  std::vector<int> pick_rows;   // step rows whose greedy pick only is wanted, in output order
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view device() const = 0;
  // The storage this backend's forward reads and writes KV in (host memory for the CPU backend).
  virtual Result<std::unique_ptr<KvStorage>> make_kv_storage(const KvLayout& layout, size_t num_blocks) = 0;
  // Runs one step: writes the new tokens' K/V into the slots of the plan's block tables (storage
  // from make_kv_storage), and fills logits [plan.logit_rows.size(), vocab], picks
  // [plan.pick_rows.size()] (greedy_pick of each row's logits, computed where the logits are) and,
  // when non-null, hidden [plan.total_rows, hidden_size] (final-normed hidden states of every row;
  // not with a hook that narrows the rows). hook may be null (layer_hook.h).
  virtual Status forward(const StepPlan& plan, KvPool& pool, float* logits, SampleResult* picks, float* hidden,
                         LayerHook* hook) = 0;
  // Attention of queries q [n_q, num_heads, head_dim] over one layer of table's KV in pool, query i
  // seeing keys with position <= q_pos[i] (Model::attend). Arguments are checked by the caller.
  virtual Status attend(KvPool& pool, const BlockTable& table, int layer, const float* q, int n_q,
                        const int32_t* q_pos, float* out, float* lse) = 0;
  // In place on host keys k: [rows, num_kv_heads, head_dim]; see Model::rerotate_keys.
  virtual void rerotate_keys(float* k, size_t rows, int64_t delta) const = 0;
  // Writes tokens [t0, t0 + n) of every layer into `blocks` of st (storage from make_kv_storage):
  // k, v host f32 [num_layers][n, num_kv_heads, head_dim], k rotated for positions `delta` lower
  // than where it lands and re-rotated on the way (as rerotate_keys: the same bits); k and v are
  // not changed (Model::append_shifted). The default re-rotates a copy of k, then writes every layer.
  virtual void write_rerotated(KvStorage& st, std::span<const int32_t> blocks, int t0, int n, const float* k,
                               const float* v, int64_t delta) const;
  // Bytes of weights read per decoded token (for benchmarks' bandwidth bounds).
  virtual size_t weight_bytes() const = 0;
  // A backend over the same weights with state (scratch, streams) of its own, for a second model
  // stepped on another thread (Model::sibling); num_threads as CpuBackendOptions'. Unimplemented
  // where the weights cannot be shared.
  virtual Result<std::unique_ptr<Backend>> share(int num_threads) const {
    (void)num_threads;
    return Status::Unimplemented(std::string("backend ") + std::string(device()) + " does not share its weights");
  }
};

// The rows of one plan sequence that are active in a layer: [row0, row0 + n) (every backend keeps
// these while a layer hook narrows the rows).
struct SeqRun {
  int row0 = 0;
  int n = 0;
  bool contiguous = true;  // the plan's contiguous append and no row dropped
};
// InvalidArgument unless `keep` is ascending, distinct and within [0, rows) (a hook's RowSelection).
Status check_kept_rows(const std::vector<int>& keep, int rows);
// Recomputes runs after a narrowing: kept[r] = the step row info of the r-th kept row.
void narrow_runs(std::span<const StepRow> kept, std::vector<SeqRun>* runs);
// The active row of each of plan.logit_rows, then of each of plan.pick_rows (identity unless
// narrowed; step_row[r] = the step row of active row r); InvalidArgument naming a requested row that
// a hook dropped.
Result<std::vector<int>> logit_active_rows(const StepPlan& plan, bool narrowed, std::span<const int> step_row, int total);

// A layer hook's views of the active rows (host memory, backend.cpp). qkv: [rows, stride] floats,
// each row Q [num_heads · head_dim], K and V [num_kv_heads · head_dim] side by side.
LayerQkv qkv_view(int layer, std::span<const StepRow> rows, const LayerShape& shape, float* qkv, size_t stride);
LayerAttention attention_view(int layer, std::span<const StepRow> rows, const LayerShape& shape, float scale,
                              const float* q, size_t q_stride, float* out, float* lse, std::function<Status()> local);

// RoPE inverse frequencies of the model ([head_dim / 2], rope scaling applied): the same table for
// every backend (backend.cpp).
std::vector<float> rope_inv_freq(const ModelConfig& cfg);
// Re-rotation of host keys k [rows, num_kv_heads, head_dim] by a position delta (Backend::rerotate_keys
// of every backend: the keys are host rows whatever the device).
void rerotate_host_keys(const ModelConfig& cfg, const float* inv_freq, float* k, size_t rows, int64_t delta);

struct CpuBackendOptions {
  int num_threads = 0;  // OpenMP / OpenBLAS threads; 0 = all cores
};
// cpu_backend.cpp. Takes ownership of the weights.
Result<std::unique_ptr<Backend>> make_cpu_backend(const ModelConfig& cfg, HostWeights weights,
                                                  const CpuBackendOptions& opts);

struct CudaBackendOptions {
  int device = 0;  // CUDA device index ("cuda:N")
};
// In builds with CUDA (RAGD_HAVE_CUDA). The CUDA backend is a module of its own (libragd_cuda.so,
// cuda_backend_module.cpp) that make_cuda_backend loads on first use (cuda_backend_loader.cpp): a
// process that never asks for a GPU does not map cuBLAS, whose loading alone costs ~150 MB of
// resident memory. Uploads the weights as bf16 and releases the host copy. FailedPrecondition with
// the reason when the module cannot be loaded or there is no usable device; InvalidArgument naming
// the value for shapes the CUDA kernels are not built for.
Result<std::unique_ptr<Backend>> make_cuda_backend(const ModelConfig& cfg, HostWeights weights,
                                                   const CudaBackendOptions& opts);
// cuda_backend.cpp, inside the module: what make_cuda_backend calls once the module is loaded.
Result<std::unique_ptr<Backend>> create_cuda_backend(const ModelConfig& cfg, HostWeights weights,
                                                     const CudaBackendOptions& opts);

}  // namespace ragd::engine
