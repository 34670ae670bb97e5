// linear() over f32 / bf16 / f16 / q8 weights, every instruction-set path this CPU has, against a
// naive double-precision reference at odd sizes and random data.
//   Stored-value references: widen the stored weights with the scalar weight_rows_to_f32 and, for q8,
//   quantize x per block of 32 exactly as documented (d = max|x| / 127,
//   q = round(x / d)). Tolerance: 2e-5 · Σ|w·x| + 1e-6 per output (f32 accumulation over k terms).
//   Against the f32 matrix: bf16 within 2^-8 · Σ|w·x|, f16 within 2^-11 · Σ|w·x|, q8 (weights and
//   activations) within 2 · 1/254 · Σ|w·x| (each factor's rounding error is at most half a step).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ragd/kernels/cpu_features.h"
#include "ragd/kernels/gemm.h"
#include "ragd/kernels/half.h"
#include "ragd/kernels/weight_matrix.h"
#include "test_util.h"

namespace ragd::kernels {
namespace {

using testing::random_vec;

struct Packed {
  std::vector<uint8_t> mem;
  WeightMatrix view;
};

Packed pack(const std::vector<float>& w, int n, int k, WeightType t) {
  Packed p;
  p.mem.assign(weight_bytes(t, n, k), 0xcd);
  init_weight_storage(t, n, k, p.mem.data());
  pack_weight_rows(w.data(), n, 0, t, n, k, p.mem.data());
  p.view = make_view(t, n, k, p.mem.data());
  return p;
}

std::vector<float> quantize_like_kernels(const float* x, int k) {
  std::vector<float> out(k);
  for (int b0 = 0; b0 < k; b0 += kQ8Block) {
    const int b1 = std::min(k, b0 + kQ8Block);
    float amax = 0.0f;
    for (int i = b0; i < b1; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    for (int i = b0; i < b1; ++i) out[i] = amax > 0.0f ? d * static_cast<float>(std::lrintf(x[i] * (127.0f / amax))) : 0.0f;
  }
  return out;
}

std::vector<CpuLevel> levels() {
  std::vector<CpuLevel> l{CpuLevel::kGeneric};
  if (supported_cpu_level() >= CpuLevel::kAvx2) l.push_back(CpuLevel::kAvx2);
  if (supported_cpu_level() >= CpuLevel::kAvx512) l.push_back(CpuLevel::kAvx512);
  return l;
}

const WeightType kTypes[] = {WeightType::kF32, WeightType::kBF16, WeightType::kF16, WeightType::kQ8};

TEST(LinearFormats, StoredValuesEveryPathOddSizes) {
  if (supported_cpu_level() < CpuLevel::kAvx512) {
    std::printf("note: this CPU has %s only; the AVX-512 path is not exercised here\n",
                std::string(cpu_level_name(supported_cpu_level())).c_str());
  }
  uint32_t seed = 7;
  for (CpuLevel level : levels()) {
    for (WeightType t : kTypes) {
      for (int m : {1, 3, 4, 5, 8, 13, 16, 17, 33, 70}) {
        for (int k : {1, 17, 31, 33, 100, 257}) {
          for (int n : {1, 3, 5, 67}) {
            SCOPED_TRACE(::testing::Message() << cpu_level_name(level) << " " << weight_type_name(t) << " m=" << m
                                              << " k=" << k << " n=" << n);
            const auto w = random_vec(static_cast<size_t>(n) * k, ++seed);
            const auto x = random_vec(static_cast<size_t>(m) * k, ++seed, -2.0f, 2.0f);
            const auto bias = random_vec(n, ++seed);
            const Packed p = pack(w, n, k, t);
            std::vector<float> wd(static_cast<size_t>(n) * k);
            weight_rows_to_f32(p.view, 0, n, wd.data());
            const bool quantized_x = t == WeightType::kQ8;
            for (bool accumulate : {false, true}) {
              std::vector<float> y = random_vec(static_cast<size_t>(m) * n, ++seed);
              const std::vector<float> y0 = y;
              linear_at(level, x.data(), m, k, p.view, bias.data(), y.data(), accumulate);
              for (int r = 0; r < m; ++r) {
                const std::vector<float> xr =
                    quantized_x ? quantize_like_kernels(x.data() + static_cast<size_t>(r) * k, k)
                                : std::vector<float>(x.begin() + static_cast<size_t>(r) * k, x.begin() + (r + 1) * static_cast<size_t>(k));
                for (int j = 0; j < n; ++j) {
                  double ref = bias[j], mag = 0.0;
                  for (int i = 0; i < k; ++i) {
                    const double prod = static_cast<double>(wd[static_cast<size_t>(j) * k + i]) * xr[i];
                    ref += prod;
                    mag += std::fabs(prod);
                  }
                  if (accumulate) ref += y0[static_cast<size_t>(r) * n + j];
                  ASSERT_NEAR(y[static_cast<size_t>(r) * n + j], ref, 2e-5 * mag + 1e-6 * (1 + std::fabs(ref)))
                      << "row " << r << " col " << j;
                }
              }
            }
          }
        }
      }
    }
  }
}

// Speculative decoding verifies draft tokens as extra rows of a decode step and keeps them while
// they equal what a one-row step would have drawn: so row r of an m-row call must be the one-row
// result bit for bit, on every path and format (each kernel keeps one summation order per output
// whatever the batch).
TEST(LinearFormats, EachRowIsTheOneRowResultBitForBit) {
  uint32_t seed = 91;
  for (CpuLevel level : levels()) {
    for (WeightType t : kTypes) {
      for (int m : {2, 3, 7, 8, 9, 17, 40}) {
        for (int k : {1, 31, 64, 257, 384}) {
          for (int n : {5, 48, 67}) {
            SCOPED_TRACE(::testing::Message() << cpu_level_name(level) << " " << weight_type_name(t) << " m=" << m
                                              << " k=" << k << " n=" << n);
            const Packed p = pack(random_vec(static_cast<size_t>(n) * k, ++seed), n, k, t);
            const auto x = random_vec(static_cast<size_t>(m) * k, ++seed, -2.0f, 2.0f);
            const auto bias = random_vec(n, ++seed);
            std::vector<float> y(static_cast<size_t>(m) * n);
            linear_at(level, x.data(), m, k, p.view, bias.data(), y.data(), false);
            for (int r = 0; r < m; ++r) {
              std::vector<float> y1(static_cast<size_t>(n));
              linear_at(level, x.data() + static_cast<size_t>(r) * k, 1, k, p.view, bias.data(), y1.data(), false);
              for (int j = 0; j < n; ++j)
                ASSERT_EQ(y[static_cast<size_t>(r) * n + j], y1[static_cast<size_t>(j)]) << "row " << r << " col " << j;
            }
          }
        }
      }
    }
  }
}

TEST(LinearFormats, CloseToF32WeightsWithinFormatError) {
  const int m = 2, k = 300, n = 41;
  const auto w = random_vec(static_cast<size_t>(n) * k, 101);
  const auto x = random_vec(static_cast<size_t>(m) * k, 102);
  std::vector<float> yref(static_cast<size_t>(m) * n);
  const Packed pf32 = pack(w, n, k, WeightType::kF32);
  linear_at(CpuLevel::kGeneric, x.data(), m, k, pf32.view, nullptr, yref.data());
  for (WeightType t : {WeightType::kBF16, WeightType::kF16, WeightType::kQ8}) {
    const double rel = t == WeightType::kBF16 ? std::ldexp(1.0, -8) : t == WeightType::kF16 ? std::ldexp(1.0, -11) : 2.0 / 254;
    const Packed p = pack(w, n, k, t);
    std::vector<float> y(yref.size());
    linear(x.data(), m, k, p.view, nullptr, y.data());
    double worst = 0.0;
    for (int r = 0; r < m; ++r) {
      for (int j = 0; j < n; ++j) {
        double mag = 0.0;
        for (int i = 0; i < k; ++i) mag += std::fabs(w[static_cast<size_t>(j) * k + i] * x[static_cast<size_t>(r) * k + i]);
        const double err = std::fabs(y[r * n + j] - yref[r * n + j]);
        EXPECT_LE(err, rel * mag + 1e-5) << weight_type_name(t) << " row " << r << " col " << j;
        worst = std::max(worst, err / mag);
      }
    }
    // A format that silently fell back to f32 would show no error at all.
    EXPECT_GT(worst, 0.0) << weight_type_name(t);
  }
}

TEST(LinearFormats, PackingRoundsAsDocumented) {
  const int n = 3, k = 70;  // three q8 blocks per row, the last one short
  auto w = random_vec(static_cast<size_t>(n) * k, 5, -3.0f, 3.0f);
  w[5] = 0.0f;
  for (int i = 32; i < 64; ++i) w[i] = 0.0f;  // an all-zero block: scale 0, values 0
  for (WeightType t : {WeightType::kBF16, WeightType::kF16, WeightType::kQ8}) {
    const Packed p = pack(w, n, k, t);
    std::vector<float> back(static_cast<size_t>(n) * k);
    weight_rows_to_f32(p.view, 0, n, back.data());
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < k; ++i) {
        const float v = w[static_cast<size_t>(j) * k + i], got = back[static_cast<size_t>(j) * k + i];
        if (t == WeightType::kBF16) {
          ASSERT_EQ(got, bf16_to_f32(f32_to_bf16(v)));
        }
        if (t == WeightType::kF16) {
          ASSERT_EQ(got, f16_to_f32(f32_to_f16(v)));
        }
        if (t == WeightType::kQ8) {
          const int b0 = i / kQ8Block * kQ8Block, b1 = std::min(k, b0 + kQ8Block);
          float amax = 0.0f;
          for (int u = b0; u < b1; ++u) amax = std::max(amax, std::fabs(w[static_cast<size_t>(j) * k + u]));
          ASSERT_LE(std::fabs(got - v), 0.5f * amax / 127.0f * 1.001f + 1e-7f) << "row " << j << " col " << i;
        }
      }
    }
    EXPECT_EQ(p.view.bytes() <= weight_bytes(t, n, k), true);
  }
  // q8 pads rows to whole blocks and the matrix to whole groups of 16 rows with zero weights
  // (stored 128) and zero scales.
  const Packed q = pack(w, n, k, WeightType::kQ8);
  const auto* bytes = static_cast<const uint8_t*>(q.view.data);
  const int nb = q.view.blocks_per_row();
  EXPECT_EQ(nb, 3);
  EXPECT_EQ(q.view.bytes(), static_cast<size_t>(kGroupRows) * (96 + 3 * 2));
  for (int r = 0; r < kGroupRows; ++r) {
    for (int c = (r < n ? k : 0); c < 96; ++c) ASSERT_EQ(bytes[q8_byte_offset(r, c, nb)], 128) << r << "," << c;
    for (int b = (r < n ? 3 : 0); b < 3; ++b) ASSERT_EQ(q.view.scales[q8_scale_index(r, b, nb)], 0);
  }
  EXPECT_EQ(q.view.scales[q8_scale_index(0, 1, nb)], 0) << "all-zero block";
  // The layout interleaves rows: row 1's first 4 bytes follow row 0's.
  EXPECT_EQ(q8_byte_offset(1, 0, nb), 4u);
  EXPECT_EQ(q8_byte_offset(0, 4, nb), 64u);
  EXPECT_EQ(q8_byte_offset(16, 0, nb), static_cast<size_t>(nb) * 512);
}

}  // namespace
}  // namespace ragd::kernels
