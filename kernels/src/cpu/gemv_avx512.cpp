// AVX-512 small-batch kernels (F, BW, VL, VNNI; F16C): this file is compiled for that instruction
// set and only called where the CPU has it (cpu_features.cpp).
//   f32 / bf16 / f16: 4 weight rows × up to 4 x rows per tile, 16 lanes; bf16 and f16 widen to f32
//     in registers (exact) and accumulate in f32; software prefetch runs ahead of each row.
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

template <WeightType T>
inline __m512 load16(const uint8_t* row, int i) {
  if constexpr (T == WeightType::kF32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + i);
  } else {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + i));
    if constexpr (T == WeightType::kBF16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
  }
}

template <WeightType T>
inline __m512 load16_mask(const uint8_t* row, int i, __mmask16 m) {
  if constexpr (T == WeightType::kF32) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + i);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + i);
    if constexpr (T == WeightType::kBF16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
  }
}

// Rows of x per f32 / bf16 / f16 tile: 4 × 6 accumulators, 4 weight vectors and one x vector fill
// 29 of the 32 registers; each widened weight vector feeds 6 FMAs.
constexpr int kTileRows = 6;

// out[q][r] = w row q · x row r0 + r, q < 4, r < M.
template <WeightType T, int M>
inline void tile_float(const GemvArgs& a, int r0, const uint8_t* const wr[4], size_t prefetch_ahead,
                       float out[4][kTileRows]) {
  constexpr size_t kElem = T == WeightType::kF32 ? 4 : 2;
  __m512 acc[4][M];
  const float* xr[M];
  for (int r = 0; r < M; ++r) {
    xr[r] = a.x + static_cast<size_t>(r0 + r) * a.k;
    for (int q = 0; q < 4; ++q) acc[q][r] = _mm512_setzero_ps();
  }
  const int k = a.k;
  int i = 0;
  for (; i + 16 <= k; i += 16) {
    __m512 wv[4];
    for (int q = 0; q < 4; ++q) {
      _mm_prefetch(reinterpret_cast<const char*>(wr[q] + i * kElem + prefetch_ahead), _MM_HINT_T0);
      wv[q] = load16<T>(wr[q], i);
    }
    for (int r = 0; r < M; ++r) {
      const __m512 xv = _mm512_loadu_ps(xr[r] + i);
      for (int q = 0; q < 4; ++q) acc[q][r] = _mm512_fmadd_ps(wv[q], xv, acc[q][r]);
    }
  }
  if (i < k) {
    const __mmask16 mk = static_cast<__mmask16>((1u << (k - i)) - 1);
    __m512 wv[4];
    for (int q = 0; q < 4; ++q) wv[q] = load16_mask<T>(wr[q], i, mk);
    for (int r = 0; r < M; ++r) {
      const __m512 xv = _mm512_maskz_loadu_ps(mk, xr[r] + i);
      for (int q = 0; q < 4; ++q) acc[q][r] = _mm512_fmadd_ps(wv[q], xv, acc[q][r]);
    }
  }
  for (int q = 0; q < 4; ++q)
    for (int r = 0; r < M; ++r) out[q][r] = _mm512_reduce_add_ps(acc[q][r]);
}

// One group of 16 q8 weight rows (interleaved layout, weight_matrix.h) against x rows r0 .. r0+M-1:
// out[r] lane l = w row 16g + l · x row r0 + r. Per 4-byte column step one 64-byte load feeds a
// vpdpbusd with x's 4 bytes broadcast; two interleaved int32 chains per x row hide its latency.
template <int M>
inline void group_q8(const GemvArgs& a, int g, int r0, __m512 out[4]) {
  const QuantizedRows& xq = *a.xq;
  const int nb = xq.blocks;
  const uint8_t* wg = static_cast<const uint8_t*>(a.w->data) + static_cast<size_t>(g) * nb * 512;
  const uint16_t* sg = a.w->scales + static_cast<size_t>(g) * nb * kQ8Rows;
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
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sg + b * kQ8Rows)));
    for (int r = 0; r < M; ++r) {
      const __m512 dot = _mm512_cvtepi32_ps(_mm512_add_epi32(even[r], odd[r]));
      acc[r] = _mm512_fmadd_ps(dot, _mm512_mul_ps(dw, _mm512_set1_ps(dr[r][b])), acc[r]);
    }
  }
  for (int r = 0; r < M; ++r) out[r] = acc[r];
}

