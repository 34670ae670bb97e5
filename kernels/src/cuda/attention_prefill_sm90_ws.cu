// The warp-specialised Hopper prefill (FlashAttention-3's arrangement; opt-in with
// RAGD_PREFILL_SM90_SCHEDULE=ws until measured): one producer warpgroup and two consumer warpgroups
// per CTA (384 threads), the same 128-query × 128-key tiles, shared-memory layout and wgmma products
// as attention_prefill_sm90.cu (attention_sm90_tile.cuh), without a CTA-wide barrier in the loop.
// - The producer gathers K / V tiles from their pages with cp.async into a ring of three stages.
//   A stage is refilled once both consumers have released it (its "empty" mbarrier, 256 arrivals);
//   a filled stage is published on its "full" mbarrier (128 arrivals) by each producer thread after
//   its own copies have landed (cp.async.wait_group one tile behind, then fence.proxy.async, so the
//   tensor cores' proxy sees the data). The producer gives its registers to the consumers
//   (setmaxnreg 40 / 232).
// - Each consumer warpgroup loads its own 64 query rows, then runs the software-pipelined tile loop
//   (S of tile t and P·V of tile t − 1 issued together, the softmax of t under P·V of t − 1) and
//   releases tile t − 1's stage once that P·V has completed.
// - Ping-pong: the two consumers take turns to issue their products (named barriers 1 and 2), so
//   one warpgroup's softmax runs while the other's matrix products hold the tensor cores.
// Causal or unmasked prefill only; explicit positions run the pipelined kernel.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "attention_prefill.cuh"
#include "attention_sm90_tile.cuh"
#include "cuda_util.cuh"
#include "sm90.cuh"

namespace ragd::kernels::cuda::detail {
namespace {

using namespace sm90;  // NOLINT
using bf16 = __nv_bfloat16;

constexpr int kWsThreads = 384;  // producer warpgroup + two consumer warpgroups
constexpr int kWsStages = 3;

template <int D>
struct WsSmem {
  static constexpr size_t kQ = sizeof(uint16_t) * kBM * D;
  static constexpr size_t kKV = sizeof(uint16_t) * kBN * D;
  static constexpr size_t q_off = 0;
  static constexpr size_t k_off = q_off + kQ;
  static constexpr size_t v_off = k_off + kWsStages * kKV;
  static constexpr size_t bar_off = v_off + kWsStages * kKV;              // full[kWsStages], empty[kWsStages]
  static constexpr size_t bytes = bar_off + 2 * kWsStages * 8 + 1024;  // + slack to align the base to 1024
};

template <int D, typename OutT>
__global__ void __launch_bounds__(kWsThreads, 1) prefill_sm90_ws_kernel(PrefillParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)  // the sm_90a pass; the compute_90 PTX pass traps (never launched)
  using L = WsSmem<D>;
  constexpr int kProducerRegs = 40;
  constexpr int kConsumerRegs = 232;  // 128 · (40 + 2 · 232) <= 64 K registers per SM
  constexpr int kTurnBarrier = 1;     // + consumer index: whose turn it is to issue products
  constexpr int kQBarrier = 3;        // + consumer index: the warpgroup's Q rows are in shared memory
  constexpr int kNB = kBN / 8;  // 8-key n-blocks of S
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const uint32_t sQ = base + L::q_off, sK = base + L::k_off, sV = base + L::v_off, bars = base + L::bar_off;
  auto full_bar = [&](int t) { return bars + 8 * (t % kWsStages); };
  auto empty_bar = [&](int t) { return bars + 8 * (kWsStages + t % kWsStages); };
  auto k_stage = [&](int t) { return sK + (t % kWsStages) * L::kKV; };
  auto v_stage = [&](int t) { return sV + (t % kWsStages) * L::kKV; };

  const int tid = threadIdx.x;
  // 0: producer; 1, 2: consumers. Broadcast from lane 0 so that the compiler knows the role
  // branches are warp-uniform (wgmma in a branch it thinks divergent is serialised).
  const int wg = __shfl_sync(0xffffffffu, tid >> 7, 0);
  const int m0 = (gridDim.x - 1 - blockIdx.x) * kBM;
  const int h = blockIdx.y;
  if (tid == 0) {
    for (int s = 0; s < kWsStages; ++s) {
      mbarrier_init(bars + 8 * s, 128);                // full: every producer thread
      mbarrier_init(bars + 8 * (kWsStages + s), 256);  // empty: every consumer thread
    }
  }
  __syncthreads();  // the only CTA-wide barrier: the mbarriers are initialised

  const int kv_end = cta_key_end(p, false, false, m0, kBM, 0);
  const int n_tiles = kv_end > 0 ? (kv_end + kBN - 1) / kBN : 0;

