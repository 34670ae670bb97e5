// Scalar f32 <-> bf16 / f16 conversions (round to nearest even; NaN stays NaN, overflow -> inf).
#include "ragd/kernels/half.h"

#include <bit>
#include <cmath>

namespace ragd::kernels {

uint16_t f32_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<uint16_t>(x >> 16);
}

float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t f32_to_f16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));
  if (a >= 0x38800000u) {  // normal in f16 (>= 2^-14) unless it rounds to infinity
    const uint32_t m = a & 0x7fffffu;
    const uint32_t e = (a >> 23) - 112u;  // rebias 127 -> 15
    if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
    uint32_t r = (e << 10) | (m >> 13);
    const uint32_t rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;  // may carry into the exponent (to inf)
    return static_cast<uint16_t>(sign | r);
  }
  // Subnormal f16: k * 2^-24 with k = round(value * 2^24).
  const int e = static_cast<int>(a >> 23) - 127;
  if (e < -25 - 1) return static_cast<uint16_t>(sign);
  const uint32_t mfull = (a & 0x7fffffu) | 0x800000u;  // value = mfull * 2^(e-23)
  const int shift = -(e + 1);                            // value * 2^24 = mfull >> shift
  if (shift >= 32) return static_cast<uint16_t>(sign);
  uint32_t k = mfull >> shift;
  const uint32_t rem = mfull & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (k & 1u))) ++k;
  return static_cast<uint16_t>(sign | k);
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0) {
    float v = std::ldexp(static_cast<float>(m), -24);
    return sign ? -v : v;
  }
  if (e == 31) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
  return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
}

}  // namespace ragd::kernels
