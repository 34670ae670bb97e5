// The one merge of partial attention states (O, LSE) on the CPU backend.
//
// Two attentions of the same queries over disjoint key sets A and B merge into the attention over
// A ∪ B:  M = max(lse_a, lse_b),  lse = M + log(e^(lse_a−M) + e^(lse_b−M)),
//         o = e^(lse_a−lse)·o_a + e^(lse_b−lse)·o_b.
// A state with lse = −inf (no keys) is the identity; two empty states give lse = −inf, o = 0.
// Thread-safety: pure functions.
#pragma once

namespace ragd::kernels {

// One (token, head) row: o_a, o_b, o_out: [head_dim]. o_out may alias o_a or o_b.
void merge_state(int head_dim, const float* o_a, float lse_a, const float* o_b, float lse_b,
                 float* o_out, float* lse_out);

// Many rows: o_*: [rows, head_dim]   lse_*: [rows]. Outputs may alias either input.
// (Use rows = tokens · heads for [tokens, heads, head_dim] layouts.)
void merge_states(int rows, int head_dim, const float* o_a, const float* lse_a, const float* o_b,
                  const float* lse_b, float* o_out, float* lse_out);

}  // namespace ragd::kernels
