// The attention tile pieces shared by the Hopper prefill kernels (attention_prefill_sm90.cu: the
// pipelined and serial schedules; attention_prefill_sm90_ws.cu: the warp-specialised one): 128-query
// CTAs of 64-row warpgroups, 128-key tiles in 128-byte-swizzled shared memory, the two products
// issued as wgmma, masks, the online softmax on the S fragment.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "attention_prefill.cuh"
#include "cuda_util.cuh"
#include "sm90.cuh"

namespace ragd::kernels::cuda::detail::sm90 {

constexpr int kBM = 128;  // queries per CTA: two warpgroups of 64 rows
constexpr int kBN = 128;  // keys per tile

#if RAGD_SM90A_DEVICE_CODE

// Byte offset of 16-byte chunk c (columns 8c .. 8c + 7) of row r in a swizzled [rows][D] tile.
__device__ __forceinline__ uint32_t swizzled(int rows, int r, int c) {
  return static_cast<uint32_t>((c >> 3) * rows * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

// S = Q·Kᵀ for one key tile: head_dim / 16 k-steps (column half kk / 4, 32 bytes per step within
// it), accumulated into one m64n128 fragment. Issues only (no fence, commit or wait).
template <int D>
__device__ __forceinline__ void issue_qk(float (&s)[64], uint32_t q_rows, uint32_t tk) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const uint32_t step = (kk & 3) * 32;
    const uint64_t da = sw128_desc(q_rows + (kk >> 2) * (kBM * 128) + step, 16);
    const uint64_t db = sw128_desc(tk + (kk >> 2) * (kBN * 128) + step, 16);
    wgmma_ss_m64n128(s, da, db, kk > 0 ? 1 : 0);
  }
}

// O += P·V for one key tile in k-steps of 16 keys: two S n-blocks make one A fragment; V's 16 keys
// are two 8-row atoms, 2048 bytes on from the previous step. Issues only.
template <int D>
__device__ __forceinline__ void issue_pv(float (&o)[D / 2], const uint32_t (&pf)[kBN / 8][2], uint32_t tv) {
#pragma unroll
  for (int kk = 0; kk < kBN / 16; ++kk) {
    const uint32_t a[4] = {pf[2 * kk][0], pf[2 * kk][1], pf[2 * kk + 1][0], pf[2 * kk + 1][1]};
    const uint64_t db = sw128_desc(tv + kk * 16 * 128, kBN * 128);
    if constexpr (D == 128) {
      wgmma_rs_m64n128(o, a, db);
    } else {
      wgmma_rs_m64n64(o, a, db);
    }
  }
}

// Masks of one tile of scores. Row half hr of this thread is row g + 8·hr; its 32 scores of the tile
// are s[nb·4 + 2·hr + {0,1}] (keys 8·nb + 2·tq, +1 of the tile), the other 96 in the quad's other
// lanes. By slot: key key0 + 8·nb + (e & 1) (key0 = the tile's first key + 2·tq) is seen by a row iff
// it is <= the row's limit. By position (explicit key positions, kpos = the tile's positions in
// shared memory, INT_MAX past kv_len and for holes): iff its position is <= the row's limit.
__device__ __forceinline__ void mask_by_slot(float (&s)[64], int key0, const int (&limit)[2]) {
#pragma unroll
  for (int nb = 0; nb < kBN / 8; ++nb) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (key0 + nb * 8 + (e & 1) > limit[e >> 1]) s[nb * 4 + e] = -INFINITY;
    }
  }
}
__device__ __forceinline__ void mask_by_position(float (&s)[64], const int32_t* kpos, int tq, const int (&limit)[2]) {
#pragma unroll
  for (int nb = 0; nb < kBN / 8; ++nb) {
    const int2 kp = *reinterpret_cast<const int2*>(kpos + nb * 8 + tq * 2);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if ((e & 1 ? kp.y : kp.x) > limit[e >> 1]) s[nb * 4 + e] = -INFINITY;
    }
  }
}

