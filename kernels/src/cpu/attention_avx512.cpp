// AVX-512 paths of attention, compiled for AVX-512 only and called where the CPU has it
// (cpu_features.h):
//   decode: one pass for head_dim 16, 32, 64, 96 or 128: chunks of 16 keys stream past the rows of
//     a GQA group (scores, online softmax update, o = o · α + Σ p · v), each row's query and output
//     in registers while it works on a chunk; K and V read as stored (f32, bf16 widened by a shift,
//     int8 widened and scaled once per key);
//   prefill: the online-softmax update of a chunk of scores (max, exp, sum on 16 lanes).
#include <immintrin.h>

// No standard-library containers or out-of-line templates here: a template instantiated in this
// file would be compiled for AVX-512, and the linker may pick that copy for the whole program.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "attention_avx512.h"
#include "exp_poly.h"

// GCC 12's AVX-512 headers start some intrinsics from _mm512_undefined_*(), which its own
// uninitialized-use analysis reports once they are inlined here.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace ragd::kernels::detail {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Query rows (heads of the KV heads one call walks) the decode kernel takes; more use the portable
// kernel.
constexpr int kMaxRows = 256;

template <KvDtype DT>
constexpr int sizeof_dtype() {
  return DT == KvDtype::kF32 ? 4 : DT == KvDtype::kBF16 ? 2 : 1;
}

// e^x on 16 lanes: exp_approx's function (exp_poly.h); 0 below kLo, including -inf.
inline __m512 exp16(__m512 x) {
  using namespace exp_poly;
  const __mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kLo), _CMP_LT_OQ);
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kLo)), _mm512_set1_ps(kHi));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kP0);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP5));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  const __m512 e = _mm512_scalef_ps(y, n);
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~under), e);
}

// All rows of the GQA group walk the keys together, chunk by chunk, so each chunk of K and V (16
// keys) is read from memory once and then from L1 for the group's other rows; a row's running
// output lives in `o` between chunks (loaded and stored once per chunk, not per key).
// Sums each of a[0..15] across its lanes: lane t of the result is Σ a[t] (a transpose-and-add
// tree: 45 shuffles and adds for 16 sums, where one reduction each takes about 8).
inline __m512 sum16(__m512 a[16]) {
  __m512 u[8], w[4];
  for (int i = 0; i < 8; ++i) {
    u[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  }
  for (int i = 0; i < 4; ++i) {
    w[i] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // w[i]: 128-bit lane L holds lane L's partial sums of keys 4i .. 4i+3.
  const __m512 z01 = _mm512_add_ps(_mm512_shuffle_f32x4(w[0], w[1], 0x44), _mm512_shuffle_f32x4(w[0], w[1], 0xee));
  const __m512 z23 = _mm512_add_ps(_mm512_shuffle_f32x4(w[2], w[3], 0x44), _mm512_shuffle_f32x4(w[2], w[3], 0xee));
  return _mm512_add_ps(_mm512_shuffle_f32x4(z01, z23, 0x88), _mm512_shuffle_f32x4(z01, z23, 0xdd));
}

// 16 stored values at element index e of a K or V array of type DT, widened to f32 (int8 values
// come back unscaled: the caller applies the row's scale once per key, not once per value).
template <KvDtype DT>
inline __m512 load16(const void* base, size_t e) {
  if constexpr (DT == KvDtype::kF32) {
    return _mm512_loadu_ps(static_cast<const float*>(base) + e);
  } else if constexpr (DT == KvDtype::kBF16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(base) + e));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const int8_t*>(base) + e));
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b));
  }
}

template <KvDtype DT>
inline void prefetch_row(const void* base, size_t e, int d) {
  const char* p = static_cast<const char*>(base) + e * sizeof_dtype<DT>();
  for (int c = 0; c < d * sizeof_dtype<DT>(); c += 64) _mm_prefetch(p + c, _MM_HINT_T0);
}

