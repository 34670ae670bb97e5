// Private: the constants of the kernels' e^x (Cephes-style range reduction x = n·ln2 + r and a
// degree-6 polynomial on r), shared by the scalar / auto-vectorised exp_approx (vec_math.h) and the
// 16-lane AVX-512 version (attention_avx512.cpp), so both compute the same function.
#pragma once

namespace ragd::kernels::detail::exp_poly {

constexpr float kLo = -87.33f;  // below: e^x = 0 (including -inf)
constexpr float kHi = 88.72f;   // above: +inf
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f;     // ln 2 = kLn2Hi + kLn2Lo, kLn2Hi exact in few bits
constexpr float kLn2Lo = -2.12194440e-4f;
constexpr float kP0 = 1.9875691500e-4f;
constexpr float kP1 = 1.3981999507e-3f;
constexpr float kP2 = 8.3334519073e-3f;
constexpr float kP3 = 4.1665795894e-2f;
constexpr float kP4 = 1.6666665459e-1f;
constexpr float kP5 = 5.0000001201e-1f;

}  // namespace ragd::kernels::detail::exp_poly
