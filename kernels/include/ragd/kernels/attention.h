// Attention over paged KV, returning the output AND the natural-log LSE per (token, head) in fp32.
//
// Paged KV (one layer):
//   k, v: [num_blocks, block_size, num_kv_heads, head_dim] f32 (K after RoPE)
//   block_table: [ceil(kv_len / block_size)] block ids; kv token j is in block_table[j / block_size],
//   slot j % block_size.
// GQA: query head h reads kv head h / (num_heads / num_kv_heads) (HF repeat_kv order).
// Scores are scale · q·k; softmax in fp32; lse = log Σ_j e^(score_j) over the visible keys.
// A (token, head) that sees no key gets o = 0, lse = −inf (the identity for lse_merge).
// Thread-safety: pure functions; OpenMP inside. Scratch is thread-local and reused between calls.
#pragma once

#include <cstdint>
#include <span>

#include "ragd/common/status.h"

namespace ragd::kernels {

struct PagedKv {
  const float* k = nullptr;
  const float* v = nullptr;
  const int32_t* block_table = nullptr;
  int block_size = 16;
  int num_kv_heads = 0;
  int head_dim = 0;
  int kv_len = 0;  // keys 0 .. kv_len-1 are valid
};

// Prefill (or any multi-query chunk) of one sequence.
//   q: [n_q, num_heads, head_dim]   out: [n_q, num_heads, head_dim]   lse: [n_q, num_heads]
// causal: query i sees keys j <= i + q_offset (q_offset = position of query 0, e.g. kv_len − n_q
// when the chunk's own keys are already in the cache). Not causal: every key is visible.
// Blocked: query tiles × key chunks with an online softmax; Q·Kᵀ and P·V through sgemm.
// Parallel over (kv head, query tile). InvalidArgument on inconsistent shapes.
Status attention_prefill(const float* q, int n_q, int num_heads, const PagedKv& kv, float scale,
                         bool causal, int q_offset, float* out, float* lse);

// One decoding query token of one sequence (sees all kv_len keys).
struct DecodeItem {
  const float* q = nullptr;  // [num_heads, head_dim]
  PagedKv kv;
  float* out = nullptr;      // [num_heads, head_dim]
  float* lse = nullptr;      // [num_heads]
};

// Batched paged decode: parallel over (sequence, kv head, KV split). num_splits > 1 splits each
// sequence's keys into that many partitions whose partial (O, LSE) are merged with merge_state;
// num_splits = 0 picks a split so that all threads have work (long contexts, small batches).
// InvalidArgument on inconsistent shapes (every item must share num_kv_heads and head_dim).
Status attention_decode(std::span<const DecodeItem> items, int num_heads, float scale, int num_splits);

}  // namespace ragd::kernels
