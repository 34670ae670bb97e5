// Prefill attention for Hopper (compute capability 9.0, built for sm_90a): the FlashAttention-2
// algorithm of attention_prefill.cu with its two matrix products on warpgroup MMA (wgmma), the
// tensor-core path that mma.sync cannot reach on this chip (FlashAttention-3, Shah et al. 2024,
// reports 1.5-2x over FlashAttention-2 on an H100 from it).
//
// One CTA = one head × 128 queries, two warpgroups (256 threads); warpgroup w owns query rows
// 64w .. 64w + 63 and keeps its O accumulators (the wgmma m64nD fp32 fragments) in registers.
// Key tiles of 128 keys are gathered from their pages with cp.async by all 256 threads into a
// second shared-memory stage while the current tile is computed (double buffering). Per tile, per
// warpgroup:
//   S = Q·Kᵀ   wgmma m64n128k16, Q (A) and K (B) read from shared memory by descriptor, both
//              K-major; head_dim / 16 instructions accumulate into one 64-register fragment;
//   online softmax on the S fragment (log2 domain; a row's scores sit in the 4 lanes of a quad);
//   the accumulator layout of S is the register A-operand layout of P, so P is packed to bf16 in
//   registers and O = O·e^(m_old − m_new) + P·V runs as wgmma m64nDk16 with V (B) N-major in
//   shared memory (the transpose flag), 8 instructions per tile.
// Shared memory: every tile is stored as head_dim / 64 column halves of [rows][64] bf16 (128-byte
// rows) with the 128-byte swizzle (16-byte chunk c of row r at chunk c ^ (r mod 8), atoms of 8 rows
// = 1024 bytes, 1024-aligned), the layout the wgmma descriptors name; the next 16 columns of a
// K-major operand are the descriptor's start address + 32 bytes within the half. cp.async writes
// are made visible to the tensor cores' (async) proxy with fence.proxy.async before the barrier.
// Masks and tile order as in the mma.sync kernel: only tiles that cross the causal diagonal or
// kv_len test each element; causal CTAs stop at the last key their last query sees; the last
// query tiles (most keys) launch first. Keys past kv_len are zero-filled and masked; rows past n_q
// are computed on zeros and not stored.
// Explicit positions (attention_prefill_positions: sparse recompute, zigzag shards) run the same
// kernel with every tile masked by position; a tile no query of the CTA can see is skipped. Not here
// (the mma.sync kernel serves them): head_dim 32, other chips.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "attention_prefill.cuh"
#include "cuda_util.cuh"

namespace ragd::kernels::cuda::detail {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kWarpgroups = 2;
constexpr int kThreads = kWarpgroups * 128;
constexpr int kBM = kWarpgroups * 64;  // queries per CTA
constexpr int kBN = 128;               // keys per tile

// The device code below exists only in the sm_90a pass (wgmma needs it); the compute_90 PTX pass
// gets a kernel that traps, which the dispatcher never launches.
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)

