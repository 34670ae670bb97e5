// Vectorisable math for the kernels' inner loops (private to kernels/src/cpu).
#pragma once

#include <cstdint>
#include <cstring>

namespace ragd::kernels::detail {

// e^x in fp32, ~2 ulp on [-87, 88] (Cephes polynomial after range reduction x = n·ln2 + r);
// exactly 0 for x < -87.3 (including -inf), +inf above 88.7. Branch-free, so `omp simd` loops
// calling it vectorise (std::exp would stay a scalar libm call).
#pragma omp declare simd notinbranch
inline float exp_approx(float x) {
  const bool under = x < -87.33f;
  const bool over = x > 88.72f;
  float xc = x < -87.33f ? -87.33f : (x > 88.72f ? 88.72f : x);
  // Round to nearest by truncating x·log2(e) ± 0.5 (a vector convert; roundf would be a libm call on
  // the baseline instruction set).
  const float t = xc * 1.44269504088896341f;
  const float n = static_cast<float>(static_cast<int32_t>(t + (t >= 0.0f ? 0.5f : -0.5f)));
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  const float out = y * scale;
  return under ? 0.0f : (over ? __builtin_inff() : out);
}

}  // namespace ragd::kernels::detail
