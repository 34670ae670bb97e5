// Internal to the CUDA prefill attention kernels (attention_prefill.cu: the mma.sync kernel and the
// one dispatch point; attention_prefill_sm90.cu: the Hopper wgmma kernel): the launch parameters and
// the device helpers both kernels use.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "ragd/common/status.h"
#include "ragd/kernels/cuda/device.h"

namespace ragd::kernels::cuda::detail {

struct PrefillParams {
  const __nv_bfloat16* q;
  const __nv_bfloat16* k;
  const __nv_bfloat16* v;
  const int32_t* block_table;
  void* out;
  float* lse;
  int n_q, num_heads, num_kv_heads, group, block_size, kv_len, q_offset;
  int block_shift;  // log2(block_size) when it is a power of two, else -1
  float scale_log2;  // scale · log2(e)
  bool causal;
  const int32_t* q_pos;    // explicit positions: [n_q] query positions
  const int32_t* key_pos;  // explicit positions: [kv_len] key positions (INT_MAX = hole), or null: slot j holds position j
};

// Row of the page pool ([num_blocks · block_size] tokens) that holds key j.
__device__ __forceinline__ size_t pool_row(const PrefillParams& p, int j) {
  int blk, slot;
  if (p.block_shift >= 0) {
    blk = j >> p.block_shift;
    slot = j & (p.block_size - 1);
  } else {
    blk = j / p.block_size;
    slot = j - blk * p.block_size;
  }
  return static_cast<size_t>(p.block_table[blk]) * p.block_size + slot;
}

// The masks' extent, shared by every prefill kernel. `positions`: explicit positions (p.q_pos set);
// by_key_pos: with per-key positions (p.key_pos set).
// With explicit positions, the largest query position of the CTA's rows [m0, m0 + rows), through
// the shared int *s_max; every thread of the block calls it (two barriers).
__device__ __forceinline__ int cta_max_query_position(const PrefillParams& p, int m0, int rows, int* s_max) {
  if (threadIdx.x == 0) *s_max = -1;
  __syncthreads();
  for (int r = threadIdx.x; r < rows; r += blockDim.x) {
    if (m0 + r < p.n_q) atomicMax(s_max, p.q_pos[m0 + r]);
  }
  __syncthreads();
  return *s_max;
}
// One past the last key slot any of the CTA's rows [m0, m0 + rows) can see.
__device__ __forceinline__ int cta_key_end(const PrefillParams& p, bool positions, bool by_key_pos, int m0, int rows,
                                           int max_qpos) {
  if (positions) return by_key_pos ? p.kv_len : min(p.kv_len, max_qpos + 1);
  return p.causal ? min(p.kv_len, min(m0 + rows, p.n_q) - 1 + p.q_offset + 1) : p.kv_len;
}
// Key tiles of tile_keys keys before this one are visible to every row from first_row on (no mask).
__device__ __forceinline__ int unmasked_key_tiles(const PrefillParams& p, bool positions, int first_row, int tile_keys) {
  if (positions) return 0;
  const int full = p.kv_len / tile_keys;
  return p.causal ? min(full, max(0, (first_row + p.q_offset + 1) / tile_keys)) : full;
}
// The last key query row qi sees: a slot, or with key positions a position (-1: none).
__device__ __forceinline__ int row_key_limit(const PrefillParams& p, bool positions, bool by_key_pos, int qi) {
  if (positions) {
    const int lim = qi < p.n_q ? p.q_pos[qi] : -1;
    return by_key_pos ? lim : min(lim, p.kv_len - 1);
  }
  return p.causal ? min(qi + p.q_offset, p.kv_len - 1) : p.kv_len - 1;
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global → shared (a shared-window address), asynchronously; src_bytes = 0 writes zeros
// (src is then not read).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  cp_async16(smem_addr(dst), src, src_bytes);
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Two floats → packed bf16x2 (low half = a), and the sum of what was packed.
__device__ __forceinline__ uint32_t pack_bf16(float a, float b, float* sum) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  *sum += __low2float(h) + __high2float(h);
  return *reinterpret_cast<const uint32_t*>(&h);
}

template <typename OutT>
__device__ __forceinline__ void store_pair(void* out, size_t i, float a, float b);
template <>
__device__ __forceinline__ void store_pair<float>(void* out, size_t i, float a, float b) {
  *reinterpret_cast<float2*>(static_cast<float*>(out) + i) = make_float2(a, b);
}
template <>
__device__ __forceinline__ void store_pair<__nv_bfloat16>(void* out, size_t i, float a, float b) {
  *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(out) + i) = __floats2bfloat162_rn(a, b);
}

// The Hopper kernels: head_dim 64 or 128 on a compute-capability 9.0 device. The caller checks
// prefill_sm90_supported.
//   kPipelined (attention_prefill_sm90.cu, the default): every mask (causal, none, explicit
//     positions when p.q_pos is set), the tile loop software-pipelined inside each warpgroup;
//   kSerial (same file): the same without the pipelining;
//   kWarpSpecialized (attention_prefill_sm90_ws.cu): producer warpgroup + ping-pong consumers,
//     causal or unmasked only (explicit positions take kPipelined).
// RAGD_PREFILL_SM90_SCHEDULE picks one: unset or "pipelined", "serial", "ws"; anything else is
// InvalidArgument naming the value.
enum class Sm90Schedule { kPipelined, kSerial, kWarpSpecialized };
Result<Sm90Schedule> prefill_sm90_schedule();
const char* prefill_sm90_schedule_name(Sm90Schedule s);
bool prefill_sm90_supported(int head_dim);
Status attention_prefill_sm90(const PrefillParams& p, int head_dim, DType out_dtype, Sm90Schedule schedule,
                              cudaStream_t s);
Status attention_prefill_sm90_ws(const PrefillParams& p, int head_dim, DType out_dtype, cudaStream_t s);

}  // namespace ragd::kernels::cuda::detail
