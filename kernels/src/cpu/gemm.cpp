#include "ragd/kernels/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>

namespace ragd::kernels {

namespace {

// Rows of the batch up to which linear() uses the streaming kernel below instead of sgemm: with few
// rows OpenBLAS packs the whole weight matrix on every call (an extra pass over it) and runs its
// micro-kernel mostly empty, while decode steps are bound by reading w exactly once.
constexpr int kStreamMaxRows = 8;

// 8-float vectors: one ymm register on AVX2 / AVX-512 machines, two xmm on the baseline clone.
// (-Wpsabi only warns that the baseline clone passes them differently; the helpers are inlined.)
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float v8f __attribute__((vector_size(32)));

__attribute__((always_inline)) inline v8f load8(const float* p) {
  v8f v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

__attribute__((always_inline)) inline float hsum8(v8f v) {
  return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

// Output features j, j+1 for x rows r0 .. r0+RB-1: 2·RB vector accumulators stay in registers;
// the two weight rows are loaded once per 8 floats and reused for all RB x rows.
template <int RB>
__attribute__((always_inline)) inline void block_2xrb(const float* x, int r0, int k, const float* w0, const float* w1,
                                                      float out[2][4]) {
  v8f acc0[RB], acc1[RB];
  for (int r = 0; r < RB; ++r) acc0[r] = acc1[r] = v8f{};
  const float* xr[RB];
  for (int r = 0; r < RB; ++r) xr[r] = x + static_cast<size_t>(r0 + r) * k;
  int i = 0;
  for (; i + 8 <= k; i += 8) {
    const v8f wa = load8(w0 + i), wb = load8(w1 + i);
    for (int r = 0; r < RB; ++r) {
      const v8f xv = load8(xr[r] + i);
      acc0[r] += wa * xv;
      acc1[r] += wb * xv;
    }
  }
  for (int r = 0; r < RB; ++r) {
    float s0 = hsum8(acc0[r]), s1 = hsum8(acc1[r]);
    for (int t = i; t < k; ++t) {
      s0 += w0[t] * xr[r][t];
      s1 += w1[t] * xr[r][t];
    }
    out[0][r] = s0;
    out[1][r] = s1;
  }
}

// y[r, n0..n1) (+)= x[r] · w[n]ᵀ (+ bias[n]) for every row r < m; w streams from memory once.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void stream_rows(const float* x, int m, int k, const float* w, int n0, int n1, int n, const float* bias, float* y,
                 bool accumulate) {
  auto put = [&](int r, int j, float v) {
    v += bias != nullptr ? bias[j] : 0.0f;
    float* yp = y + static_cast<size_t>(r) * n + j;
    *yp = accumulate ? *yp + v : v;
  };
  for (int j = n0; j < n1; j += 2) {
    const float* w0 = w + static_cast<size_t>(j) * k;
    const bool pair = j + 1 < n1;
    const float* w1 = pair ? w0 + k : w0;  // odd tail: duplicate row, second result dropped
    float out[2][4];
    for (int r0 = 0; r0 < m; r0 += 4) {
      const int rb = std::min(4, m - r0);
      switch (rb) {
        case 4: block_2xrb<4>(x, r0, k, w0, w1, out); break;
        case 3: block_2xrb<3>(x, r0, k, w0, w1, out); break;
        case 2: block_2xrb<2>(x, r0, k, w0, w1, out); break;
        default: block_2xrb<1>(x, r0, k, w0, w1, out); break;
      }
      for (int r = 0; r < rb; ++r) {
        put(r0 + r, j, out[0][r]);
        if (pair) put(r0 + r, j + 1, out[1][r]);
      }
    }
  }
}

void linear_stream(const float* x, int m, int k, const float* w, int n, const float* bias, float* y,
                   bool accumulate) {
  constexpr int kRowsPerTask = 64;  // multiple of 4
  const int tasks = (n + kRowsPerTask - 1) / kRowsPerTask;
#pragma omp parallel for schedule(static) if (tasks > 1)
  for (int t = 0; t < tasks; ++t) {
    const int n0 = t * kRowsPerTask;
    stream_rows(x, m, k, w, n0, std::min(n, n0 + kRowsPerTask), n, bias, y, accumulate);
  }
}

}  // namespace

void linear(const float* x, int m, int k, const float* w, int n, const float* bias, float* y, bool accumulate) {
  if (m <= 0 || n <= 0) return;
  if (m <= kStreamMaxRows) {
    linear_stream(x, m, k, w, n, bias, y, accumulate);
    return;
  }
  float beta = accumulate ? 1.0f : 0.0f;
  if (bias != nullptr) {
    for (int r = 0; r < m; ++r) {
      float* yr = y + static_cast<size_t>(r) * n;
      if (accumulate) {
        for (int i = 0; i < n; ++i) yr[i] += bias[i];
      } else {
        std::memcpy(yr, bias, sizeof(float) * n);
      }
    }
    beta = 1.0f;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k, w, k, beta, y, n);
}

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace ragd::kernels
