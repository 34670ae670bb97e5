#include "ragd/kernels/lse_merge.h"

#include <cmath>
#include <limits>

#include "ragd/kernels/threads.h"

namespace ragd::kernels {

void merge_state(int head_dim, const float* o_a, float lse_a, const float* o_b, float lse_b,
                 float* o_out, float* lse_out) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const float m = lse_a > lse_b ? lse_a : lse_b;
  if (m == kNegInf) {  // both empty
    for (int i = 0; i < head_dim; ++i) o_out[i] = 0.0f;
    *lse_out = kNegInf;
    return;
  }
  const float ea = std::exp(lse_a - m);  // e^-inf = 0 for an empty side
  const float eb = std::exp(lse_b - m);
  const float lse = m + std::log(ea + eb);
  const float wa = std::exp(lse_a - lse);
  const float wb = std::exp(lse_b - lse);
  for (int i = 0; i < head_dim; ++i) o_out[i] = wa * o_a[i] + wb * o_b[i];
  *lse_out = lse;
}

void merge_states(int rows, int head_dim, const float* o_a, const float* lse_a, const float* o_b,
                  const float* lse_b, float* o_out, float* lse_out) {
  parallel_for(rows, rows > 64, [&](int r0, int r1) {
    for (int r = r0; r < r1; ++r) {
      const size_t off = static_cast<size_t>(r) * head_dim;
      float l = 0.0f;
      merge_state(head_dim, o_a + off, lse_a[r], o_b + off, lse_b[r], o_out + off, &l);
      lse_out[r] = l;
    }
  });
}

}  // namespace ragd::kernels
