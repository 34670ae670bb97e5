#include "ragd/kernels/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "vec_math.h"
#include "ragd/kernels/threads.h"

namespace ragd::kernels {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Largest value (NaNs skipped; -inf when there is none).
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
float max_value(const float* x, size_t n) {
  float m = kNegInf;
#pragma omp simd reduction(max : m)
  for (size_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

constexpr int kChunk = 1024;

// Σ e^(x[i] − shift) over one chunk (n <= kChunk), fp32 lanes (a chunk is short enough for fp32
// partial sums).
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
float sum_exp_chunk(const float* x, int n, float shift, float floor) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < n; ++i) s += x[i] >= floor ? detail::exp_approx(x[i] - shift) : 0.0f;
  return s;
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
float exp_shifted_chunk(const float* x, int n, float shift, float* out) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < n; ++i) {
    out[i] = detail::exp_approx(x[i] - shift);
    s += out[i];
  }
  return s;
}

}  // namespace

double exp_shifted(const float* x, size_t n, float shift, float* out) {
  double s = 0.0;
  for (size_t i = 0; i < n; i += kChunk) {
    s += exp_shifted_chunk(x + i, static_cast<int>(std::min<size_t>(kChunk, n - i)), shift, out + i);
  }
  return s;
}

double sum_exp(const float* x, size_t n, float shift, float floor) {
  double s = 0.0;
  for (size_t i = 0; i < n; i += kChunk) {
    s += sum_exp_chunk(x + i, static_cast<int>(std::min<size_t>(kChunk, n - i)), shift, floor);
  }
  return s;
}

float logsumexp(const float* x, size_t n) {
  const float m = max_value(x, n);
  if (m == kNegInf) return kNegInf;
  return m + static_cast<float>(std::log(sum_exp(x, n, m)));
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
size_t count_at_least(const float* x, size_t n, float floor) {
  size_t c = 0;
#pragma omp simd reduction(+ : c)
  for (size_t i = 0; i < n; ++i) c += x[i] >= floor ? 1 : 0;
  return c;
}

size_t argmax(const float* x, size_t n) {
  const float m = max_value(x, n);
  for (size_t i = 0; i < n; ++i) {
    if (x[i] == m) return i;
  }
  return 0;  // empty, or every value NaN
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
  parallel_for(rows, rows > 8, [&](int r0, int r1) {
    for (int r = r0; r < r1; ++r) {
      const float l = softmax_inplace(x + static_cast<size_t>(r) * stride, static_cast<size_t>(n));
      if (lse_out != nullptr) lse_out[r] = l;
    }
  });
}

}  // namespace ragd::kernels
