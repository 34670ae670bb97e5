// CacheBlend's row selection (repair() in kv_blend.cpp), checked behaviourally on a tiny random
// 6-layer Llama against a naive reference computed here from dense prefill KV:
//   - layer 1's fresh K/V of every placed row equal the dense prefill's (layer 0's KV is exact after
//     placement), so the rows kept at layer 1 must be the 2r rows with the largest
//     |K_dense - K_placed|^2 + |V_dense - V_placed|^2 at layer 1 (double-precision loops here);
//     layer 1's KV of every row is rewritten, so those 2r rows reach layer 2 with exact inputs and the
//     r rows kept there must be the top r of them by the same quantity at layer 2;
//   - a row's slots are rewritten exactly in the layers it was computed in: the rows that differ
//     from the placed KV at layer 2 are the 2r set, those at the last layer the r set; the rest keep
//     the placed KV bit for bit;
//   - r = 1 repairs every row: KV of every layer and the next token's logits equal dense prefill.
// Tolerances as in kv_blend_test: 2e-5 relative on logits (kSelfTol), 1e-4 on KV.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "blend_layout.h"
#include "model_fixture.h"
#include "ragd/kvstore/engine_io.h"
#include "ragd/pipelines/kv_blend.h"

namespace ragd::pipelines {
namespace {

using engine::BlockTable;
using engine::SeqStep;
using engine::testing::err;
using engine::testing::kSelfTol;
using engine::testing::random_tokens;

constexpr double kKvTol = 1e-4;

class BlendSelectionTest : public testing::BlendFixture {
 protected:
  void SetUp() override { open_model(6, 13, 4242); }
  kvstore::HostKv gather(const BlockTable& t, int n) {
    auto kv = kvstore::gather_kv(model_->kv_pool(), t, 0, n);
    EXPECT_TRUE(kv.ok()) << kv.status().to_string();
    return std::move(kv).value();
  }
  // |a - b|^2 of K plus V of `slot` at `layer` (double-precision loop).
  double dev(const kvstore::HostKv& a, const kvstore::HostKv& b, int layer, int slot) const {
    const int w = cfg_.num_key_value_heads * cfg_.head_dim;
    const size_t oa = (static_cast<size_t>(layer) * a.num_tokens + slot) * w, ob = (static_cast<size_t>(layer) * b.num_tokens + slot) * w;
    double d = 0;
    for (int i = 0; i < w; ++i) {
      const double x = static_cast<double>(a.k[oa + i]) - b.k[ob + i], y = static_cast<double>(a.v[oa + i]) - b.v[ob + i];
      d += x * x + y * y;
    }
    return d;
  }
  // Slots whose KV at `layer` differs from `placed` at all.
  std::vector<int> rewritten(const kvstore::HostKv& now, const kvstore::HostKv& placed, int layer, const std::vector<int>& slots) const {
    std::vector<int> out;
    for (int s : slots)
      if (dev(now, placed, layer, s) > 0) out.push_back(s);
    return out;
  }
  // The `keep` slots of `from` with the largest score (ascending slot order); asserts a clear gap
  // at the cut so that float rounding cannot flip the choice.
  static std::vector<int> top(const std::vector<int>& from, const std::vector<double>& score, int keep) {
    std::vector<int> idx(from.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](int a, int b) { return score[a] > score[b]; });
    if (keep < static_cast<int>(idx.size())) {
      EXPECT_GT(score[idx[keep - 1]] - score[idx[keep]], 1e-4 * score[idx[keep - 1]]) << "near-tie at the cut";
    }
    std::vector<int> out;
    for (int i = 0; i < keep; ++i) out.push_back(from[idx[i]]);
    std::sort(out.begin(), out.end());
    return out;
  }

};

TEST_F(BlendSelectionTest, KeptRowsAreTheTopDeviationRowsOfANaiveReference) {
  step(dense_, span(0, L_.region_end()), SeqStep::Logits::kNone);
  const std::vector<BlendDoc> docs = place();
  const int end = L_.region_end();
  const kvstore::HostKv full = gather(dense_, end), placed = gather(blend_, end);
  std::vector<int> slots;  // the placed rows: documents 2 and 3 (the first is in place)
  for (int s = L_.starts[1]; s < end; ++s) slots.push_back(s);
  const int n = static_cast<int>(slots.size());
  BlendParams p;
  p.recompute_ratio = 0.25;
  const int r = static_cast<int>(std::ceil(p.recompute_ratio * n - 1e-9)), r2 = std::min(n, 2 * r);
  std::vector<double> d1(n);
  for (int i = 0; i < n; ++i) d1[i] = dev(full, placed, 1, slots[i]);
  const std::vector<int> want1 = top(slots, d1, r2);
  std::vector<double> d2;
  for (int s : want1) d2.push_back(dev(full, placed, 2, s));
  const std::vector<int> want2 = top(want1, d2, r);

  auto st = repair(*model_, blend_, tokens_, docs, ReuseMode::kCacheBlend, p);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(st->placed, n);
  EXPECT_EQ(st->selected_first, r2);
  EXPECT_EQ(st->repaired, r);
  const kvstore::HostKv now = gather(blend_, end);
  // Layer 1: every row was computed (and matches dense prefill); layer 2 rewrote the 2r set; the
  // later layers the r set.
  for (int s : slots) EXPECT_LT(std::sqrt(dev(now, full, 1, s)), 1e-3) << "slot " << s;
  EXPECT_EQ(rewritten(now, placed, 2, slots), want1);
  for (int l = 3; l < cfg_.num_hidden_layers; ++l) EXPECT_EQ(rewritten(now, placed, l, slots), want2) << "layer " << l;
  // The 2r rows reached layer 2 with exact inputs: their layer-2 KV is dense prefill's.
  for (int s : want1) EXPECT_LT(std::sqrt(dev(now, full, 2, s)), 1e-3) << "slot " << s;
}

TEST_F(BlendSelectionTest, RatioOneIsDensePrefill) {
  const std::vector<float> want = step(dense_, tokens_, SeqStep::Logits::kLast);
  const std::vector<BlendDoc> docs = place();
  BlendParams p;
  p.recompute_ratio = 1.0;
  auto st = repair(*model_, blend_, tokens_, docs, ReuseMode::kCacheBlend, p);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(st->repaired, st->placed);
  const std::vector<float> got = step(blend_, span(L_.region_end(), L_.tail), SeqStep::Logits::kLast);
  EXPECT_LT(err(got, want), kSelfTol);
  const kvstore::HostKv a = gather(dense_, L_.total()), b = gather(blend_, L_.total());
  EXPECT_LT(std::max(err(b.k, a.k), err(b.v, a.v)), kKvTol);
}

}  // namespace
}  // namespace ragd::pipelines
