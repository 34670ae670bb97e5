// Prefill attention for Hopper (compute capability 9.0, built for sm_90a): the FlashAttention-2
// algorithm of attention_prefill.cu with its two matrix products on warpgroup MMA (wgmma), the
// tensor-core path that mma.sync cannot reach on this chip (FlashAttention-3, Shah et al. 2024,
// reports 1.5-2x over FlashAttention-2 on an H100 from it).
//
// One CTA = one head × 128 queries, two warpgroups (256 threads); warpgroup w owns query rows
// 64w .. 64w + 63 and keeps its O accumulators (the wgmma m64nD fp32 fragments) in registers.
// Key tiles of 128 keys are gathered from their pages with cp.async by all 256 threads into the
// next shared-memory stage while the current tile is computed. Per tile, per warpgroup:
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
// (the mma.sync kernel serves them): head_dim 32, other chips. The warp-specialised variant is in
// attention_prefill_sm90_ws.cu; the pieces both use in attention_sm90_tile.cuh and sm90.cuh.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "attention_prefill.cuh"
#include "attention_sm90_tile.cuh"
#include "cuda_util.cuh"
#include "sm90.cuh"

namespace ragd::kernels::cuda::detail {
namespace {

using namespace sm90;  // NOLINT
using bf16 = __nv_bfloat16;

constexpr int kThreads = 256;  // two warpgroups

// kOverlap (the default): the tile loop is software-pipelined inside each warpgroup as in
// FlashAttention-3 — tile t's S = Q·Kᵀ and tile t − 1's O += P·V are issued together, the softmax
// of tile t runs while P·V of tile t − 1 is on the tensor cores; P of two tiles is live (two register
// sets) and V of tile t − 1 stays in shared memory, hence three stages. !kOverlap: S, softmax, P·V
// one after the other (two stages); RAGD_PREFILL_SM90_SCHEDULE=serial selects it for comparison.
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
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)  // the sm_90a pass; the compute_90 PTX pass traps (never launched)
  using L = Sm90Smem<D, kOverlap>;
  constexpr int kStages = stages<kOverlap>();
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
  const bool by_key_pos = kPos && p.key_pos != nullptr;

  gather_q_rows<D>(p, m0, h, 0, kBM, sQ, tid, kThreads);
  const int max_qpos = kPos ? cta_max_query_position(p, m0, kBM, &s_maxpos) : 0;
  const int kv_end = cta_key_end(p, kPos, by_key_pos, m0, kBM, max_qpos);
  const int n_tiles = kv_end > 0 ? (kv_end + kBN - 1) / kBN : 0;
  const int row0 = m0 + wg * 64;
  const int unmasked_tiles = unmasked_key_tiles(p, kPos, row0, kBN);  // for this warpgroup's rows

  auto load_tile = [&](int t) {
    const int n0 = t * kBN;
    const int stage = t % kStages;
    gather_kv_tile<D>(p, n0, kvh, sK + stage * L::kKV, sV + stage * L::kKV, tid, kThreads);
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
  const int limit[2] = {row_key_limit(p, kPos, by_key_pos, row_q), row_key_limit(p, kPos, by_key_pos, row_q + 8)};

  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
  const uint32_t q_rows = sQ + wg * 64 * 128;  // this warpgroup's 64 rows in the first column half
  uint32_t pf[kNB][2];                         // kOverlap: P of the previous tile, its P·V not yet issued
  bool pending = false;                        // kOverlap: that P·V is due

  // P·V of the previous tile, issued alone (before a skipped tile, and after the last one).
  auto flush_pending = [&](int t_prev) {
    pv_now<D>(o, pf, v_stage(t_prev));
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
      // No query of the CTA sees this tile. (Uniform, and broadcast so that the compiler knows it:
      // wgmma under a branch it thinks divergent is serialised.)
      const bool unseen = __shfl_sync(0xffffffffu, min(min(km[0], km[1]), min(km[2], km[3])) > max_qpos, 0);
      if (unseen) {
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
      pv_now<D>(o, pf, v_stage(t));
    }
  }
  if (kOverlap && pending) flush_pending(n_tiles - 1);
  cp_async_wait<0>();

  store_rows<D, OutT>(p, o, m_run, l_run, row_q, h, tq);
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
Status launch_schedule(const PrefillParams& p, bool overlap, cudaStream_t s) {
  return overlap ? launch<D, OutT, kPos, true>(p, s) : launch<D, OutT, kPos, false>(p, s);
}

template <bool kPos>
Status launch_head_dim(const PrefillParams& p, int head_dim, DType out_dtype, bool overlap, cudaStream_t s) {
  const bool f32 = out_dtype == DType::kF32;
  if (head_dim == 64) {
    return f32 ? launch_schedule<64, float, kPos>(p, overlap, s) : launch_schedule<64, bf16, kPos>(p, overlap, s);
  }
  if (head_dim == 128) {
    return f32 ? launch_schedule<128, float, kPos>(p, overlap, s) : launch_schedule<128, bf16, kPos>(p, overlap, s);
  }
  return Status::InvalidArgument("attention_prefill (sm90): head_dim " + std::to_string(head_dim) +
                                 " (built for 64 and 128)");
}

}  // namespace

bool prefill_sm90_supported(int head_dim) {
  return (head_dim == 64 || head_dim == 128) && compute_capability() == 90;
}

Result<Sm90Schedule> prefill_sm90_schedule() {
  const char* e = std::getenv("RAGD_PREFILL_SM90_SCHEDULE");
  if (e == nullptr || *e == '\0' || std::strcmp(e, "pipelined") == 0) return Sm90Schedule::kPipelined;
  if (std::strcmp(e, "serial") == 0) return Sm90Schedule::kSerial;
  if (std::strcmp(e, "ws") == 0) return Sm90Schedule::kWarpSpecialized;
  return Status::InvalidArgument(std::string("RAGD_PREFILL_SM90_SCHEDULE=") + e +
                                 ": expected pipelined, serial or ws");
}

const char* prefill_sm90_schedule_name(Sm90Schedule s) {
  switch (s) {
    case Sm90Schedule::kSerial:
      return "sm90-wgmma-serial";
    case Sm90Schedule::kWarpSpecialized:
      return "sm90-wgmma-ws";
    case Sm90Schedule::kPipelined:
      break;
  }
  return "sm90-wgmma";
}

Status attention_prefill_sm90(const PrefillParams& p, int head_dim, DType out_dtype, Sm90Schedule schedule,
                              cudaStream_t s) {
  if (p.q_pos != nullptr) {  // explicit positions: the warp-specialised kernel has no position masks
    return launch_head_dim<true>(p, head_dim, out_dtype, schedule != Sm90Schedule::kSerial, s);
  }
  if (schedule == Sm90Schedule::kWarpSpecialized) return attention_prefill_sm90_ws(p, head_dim, out_dtype, s);
  return launch_head_dim<false>(p, head_dim, out_dtype, schedule == Sm90Schedule::kPipelined, s);
}

}  // namespace ragd::kernels::cuda::detail
