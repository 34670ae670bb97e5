// KV stored as bf16 or int8 (kv_dtype.h): the row conversions against their scalar definitions, and
// the attention kernels reading the stored type directly, against a double reference on the values
// as stored (dequantized), at odd lengths, block-unaligned tails, GQA groups 1/2/4 and head dims the
// AVX-512 decode kernel takes (16, 64, 128) and ones it leaves to the portable kernel (40, 48).
// The deviation from f32 KV is checked against the storage's own error bound, not a fixed number.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "ragd/kernels/attention.h"
#include "ragd/kernels/half.h"
#include "ragd/kernels/kv_dtype.h"
#include "test_util.h"

namespace ragd::kernels {
namespace {

using testing::max_err;
using testing::random_vec;
using testing::ref_attention;
using testing::ref_attention_positions;

// Same as attention_test.cpp: the kernels compute in fp32 over the stored values.
constexpr double kOutTol = 2e-5;
constexpr double kLseTol = 2e-5;

// K/V [len, kv_heads, d] stored as `dtype` in shuffled pages; `kc` / `vc` hold the values as
// stored (dequantized), for the reference. Unused slots hold NaN (f32, bf16) or a NaN scale (int8),
// so a kernel that reads past kv_len poisons its output.
struct StoredPages {
  std::vector<std::byte> k, v;
  std::vector<float> ks, vs;
  std::vector<float> kc, vc;  // dequantized, [len, kv_heads, d]
  std::vector<int32_t> table;
  PagedKv view;

