// Weight matrices in the format they are kept in memory: f32, bf16, f16 or q8 (8-bit blocks).
//
// A WeightMatrix is a non-owning view of an [rows, cols] matrix in the Hugging Face nn.Linear
// sense (one output feature per row), stored so that decode streams it as one sequence of full
// cache lines and a vector lane is an output row. Formats:
//   kF32   floats;  kBF16  bfloat16 (the upper half of an f32; converted exactly);  kF16  IEEE half.
//          Rows in groups of kGroupRows = 16 (the last group padded with zero rows), each group
//          stored column by column: element (r, c) at index (g · cols + c) · 16 + l, g = r / 16,
//          l = r % 16. One column of a group (16 values) is one vector of outputs.
//   kQ8    blocks of kQ8Block weights along a row, each with one f16 scale d: w ≈ d · q,
//          q in [-127, 127], d = max|w| / 127 rounded to f16 (Q8_0's rule). q is stored biased,
//          as the byte q + 128, so int8 dot-product instructions (u8 × s8) take weights as their
//          unsigned operand. Rows are interleaved in groups of kGroupRows (the last group padded
//          with zero rows, rows padded with zero weights to whole blocks), so that one 64-byte
//          load holds 4 consecutive weights of each of 16 rows and a 16-lane dot product yields
//          16 outputs at once:
//            byte of (row r, column c) = ((g · blocks + b) · 8 + t) · 64 + l · 4 + e
//              with g = r / 16, l = r % 16, b = c / 32, t = (c % 32) / 4, e = c % 4
//            scale of (row r, block b) = scales[(g · blocks + b) · 16 + l]
// Thread-safety: views and the free functions are pure; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ragd/common/enum_names.h"

namespace ragd::kernels {

enum class WeightType : uint8_t { kF32, kBF16, kF16, kQ8 };
inline constexpr auto kWeightTypeNames = make_enum_names<WeightType>(
    "weight type", {{WeightType::kF32, "f32"}, {WeightType::kBF16, "bf16"}, {WeightType::kF16, "f16"}, {WeightType::kQ8, "q8"}});
constexpr const auto& ragd_enum_names(WeightType) { return kWeightTypeNames; }
static_assert(enum_names_valid(kWeightTypeNames));
inline std::string_view weight_type_name(WeightType t) { return enum_name(t); }  // "f32", "bf16", "f16", "q8"

constexpr int kQ8Block = 32;
constexpr int kGroupRows = 16;  // rows per interleaved group, every format

struct WeightMatrix {
  WeightType type = WeightType::kF32;
  int rows = 0;
  int cols = 0;
  const void* data = nullptr;         // see the formats above
  const uint16_t* scales = nullptr;   // kQ8 only

  int blocks_per_row() const { return (cols + kQ8Block - 1) / kQ8Block; }
  // Bytes of data (+ scales): what one pass over the matrix reads.
  size_t bytes() const;
};

// The f32 / bf16 / f16 layout above: element index of (row r, column c).
inline size_t grouped_index(int r, int c, int cols) {
  return (static_cast<size_t>(r / kGroupRows) * cols + c) * kGroupRows + r % kGroupRows;
}
// The q8 layout above: byte offset of (row r, column c) and index of the scale of (row r, block b).
inline size_t q8_byte_offset(int r, int c, int blocks) {
  const size_t g = r / kGroupRows, l = r % kGroupRows, b = c / kQ8Block, t = (c % kQ8Block) / 4, e = c % 4;
  return ((g * blocks + b) * 8 + t) * 64 + l * 4 + e;
}
inline size_t q8_scale_index(int r, int b, int blocks) {
  return (static_cast<size_t>(r / kGroupRows) * blocks + b) * kGroupRows + r % kGroupRows;
}

// Bytes a matrix of this type and shape occupies (data, then q8 scales): the size to allocate.
size_t weight_bytes(WeightType type, int rows, int cols);
// Bytes of the data part alone; for kQ8 the scales start at this offset in an allocation of
// weight_bytes() (views made by make_view below).
size_t weight_data_bytes(WeightType type, int rows, int cols);
WeightMatrix make_view(WeightType type, int rows, int cols, const void* storage);
// Fills storage with a matrix of zero weights (q8 padding must read as zero): call once before
// pack_weight_rows.
void init_weight_storage(WeightType type, int rows, int cols, void* storage);

// Converts rows [r0, r1) of w into f32, row-major with cols floats per row (dst: (r1 - r0) · cols).
void weight_rows_to_f32(const WeightMatrix& w, int r0, int r1, float* dst);

// Writes rows [r0, r0 + n) of a matrix of this type and shape held in storage
// (weight_bytes(type, rows, cols) bytes) from f32 rows src[n, cols]: rounds to nearest even for
// bf16 / f16, quantizes blocks for q8 (pads the row's last block with zeros). Parallel over rows.
void pack_weight_rows(const float* src, int n, int r0, WeightType type, int rows, int cols, void* storage);

}  // namespace ragd::kernels
