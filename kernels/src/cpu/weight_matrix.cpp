// Weight formats: sizes, packing from f32 (bf16 / f16 rounding, q8 block quantization) and
// conversion back to f32. Scalar code: it runs once at load (packing) or on panels that feed sgemm.
#include "ragd/kernels/weight_matrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ragd/kernels/half.h"

namespace ragd::kernels {

namespace {
size_t element_bytes(WeightType t) {
  return t == WeightType::kF32 ? 4 : t == WeightType::kQ8 ? 1 : 2;
}
size_t q8_row_bytes(int cols) { return static_cast<size_t>((cols + kQ8Block - 1) / kQ8Block) * kQ8Block; }
size_t padded_rows(int rows) { return static_cast<size_t>((rows + kGroupRows - 1) / kGroupRows) * kGroupRows; }
// Scales start 64-byte aligned after the data.
size_t align64(size_t n) { return (n + 63) & ~size_t{63}; }
}  // namespace

size_t WeightMatrix::bytes() const {
  if (type != WeightType::kQ8) return padded_rows(rows) * cols * element_bytes(type);
  return padded_rows(rows) * (q8_row_bytes(cols) + blocks_per_row() * sizeof(uint16_t));
}

size_t weight_data_bytes(WeightType type, int rows, int cols) {
  if (type == WeightType::kQ8) return align64(q8_row_bytes(cols) * padded_rows(rows));
  return padded_rows(rows) * cols * element_bytes(type);
}

size_t weight_bytes(WeightType type, int rows, int cols) {
  size_t n = weight_data_bytes(type, rows, cols);
  if (type == WeightType::kQ8) n += padded_rows(rows) * ((cols + kQ8Block - 1) / kQ8Block) * sizeof(uint16_t);
  return n;
}

void init_weight_storage(WeightType type, int rows, int cols, void* storage) {
  const size_t data = weight_data_bytes(type, rows, cols);
  std::memset(storage, type == WeightType::kQ8 ? 128 : 0, data);
  std::memset(static_cast<uint8_t*>(storage) + data, 0, weight_bytes(type, rows, cols) - data);
}

WeightMatrix make_view(WeightType type, int rows, int cols, const void* storage) {
  WeightMatrix w{type, rows, cols, storage, nullptr};
  if (type == WeightType::kQ8) {
    w.scales = reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(storage) +
                                                 weight_data_bytes(type, rows, cols));
  }
  return w;
}

namespace {

// Row r of q8: d = max|w| / 127 rounded to f16, q = round(w / d) with the rounded d, stored + 128.
void quantize_q8_row(const float* src, int r, int cols, uint8_t* data, uint16_t* scales) {
  const int nb = (cols + kQ8Block - 1) / kQ8Block;
  for (int b = 0; b < nb; ++b) {
    const int i0 = b * kQ8Block, i1 = std::min(cols, i0 + kQ8Block);
    float amax = 0.0f;
    for (int i = i0; i < i1; ++i) amax = std::max(amax, std::fabs(src[i]));
    const uint16_t dh = f32_to_f16(amax / 127.0f);
    const float d = f16_to_f32(dh);
    const float inv = d > 0.0f ? 1.0f / d : 0.0f;
    scales[q8_scale_index(r, b, nb)] = dh;
    for (int i = i0; i < i1; ++i) {
      const int v = std::clamp(static_cast<int>(std::lrintf(src[i] * inv)), -127, 127);
      data[q8_byte_offset(r, i, nb)] = static_cast<uint8_t>(v + 128);
    }
  }
}

}  // namespace

void pack_weight_rows(const float* src, int n, int r0, WeightType type, int rows, int cols, void* storage) {
  const WeightMatrix w = make_view(type, rows, cols, storage);
  auto* base = static_cast<uint8_t*>(const_cast<void*>(w.data));
#pragma omp parallel for schedule(static) if (static_cast<size_t>(n) * cols > (1u << 16))
  for (int r = 0; r < n; ++r) {
    const float* s = src + static_cast<size_t>(r) * cols;
    const int row = r0 + r;
    switch (type) {
      case WeightType::kF32: {
        auto* f = reinterpret_cast<float*>(base);
        for (int i = 0; i < cols; ++i) f[grouped_index(row, i, cols)] = s[i];
        break;
      }
      case WeightType::kBF16: {
        auto* h = reinterpret_cast<uint16_t*>(base);
        for (int i = 0; i < cols; ++i) h[grouped_index(row, i, cols)] = f32_to_bf16(s[i]);
        break;
      }
      case WeightType::kF16: {
        auto* h = reinterpret_cast<uint16_t*>(base);
        for (int i = 0; i < cols; ++i) h[grouped_index(row, i, cols)] = f32_to_f16(s[i]);
        break;
      }
      case WeightType::kQ8:
        quantize_q8_row(s, row, cols, base, const_cast<uint16_t*>(w.scales));
        break;
    }
  }
}

void weight_rows_to_f32(const WeightMatrix& w, int r0, int r1, float* dst) {
  const auto* base = static_cast<const uint8_t*>(w.data);
  const int cols = w.cols;
  const int nb = w.blocks_per_row();
  for (int r = r0; r < r1; ++r) {
    float* d = dst + static_cast<size_t>(r - r0) * cols;
    switch (w.type) {
      case WeightType::kF32: {
        const auto* f = reinterpret_cast<const float*>(base);
        for (int i = 0; i < cols; ++i) d[i] = f[grouped_index(r, i, cols)];
        break;
      }
      case WeightType::kBF16: {
        const auto* h = reinterpret_cast<const uint16_t*>(base);
        for (int i = 0; i < cols; ++i) d[i] = bf16_to_f32(h[grouped_index(r, i, cols)]);
        break;
      }
      case WeightType::kF16: {
        const auto* h = reinterpret_cast<const uint16_t*>(base);
        for (int i = 0; i < cols; ++i) d[i] = f16_to_f32(h[grouped_index(r, i, cols)]);
        break;
      }
      case WeightType::kQ8: {
        for (int i = 0; i < cols; ++i) {
          d[i] = f16_to_f32(w.scales[q8_scale_index(r, i / kQ8Block, nb)]) *
                 static_cast<float>(static_cast<int>(base[q8_byte_offset(r, i, nb)]) - 128);
        }
        break;
      }
    }
  }
}

}  // namespace ragd::kernels
