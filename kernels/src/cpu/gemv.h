// Private: the weight-streaming kernels behind linear(), one table per instruction set. The
// dispatcher (gemm.cpp) picks a table once from the CPU's features (cpu_features.h); each table's
// file is compiled for its instruction set only and called only where the CPU has it.
//
// A kernel computes y[r, j] (+)= x[r] · w[j] (+ bias[j]) for all rows r < m and the output
// features j in [n0, n1), reading each weight row once (the rows of x stay in cache). n0 is a
// multiple of kGroupRows (rows are stored in interleaved groups).
// Thread-safety: pure functions over the arguments; the dispatcher splits [0, n) across threads.
#pragma once

#include <cstdint>

#include "ragd/kernels/weight_matrix.h"

namespace ragd::kernels::detail {

// The rows of x quantized for q8 weights, blocks of kQ8Block along k (k padded to kpad = blocks ·
// kQ8Block with zeros), each with its own scale d = max|x| / 127, q = round(x / d):
//   q    [m, kpad] int8
//   d    [m, blocks] float
//   corr [m, blocks] int32: -128 · (sum of the block's q). u8 · s8 dot-product instructions see a
//        weight as its stored byte q_w + 128; adding corr removes the + 128 exactly.
struct QuantizedRows {
  int m = 0, k = 0, kpad = 0, blocks = 0;
  const int8_t* q = nullptr;
  const float* d = nullptr;
  const int32_t* corr = nullptr;
};

struct GemvArgs {
  const float* x = nullptr;  // [m, k]
  int m = 0;
  int k = 0;
  const QuantizedRows* xq = nullptr;  // q8 weights only
  const WeightMatrix* w = nullptr;    // [n, k]
  const float* bias = nullptr;        // [n] or nullptr
  float* y = nullptr;                 // [m, n]
  int n = 0;
  bool accumulate = false;
};

using GemvFn = void (*)(const GemvArgs& a, int n0, int n1);

struct GemvTable {
  GemvFn by_type[4];  // indexed by WeightType
};

const GemvTable& gemv_generic();
const GemvTable& gemv_avx2();    // needs AVX2, FMA, F16C
const GemvTable& gemv_avx512();  // needs AVX-512 F/BW/VL/VNNI (and F16C)

// Stores one result: y[r, j] = v (+ bias[j]) (+ y[r, j] when accumulating). Static: each file has
// its own copy, compiled for its instruction set (a shared inline copy could be the AVX-512 one).
static inline void put_result(const GemvArgs& a, int r, int j, float v) {
  if (a.bias != nullptr) v += a.bias[j];
  float* yp = a.y + static_cast<size_t>(r) * a.n + j;
  *yp = a.accumulate ? *yp + v : v;
}

}  // namespace ragd::kernels::detail
