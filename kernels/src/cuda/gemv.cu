// One-row GEMV kernels (decode steps): the plain product behind linear_bf16's m == 1 path and the
// fused forms of ragd/kernels/cuda/gemv.h. The one dispatch point of the family is gemv_bf16 /
// detail::launch_gemv.
#include "ragd/kernels/cuda/gemv.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda_util.cuh"

namespace ragd::kernels::cuda {
namespace {

// A batch-1 decode step multiplies one row by every weight matrix: the time is reading w once. One
// warp per output feature streams that feature's weight row in 16-byte loads (kUnroll loads in
// flight per lane, evict-first), multiplies it into the activation row, fp32 accumulation, one warp
// reduction. Measured on an H200 (llama3-8b decode steps, bench_engine_cuda): one row 4-5 % faster
// than cuBLAS; a multi-row variant was 2 % slower at two rows and 58 % slower at eight (each weight
// vector then costs that many activation loads), so only single rows take this path.
constexpr int kPlainWarps = 8;
// The fused forms first build x̂ in shared memory, once per block: larger blocks amortise that
// prologue (16 warps: 16 outputs per block, so that the llama3-8b shapes still give every SM two
// or more blocks).
constexpr int kFusedWarps = 16;
constexpr int kUnroll = 4;
// x̂ in dynamic shared memory without the opt-in attribute: static + dynamic must stay within 48 KB
// (the kernel's own static use is 64 bytes).
constexpr int kMaxStagedBytes = 48 * 1024 - 256;

__device__ __forceinline__ void bf16x8_to_f32(const uint4& u, float (&f)[8]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

__device__ __forceinline__ uint4 f32x8_to_bf16(const float (&f)[8]) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t lo = __bfloat16_as_ushort(__float2bfloat16_rn(f[2 * i]));
    const uint32_t hi = __bfloat16_as_ushort(__float2bfloat16_rn(f[2 * i + 1]));
    w[i] = lo | (hi << 16);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ float round_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

// Σ w[row] · x over kv 16-byte vectors, for kRows weight rows at once (their loads in flight
// together); x in global memory (through the read-only cache: every warp reads the same x) or, with
// kSharedX, in shared memory. Lane sums, not reduced.
template <int kRows, bool kSharedX>
__device__ __forceinline__ void dot_rows(const uint4* const (&wr)[kRows], const uint4* x, int kv, int lane,
                                         float (&acc)[kRows]) {
  for (int base = 0; base < kv; base += 32 * kUnroll) {
    uint4 wv[kRows][kUnroll];
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = base + u * 32 + lane;
        wv[r][u] = i < kv ? __ldcs(wr[r] + i) : make_uint4(0, 0, 0, 0);  // streamed: read once
      }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = base + u * 32 + lane;
      if (i >= kv) break;
      float xf[8];
      if constexpr (kSharedX) {
        bf16x8_to_f32(x[i], xf);
      } else {
        bf16x8_to_f32(__ldg(x + i), xf);
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float wf[8];
        bf16x8_to_f32(wv[r][u], wf);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r] = fmaf(wf[e], xf[e], acc[r]);
      }
    }
  }
}

// Dependent launches (detail::launch_kernel): before waiting for the previous kernel, a warp asks
// L2 for the first kUnroll loads of each of its weight rows, so that the weight stream is already
// running when the previous kernel's tail ends.
template <int kRows>
__device__ __forceinline__ void prefetch_first_loads(const uint4* const (&wr)[kRows], int kv, int lane) {
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = u * 32 + lane;
      if (i < kv) detail::prefetch_l2(wr[r] + i);
    }
}

template <typename OutT>
__device__ __forceinline__ void store(OutT* y, int row, float v, bool accumulate) {
  if constexpr (std::is_same_v<OutT, float>) {
    y[row] = accumulate ? y[row] + v : v;
  } else {
    y[row] = __float2bfloat16_rn(accumulate ? __bfloat162float(y[row]) + v : v);
  }
}

template <typename OutT>
__global__ void __launch_bounds__(kPlainWarps * 32) gemv_kernel(const uint4* __restrict__ x, int k, const uint4* __restrict__ w,
                                                               int n, OutT* __restrict__ y, bool accumulate) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * kPlainWarps + (threadIdx.x >> 5);
  const int kv = k / 8;  // 16-byte vectors per row
  const uint4* const wr[1] = {w + static_cast<size_t>(row) * kv};
  detail::allow_dependents();
  if (row < n) prefetch_first_loads<1>(wr, kv, lane);  // weights: written by no kernel
  detail::wait_for_prerequisites();
  if (row >= n) return;
  float acc[1] = {0.0f};
  dot_rows<1, false>(wr, x, kv, lane, acc);
  const float v = detail::warp_sum(acc[0]);
  if (lane == 0) store(y, row, v, accumulate);
}

