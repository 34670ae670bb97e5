#include "ragd/kernels/softmax.h"

#include <cmath>
#include <limits>

namespace ragd::kernels {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
}

float logsumexp(const float* x, size_t n) {
  float m = kNegInf;
  for (size_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  if (m == kNegInf) return kNegInf;
  double s = 0.0;
  for (size_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(x[i] - m));
  return m + static_cast<float>(std::log(s));
}

float softmax_inplace(float* x, size_t n) {
  float m = kNegInf;
  for (size_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  if (m == kNegInf) {
    for (size_t i = 0; i < n; ++i) x[i] = 0.0f;
    return kNegInf;
  }
  float s = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    s += x[i];
  }
  const float inv = 1.0f / s;
  for (size_t i = 0; i < n; ++i) x[i] *= inv;
  return m + std::log(s);
}

void softmax_rows(float* x, int rows, int n, int stride, float* lse_out) {
#pragma omp parallel for schedule(static) if (rows > 8)
  for (int r = 0; r < rows; ++r) {
    const float l = softmax_inplace(x + static_cast<size_t>(r) * stride, static_cast<size_t>(n));
    if (lse_out != nullptr) lse_out[r] = l;
  }
}

}  // namespace ragd::kernels
