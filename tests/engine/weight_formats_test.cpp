// The model with weights kept as bf16 / f16 / q8 in memory (ModelOptions::weights).
//   bf16, f16: the engine on an f32 checkpoint converted at load equals the double reference run on
//     the same weights rounded to that format (kRefTol): the matrices hold exactly the rounded
//     values and the math around them is unchanged.
//   q8: weights and activations are quantized per block of 32 (8 bits each), so logits move; stated
//     tolerance: max |Δlogit| within 4 % of the reference logits' range, argmax equal wherever the
//     reference's top two logits are more than 10 % of the range apart. Measured here: about
//     0.5-1 % (printed).
//   Fingerprints: KV from weights of other values than the checkpoint's must not be shared.
#include <gtest/gtest.h>

#include <cstdio>

#include "model_fixture.h"

namespace ragd::engine {
namespace {

using namespace testing;  // model_fixture.h / tiny_model.h: Fixture, Reference, random_tokens, err, tolerances

// The reference's weights with every 2-D matrix rounded as the engine stores it.
TinyWeights rounded(const Fixture& f, WeightFormat fmt) {
  TinyWeights r = f.w;
  for (auto& [name, t] : r.tensors) {
    if (t.shape.size() != 2) continue;
    for (double& v : r.values[name]) {
      const float x = static_cast<float>(v);
      v = fmt == WeightFormat::kBF16 ? bf16_to_f32(f32_to_bf16(x)) : f16_to_f32(f32_to_f16(x));
    }
  }
  return r;
}

class SixteenBit : public ::testing::TestWithParam<std::tuple<Variant, WeightFormat>> {};

TEST_P(SixteenBit, EqualsReferenceOnRoundedWeights) {
  const auto [variant, fmt] = GetParam();
  Fixture f(variant, 16, 8u << 20, 3, fmt);
  ASSERT_TRUE(f.model);
  EXPECT_EQ(f.model->load_info().weights, weight_format_name(fmt));
  const auto toks = random_tokens(37, 11);
  std::vector<std::vector<double>> ref, ref_f32;
  Reference(f.cfg, rounded(f, fmt)).run(toks, &ref);
  Reference(f.cfg, f.w).run(toks, &ref_f32);
  BlockTable t;
  StepOutput a = f.step(t, std::span(toks).subspan(0, 30), SeqStep::Logits::kAll);
  double worst_vs_f32 = 0.0;
  for (int r = 0; r < 30; ++r) {
    EXPECT_LT(err(a.row(r), ref[r]), kRefTol) << "row " << r;
    worst_vs_f32 = std::max(worst_vs_f32, err(a.row(r), ref_f32[r]));
  }
  for (int i = 30; i < 37; ++i) {
    StepOutput d = f.step(t, std::span(toks).subspan(i, 1), SeqStep::Logits::kLast);
    EXPECT_LT(err(d.row(0), ref[i]), kRefTol) << "decode " << i;
  }
  // Rounding is visible against the unrounded weights (the format is really in use).
  EXPECT_GT(worst_vs_f32, kRefTol);
  t.release(f.model->kv_pool());
}

INSTANTIATE_TEST_SUITE_P(Formats, SixteenBit,
                         ::testing::Combine(::testing::Values(Variant::kLlama, Variant::kQwen2Bias),
                                            ::testing::Values(WeightFormat::kBF16, WeightFormat::kF16)));

TEST(WeightFormats, Q8WithinStatedTolerance) {
  for (Variant v : {Variant::kLlama, Variant::kQwen2Bias}) {
    Fixture f(v, 16, 8u << 20, 5, WeightFormat::kQ8);
    ASSERT_TRUE(f.model);
    EXPECT_EQ(f.model->load_info().weights, "q8");
    const auto toks = random_tokens(41, 13);
    std::vector<std::vector<double>> ref;
    Reference(f.cfg, f.w).run(toks, &ref);
    BlockTable t;
    StepOutput a = f.step(t, std::span(toks).subspan(0, 33), SeqStep::Logits::kAll);
    std::vector<std::vector<float>> got;
    for (int r = 0; r < 33; ++r) got.emplace_back(a.row(r).begin(), a.row(r).end());
    for (int i = 33; i < 41; ++i) {
      StepOutput d = f.step(t, std::span(toks).subspan(i, 1), SeqStep::Logits::kLast);
      got.emplace_back(d.row(0).begin(), d.row(0).end());
    }
    double worst = 0.0, range_all = 0.0;
    int argmax_checked = 0;
    for (size_t r = 0; r < got.size(); ++r) {
      const auto [lo, hi] = std::minmax_element(ref[r].begin(), ref[r].end());
      const double range = *hi - *lo;
      range_all = std::max(range_all, range);
      double dmax = 0.0;
      for (size_t i = 0; i < ref[r].size(); ++i) dmax = std::max(dmax, std::fabs(got[r][i] - ref[r][i]));
      EXPECT_LE(dmax, 0.04 * range) << "position " << r;
      worst = std::max(worst, dmax / range);
      // argmax where the reference is decisive
      std::vector<double> sorted = ref[r];
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
      if (sorted[0] - sorted[1] > 0.1 * range) {
        ++argmax_checked;
        const size_t want = std::max_element(ref[r].begin(), ref[r].end()) - ref[r].begin();
        const size_t have = std::max_element(got[r].begin(), got[r].end()) - got[r].begin();
        EXPECT_EQ(have, want) << "position " << r;
      }
    }
    std::printf("q8 vs f32 reference (%s): max |dlogit| = %.2f %% of the logit range, %d decisive argmaxes checked\n",
                v == Variant::kLlama ? "llama" : "qwen2+bias", 100 * worst, argmax_checked);
    EXPECT_GT(worst, 0.0);
    t.release(f.model->kv_pool());
  }
}

TEST(WeightFormats, PrefillAndDecodeAgreeUnderQ8) {
  // Activations are quantized per row, so a token's logits do not depend on how rows are batched.
  Fixture f(Variant::kLlama, 16, 8u << 20, 5, WeightFormat::kQ8);
  ASSERT_TRUE(f.model);
  const auto toks = random_tokens(20, 17);
  BlockTable all, one;
  StepOutput a = f.step(all, std::span(toks), SeqStep::Logits::kAll);
  f.step(one, std::span(toks).subspan(0, 12), SeqStep::Logits::kNone);
  for (int i = 12; i < 20; ++i) {
    StepOutput d = f.step(one, std::span(toks).subspan(i, 1), SeqStep::Logits::kLast);
    EXPECT_LT(err(d.row(0), a.row(i)), kSelfTol) << "position " << i;
  }
  all.release(f.model->kv_pool());
  one.release(f.model->kv_pool());
}

TEST(WeightFormats, FingerprintsSeparateInexactWeights) {
  Fixture f32(Variant::kLlama, 16, 8u << 20, 1, WeightFormat::kF32);
  Fixture fauto(Variant::kLlama, 16, 8u << 20, 1, WeightFormat::kAuto);
  Fixture fq8(Variant::kLlama, 16, 8u << 20, 1, WeightFormat::kQ8);
  Fixture fbf(Variant::kLlama, 16, 8u << 20, 1, WeightFormat::kBF16);
  EXPECT_EQ(f32.model->fingerprint(), fauto.model->fingerprint());
  EXPECT_NE(f32.model->fingerprint(), fq8.model->fingerprint());
  EXPECT_NE(f32.model->fingerprint(), fbf.model->fingerprint());
  // A bf16 checkpoint kept as bf16 holds the checkpoint's values: same KV as widening it to f32.
  Fixture b_auto(Variant::kBf16, 16, 8u << 20, 1, WeightFormat::kAuto);
  Fixture b_f32(Variant::kBf16, 16, 8u << 20, 1, WeightFormat::kF32);
  EXPECT_EQ(b_auto.model->load_info().weights, "bf16");
  EXPECT_EQ(b_auto.model->fingerprint(), b_f32.model->fingerprint());
}

TEST(WeightFormats, ParseNamesEveryFormatAndRejectsOthers) {
  for (const char* n : {"auto", "f32", "bf16", "f16", "q8"}) {
    auto f = parse_weight_format(n);
    ASSERT_TRUE(f.ok()) << n;
    EXPECT_EQ(weight_format_name(*f), n);
  }
  auto bad = parse_weight_format("q4_0");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("q4_0"), std::string::npos);
}

}  // namespace
}  // namespace ragd::engine
