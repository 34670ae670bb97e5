// Scalar f32 <-> bf16 / f16 conversions, round to nearest even (the portable paths of the weight
// kernels, checkpoint readers and writers). Thread-safety: pure functions.
#pragma once

#include <cstdint>

namespace ragd::kernels {

uint16_t f32_to_bf16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);

}  // namespace ragd::kernels
