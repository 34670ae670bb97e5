// Private: the AVX-512 paths of attention (attention_decode.cpp and attention_prefill.cpp call them
// where the CPU has AVX-512, cpu_features.h). Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "ragd/kernels/attention.h"

namespace ragd::kernels::detail {

// Attention of the pre-scaled query rows of KV heads [g0, g0 + ng) (q [ng · group, head_dim], head
// g0 + i's group at rows i · group ..) at q_pos over keys [j0, j1) (see attention_decode.cpp's
// decode_range). Each chunk of 16 keys is read once for all ng heads: whole token rows, not one
// head's slice at a stride. False (nothing written) when decode_avx512_takes() is false. AVX-512 F.
bool decode_range_avx512(const float* q, int group, const PagedKv& kv, int32_t q_pos, int g0, int ng, int j0, int j1,
                         float* o, float* lse);
// Whether decode_range_avx512 has a kernel for this head dim and ng · group rows.
bool decode_avx512_takes(int head_dim, int rows);

// Online-softmax update of one key chunk for rows [0, rows) (attention_prefill.cpp's
// softmax_chunk): s [rows, n] scores, -inf where masked, become probabilities; m / l are the
// running max and sum per row; alpha receives the factor the row's output must be scaled by.
void softmax_chunk_avx512(int rows, int n, float* s, float* m, float* l, float* alpha);

// Prefill tiles (head_dim d a multiple of 16, at most 128; n a multiple of 16):
//   scores: s [rows, n] = q [rows, d] · kt, with kt [d, n] the chunk's keys transposed;
//   pv:     o [rows, d] += p [rows, n] · v [n, d].
void attention_scores_avx512(int rows, int n, int d, const float* q, const float* kt, float* s);
void attention_pv_avx512(int rows, int n, int d, const float* p, const float* v, float* o);

}  // namespace ragd::kernels::detail
