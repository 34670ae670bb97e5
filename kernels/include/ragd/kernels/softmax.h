// Softmax, log-sum-exp and argmax helpers (natural log, max-subtracted, fp32 in / out).
// Thread-safety: pure functions.
#pragma once

#include <cstddef>

namespace ragd::kernels {

// log(Σ e^x[i]) over x: [n]; -inf when n == 0 or every x is -inf. fp32 e^x (the kernels'
// exp_approx, ~2 ulp), fp64 sum: relative error ~1e-7 at any n.
float logsumexp(const float* x, size_t n);

// Σ e^(x[i] − shift) over the x[i] >= floor of x: [n], as logsumexp (fp32 e^x, fp64 sum); with
// shift = max(x) no term overflows. Vectorised (AVX-512 / AVX2 / baseline clones): a 128 k
// vocabulary in ~40 µs on one core.
double sum_exp(const float* x, size_t n, float shift, float floor = -__builtin_inff());

// out[i] = e^(x[i] − shift) (fp32, exp_approx) over x: [n]; returns Σ out in fp64. out may be x.
double exp_shifted(const float* x, size_t n, float shift, float* out);

// Index of the largest x (the lowest index on ties; NaNs never win, an all-NaN or empty x gives 0).
size_t argmax(const float* x, size_t n);

// How many x[i] >= floor (vectorised; NaNs are not counted).
size_t count_at_least(const float* x, size_t n, float floor);

// In place: x[i] = e^(x[i] - lse); returns lse. An all -inf row becomes zeros (returns -inf).
float softmax_inplace(float* x, size_t n);

// Row-wise softmax of x: [rows, n] (row stride `stride`); lse_out: [rows] or nullptr.
void softmax_rows(float* x, int rows, int n, int stride, float* lse_out);

}  // namespace ragd::kernels
