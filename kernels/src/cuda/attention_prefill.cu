// Flash-attention style prefill over paged bf16 KV (see ragd/kernels/cuda/attention.h), in the
// FlashAttention-2 arrangement: S and P never leave registers.
//
// One CTA = one head × a tile of kBM queries, 4 warps; each warp owns 16 · kMT query rows (kMT = 2:
// 32 rows, 128 per CTA, see Tile) and keeps its O accumulators (fp32 mma C fragments) in registers.
// Key tiles of kBN keys are copied from their pages into shared memory with cp.async,
// double-buffered: tile t+1 is in flight while tile t is computed. Per tile, per warp:
//   S = Q·Kᵀ   mma.sync m16n8k16 (bf16 in, fp32 accumulate); Q and K fragments by ldmatrix, each K
//   fragment used by every m-tile of the warp;
//   online softmax on the S fragments (log2 domain; a row's scores sit in the 4 lanes of a quad,
//   reduced with two shuffles);
//   the accumulator layout of S is the A-operand layout of P, so P is packed to bf16 in registers
//   and O = O·e^(m_old − m_new) + P·V runs straight away, V fragments by ldmatrix.trans.
// Shared-memory rows are padded by 16 bytes, so the 8 rows an ldmatrix reads fall in distinct banks.
// Only tiles that cross a mask boundary (the causal diagonal, kv_len, explicit positions) test each
// element. Causal CTAs stop at the last key their last query can see; the last query tiles (the most
// keys) are launched first so they do not form the tail. Keys past kv_len are zero-filled (never read
// from the pool) and masked; rows past n_q are computed on zeros and not stored.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdlib>
#include <string>

#include "attention_prefill.cuh"
#include "cuda_util.cuh"
#include "ragd/kernels/cuda/attention.h"

