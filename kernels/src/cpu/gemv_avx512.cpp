// AVX-512 small-batch kernels (F, BW, VL, VNNI; F16C): this file is compiled for that instruction
// set and only called where the CPU has it (cpu_features.cpp).
//   f32 / bf16 / f16: a group of 16 weight rows (stored column by column) × up to 8 x rows per
//     tile, one lane per output row; bf16 and f16 widen to f32 in registers (exact) and accumulate
//     in f32; software prefetch runs ahead of the group's single stream.
//   q8: 16 interleaved weight rows per 64-byte load, vpdpbusd against x's 4 bytes broadcast
//     (weights as u8, x quantized to s8), started from the +128 correction; one lane per output,
//     converted to f32 and scaled per block by d_w · d_x.
#include <immintrin.h>

// GCC 12's AVX-512 headers start some intrinsics from _mm512_undefined_*(), which its own
// uninitialized-use analysis reports once they are inlined here.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>

#include "gemv.h"

namespace ragd::kernels::detail {

namespace {

// How far ahead of the current position each weight row is prefetched (bytes). Decode reads every
// weight once per step, so the hardware prefetcher alone leaves the core waiting on DRAM.
constexpr int kPrefetchBytes = 1024;

// 16 weights of one column of a group (16 rows) at element index idx, widened to f32.
template <WeightType T>
inline __m512 load_column(const uint8_t* base, size_t idx) {
  if constexpr (T == WeightType::kF32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(base) + idx);
  } else {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(base) + idx));
    if constexpr (T == WeightType::kBF16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
  }
}

// Rows of x per f32 / bf16 / f16 tile: 2 · 8 accumulators (two column parities per row, so the
// FMA chains of one row overlap).
constexpr int kTileRows = 8;

// One group of 16 weight rows (f32 / bf16 / f16, grouped layout) against x rows r0 .. r0+M-1:
// out[r] lane l = w row 16g + l · x row r0 + r. Each column is one load (32 or 64 bytes of the
// group's single stream) and one FMA per row of x with x's value broadcast.
template <WeightType T, int M>
inline void group_float(const GemvArgs& a, int g, int r0, __m512 out[kTileRows]) {
  constexpr size_t kElem = T == WeightType::kF32 ? 4 : 2;
  const int k = a.k;
  const auto* base = static_cast<const uint8_t*>(a.w->data);
  const size_t g0 = static_cast<size_t>(g) * k * kGroupRows;
  const float* xr[M];
  __m512 acc0[M], acc1[M];
  for (int r = 0; r < M; ++r) {
    xr[r] = a.x + static_cast<size_t>(r0 + r) * k;
    acc0[r] = acc1[r] = _mm512_setzero_ps();
  }
  int c = 0;
  for (; c + 2 <= k; c += 2) {
    const char* line = reinterpret_cast<const char*>(base + (g0 + static_cast<size_t>(c) * kGroupRows) * kElem);
    _mm_prefetch(line + kPrefetchBytes, _MM_HINT_T0);
    if constexpr (kElem == 4) _mm_prefetch(line + 64 + kPrefetchBytes, _MM_HINT_T0);
    const __m512 w0 = load_column<T>(base, g0 + static_cast<size_t>(c) * kGroupRows);
    const __m512 w1 = load_column<T>(base, g0 + static_cast<size_t>(c + 1) * kGroupRows);
    for (int r = 0; r < M; ++r) {
      acc0[r] = _mm512_fmadd_ps(w0, _mm512_set1_ps(xr[r][c]), acc0[r]);
      acc1[r] = _mm512_fmadd_ps(w1, _mm512_set1_ps(xr[r][c + 1]), acc1[r]);
    }
  }
  if (c < k) {
    const __m512 w0 = load_column<T>(base, g0 + static_cast<size_t>(c) * kGroupRows);
    for (int r = 0; r < M; ++r) acc0[r] = _mm512_fmadd_ps(w0, _mm512_set1_ps(xr[r][c]), acc0[r]);
  }
  for (int r = 0; r < M; ++r) out[r] = _mm512_add_ps(acc0[r], acc1[r]);
}

// Writes out[r] (16 outputs j .. j+15 of x row r0 + r, the first nj of them real) with bias and
// accumulation.
inline void store_group(const GemvArgs& a, int j, int nj, int r0, int mr, const __m512* out) {
  const __mmask16 mk = static_cast<__mmask16>((1u << nj) - 1);
  const __m512 bias = a.bias != nullptr ? _mm512_maskz_loadu_ps(mk, a.bias + j) : _mm512_setzero_ps();
  for (int r = 0; r < mr; ++r) {
    float* yp = a.y + static_cast<size_t>(r0 + r) * a.n + j;
    __m512 v = _mm512_add_ps(out[r], bias);
    if (a.accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mk, yp));
    _mm512_mask_storeu_ps(yp, mk, v);
  }
}

