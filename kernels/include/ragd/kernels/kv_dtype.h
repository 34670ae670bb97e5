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
#include <optional>
#include <string_view>

#include "ragd/common/enum_names.h"
#include "ragd/common/status.h"

namespace ragd::kernels {

// The one KV element type of ragd: the engine pool's storage (runtime.kv_dtype) and the element
// type of kvstore segments. Each value IS its on-disk code (kvstore segment header byte 32, also
// hashed into the segment scope keys): never renumber a value. Code 1 was f16 in the segment
// format and is reserved (never written). Segments hold f32 or bf16 today (KvFormat::validate).
enum class KvDtype : uint8_t { kF32 = 0, kBF16 = 2, kInt8 = 3 };
inline constexpr auto kKvDtypeNames =
    make_enum_names<KvDtype>("kv_dtype", {{KvDtype::kF32, "f32"}, {KvDtype::kBF16, "bf16"}, {KvDtype::kInt8, "int8"}});
constexpr const auto& ragd_enum_names(KvDtype) { return kKvDtypeNames; }
static_assert(enum_names_valid(kKvDtypeNames));

inline std::string_view kv_dtype_name(KvDtype d) { return enum_name(d); }  // "f32", "bf16", "int8"
// Accepts the names above; InvalidArgument listing them otherwise.
inline Result<KvDtype> parse_kv_dtype(std::string_view s) { return parse_enum<KvDtype>(s); }
// The on-disk code of d, and back (nullopt for a code that names no value, 1 = f16 included).
constexpr uint8_t kv_dtype_code(KvDtype d) { return static_cast<uint8_t>(d); }
constexpr std::optional<KvDtype> kv_dtype_from_code(uint8_t code) {
  const auto d = static_cast<KvDtype>(code);
  if (!enum_known(d)) return std::nullopt;
  return d;
}
// Bytes of one stored value (4, 2, 1); 0 for a value outside the enum.
constexpr size_t kv_dtype_bytes(KvDtype d) {
  switch (d) {
    case KvDtype::kF32: return 4;
    case KvDtype::kBF16: return 2;
    case KvDtype::kInt8: return 1;
  }
  return 0;
}
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
