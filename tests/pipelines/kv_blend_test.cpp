// KV blending (kv_blend.h) on a tiny random 4-layer Llama held in memory, against dense prefill of
// the same prompt computed by the same engine:
//   - placed chunk KV: re-rotated keys equal the in-context keys of layer 0 (which depend only on
//     the token and its position), so re-rotation is exact where it can be checked exactly;
//   - the repair step with every row selected (cacheblend r = 1, epic k >= document length) is a
//     dense prefill: KV of every layer and the next token's logits match;
//   - naive concatenation (r = 0) is measurably different (so the tests above can fail), and
//     recomputing more rows brings the logits closer;
//   - epic rewrites exactly the first k tokens of each document not in place; cacheblend keeps the
//     placed KV of the rows it did not select.
// Tolerances: engine vs engine with a different step structure, max |a - b| / (1 + |b|) <= 2e-5
// on logits (kSelfTol) and 1e-4 on KV.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ragd/pipelines/kv_blend.h"
#include "blend_layout.h"
#include "model_fixture.h"
#include "ragd/kvstore/engine_io.h"

namespace ragd::pipelines {
namespace {

using engine::BlockTable;
using engine::SeqStep;
using engine::testing::err;
using engine::testing::kSelfTol;
using engine::testing::random_tokens;

constexpr double kKvTol = 1e-4;


class KvBlendTest : public testing::BlendFixture {
 protected:
  void SetUp() override { open_model(4, 7, 99); }

  // Dense prefill of the whole prompt; returns the last token's logits.
  std::vector<float> dense() { return step(dense_, tokens_, SeqStep::Logits::kLast); }

  // Head prefill, chunk KV computed after the head, placed in order, optional repair, tail prefill.
  // Returns the last token's logits.
  std::vector<float> blended(ReuseMode mode, const BlendParams& p, bool do_repair, BlendStats* stats = nullptr) {
    const std::vector<BlendDoc> placed = place();
    EXPECT_EQ(blend_.num_tokens(), L_.region_end());
    if (do_repair) {
      auto r = repair(*model_, blend_, tokens_, placed, mode, p);
      EXPECT_TRUE(r.ok()) << r.status().to_string();
      if (r.ok() && stats) *stats = *r;
    }
    return step(blend_, span(L_.region_end(), L_.tail), SeqStep::Logits::kLast);
  }