template <int V, KvDtype DT>  // V = head_dim / 16
void rows_impl(const float* q, int group, const PagedKv& kv, int32_t q_pos, int g0, int ng, int j0, int j1,
               float* o, float* lse) {
  constexpr int d = V * 16;
  constexpr bool kScaled = DT == KvDtype::kInt8;
  const size_t tok = static_cast<size_t>(kv.num_kv_heads) * d;
  const int rows = ng * group;  // <= kMaxRows, checked by the caller
  // Per row: running max and sum.
  float mrow[kMaxRows], lrow[kMaxRows];
  for (int r = 0; r < rows; ++r) {
    mrow[r] = kNegInf;
    lrow[r] = 0.0f;
  }
  for (size_t i = 0; i < static_cast<size_t>(rows) * d; ++i) o[i] = 0.0f;
  for (int j = j0; j < j1;) {
    // Element index of each key of this chunk (head g0), walking the pages: one division per
    // chunk, not per key.
    size_t ke[16];
    const int nt = std::min(16, j1 - j);
    {
      int blk = j / kv.block_size, slot = j % kv.block_size;
      for (int t = 0; t < nt; ++t) {
        ke[t] = (static_cast<size_t>(kv.block_table[blk]) * kv.block_size + slot) * tok + static_cast<size_t>(g0) * d;
        if (++slot == kv.block_size) slot = 0, ++blk;
      }
      // Prefetch the next chunk's first token (the heads this call reads) while this one computes.
      if (j + nt < j1) {
        const size_t off = (static_cast<size_t>(kv.block_table[blk]) * kv.block_size + slot) * tok + static_cast<size_t>(g0) * d;
        prefetch_row<DT>(kv.k, off, ng * d);
        prefetch_row<DT>(kv.v, off, ng * d);
      }
    }
    const __mmask16 valid = static_cast<__mmask16>((1u << nt) - 1);
    __mmask16 vis = valid;
    if (kv.key_pos != nullptr) {
      const __m512i kp = _mm512_maskz_loadu_epi32(valid, kv.key_pos + j);
      vis = _mm512_mask_cmp_epi32_mask(valid, kp, _mm512_set1_epi32(q_pos), _MM_CMPINT_LE);
    }
    // The chunk's tokens hold every KV head side by side: all heads of the range are done while
    // the chunk's rows are in L1, so memory is read in whole rows, not one head's slice at a time.
    for (int gi = 0; gi < ng; ++gi) {
      const size_t hoff = static_cast<size_t>(gi) * d;
      alignas(64) float ks[16], vs[16];  // int8: the keys' and values' scales
      if constexpr (kScaled) {
        for (int t = 0; t < 16; ++t) {
          ks[t] = t < nt ? kv.k_scale[(ke[t] + hoff) / d] : 0.0f;
          vs[t] = t < nt ? kv.v_scale[(ke[t] + hoff) / d] : 0.0f;
        }
      }
      for (int rg = 0; rg < group; ++rg) {
        const int r = gi * group + rg;
        const float* qr = q + static_cast<size_t>(r) * d;
        __m512 qv[V];
        for (int c = 0; c < V; ++c) qv[c] = _mm512_loadu_ps(qr + 16 * c);
        __m512 acc[16];
        for (int t = 0; t < 16; ++t) {
          if (t >= nt) {
            acc[t] = _mm512_setzero_ps();
            continue;
          }
          acc[t] = _mm512_mul_ps(qv[0], load16<DT>(kv.k, ke[t] + hoff));
          for (int c = 1; c < V; ++c) acc[t] = _mm512_fmadd_ps(qv[c], load16<DT>(kv.k, ke[t] + hoff + 16 * c), acc[t]);
        }
        __m512 sums = sum16(acc);
        if constexpr (kScaled) sums = _mm512_mul_ps(sums, _mm512_load_ps(ks));
        const __m512 sv = _mm512_mask_mov_ps(_mm512_set1_ps(kNegInf), vis, sums);
        const float m = mrow[r];
        const float mx = std::max(m, _mm512_reduce_max_ps(sv));
        if (mx == kNegInf) continue;  // nothing visible to this row yet
        const float alpha = m == kNegInf ? 0.0f : std::exp(m - mx);
        const __m512 pv = exp16(_mm512_sub_ps(sv, _mm512_set1_ps(mx)));
        lrow[r] = lrow[r] * alpha + _mm512_reduce_add_ps(pv);
        mrow[r] = mx;
        alignas(64) float p[16];
        // int8: each value row's scale folds into its weight.
        if constexpr (kScaled) {
          _mm512_store_ps(p, _mm512_mul_ps(pv, _mm512_load_ps(vs)));
        } else {
          _mm512_store_ps(p, pv);
        }
        float* orow = o + static_cast<size_t>(r) * d;
        __m512 ov[V];
        const __m512 av = _mm512_set1_ps(alpha);
        for (int c = 0; c < V; ++c) ov[c] = _mm512_mul_ps(_mm512_loadu_ps(orow + 16 * c), av);
        for (int t = 0; t < nt; ++t) {
          const __m512 pt = _mm512_set1_ps(p[t]);
          for (int c = 0; c < V; ++c) ov[c] = _mm512_fmadd_ps(pt, load16<DT>(kv.v, ke[t] + hoff + 16 * c), ov[c]);
        }
        for (int c = 0; c < V; ++c) _mm512_storeu_ps(orow + 16 * c, ov[c]);
      }
    }
    j += nt;
  }
  for (int r = 0; r < rows; ++r) {
    float* orow = o + static_cast<size_t>(r) * d;
    if (mrow[r] == kNegInf) {  // no visible key in this range: the identity state
      for (int c = 0; c < d; ++c) orow[c] = 0.0f;
      lse[r] = kNegInf;
      continue;
    }
    const __m512 inv = _mm512_set1_ps(1.0f / lrow[r]);
    for (int c = 0; c < V; ++c) _mm512_storeu_ps(orow + 16 * c, _mm512_mul_ps(_mm512_loadu_ps(orow + 16 * c), inv));
    lse[r] = mrow[r] + std::log(lrow[r]);
  }
}

