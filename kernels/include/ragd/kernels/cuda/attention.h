// Attention over the engine's paged KV on the GPU, returning the output AND the natural-log LSE per
// (token, head) in fp32 — the same contract as ragd/kernels/attention.h (the CPU oracle), with bf16
// inputs:
//   k, v: [num_blocks, block_size, num_kv_heads, head_dim] bf16 (K after RoPE), device memory
//   key j lives in block block_table[j / block_size], slot j % block_size.
// GQA: query head h reads kv head h / (num_heads / num_kv_heads). Scores are scale · q·k with fp32
// accumulation; softmax in fp32 (P rounded to bf16 for the P·V product, as flash-attention does).
// A (token, head) that sees no key gets o = 0, lse = −inf.
// Supported: head_dim 32, 64 and 128 (prefill and decode); GQA group 1, 2, 3, 4, 8 (decode). Anything
// else is InvalidArgument naming the value.
// Thread-safety: pure launchers (see device.h for the launcher contract).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ragd/kernels/cuda/device.h"

namespace ragd::kernels::cuda {

struct PagedKvBf16 {
  const uint16_t* k = nullptr;          // device
  const uint16_t* v = nullptr;          // device
  const int32_t* block_table = nullptr; // device, [ceil(kv_len / block_size)]
  int block_size = 16;
  int num_kv_heads = 0;
  int head_dim = 0;
  int kv_len = 0;                       // keys 0 .. kv_len-1 are valid
  // attention_prefill_positions only: [kv_len] position of each slot (INT32_MAX = a hole, never
  // seen), device; null = slot j holds position j.
  const int32_t* key_pos = nullptr;
};

// Prefill (or any multi-query chunk) of one sequence, flash-attention style: a 128-query tile of one
// head in registers, key tiles streamed through shared memory (cp.async), online softmax on the
// score fragments, bf16 tensor cores with fp32 accumulation. On a Hopper GPU (compute capability
// 9.0) head_dim 64 / 128 run a warpgroup-MMA (wgmma) kernel, everything else an mma.sync kernel
// (see attention_prefill_kernel); both serve both entry points.
//   q: [n_q, num_heads, head_dim] bf16   out: [n_q, num_heads, head_dim] (out_dtype kF32 or kBf16)
//   lse: [n_q, num_heads] f32
// causal: query i sees keys j <= i + q_offset; otherwise every key is visible.
Status attention_prefill(const uint16_t* q, int n_q, int num_heads, const PagedKvBf16& kv, float scale,
                         bool causal, int q_offset, void* out, DType out_dtype, float* lse, void* stream);

// The kernel attention_prefill runs for this head_dim on the current device: on Hopper
// "sm90-wgmma" (the default: the tile loop software-pipelined inside each warpgroup),
// "sm90-wgmma-serial" or "sm90-wgmma-ws" (producer warpgroup + ping-pong consumers; explicit
// positions then run "sm90-wgmma"), picked by RAGD_PREFILL_SM90_SCHEDULE = pipelined | serial | ws
// (another value: the launchers return InvalidArgument naming it); "mma.sync" on other GPUs, for
// head_dim 32, or with RAGD_CUDA_WGMMA=0. For benchmarks and tests; the environment is read at every
// call.
const char* attention_prefill_kernel(int head_dim);

// The same flash prefill with explicit positions (the engine's non-contiguous steps: sparse
// recompute, zigzag shards): query i sees key j iff key_pos[j] <= q_pos[i] (j <= q_pos[i] when
// kv.key_pos is null). q_pos: [n_q] int32, device, any order. Queries that see no key get o = 0,
// lse = −inf.
Status attention_prefill_positions(const uint16_t* q, int n_q, int num_heads, const PagedKvBf16& kv, float scale,
                                   const int32_t* q_pos, void* out, DType out_dtype, float* lse, void* stream);

// Batched paged decode (one query token per sequence), split-KV ("flash-decoding"): each sequence's
// keys are cut into num_splits ranges of keys_per_split keys; each (sequence, kv head, split) block
// handles the whole GQA group, and the partial (O, LSE) are merged with the LSE formula.
struct DecodeBatchBf16 {
  const uint16_t* q = nullptr;           // [batch, num_heads, head_dim] bf16, device
  const uint16_t* k = nullptr;           // page pool, device
  const uint16_t* v = nullptr;           // page pool, device
  const int32_t* block_tables = nullptr; // [batch, max_blocks_per_seq] int32, device
  const int32_t* kv_lens = nullptr;      // [batch] int32, device; each <= max_blocks_per_seq·block_size
  int batch = 0;
  int max_blocks_per_seq = 0;
  int block_size = 16;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
};

// Work split, fixed before the launch so that a decode step can be graph-captured while kv_lens grow
// (up to max_kv_len).
struct DecodePlan {
  int num_splits = 1;
  int keys_per_split = 0;
};

// Picks the split so that batch · kv_heads · splits fills ~2 waves of `num_sms` multiprocessors,
// with at least 256 keys per split. num_splits_override > 0 forces that many splits.
DecodePlan plan_attention_decode(int batch, int num_kv_heads, int max_kv_len, int num_sms,
                                 int num_splits_override = 0);

// Device scratch for the partial states: batch · num_heads · num_splits · (head_dim + 1) floats
// (0 when num_splits == 1).
size_t attention_decode_workspace_bytes(const DecodeBatchBf16& batch, const DecodePlan& plan);

//   out: [batch, num_heads, head_dim] f32   lse: [batch, num_heads] f32
// The last split also takes any keys beyond num_splits · keys_per_split (a plan made for a shorter
// max_kv_len stays correct, only less balanced).
// InvalidArgument when the workspace is smaller than attention_decode_workspace_bytes.
Status attention_decode(const DecodeBatchBf16& batch, float scale, const DecodePlan& plan,
                        void* workspace, size_t workspace_bytes, float* out, float* lse, void* stream);

}  // namespace ragd::kernels::cuda