  StoredPages(KvDtype dtype, const std::vector<float>& k_in, const std::vector<float>& v_in, int len, int kvh, int d,
              int bs, uint32_t seed) {
    const int nblk = (len + bs - 1) / bs, total = nblk + 2;
    const size_t tok = static_cast<size_t>(kvh) * d, eb = kv_dtype_bytes(dtype);
    const size_t slots = static_cast<size_t>(total) * bs;
    std::vector<float> nan_row(tok, std::numeric_limits<float>::quiet_NaN());
    k.resize(slots * tok * eb);
    v.resize(k.size());
    ks.assign(slots * kvh, std::numeric_limits<float>::quiet_NaN());
    vs = ks;
    for (size_t s = 0; s < slots; ++s) {  // poison every slot first
      kv_store_rows(dtype, 1, kvh, d, nan_row.data(), tok, k.data() + s * tok * eb, ks.data() + s * kvh);
      kv_store_rows(dtype, 1, kvh, d, nan_row.data(), tok, v.data() + s * tok * eb, vs.data() + s * kvh);
    }
    if (dtype == KvDtype::kInt8) std::fill(ks.begin(), ks.end(), std::numeric_limits<float>::quiet_NaN());
    if (dtype == KvDtype::kInt8) std::fill(vs.begin(), vs.end(), std::numeric_limits<float>::quiet_NaN());
    std::vector<int32_t> ids(total);
    std::iota(ids.begin(), ids.end(), 0);
    std::mt19937 rng(seed);
    std::shuffle(ids.begin(), ids.end(), rng);
    table.assign(ids.begin(), ids.begin() + nblk);
    kc.resize(static_cast<size_t>(len) * tok);
    vc.resize(kc.size());
    for (int j = 0; j < len; ++j) {
      const size_t s = static_cast<size_t>(table[j / bs]) * bs + j % bs;
      kv_store_rows(dtype, 1, kvh, d, k_in.data() + j * tok, tok, k.data() + s * tok * eb, ks.data() + s * kvh);
      kv_store_rows(dtype, 1, kvh, d, v_in.data() + j * tok, tok, v.data() + s * tok * eb, vs.data() + s * kvh);
      kv_load_values(dtype, tok, d, k.data() + s * tok * eb, ks.data() + s * kvh, kc.data() + j * tok);
      kv_load_values(dtype, tok, d, v.data() + s * tok * eb, vs.data() + s * kvh, vc.data() + j * tok);
    }
    view.k = k.data();
    view.v = v.data();
    view.dtype = dtype;
    if (kv_dtype_scaled(dtype)) {
      view.k_scale = ks.data();
      view.v_scale = vs.data();
    }
    view.block_table = table.data();
    view.block_size = bs;
    view.num_kv_heads = kvh;
    view.head_dim = d;
    view.kv_len = len;
  }
};

TEST(KvDtypeRows, Bf16RoundsToNearestEvenLikeTheScalar) {
  const int kvh = 3, d = 40, rows = 5;
  auto x = random_vec(static_cast<size_t>(rows) * kvh * d, 11, -300.0f, 300.0f);
  x[7] = 0.0f;
  x[8] = -0.0f;
  x[9] = std::numeric_limits<float>::infinity();
  x[10] = 1.0f + 1.0f / 256.0f;  // a tie: rounds to even (1.0)
  std::vector<uint16_t> h(x.size());
  kv_store_rows(KvDtype::kBF16, rows, kvh, d, x.data(), static_cast<size_t>(kvh) * d, h.data(), nullptr);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(h[i], f32_to_bf16(x[i])) << i;
  std::vector<float> back(x.size());
  kv_load_values(KvDtype::kBF16, back.size(), d, h.data(), nullptr, back.data());
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(back[i], bf16_to_f32(h[i])) << i;
    if (std::isfinite(x[i])) EXPECT_LE(std::fabs(back[i] - x[i]), std::fabs(x[i]) * 0x1p-8f) << i;
  }
  EXPECT_EQ(back[10], 1.0f);
}

TEST(KvDtypeRows, Int8ScalePerTokenAndHeadWithinHalfAStep) {
  const int kvh = 2, d = 33, rows = 7;
  const size_t stride = static_cast<size_t>(kvh) * d + 5;  // rows are strided, as in the QKV buffer
  auto x = random_vec(rows * stride, 12, -4.0f, 4.0f);
  for (int c = 0; c < d; ++c) x[stride * 2 + d + c] = 0.0f;  // token 2, head 1: all zeros
  x[stride * 3] = 1000.0f;                                     // token 3, head 0: one outlier
  std::vector<int8_t> q(static_cast<size_t>(rows) * kvh * d);
  std::vector<float> scales(static_cast<size_t>(rows) * kvh);
  kv_store_rows(KvDtype::kInt8, rows, kvh, d, x.data(), stride, q.data(), scales.data());
  std::vector<float> back(q.size());
  kv_load_values(KvDtype::kInt8, back.size(), d, q.data(), scales.data(), back.data());
  for (int r = 0; r < rows; ++r) {
    for (int h = 0; h < kvh; ++h) {
      const float* xs = x.data() + r * stride + h * d;
      float amax = 0.0f;
      for (int c = 0; c < d; ++c) amax = std::max(amax, std::fabs(xs[c]));
      const float s = scales[r * kvh + h];
      EXPECT_FLOAT_EQ(s, amax / 127.0f) << r << "," << h;
      for (int c = 0; c < d; ++c) {
        const size_t i = (static_cast<size_t>(r) * kvh + h) * d + c;
        ASSERT_GE(q[i], -127);
        EXPECT_LE(std::fabs(back[i] - xs[c]), 0.5f * s * (1.0f + 1e-5f) + 1e-30f) << r << "," << h << "," << c;
      }
    }
  }
  EXPECT_EQ(scales[2 * kvh + 1], 0.0f);
  for (int c = 0; c < d; ++c) EXPECT_EQ(back[(2 * kvh + 1) * d + c], 0.0f);
}

TEST(KvDtypeRows, NamesParse) {
  for (KvDtype t : {KvDtype::kF32, KvDtype::kBF16, KvDtype::kInt8}) {
    auto r = parse_kv_dtype(kv_dtype_name(t));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, t);
  }
  auto bad = parse_kv_dtype("fp8");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "kv_dtype must be one of f32 | bf16 | int8; got 'fp8'");
  EXPECT_EQ(enum_choices<KvDtype>(), "f32 | bf16 | int8");
  EXPECT_EQ(kv_dtype_bytes(KvDtype::kF32), 4u);
  EXPECT_EQ(kv_dtype_bytes(KvDtype::kBF16), 2u);
  EXPECT_EQ(kv_dtype_bytes(KvDtype::kInt8), 1u);
}

// (dtype, n_q, q_offset, group, head_dim, block_size)
using Case = std::tuple<KvDtype, int, int, int, int, int>;
class StoredKvTest : public ::testing::TestWithParam<Case> {};

