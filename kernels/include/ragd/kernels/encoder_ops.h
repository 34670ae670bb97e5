// Element-wise ops of encoder (BERT-family) blocks: LayerNorm with bias, GELU, bias add.
// Thread-safety: pure functions; parallel over rows with OpenMP.
#pragma once

#include <cstdint>

namespace ragd::kernels {

// LayerNorm: y = (x - mean(x)) / sqrt(var(x) + eps) · w + b, per row; mean and (biased) variance
// accumulated in f64.
// x: [rows, dim] (row stride x_stride)   w, b: [dim]   y: [rows, dim] (row stride y_stride); y may
// alias x (same stride).
void layer_norm(const float* x, int rows, int dim, int x_stride, const float* w, const float* b, float eps, float* y,
                int y_stride);

// GELU in place over x: [rows, dim] (row stride x_stride), after adding bias: [dim] (nullptr: none).
//   kErf:  x · Φ(x) = 0.5 · x · (1 + erf(x / √2))                 (HF "gelu")
//   kTanh: 0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))       (HF "gelu_new", "gelu_pytorch_tanh")
enum class GeluKind : uint8_t { kErf, kTanh };
void bias_gelu(int rows, int dim, const float* bias, float* x, int x_stride, GeluKind kind);

// x[r, :] += bias for every row of x: [rows, dim] (row stride x_stride).
void add_bias(int rows, int dim, const float* bias, float* x, int x_stride);

}  // namespace ragd::kernels
