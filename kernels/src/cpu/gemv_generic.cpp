// Portable small-batch kernels (any x86-64, any CPU): plain loops the compiler vectorises for the
// baseline instruction set. The reference the vectorised tables are tested against.
#include <vector>

#include "gemv.h"
#include "ragd/kernels/half.h"

namespace ragd::kernels::detail {

namespace {

// Weight row j as f32 into buf (k floats).
void row_f32(const WeightMatrix& w, int j, float* buf) { weight_rows_to_f32(w, j, j + 1, buf); }

void rows_float(const GemvArgs& a, int n0, int n1) {
  thread_local std::vector<float> buf;
  buf.resize(a.k);
  for (int j = n0; j < n1; ++j) {
    row_f32(*a.w, j, buf.data());
    for (int r = 0; r < a.m; ++r) {
      const float* xr = a.x + static_cast<size_t>(r) * a.k;
      float s = 0.0f;
      for (int i = 0; i < a.k; ++i) s += buf[i] * xr[i];
      put_result(a, r, j, s);
    }
  }
}

void rows_q8(const GemvArgs& a, int n0, int n1) {
  const QuantizedRows& xq = *a.xq;
  const auto* wq = static_cast<const uint8_t*>(a.w->data);
  for (int j = n0; j < n1; ++j) {
    for (int r = 0; r < a.m; ++r) {
      const int8_t* xr = xq.q + static_cast<size_t>(r) * xq.kpad;
      const float* dx = xq.d + static_cast<size_t>(r) * xq.blocks;
      float s = 0.0f;
      for (int b = 0; b < xq.blocks; ++b) {
        int32_t dot = 0;
        for (int i = b * kQ8Block; i < (b + 1) * kQ8Block; ++i) {
          dot += (static_cast<int>(wq[q8_byte_offset(j, i, xq.blocks)]) - 128) * xr[i];
        }
        s += f16_to_f32(a.w->scales[q8_scale_index(j, b, xq.blocks)]) * dx[b] * static_cast<float>(dot);
      }
      put_result(a, r, j, s);
    }
  }
}

}  // namespace

const GemvTable& gemv_generic() {
  static const GemvTable t{{rows_float, rows_float, rows_float, rows_q8}};
  return t;
}

}  // namespace ragd::kernels::detail
