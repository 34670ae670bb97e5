// Split-KV paged decode ("flash-decoding") over bf16 KV (see ragd/kernels/cuda/attention.h).
//
// Grid (split, kv head, sequence); 4 warps. A key is read by kTPK = D/8 lanes (one 16-byte load of K
// and of V each), so a warp reads 32/kTPK keys at a time, 4 such groups per loop step, and issues the
// next step's loads before computing the current one. Every lane group keeps
// an online-softmax state (m, l, 8 output dims) for each of the G query heads of the kv head; the
// states are merged through shared memory at the end. With more than one split the partial
// (O, LSE) go to the caller's workspace and a second kernel merges them per (sequence, head).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "cuda_util.cuh"
#include "ragd/kernels/cuda/attention.h"

namespace ragd::kernels::cuda {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

struct DecodeParams {
  const bf16* q;
  const bf16* k;
  const bf16* v;
  const int32_t* block_tables;
  const int32_t* kv_lens;
  float* out;       // [B, H, D]
  float* lse;       // [B, H]
  float* part_o;    // [B, H, S, D] (S > 1)
  float* part_lse;  // [B, H, S]
  int max_blocks, block_size, num_heads, num_kv_heads, num_splits, keys_per_split;
  float scale_log2;
};

__device__ __forceinline__ void unpack8(const uint4& u, float* f) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

template <int D, int G, bool kPipelined>
__global__ void __launch_bounds__(kThreads) decode_kernel(DecodeParams p) {
  constexpr int kTPK = D / 8;           // lanes per key
  constexpr int kKPW = 32 / kTPK;       // keys per warp step
  constexpr int kStates = kWarps * kKPW;
  __shared__ float s_m[kStates][G];
  __shared__ float s_l[kStates][G];
  __shared__ float s_o[kStates][G][D];

  const int split = blockIdx.x;
  const int kvh = blockIdx.y;
  const int b = blockIdx.z;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int kg = lane / kTPK;           // key slot within the warp step
  const int d0 = (lane % kTPK) * 8;     // this lane's 8 dims

  detail::allow_dependents();
  detail::wait_for_prerequisites();  // q (and K / V of this step) are the previous kernel's output
  const int kv_len = p.kv_lens[b];
  const int j0 = split * p.keys_per_split;
  const int j1 = split == p.num_splits - 1 ? kv_len : min(kv_len, j0 + p.keys_per_split);

  float q[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const int h = kvh * G + g;
    const uint4 u = *reinterpret_cast<const uint4*>(p.q + (static_cast<size_t>(b) * p.num_heads + h) * D + d0);
    unpack8(u, q[g]);
#pragma unroll
    for (int i = 0; i < 8; ++i) q[g][i] *= p.scale_log2;
  }
  float m[G], l[G], acc[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[g][i] = 0.0f;
  }

  const int32_t* table = p.block_tables + static_cast<size_t>(b) * p.max_blocks;
  const size_t kv_row = static_cast<size_t>(p.num_kv_heads) * D;
  // Uniform trip count across the warp (the shuffles below need every lane). Each warp step covers
  // kU · kKPW consecutive keys; all their K/V loads are issued before any is used, so that enough
  // bytes are in flight per warp to approach HBM bandwidth with few CTAs (batch 1, long context).
  // kPipelined: the loads of the warp's next step are issued before this step is computed (two
  // register sets), so a warp never waits a whole memory round trip between steps.
  constexpr int kU = 4;
  constexpr int kStride = kWarps * kKPW * kU;  // keys between a warp's consecutive steps
  auto load = [&](int jb, uint4 (&kr)[kU], uint4 (&vr)[kU]) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int j = jb + u * kKPW + kg;
      kr[u] = vr[u] = make_uint4(0, 0, 0, 0);
      if (j < j1) {
        const int blk = table[j / p.block_size];
        const size_t off = (static_cast<size_t>(blk) * p.block_size + j % p.block_size) * kv_row +
                           static_cast<size_t>(kvh) * D + d0;
        kr[u] = *reinterpret_cast<const uint4*>(p.k + off);
        vr[u] = *reinterpret_cast<const uint4*>(p.v + off);
      }
    }
  };
  auto compute = [&](int jb, const uint4 (&kr)[kU], const uint4 (&vr)[kU]) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const bool valid = jb + u * kKPW + kg < j1;
      float kf[8], vf[8];
      unpack8(kr[u], kf);
      unpack8(vr[u], vf);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) s = fmaf(q[g][i], kf[i], s);