TEST_P(StoredKvTest, PrefillAndDecodeMatchTheStoredValues) {
  const auto [dtype, n_q, q_offset, group, d, bs] = GetParam();
  const int kvh = 2, heads = kvh * group, len = q_offset + n_q;
  const uint32_t seed = static_cast<uint32_t>(n_q * 31 + q_offset + group * 7 + d * 3 + bs);
  auto q = random_vec(static_cast<size_t>(n_q) * heads * d, seed, -2.0f, 2.0f);
  auto k_in = random_vec(static_cast<size_t>(len) * kvh * d, seed + 1, -2.0f, 2.0f);
  auto v_in = random_vec(static_cast<size_t>(len) * kvh * d, seed + 2);
  StoredPages pages(dtype, k_in, v_in, len, kvh, d, bs, seed + 3);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));

  // Prefill (contiguous causal form) against the stored values.
  std::vector<float> out(q.size()), lse(static_cast<size_t>(n_q) * heads);
  ASSERT_TRUE(attention_prefill(q.data(), n_q, heads, pages.view, scale, true, q_offset, out.data(), lse.data()).ok());
  std::vector<double> ref_o, ref_l;
  ref_attention(q, n_q, heads, pages.kc, pages.vc, len, kvh, d, scale, true, q_offset, &ref_o, &ref_l);
  EXPECT_LT(max_err(out.data(), ref_o.data(), out.size()), kOutTol);
  EXPECT_LT(max_err(lse.data(), ref_l.data(), lse.size()), kLseTol);

  // Explicit positions with key positions (the masked path of both kernels): keys reversed.
  std::vector<int32_t> key_pos(len), q_pos(n_q);
  for (int j = 0; j < len; ++j) key_pos[j] = len - 1 - j;
  for (int i = 0; i < n_q; ++i) q_pos[i] = (i * 37 + 11) % len;
  PagedKv masked = pages.view;
  masked.key_pos = key_pos.data();
  ASSERT_TRUE(
      attention_prefill_positions(q.data(), n_q, heads, masked, scale, q_pos.data(), out.data(), lse.data()).ok());
  ref_attention_positions(q, n_q, heads, pages.kc, pages.vc, len, kvh, d, scale, q_pos, key_pos, &ref_o, &ref_l);
  EXPECT_LT(max_err(out.data(), ref_o.data(), out.size()), kOutTol);
  EXPECT_LT(max_err(lse.data(), ref_l.data(), lse.size()), kLseTol);

  // Decode: the last query over all keys, unsplit and split 3 ways; and the masked form.
  const float* q_last = q.data() + static_cast<size_t>(n_q - 1) * heads * d;
  std::vector<float> q1(q_last, q_last + static_cast<size_t>(heads) * d);
  ref_attention(q1, 1, heads, pages.kc, pages.vc, len, kvh, d, scale, false, 0, &ref_o, &ref_l);
  for (int splits : {1, 3}) {
    std::vector<float> o1(q1.size()), l1(heads);
    DecodeItem it{q1.data(), pages.view, o1.data(), l1.data()};
    ASSERT_TRUE(attention_decode({&it, 1}, heads, scale, splits).ok());
    EXPECT_LT(max_err(o1.data(), ref_o.data(), o1.size()), kOutTol) << "splits " << splits;
    EXPECT_LT(max_err(l1.data(), ref_l.data(), l1.size()), kLseTol) << "splits " << splits;
  }
  {
    std::vector<float> o1(q1.size()), l1(heads);
    DecodeItem it{q1.data(), masked, o1.data(), l1.data(), len / 2};
    ASSERT_TRUE(attention_decode({&it, 1}, heads, scale, 2).ok());
    ref_attention_positions(q1, 1, heads, pages.kc, pages.vc, len, kvh, d, scale, {len / 2}, key_pos, &ref_o, &ref_l);
    EXPECT_LT(max_err(o1.data(), ref_o.data(), o1.size()), kOutTol);
    EXPECT_LT(max_err(l1.data(), ref_l.data(), l1.size()), kLseTol);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, StoredKvTest,
                         ::testing::Values(Case{KvDtype::kBF16, 37, 0, 2, 64, 16}, Case{KvDtype::kBF16, 5, 300, 4, 64, 7},
                                           Case{KvDtype::kBF16, 129, 3, 1, 48, 16},
                                           Case{KvDtype::kBF16, 17, 290, 2, 16, 5},
                                           Case{KvDtype::kBF16, 9, 70, 1, 128, 16},
                                           Case{KvDtype::kInt8, 37, 0, 2, 64, 16}, Case{KvDtype::kInt8, 5, 300, 4, 64, 7},
                                           Case{KvDtype::kInt8, 129, 3, 1, 48, 16},
                                           Case{KvDtype::kInt8, 17, 290, 2, 16, 5},
                                           Case{KvDtype::kInt8, 9, 70, 2, 40, 3},
                                           Case{KvDtype::kInt8, 9, 70, 1, 128, 16}));