// Byte offset of 16-byte chunk c (columns 8c .. 8c + 7) of row r in a swizzled [rows][D] tile.
__device__ __forceinline__ uint32_t swizzled(int rows, int r, int c) {
  return static_cast<uint32_t>((c >> 3) * rows * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

// wgmma shared-memory matrix descriptor, 128-byte swizzle: start address, leading-dimension byte
// offset (K-major operands: unused; N-major V: the distance between the 64-column halves), stride
// byte offset 1024 (the next 8-row atom), all in 16-byte units.
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr, uint32_t lbo_bytes) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo_bytes >> 4) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Pins the accumulators at this point of the program: code after it reads what the wgmma wrote.
template <int N>
__device__ __forceinline__ void fence_accumulators(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// S = Q·Kᵀ (+ S when accumulate != 0): m64n128k16, A (64 × 16) and B (128 keys × 16) both K-major
// in shared memory.
__device__ __forceinline__ void wgmma_ss_m64n128(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// O += P·V: m64n128k16, A (P: 64 rows × 16 keys, bf16 pairs) in registers, B (V: 16 keys × 128) N-major
// in shared memory.
__device__ __forceinline__ void wgmma_rs_m64n128(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(1));
}

// O += P·V: m64n64k16, A (P: 64 rows × 16 keys, bf16 pairs) in registers, B (V: 16 keys × 64) N-major
// in shared memory.
__device__ __forceinline__ void wgmma_rs_m64n64(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(1));
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

#endif  // !__CUDA_ARCH__ || __CUDA_ARCH_FEAT_SM90_ALL

// kOverlap (the default): the tile loop is software-pipelined inside each warpgroup as in
// FlashAttention-3 — tile t's S = Q·Kᵀ and tile t − 1's O += P·V are issued together, the softmax
// of tile t runs while P·V of tile t − 1 is on the tensor cores; P of two tiles is live (two register
// sets) and V of tile t − 1 stays in shared memory, hence three stages. !kOverlap: S, softmax, P·V
// one after the other (two stages); RAGD_PREFILL_SM90_OVERLAP=0 selects it for comparison.
template <bool kOverlap>
constexpr int stages() {
  return kOverlap ? 3 : 2;
}

template <int D, bool kOverlap>
struct Sm90Smem {
  static constexpr size_t kQ = sizeof(uint16_t) * kBM * D;   // bytes of the Q tile
  static constexpr size_t kKV = sizeof(uint16_t) * kBN * D;  // bytes of one K (or V) stage
  static constexpr size_t q_off = 0;
  static constexpr size_t k_off = q_off + kQ;
  static constexpr size_t v_off = k_off + stages<kOverlap>() * kKV;
  static constexpr size_t bytes = v_off + stages<kOverlap>() * kKV + 1024;  // + slack to align the base to 1024
};

// kPos: explicit positions (attention_prefill_positions): query i sees key j iff key_pos[j] <=
// q_pos[i] (j <= q_pos[i] without key_pos); every tile is masked, and with key_pos a tile whose
// smallest position is past the CTA's largest query position is skipped (a zigzag shard's far chunk).
template <int D, typename OutT, bool kPos, bool kOverlap>
__global__ void __launch_bounds__(kThreads, 1) prefill_sm90_kernel(PrefillParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = Sm90Smem<D, kOverlap>;
  constexpr int kStages = stages<kOverlap>();
  constexpr int kVec = D / 8;   // 16-byte chunks per row
  constexpr int kNB = kBN / 8;  // 8-key n-blocks of S
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ __align__(16) int32_t s_kpos[kPos ? kStages : 1][kBN];  // kPos with key_pos: each stage's key positions
  __shared__ int32_t s_kmin[kPos ? kStages : 1][4];                  // ... and the minimum of each quarter
  __shared__ int s_maxpos;                                           // kPos: the largest query position of the CTA
  const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const uint32_t sQ = base + L::q_off, sK = base + L::k_off, sV = base + L::v_off;

  const int tid = threadIdx.x;
  const int wg = tid >> 7;
  const int warp_in_wg = (tid >> 5) & 3;
  const int lane = tid & 31;
  const int g = lane >> 2;  // row within the 8-row half of the warp's 16 rows
  const int tq = lane & 3;  // column pair
  const int m0 = (gridDim.x - 1 - blockIdx.x) * kBM;
  const int h = blockIdx.y;
  const int kvh = h / p.group;
  const size_t kv_row = static_cast<size_t>(p.num_kv_heads) * D;  // elements per pool token
  const bool by_key_pos = kPos && p.key_pos != nullptr;

  for (int i = tid; i < kBM * kVec; i += kThreads) {
    const int r = i / kVec, c = i % kVec;
    const bool in = m0 + r < p.n_q;
    const bf16* src = in ? p.q + (static_cast<size_t>(m0 + r) * p.num_heads + h) * D + c * 8 : p.q;
    cp_async16(sQ + swizzled(kBM, r, c), src, in ? 16 : 0);
  }
  if constexpr (kPos) {
    if (tid == 0) s_maxpos = -1;
    __syncthreads();
    if (tid < kBM && m0 + tid < p.n_q) atomicMax(&s_maxpos, p.q_pos[m0 + tid]);
    __syncthreads();
  }

  const int last_row = min(m0 + kBM, p.n_q) - 1;
  int kv_end = p.kv_len;
  if (kPos) {
    if (!by_key_pos) kv_end = min(kv_end, s_maxpos + 1);  // slots past the last query's position are unseen
  } else if (p.causal) {
    kv_end = min(kv_end, last_row + p.q_offset + 1);
  }
  const int n_tiles = kv_end > 0 ? (kv_end + kBN - 1) / kBN : 0;
  // Tiles before this one need no mask: every key is visible to every row of the warpgroup.
  const int row0 = m0 + wg * 64;
  int unmasked_tiles = kPos ? 0 : p.kv_len / kBN;
  if (!kPos && p.causal) unmasked_tiles = min(unmasked_tiles, max(0, (row0 + p.q_offset + 1) / kBN));

  auto load_tile = [&](int t) {
    const int n0 = t * kBN;
    const int stage = t % kStages;
    const uint32_t dk = sK + stage * L::kKV, dv = sV + stage * L::kKV;
    for (int i = tid; i < kBN * kVec; i += kThreads) {
      const int r = i / kVec, c = i % kVec;
      const int j = n0 + r;
      const bool in = j < p.kv_len;
      size_t off = 0;
      if (in) off = pool_row(p, j) * kv_row + static_cast<size_t>(kvh) * D + c * 8;
      const uint32_t so = swizzled(kBN, r, c);
      cp_async16(dk + so, p.k + off, in ? 16 : 0);
      cp_async16(dv + so, p.v + off, in ? 16 : 0);
    }
    if (kPos && by_key_pos && tid < kBN) {  // plain stores: read after the next barrier
      int kp = n0 + tid < p.kv_len ? p.key_pos[n0 + tid] : INT_MAX;
      s_kpos[kPos ? stage : 0][tid] = kp;
      kp = __reduce_min_sync(0xffffffffu, kp);
      if (lane == 0) s_kmin[kPos ? stage : 0][tid >> 5] = kp;
    }
  };
  auto k_stage = [&](int t) { return sK + (t % kStages) * L::kKV; };
  auto v_stage = [&](int t) { return sV + (t % kStages) * L::kKV; };

  if (n_tiles > 0) load_tile(0);
  cp_async_commit();  // group: Q (+ tile 0)

  // This thread's rows (g and g + 8 of its warp's 16) and the last key (slot or position) each sees.
  const int row_q = row0 + warp_in_wg * 16 + g;
  int limit[2];
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int qi = row_q + 8 * hr;
    if (kPos) {
      limit[hr] = qi < p.n_q ? p.q_pos[qi] : -1;  // a position bound (key_pos) or a slot bound
      if (!by_key_pos) limit[hr] = min(limit[hr], p.kv_len - 1);
    } else {
      limit[hr] = p.causal ? min(qi + p.q_offset, p.kv_len - 1) : p.kv_len - 1;
    }
  }

  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
  const uint32_t q_rows = sQ + wg * 64 * 128;  // this warpgroup's 64 rows in the first column half
  uint32_t pf[kNB][2];                         // kOverlap: P of the previous tile, its P·V not yet issued
  bool pending = false;                        // kOverlap: that P·V is due

  // P·V of the previous tile, issued alone (before a skipped tile, and after the last one).
  auto flush_pending = [&](int t_prev) {
    wgmma_fence();
    issue_pv<D>(o, pf, v_stage(t_prev));
    wgmma_commit();
    wgmma_wait<0>();
    fence_accumulators(o);
    hold_fragments(pf);
    pending = false;
  };

  for (int t = 0; t < n_tiles; ++t) {
    // Tile t has landed (issued an iteration ago) and is visible to the tensor cores; every
    // warpgroup is done with the stage the next load overwrites (its P·V was waited for).
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();
    if (t + 1 < n_tiles) load_tile(t + 1);
    cp_async_commit();
    const int stage = t % kStages;
    if (kPos && by_key_pos) {
      const int32_t* km = s_kmin[kPos ? stage : 0];
      if (min(min(km[0], km[1]), min(km[2], km[3])) > s_maxpos) {  // no query of the CTA sees this tile
        if (kOverlap && pending) flush_pending(t - 1);
        continue;
      }
    }
    const bool masked = kPos || t >= unmasked_tiles;
    const int key0 = t * kBN + tq * 2;
    float s[kNB * 4];
    float alpha[2];
    auto mask = [&]() {
      if (!masked) return;
      if (kPos && by_key_pos) {
        mask_by_position(s, s_kpos[kPos ? stage : 0], tq, limit);
      } else {
        mask_by_slot(s, key0, limit);
      }
    };
    if constexpr (kOverlap) {
      wgmma_fence();
      issue_qk<D>(s, q_rows, k_stage(t));
      wgmma_commit();
      if (pending) issue_pv<D>(o, pf, v_stage(t - 1));
      wgmma_commit();
      wgmma_wait<1>();  // S of tile t (P·V of tile t − 1 may still run)
      fence_accumulators(s);
      mask();
      uint32_t pf_next[kNB][2];
      softmax_tile(s, p.scale_log2, m_run, l_run, pf_next, alpha);
      wgmma_wait<0>();
      fence_accumulators(o);
      hold_fragments(pf);
      rescale(o, alpha);
#pragma unroll
      for (int nb = 0; nb < kNB; ++nb) pf[nb][0] = pf_next[nb][0], pf[nb][1] = pf_next[nb][1];
      pending = true;
    } else {
      wgmma_fence();
      issue_qk<D>(s, q_rows, k_stage(t));
      wgmma_commit();
      wgmma_wait<0>();
      fence_accumulators(s);
      mask();
      softmax_tile(s, p.scale_log2, m_run, l_run, pf, alpha);
      rescale(o, alpha);
      wgmma_fence();
      issue_pv<D>(o, pf, v_stage(t));
      wgmma_commit();
      wgmma_wait<0>();
      fence_accumulators(o);
      hold_fragments(pf);
    }
  }
  if (kOverlap && pending) flush_pending(n_tiles - 1);
  cp_async_wait<0>();

  // Row sums across the quad, then normalise and store.
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
#else
  __trap();  // built without sm_90a: the dispatcher never launches this kernel there
#endif
}

