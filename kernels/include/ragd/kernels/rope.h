// Rotary position embedding, Hugging Face "rotate_half" layout: for i < d/2 the pair
// (x[i], x[i + d/2]) is rotated by angle pos · inv_freq[i].
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

namespace ragd::kernels {

// Frequency schedule (config.json rope_theta / rope_scaling).
struct RopeConfig {
  enum class Scaling : uint8_t { kNone, kLinear, kLlama3 };
  int head_dim = 0;                 // rotary dim (= head_dim for the Llama family); even
  double theta = 10000.0;           // rope_theta
  Scaling scaling = Scaling::kNone;
  double factor = 1.0;              // linear and llama3
  double low_freq_factor = 1.0;     // llama3
  double high_freq_factor = 4.0;    // llama3
  int original_max_position_embeddings = 8192;  // llama3
};

// inv_freq: [head_dim / 2], with linear / llama3 scaling applied (as transformers'
// ROPE_INIT_FUNCTIONS compute it).
void rope_inv_freq(const RopeConfig& cfg, float* inv_freq);

// In place on x: [rows, heads, head_dim] where rows are row_stride floats apart (so q or k can be
// rotated inside a fused qkv buffer). positions: [rows]. inv_freq: [head_dim / 2].
void rope_apply(float* x, int rows, int heads, int head_dim, int row_stride, const int32_t* positions,
                const float* inv_freq);

// The same rotation in two halves, for a step that rotates q and k of every layer at the same
// positions: rope_table computes each row's cos / sin once (cs, sn: [rows, head_dim / 2], angles in
// double as rope_apply), rope_apply_table rotates with them (bit-identical to rope_apply).
void rope_table(int rows, int head_dim, const int32_t* positions, const float* inv_freq, float* cs, float* sn);
void rope_apply_table(float* x, int rows, int heads, int head_dim, int row_stride, const float* cs, const float* sn);

// Re-rotation of stored post-RoPE keys to another position: rotating by `delta` turns RoPE at p into
// RoPE at p + delta (delta may be negative). Same layout as rope_apply.
void rope_rerotate(float* x, int rows, int heads, int head_dim, int row_stride, int64_t delta,
                   const float* inv_freq);

}  // namespace ragd::kernels
