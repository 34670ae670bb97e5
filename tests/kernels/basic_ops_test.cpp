// GEMM glue, RMSNorm, SwiGLU, softmax / logsumexp and the LSE merge against double references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ragd/kernels/activation.h"
#include "ragd/kernels/gemm.h"
#include "ragd/kernels/weight_matrix.h"
#include "ragd/kernels/kv_deviation.h"
#include "ragd/kernels/lse_merge.h"
#include "ragd/kernels/norm.h"
#include "ragd/kernels/softmax.h"
#include "test_util.h"

namespace ragd::kernels {
namespace {

using testing::max_err;
using testing::random_vec;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

class LinearTest : public ::testing::TestWithParam<int> {};

TEST_P(LinearTest, MatchesDoubleReference) {
  const int m = GetParam(), k = 129, n = 33;
  auto x = random_vec(static_cast<size_t>(m) * k, 1);
  auto w = random_vec(static_cast<size_t>(n) * k, 2);
  auto b = random_vec(n, 3);
  // f32 weights in the kernels' grouped layout (weight_matrix.h).
  std::vector<uint8_t> storage(weight_bytes(WeightType::kF32, n, k));
  init_weight_storage(WeightType::kF32, n, k, storage.data());
  pack_weight_rows(w.data(), n, 0, WeightType::kF32, n, k, storage.data());
  const WeightMatrix wm = make_view(WeightType::kF32, n, k, storage.data());
  for (bool with_bias : {false, true}) {
    std::vector<float> y(static_cast<size_t>(m) * n, 7.0f);
    linear(x.data(), m, k, wm, with_bias ? b.data() : nullptr, y.data());
    std::vector<double> ref(y.size());
    for (int r = 0; r < m; ++r) {
      for (int o = 0; o < n; ++o) {
        double acc = with_bias ? b[o] : 0.0;
        for (int i = 0; i < k; ++i) acc += static_cast<double>(x[r * k + i]) * w[o * k + i];
        ref[r * n + o] = acc;
      }
    }
    // fp32 accumulation over k = 129 terms of magnitude <= 1.
    EXPECT_LT(max_err(y.data(), ref.data(), y.size()), 1e-5) << "m=" << m << " bias=" << with_bias;
    // accumulate: y += x·wᵀ (+ bias), the residual-add form.
    auto y0 = random_vec(y.size(), 4);
    std::vector<float> acc = y0;
    linear(x.data(), m, k, wm, with_bias ? b.data() : nullptr, acc.data(), /*accumulate=*/true);
    for (size_t i = 0; i < ref.size(); ++i) ref[i] += y0[i];
    EXPECT_LT(max_err(acc.data(), ref.data(), acc.size()), 1e-5) << "accumulate m=" << m << " bias=" << with_bias;
  }
}
// Odd row counts across the kernels' 8-row tiles and 32-row passes, odd output count 33.
INSTANTIATE_TEST_SUITE_P(Rows, LinearTest, ::testing::Values(1, 2, 3, 7, 8, 9, 33));

TEST(Gemm, TransposeVariantsMatchReference) {
  const int m = 7, n = 33, k = 48;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      auto a = random_vec(static_cast<size_t>(m) * k, 10 + ta);
      auto b = random_vec(static_cast<size_t>(n) * k, 20 + tb);
      auto c = random_vec(static_cast<size_t>(m) * n, 30);
      std::vector<double> ref(c.size());
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
          double acc = 0.0;
          for (int p = 0; p < k; ++p) {
            const double av = ta ? a[p * m + i] : a[i * k + p];
            const double bv = tb ? b[j * k + p] : b[p * n + j];
            acc += av * bv;
          }
          ref[i * n + j] = 0.5 * acc + 2.0 * c[i * n + j];
        }
      }
      gemm(ta, tb, m, n, k, 0.5f, a.data(), ta ? m : k, b.data(), tb ? k : n, 2.0f, c.data(), n);
      EXPECT_LT(max_err(c.data(), ref.data(), c.size()), 1e-5) << ta << tb;
    }
  }
}

TEST(RmsNorm, MatchesReferenceWithStrides) {
  const int rows = 7, dim = 129, xs = 140, ys = 131;
  auto x = random_vec(static_cast<size_t>(rows) * xs, 4, -3.0f, 3.0f);
  auto w = random_vec(dim, 5, 0.5f, 1.5f);
  std::vector<float> y(static_cast<size_t>(rows) * ys, 0.0f);
  rmsnorm(x.data(), rows, dim, xs, w.data(), 1e-5f, y.data(), ys);
  for (int r = 0; r < rows; ++r) {
    double ss = 0.0;
    for (int i = 0; i < dim; ++i) ss += static_cast<double>(x[r * xs + i]) * x[r * xs + i];
    const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
    std::vector<double> ref(dim);
    for (int i = 0; i < dim; ++i) ref[i] = x[r * xs + i] * inv * w[i];
    EXPECT_LT(max_err(y.data() + r * ys, ref.data(), dim), 2e-6) << "row " << r;
  }
}

