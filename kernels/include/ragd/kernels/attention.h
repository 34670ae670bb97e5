// Attention over paged KV, returning the output AND the natural-log LSE per (token, head) in fp32.
//
// Paged KV (one layer):
//   k, v: [num_blocks, block_size, num_kv_heads, head_dim] of kv.dtype (K after RoPE): f32, bf16,
//   or int8 with k_scale / v_scale [num_blocks, block_size, num_kv_heads] (kv_dtype.h). The kernels
//   read the stored type directly and compute in f32.
//   block_table: [ceil(kv_len / block_size)] block ids; kv token j is in block_table[j / block_size],
//   slot j % block_size.
// GQA: query head h reads kv head h / (num_heads / num_kv_heads) (HF repeat_kv order).
// Scores are scale · q·k; softmax in fp32; lse = log Σ_j e^(score_j) over the visible keys.
// A (token, head) that sees no key gets o = 0, lse = −inf (the identity for lse_merge).
//
// Positions and the causal mask: a query at position p sees the keys whose stored position is
// <= p. Key j's position is kv.key_pos[j] when key_pos is set, else j (the contiguous case, where
// the mask is a per-query key limit and the kernels need no per-key test). kNoPosition marks a
// slot that holds no token (a hole left by a sparse or out-of-order write): never visible.
// Thread-safety: pure functions; OpenMP inside. Scratch is thread-local and reused between calls.
#pragma once

#include <cstdint>
#include <limits>
#include <span>

#include "ragd/common/status.h"
#include "ragd/kernels/kv_dtype.h"

namespace ragd::kernels {

// Position of a KV slot that holds no token; larger than every query position.
inline constexpr int32_t kNoPosition = std::numeric_limits<int32_t>::max();
// Largest valid position (a query at kMaxPosition sees every stored key).
inline constexpr int32_t kMaxPosition = kNoPosition - 1;

struct PagedKv {
  const void* k = nullptr;  // values of `dtype`
  const void* v = nullptr;
  const int32_t* block_table = nullptr;
  int block_size = 16;
  int num_kv_heads = 0;
  int head_dim = 0;
  int kv_len = 0;  // keys 0 .. kv_len-1 are valid
  // [kv_len] stored position of each key (indexed by logical key j, not by page), or null when
  // key j has position j. Host memory.
  const int32_t* key_pos = nullptr;
  KvDtype dtype = KvDtype::kF32;
  const float* k_scale = nullptr;  // int8 only: one scale per (slot, kv head), paged like k
  const float* v_scale = nullptr;
};

// Prefill (or any multi-query chunk) of one sequence.
//   q: [n_q, num_heads, head_dim]   out: [n_q, num_heads, head_dim]   lse: [n_q, num_heads]
// causal: query i sees keys j <= i + q_offset (q_offset = position of query 0, e.g. kv_len − n_q
// when the chunk's own keys are already in the cache). Not causal: every key is visible.
// Blocked: query tiles × key chunks with an online softmax; Q·Kᵀ and P·V through sgemm.
// Parallel over (kv head, query tile). InvalidArgument on inconsistent shapes.
// With kv.key_pos set, the causal test is key_pos[j] <= i + q_offset (and holes stay hidden when
// not causal).
Status attention_prefill(const float* q, int n_q, int num_heads, const PagedKv& kv, float scale,
                         bool causal, int q_offset, float* out, float* lse);

// Prefill with explicit per-query positions (sparse recompute, out-of-order or zigzag chunks):
// query i sees key j iff pos(j) <= q_pos[i]  (q_pos: [n_q], each in [0, kMaxPosition]).
// Without kv.key_pos the mask is a per-query key limit min(q_pos[i] + 1, kv_len) and costs what
// the q_offset form costs; with kv.key_pos every score of a chunk that may hold an invisible key
// is tested (chunks wholly invisible to a query tile are skipped).
Status attention_prefill_positions(const float* q, int n_q, int num_heads, const PagedKv& kv, float scale,
                                   const int32_t* q_pos, float* out, float* lse);

// One decoding query token of one sequence. It sees the keys with pos(j) <= q_pos: by default
// every key. Without kv.key_pos a smaller q_pos just shortens the key range (no mask).
struct DecodeItem {
  const float* q = nullptr;  // [num_heads, head_dim]
  PagedKv kv;
  float* out = nullptr;      // [num_heads, head_dim]
  float* lse = nullptr;      // [num_heads]
  int32_t q_pos = kMaxPosition;
};

// Batched paged decode: parallel over (sequence, kv head, KV split). num_splits > 1 splits each
// sequence's keys into that many partitions whose partial (O, LSE) are merged with merge_state;
// num_splits = 0 picks a split so that all threads have work (long contexts, small batches).
// InvalidArgument on inconsistent shapes (every item must share num_kv_heads and head_dim).
Status attention_decode(std::span<const DecodeItem> items, int num_heads, float scale, int num_splits);

}  // namespace ragd::kernels
