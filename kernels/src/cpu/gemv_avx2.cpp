// AVX2 small-batch kernels (AVX2, FMA, F16C): compiled for that instruction set and only called
// where the CPU has it (cpu_features.cpp).
//   f32 / bf16 / f16: half a group (8 weight rows, stored column by column) × up to 4 x rows per
//     tile, one lane per output row, widened to f32 in registers.
//   q8: 8 interleaved weight rows per 32-byte load against x's 4 bytes broadcast: vpmaddubsw on |w|
//     and x with w's sign (no int16 saturation: both are within ±127), vpmaddwd to one int32 lane
//     per output, converted and scaled per block by d_w · d_x.
#include <immintrin.h>

#include <algorithm>

#include "gemv.h"

namespace ragd::kernels::detail {

namespace {

constexpr int kPrefetchBytes = 1024;


// 8 weights of one column of a half group (8 rows) at element index idx, widened to f32.
template <WeightType T>
inline __m256 load_column8(const uint8_t* base, size_t idx) {
  if constexpr (T == WeightType::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(base) + idx);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(base) + idx));
    if constexpr (T == WeightType::kBF16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
  }
}

// Half h of a group of 16 weight rows (f32 / bf16 / f16, grouped layout) against x rows r0 ..
// r0+M-1: out[r] lane l = w row 16g + 8h + l · x row r0 + r.
template <WeightType T, int M>
inline void half_group_float(const GemvArgs& a, int g, int h, int r0, __m256 out[4]) {
  constexpr size_t kElem = T == WeightType::kF32 ? 4 : 2;
  const int k = a.k;
  const auto* base = static_cast<const uint8_t*>(a.w->data);
  const size_t g0 = static_cast<size_t>(g) * k * kGroupRows + static_cast<size_t>(h) * 8;
  const float* xr[M];
  __m256 acc0[M], acc1[M];
  for (int r = 0; r < M; ++r) {
    xr[r] = a.x + static_cast<size_t>(r0 + r) * k;
    acc0[r] = acc1[r] = _mm256_setzero_ps();
  }
  int c = 0;
  for (; c + 2 <= k; c += 2) {
    _mm_prefetch(reinterpret_cast<const char*>(base + (g0 + static_cast<size_t>(c) * kGroupRows) * kElem) + kPrefetchBytes,
                 _MM_HINT_T0);
    const __m256 w0 = load_column8<T>(base, g0 + static_cast<size_t>(c) * kGroupRows);
    const __m256 w1 = load_column8<T>(base, g0 + static_cast<size_t>(c + 1) * kGroupRows);
    for (int r = 0; r < M; ++r) {
      acc0[r] = _mm256_fmadd_ps(w0, _mm256_set1_ps(xr[r][c]), acc0[r]);
      acc1[r] = _mm256_fmadd_ps(w1, _mm256_set1_ps(xr[r][c + 1]), acc1[r]);
    }
  }
  if (c < k) {
    const __m256 w0 = load_column8<T>(base, g0 + static_cast<size_t>(c) * kGroupRows);
    for (int r = 0; r < M; ++r) acc0[r] = _mm256_fmadd_ps(w0, _mm256_set1_ps(xr[r][c]), acc0[r]);
  }
  for (int r = 0; r < M; ++r) out[r] = _mm256_add_ps(acc0[r], acc1[r]);
}