TEST(SwiGlu, MatchesReferenceOnFusedLayout) {
  const int rows = 33, dim = 48;
  auto gu = random_vec(static_cast<size_t>(rows) * 2 * dim, 6, -6.0f, 6.0f);
  std::vector<float> y(static_cast<size_t>(rows) * dim);
  swiglu(rows, dim, gu.data(), 2 * dim, gu.data() + dim, 2 * dim, y.data(), dim);
  std::vector<double> ref(y.size());
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < dim; ++i) {
      const double g = gu[r * 2 * dim + i], u = gu[r * 2 * dim + dim + i];
      ref[r * dim + i] = g / (1.0 + std::exp(-g)) * u;
    }
  }
  EXPECT_LT(max_err(y.data(), ref.data(), y.size()), 2e-6);
}

TEST(Softmax, LogsumexpAndRowsMatchReference) {
  const int rows = 7, n = 129;
  auto x = random_vec(static_cast<size_t>(rows) * n, 7, -30.0f, 30.0f);
  x[5] = kNegInf;  // masked entries are allowed
  std::vector<float> orig = x;
  std::vector<float> lse(rows);
  softmax_rows(x.data(), rows, n, n, lse.data());
  for (int r = 0; r < rows; ++r) {
    double m = -1e300;
    for (int i = 0; i < n; ++i) m = std::max(m, static_cast<double>(orig[r * n + i]));
    double s = 0.0;
    for (int i = 0; i < n; ++i) s += std::exp(orig[r * n + i] - m);
    const double ref_lse = m + std::log(s);
    EXPECT_NEAR(lse[r], ref_lse, 1e-5 * std::fabs(ref_lse) + 1e-6);
    EXPECT_NEAR(logsumexp(orig.data() + r * n, n), ref_lse, 1e-5 * std::fabs(ref_lse) + 1e-6);
    std::vector<double> ref(n);
    for (int i = 0; i < n; ++i) ref[i] = std::exp(orig[r * n + i] - ref_lse);
    EXPECT_LT(max_err(x.data() + r * n, ref.data(), n), 1e-5);
  }
  EXPECT_EQ(x[5], 0.0f);
}

TEST(Softmax, AllMaskedRowIsZeroWithNegInfLse) {
  std::vector<float> x(33, kNegInf);
  EXPECT_EQ(softmax_inplace(x.data(), x.size()), kNegInf);
  for (float v : x) EXPECT_EQ(v, 0.0f);
  EXPECT_EQ(logsumexp(x.data(), 0), kNegInf);
}

// sum_exp (fp32 e^x, fp64 sum, optional floor), exp_shifted, count_at_least and argmax against
// double / scalar references, on
// sizes around the 1024-element chunks and the vector widths, over wide ranges (-inf included).
TEST(Softmax, SumExpAndArgmaxMatchReferences) {
  uint32_t seed = 40;
  for (size_t n : {1u, 7u, 16u, 1023u, 1024u, 1025u, 5003u, 128256u}) {
    auto x = random_vec(n, ++seed, -30.0f, 30.0f);
    if (n > 3) x[n / 3] = kNegInf;
    const size_t want = static_cast<size_t>(std::max_element(x.begin(), x.end()) - x.begin());
    EXPECT_EQ(argmax(x.data(), n), want) << n;
    const float m = x[want];
    for (float floor : {kNegInf, m - 8.0f, m + 1.0f}) {
      double ref = 0.0;
      for (float v : x) ref += v >= floor ? std::exp(static_cast<double>(v) - m) : 0.0;
      const double got = sum_exp(x.data(), n, m, floor);
      EXPECT_NEAR(got, ref, 1e-6 * ref + 1e-30) << "n " << n << " floor " << floor;
      if (floor == kNegInf) {  // exp_shifted: every term, and the same sum
        std::vector<float> e(n);
        EXPECT_NEAR(exp_shifted(x.data(), n, m, e.data()), ref, 1e-6 * ref) << "n " << n;
        // Per term, relative: ~2 ulp of exp_approx plus the fp32 rounding of x − m (one ulp of
        // |x − m|, which e^ turns into a relative error of |x − m| · 2^-24).
        double worst = 0.0;
        for (size_t i = 0; i < n; ++i) {
          if (x[i] == kNegInf) continue;
          const double want = std::exp(static_cast<double>(x[i]) - m);
          const double bound = 3e-7 + 1.2e-7 * std::fabs(static_cast<double>(x[i]) - m);
          worst = std::max(worst, std::fabs(e[i] - want) / want / bound);
        }
        EXPECT_LT(worst, 1.0) << "n " << n;
      }
      const size_t count = static_cast<size_t>(std::count_if(x.begin(), x.end(), [&](float v) { return v >= floor; }));
      EXPECT_EQ(count_at_least(x.data(), n, floor), count) << "n " << n << " floor " << floor;
    }
  }
  // Ties give the lowest index; NaNs never win; all -inf gives 0.
  std::vector<float> t = {1.0f, 3.0f, std::nanf(""), 3.0f, -2.0f};
  EXPECT_EQ(argmax(t.data(), t.size()), 1u);
  t[0] = std::nanf("");
  t[1] = -5.0f;
  EXPECT_EQ(argmax(t.data(), t.size()), 3u);
  std::vector<float> all(9, kNegInf);
  EXPECT_EQ(argmax(all.data(), all.size()), 0u);
  EXPECT_EQ(argmax(all.data(), 0), 0u);
  EXPECT_EQ(sum_exp(all.data(), all.size(), 0.0f), 0.0);
}

