// The one merge of partial attention states (O, LSE) on the CUDA backend; same formula and −inf
// conventions as ragd/kernels/lse_merge.h:
//   M = max(lse_a, lse_b), lse = M + log(e^(lse_a−M) + e^(lse_b−M)), o = e^(lse_a−lse)·o_a + e^(lse_b−lse)·o_b.
// Thread-safety: pure launcher.
#pragma once

#include "ragd/kernels/cuda/device.h"

namespace ragd::kernels::cuda {

// o_*: [rows, head_dim] f32   lse_*: [rows] f32 (natural log). Outputs may alias either input.
Status merge_states(int rows, int head_dim, const float* o_a, const float* lse_a, const float* o_b,
                    const float* lse_b, float* o_out, float* lse_out, void* stream);

}  // namespace ragd::kernels::cuda