namespace ragd::kernels::cuda {
namespace {

using bf16 = __nv_bfloat16;
using detail::PrefillParams;
using detail::cp_async16;
using detail::cp_async_commit;
using detail::cp_async_wait;
using detail::fast_exp2;
using detail::pack_bf16;
using detail::smem_addr;
using detail::store_pair;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

// Tile shape of one instantiation: each warp owns kMT 16-row m-tiles (kBM = 64 · kMT queries per
// CTA) and streams kBN-key tiles. Two m-tiles per warp halve the shared-memory fragment traffic per
// FLOP (every K / V fragment loaded feeds two MMAs); head_dim 128 then takes 32-key tiles so that the
// accumulators (O: 128 floats per thread) and scores stay in registers.
template <int D, int kMT>
struct Tile {
  static constexpr int kBM = kWarps * 16 * kMT;
  static constexpr int kBN = (D == 128 && kMT == 2) ? 32 : 64;
  static constexpr int kNB = kBN / 8;  // 8-key n-blocks of S per tile
  static constexpr int kDP = D + 8;    // bf16 row pitch (elements): 16-byte padding against bank conflicts
  static constexpr size_t kKV = sizeof(uint16_t) * kBN * kDP;
  static constexpr size_t q_off = 0;
  static constexpr size_t k_off = q_off + sizeof(uint16_t) * kBM * kDP;  // K buffers 0, 1
  static constexpr size_t v_off = k_off + 2 * kKV;                       // V buffers 0, 1
  static constexpr size_t bytes = v_off + 2 * kKV;
};

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// D = A·B + D, m16n8k16, bf16 inputs, fp32 accumulators (PTX ISA "Matrix Fragments for mma.m16n8k16").
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// kPos: explicit positions (attention_prefill_positions): query i sees key j iff key_pos[j] <= q_pos[i]
// (j <= q_pos[i] without key_pos); otherwise causal with q_offset, or no mask.
template <int D, typename OutT, bool kPos, int kMT>
__global__ void __launch_bounds__(kThreads, 2) prefill_kernel(PrefillParams p) {
  using T = Tile<D, kMT>;
  constexpr int kBM = T::kBM, kBN = T::kBN, kNB = T::kNB, kDP = T::kDP;
  constexpr int kVec = D / 8;   // 16-byte chunks per row
  constexpr int kDK = D / 16;   // k-steps of Q·Kᵀ
  constexpr int kDN = D / 8;    // 8-wide n-blocks of O
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sQ = reinterpret_cast<bf16*>(smem + T::q_off);
  bf16* sK = reinterpret_cast<bf16*>(smem + T::k_off);
  bf16* sV = reinterpret_cast<bf16*>(smem + T::v_off);
  __shared__ int32_t sKp[2][kBN];  // kPos with key_pos: each buffered tile's key positions
  __shared__ int s_maxpos;         // kPos without key_pos: the largest query position of the tile

  const int tid = threadIdx.x;
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int g = lane >> 2;  // quad (row within the 8-row half of a fragment)
  const int tq = lane & 3;  // thread in quad (column pair)
  const int m0 = (gridDim.x - 1 - blockIdx.x) * kBM;
  const int h = blockIdx.y;
  const int kvh = h / p.group;
  const size_t kv_row = static_cast<size_t>(p.num_kv_heads) * D;  // elements per pool token
  const bool by_key_pos = kPos && p.key_pos != nullptr;

  // Q tile (zero rows past n_q).
  for (int i = tid; i < kBM * kVec; i += kThreads) {
    const int r = i / kVec, c = (i % kVec) * 8;
    const bool in = m0 + r < p.n_q;
    const bf16* src = in ? p.q + (static_cast<size_t>(m0 + r) * p.num_heads + h) * D + c : p.q;
    cp_async16(sQ + r * kDP + c, src, in ? 16 : 0);
  }
  const int max_qpos = kPos ? detail::cta_max_query_position(p, m0, kBM, &s_maxpos) : 0;
  const int kv_end = detail::cta_key_end(p, kPos, by_key_pos, m0, kBM, max_qpos);
  const int n_tiles = kv_end > 0 ? (kv_end + kBN - 1) / kBN : 0;
  const int unmasked_tiles = detail::unmasked_key_tiles(p, kPos, m0, kBN);

  auto load_tile = [&](int t, int buf) {
    const int n0 = t * kBN;
    bf16* dk = sK + buf * (kBN * kDP);
    bf16* dv = sV + buf * (kBN * kDP);
    for (int i = tid; i < kBN * kVec; i += kThreads) {
      const int r = i / kVec, c = (i % kVec) * 8;
      const int j = n0 + r;
      size_t off = 0;
      const bool in = j < p.kv_len;
      if (in) off = detail::pool_row(p, j) * kv_row + static_cast<size_t>(kvh) * D + c;
      cp_async16(dk + r * kDP + c, p.k + off, in ? 16 : 0);
      cp_async16(dv + r * kDP + c, p.v + off, in ? 16 : 0);
    }
    if (by_key_pos && tid < kBN) sKp[buf][tid] = n0 + tid < p.kv_len ? p.key_pos[n0 + tid] : INT_MAX;
  };

  if (n_tiles > 0) load_tile(0, 0);
  cp_async_commit();  // group: Q (+ tile 0)

  // This thread's rows: g and g + 8 of each of the warp's m-tiles, and their visibility limits.
  const int wr0 = warp * 16 * kMT;
  int row_q[kMT][2], limit[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      row_q[mt][hr] = m0 + wr0 + mt * 16 + g + 8 * hr;
      limit[mt][hr] = detail::row_key_limit(p, kPos, by_key_pos, row_q[mt][hr]);
    }
  }

  float o[kMT][kDN][4];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int i = 0; i < kDN; ++i) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.0f;
  }
  float m_run[kMT][2], l_run[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) m_run[mt][0] = m_run[mt][1] = -INFINITY, l_run[mt][0] = l_run[mt][1] = 0.0f;

  for (int t = 0; t < n_tiles; ++t) {
    const int buf = t & 1;
    if (t + 1 < n_tiles) load_tile(t + 1, buf ^ 1);
    cp_async_commit();
    cp_async_wait<1>();  // everything but the group just committed has landed
    __syncthreads();
    const bf16* tk = sK + buf * (kBN * kDP);
    const bf16* tv = sV + buf * (kBN * kDP);
    const int n0 = t * kBN;

    // S = Q·Kᵀ: s[mt][nb] is the 16×8 block of m-tile mt and keys n0 + 8·nb ..; Q fragments come
    // from shared memory per k-step (one per m-tile), each K fragment feeds every m-tile.
    float s[kMT][kNB][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int nb = 0; nb < kNB; ++nb) s[mt][nb][0] = s[mt][nb][1] = s[mt][nb][2] = s[mt][nb][3] = 0.0f;
    }