// How far attention over stored KV is from attention over the f32 KV it was made from: within what
// the storage's rounding allows (bf16: 2^-8 relative per value; int8: half a step of each row's
// scale), and not zero (the kernels really read the rounded values).
TEST(StoredKvDeviation, WithinTheStorageErrorBound) {
  const int kvh = 2, group = 2, heads = kvh * group, d = 64, len = 1000;
  auto q = random_vec(static_cast<size_t>(heads) * d, 90, -2.0f, 2.0f);
  auto k_in = random_vec(static_cast<size_t>(len) * kvh * d, 91, -2.0f, 2.0f);
  auto v_in = random_vec(static_cast<size_t>(len) * kvh * d, 92);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<double> ref_o, ref_l;
  ref_attention(q, 1, heads, k_in, v_in, len, kvh, d, scale, false, 0, &ref_o, &ref_l);
  // |Δscore| <= δ = scale · Σ|q_c| · max|Δk|; the weights then move by Σ|Δp| <= e^(2δ) - 1, so
  // |Δo| <= max|Δv| + (e^(2δ) - 1) · max|v| (max|v| = 1).
  double q_l1 = 0.0;
  for (float x : q) q_l1 = std::max(q_l1, 0.0 + std::fabs(x));
  q_l1 *= d;
  for (auto [dtype, dk, dv] : {std::tuple{KvDtype::kBF16, 2.0 * 0x1p-8, 1.0 * 0x1p-8},
                               std::tuple{KvDtype::kInt8, 0.5 * 2.0 / 127, 0.5 * 1.0 / 127}}) {
    StoredPages pages(dtype, k_in, v_in, len, kvh, d, 16, 93);
    std::vector<float> o(q.size()), l(heads);
    DecodeItem it{q.data(), pages.view, o.data(), l.data()};
    ASSERT_TRUE(attention_decode({&it, 1}, heads, scale, 0).ok());
    const double ds = scale * q_l1 * dk;
    double err = 0.0;
    for (size_t i = 0; i < o.size(); ++i) err = std::max(err, std::fabs(o[i] - ref_o[i]));
    EXPECT_GT(err, 0.0) << kv_dtype_name(dtype);
    const double bound = dv + std::expm1(2.0 * ds);
    EXPECT_LE(err, bound) << kv_dtype_name(dtype);
    std::printf("decode over %d keys, %s KV: max |O - O_f32| = %.3g (bound %.3g)\n", len,
                std::string(kv_dtype_name(dtype)).c_str(), err, bound);
  }
}

TEST(StoredKvErrors, Int8WithoutScalesIsRefused) {
  std::vector<int8_t> kv(64 * 16, 1);
  std::vector<int32_t> table{0};
  std::vector<float> q(64), o(64), l(1);
  PagedKv p{kv.data(), kv.data(), table.data(), 16, 1, 64, 4};
  p.dtype = KvDtype::kInt8;
  DecodeItem it{q.data(), p, o.data(), l.data()};
  const Status s = attention_decode({&it, 1}, 1, 0.125f, 1);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("scales"), std::string::npos);
  const Status s2 = attention_prefill(q.data(), 1, 1, p, 0.125f, true, 3, o.data(), l.data());
  ASSERT_FALSE(s2.ok());
  EXPECT_NE(s2.message().find("k_scale"), std::string::npos);
}

}  // namespace
}  // namespace ragd::kernels
