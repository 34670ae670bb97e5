#include "ragd/kernels/activation.h"

#include "vec_math.h"
#include "ragd/kernels/threads.h"

namespace ragd::kernels {

namespace {
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void swiglu_row(int dim, const float* g, const float* u, float* y) {
#pragma omp simd
  for (int i = 0; i < dim; ++i) y[i] = g[i] / (1.0f + detail::exp_approx(-g[i])) * u[i];
}
}  // namespace

void swiglu(int rows, int dim, const float* gate, int gate_stride, const float* up, int up_stride,
            float* y, int y_stride) {
  parallel_for(rows, rows > 1, [&](int r0, int r1) {
    for (int r = r0; r < r1; ++r)
      swiglu_row(dim, gate + static_cast<size_t>(r) * gate_stride, up + static_cast<size_t>(r) * up_stride,
                 y + static_cast<size_t>(r) * y_stride);
  });
}

}  // namespace ragd::kernels
