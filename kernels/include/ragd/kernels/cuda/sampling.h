// Greedy sampling on the GPU (SeqStep::Logits::kGreedy). Other sampling copies the logits back to
// the host sampler (ragd/engine/sampler.h).
// Thread-safety: pure launcher.
#pragma once

#include <cstdint>

#include "ragd/kernels/cuda/device.h"

namespace ragd::kernels::cuda {

// logits: [rows, vocab] f32 (row stride `stride`)   out: [rows] int32, the index of the largest
// logit (lowest index on ties; NaNs are skipped; a row of NaNs gives 0). logprob: [rows] f32, the
// natural-log probability of that index under the row's softmax (NaNs skipped; NaN for a row of
// NaNs), or null: the greedy pick the host's engine::greedy_pick computes, without the row leaving
// the device.
Status argmax_rows(const float* logits, int rows, int vocab, int stride, int32_t* out, float* logprob, void* stream);

}  // namespace ragd::kernels::cuda
