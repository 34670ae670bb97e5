// RoPE: frequency schedules (none, linear, llama3), application against a double reference, and
// re-rotation by a position delta against direct RoPE at the new position.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numbers>
#include <vector>

#include "ragd/kernels/rope.h"
#include "test_util.h"

namespace ragd::kernels {
namespace {

using testing::max_err;
using testing::random_vec;

// Independent double-precision reference of transformers' frequency schedules.
std::vector<double> ref_inv_freq(const RopeConfig& c) {
  std::vector<double> f(c.head_dim / 2);
  for (int i = 0; i < c.head_dim / 2; ++i) {
    double b = 1.0 / std::pow(c.theta, 2.0 * i / c.head_dim);
    if (c.scaling == RopeConfig::Scaling::kLinear) b /= c.factor;
    if (c.scaling == RopeConfig::Scaling::kLlama3) {
      const double wl = 2 * std::numbers::pi / b;
      const double lo = c.original_max_position_embeddings / c.low_freq_factor;
      const double hi = c.original_max_position_embeddings / c.high_freq_factor;
      if (wl > lo) {
        b = b / c.factor;
      } else if (wl >= hi) {
        const double sm = (c.original_max_position_embeddings / wl - c.low_freq_factor) /
                          (c.high_freq_factor - c.low_freq_factor);
        b = (1 - sm) * b / c.factor + sm * b;
      }
    }
    f[i] = b;
  }
  return f;
}

RopeConfig config(RopeConfig::Scaling s, int d) {
  RopeConfig c;
  c.head_dim = d;
  c.theta = 500000.0;
  c.scaling = s;
  c.factor = 8.0;
  c.low_freq_factor = 1.0;
  c.high_freq_factor = 4.0;
  c.original_max_position_embeddings = 8192;
  return c;
}

TEST(Rope, InvFreqSchedulesMatchReference) {
  for (auto s : {RopeConfig::Scaling::kNone, RopeConfig::Scaling::kLinear, RopeConfig::Scaling::kLlama3}) {
    for (int d : {48, 64, 128}) {
      RopeConfig c = config(s, d);
      std::vector<float> f(d / 2);
      rope_inv_freq(c, f.data());
      auto ref = ref_inv_freq(c);
      for (int i = 0; i < d / 2; ++i) EXPECT_NEAR(f[i], ref[i], 1e-6 * ref[i]) << "d=" << d << " i=" << i;
    }
  }
  // llama3 with d=128 has all three regimes: the lowest frequencies are divided by the factor.
  RopeConfig c = config(RopeConfig::Scaling::kLlama3, 128);
  std::vector<float> f(64);
  rope_inv_freq(c, f.data());
  EXPECT_NEAR(f[63], 1.0 / std::pow(500000.0, 126.0 / 128) / 8.0, 1e-12);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
}

TEST(Rope, ApplyMatchesReference) {
  for (int d : {48, 64}) {
    const int rows = 33, heads = 3, stride = heads * d + 5;
    auto x = random_vec(static_cast<size_t>(rows) * stride, 40 + d);
    std::vector<int32_t> pos(rows);
    for (int r = 0; r < rows; ++r) pos[r] = r * 997 + 3;  // up to ~32k
    RopeConfig c = config(RopeConfig::Scaling::kLlama3, d);
    std::vector<float> f(d / 2);
    rope_inv_freq(c, f.data());
    auto orig = x;
    rope_apply(x.data(), rows, heads, d, stride, pos.data(), f.data());
    for (int r = 0; r < rows; ++r) {
      for (int h = 0; h < heads; ++h) {
        std::vector<double> ref(d);
        const float* o = orig.data() + r * stride + h * d;
        for (int i = 0; i < d / 2; ++i) {
          const double a = static_cast<double>(pos[r]) * f[i];
          ref[i] = o[i] * std::cos(a) - o[i + d / 2] * std::sin(a);
          ref[i + d / 2] = o[i + d / 2] * std::cos(a) + o[i] * std::sin(a);
        }
        EXPECT_LT(max_err(x.data() + r * stride + h * d, ref.data(), d), 1e-6);
      }
      for (int p = heads * d; p < stride; ++p) EXPECT_EQ(x[r * stride + p], orig[r * stride + p]);  // padding untouched
    }
  }
}

TEST(Rope, TableRotationIsBitIdenticalToApply) {
  // A step computes cos / sin once and rotates q and k of every layer with them: the same bits as
  // rope_apply, for odd row counts, strides with padding, positions up to ~1M.
  for (int d : {32, 64, 128}) {
    const int rows = 37, heads = 5, stride = heads * d + 3;
    auto x = random_vec(static_cast<size_t>(rows) * stride, 70 + d);
    std::vector<int32_t> pos(rows);
    for (int r = 0; r < rows; ++r) pos[r] = (r * 28657 + 11) % 1000003;
    RopeConfig c = config(RopeConfig::Scaling::kLlama3, d);
    std::vector<float> f(d / 2), cs(static_cast<size_t>(rows) * d / 2), sn(cs.size());
    rope_inv_freq(c, f.data());
    auto direct = x;
    rope_apply(direct.data(), rows, heads, d, stride, pos.data(), f.data());
    rope_table(rows, d, pos.data(), f.data(), cs.data(), sn.data());
    rope_apply_table(x.data(), rows, heads, d, stride, cs.data(), sn.data());
    ASSERT_EQ(0, std::memcmp(x.data(), direct.data(), sizeof(float) * x.size())) << "d=" << d;
    // The table is not vacuous: different positions give different rows.
    EXPECT_NE(0, std::memcmp(cs.data(), cs.data() + d / 2, sizeof(float) * d / 2));
  }
}

TEST(Rope, RerotationEqualsDirectRopeAtNewPosition) {
  const int d = 64, rows = 7, heads = 2, stride = heads * d;
  RopeConfig c = config(RopeConfig::Scaling::kNone, d);
  c.theta = 10000.0;
  std::vector<float> f(d / 2);
  rope_inv_freq(c, f.data());
  for (int64_t delta : {int64_t{129}, int64_t{-5}, int64_t{4000}}) {
    auto k = random_vec(static_cast<size_t>(rows) * stride, 50);
    std::vector<int32_t> pos(rows), moved(rows);
    for (int r = 0; r < rows; ++r) {
      pos[r] = 5 + r * 3;
      moved[r] = static_cast<int32_t>(pos[r] + delta);
    }
    auto direct = k;
    rope_apply(k.data(), rows, heads, d, stride, pos.data(), f.data());
    rope_rerotate(k.data(), rows, heads, d, stride, delta, f.data());
    rope_apply(direct.data(), rows, heads, d, stride, moved.data(), f.data());
    std::vector<double> ref(direct.begin(), direct.end());
    // Two float rotations vs one: a few ulps of |x| <= sqrt(2).
    EXPECT_LT(max_err(k.data(), ref.data(), k.size()), 2e-6) << "delta=" << delta;
  }
}

}  // namespace
}  // namespace ragd::kernels
