// The KV pool storing bf16 or int8 (ModelOptions::kv_dtype, KvLayout::dtype).
//   Pool: the same byte budget holds 2x (bf16) and about 4x (int8, scales included) the tokens of
//     f32; rows read back are the stored values, within the storage's rounding of what was written;
//     copy-on-write copies values and scales, so a fork's write never changes the other table.
//   Model: prefill and token-by-token decode of the same tokens agree to fp32 accuracy (both attend
//     to the same stored KV); logits stay within a stated tolerance of the f32-KV double reference
//     (bf16: 1 % of the logit range, int8: 3 %; measured deviations printed), with the argmax
//     unchanged where the reference is decisive; the rounding is visible (the dtype is really in
//     use); fingerprints separate each KV dtype.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "model_fixture.h"
#include "ragd/engine/kv_cache.h"

namespace ragd::engine {
namespace {

using kernels::KvDtype;
using namespace testing;  // model_fixture.h / tiny_model.h: Fixture, Reference, random_tokens, err, tolerances

KvLayout layout(KvDtype dt, int bs = 5) {
  KvLayout l;
  l.num_layers = 2;
  l.num_kv_heads = 3;
  l.head_dim = 16;
  l.block_size = bs;
  l.dtype = dt;
  return l;
}

std::vector<float> rnd(size_t n, uint32_t seed, float lo = -3.0f, float hi = 3.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// Largest rounding error the dtype allows for a value of a row whose largest magnitude is amax.
double bound(KvDtype dt, double x, double amax) {
  switch (dt) {
    case KvDtype::kF32: return 0.0;
    case KvDtype::kBF16: return std::fabs(x) * 0x1p-8;
    case KvDtype::kInt8: return 0.5 * amax / 127.0 * (1 + 1e-5);
  }
  return 0.0;
}

class StoredPool : public ::testing::TestWithParam<KvDtype> {};

TEST_P(StoredPool, BytesPerTokenFollowTheDtype) {
  const KvDtype dt = GetParam();
  const KvLayout f32 = layout(KvDtype::kF32), l = layout(dt);
  const size_t values = 2ull * 2 * 3 * 16;  // K and V, 2 layers, 3 heads, head_dim 16
  EXPECT_EQ(f32.token_bytes(), values * 4);
  const size_t want = dt == KvDtype::kF32    ? values * 4
                      : dt == KvDtype::kBF16 ? values * 2
                                             : values + 2ull * 2 * 3 * sizeof(float);
  EXPECT_EQ(l.token_bytes(), want);
  EXPECT_EQ(l.block_bytes(), want * l.block_size);
  auto pool = KvPool::create(l, 7);
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ((*pool)->bytes(), want * l.block_size * 7);
}

TEST_P(StoredPool, ReadBackIsTheStoredRoundingAndForksStayApart) {
  const KvDtype dt = GetParam();
  auto pool = std::move(KvPool::create(layout(dt), 40).value());
  const KvLayout& L = pool->layout();
  const int n = 23, d = L.head_dim;
  const size_t tf = L.token_floats(), per = n * tf;
  auto k = rnd(per * L.num_layers, 1), v = rnd(per * L.num_layers, 2);
  for (int c = 0; c < d; ++c) k[4 * tf + d + c] = 0.0f;  // a row of zeros (int8 scale 0)
  BlockTable a;
  ASSERT_TRUE(a.append(*pool, n, k.data(), v.data()));
  std::vector<float> ka(per), va(per);
  std::vector<std::vector<float>> stored_k(L.num_layers), stored_v(L.num_layers);
  for (int l = 0; l < L.num_layers; ++l) {
    a.read(*pool, l, 0, n, ka.data(), va.data());
    for (size_t i = 0; i < per; ++i) {
      const size_t row = i / d;  // (token, head) row
      double amax_k = 0, amax_v = 0;
      for (int c = 0; c < d; ++c) {
        amax_k = std::max(amax_k, 0.0 + std::fabs(k[l * per + row * d + c]));
        amax_v = std::max(amax_v, 0.0 + std::fabs(v[l * per + row * d + c]));
      }
      ASSERT_LE(std::fabs(ka[i] - k[l * per + i]), bound(dt, k[l * per + i], amax_k)) << "layer " << l << " value " << i;
      ASSERT_LE(std::fabs(va[i] - v[l * per + i]), bound(dt, v[l * per + i], amax_v)) << "layer " << l << " value " << i;
    }
    stored_k[l] = ka;
    stored_v[l] = va;
  }
  // Rounding is visible (except at f32).
  if (dt != KvDtype::kF32) EXPECT_NE(stored_k[0], std::vector<float>(k.begin(), k.begin() + per));

  // A fork that writes after an unaligned prefix copies the shared block (values and scales).
  BlockTable b = a.fork_prefix(*pool, 12);
  auto k2 = rnd(7 * tf * L.num_layers, 3, -50.0f, 50.0f), v2 = rnd(7 * tf * L.num_layers, 4, -50.0f, 50.0f);
  ASSERT_TRUE(b.append(*pool, 7, k2.data(), v2.data()));
  for (int l = 0; l < L.num_layers; ++l) {
    a.read(*pool, l, 0, n, ka.data(), va.data());
    EXPECT_EQ(ka, stored_k[l]) << "layer " << l;
    EXPECT_EQ(va, stored_v[l]) << "layer " << l;
    std::vector<float> kb(12 * tf), vb(12 * tf);
    b.read(*pool, l, 0, 12, kb.data(), vb.data());
    EXPECT_TRUE(std::equal(kb.begin(), kb.end(), stored_k[l].begin())) << "layer " << l;
  }
  a.release(*pool);
  b.release(*pool);
  EXPECT_EQ(pool->free_blocks(), 40u);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, StoredPool, ::testing::Values(KvDtype::kF32, KvDtype::kBF16, KvDtype::kInt8));

struct KvFixture : testing::Fixture {
  KvFixture(Variant v, KvDtype dt, size_t pool_bytes = 8u << 20) : Fixture(v, 16, pool_bytes, 5, WeightFormat::kAuto, dt) {}
};

class StoredKvModel : public ::testing::TestWithParam<KvDtype> {};

// Prefill computes K and V with one GEMM over 45 rows, decode with one row at a time: the f32
// values can differ in their last bits (another summation order, another instruction mix in
// another build), and a value that lands on a rounding boundary then stores as the neighbouring
// bf16 / int8 step. The stored KV of both runs is compared first: with no such flip (differences
// of 1e-5 relative or less, e.g. the last bits of f32 values or of int8 scales) the logits must
// agree to kSelfTol as for f32; each flip must be one step of the stored type, and flips move the
// logits by a bounded amount (kFlipTol; one bf16 step is 2^-8 of a value).
TEST_P(StoredKvModel, PrefillAndDecodeAgree) {
  constexpr double kFlipTol = 1e-3;
  KvFixture f(Variant::kLlama, GetParam());
  ASSERT_TRUE(f.model);
  EXPECT_EQ(f.model->load_info().kv_dtype, kernels::kv_dtype_name(GetParam()));
  const auto toks = random_tokens(45, 21);
  BlockTable all, one;
  StepOutput a = f.step(all, std::span(toks), SeqStep::Logits::kAll);
  f.step(one, std::span(toks).subspan(0, 19), SeqStep::Logits::kNone);
  std::vector<StepOutput> d;
  for (int i = 19; i < 45; ++i) d.push_back(f.step(one, std::span(toks).subspan(i, 1), SeqStep::Logits::kLast));

  // Stored KV of the two runs, every layer and position.
  KvPool& pool = f.model->kv_pool();
  const size_t tf = pool.layout().token_floats();
  int flips = 0;
  for (int l = 0; l < pool.layout().num_layers; ++l) {
    std::vector<float> ka(45 * tf), va(45 * tf), kb(45 * tf), vb(45 * tf);
    all.read(pool, l, 0, 45, ka.data(), va.data());
    one.read(pool, l, 0, 45, kb.data(), vb.data());
    for (size_t i = 0; i < ka.size(); ++i) {
      for (auto [x, y] : {std::pair{ka[i], kb[i]}, std::pair{va[i], vb[i]}}) {
        // Not a flip: the last-bit differences of f32 values (and of int8 scales), 1e-7 relative.
        if (std::fabs(x - y) <= 1e-5 * std::max({std::fabs(x), std::fabs(y), 1e-3f})) continue;
        ++flips;
        if (GetParam() == KvDtype::kBF16) {  // one bf16 step: 2^-8 of the larger magnitude at most
          EXPECT_LE(std::fabs(x - y), std::max(std::fabs(x), std::fabs(y)) / 128.0) << "layer " << l << " value " << i;
        }
      }
    }
  }
  // f32 stores what was computed: no rounding step to cross, its bound is always kSelfTol.
  const double tol = GetParam() == KvDtype::kF32 || flips == 0 ? kSelfTol : kFlipTol;
  double worst = 0.0;
  for (int i = 19; i < 45; ++i) {
    const double e = err(d[i - 19].row(0), a.row(i));
    EXPECT_LT(e, tol) << "position " << i << " (" << flips << " stored values differ)";
    worst = std::max(worst, e);
  }
  std::printf("%s KV: prefill vs decode, worst relative deviation %.3g, %d stored values differ by > 1e-5\n",
              std::string(kernels::kv_dtype_name(GetParam())).c_str(), worst, flips);
  all.release(pool);
  one.release(pool);
}

class RoundedKvModel : public ::testing::TestWithParam<KvDtype> {};

TEST_P(RoundedKvModel, WithinStatedToleranceOfF32Kv) {
  const KvDtype dt = GetParam();
  const double tol = dt == KvDtype::kBF16 ? 0.01 : 0.03;
  for (Variant v : {Variant::kLlama, Variant::kQwen2Bias}) {
    KvFixture f(v, dt);
    ASSERT_TRUE(f.model);
    const auto toks = random_tokens(50, 23);
    std::vector<std::vector<double>> ref;
    Reference(f.cfg, f.w).run(toks, &ref);
    BlockTable t;
    StepOutput a = f.step(t, std::span(toks).subspan(0, 40), SeqStep::Logits::kAll);
    std::vector<std::vector<float>> got;
    for (int r = 0; r < 40; ++r) got.emplace_back(a.row(r).begin(), a.row(r).end());
    for (int i = 40; i < 50; ++i) {
      StepOutput d = f.step(t, std::span(toks).subspan(i, 1), SeqStep::Logits::kLast);
      got.emplace_back(d.row(0).begin(), d.row(0).end());
    }
    double worst = 0.0;
    int decisive = 0;
    for (size_t r = 1; r < got.size(); ++r) {  // position 0 attends only to itself: exact softmax
      const auto [lo, hi] = std::minmax_element(ref[r].begin(), ref[r].end());
      const double range = *hi - *lo;
      double dmax = 0.0;
      for (size_t i = 0; i < ref[r].size(); ++i) dmax = std::max(dmax, std::fabs(got[r][i] - ref[r][i]));
      EXPECT_LE(dmax, tol * range) << "position " << r;
      worst = std::max(worst, dmax / range);
      std::vector<double> s = ref[r];
      std::partial_sort(s.begin(), s.begin() + 2, s.end(), std::greater<>());
      if (s[0] - s[1] > 0.1 * range) {
        ++decisive;
        EXPECT_EQ(std::max_element(got[r].begin(), got[r].end()) - got[r].begin(),
                  std::max_element(ref[r].begin(), ref[r].end()) - ref[r].begin())
            << "position " << r;
      }
    }
    std::printf("%s KV vs f32 reference (%s): max |dlogit| = %.3f %% of the logit range, %d decisive argmaxes\n",
                std::string(kernels::kv_dtype_name(dt)).c_str(), v == Variant::kLlama ? "llama" : "qwen2+bias",
                100 * worst, decisive);
    EXPECT_GT(worst, 1e-6);  // the stored rounding is really in the loop
    t.release(f.model->kv_pool());
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RoundedKvModel, ::testing::Values(KvDtype::kBF16, KvDtype::kInt8));

TEST_P(StoredKvModel, SameBudgetHoldsMoreBlocks) {
  const KvDtype dt = GetParam();
  KvFixture f32(Variant::kLlama, KvDtype::kF32, 1u << 20), f(Variant::kLlama, dt, 1u << 20);
  const double ratio = static_cast<double>(f.model->kv_pool().num_blocks()) / f32.model->kv_pool().num_blocks();
  const double want = static_cast<double>(f32.model->kv_pool().layout().token_bytes()) /
                      f.model->kv_pool().layout().token_bytes();
  EXPECT_NEAR(ratio, want, 0.02 * want);
  EXPECT_GE(ratio, dt == KvDtype::kF32 ? 1.0 : dt == KvDtype::kBF16 ? 1.98 : 3.0);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, StoredKvModel, ::testing::Values(KvDtype::kF32, KvDtype::kBF16, KvDtype::kInt8));

TEST(StoredKvModel, FingerprintsSeparateKvDtypes) {
  KvFixture a(Variant::kLlama, KvDtype::kF32), b(Variant::kLlama, KvDtype::kBF16), c(Variant::kLlama, KvDtype::kInt8);
  testing::Fixture plain(Variant::kLlama, 16, 8u << 20, 5);
  EXPECT_EQ(a.model->fingerprint(), plain.model->fingerprint());  // f32 KV keeps the model's key
  EXPECT_NE(a.model->fingerprint(), b.model->fingerprint());
  EXPECT_NE(a.model->fingerprint(), c.model->fingerprint());
  EXPECT_NE(b.model->fingerprint(), c.model->fingerprint());
}

}  // namespace
}  // namespace ragd::engine
