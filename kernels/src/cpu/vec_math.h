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

// erf(x) in fp32 by Abramowitz & Stegun 7.1.26 (absolute error <= 1.5e-7 in exact arithmetic,
// about 2.5e-7 in fp32): erf(|x|) = 1 - t·(a1 + t·(a2 + t·(a3 + t·(a4 + t·a5))))·e^(-x²),
// t = 1 / (1 + p·|x|), odd in x. Branch-free like exp_approx, so GELU loops vectorise (std::erf is
// a scalar libm call, a tenth of an encoder's time).
#pragma omp declare simd notinbranch
inline float erf_approx(float x) {
  const float ax = __builtin_fabsf(x);
  const float t = 1.0f / (1.0f + 0.3275911f * ax);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  const float y = 1.0f - p * t * exp_approx(-ax * ax);
  return __builtin_copysignf(y, x);
}

}  // namespace ragd::kernels::detail