#pragma unroll
    for (int kk = 0; kk < kDK; ++kk) {
      uint32_t qa[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        ldmatrix_x4(qa[mt], sQ + (wr0 + mt * 16 + (lane & 15)) * kDP + kk * 16 + (lane >> 4) * 8);
      }
#pragma unroll
      for (int nb = 0; nb < kNB; nb += 2) {
        uint32_t b[4];  // b[0], b[1]: keys 8·nb ..; b[2], b[3]: keys 8·nb + 8 ..
        ldmatrix_x4(b, tk + (nb * 8 + (lane & 7) + (lane >> 4) * 8) * kDP + kk * 16 + ((lane >> 3) & 1) * 8);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          mma_bf16(s[mt][nb], qa[mt], b[0], b[1]);
          mma_bf16(s[mt][nb + 1], qa[mt], b[2], b[3]);
        }
      }
    }

    if (t >= unmasked_tiles) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
        for (int nb = 0; nb < kNB; ++nb) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int c = nb * 8 + tq * 2 + (e & 1);
            const int lim = limit[mt][e >> 1];
            const bool seen = by_key_pos ? (n0 + c < p.kv_len && sKp[buf][c] <= lim) : (n0 + c <= lim);
            if (!seen) s[mt][nb][e] = -INFINITY;
          }
        }
      }
    }

    // Online softmax per row (the quad's 4 lanes hold the row's kBN scores), P packed to bf16 in
    // the A-operand layout: pf[mt][nb][hr] = keys 8·nb + 2·tq, +1 of row half hr.
    uint32_t pf[kMT][kNB][2];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      float alpha[2];
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        float mx = -INFINITY;
#pragma unroll
        for (int nb = 0; nb < kNB; ++nb) mx = fmaxf(mx, fmaxf(s[mt][nb][2 * hr], s[mt][nb][2 * hr + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m_run[mt][hr], mx * p.scale_log2);
        // A row that has seen nothing yet keeps m = −inf; exponents then use 0 (every p is 0).
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;
        alpha[hr] = fast_exp2(m_run[mt][hr] - m_use);
        m_run[mt][hr] = m_new;
        float sum = 0.0f;
#pragma unroll
        for (int nb = 0; nb < kNB; ++nb) {
          const float p0 = fast_exp2(fmaf(s[mt][nb][2 * hr], p.scale_log2, -m_use));
          const float p1 = fast_exp2(fmaf(s[mt][nb][2 * hr + 1], p.scale_log2, -m_use));
          pf[mt][nb][hr] = pack_bf16(p0, p1, &sum);  // normalise by what P·V actually sums
        }
        l_run[mt][hr] = l_run[mt][hr] * alpha[hr] + sum;  // this lane's partial row sum (quad-reduced at the end)
      }
#pragma unroll
      for (int dn = 0; dn < kDN; ++dn) {
        o[mt][dn][0] *= alpha[0];
        o[mt][dn][1] *= alpha[0];
        o[mt][dn][2] *= alpha[1];
        o[mt][dn][3] *= alpha[1];
      }
    }

    // O += P·V: k-steps of 16 keys; P's A fragment is two adjacent S blocks; each V fragment feeds
    // every m-tile.
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
#pragma unroll
      for (int dn = 0; dn < kDN; dn += 2) {
        uint32_t b[4];  // b[0], b[1]: dims 8·dn ..; b[2], b[3]: dims 8·dn + 8 ..
        ldmatrix_x4_trans(b, tv + (kk * 16 + (lane & 15)) * kDP + dn * 8 + (lane >> 4) * 8);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          const uint32_t a[4] = {pf[mt][2 * kk][0], pf[mt][2 * kk][1], pf[mt][2 * kk + 1][0], pf[mt][2 * kk + 1][1]};
          mma_bf16(o[mt][dn], a, b[0], b[1]);
          mma_bf16(o[mt][dn + 1], a, b[2], b[3]);
        }
      }
    }
    __syncthreads();  // every warp is done with this buffer before the next iteration refills it
  }
  cp_async_wait<0>();

  // Row sums across the quad, then normalise and store.
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float l = l_run[mt][hr];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const int row = row_q[mt][hr];
      if (row >= p.n_q) continue;
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      const size_t base = (static_cast<size_t>(row) * p.num_heads + h) * D + tq * 2;
#pragma unroll
      for (int dn = 0; dn < kDN; ++dn) {
        store_pair<OutT>(p.out, base + dn * 8, o[mt][dn][2 * hr] * inv, o[mt][dn][2 * hr + 1] * inv);
      }
      if (tq == 0) {
        p.lse[static_cast<size_t>(row) * p.num_heads + h] =
            l > 0.0f ? (m_run[mt][hr] + log2f(l)) * detail::kLn2 : -INFINITY;
      }
    }
  }
}

