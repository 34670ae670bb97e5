// Writes into the engine's paged KV pool on the GPU.
//   pool: [num_blocks, block_size, num_kv_heads, head_dim] bf16 (K and V pools alike), device memory.
// Re-rotating stored keys to another position needs no op of its own: one block is
// [block_size, num_kv_heads, head_dim] contiguous, i.e. rope_rerotate (elementwise.h) with
// rows = block_size, heads = num_kv_heads, row_stride = num_kv_heads · head_dim.
// Thread-safety: pure launcher (see device.h for the launcher contract).
#pragma once

#include <cstdint>

#include "ragd/kernels/cuda/device.h"

namespace ragd::kernels::cuda {

// Scatters the K/V rows of n new tokens into their pool slots.
//   k_new, v_new: [n, num_kv_heads, head_dim] bf16, rows src_stride elements apart (K and V can be
//   read straight out of a fused qkv buffer)   slots: [n] int32 (device), slot = block · block_size +
//   offset in block; a negative slot skips its row (padding).
Status kv_write(const uint16_t* k_new, const uint16_t* v_new, int n, int src_stride, int num_kv_heads,
                int head_dim, const int32_t* slots, uint16_t* k_pool, uint16_t* v_pool, void* stream);

// The tail of a layer's QKV projection in one launch (it replaces rope_apply on the f32 QKV rows,
// convert to bf16, kv_write and the copy of the query rows): from qkv [n, (nh + 2·nkv)·head_dim]
// f32 (rows qkv_stride elements apart; Q, K, V heads adjacent, as the fused projection writes
// them), rotates Q and K by positions[r] (HF rotate_half, angles in double as rope_apply), writes
// the rotated queries as bf16 to q_out [n, nh·head_dim] and the rotated keys and the values as bf16
// into their pool slots (a negative slot skips the KV write of its row). The arithmetic of the four
// launches it replaces (one bf16 rounding of each rotated value).
Status rope_store_qkv(const float* qkv, int n, int qkv_stride, int num_heads, int num_kv_heads, int head_dim,
                      const int32_t* positions, const float* inv_freq, uint16_t* q_out, const int32_t* slots,
                      uint16_t* k_pool, uint16_t* v_pool, void* stream);

}  // namespace ragd::kernels::cuda
