// How the paged KV pool stores K and V values, and the one place that converts rows to and from it.
//
//   f32:  4 bytes a value, exact.
//   bf16: 2 bytes a value, f32 rounded to nearest even (8 significant bits; relative error <= 2^-8).
//   int8: 1 byte a value plus one f32 scale per (token, kv head): x ≈ scale · q with
//         q = round(x / scale) in [-127, 127] and scale = max|x| / 127 over the head's head_dim
//         values (absolute error <= scale / 2 per value); a row of zeros has scale 0.
//
// Element layout is the pool's: [.., num_kv_heads, head_dim] per token; int8 scales are
// [.., num_kv_heads] per token, so the scale of the value at element index e is scales[e / head_dim].
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ragd/common/status.h"

namespace ragd::kernels {

enum class KvDtype : uint8_t { kF32 = 0, kBF16 = 1, kInt8 = 2 };

std::string_view kv_dtype_name(KvDtype d);  // "f32", "bf16", "int8"
// Accepts the names above; InvalidArgument naming the value otherwise.
Result<KvDtype> parse_kv_dtype(std::string_view s);
// Bytes of one stored value (4, 2, 1).
size_t kv_dtype_bytes(KvDtype d);
// True when rows carry a per-(token, kv head) scale (int8).
inline bool kv_dtype_scaled(KvDtype d) { return d == KvDtype::kInt8; }

// Converts `rows` tokens of f32 K or V (num_kv_heads · head_dim values each; row r at src + r ·
// src_stride floats) into storage: dst receives rows · num_kv_heads · head_dim values of type d,
// densely; scales (int8 only, else ignored) receives rows · num_kv_heads scales.
void kv_store_rows(KvDtype d, int rows, int num_kv_heads, int head_dim, const float* src, size_t src_stride,
                   void* dst, float* scales);

// The inverse: count stored values (a multiple of head_dim) starting at src (and, for int8, their
// scales starting at scales) into f32 dst.
void kv_load_values(KvDtype d, size_t count, int head_dim, const void* src, const float* scales, float* dst);

}  // namespace ragd::kernels
