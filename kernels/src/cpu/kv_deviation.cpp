#include "ragd/kernels/kv_deviation.h"
#include "ragd/kernels/threads.h"

namespace ragd::kernels {

namespace {
float sq_dist(const float* a, const float* b, int n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < n; ++i) {
    const float d = a[i] - b[i];
    s += d * d;
  }
  return s;
}
}  // namespace

void kv_deviation(int rows, int width, const float* k_new, const float* v_new, size_t new_stride,
                  const float* k_old, const float* v_old, size_t old_stride, float* dev) {
  parallel_for(rows, rows > 256, [&](int r0, int r1) {
    for (int r = r0; r < r1; ++r) {
      const size_t n = static_cast<size_t>(r) * new_stride, o = static_cast<size_t>(r) * old_stride;
      dev[r] = sq_dist(k_new + n, k_old + o, width) + sq_dist(v_new + n, v_old + o, width);
    }
  });
}

}  // namespace ragd::kernels