// One group of 16 q8 weight rows (interleaved layout, weight_matrix.h) against x rows r0 .. r0+M-1:
// out[r] lane l = w row 16g + l · x row r0 + r. Per 4-byte column step one 64-byte load feeds a
// vpdpbusd with x's 4 bytes broadcast; two interleaved int32 chains per x row hide its latency.
template <int M>
inline void group_q8(const GemvArgs& a, int g, int r0, __m512 out[4]) {
  const QuantizedRows& xq = *a.xq;
  const int nb = xq.blocks;
  const uint8_t* wg = static_cast<const uint8_t*>(a.w->data) + static_cast<size_t>(g) * nb * 512;
  const uint16_t* sg = a.w->scales + static_cast<size_t>(g) * nb * kGroupRows;
  const int32_t* xr[M];
  const float* dr[M];
  const int32_t* cr[M];
  __m512 acc[M];
  for (int r = 0; r < M; ++r) {
    xr[r] = reinterpret_cast<const int32_t*>(xq.q + static_cast<size_t>(r0 + r) * xq.kpad);
    dr[r] = xq.d + static_cast<size_t>(r0 + r) * nb;
    cr[r] = xq.corr + static_cast<size_t>(r0 + r) * nb;
    acc[r] = _mm512_setzero_ps();
  }
  for (int b = 0; b < nb; ++b) {
    const uint8_t* wb = wg + static_cast<size_t>(b) * 512;
    __m512i even[M], odd[M];
    for (int r = 0; r < M; ++r) {
      even[r] = _mm512_set1_epi32(cr[r][b]);
      odd[r] = _mm512_setzero_si512();
    }
    for (int t = 0; t < 8; t += 2) {
      _mm_prefetch(reinterpret_cast<const char*>(wb + t * 64 + kPrefetchBytes), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(wb + t * 64 + 64 + kPrefetchBytes), _MM_HINT_T0);
      const __m512i w0 = _mm512_loadu_si512(wb + t * 64);
      const __m512i w1 = _mm512_loadu_si512(wb + t * 64 + 64);
      for (int r = 0; r < M; ++r) {
        even[r] = _mm512_dpbusd_epi32(even[r], w0, _mm512_set1_epi32(xr[r][b * 8 + t]));
        odd[r] = _mm512_dpbusd_epi32(odd[r], w1, _mm512_set1_epi32(xr[r][b * 8 + t + 1]));
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sg + b * kGroupRows)));
    for (int r = 0; r < M; ++r) {
      const __m512 dot = _mm512_cvtepi32_ps(_mm512_add_epi32(even[r], odd[r]));
      acc[r] = _mm512_fmadd_ps(dot, _mm512_mul_ps(dw, _mm512_set1_ps(dr[r][b])), acc[r]);
    }
  }
  for (int r = 0; r < M; ++r) out[r] = acc[r];
}

// q8: output features [n0, n1) (n0 a multiple of 16) one group of 16 rows at a time.
void rows_q8(const GemvArgs& a, int n0, int n1) {
  for (int j = n0; j < n1; j += kGroupRows) {
    const int nj = std::min(kGroupRows, n1 - j);
    for (int r0 = 0; r0 < a.m; r0 += 4) {
      __m512 out[kTileRows];
      const int mr = std::min(4, a.m - r0);
      switch (mr) {
        case 4: group_q8<4>(a, j / kGroupRows, r0, out); break;
        case 3: group_q8<3>(a, j / kGroupRows, r0, out); break;
        case 2: group_q8<2>(a, j / kGroupRows, r0, out); break;
        default: group_q8<1>(a, j / kGroupRows, r0, out); break;
      }
      store_group(a, j, nj, r0, mr, out);
    }
  }
}

// f32 / bf16 / f16: output features [n0, n1) (n0 a multiple of 16) one group of 16 rows at a
// time, x rows 8 at a time.
template <WeightType T>
void rows(const GemvArgs& a, int n0, int n1) {
  for (int j = n0; j < n1; j += kGroupRows) {
    const int nj = std::min(kGroupRows, n1 - j);
    const int g = j / kGroupRows;
    for (int r0 = 0; r0 < a.m; r0 += kTileRows) {
      __m512 out[kTileRows];
      const int mr = std::min(kTileRows, a.m - r0);
      switch (mr) {
        case 8: group_float<T, 8>(a, g, r0, out); break;
        case 7: group_float<T, 7>(a, g, r0, out); break;
        case 6: group_float<T, 6>(a, g, r0, out); break;
        case 5: group_float<T, 5>(a, g, r0, out); break;
        case 4: group_float<T, 4>(a, g, r0, out); break;
        case 3: group_float<T, 3>(a, g, r0, out); break;
        case 2: group_float<T, 2>(a, g, r0, out); break;
        default: group_float<T, 1>(a, g, r0, out); break;
      }
      store_group(a, j, nj, r0, mr, out);
    }
  }
}

}  // namespace

const GemvTable& gemv_avx512() {
  static const GemvTable t{{rows<WeightType::kF32>, rows<WeightType::kBF16>, rows<WeightType::kF16>, rows_q8}};
  return t;
}

}  // namespace ragd::kernels::detail