// Online softmax of one (masked) tile of scores, laid out as above. Writes P as bf16 pairs in the
// A-operand layout (pf[nb][hr] = keys 8·nb + 2·tq, +1) and the factor alpha[hr] that rescales the
// running O.
__device__ __forceinline__ void softmax_tile(float (&s)[64], float scale_log2, float (&m_run)[2], float (&l_run)[2],
                                             uint32_t (&pf)[kBN / 8][2], float (&alpha)[2]) {
  constexpr int kNB = kBN / 8;
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    float mx = -INFINITY;
#pragma unroll
    for (int nb = 0; nb < kNB; ++nb) mx = fmaxf(mx, fmaxf(s[nb * 4 + 2 * hr], s[nb * 4 + 2 * hr + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(m_run[hr], mx * scale_log2);
    // A row that has seen nothing yet keeps m = −inf; exponents then use 0 (every p is 0).
    const float m_use = m_new == -INFINITY ? 0.0f : m_new;
    alpha[hr] = fast_exp2(m_run[hr] - m_use);
    m_run[hr] = m_new;
    float sum = 0.0f;
#pragma unroll
    for (int nb = 0; nb < kNB; ++nb) {
      const float p0 = fast_exp2(fmaf(s[nb * 4 + 2 * hr], scale_log2, -m_use));
      const float p1 = fast_exp2(fmaf(s[nb * 4 + 2 * hr + 1], scale_log2, -m_use));
      pf[nb][hr] = pack_bf16(p0, p1, &sum);  // normalise by what P·V actually sums
    }
    l_run[hr] = l_run[hr] * alpha[hr] + sum;  // this lane's partial row sum (quad-reduced at the end)
  }
}

template <int N>
__device__ __forceinline__ void rescale(float (&o)[N], const float (&alpha)[2]) {
#pragma unroll
  for (int i = 0; i < N; i += 4) {
    o[i] *= alpha[0];
    o[i + 1] *= alpha[0];
    o[i + 2] *= alpha[1];
    o[i + 3] *= alpha[1];
  }
}

// Keeps P's registers live (and unmodified) up to this point: a wgmma reading them may still run.
__device__ __forceinline__ void hold_fragments(uint32_t (&pf)[kBN / 8][2]) {
#pragma unroll
  for (int nb = 0; nb < kBN / 8; ++nb) asm volatile("" : "+r"(pf[nb][0]), "+r"(pf[nb][1])::"memory");
}

// Gathers query rows r0 .. r0 + rows − 1 of the CTA's tile (queries m0 + r, head h) into the
// swizzled Q tile with cp.async, threads `thread` of `threads`; rows past n_q are zero-filled. The
// caller commits and waits.
template <int D>
__device__ __forceinline__ void gather_q_rows(const PrefillParams& p, int m0, int h, int r0, int rows, uint32_t sq,
                                              int thread, int threads) {
  constexpr int kVec = D / 8;
  for (int i = thread; i < rows * kVec; i += threads) {
    const int r = r0 + i / kVec, c = i % kVec;
    const bool in = m0 + r < p.n_q;
    const __nv_bfloat16* src = in ? p.q + (static_cast<size_t>(m0 + r) * p.num_heads + h) * D + c * 8 : p.q;
    cp_async16(sq + swizzled(kBM, r, c), src, in ? 16 : 0);
  }
}

// Gathers keys n0 .. n0 + kBN − 1 of kv head kvh (K and V) from their pages into one swizzled stage
// with cp.async, threads `thread` of `threads` sharing the 16-byte chunks; keys past kv_len are
// zero-filled (the pool is not read). The caller commits and waits.
template <int D>
__device__ __forceinline__ void gather_kv_tile(const PrefillParams& p, int n0, int kvh, uint32_t dk, uint32_t dv,
                                               int thread, int threads) {
  constexpr int kVec = D / 8;
  const size_t kv_row = static_cast<size_t>(p.num_kv_heads) * D;  // elements per pool token
  for (int i = thread; i < kBN * kVec; i += threads) {
    const int r = i / kVec, c = i % kVec;
    const int j = n0 + r;
    const bool in = j < p.kv_len;
    size_t off = 0;
    if (in) off = pool_row(p, j) * kv_row + static_cast<size_t>(kvh) * D + c * 8;
    const uint32_t so = swizzled(kBN, r, c);
    cp_async16(dk + so, p.k + off, in ? 16 : 0);
    cp_async16(dv + so, p.v + off, in ? 16 : 0);
  }
}

// O += P·V for one tile, issued and waited for (the serial schedule, and the pipelined schedules'
// last tile).
template <int D>
__device__ __forceinline__ void pv_now(float (&o)[D / 2], uint32_t (&pf)[kBN / 8][2], uint32_t tv) {
  wgmma_fence();
  issue_pv<D>(o, pf, tv);
  wgmma_commit();
  wgmma_wait<0>();
  fence_accumulators(o);
  hold_fragments(pf);
}

// The epilogue: row sums across the quad, O normalised and stored (rows g and g + 8 from row_q on,
// those past n_q dropped), LSE in natural log (−inf for a row that saw nothing, with o = 0).
template <int D, typename OutT>
__device__ __forceinline__ void store_rows(const PrefillParams& p, const float (&o)[D / 2], const float (&m_run)[2],
                                           const float (&l_run)[2], int row_q, int h, int tq) {
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    float l = l_run[hr];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int row = row_q + 8 * hr;
    if (row >= p.n_q) continue;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const size_t out_base = (static_cast<size_t>(row) * p.num_heads + h) * D + tq * 2;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
      store_pair<OutT>(p.out, out_base + dn * 8, o[dn * 4 + 2 * hr] * inv, o[dn * 4 + 2 * hr + 1] * inv);
    }
    if (tq == 0) {
      p.lse[static_cast<size_t>(row) * p.num_heads + h] = l > 0.0f ? (m_run[hr] + log2f(l)) * kLn2 : -INFINITY;
    }
  }
}

#endif  // RAGD_SM90A_DEVICE_CODE

}  // namespace ragd::kernels::cuda::detail::sm90
