// Paged prefill and decode attention (O and LSE) against a double reference on odd sizes,
// block-unaligned lengths, GQA groups 1/2/4 and head_dim 64/48; split-KV decode; merging two
// partial attentions equals the full attention.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "ragd/kernels/attention.h"
#include "ragd/kernels/lse_merge.h"
#include "test_util.h"

namespace ragd::kernels {
namespace {

using testing::max_err;
using testing::PagedData;
using testing::random_vec;
using testing::ref_attention;

// O: values in [-1, 1] averaged in fp32. LSE: fp32 logs of sums of up to ~1k terms.
constexpr double kOutTol = 2e-5;
constexpr double kLseTol = 2e-5;

// (n_q, q_offset, group, head_dim, block_size)
using PrefillCase = std::tuple<int, int, int, int, int>;
class PrefillTest : public ::testing::TestWithParam<PrefillCase> {};

TEST_P(PrefillTest, CausalMatchesReference) {
  const auto [n_q, q_offset, group, d, bs] = GetParam();
  const int kvh = 2, heads = kvh * group, len = q_offset + n_q;
  const uint32_t seed = static_cast<uint32_t>(n_q * 131 + q_offset * 7 + group * 3 + d + bs);
  auto q = random_vec(static_cast<size_t>(n_q) * heads * d, seed, -2.0f, 2.0f);
  auto kc = random_vec(static_cast<size_t>(len) * kvh * d, seed + 1, -2.0f, 2.0f);
  auto vc = random_vec(static_cast<size_t>(len) * kvh * d, seed + 2);
  PagedData paged(kc, vc, len, kvh, d, bs, seed + 3);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> out(q.size()), lse(static_cast<size_t>(n_q) * heads);
  ASSERT_TRUE(attention_prefill(q.data(), n_q, heads, paged.view, scale, true, q_offset, out.data(), lse.data()).ok());
  std::vector<double> ref_o, ref_l;
  ref_attention(q, n_q, heads, kc, vc, len, kvh, d, scale, true, q_offset, &ref_o, &ref_l);
  EXPECT_LT(max_err(out.data(), ref_o.data(), out.size()), kOutTol);
  EXPECT_LT(max_err(lse.data(), ref_l.data(), lse.size()), kLseTol);
}

INSTANTIATE_TEST_SUITE_P(Shapes, PrefillTest,
                         ::testing::Values(PrefillCase{7, 0, 1, 64, 16}, PrefillCase{33, 0, 2, 48, 3},
                                           PrefillCase{129, 0, 4, 64, 16}, PrefillCase{129, 0, 1, 48, 1},
                                           PrefillCase{33, 70, 4, 48, 16}, PrefillCase{7, 300, 2, 64, 3},
                                           PrefillCase{129, 200, 2, 64, 64}, PrefillCase{1, 33, 4, 64, 16}));

TEST(Prefill, NonCausalAndRowsWithoutKeys) {
  const int n_q = 33, kvh = 1, heads = 2, d = 48, len = 45;
  auto q = random_vec(static_cast<size_t>(n_q) * heads * d, 70);
  auto kc = random_vec(static_cast<size_t>(len) * kvh * d, 71);
  auto vc = random_vec(static_cast<size_t>(len) * kvh * d, 72);
  PagedData paged(kc, vc, len, kvh, d, 16, 73);
  std::vector<float> out(q.size()), lse(static_cast<size_t>(n_q) * heads);
  std::vector<double> ref_o, ref_l;
  ASSERT_TRUE(attention_prefill(q.data(), n_q, heads, paged.view, 0.3f, false, 0, out.data(), lse.data()).ok());
  ref_attention(q, n_q, heads, kc, vc, len, kvh, d, 0.3, false, 0, &ref_o, &ref_l);
  EXPECT_LT(max_err(out.data(), ref_o.data(), out.size()), kOutTol);
  EXPECT_LT(max_err(lse.data(), ref_l.data(), lse.size()), kLseTol);
  // q_offset = -10: the first 10 queries see no key -> o = 0, lse = -inf.
  ASSERT_TRUE(attention_prefill(q.data(), n_q, heads, paged.view, 0.3f, true, -10, out.data(), lse.data()).ok());
  ref_attention(q, n_q, heads, kc, vc, len, kvh, d, 0.3, true, -10, &ref_o, &ref_l);
  for (int i = 0; i < 10 * heads; ++i) EXPECT_EQ(lse[i], -std::numeric_limits<float>::infinity());
  EXPECT_LT(max_err(out.data(), ref_o.data(), out.size()), kOutTol);
  EXPECT_LT(max_err(lse.data() + 10 * heads, ref_l.data() + 10 * heads, lse.size() - 10 * heads), kLseTol);
}

TEST(Prefill, RejectsHeadsNotMultipleOfKvHeads) {
  PagedKv kv;
  kv.num_kv_heads = 3;
  kv.head_dim = 64;
  Status st = attention_prefill(nullptr, 1, 4, kv, 1.0f, true, 0, nullptr, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("num_kv_heads=3"), std::string::npos) << st.message();
}

// Decode: several sequences of different, block-unaligned lengths in one call.
class DecodeTest : public ::testing::TestWithParam<std::tuple<int, int, int>> {};  // group, d, splits

TEST_P(DecodeTest, BatchMatchesReference) {
  const auto [group, d, splits] = GetParam();
  const int kvh = 2, heads = kvh * group;
  const std::vector<int> lens = {7, 33, 129, 1000, 1};
  const std::vector<int> block_sizes = {16, 3, 1, 16, 64};
  std::vector<std::vector<float>> qs, kcs, vcs, outs, lses;
  std::vector<PagedData> pages;
  pages.reserve(lens.size());
  std::vector<DecodeItem> items;
  for (size_t s = 0; s < lens.size(); ++s) {
    const uint32_t seed = static_cast<uint32_t>(100 + s * 10 + group + d + splits);
    qs.push_back(random_vec(static_cast<size_t>(heads) * d, seed, -2.0f, 2.0f));
    kcs.push_back(random_vec(static_cast<size_t>(lens[s]) * kvh * d, seed + 1, -2.0f, 2.0f));
    vcs.push_back(random_vec(static_cast<size_t>(lens[s]) * kvh * d, seed + 2));
    pages.emplace_back(kcs.back(), vcs.back(), lens[s], kvh, d, block_sizes[s], seed + 3);
    outs.emplace_back(static_cast<size_t>(heads) * d);
    lses.emplace_back(heads);
  }
  for (size_t s = 0; s < lens.size(); ++s) items.push_back({qs[s].data(), pages[s].view, outs[s].data(), lses[s].data()});
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  ASSERT_TRUE(attention_decode(items, heads, scale, splits).ok());
  for (size_t s = 0; s < lens.size(); ++s) {
    std::vector<double> ref_o, ref_l;
    ref_attention(qs[s], 1, heads, kcs[s], vcs[s], lens[s], kvh, d, scale, false, 0, &ref_o, &ref_l);
    EXPECT_LT(max_err(outs[s].data(), ref_o.data(), ref_o.size()), kOutTol) << "seq " << s;
    EXPECT_LT(max_err(lses[s].data(), ref_l.data(), ref_l.size()), kLseTol) << "seq " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, DecodeTest,
                         ::testing::Values(std::tuple{1, 64, 1}, std::tuple{2, 48, 3}, std::tuple{4, 64, 0},
                                           std::tuple{4, 48, 7}, std::tuple{2, 64, 1}));

TEST(Decode, EmptySequenceGivesIdentityState) {
  const int heads = 2, d = 64;
  auto q = random_vec(heads * d, 5);
  std::vector<float> out(heads * d, 3.0f), lse(heads, 3.0f);
  std::vector<int32_t> table;
  DecodeItem it{q.data(), PagedKv{nullptr, nullptr, table.data(), 16, 1, d, 0}, out.data(), lse.data()};
  ASSERT_TRUE(attention_decode({&it, 1}, heads, 0.125f, 0).ok());
  for (float v : out) EXPECT_EQ(v, 0.0f);
  for (float l : lse) EXPECT_EQ(l, -std::numeric_limits<float>::infinity());
}

TEST(Decode, RejectsMixedKvShapes) {
  auto q = random_vec(4 * 64, 5);
  std::vector<float> out(4 * 64), lse(4);
  std::vector<int32_t> table(1, 0);
  auto k = random_vec(16 * 2 * 64, 6);
  DecodeItem a{q.data(), PagedKv{k.data(), k.data(), table.data(), 16, 2, 64, 5}, out.data(), lse.data()};
  DecodeItem b = a;
  b.kv.num_kv_heads = 1;
  std::vector<DecodeItem> items{a, b};
  Status st = attention_decode(items, 4, 0.125f, 1);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("item 1"), std::string::npos) << st.message();
}

// Attention over keys [0, L) == merge(attention over [0, a), attention over [a, L)).
TEST(Merge, TwoPartialAttentionsEqualFullAttention) {
  const int n_q = 33, kvh = 2, group = 2, heads = kvh * group, d = 48, len = 129, split = 50;
  const size_t tok = static_cast<size_t>(kvh) * d;
  auto q = random_vec(static_cast<size_t>(n_q) * heads * d, 80, -2.0f, 2.0f);
  auto kc = random_vec(len * tok, 81, -2.0f, 2.0f);
  auto vc = random_vec(len * tok, 82);
  std::vector<float> ka(kc.begin(), kc.begin() + split * tok), kb(kc.begin() + split * tok, kc.end());
  std::vector<float> va(vc.begin(), vc.begin() + split * tok), vb(vc.begin() + split * tok, vc.end());
  PagedData full(kc, vc, len, kvh, d, 16, 83), pa(ka, va, split, kvh, d, 3, 84), pb(kb, vb, len - split, kvh, d, 16, 85);
  const size_t no = q.size(), nl = static_cast<size_t>(n_q) * heads;
  std::vector<float> of(no), lf(nl), oa(no), la(nl), ob(no), lb(nl);
  // Causal with queries at positions len - n_q ..: part B is the same keys shifted by `split`.
  const int off = len - n_q;
  ASSERT_TRUE(attention_prefill(q.data(), n_q, heads, full.view, 0.2f, true, off, of.data(), lf.data()).ok());
  ASSERT_TRUE(attention_prefill(q.data(), n_q, heads, pa.view, 0.2f, true, off, oa.data(), la.data()).ok());
  ASSERT_TRUE(attention_prefill(q.data(), n_q, heads, pb.view, 0.2f, true, off - split, ob.data(), lb.data()).ok());
  merge_states(static_cast<int>(nl), d, oa.data(), la.data(), ob.data(), lb.data(), oa.data(), la.data());
  std::vector<double> ref_o(of.begin(), of.end()), ref_l(lf.begin(), lf.end());
  EXPECT_LT(max_err(oa.data(), ref_o.data(), no), 1e-5);
  EXPECT_LT(max_err(la.data(), ref_l.data(), nl), 1e-5);
}

}  // namespace
}  // namespace ragd::kernels
