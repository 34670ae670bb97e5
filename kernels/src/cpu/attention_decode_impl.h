// Private: instruction-set specific paths of decode attention (attention_decode.cpp dispatches).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "ragd/kernels/attention.h"

namespace ragd::kernels::detail {

// Attention of `group` pre-scaled query rows q [group, head_dim] at q_pos over keys [j0, j1) of kv
// head g (see attention_decode.cpp's decode_range). False (nothing written) for a head_dim it has
// no kernel for. AVX-512 F only.
bool decode_range_avx512(const float* q, int group, const PagedKv& kv, int32_t q_pos, int g, int j0, int j1, float* o,
                         float* lse);

}  // namespace ragd::kernels::detail