  if (wg == 0) {  // ---- producer
    setmaxnreg_dec<kProducerRegs>();
    const int kvh = h / p.group;
    for (int t = 0; t < n_tiles; ++t) {
      mbarrier_wait(empty_bar(t), ((t / kWsStages) & 1) ^ 1);  // round 0: returns at once
      gather_kv_tile<D>(p, t * kBN, kvh, k_stage(t), v_stage(t), tid, 128);
      cp_async_commit();
      if (t > 0) {  // publish the previous tile while this one is in flight
        cp_async_wait<1>();
        fence_proxy_async();
        mbarrier_arrive(full_bar(t - 1));
      }
    }
    if (n_tiles > 0) {
      cp_async_wait<0>();
      fence_proxy_async();
      mbarrier_arrive(full_bar(n_tiles - 1));
    }
    return;
  }

  // ---- consumers
  setmaxnreg_inc<kConsumerRegs>();
  const int c = wg - 1;
  const int wl = tid & 127;
  const int warp_in_wg = wl >> 5;
  const int lane = tid & 31;
  const int g = lane >> 2;  // row within the 8-row half of the warp's 16 rows
  const int tq = lane & 3;  // column pair
  gather_q_rows<D>(p, m0, h, c * 64, 64, sQ, wl, 128);  // this warpgroup's 64 query rows
  cp_async_commit();
  cp_async_wait<0>();
  fence_proxy_async();
  named_sync(kQBarrier + c, 128);

  const int row0 = m0 + c * 64;
  const int unmasked_tiles = unmasked_key_tiles(p, false, row0, kBN);
  const int row_q = row0 + warp_in_wg * 16 + g;
  const int limit[2] = {row_key_limit(p, false, false, row_q), row_key_limit(p, false, false, row_q + 8)};
  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
  const uint32_t q_rows = sQ + c * 64 * 128;  // this warpgroup's rows in the first column half
  uint32_t pf[kNB][2];                        // P of the previous tile, its P·V not yet issued

  // The first turn is the first consumer's; every hand-over below has a matching wait, so no
  // arrival is left pending at exit.
  if (c == 1 && n_tiles > 0) named_arrive(kTurnBarrier + 0, 256);
  for (int t = 0; t < n_tiles; ++t) {
    mbarrier_wait(full_bar(t), (t / kWsStages) & 1);
    float s[kNB * 4];
    float alpha[2];
    named_sync(kTurnBarrier + c, 256);
    wgmma_fence();
    issue_qk<D>(s, q_rows, k_stage(t));
    wgmma_commit();
    if (t > 0) issue_pv<D>(o, pf, v_stage(t - 1));
    wgmma_commit();
    if (c == 0 || t + 1 < n_tiles) named_arrive(kTurnBarrier + (1 - c), 256);
    wgmma_wait<1>();  // S of tile t (P·V of tile t − 1 may still run)
    fence_accumulators(s);
    if (t >= unmasked_tiles) mask_by_slot(s, t * kBN + tq * 2, limit);
    uint32_t pf_next[kNB][2];
    softmax_tile(s, p.scale_log2, m_run, l_run, pf_next, alpha);
    wgmma_wait<0>();
    fence_accumulators(o);
    hold_fragments(pf);
    if (t > 0) mbarrier_arrive(empty_bar(t - 1));  // tile t − 1's K and V are no longer read
    rescale(o, alpha);
#pragma unroll
    for (int nb = 0; nb < kNB; ++nb) pf[nb][0] = pf_next[nb][0], pf[nb][1] = pf_next[nb][1];
  }
  if (n_tiles > 0) pv_now<D>(o, pf, v_stage(n_tiles - 1));  // P·V of the last tile
  store_rows<D, OutT>(p, o, m_run, l_run, row_q, h, tq);
#else
  __trap();
#endif
}

template <int D, typename OutT>
Status launch_ws(const PrefillParams& p, cudaStream_t s) {
  constexpr size_t bytes = WsSmem<D>::bytes;
  static_assert(bytes <= 227 * 1024, "shared memory over the sm_90 limit");
  auto* fn = prefill_sm90_ws_kernel<D, OutT>;
  RAGD_RETURN_IF_ERROR(cuda_status(
      cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
      "attention_prefill (sm90 ws): cudaFuncSetAttribute"));
  const dim3 grid((p.n_q + kBM - 1) / kBM, p.num_heads);
  fn<<<grid, kWsThreads, bytes, s>>>(p);
  return launch_status("attention_prefill (sm90 ws)");
}

}  // namespace

Status attention_prefill_sm90_ws(const PrefillParams& p, int head_dim, DType out_dtype, cudaStream_t s) {
  const bool f32 = out_dtype == DType::kF32;
  if (head_dim == 64) return f32 ? launch_ws<64, float>(p, s) : launch_ws<64, bf16>(p, s);
  if (head_dim == 128) return f32 ? launch_ws<128, float>(p, s) : launch_ws<128, bf16>(p, s);
  return Status::InvalidArgument("attention_prefill (sm90 ws): head_dim " + std::to_string(head_dim) +
                                 " (built for 64 and 128)");
}

}  // namespace ragd::kernels::cuda::detail
