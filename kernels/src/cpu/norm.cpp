#include "ragd/kernels/norm.h"

#include <cmath>

#include "ragd/kernels/threads.h"

namespace ragd::kernels {

namespace {
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void rmsnorm_row(const float* x, int dim, const float* w, float eps, float* y) {
  float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
  for (int i = 0; i < dim; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
#pragma omp simd
  for (int i = 0; i < dim; ++i) y[i] = x[i] * inv * w[i];
}
}  // namespace

void rmsnorm(const float* x, int rows, int dim, int x_stride, const float* w, float eps, float* y,
             int y_stride) {
  parallel_for(rows, rows > 1, [&](int r0, int r1) {
    for (int r = r0; r < r1; ++r)
      rmsnorm_row(x + static_cast<size_t>(r) * x_stride, dim, w, eps, y + static_cast<size_t>(r) * y_stride);
  });
}

}  // namespace ragd::kernels
