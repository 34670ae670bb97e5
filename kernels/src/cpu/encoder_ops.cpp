#include "ragd/kernels/encoder_ops.h"

#include <cmath>
#include <cstddef>

#include "vec_math.h"

namespace ragd::kernels {

namespace {

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void layer_norm_row(const float* x, int dim, const float* w, const float* b, float eps, float* y) {
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int i = 0; i < dim; ++i) sum += x[i];
  const double mean = sum / dim;
  double ss = 0.0;
#pragma omp simd reduction(+ : ss)
  for (int i = 0; i < dim; ++i) {
    const double d = x[i] - mean;
    ss += d * d;
  }
  const float inv = static_cast<float>(1.0 / std::sqrt(ss / dim + static_cast<double>(eps)));
  const float m = static_cast<float>(mean);
#pragma omp simd
  for (int i = 0; i < dim; ++i) y[i] = (x[i] - m) * inv * w[i] + b[i];
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void bias_gelu_row(int dim, const float* bias, float* x, GeluKind kind) {
  if (bias) {
#pragma omp simd
    for (int i = 0; i < dim; ++i) x[i] += bias[i];
  }
  if (kind == GeluKind::kErf) {
#pragma omp simd
    for (int i = 0; i < dim; ++i) x[i] = 0.5f * x[i] * (1.0f + detail::erf_approx(x[i] * 0.70710678118654752f));
  } else {
    for (int i = 0; i < dim; ++i) {
      const float v = x[i];
      x[i] = 0.5f * v * (1.0f + std::tanh(0.79788456080286536f * (v + 0.044715f * v * v * v)));
    }
  }
}

}  // namespace

void layer_norm(const float* x, int rows, int dim, int x_stride, const float* w, const float* b, float eps, float* y,
                int y_stride) {
#pragma omp parallel for schedule(static) if (rows > 1)
  for (int r = 0; r < rows; ++r)
    layer_norm_row(x + static_cast<size_t>(r) * x_stride, dim, w, b, eps, y + static_cast<size_t>(r) * y_stride);
}

void bias_gelu(int rows, int dim, const float* bias, float* x, int x_stride, GeluKind kind) {
#pragma omp parallel for schedule(static) if (rows > 1)
  for (int r = 0; r < rows; ++r) bias_gelu_row(dim, bias, x + static_cast<size_t>(r) * x_stride, kind);
}

void add_bias(int rows, int dim, const float* bias, float* x, int x_stride) {
#pragma omp parallel for schedule(static) if (rows > 8)
  for (int r = 0; r < rows; ++r) {
    float* row = x + static_cast<size_t>(r) * x_stride;
#pragma omp simd
    for (int i = 0; i < dim; ++i) row[i] += bias[i];
  }
}

}  // namespace ragd::kernels
