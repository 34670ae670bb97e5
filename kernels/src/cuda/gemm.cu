#include "ragd/kernels/cuda/gemm.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "cuda_util.cuh"
#include "ragd/kernels/cuda/gemv.h"

namespace ragd::kernels::cuda {
namespace {

Status cublas_status(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::OK();
  return Status::Internal(std::string(what) + ": " + cublasGetStatusName(s) + " (" + cublasGetStatusString(s) + ")");
}

// The GEMV path: one row, 16-byte aligned rows and pointers; RAGD_CUDA_GEMV=0 keeps cuBLAS (a
// measurement switch, read at every call so that a benchmark can compare both in one process).
bool use_gemv(const uint16_t* x, int m, int k, const uint16_t* w) {
  return !switch_off("RAGD_CUDA_GEMV") && m == 1 && k % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
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
  if (use_gemv(x, m, k, w)) return detail::launch_gemv(x, k, w, n, y, out_dtype, accumulate, stream);
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
