// One-row GEMV family for decode steps on the GPU: y = W · x̂ for a single activation row, with the
// producer of x̂ fused into the kernel's prologue and, for the MLP, SwiGLU fused into its epilogue.
// A batch-1 decode step is a chain of such products; fusing the RMSNorm before the QKV and
// gate/up products, the f32 → bf16 conversion before o_proj and the SwiGLU after gate/up removes
// four launches per layer. The arithmetic is that of the unfused chain (cu::rmsnorm into bf16 /
// cu::convert, then linear_bf16, then cu::swiglu on the bf16 products): x̂ is rounded to bf16, the
// products accumulate in fp32.
// Thread-safety: pure functions of their arguments; enqueued on the given stream.
#pragma once

#include <cstdint>

#include "ragd/common/status.h"
#include "ragd/kernels/cuda/device.h"

namespace ragd::kernels::cuda {

enum class GemvInput : uint8_t {
  kBf16,        // x: bf16 [k], used as is
  kF32,         // x: f32 [k], rounded to bf16
  kRmsNormF32,  // x: f32 [k]; x̂ = bf16(x · rsqrt(mean(x²) + eps) · norm_w), norm_w f32 [k]
};

enum class GemvOutput : uint8_t {
  kStore,   // y: [n] in out_dtype; + y when accumulate (a residual add)
  kSwiGlu,  // w holds gate rows [0, n/2) and up rows [n/2, n) (the fused gate_up layout);
            // y: bf16 [n/2] = silu(g) · u with g, u the bf16-rounded products
};

struct GemvArgs {
  GemvInput input = GemvInput::kBf16;
  const void* x = nullptr;
  const float* norm_w = nullptr;  // kRmsNormF32 only
  float eps = 1e-5f;
  int k = 0;
  const uint16_t* w = nullptr;  // bf16 [n, k], one output feature per row
  int n = 0;
  GemvOutput output = GemvOutput::kStore;
  void* y = nullptr;
  DType out_dtype = DType::kF32;  // kStore only (kSwiGlu writes bf16)
  bool accumulate = false;        // kStore only
};

// True when the fused forms take these operands: k a multiple of 8, x̂ (2·k bytes) fits a block's
// shared memory without the opt-in (k <= 24,448), 16-byte aligned x / w / norm_w, and neither RAGD_CUDA_GEMV=0 nor RAGD_CUDA_FUSED=0
// is set (measurement switches, read at every call). Callers fall back to the unfused chain.
bool gemv_fusable(const GemvArgs& a);

// InvalidArgument when !gemv_fusable(a) or on bad sizes (n <= 0, odd n for kSwiGlu, null pointers).
Status gemv_bf16(const GemvArgs& a, void* stream);

namespace detail {
// The plain one-row product behind linear_bf16's m == 1 path (x bf16, no fusion).
Status launch_gemv(const uint16_t* x, int k, const uint16_t* w, int n, void* y, DType out_dtype, bool accumulate,
                   void* stream);
}  // namespace detail

}  // namespace ragd::kernels::cuda
