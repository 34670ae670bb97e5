// LayerHook: a caller's view into each layer of one forward step (Model::forward_with_hook).
//
// What it is for:
//   - selective recompute (CacheBlend, EPIC): at a layer, compare the freshly computed K/V of the
//     step's tokens with the KV already in their slots (BlockTable::read), keep only the rows that
//     deviate most, and let the other tokens keep their stored KV in the later layers;
//   - ring attention (sequence parallelism): send this layer's K/V to the other ranks, and replace
//     the layer's attention by the local attention merged with remote partial (O, LSE) states.
// Without a hook (Model::forward) none of this costs anything; with one, each layer makes two
// virtual calls, plus a compaction of the row buffers when a hook narrows the rows.
//
// Rows: the step's rows are the tokens of all SeqSteps in batch order. Rows "active" at a layer
// are those every earlier hook call kept; their order never changes. Dropped rows are not computed
// in later layers: their slots keep whatever KV they already hold there, so drop only rows whose
// slots hold usable KV (reused tokens), and never a row whose logits were requested (forward
// fails with InvalidArgument).
//
// Thread-safety: called on the thread that runs forward, synchronously, once per layer in order.
// The views are valid only during the call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "ragd/common/status.h"

namespace ragd::engine {

// Where a row of the step comes from.
struct StepRow {
  int seq = 0;           // index of its SeqStep in the batch
  int token = 0;         // index into that SeqStep's tokens
  int32_t position = 0;  // RoPE and causal-mask position
  int32_t slot = 0;      // KV slot it writes in its sequence's BlockTable
};

// Shapes shared by the views.
struct LayerShape {
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
};

// One layer's freshly computed Q/K/V of the active rows, after the projections and RoPE and before
// K/V are written to the rows' slots. Row r (0 <= r < rows) is:
//   q + r * row_stride : [num_heads, head_dim]     post-RoPE f32
//   k + r * row_stride : [num_kv_heads, head_dim]  post-RoPE f32 (what will be written and attended)
//   v + r * row_stride : [num_kv_heads, head_dim]  f32
// The hook may change q, k and v in place (e.g. put a row's stored KV back so that its slot is
// rewritten with the same values).
struct LayerQkv {
  int layer = 0;
  int rows = 0;
  std::span<const StepRow> row_info;  // [rows]
  LayerShape shape;
  float* q = nullptr;
  float* k = nullptr;
  float* v = nullptr;
  size_t row_stride = 0;  // floats between consecutive rows
};

// Rows that continue after this layer's K/V write. Untouched (narrowed == false) = all of them.
struct RowSelection {
  bool narrowed = false;
  std::vector<int> rows;  // ascending, distinct indices into the layer's active rows
  void keep(std::vector<int> r) {
    narrowed = true;
    rows = std::move(r);
  }
};

// One layer's attention of the active rows, after their K/V were written to their slots.
//   q + r * q_stride : [num_heads, head_dim]  post-RoPE f32
//   out: [rows, num_heads, head_dim] f32 (contiguous)   lse: [rows, num_heads] f32, natural log
// local() runs the backend's own attention of these rows over their sequences' KV in this layer
// (masked by position) into out/lse; a ring-attention hook calls it and merges remote partials
// with kernels::merge_states.
struct LayerAttention {
  int layer = 0;
  int rows = 0;
  std::span<const StepRow> row_info;  // [rows]
  LayerShape shape;
  float scale = 1.0f;  // softmax scale (1 / sqrt(head_dim))
  const float* q = nullptr;
  size_t q_stride = 0;
  float* out = nullptr;
  float* lse = nullptr;
  std::function<Status()> local;
};

class LayerHook {
 public:
  virtual ~LayerHook() = default;
  // After Q/K/V of `layer` are computed, before K/V are written. K/V of every active row are then
  // written; only the rows in `keep` (all when untouched) go on to attention and later layers.
  // A non-OK status aborts the step with that status.
  virtual Status on_qkv(const LayerQkv& qkv, RowSelection* keep) { return Status::OK(); }
  // Replaces the layer's attention: return true after filling out and lse of every row, false to
  // let the backend run its own (the default).
  virtual Result<bool> on_attention(const LayerAttention& att) { return false; }
};

}  // namespace ragd::engine
