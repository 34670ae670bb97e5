// Vectorisable math for the kernels' inner loops (private to kernels/src/cpu).
#pragma once

#include <cstdint>
#include <cstring>

#include "exp_poly.h"

namespace ragd::kernels::detail {

// e^x in fp32, ~2 ulp on [-87, 88] (Cephes polynomial after range reduction x = n·ln2 + r);
// exactly 0 for x < -87.3 (including -inf), +inf above 88.7. Branch-free, so `omp simd` loops
// calling it vectorise (std::exp would stay a scalar libm call).
#pragma omp declare simd notinbranch
inline float exp_approx(float x) {
  using namespace exp_poly;
  const bool under = x < kLo;
  const bool over = x > kHi;
  float xc = x < kLo ? kLo : (x > kHi ? kHi : x);
  // Round to nearest even, as the 16-lane version does (roundscale): rintf is one roundps with
  // SSE4.1 and up. (Truncating x·log2(e) ± 0.5 instead kept GCC 12 from vectorising any loop that
  // calls this: the sign select was "control flow in loop".)
  const float n = __builtin_rintf(xc * kLog2e);
  float r = xc - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = kP0;
  p = p * r + kP1;
  p = p * r + kP2;
  p = p * r + kP3;
  p = p * r + kP4;
  p = p * r + kP5;
  const float y = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  const float out = y * scale;
  return under ? 0.0f : (over ? __builtin_inff() : out);
}

}  // namespace ragd::kernels::detail
