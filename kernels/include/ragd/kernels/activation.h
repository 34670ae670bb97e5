// SwiGLU: y = silu(gate) · up, silu(g) = g / (1 + e^-g).
// Thread-safety: pure function; parallel over rows with OpenMP.
#pragma once

namespace ragd::kernels {

// gate: [rows, dim] (row stride gate_stride)   up: [rows, dim] (row stride up_stride)
// y: [rows, dim] (row stride y_stride); y may alias gate or up (same stride).
// With the fused gate_up projection [rows, 2·dim]: gate = p, up = p + dim, strides 2·dim.
void swiglu(int rows, int dim, const float* gate, int gate_stride, const float* up, int up_stride,
            float* y, int y_stride);

}  // namespace ragd::kernels
