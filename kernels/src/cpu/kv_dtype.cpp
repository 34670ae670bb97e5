// Conversions between f32 rows and the pool's KV storage types (kv_dtype.h). The loops are plain
// integer / float arithmetic that the compiler vectorises for each target clone.
#include "ragd/kernels/kv_dtype.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

namespace ragd::kernels {

namespace {

// f32 -> bf16, round to nearest even; NaN stays a (quiet) NaN. Same rule as half.h's scalar.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void to_bf16(size_t n, const float* src, uint16_t* dst) {
  for (size_t i = 0; i < n; ++i) {
    const uint32_t x = std::bit_cast<uint32_t>(src[i]);
    const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    const uint32_t nan = (x >> 16) | 0x40u;
    dst[i] = static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
  }
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void from_bf16(size_t n, const uint16_t* src, float* dst) {
  for (size_t i = 0; i < n; ++i) dst[i] = std::bit_cast<float>(static_cast<uint32_t>(src[i]) << 16);
}

// One head's head_dim values: scale = max|x| / 127, q = round(x / scale).
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
float to_int8(int n, const float* src, int8_t* dst) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(src[i]));
  const float scale = amax / 127.0f;
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  for (int i = 0; i < n; ++i) {
    // fmin / fmax also map a NaN to a bound, so the conversion to int8 is always defined.
    const float q = std::fmin(std::fmax(std::nearbyint(src[i] * inv), -127.0f), 127.0f);
    dst[i] = static_cast<int8_t>(q);
  }
  return scale;
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void from_int8(int n, const int8_t* src, float scale, float* dst) {
  for (int i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]) * scale;
}

}  // namespace

void kv_store_rows(KvDtype d, int rows, int num_kv_heads, int head_dim, const float* src, size_t src_stride,
                   void* dst, float* scales) {
  const size_t width = static_cast<size_t>(num_kv_heads) * head_dim;
  for (int r = 0; r < rows; ++r) {
    const float* s = src + static_cast<size_t>(r) * src_stride;
    switch (d) {
      case KvDtype::kF32: std::memcpy(static_cast<float*>(dst) + r * width, s, width * sizeof(float)); break;
      case KvDtype::kBF16: to_bf16(width, s, static_cast<uint16_t*>(dst) + r * width); break;
      case KvDtype::kInt8:
        for (int h = 0; h < num_kv_heads; ++h) {
          scales[static_cast<size_t>(r) * num_kv_heads + h] =
              to_int8(head_dim, s + static_cast<size_t>(h) * head_dim, static_cast<int8_t*>(dst) + r * width + h * head_dim);
        }
        break;
    }
  }
}

void kv_load_values(KvDtype d, size_t count, int head_dim, const void* src, const float* scales, float* dst) {
  switch (d) {
    case KvDtype::kF32: std::memcpy(dst, src, count * sizeof(float)); break;
    case KvDtype::kBF16: from_bf16(count, static_cast<const uint16_t*>(src), dst); break;
    case KvDtype::kInt8:
      for (size_t e = 0; e < count; e += head_dim) {
        from_int8(head_dim, static_cast<const int8_t*>(src) + e, scales[e / head_dim], dst + e);
      }
      break;
  }
}

}  // namespace ragd::kernels