template <int V>
void rows_for_dtype(const float* q, int group, const PagedKv& kv, int32_t q_pos, int g0, int ng, int j0, int j1,
                    float* o, float* lse) {
  switch (kv.dtype) {
    case KvDtype::kF32: rows_impl<V, KvDtype::kF32>(q, group, kv, q_pos, g0, ng, j0, j1, o, lse); break;
    case KvDtype::kBF16: rows_impl<V, KvDtype::kBF16>(q, group, kv, q_pos, g0, ng, j0, j1, o, lse); break;
    case KvDtype::kInt8: rows_impl<V, KvDtype::kInt8>(q, group, kv, q_pos, g0, ng, j0, j1, o, lse); break;
  }
}

}  // namespace

void softmax_chunk_avx512(int rows, int n, float* s, float* m, float* l, float* alpha) {
  const int full = n & ~15;
  const __mmask16 tail = static_cast<__mmask16>((1u << (n - full)) - 1);
  for (int r = 0; r < rows; ++r) {
    float* sr = s + static_cast<size_t>(r) * n;
    __m512 mx = _mm512_set1_ps(kNegInf);
    for (int j = 0; j < full; j += 16) mx = _mm512_max_ps(mx, _mm512_loadu_ps(sr + j));
    if (tail) mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(_mm512_set1_ps(kNegInf), tail, sr + full));
    const float m_new = std::max(m[r], _mm512_reduce_max_ps(mx));
    if (m_new == kNegInf) {  // nothing visible yet
      alpha[r] = 1.0f;
      for (int j = 0; j < n; ++j) sr[j] = 0.0f;
      continue;
    }
    alpha[r] = m[r] == kNegInf ? 0.0f : std::exp(m[r] - m_new);
    const __m512 mv = _mm512_set1_ps(m_new);
    __m512 sum = _mm512_setzero_ps();
    for (int j = 0; j < full; j += 16) {
      const __m512 p = exp16(_mm512_sub_ps(_mm512_loadu_ps(sr + j), mv));
      _mm512_storeu_ps(sr + j, p);
      sum = _mm512_add_ps(sum, p);
    }
    if (tail) {
      const __m512 p = exp16(_mm512_sub_ps(_mm512_mask_loadu_ps(_mm512_set1_ps(kNegInf), tail, sr + full), mv));
      _mm512_mask_storeu_ps(sr + full, tail, p);
      sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(tail, p));
    }
    l[r] = l[r] * alpha[r] + _mm512_reduce_add_ps(sum);
    m[r] = m_new;
  }
}

