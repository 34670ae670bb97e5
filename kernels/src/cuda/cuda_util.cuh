// Internal helpers shared by the CUDA kernels: error mapping, bf16 load/store, launch checks.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "ragd/common/status.h"
#include "ragd/kernels/cuda/device.h"

namespace ragd::kernels::cuda::detail {

inline Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::OK();
  return Status::Internal(std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

// Checks the launch that was just enqueued (configuration errors show here; faults show later).
inline Status launch_status(const char* kernel) { return cuda_status(cudaGetLastError(), kernel); }

inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

inline const char* dtype_name(DType d) { return d == DType::kF32 ? "f32" : "bf16"; }

// Element access for the dtype-templated kernels (arithmetic is always fp32).
__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Σ v over a block of kThreads threads (at most 1024), the same value in every thread; `part` is
// shared scratch of kThreads / 32 floats. Two barriers; every thread of the block calls it.
template <int kThreads>
__device__ __forceinline__ float block_sum(float v, float* part) {
  v = warp_sum(v);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    float t = threadIdx.x < kThreads / 32 ? part[threadIdx.x] : 0.0f;
    t = warp_sum(t);
    if (threadIdx.x == 0) part[0] = t;
  }
  __syncthreads();
  return part[0];
}

// Compute capability of the current device as major · 10 + minor (90 = Hopper), cached per device;
// 0 when unknown.
int compute_capability();

// Programmatic dependent launch (PDL, compute capability 9.0+): a kernel launched dependent may
// start while the previous kernel of its stream is still running. Its contract: every block calls
// wait_for_prerequisites() before it reads anything an earlier kernel of the stream wrote and before
// it writes anything; before that it may only read what no kernel of the stream writes (weights).
// allow_dependents() lets the next dependent kernel launch once every block of this one has called
// it (its blocks then sit in their own wait). Both are no-ops in a kernel launched the usual way.
// Opt-in with RAGD_CUDA_PDL=1 until measured.
bool pdl_enabled();

__device__ __forceinline__ void wait_for_prerequisites() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
// Starts bringing a line into L2 (no register is written; a bad address is not an error).
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p)); }

// Launches kernel<<<grid, block, smem, s>>>(args...), as a dependent launch when `dependent`.
template <typename... Params, typename... Args>
cudaError_t launch_kernel(bool dependent, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                          cudaStream_t s, Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = dependent ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(std::forward<Args>(args))...);
}

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

}  // namespace ragd::kernels::cuda::detail