template <int D, typename OutT, bool kPos, int kMT>
Status launch(const PrefillParams& p, cudaStream_t s) {
  constexpr size_t bytes = Tile<D, kMT>::bytes;
  static_assert(bytes <= 227 * 1024, "shared memory over the sm_90 limit");
  auto* fn = prefill_kernel<D, OutT, kPos, kMT>;
  RAGD_RETURN_IF_ERROR(detail::cuda_status(
      cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
      "attention_prefill: cudaFuncSetAttribute"));
  constexpr int kBM = Tile<D, kMT>::kBM;
  const dim3 grid((p.n_q + kBM - 1) / kBM, p.num_heads);
  fn<<<grid, kThreads, bytes, s>>>(p);
  return detail::launch_status("attention_prefill");
}

// Rows per warp: 32 (two m-tiles, the default) or 16 when RAGD_PREFILL_ROWS_PER_WARP=16 (a tuning
// switch for comparing the two in benchmarks; both are tested).
template <int D, typename OutT, bool kPos>
Status launch_rows(const PrefillParams& p, cudaStream_t s) {
  static const bool sixteen = [] {
    const char* e = std::getenv("RAGD_PREFILL_ROWS_PER_WARP");
    return e != nullptr && std::string(e) == "16";
  }();
  return sixteen ? launch<D, OutT, kPos, 1>(p, s) : launch<D, OutT, kPos, 2>(p, s);
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
  p.block_shift = (kv.block_size & (kv.block_size - 1)) == 0 ? __builtin_ctz(static_cast<unsigned>(kv.block_size)) : -1;
  p.kv_len = kv.kv_len;
  p.scale_log2 = scale * detail::kLog2e;
  return p;
}

// The one dispatch point of the prefill family: the Hopper kernel where it applies (compute
// capability 9.0, head_dim 64 / 128; RAGD_CUDA_WGMMA=0 turns it off for comparisons), else the
// mma.sync kernel.
bool use_sm90(int head_dim) {
  return detail::prefill_sm90_supported(head_dim) && !switch_off("RAGD_CUDA_WGMMA");
}

template <bool kPos>
Status dispatch(const PrefillParams& p, int head_dim, DType out_dtype, cudaStream_t s) {
  if (use_sm90(head_dim)) {
    RAGD_ASSIGN_OR_RETURN(const detail::Sm90Schedule schedule, detail::prefill_sm90_schedule());
    return detail::attention_prefill_sm90(p, head_dim, out_dtype, schedule, s);
  }
  const bool f32 = out_dtype == DType::kF32;
  if (head_dim == 32) return f32 ? launch_rows<32, float, kPos>(p, s) : launch_rows<32, bf16, kPos>(p, s);
  if (head_dim == 64) return f32 ? launch_rows<64, float, kPos>(p, s) : launch_rows<64, bf16, kPos>(p, s);
  return f32 ? launch_rows<128, float, kPos>(p, s) : launch_rows<128, bf16, kPos>(p, s);
}

}  // namespace

const char* attention_prefill_kernel(int head_dim) {
  if (!use_sm90(head_dim)) return "mma.sync";
  const Result<detail::Sm90Schedule> schedule = detail::prefill_sm90_schedule();
  return schedule.ok() ? detail::prefill_sm90_schedule_name(*schedule) : "invalid RAGD_PREFILL_SM90_SCHEDULE";
}

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