namespace {

// R query rows × NV · 16 keys: R · NV accumulators; per column of q, NV loads of kt feed R · NV
// FMAs (q broadcast).
template <int R, int NV>
inline void scores_tile(int r0, int j0, int n, int d, const float* q, const float* kt, float* s) {
  __m512 acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int u = 0; u < NV; ++u) acc[r][u] = _mm512_setzero_ps();
  const float* qr = q + static_cast<size_t>(r0) * d;
  for (int c = 0; c < d; ++c) {
    const float* kr = kt + static_cast<size_t>(c) * n + j0;
    __m512 kv[NV];
    for (int u = 0; u < NV; ++u) kv[u] = _mm512_loadu_ps(kr + 16 * u);
    for (int r = 0; r < R; ++r) {
      const __m512 b = _mm512_set1_ps(qr[static_cast<size_t>(r) * d + c]);
      for (int u = 0; u < NV; ++u) acc[r][u] = _mm512_fmadd_ps(b, kv[u], acc[r][u]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int u = 0; u < NV; ++u) _mm512_storeu_ps(s + static_cast<size_t>(r0 + r) * n + j0 + 16 * u, acc[r][u]);
}

}  // namespace

void attention_scores_avx512(int rows, int n, int d, const float* q, const float* kt, float* s) {
  // 64 keys of kt (d · 64 floats, 16 KiB at d = 64) stay in L1 while every row passes over them.
  for (int j0 = 0; j0 < n; j0 += 64) {
    const int nk = std::min(64, n - j0);
    int r0 = 0;
    if (nk == 64) {
      for (; r0 + 4 <= rows; r0 += 4) scores_tile<4, 4>(r0, j0, n, d, q, kt, s);
      for (; r0 < rows; ++r0) scores_tile<1, 4>(r0, j0, n, d, q, kt, s);
    } else {
      for (int j = j0; j < j0 + nk; j += 16)
        for (int r = 0; r < rows; ++r) scores_tile<1, 1>(r, j, n, d, q, kt, s);
    }
  }
}

namespace {

// o rows r0 .. r0+R-1 += p · v, V = d / 16 vectors per row.
template <int R, int V>
inline void pv_rows(int r0, int n, const float* p, const float* v, float* o) {
  constexpr int d = V * 16;
  __m512 acc[R][V];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < V; ++c) acc[r][c] = _mm512_loadu_ps(o + static_cast<size_t>(r0 + r) * d + 16 * c);
  for (int j = 0; j < n; ++j) {
    __m512 vv[V];
    for (int c = 0; c < V; ++c) vv[c] = _mm512_loadu_ps(v + static_cast<size_t>(j) * d + 16 * c);
    for (int r = 0; r < R; ++r) {
      const __m512 pb = _mm512_set1_ps(p[static_cast<size_t>(r0 + r) * n + j]);
      for (int c = 0; c < V; ++c) acc[r][c] = _mm512_fmadd_ps(pb, vv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < V; ++c) _mm512_storeu_ps(o + static_cast<size_t>(r0 + r) * d + 16 * c, acc[r][c]);
}

template <int V>
void pv_all(int rows, int n, const float* p, const float* v, float* o) {
  constexpr int R = V <= 4 ? 4 : 2;  // R · V accumulators stay within 16 registers
  int r0 = 0;
  for (; r0 + R <= rows; r0 += R) pv_rows<R, V>(r0, n, p, v, o);
  for (; r0 < rows; ++r0) pv_rows<1, V>(r0, n, p, v, o);
}

}  // namespace

void attention_pv_avx512(int rows, int n, int d, const float* p, const float* v, float* o) {
  switch (d / 16) {
    case 1: pv_all<1>(rows, n, p, v, o); break;
    case 2: pv_all<2>(rows, n, p, v, o); break;
    case 3: pv_all<3>(rows, n, p, v, o); break;
    case 4: pv_all<4>(rows, n, p, v, o); break;
    case 5: pv_all<5>(rows, n, p, v, o); break;
    case 6: pv_all<6>(rows, n, p, v, o); break;
    case 7: pv_all<7>(rows, n, p, v, o); break;
    default: pv_all<8>(rows, n, p, v, o); break;
  }
}

bool decode_range_avx512(const float* q, int group, const PagedKv& kv, int32_t q_pos, int g0, int ng, int j0, int j1,
                         float* o, float* lse) {
  if (static_cast<int64_t>(group) * ng > kMaxRows) return false;
  switch (kv.head_dim) {
    case 64: rows_for_dtype<4>(q, group, kv, q_pos, g0, ng, j0, j1, o, lse); return true;
    case 128: rows_for_dtype<8>(q, group, kv, q_pos, g0, ng, j0, j1, o, lse); return true;
    case 32: rows_for_dtype<2>(q, group, kv, q_pos, g0, ng, j0, j1, o, lse); return true;
    case 16: rows_for_dtype<1>(q, group, kv, q_pos, g0, ng, j0, j1, o, lse); return true;
    case 96: rows_for_dtype<6>(q, group, kv, q_pos, g0, ng, j0, j1, o, lse); return true;
    default: return false;
  }
}

bool decode_avx512_takes(int head_dim, int rows) {
  const bool dim = head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 96 || head_dim == 128;
  return dim && rows <= kMaxRows;
}

}  // namespace ragd::kernels::detail