// q8: output features [n0, n1) (n0 a multiple of 16) one group of 16 rows at a time.
void rows_q8(const GemvArgs& a, int n0, int n1) {
  for (int j = n0; j < n1; j += kQ8Rows) {
    const int nj = std::min(kQ8Rows, n1 - j);
    const __mmask16 mk = static_cast<__mmask16>((1u << nj) - 1);
    const __m512 bias = a.bias != nullptr ? _mm512_maskz_loadu_ps(mk, a.bias + j) : _mm512_setzero_ps();
    for (int r0 = 0; r0 < a.m; r0 += 4) {
      __m512 out[4];
      const int mr = std::min(4, a.m - r0);
      switch (mr) {
        case 4: group_q8<4>(a, j / kQ8Rows, r0, out); break;
        case 3: group_q8<3>(a, j / kQ8Rows, r0, out); break;
        case 2: group_q8<2>(a, j / kQ8Rows, r0, out); break;
        default: group_q8<1>(a, j / kQ8Rows, r0, out); break;
      }
      for (int r = 0; r < mr; ++r) {
        float* yp = a.y + static_cast<size_t>(r0 + r) * a.n + j;
        __m512 v = _mm512_add_ps(out[r], bias);
        if (a.accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mk, yp));
        _mm512_mask_storeu_ps(yp, mk, v);
      }
    }
  }
}

// f32 / bf16 / f16: output features [n0, n1) in groups of 4 weight rows (a short last group
// repeats its last row and drops the extra results), x rows in groups of 4.
template <WeightType T>
void rows(const GemvArgs& a, int n0, int n1) {
  const auto* base = static_cast<const uint8_t*>(a.w->data);
  const size_t stride = a.w->row_stride();
  // Rows are contiguous, so the same column of the next 4-row tile is 4 rows ahead. For 16-bit
  // rows at decode, prefetching there keeps short rows (k of a few hundred) streaming where a fixed
  // distance falls into rows already being read (measured 1.25x decode at k = 512); for f32 the
  // fixed distance measured better.
  const size_t ahead =
      T != WeightType::kF32 && a.m <= 2 ? std::max<size_t>(4 * stride, kPrefetchBytes) : kPrefetchBytes;
  for (int j = n0; j < n1; j += 4) {
    const int nj = std::min(4, n1 - j);
    const uint8_t* wr[4];
    for (int q = 0; q < 4; ++q) wr[q] = base + static_cast<size_t>(j + std::min(q, nj - 1)) * stride;
    for (int r0 = 0; r0 < a.m; r0 += kTileRows) {
      float out[4][kTileRows];
      const int mr = std::min(kTileRows, a.m - r0);
      switch (mr) {
        case 6: tile_float<T, 6>(a, r0, wr, ahead, out); break;
        case 5: tile_float<T, 5>(a, r0, wr, ahead, out); break;
        case 4: tile_float<T, 4>(a, r0, wr, ahead, out); break;
        case 3: tile_float<T, 3>(a, r0, wr, ahead, out); break;
        case 2: tile_float<T, 2>(a, r0, wr, ahead, out); break;
        default: tile_float<T, 1>(a, r0, wr, ahead, out); break;
      }
      for (int q = 0; q < nj; ++q)
        for (int r = 0; r < mr; ++r) put_result(a, r0 + r, j + q, out[q][r]);
    }
  }
}

}  // namespace

const GemvTable& gemv_avx512() {
  static const GemvTable t{"avx512",
                           {rows<WeightType::kF32>, rows<WeightType::kBF16>, rows<WeightType::kF16>, rows_q8}};
  return t;
}

}  // namespace ragd::kernels::detail
