// KV deviation: how far freshly computed K/V rows are from the K/V a cache put in their slots,
// the selection signal of CacheBlend (tokens with the largest deviation are recomputed).
// Thread-safety: pure functions.
#pragma once

#include <cstddef>

namespace ragd::kernels {

// dev[r] = sum_i (k_new[r][i] - k_old[r][i])^2 + sum_i (v_new[r][i] - v_old[r][i])^2 over the
// row's `width` floats (kv_heads · head_dim). Row r of *_new starts at r * new_stride floats, row r
// of *_old at r * old_stride.
void kv_deviation(int rows, int width, const float* k_new, const float* v_new, size_t new_stride,
                  const float* k_old, const float* v_old, size_t old_stride, float* dev);

}  // namespace ragd::kernels
