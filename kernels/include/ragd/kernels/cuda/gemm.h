// GEMM glue over cuBLAS: bf16 operands, fp32 accumulation (CUBLAS_COMPUTE_32F), row-major.
// Thread-safety: a cuBLAS handle is used by one thread at a time; the functions are otherwise pure.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ragd/kernels/cuda/device.h"

namespace ragd::kernels::cuda {

// Owns a cublasHandle_t (opaque here). Not copyable; one per stream-owning thread.
class CublasHandle {
 public:
  // Internal on failure (no device, no driver, cuBLAS init error).
  static Result<CublasHandle> create();
  CublasHandle() = default;
  CublasHandle(CublasHandle&& o) noexcept : h_(o.h_) { o.h_ = nullptr; }
  CublasHandle& operator=(CublasHandle&& o) noexcept;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  ~CublasHandle();
  void* get() const { return h_; }

 private:
  void* h_ = nullptr;  // cublasHandle_t
};

// Suggested caller workspace for linear_bf16 (cuBLAS split-K / algorithm scratch), bytes.
constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;

// Dense layer in the Hugging Face nn.Linear layout (same contract as ragd::kernels::linear):
//   x: [m, k] bf16   w: [n, k] bf16 (one output feature per row)
//   y: [m, n] = x · wᵀ (+ y when accumulate, e.g. a residual add), out_dtype kF32 or kBf16.
// workspace: device scratch of workspace_bytes, 256-byte aligned (cudaMalloc is); may be 0 / nullptr,
// cuBLAS then runs the algorithms that need none.
// m == 1 with k a multiple of 8 and 16-byte aligned x, w runs ragd's GEMV kernel instead of cuBLAS
// (decode steps: one pass over w at close to the HBM bandwidth); RAGD_CUDA_GEMV=0 turns it off.
// InvalidArgument on m, n, k <= 0 or null pointers; Internal on a cuBLAS error.
Status linear_bf16(const CublasHandle& handle, void* stream, const uint16_t* x, int m, int k,
                   const uint16_t* w, int n, void* y, DType out_dtype, bool accumulate,
                   void* workspace, size_t workspace_bytes);

}  // namespace ragd::kernels::cuda