#pragma unroll
        for (int o = kTPK / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (valid) {
          const float m_new = fmaxf(m[g], s);
          const float alpha = exp2f(m[g] - m_new);  // m = −inf → 0
          const float pexp = exp2f(s - m_new);
          l[g] = l[g] * alpha + pexp;
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[g][i] = fmaf(acc[g][i], alpha, pexp * vf[i]);
          m[g] = m_new;
        }
      }
    }
  };
  const int jstart = j0 + warp * kKPW * kU;
  if constexpr (kPipelined) {
    uint4 ka[kU], va[kU], kb[kU], vb[kU];
    if (jstart < j1) load(jstart, ka, va);
    for (int jb = jstart; jb < j1;) {  // two steps per trip: the register sets swap roles
      if (jb + kStride < j1) load(jb + kStride, kb, vb);
      compute(jb, ka, va);
      jb += kStride;
      if (jb >= j1) break;
      if (jb + kStride < j1) load(jb + kStride, ka, va);
      compute(jb, kb, vb);
      jb += kStride;
    }
  } else {
    for (int jb = jstart; jb < j1; jb += kStride) {
      uint4 kr[kU], vr[kU];
      load(jb, kr, vr);
      compute(jb, kr, vr);
    }
  }

  const int st = warp * kKPW + kg;
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int i = 0; i < 8; ++i) s_o[st][g][d0 + i] = acc[g][i];
    if (lane % kTPK == 0) {
      s_m[st][g] = m[g];
      s_l[st][g] = l[g];
    }
  }
  __syncthreads();

  for (int e = threadIdx.x; e < G * D; e += kThreads) {
    const int g = e / D;
    const int d = e % D;
    float mx = -INFINITY;
    for (int t = 0; t < kStates; ++t) mx = fmaxf(mx, s_m[t][g]);
    float L = 0.0f, O = 0.0f;
    if (mx != -INFINITY) {
      for (int t = 0; t < kStates; ++t) {
        if (s_m[t][g] == -INFINITY) continue;
        const float w = exp2f(s_m[t][g] - mx);
        L += s_l[t][g] * w;
        O += s_o[t][g][d] * w;
      }
    }
    const float o = L > 0.0f ? O / L : 0.0f;
    const float lse = L > 0.0f ? (mx + log2f(L)) * detail::kLn2 : -INFINITY;
    const size_t bh = static_cast<size_t>(b) * p.num_heads + kvh * G + g;
    if (p.num_splits == 1) {
      p.out[bh * D + d] = o;
      if (d == 0) p.lse[bh] = lse;
    } else {
      p.part_o[(bh * p.num_splits + split) * D + d] = o;
      if (d == 0) p.part_lse[bh * p.num_splits + split] = lse;
    }
  }
}

// One CTA of D threads per (sequence, head): merge the num_splits partial states.
template <int D>
__global__ void merge_splits_kernel(DecodeParams p) {
  detail::allow_dependents();
  detail::wait_for_prerequisites();  // the partial states are the previous kernel's output
  const size_t bh = blockIdx.x;
  const int d = threadIdx.x;
  const float* pl = p.part_lse + bh * p.num_splits;
  float mx = -INFINITY;
  for (int s = 0; s < p.num_splits; ++s) mx = fmaxf(mx, pl[s]);
  float sum = 0.0f, o = 0.0f;
  if (mx != -INFINITY) {
    for (int s = 0; s < p.num_splits; ++s) {
      if (pl[s] == -INFINITY) continue;
      const float w = expf(pl[s] - mx);
      sum += w;
      o += w * p.part_o[(bh * p.num_splits + s) * D + d];
    }
  }
  p.out[bh * D + d] = sum > 0.0f ? o / sum : 0.0f;
  if (d == 0) p.lse[bh] = sum > 0.0f ? mx + logf(sum) : -INFINITY;
}

template <int D, int G>
Status launch(const DecodeParams& p, int batch, cudaStream_t s) {
  const dim3 grid(p.num_splits, p.num_kv_heads, batch);
  const bool dep = detail::pdl_enabled();
  // RAGD_CUDA_DECODE_PIPELINE=0: the loads of a step are issued only when the step starts (for
  // comparisons).
  auto* kernel = switch_off("RAGD_CUDA_DECODE_PIPELINE") ? decode_kernel<D, G, false> : decode_kernel<D, G, true>;
  RAGD_RETURN_IF_ERROR(detail::cuda_status(
      detail::launch_kernel(dep, kernel, grid, dim3(kThreads), 0, s, p), "attention_decode"));
  if (p.num_splits > 1) {
    RAGD_RETURN_IF_ERROR(detail::cuda_status(
        detail::launch_kernel(dep, merge_splits_kernel<D>, dim3(batch * p.num_heads), dim3(D), 0, s, p),
        "attention_decode: merge"));
  }
  return Status::OK();
}

template <int D>
Status dispatch_group(int group, const DecodeParams& p, int batch, cudaStream_t s) {
  switch (group) {
    case 1: return launch<D, 1>(p, batch, s);
    case 2: return launch<D, 2>(p, batch, s);
    case 3: return launch<D, 3>(p, batch, s);
    case 4: return launch<D, 4>(p, batch, s);
    case 8: return launch<D, 8>(p, batch, s);
    default:
      return Status::InvalidArgument("attention_decode: unsupported GQA group " + std::to_string(group) +
                                     " (num_heads / num_kv_heads; CUDA kernels are built for 1, 2, 3, 4, 8)");
  }
}

}  // namespace

