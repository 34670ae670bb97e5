// Row-wise and element-wise ops on the GPU: RMSNorm, RoPE (+ re-rotation), SwiGLU, embedding
// gather. Same semantics and layouts as the CPU kernels in ragd/kernels/{norm,rope,activation}.h;
// dtype kF32 or kBf16 (arithmetic in fp32, one rounding on store).
// Thread-safety: pure launchers (see device.h for the launcher contract).
#pragma once

#include <cstdint>

#include "ragd/kernels/cuda/device.h"

namespace ragd::kernels::cuda {

// x: [rows, dim] (row stride x_stride elements)   w: [dim]   y: [rows, dim] (row stride y_stride),
// all of `dtype`; y = x / sqrt(mean(x²) + eps) · w. y may alias x (same stride).
Status rmsnorm(DType dtype, const void* x, int rows, int dim, int x_stride, const void* w, float eps,
               void* y, int y_stride, void* stream);
// The same with y of out_dtype (x and w of dtype): the engine normalises its f32 residual straight
// into the bf16 input of the next GEMM. y must not alias x when the dtypes differ.
Status rmsnorm(DType dtype, const void* x, int rows, int dim, int x_stride, const void* w, float eps, DType out_dtype,
               void* y, int y_stride, void* stream);

// In place on x: [rows, heads, head_dim] (rows row_stride elements apart), HF rotate_half layout.
// positions: [rows] int32 (device)   inv_freq: [head_dim / 2] f32 (device; ragd::kernels::rope_inv_freq).
// Angles are formed in double as on the CPU, so long positions keep their precision.
Status rope_apply(DType dtype, void* x, int rows, int heads, int head_dim, int row_stride,
                  const int32_t* positions, const float* inv_freq, void* stream);

// Re-rotation of stored post-RoPE keys by a position delta (may be negative); same layout.
Status rope_rerotate(DType dtype, void* x, int rows, int heads, int head_dim, int row_stride,
                     int64_t delta, const float* inv_freq, void* stream);

// y = silu(gate) · up.  gate/up/y: [rows, dim] with row strides (elements); y may alias gate or up.
Status swiglu(DType dtype, int rows, int dim, const void* gate, int gate_stride, const void* up,
              int up_stride, void* y, int y_stride, void* stream);

// y = x converted from `from` to `to` (n elements, contiguous; f32 -> bf16 rounds to nearest even,
// bf16 -> f32 is exact, same dtype copies). y must not alias x unless the dtypes are equal.
Status convert(DType from, const void* x, DType to, void* y, size_t n, void* stream);

// x[r, :dim] += bias[:dim] for every row: x [rows, dim] of `dtype` (row stride `stride`), bias f32.
Status add_bias(DType dtype, void* x, int rows, int dim, int stride, const float* bias, void* stream);

// out[i] = table[ids[i]]: table [vocab, hidden], ids [n] int32 (device), out [n, hidden].
// An id outside [0, vocab) writes a zero row and increments *bad_ids (device int, may be null),
// since a device-side id cannot be checked on the host without a sync.
Status embedding_gather(DType dtype, const void* table, int vocab, int hidden, const int32_t* ids,
                        int n, void* out, int* bad_ids, void* stream);

}  // namespace ragd::kernels::cuda