// The fused forms. Prologue: the block writes x̂ (bf16, k / 8 vectors) to shared memory — for
// kRmsNormF32 after a block reduction of Σ x² (each block repeats it: x is k floats in L2, cheaper
// than a launch). Then one warp per output: one weight row (kStore) or the gate and up rows of one
// output (kSwiGlu), loads of both in flight together.
template <GemvInput kIn, GemvOutput kOut, typename OutT>
__global__ void __launch_bounds__(kFusedWarps * 32)
    gemv_fused_kernel(const void* __restrict__ xin, const float* __restrict__ norm_w, float eps, int k,
                      const uint4* __restrict__ w, int n, OutT* __restrict__ y, bool accumulate) {
  extern __shared__ uint4 xs[];
  __shared__ float part[kFusedWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int kv = k / 8;
  const int out = blockIdx.x * kFusedWarps + warp;
  detail::allow_dependents();
  if constexpr (kOut == GemvOutput::kSwiGlu) {
    const int half = n / 2;
    if (out < half) {
      const uint4* const pr[2] = {w + static_cast<size_t>(out) * kv, w + static_cast<size_t>(out + half) * kv};
      prefetch_first_loads<2>(pr, kv, lane);
    }
  } else if (out < n) {
    const uint4* const pr[1] = {w + static_cast<size_t>(out) * kv};
    prefetch_first_loads<1>(pr, kv, lane);
  }
  detail::wait_for_prerequisites();  // x is the previous kernel's output
  if constexpr (kIn == GemvInput::kBf16) {
    for (int i = threadIdx.x; i < kv; i += blockDim.x) xs[i] = static_cast<const uint4*>(xin)[i];
  } else {
    const float4* xf = static_cast<const float4*>(xin);
    float inv = 1.0f;
    if constexpr (kIn == GemvInput::kRmsNormF32) {
      float ss = 0.0f;
      for (int i = threadIdx.x; i < k / 4; i += blockDim.x) {
        const float4 v = xf[i];
        ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
      }
      ss = detail::warp_sum(ss);
      if (lane == 0) part[warp] = ss;
      __syncthreads();
      float t = 0.0f;
#pragma unroll
      for (int i = 0; i < kFusedWarps; ++i) t += part[i];
      inv = rsqrtf(t / static_cast<float>(k) + eps);
    }
    for (int i = threadIdx.x; i < kv; i += blockDim.x) {
      const float4 a = xf[2 * i], b = xf[2 * i + 1];
      float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
      if constexpr (kIn == GemvInput::kRmsNormF32) {
        const float4 ga = reinterpret_cast<const float4*>(norm_w)[2 * i];
        const float4 gb = reinterpret_cast<const float4*>(norm_w)[2 * i + 1];
        const float g[8] = {ga.x, ga.y, ga.z, ga.w, gb.x, gb.y, gb.z, gb.w};
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] = v[e] * inv * g[e];  // the order of cu::rmsnorm
      }
      xs[i] = f32x8_to_bf16(v);
    }
  }
  __syncthreads();
  if constexpr (kOut == GemvOutput::kSwiGlu) {
    const int half = n / 2;
    if (out >= half) return;
    const uint4* const wr[2] = {w + static_cast<size_t>(out) * kv, w + static_cast<size_t>(out + half) * kv};
    float acc[2] = {0.0f, 0.0f};
    dot_rows<2, true>(wr, xs, kv, lane, acc);
    const float g = round_bf16(detail::warp_sum(acc[0]));
    const float u = round_bf16(detail::warp_sum(acc[1]));
    if (lane == 0) y[out] = __float2bfloat16_rn(g / (1.0f + expf(-g)) * u);  // the arithmetic of cu::swiglu
  } else {
    if (out >= n) return;
    const uint4* const wr[1] = {w + static_cast<size_t>(out) * kv};
    float acc[1] = {0.0f};
    dot_rows<1, true>(wr, xs, kv, lane, acc);
    const float v = detail::warp_sum(acc[0]);
    if (lane == 0) store(y, out, v, accumulate);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <GemvInput kIn>
Status launch_fused(const GemvArgs& a, cudaStream_t s) {
  const size_t smem = sizeof(uint16_t) * static_cast<size_t>(a.k);
  const int outs = a.output == GemvOutput::kSwiGlu ? a.n / 2 : a.n;
  const dim3 grid((outs + kFusedWarps - 1) / kFusedWarps), block(kFusedWarps * 32);
  const auto* wv = reinterpret_cast<const uint4*>(a.w);
  using bf16 = __nv_bfloat16;
  const bool dep = detail::pdl_enabled();
  cudaError_t e;
  if (a.output == GemvOutput::kSwiGlu) {
    e = detail::launch_kernel(dep, gemv_fused_kernel<kIn, GemvOutput::kSwiGlu, bf16>, grid, block, smem, s, a.x,
                              a.norm_w, a.eps, a.k, wv, a.n, static_cast<bf16*>(a.y), false);
  } else if (a.out_dtype == DType::kF32) {
    e = detail::launch_kernel(dep, gemv_fused_kernel<kIn, GemvOutput::kStore, float>, grid, block, smem, s, a.x,
                              a.norm_w, a.eps, a.k, wv, a.n, static_cast<float*>(a.y), a.accumulate);
  } else {
    e = detail::launch_kernel(dep, gemv_fused_kernel<kIn, GemvOutput::kStore, bf16>, grid, block, smem, s, a.x,
                              a.norm_w, a.eps, a.k, wv, a.n, static_cast<bf16*>(a.y), a.accumulate);
  }
  return detail::cuda_status(e, "gemv_bf16 (fused)");
}

}  // namespace

bool gemv_fusable(const GemvArgs& a) {
  if (switch_off("RAGD_CUDA_GEMV") || switch_off("RAGD_CUDA_FUSED")) return false;
  if (a.k <= 0 || a.k % 8 != 0 || sizeof(uint16_t) * static_cast<size_t>(a.k) > kMaxStagedBytes) return false;
  if (!aligned16(a.x) || !aligned16(a.w)) return false;
  return a.input != GemvInput::kRmsNormF32 || aligned16(a.norm_w);
}

Status gemv_bf16(const GemvArgs& a, void* stream) {
  if (a.n <= 0 || (a.output == GemvOutput::kSwiGlu && a.n % 2 != 0)) {
    return Status::InvalidArgument("gemv_bf16: n must be positive (and even for the SwiGLU epilogue), got " +
                                   std::to_string(a.n));
  }
  if (!a.x || !a.w || !a.y || (a.input == GemvInput::kRmsNormF32 && !a.norm_w)) {
    return Status::InvalidArgument("gemv_bf16: null x, w, y or norm weights");
  }
  if (!gemv_fusable(a)) {
    return Status::InvalidArgument("gemv_bf16: operands the fused kernels do not take (k=" + std::to_string(a.k) +
                                   ": a multiple of 8 up to " + std::to_string(kMaxStagedBytes / 2) +
                                   ", 16-byte aligned pointers) or RAGD_CUDA_GEMV / RAGD_CUDA_FUSED is 0");
  }
  const cudaStream_t s = detail::as_stream(stream);
  switch (a.input) {
    case GemvInput::kBf16:
      return launch_fused<GemvInput::kBf16>(a, s);
    case GemvInput::kF32:
      return launch_fused<GemvInput::kF32>(a, s);
    case GemvInput::kRmsNormF32:
      return launch_fused<GemvInput::kRmsNormF32>(a, s);
  }
  return Status::InvalidArgument("gemv_bf16: unknown input form");
}

namespace detail {

Status launch_gemv(const uint16_t* x, int k, const uint16_t* w, int n, void* y, DType out_dtype, bool accumulate,
                   void* stream) {
  const dim3 grid((n + kPlainWarps - 1) / kPlainWarps);
  const auto* xv = reinterpret_cast<const uint4*>(x);
  const auto* wv = reinterpret_cast<const uint4*>(w);
  const cudaStream_t s = as_stream(stream);
  const bool dep = pdl_enabled();
  const cudaError_t e =
      out_dtype == DType::kF32
          ? launch_kernel(dep, gemv_kernel<float>, grid, dim3(kPlainWarps * 32), 0, s, xv, k, wv, n,
                          static_cast<float*>(y), accumulate)
          : launch_kernel(dep, gemv_kernel<__nv_bfloat16>, grid, dim3(kPlainWarps * 32), 0, s, xv, k, wv, n,
                          static_cast<__nv_bfloat16*>(y), accumulate);
  return cuda_status(e, "linear_bf16 (gemv)");
}

}  // namespace detail
}  // namespace ragd::kernels::cuda
