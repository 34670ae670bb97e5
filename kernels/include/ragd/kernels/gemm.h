// Dense layers over weights in any stored format (weight_matrix.h), and GEMM glue over OpenBLAS.
// All matrices are row-major.
// Thread-safety: pure functions; safe from any thread. linear() runs on the kernels' thread team
// (threads.h); gemm() on OpenBLAS's threads (single-threaded inside an OpenMP parallel region).
#pragma once

#include <string_view>

#include "ragd/kernels/cpu_features.h"
#include "ragd/kernels/weight_matrix.h"

namespace ragd::kernels {

// Dense layer in the Hugging Face nn.Linear layout:
//   x: [m, k]   w: [n, k] (n = w.rows, k = w.cols)   bias: [n] or nullptr
//   y: [m, n] = x · wᵀ + bias        (accumulate: y += x · wᵀ + bias, e.g. a residual add)
// w streams once per 32 rows of x in its stored format through the best kernels this CPU has
// (decode: once per step). f32 / bf16 / f16 weights widen to f32 in registers; for q8 weights x
// is quantized per block of 32 like the weights (d = max|x| / 127) and the dot products are int8.
// Accumulation is f32 throughout.
void linear(const float* x, int m, int k, const WeightMatrix& w, const float* bias, float* y,
            bool accumulate = false);
// linear() with the kernels of an instruction-set level (capped at what the CPU supports): tests
// run every path against the same reference.
void linear_at(CpuLevel level, const float* x, int m, int k, const WeightMatrix& w, const float* bias, float* y,
               bool accumulate = false);

// General C[m, n] = alpha · op(A) · op(B) + beta · C, row-major with leading dimensions.
//   op(A): [m, k] (A is [k, m] when trans_a)   op(B): [k, n] (B is [n, k] when trans_b)
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc);

}  // namespace ragd::kernels