template <int D, typename OutT, bool kPos, bool kOverlap>
Status launch(const PrefillParams& p, cudaStream_t s) {
  constexpr size_t bytes = Sm90Smem<D, kOverlap>::bytes;
  // Dynamic + static (the key positions, ~1.6 KB) within the 227 KB a block may have.
  static_assert(bytes + 2048 <= 227 * 1024, "shared memory over the sm_90 limit");
  auto* fn = prefill_sm90_kernel<D, OutT, kPos, kOverlap>;
  RAGD_RETURN_IF_ERROR(cuda_status(
      cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
      "attention_prefill (sm90): cudaFuncSetAttribute"));
  const dim3 grid((p.n_q + kBM - 1) / kBM, p.num_heads);
  fn<<<grid, kThreads, bytes, s>>>(p);
  return launch_status("attention_prefill (sm90)");
}

template <int D, typename OutT, bool kPos>
Status launch_schedule(const PrefillParams& p, cudaStream_t s) {
  return switch_off("RAGD_PREFILL_SM90_OVERLAP") ? launch<D, OutT, kPos, false>(p, s) : launch<D, OutT, kPos, true>(p, s);
}

template <bool kPos>
Status launch_head_dim(const PrefillParams& p, int head_dim, DType out_dtype, cudaStream_t s) {
  const bool f32 = out_dtype == DType::kF32;
  if (head_dim == 64) return f32 ? launch_schedule<64, float, kPos>(p, s) : launch_schedule<64, bf16, kPos>(p, s);
  if (head_dim == 128) return f32 ? launch_schedule<128, float, kPos>(p, s) : launch_schedule<128, bf16, kPos>(p, s);
  return Status::InvalidArgument("attention_prefill (sm90): head_dim " + std::to_string(head_dim) +
                                 " (built for 64 and 128)");
}

// Compute capability 9.0 of the current device, cached per device (0 unknown, -1 no, 1 yes).
bool current_device_is_sm90() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) {
    cudaGetLastError();
    return false;
  }
  int v = cache[dev].load(std::memory_order_relaxed);
  if (v == 0) {
    int major = 0, minor = 0;
    const bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
                    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess;
    if (!ok) cudaGetLastError();
    v = ok && major == 9 && minor == 0 ? 1 : -1;
    cache[dev].store(v, std::memory_order_relaxed);
  }
  return v == 1;
}

}  // namespace

bool prefill_sm90_supported(int head_dim) {
  return (head_dim == 64 || head_dim == 128) && current_device_is_sm90();
}

Status attention_prefill_sm90(const PrefillParams& p, int head_dim, DType out_dtype, cudaStream_t s) {
  return p.q_pos != nullptr ? launch_head_dim<true>(p, head_dim, out_dtype, s)
                            : launch_head_dim<false>(p, head_dim, out_dtype, s);
}

}  // namespace ragd::kernels::cuda::detail
