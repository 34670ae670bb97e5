// Greedy sampling on the GPU. Non-greedy sampling copies the logits back to the host sampler
// (ragd/engine/sampler.h); only the argmax stays on the device.
// Thread-safety: pure launcher.
#pragma once

#include <cstdint>

#include "ragd/kernels/cuda/device.h"

namespace ragd::kernels::cuda {

// logits: [rows, vocab] f32 (row stride `stride`)   out: [rows] int32, the index of the largest
// logit (lowest index on ties; NaNs are skipped; a row of NaNs gives 0).
Status argmax_rows(const float* logits, int rows, int vocab, int stride, int32_t* out, void* stream);

}  // namespace ragd::kernels::cuda
