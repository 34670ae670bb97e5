// RMSNorm (Llama): y = x / sqrt(mean(x²) + eps) · w.
// Thread-safety: pure function; parallel over rows with OpenMP.
#pragma once

namespace ragd::kernels {

// x: [rows, dim] (row stride x_stride floats)   w: [dim]   y: [rows, dim] (row stride y_stride)
// y may alias x (same stride).
void rmsnorm(const float* x, int rows, int dim, int x_stride, const float* w, float eps, float* y,
             int y_stride);

}  // namespace ragd::kernels
