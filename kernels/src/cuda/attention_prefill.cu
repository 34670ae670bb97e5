// Flash-attention style prefill over paged bf16 KV (see ragd/kernels/cuda/attention.h).
//
// One CTA = one head × a tile of kBM = 64 queries, 4 warps of 16 query rows each. Each warp keeps its
// Q rows (bf16 WMMA A fragments) and its O accumulator (fp32 WMMA fragments) in registers. Per
// 64-key tile:
//   K, V rows gathered from their pages into shared memory (16-byte loads);
//   S = Q·Kᵀ with bf16 WMMA (fp32 accumulate) → shared memory;
//   online softmax per row in fp32 (log2 domain), P rounded to bf16 → shared memory;
//   O *= e^(m_old − m_new) per row, then O += P·V with WMMA.
// The accumulator fragment layout is opaque, so the row of each fragment element is learnt once by
// loading a matrix of row indices into a fragment; the per-row rescale then works in registers.
// Causal CTAs stop at the last key their last query can see. Keys past kv_len are zero-filled (never
// read from the pool) and masked; rows past n_q are computed on zeros and not stored.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <climits>
#include <cmath>
#include <string>

#include "cuda_util.cuh"
#include "ragd/kernels/cuda/attention.h"

namespace ragd::kernels::cuda {
namespace {

namespace wmma = nvcuda::wmma;
using bf16 = __nv_bfloat16;

constexpr int kBM = 64;       // queries per CTA
constexpr int kBN = 64;       // keys per tile
constexpr int kWarps = 4;     // 16 query rows each
constexpr int kThreads = kWarps * 32;
constexpr int kSP = kBN + 4;  // fp32 S row pitch (floats)
constexpr int kPP = kBN + 8;  // bf16 P row pitch (elements)

template <int D>
struct Smem {
  static constexpr int kDP = D + 8;  // bf16 Q/K/V row pitch (elements): 16-byte rows, fewer bank conflicts
  static constexpr int kOP = D + 4;  // fp32 O staging row pitch (floats), in the K/V space after the loop
  static constexpr size_t align(size_t b) { return (b + 127) / 128 * 128; }
  static constexpr size_t q_off = 0;
  static constexpr size_t k_off = q_off + align(sizeof(bf16) * kBM * kDP);
  static constexpr size_t v_off = k_off + align(sizeof(bf16) * kBN * kDP);
  static constexpr size_t s_off = v_off + align(sizeof(bf16) * kBN * kDP);
  static constexpr size_t p_off = s_off + align(sizeof(float) * kBM * kSP);
  static constexpr size_t m_off = p_off + align(sizeof(bf16) * kBM * kPP);
  static constexpr size_t l_off = m_off + align(sizeof(float) * kBM);
  static constexpr size_t a_off = l_off + align(sizeof(float) * kBM);
  static constexpr size_t bytes = a_off + align(sizeof(float) * kBM);
  static_assert(s_off - k_off >= sizeof(float) * kBM * kOP, "O staging must fit in the K/V space");
};

struct PrefillParams {
  const bf16* q;
  const bf16* k;
  const bf16* v;
  const int32_t* block_table;
  void* out;
  float* lse;
  int n_q, num_heads, num_kv_heads, group, block_size, kv_len, q_offset;
  float scale_log2;  // scale · log2(e)
  bool causal;
  const int32_t* q_pos;    // kPos: [n_q] query positions
  const int32_t* key_pos;  // kPos: [kv_len] key positions (INT_MAX = hole), or null: slot j holds position j
};

template <typename OutT>
__device__ __forceinline__ void store_out(void* out, size_t i, float v) {
  static_cast<OutT*>(out)[i] = detail::from_f32<OutT>(v);
}

using AccFrag = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;
using AFrag = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;

// kPos: explicit positions (attention_prefill_positions): query i sees key j iff key_pos[j] <= q_pos[i]
// (j <= q_pos[i] without key_pos); otherwise causal with q_offset, or no mask.
template <int D, typename OutT, bool kPos>
__global__ void __launch_bounds__(kThreads) prefill_kernel(PrefillParams p) {
  using L = Smem<D>;
  constexpr int kDP = L::kDP;
  constexpr int kOP = L::kOP;
  constexpr int kVec = D / 8;  // 16-byte vectors per row
  constexpr int kDF = D / 16;  // fragments across the head dim
  constexpr int kNF = kBN / 16; // fragments across a key tile
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sQ = reinterpret_cast<bf16*>(smem + L::q_off);
  bf16* sK = reinterpret_cast<bf16*>(smem + L::k_off);
  bf16* sV = reinterpret_cast<bf16*>(smem + L::v_off);
  float* sS = reinterpret_cast<float*>(smem + L::s_off);
  bf16* sP = reinterpret_cast<bf16*>(smem + L::p_off);
  float* sM = reinterpret_cast<float*>(smem + L::m_off);
  float* sL = reinterpret_cast<float*>(smem + L::l_off);
  float* sA = reinterpret_cast<float*>(smem + L::a_off);

  __shared__ int32_t sKp[kBN];  // kPos with key_pos: this tile's key positions
  __shared__ int s_maxpos;      // kPos without key_pos: the largest query position of the tile
  const int tid = threadIdx.x;
  const int warp = tid >> 5;
  const int lane = tid & 31;
  if (kPos && tid == 0) s_maxpos = -1;
  if (kPos) __syncthreads();
  // Causal: the last query tiles see the most keys; launch them first so they do not form the tail.
  const int m0 = (gridDim.x - 1 - blockIdx.x) * kBM;
  const int h = blockIdx.y;
  const int kvh = h / p.group;
  const size_t kv_row = static_cast<size_t>(p.num_kv_heads) * D;  // elements per pool token
  const int wr0 = warp * 16;  // this warp's first row in the tile

  // Q tile (zero rows past n_q), m = −inf, l = 0.
  for (int i = tid; i < kBM * kVec; i += kThreads) {
    const int r = i / kVec;
    const int c = (i % kVec) * 8;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (m0 + r < p.n_q) {
      val = *reinterpret_cast<const uint4*>(p.q + (static_cast<size_t>(m0 + r) * p.num_heads + h) * D + c);
    }
    *reinterpret_cast<uint4*>(sQ + r * kDP + c) = val;
  }
  if (tid < kBM) {
    sM[tid] = -INFINITY;
    sL[tid] = 0.0f;
    if (kPos && m0 + tid < p.n_q) atomicMax(&s_maxpos, p.q_pos[m0 + tid]);
  }
  // Row (0..15) of each accumulator element: a 16×16 matrix of row ids, loaded as a fragment.
  float* sRows = sS + wr0 * kSP;  // this warp's S rows, free until the first tile
  for (int i = lane; i < 256; i += 32) sRows[(i / 16) * kSP + (i % 16)] = static_cast<float>(i / 16);
  __syncthreads();  // Q tile, m, l and the row ids are visible

  int acc_row[AccFrag::num_elements];
  {
    AccFrag rows;
    wmma::load_matrix_sync(rows, sRows, kSP, wmma::mem_row_major);
#pragma unroll
    for (int i = 0; i < AccFrag::num_elements; ++i) acc_row[i] = wr0 + static_cast<int>(rows.x[i]);
  }
  AFrag qf[kDF];
#pragma unroll
  for (int kk = 0; kk < kDF; ++kk) wmma::load_matrix_sync(qf[kk], sQ + wr0 * kDP + kk * 16, kDP);
  AccFrag of[kDF];
#pragma unroll
  for (int dn = 0; dn < kDF; ++dn) wmma::fill_fragment(of[dn], 0.0f);

  const int last_row = min(m0 + kBM, p.n_q) - 1;
  int kv_end = p.kv_len;
  if (kPos) {
    if (p.key_pos == nullptr) kv_end = min(kv_end, s_maxpos + 1);  // slots past the last query's position are unseen
  } else if (p.causal) {
    kv_end = min(kv_end, last_row + p.q_offset + 1);
  }
  const int n_tiles = kv_end > 0 ? (kv_end + kBN - 1) / kBN : 0;

  const int srow = wr0 + (lane >> 1);  // softmax: 2 lanes per row
  const int shalf = (lane & 1) * (kBN / 2);
  const int qi = m0 + srow;
  // Last visible key (slot) of this thread's softmax row; with key positions, its position bound.
  const int qp = kPos ? (qi < p.n_q ? p.q_pos[qi] : -1) : 0;
  const int limit = kPos ? min(qp, p.kv_len - 1) : (p.causal ? min(qi + p.q_offset, p.kv_len - 1) : p.kv_len - 1);
  const bool by_key_pos = kPos && p.key_pos != nullptr;

  for (int t = 0; t < n_tiles; ++t) {
    const int n0 = t * kBN;
    __syncthreads();  // every warp is done with the previous tile's K/V (and with the row-id matrix)
    for (int i = tid; i < kBN * kVec; i += kThreads) {
      const int r = i / kVec;
      const int c = (i % kVec) * 8;
      const int j = n0 + r;
      uint4 kv4 = make_uint4(0, 0, 0, 0);
      uint4 vv4 = make_uint4(0, 0, 0, 0);
      if (j < p.kv_len) {
        const int blk = p.block_table[j / p.block_size];
        const size_t off = (static_cast<size_t>(blk) * p.block_size + j % p.block_size) * kv_row +
                           static_cast<size_t>(kvh) * D + c;
        kv4 = *reinterpret_cast<const uint4*>(p.k + off);
        vv4 = *reinterpret_cast<const uint4*>(p.v + off);
      }
      *reinterpret_cast<uint4*>(sK + r * kDP + c) = kv4;
      *reinterpret_cast<uint4*>(sV + r * kDP + c) = vv4;
    }
    if (by_key_pos && tid < kBN) sKp[tid] = n0 + tid < p.kv_len ? p.key_pos[n0 + tid] : INT_MAX;
    __syncthreads();

    // S[wr0 .. wr0+15, 0 .. kBN) = Q · Kᵀ
#pragma unroll
    for (int cn = 0; cn < kNF; ++cn) {
      AccFrag acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int kk = 0; kk < kDF; ++kk) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> b;
        wmma::load_matrix_sync(b, sK + (cn * 16) * kDP + kk * 16, kDP);
        wmma::mma_sync(acc, qf[kk], b, acc);
      }
      wmma::store_matrix_sync(sS + wr0 * kSP + cn * 16, acc, kSP, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax of this warp's rows (log2 domain).
    {
      const float* srow_p = sS + srow * kSP;
      float mx = -INFINITY;
#pragma unroll 8
      for (int c = shalf; c < shalf + kBN / 2; ++c) {
        const bool seen = by_key_pos ? (n0 + c < p.kv_len && sKp[c] <= qp) : (n0 + c <= limit);
        const float s = seen ? srow_p[c] * p.scale_log2 : -INFINITY;
        mx = fmaxf(mx, s);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      const float m_old = sM[srow];
      const float m_new = fmaxf(m_old, mx);
      const float alpha = (m_new == -INFINITY) ? 1.0f : exp2f(m_old - m_new);
      float sum = 0.0f;
      bf16* prow = sP + srow * kPP;
#pragma unroll 8
      for (int c = shalf; c < shalf + kBN / 2; ++c) {
        float pv = 0.0f;
        const bool seen = by_key_pos ? (n0 + c < p.kv_len && sKp[c] <= qp) : (n0 + c <= limit);
        if (seen && m_new != -INFINITY) pv = exp2f(srow_p[c] * p.scale_log2 - m_new);
        const bf16 pb = __float2bfloat16_rn(pv);
        prow[c] = pb;
        sum += __bfloat162float(pb);  // normalise by what P·V actually sums
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      __syncwarp();
      if ((lane & 1) == 0) {
        sL[srow] = sL[srow] * alpha + sum;
        sM[srow] = m_new;
        sA[srow] = alpha;
      }
    }
    __syncwarp();

    // O *= alpha (per row), then O += P · V
    float alpha_e[AccFrag::num_elements];
#pragma unroll
    for (int i = 0; i < AccFrag::num_elements; ++i) alpha_e[i] = sA[acc_row[i]];
    AFrag pf[kNF];
#pragma unroll
    for (int kk = 0; kk < kNF; ++kk) wmma::load_matrix_sync(pf[kk], sP + wr0 * kPP + kk * 16, kPP);
#pragma unroll
    for (int dn = 0; dn < kDF; ++dn) {
#pragma unroll
      for (int i = 0; i < AccFrag::num_elements; ++i) of[dn].x[i] *= alpha_e[i];
#pragma unroll
      for (int kk = 0; kk < kNF; ++kk) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> b;
        wmma::load_matrix_sync(b, sV + (kk * 16) * kDP + dn * 16, kDP);
        wmma::mma_sync(of[dn], pf[kk], b, of[dn]);
      }
    }
  }
  __syncthreads();  // K/V space is free: stage O there for coalesced stores

  float* sO = reinterpret_cast<float*>(smem + L::k_off);
#pragma unroll
  for (int dn = 0; dn < kDF; ++dn) wmma::store_matrix_sync(sO + wr0 * kOP + dn * 16, of[dn], kOP, wmma::mem_row_major);
  __syncwarp();

  // Normalise and store this warp's rows.
  for (int i = lane; i < 16 * D; i += 32) {
    const int r = wr0 + i / D;
    const int c = i % D;
    const int row = m0 + r;
    if (row < p.n_q) {
      const float l = sL[r];
      const float v = l > 0.0f ? sO[r * kOP + c] / l : 0.0f;
      store_out<OutT>(p.out, (static_cast<size_t>(row) * p.num_heads + h) * D + c, v);
    }
  }
  if (lane < 16) {
    const int r = wr0 + lane;
    const int row = m0 + r;
    if (row < p.n_q) {
      const float l = sL[r];
      p.lse[static_cast<size_t>(row) * p.num_heads + h] = l > 0.0f ? (sM[r] + log2f(l)) * detail::kLn2 : -INFINITY;
    }
  }
}

template <int D, typename OutT, bool kPos>
Status launch(const PrefillParams& p, cudaStream_t s) {
  constexpr size_t bytes = Smem<D>::bytes;
  auto* fn = prefill_kernel<D, OutT, kPos>;
  RAGD_RETURN_IF_ERROR(detail::cuda_status(
      cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
      "attention_prefill: cudaFuncSetAttribute"));
  const dim3 grid((p.n_q + kBM - 1) / kBM, p.num_heads);
  fn<<<grid, kThreads, bytes, s>>>(p);
  return detail::launch_status("attention_prefill");
}

Status check(const char* op, const uint16_t* q, int n_q, int num_heads, const PagedKvBf16& kv, void* out, float* lse) {
  const std::string o(op);
  if (kv.head_dim != 32 && kv.head_dim != 64 && kv.head_dim != 128) {
    return Status::InvalidArgument(o + ": unsupported head_dim " + std::to_string(kv.head_dim) +
                                   " (CUDA kernels are built for 32, 64 and 128)");
  }
  if (n_q < 0 || num_heads <= 0 || kv.num_kv_heads <= 0 || num_heads % kv.num_kv_heads != 0) {
    return Status::InvalidArgument(o + ": num_heads " + std::to_string(num_heads) +
                                   " is not a positive multiple of num_kv_heads " + std::to_string(kv.num_kv_heads));
  }
  if (kv.block_size <= 0 || kv.kv_len < 0) {
    return Status::InvalidArgument(o + ": bad block_size " + std::to_string(kv.block_size) + " or kv_len " +
                                   std::to_string(kv.kv_len));
  }
  if (num_heads > 65535) return Status::InvalidArgument(o + ": num_heads " + std::to_string(num_heads) + " > 65535");
  if (n_q > 0 && (!q || !out || !lse || (kv.kv_len > 0 && (!kv.k || !kv.v || !kv.block_table)))) {
    return Status::InvalidArgument(o + ": null q, out, lse, k, v or block_table");
  }
  return Status::OK();
}

PrefillParams params(const uint16_t* q, int n_q, int num_heads, const PagedKvBf16& kv, float scale, void* out,
                     float* lse) {
  PrefillParams p{};
  p.q = reinterpret_cast<const bf16*>(q);
  p.k = reinterpret_cast<const bf16*>(kv.k);
  p.v = reinterpret_cast<const bf16*>(kv.v);
  p.block_table = kv.block_table;
  p.out = out;
  p.lse = lse;
  p.n_q = n_q;
  p.num_heads = num_heads;
  p.num_kv_heads = kv.num_kv_heads;
  p.group = num_heads / kv.num_kv_heads;
  p.block_size = kv.block_size;
  p.kv_len = kv.kv_len;
  p.scale_log2 = scale * detail::kLog2e;
  return p;
}

template <bool kPos>
Status dispatch(const PrefillParams& p, int head_dim, DType out_dtype, cudaStream_t s) {
  const bool f32 = out_dtype == DType::kF32;
  if (head_dim == 32) return f32 ? launch<32, float, kPos>(p, s) : launch<32, bf16, kPos>(p, s);
  if (head_dim == 64) return f32 ? launch<64, float, kPos>(p, s) : launch<64, bf16, kPos>(p, s);
  return f32 ? launch<128, float, kPos>(p, s) : launch<128, bf16, kPos>(p, s);
}

}  // namespace

Status attention_prefill(const uint16_t* q, int n_q, int num_heads, const PagedKvBf16& kv, float scale, bool causal,
                         int q_offset, void* out, DType out_dtype, float* lse, void* stream) {
  RAGD_RETURN_IF_ERROR(check("attention_prefill", q, n_q, num_heads, kv, out, lse));
  if (n_q == 0) return Status::OK();
  PrefillParams p = params(q, n_q, num_heads, kv, scale, out, lse);
  p.q_offset = q_offset;
  p.causal = causal;
  return dispatch<false>(p, kv.head_dim, out_dtype, detail::as_stream(stream));
}

Status attention_prefill_positions(const uint16_t* q, int n_q, int num_heads, const PagedKvBf16& kv, float scale,
                                   const int32_t* q_pos, void* out, DType out_dtype, float* lse, void* stream) {
  RAGD_RETURN_IF_ERROR(check("attention_prefill_positions", q, n_q, num_heads, kv, out, lse));
  if (n_q == 0) return Status::OK();
  if (!q_pos) return Status::InvalidArgument("attention_prefill_positions: null q_pos");
  PrefillParams p = params(q, n_q, num_heads, kv, scale, out, lse);
  p.q_pos = q_pos;
  p.key_pos = kv.key_pos;
  return dispatch<true>(p, kv.head_dim, out_dtype, detail::as_stream(stream));
}

}  // namespace ragd::kernels::cuda