TEST(LseMerge, MatchesFormulaAndHandlesEmptySides) {
  const int rows = 7, d = 48;
  auto oa = random_vec(static_cast<size_t>(rows) * d, 8);
  auto ob = random_vec(static_cast<size_t>(rows) * d, 9);
  auto la = random_vec(rows, 10, -5.0f, 5.0f);
  auto lb = random_vec(rows, 11, -5.0f, 5.0f);
  la[2] = kNegInf;             // A empty: result is B
  la[3] = lb[3] = kNegInf;     // both empty: zeros, -inf
  std::vector<float> o(oa.size()), l(rows);
  merge_states(rows, d, oa.data(), la.data(), ob.data(), lb.data(), o.data(), l.data());
  for (int r = 0; r < rows; ++r) {
    if (r == 3) {
      EXPECT_EQ(l[r], kNegInf);
      for (int c = 0; c < d; ++c) EXPECT_EQ(o[r * d + c], 0.0f);
      continue;
    }
    const double m = std::max<double>(la[r], lb[r]);
    const double lse = m + std::log(std::exp(la[r] - m) + std::exp(lb[r] - m));
    EXPECT_NEAR(l[r], lse, 1e-5);
    std::vector<double> ref(d);
    for (int c = 0; c < d; ++c) ref[c] = std::exp(la[r] - lse) * oa[r * d + c] + std::exp(lb[r] - lse) * ob[r * d + c];
    EXPECT_LT(max_err(o.data() + r * d, ref.data(), d), 1e-6);
  }
  // In place into a.
  merge_states(rows, d, oa.data(), la.data(), ob.data(), lb.data(), oa.data(), la.data());
  for (size_t i = 0; i < o.size(); ++i) EXPECT_EQ(oa[i], o[i]);
}

}  // namespace
}  // namespace ragd::kernels

// KV deviation against a double-precision reference, odd widths and strides.
TEST(KvDeviation, MatchesReferenceWithStrides) {
  using ragd::kernels::testing::random_vec;
  for (int width : {1, 7, 33, 130}) {
    const int rows = 301;  // above the kernel's parallel threshold
    const size_t new_stride = width + 5, old_stride = width + 2;
    auto kn = random_vec(rows * new_stride, 11 + width), vn = random_vec(rows * new_stride, 12 + width);
    auto ko = random_vec(rows * old_stride, 13 + width), vo = random_vec(rows * old_stride, 14 + width);
    std::vector<float> dev(rows);
    ragd::kernels::kv_deviation(rows, width, kn.data(), vn.data(), new_stride, ko.data(), vo.data(), old_stride, dev.data());
    for (int r = 0; r < rows; ++r) {
      double want = 0;
      for (int i = 0; i < width; ++i) {
        const double dk = double(kn[r * new_stride + i]) - ko[r * old_stride + i];
        const double dv = double(vn[r * new_stride + i]) - vo[r * old_stride + i];
        want += dk * dk + dv * dv;
      }
      ASSERT_NEAR(dev[r], want, 1e-5 * (1 + want)) << "width " << width << " row " << r;
    }
  }
  // Identical rows deviate by exactly zero.
  auto k = random_vec(64, 3), v = random_vec(64, 4);
  std::vector<float> dev(4);
  ragd::kernels::kv_deviation(4, 16, k.data(), v.data(), 16, k.data(), v.data(), 16, dev.data());
  for (float d : dev) EXPECT_EQ(d, 0.0f);
}
