// GEMM glue over OpenBLAS (f32). Weights are f32 in memory (bf16/f16 checkpoints are converted at
// load). All matrices are row-major.
// Thread-safety: pure functions; safe from any thread. Inside an OpenMP parallel region OpenBLAS
// runs single-threaded.
#pragma once

namespace ragd::kernels {

// Dense layer in the Hugging Face nn.Linear layout:
//   x: [m, k]   w: [n, k] (row-major, one output feature per row)   bias: [n] or nullptr
//   y: [m, n] = x · wᵀ + bias        (accumulate: y += x · wᵀ + bias, e.g. a residual add)
// Up to 8 rows (decode steps) a streaming kernel reads w exactly once (decode is bound by
// streaming the weights); more rows go to OpenBLAS sgemm (prefill).
void linear(const float* x, int m, int k, const float* w, int n, const float* bias, float* y,
            bool accumulate = false);

// General C[m, n] = alpha · op(A) · op(B) + beta · C, row-major with leading dimensions.
//   op(A): [m, k] (A is [k, m] when trans_a)   op(B): [k, n] (B is [n, k] when trans_b)
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc);

}  // namespace ragd::kernels