  // Max relative KV difference between the tables over slots [b, e) of one layer.
  double kv_err(int layer, int b, int e) {
    const int w = cfg_.num_key_value_heads * cfg_.head_dim, n = e - b;
    std::vector<float> ka(n * w), va(n * w), kb(n * w), vb(n * w);
    dense_.read(model_->kv_pool(), layer, b, n, ka.data(), va.data());
    blend_.read(model_->kv_pool(), layer, b, n, kb.data(), vb.data());
    return std::max(err(kb, ka), err(vb, va));
  }

};

TEST_F(KvBlendTest, PlacedKeysEqualInContextKeysOfLayerZero) {
  dense();
  blended(ReuseMode::kCacheBlend, {}, /*do_repair=*/false);
  // Layer 0: K and V depend on the token and its position only. Docs 2 and 3 were computed at
  // position 11 and re-rotated to 40 and 62.
  EXPECT_LT(kv_err(0, L_.head, L_.region_end()), kKvTol);
  // The first document sits where it was computed, after the same head: exact in every layer.
  for (int l = 0; l < cfg_.num_hidden_layers; ++l) EXPECT_LT(kv_err(l, L_.starts[0], L_.starts[1]), kKvTol) << l;
  // The later documents miss attention to the earlier ones from layer 1 on.
  EXPECT_GT(kv_err(1, L_.starts[1], L_.region_end()), 1e-3);
}

TEST_F(KvBlendTest, CacheBlendWithEveryRowIsDensePrefill) {
  const std::vector<float> want = dense();
  BlendParams p;
  p.recompute_ratio = 1.0;
  BlendStats st;
  const std::vector<float> got = blended(ReuseMode::kCacheBlend, p, true, &st);
  EXPECT_LT(err(got, want), kSelfTol);
  for (int l = 0; l < cfg_.num_hidden_layers; ++l) EXPECT_LT(kv_err(l, 0, L_.total()), kKvTol) << "layer " << l;
  EXPECT_EQ(st.placed, L_.lens[1] + L_.lens[2]);
  EXPECT_EQ(st.repaired, st.placed);
}

TEST_F(KvBlendTest, EpicWithWholeDocumentsIsDensePrefill) {
  const std::vector<float> want = dense();
  BlendParams p;
  p.epic_k = 4096;
  BlendStats st;
  const std::vector<float> got = blended(ReuseMode::kEpic, p, true, &st);
  EXPECT_LT(err(got, want), kSelfTol);
  EXPECT_EQ(st.repaired, L_.lens[1] + L_.lens[2]);
}

TEST_F(KvBlendTest, NaiveConcatenationDiffersAndMoreRecomputeGetsCloser) {
  const std::vector<float> want = dense();
  auto run = [&](double r) {
    blend_.release(model_->kv_pool());
    BlendParams p;
    p.recompute_ratio = r;
    return err(blended(ReuseMode::kCacheBlend, p, true), want);
  };
  const double e0 = run(0.0), e50 = run(0.5), e100 = run(1.0);
  EXPECT_GT(e0, 1e-3) << "placing chunk KV without repair should change the logits";
  EXPECT_LT(e50, e0);
  EXPECT_LT(e100, kSelfTol);
}

TEST_F(KvBlendTest, EpicRewritesExactlyTheFirstKTokensOfDisplacedDocuments) {
  dense();
  BlendParams p;
  p.epic_k = 5;
  blended(ReuseMode::kEpic, p, false);
  // Snapshot of the placed KV, then repair.
  const int w = cfg_.num_key_value_heads * cfg_.head_dim, n = L_.region_end();
  std::vector<std::vector<float>> before(cfg_.num_hidden_layers, std::vector<float>(2 * n * w));
  for (int l = 0; l < cfg_.num_hidden_layers; ++l)
    blend_.read(model_->kv_pool(), l, 0, n, before[l].data(), before[l].data() + n * w);
  std::vector<BlendDoc> placed;
  for (size_t i = 0; i < L_.starts.size(); ++i) placed.push_back({L_.starts[i], L_.lens[i], i == 0});
  auto st = repair(*model_, blend_, tokens_, placed, ReuseMode::kEpic, p);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(st->repaired, 10);
  for (int l = 1; l < cfg_.num_hidden_layers; ++l) {
    std::vector<float> after(2 * n * w);
    blend_.read(model_->kv_pool(), l, 0, n, after.data(), after.data() + n * w);
    for (int slot = 0; slot < n; ++slot) {
      bool changed = false;
      for (int i = 0; i < w; ++i) changed |= after[slot * w + i] != before[l][slot * w + i];
      const bool repaired = (slot >= L_.starts[1] && slot < L_.starts[1] + 5) || (slot >= L_.starts[2] && slot < L_.starts[2] + 5);
      EXPECT_EQ(changed, repaired) << "layer " << l << " slot " << slot;
    }
  }
}

TEST_F(KvBlendTest, CacheBlendKeepsPlacedKvOfUnselectedRowsAfterSelection) {
  BlendParams p;
  p.recompute_ratio = 0.2;
  blended(ReuseMode::kCacheBlend, p, false);
  const int w = cfg_.num_key_value_heads * cfg_.head_dim, n = L_.region_end();
  const int last = cfg_.num_hidden_layers - 1;
  std::vector<float> before(2 * n * w), after(2 * n * w);
  blend_.read(model_->kv_pool(), last, 0, n, before.data(), before.data() + n * w);
  std::vector<BlendDoc> placed;
  for (size_t i = 0; i < L_.starts.size(); ++i) placed.push_back({L_.starts[i], L_.lens[i], i == 0});
  auto st = repair(*model_, blend_, tokens_, placed, ReuseMode::kCacheBlend, p);
  ASSERT_TRUE(st.ok());
  const int placed_tokens = L_.lens[1] + L_.lens[2];
  EXPECT_EQ(st->placed, placed_tokens);
  EXPECT_EQ(st->repaired, static_cast<int>(std::ceil(0.2 * placed_tokens)));
  EXPECT_EQ(st->selected_first, std::min(placed_tokens, 2 * st->repaired));
  blend_.read(model_->kv_pool(), last, 0, n, after.data(), after.data() + n * w);
  int changed_rows = 0;
  for (int slot = 0; slot < n; ++slot) {
    bool changed = false;
    for (int i = 0; i < w; ++i) changed |= after[slot * w + i] != before[slot * w + i];
    if (slot < L_.starts[1]) EXPECT_FALSE(changed) << "slot " << slot << " is not a displaced document's";
    changed_rows += changed;
  }
  EXPECT_EQ(changed_rows, st->repaired);  // in the last layer only the selected rows were rewritten
}

TEST_F(KvBlendTest, BadParametersAndExactModesAreRejected) {
  step(blend_, span(0, 20), SeqStep::Logits::kNone);
  std::vector<BlendDoc> docs = {{11, 9, false}};
  BlendParams p;
  p.recompute_ratio = 1.5;
  EXPECT_EQ(repair(*model_, blend_, tokens_, docs, ReuseMode::kCacheBlend, p).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(repair(*model_, blend_, tokens_, docs, ReuseMode::kKnowledgeTree, {}).status().code(), StatusCode::kInvalidArgument);
  docs = {{11, 30, false}};  // past the table's 20 tokens
  EXPECT_EQ(repair(*model_, blend_, tokens_, docs, ReuseMode::kEpic, {}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ragd::pipelines
