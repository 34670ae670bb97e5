#include "ragd/kernels/cuda/gemm.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>

#include "cuda_util.cuh"

namespace ragd::kernels::cuda {
namespace {

Status cublas_status(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::OK();
  return Status::Internal(std::string(what) + ": " + cublasGetStatusName(s) + " (" + cublasGetStatusString(s) + ")");
}

// ---- one-row GEMV ------------------------------------------------------------------------------
// A batch-1 decode step multiplies one row by every weight matrix: the time is reading w once. One
// warp per output feature streams that feature's weight row in 16-byte loads (kGemvUnroll loads in
// flight per lane, evict-first), multiplies it into the activation row (read through the read-only
// cache: every warp of the GPU reads the same x), fp32 accumulation, one warp reduction.
// Measured on an H200 (llama3-8b decode steps, bench_engine_cuda): one row 4-5 % faster than
// cuBLAS; a multi-row variant was 2 % slower at two rows and 58 % slower at eight (each weight
// vector then costs that many activation loads), so only single rows take this path.
constexpr int kGemvWarps = 8;
constexpr int kGemvUnroll = 4;

__device__ __forceinline__ void bf16x8_to_f32(const uint4& u, float (&f)[8]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

template <typename OutT>
__global__ void __launch_bounds__(kGemvWarps * 32) gemv_kernel(const uint4* __restrict__ x, int k, const uint4* __restrict__ w,
                                                              int n, OutT* __restrict__ y, bool accumulate) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * kGemvWarps + (threadIdx.x >> 5);
  if (row >= n) return;
  const int kv = k / 8;  // 16-byte vectors per row
  const uint4* wr = w + static_cast<size_t>(row) * kv;
  float acc = 0.0f;
  for (int base = 0; base < kv; base += 32 * kGemvUnroll) {
    uint4 wv[kGemvUnroll];
#pragma unroll
    for (int u = 0; u < kGemvUnroll; ++u) {
      const int i = base + u * 32 + lane;
      wv[u] = i < kv ? __ldcs(wr + i) : make_uint4(0, 0, 0, 0);  // streamed: read once
    }
#pragma unroll
    for (int u = 0; u < kGemvUnroll; ++u) {
      const int i = base + u * 32 + lane;
      if (i >= kv) break;
      float wf[8], xf[8];
      bf16x8_to_f32(wv[u], wf);
      bf16x8_to_f32(__ldg(x + i), xf);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc = fmaf(wf[e], xf[e], acc);
    }
  }
  const float v = detail::warp_sum(acc);
  if (lane == 0) {
    if constexpr (std::is_same_v<OutT, float>) {
      y[row] = accumulate ? y[row] + v : v;
    } else {
      y[row] = __float2bfloat16_rn(accumulate ? __bfloat162float(y[row]) + v : v);
    }
  }
}

Status launch_gemv(const uint16_t* x, int k, const uint16_t* w, int n, void* y, DType out_dtype, bool acc,
                   cudaStream_t s) {
  const dim3 grid((n + kGemvWarps - 1) / kGemvWarps);
  const auto* xv = reinterpret_cast<const uint4*>(x);
  const auto* wv = reinterpret_cast<const uint4*>(w);
  if (out_dtype == DType::kF32) {
    gemv_kernel<float><<<grid, kGemvWarps * 32, 0, s>>>(xv, k, wv, n, static_cast<float*>(y), acc);
  } else {
    gemv_kernel<__nv_bfloat16><<<grid, kGemvWarps * 32, 0, s>>>(xv, k, wv, n, static_cast<__nv_bfloat16*>(y), acc);
  }
  return detail::launch_status("linear_bf16 (gemv)");
}

// The GEMV path: one row, 16-byte aligned rows and pointers; RAGD_CUDA_GEMV=0 keeps cuBLAS (a
// measurement switch, read at every call so that a benchmark can compare both in one process).
bool use_gemv(const uint16_t* x, int m, int k, const uint16_t* w) {
  const char* e = std::getenv("RAGD_CUDA_GEMV");
  const bool enabled = !(e != nullptr && e[0] == '0' && e[1] == '\0');
  return enabled && m == 1 && k % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(w) % 16 == 0;
}

}  // namespace

Result<CublasHandle> CublasHandle::create() {
  cublasHandle_t h = nullptr;
  const cublasStatus_t s = cublasCreate(&h);
  if (s != CUBLAS_STATUS_SUCCESS) return cublas_status(s, "cublasCreate");
  CublasHandle out;
  out.h_ = h;
  return Result<CublasHandle>(std::move(out));
}

CublasHandle& CublasHandle::operator=(CublasHandle&& o) noexcept {
  if (this != &o) {
    if (h_) cublasDestroy(static_cast<cublasHandle_t>(h_));
    h_ = o.h_;
    o.h_ = nullptr;
  }
  return *this;
}

CublasHandle::~CublasHandle() {
  if (h_) cublasDestroy(static_cast<cublasHandle_t>(h_));
}

Status linear_bf16(const CublasHandle& handle, void* stream, const uint16_t* x, int m, int k,
                   const uint16_t* w, int n, void* y, DType out_dtype, bool accumulate, void* workspace,
                   size_t workspace_bytes) {
  if (m <= 0 || n <= 0 || k <= 0) {
    return Status::InvalidArgument("linear_bf16: m, n, k must be positive (m=" + std::to_string(m) +
                                   " n=" + std::to_string(n) + " k=" + std::to_string(k) + ")");
  }
  if (!x || !w || !y) return Status::InvalidArgument("linear_bf16: null x, w or y");
  if (use_gemv(x, m, k, w)) return launch_gemv(x, k, w, n, y, out_dtype, accumulate, detail::as_stream(stream));
  if (!handle.get()) return Status::InvalidArgument("linear_bf16: empty cuBLAS handle");
  auto h = static_cast<cublasHandle_t>(handle.get());
  RAGD_RETURN_IF_ERROR(cublas_status(cublasSetStream(h, detail::as_stream(stream)), "cublasSetStream"));
  RAGD_RETURN_IF_ERROR(cublas_status(cublasSetWorkspace(h, workspace_bytes ? workspace : nullptr, workspace ? workspace_bytes : 0),
                                     "cublasSetWorkspace"));
  // Row-major y[m, n] = x[m, k] · w[n, k]ᵀ is column-major yᵀ[n, m] = w · xᵀ, i.e. op(A) = wᵀ-view
  // transposed: A = w (col-major [k, n], lda k, op T), B = x (col-major [k, m], ldb k, op N).
  const float alpha = 1.0f;
  const float beta = accumulate ? 1.0f : 0.0f;
  const cudaDataType_t ct = out_dtype == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF;
  return cublas_status(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w, CUDA_R_16BF, k, x,
                                    CUDA_R_16BF, k, &beta, y, ct, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                       "cublasGemmEx");
}

}  // namespace ragd::kernels::cuda
