// Softmax and log-sum-exp helpers (natural log, max-subtracted, fp32 in / out, fp64-free).
// Thread-safety: pure functions.
#pragma once

#include <cstddef>

namespace ragd::kernels {

// log(Σ e^x[i]) over x: [n]; -inf when n == 0 or every x is -inf.
float logsumexp(const float* x, size_t n);

// In place: x[i] = e^(x[i] - lse); returns lse. An all -inf row becomes zeros (returns -inf).
float softmax_inplace(float* x, size_t n);

// Row-wise softmax of x: [rows, n] (row stride `stride`); lse_out: [rows] or nullptr.
void softmax_rows(float* x, int rows, int n, int stride, float* lse_out);

}  // namespace ragd::kernels