// Half h of a group of 16 q8 weight rows (rows 16g + 8h .. + 7) against x rows r0 .. r0+M-1:
// out[r] lane l = w row 16g + 8h + l · x row r0 + r.
template <int M>
inline void half_group_q8(const GemvArgs& a, int g, int h, int r0, __m256 out[4]) {
  const QuantizedRows& xq = *a.xq;
  const int nb = xq.blocks;
  const uint8_t* wg = static_cast<const uint8_t*>(a.w->data) + static_cast<size_t>(g) * nb * 512 + h * 32;
  const uint16_t* sg = a.w->scales + static_cast<size_t>(g) * nb * kGroupRows + h * 8;
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i ones = _mm256_set1_epi16(1);
  const int32_t* xr[M];
  const float* dr[M];
  __m256 acc[M];
  for (int r = 0; r < M; ++r) {
    xr[r] = reinterpret_cast<const int32_t*>(xq.q + static_cast<size_t>(r0 + r) * xq.kpad);
    dr[r] = xq.d + static_cast<size_t>(r0 + r) * nb;
    acc[r] = _mm256_setzero_ps();
  }
  for (int b = 0; b < nb; ++b) {
    const uint8_t* wb = wg + static_cast<size_t>(b) * 512;
    __m256i dot[M];
    for (int r = 0; r < M; ++r) dot[r] = _mm256_setzero_si256();
    for (int t = 0; t < 8; ++t) {
      _mm_prefetch(reinterpret_cast<const char*>(wb + t * 64 + kPrefetchBytes), _MM_HINT_T0);
      const __m256i sw = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + t * 64)), bias);
      const __m256i aw = _mm256_abs_epi8(sw);
      for (int r = 0; r < M; ++r) {
        const __m256i xs = _mm256_sign_epi8(_mm256_set1_epi32(xr[r][b * 8 + t]), sw);
        dot[r] = _mm256_add_epi32(dot[r], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, xs), ones));
      }
    }
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sg + b * kGroupRows)));
    for (int r = 0; r < M; ++r) {
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r]), _mm256_mul_ps(dw, _mm256_set1_ps(dr[r][b])), acc[r]);
    }
  }
  for (int r = 0; r < M; ++r) out[r] = acc[r];
}

// q8: output features [n0, n1) (n0 a multiple of 16) eight rows at a time.
void rows_q8(const GemvArgs& a, int n0, int n1) {
  for (int j = n0; j < n1; j += 8) {
    const int nj = std::min(8, n1 - j);
    for (int r0 = 0; r0 < a.m; r0 += 4) {
      __m256 out[4];
      const int mr = std::min(4, a.m - r0);
      const int g = j / kGroupRows, h = (j % kGroupRows) / 8;
      switch (mr) {
        case 4: half_group_q8<4>(a, g, h, r0, out); break;
        case 3: half_group_q8<3>(a, g, h, r0, out); break;
        case 2: half_group_q8<2>(a, g, h, r0, out); break;
        default: half_group_q8<1>(a, g, h, r0, out); break;
      }
      for (int r = 0; r < mr; ++r) {
        alignas(32) float v[8];
        _mm256_store_ps(v, out[r]);
        for (int l = 0; l < nj; ++l) put_result(a, r0 + r, j + l, v[l]);
      }
    }
  }
}

// f32 / bf16 / f16: output features [n0, n1) (n0 a multiple of 16) eight rows at a time.
template <WeightType T>
void rows(const GemvArgs& a, int n0, int n1) {
  for (int j = n0; j < n1; j += 8) {
    const int nj = std::min(8, n1 - j);
    const int g = j / kGroupRows, h = (j % kGroupRows) / 8;
    for (int r0 = 0; r0 < a.m; r0 += 4) {
      __m256 out[4];
      const int mr = std::min(4, a.m - r0);
      switch (mr) {
        case 4: half_group_float<T, 4>(a, g, h, r0, out); break;
        case 3: half_group_float<T, 3>(a, g, h, r0, out); break;
        case 2: half_group_float<T, 2>(a, g, h, r0, out); break;
        default: half_group_float<T, 1>(a, g, h, r0, out); break;
      }
      for (int r = 0; r < mr; ++r) {
        alignas(32) float v[8];
        _mm256_store_ps(v, out[r]);
        for (int l = 0; l < nj; ++l) put_result(a, r0 + r, j + l, v[l]);
      }
    }
  }
}

}  // namespace

const GemvTable& gemv_avx2() {
  static const GemvTable t{{rows<WeightType::kF32>, rows<WeightType::kBF16>, rows<WeightType::kF16>, rows_q8}};
  return t;
}

}  // namespace ragd::kernels::detail
