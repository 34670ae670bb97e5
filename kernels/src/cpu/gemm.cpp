#include "ragd/kernels/gemm.h"

#include <cblas.h>

#include <cstring>

namespace ragd::kernels {

void linear(const float* x, int m, int k, const float* w, int n, const float* bias, float* y, bool accumulate) {
  if (m <= 0 || n <= 0) return;
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
  if (m == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, w, k, x, 1, beta, y, 1);
    return;
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