DecodePlan plan_attention_decode(int batch, int num_kv_heads, int max_kv_len, int num_sms, int num_splits_override) {
  DecodePlan plan;
  const int len = std::max(1, max_kv_len);
  int splits = num_splits_override;
  if (splits <= 0) {
    const int ctas = std::max(1, batch * num_kv_heads);
    const int target = 2 * std::max(1, num_sms);
    splits = (target + ctas - 1) / ctas;
    splits = std::min(splits, std::max(1, len / 256));  // at least ~256 keys per split
    splits = std::clamp(splits, 1, 64);
  }
  plan.num_splits = splits;
  plan.keys_per_split = (len + splits - 1) / splits;
  return plan;
}

size_t attention_decode_workspace_bytes(const DecodeBatchBf16& batch, const DecodePlan& plan) {
  if (plan.num_splits <= 1) return 0;
  return sizeof(float) * static_cast<size_t>(batch.batch) * batch.num_heads * plan.num_splits *
         (static_cast<size_t>(batch.head_dim) + 1);
}

Status attention_decode(const DecodeBatchBf16& batch, float scale, const DecodePlan& plan, void* workspace,
                        size_t workspace_bytes, float* out, float* lse, void* stream) {
  if (batch.head_dim != 32 && batch.head_dim != 64 && batch.head_dim != 128) {
    return Status::InvalidArgument("attention_decode: unsupported head_dim " + std::to_string(batch.head_dim) +
                                   " (CUDA kernels are built for 32, 64 and 128)");
  }
  if (batch.num_heads <= 0 || batch.num_kv_heads <= 0 || batch.num_heads % batch.num_kv_heads != 0) {
    return Status::InvalidArgument("attention_decode: num_heads " + std::to_string(batch.num_heads) +
                                   " is not a positive multiple of num_kv_heads " + std::to_string(batch.num_kv_heads));
  }
  if (batch.batch < 0 || batch.block_size <= 0 || batch.max_blocks_per_seq < 0) {
    return Status::InvalidArgument("attention_decode: bad batch " + std::to_string(batch.batch) + ", block_size " +
                                   std::to_string(batch.block_size) + " or max_blocks_per_seq " +
                                   std::to_string(batch.max_blocks_per_seq));
  }
  if (plan.num_splits < 1 || plan.num_splits > 65535 || plan.keys_per_split < 1) {
    return Status::InvalidArgument("attention_decode: bad plan (num_splits " + std::to_string(plan.num_splits) +
                                   ", keys_per_split " + std::to_string(plan.keys_per_split) + ")");
  }
  const size_t need = attention_decode_workspace_bytes(batch, plan);
  if (workspace_bytes < need || (need > 0 && !workspace)) {
    return Status::InvalidArgument("attention_decode: workspace of " + std::to_string(workspace_bytes) +
                                   " bytes, need " + std::to_string(need));
  }
  const int group = batch.num_heads / batch.num_kv_heads;
  if (group != 1 && group != 2 && group != 3 && group != 4 && group != 8) {
    return Status::InvalidArgument("attention_decode: unsupported GQA group " + std::to_string(group) +
                                   " (num_heads / num_kv_heads; CUDA kernels are built for 1, 2, 3, 4, 8)");
  }
  if (batch.batch == 0) return Status::OK();
  if (!batch.q || !batch.k || !batch.v || !batch.block_tables || !batch.kv_lens || !out || !lse) {
    return Status::InvalidArgument("attention_decode: null q, k, v, block_tables, kv_lens, out or lse");
  }
  DecodeParams p{};
  p.q = reinterpret_cast<const bf16*>(batch.q);
  p.k = reinterpret_cast<const bf16*>(batch.k);
  p.v = reinterpret_cast<const bf16*>(batch.v);
  p.block_tables = batch.block_tables;
  p.kv_lens = batch.kv_lens;
  p.out = out;
  p.lse = lse;
  float* ws = static_cast<float*>(workspace);
  const size_t rows = static_cast<size_t>(batch.batch) * batch.num_heads * plan.num_splits;
  p.part_o = plan.num_splits > 1 ? ws : nullptr;
  p.part_lse = plan.num_splits > 1 ? ws + rows * batch.head_dim : nullptr;
  p.max_blocks = batch.max_blocks_per_seq;
  p.block_size = batch.block_size;
  p.num_heads = batch.num_heads;
  p.num_kv_heads = batch.num_kv_heads;
  p.num_splits = plan.num_splits;
  p.keys_per_split = plan.keys_per_split;
  p.scale_log2 = scale * detail::kLog2e;
  auto s = detail::as_stream(stream);
  if (batch.head_dim == 32) return dispatch_group<32>(group, p, batch.batch, s);
  if (batch.head_dim == 64) return dispatch_group<64>(group, p, batch.batch, s);
  return dispatch_group<128>(group, p, batch.batch, s);
}

}  // namespace ragd::kernels::cuda
