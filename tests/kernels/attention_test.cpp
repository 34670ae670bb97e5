// Paged prefill and decode attention (O and LSE) against a double reference on odd sizes,
// block-unaligned lengths, GQA groups 1/2/4 and head_dim 64/48; split-KV decode; merging two
// partial attentions equals the full attention.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
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
using testing::ref_attention_positions;

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
                                           PrefillCase{129, 200, 2, 64, 64}, PrefillCase{1, 33, 4, 64, 16},
                                           PrefillCase{300, 0, 2, 128, 16}, PrefillCase{70, 5, 1, 32, 3},
                                           PrefillCase{41, 600, 3, 16, 16}, PrefillCase{257, 0, 1, 96, 7}));

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
                                           std::tuple{4, 48, 7}, std::tuple{2, 64, 1}, std::tuple{2, 128, 0},
                                           std::tuple{3, 32, 2}, std::tuple{1, 16, 1}, std::tuple{2, 96, 3}));


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

// ---- explicit positions ------------------------------------------------------------------------

// Max error over the rows whose lse is finite, and every row with no visible key is exactly (0, -inf).
void expect_matches(const std::vector<float>& out, const std::vector<float>& lse, const std::vector<double>& ref_o,
                    const std::vector<double>& ref_l, int d, const std::string& what) {
  int empty = 0;
  for (size_t r = 0; r < ref_l.size(); ++r) {
    if (std::isinf(ref_l[r])) {
      ++empty;
      EXPECT_EQ(lse[r], -std::numeric_limits<float>::infinity()) << what << " row " << r;
      for (int c = 0; c < d; ++c) EXPECT_EQ(out[r * d + c], 0.0f) << what << " row " << r;
    } else {
      EXPECT_LT(std::fabs(lse[r] - ref_l[r]) / (1.0 + std::fabs(ref_l[r])), kLseTol) << what << " row " << r;
      EXPECT_LT(max_err(out.data() + r * d, ref_o.data() + r * d, d), kOutTol) << what << " row " << r;
    }
  }
  (void)empty;
}

// (n_q, kv_len, group, block_size, with key positions)
using PosCase = std::tuple<int, int, int, int, bool>;
class PrefillPositionsTest : public ::testing::TestWithParam<PosCase> {};

// Queries at shuffled positions (some before the first key, some past the last) over contiguous
// keys (per-query key limits) or over keys with shuffled positions and holes (per-key mask; two
// key chunks when kv_len > 256).
TEST_P(PrefillPositionsTest, MatchesReference) {
  const auto [n_q, len, group, bs, with_key_pos] = GetParam();
  // head_dim 64 takes the AVX-512 tiles where the CPU has them, 48 the sgemm path.
  const int kvh = 2, heads = kvh * group, d = with_key_pos ? 64 : 48;
  const uint32_t seed = static_cast<uint32_t>(n_q * 17 + len * 5 + group + bs + (with_key_pos ? 1000 : 0));
  std::mt19937 rng(seed);
  auto q = random_vec(static_cast<size_t>(n_q) * heads * d, seed, -2.0f, 2.0f);
  auto kc = random_vec(static_cast<size_t>(len) * kvh * d, seed + 1, -2.0f, 2.0f);
  auto vc = random_vec(static_cast<size_t>(len) * kvh * d, seed + 2);
  PagedData paged(kc, vc, len, kvh, d, bs, seed + 3);
  std::vector<int32_t> key_pos;
  if (with_key_pos) {  // a permutation of 0..len-1 with every 7th slot a hole
    key_pos.resize(len);
    std::iota(key_pos.begin(), key_pos.end(), 0);
    std::shuffle(key_pos.begin(), key_pos.end(), rng);
    for (int j = 3; j < len; j += 7) key_pos[j] = kNoPosition;
    paged.view.key_pos = key_pos.data();
  }
  std::vector<int32_t> q_pos(n_q);
  std::uniform_int_distribution<int32_t> pos(0, len + 5);
  for (auto& p : q_pos) p = pos(rng);
  q_pos[0] = 0;
  if (n_q > 1) q_pos[1] = len + 40;  // sees every stored key
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> out(q.size()), lse(static_cast<size_t>(n_q) * heads);
  ASSERT_TRUE(
      attention_prefill_positions(q.data(), n_q, heads, paged.view, scale, q_pos.data(), out.data(), lse.data()).ok());
  std::vector<double> ref_o, ref_l;
  ref_attention_positions(q, n_q, heads, kc, vc, len, kvh, d, scale, q_pos, key_pos, &ref_o, &ref_l);
  expect_matches(out, lse, ref_o, ref_l, d, "prefill");
}

INSTANTIATE_TEST_SUITE_P(Shapes, PrefillPositionsTest,
                         ::testing::Values(PosCase{7, 33, 1, 16, false}, PosCase{33, 129, 2, 3, false},
                                           PosCase{129, 300, 4, 16, false}, PosCase{7, 33, 1, 16, true},
                                           PosCase{33, 129, 2, 3, true}, PosCase{129, 300, 4, 16, true},
                                           PosCase{1, 7, 2, 1, true}));

// Queries in position order, as an EPIC step lays them out (16 repair rows at the start of each of
// four documents, then the question): the rows that see nothing of a later key chunk skip it. Over
// contiguous keys and over keys with explicit positions and holes; AVX-512 tiles (d 64) and sgemm
// (d 48); odd tile sizes (GQA group 3).
TEST(PrefillPositions, SortedRowsSkipKeyChunksTheyCannotSee) {
  const int kvh = 2, group = 3, heads = kvh * group, len = 901;
  std::vector<int32_t> q_pos;
  for (int start : {45, 255, 466, 677})
    for (int i = 0; i < 16; ++i) q_pos.push_back(start + i);
  for (int p = 870; p < len; ++p) q_pos.push_back(p);
  const int n_q = static_cast<int>(q_pos.size());
  for (const int d : {64, 48}) {
    for (const bool with_key_pos : {false, true}) {
      const uint32_t seed = static_cast<uint32_t>(500 + d + (with_key_pos ? 1 : 0));
      auto q = random_vec(static_cast<size_t>(n_q) * heads * d, seed, -2.0f, 2.0f);
      auto kc = random_vec(static_cast<size_t>(len) * kvh * d, seed + 1, -2.0f, 2.0f);
      auto vc = random_vec(static_cast<size_t>(len) * kvh * d, seed + 2);
      PagedData paged(kc, vc, len, kvh, d, 16, seed + 3);
      std::vector<int32_t> key_pos;
      if (with_key_pos) {  // slot order, every 11th slot a hole
        key_pos.resize(len);
        std::iota(key_pos.begin(), key_pos.end(), 0);
        for (int j = 5; j < len; j += 11) key_pos[j] = kNoPosition;
        paged.view.key_pos = key_pos.data();
      }
      const float scale = 1.0f / std::sqrt(static_cast<float>(d));
      std::vector<float> out(q.size()), lse(static_cast<size_t>(n_q) * heads);
      ASSERT_TRUE(attention_prefill_positions(q.data(), n_q, heads, paged.view, scale, q_pos.data(), out.data(),
                                              lse.data()).ok());
      std::vector<double> ref_o, ref_l;
      ref_attention_positions(q, n_q, heads, kc, vc, len, kvh, d, scale, q_pos, key_pos, &ref_o, &ref_l);
      expect_matches(out, lse, ref_o, ref_l, d, "sorted d=" + std::to_string(d) + (with_key_pos ? " key_pos" : ""));
    }
  }
}

// The positions form with q_pos = i + q_offset is the q_offset form (same path, same bits).
TEST(PrefillPositions, ContiguousPositionsEqualQOffsetBitwise) {
  const int n_q = 33, kvh = 2, heads = 4, d = 64, off = 70, len = off + n_q;
  auto q = random_vec(static_cast<size_t>(n_q) * heads * d, 90, -2.0f, 2.0f);
  auto kc = random_vec(static_cast<size_t>(len) * kvh * d, 91, -2.0f, 2.0f);
  auto vc = random_vec(static_cast<size_t>(len) * kvh * d, 92);
  PagedData paged(kc, vc, len, kvh, d, 16, 93);
  std::vector<int32_t> q_pos(n_q);
  std::iota(q_pos.begin(), q_pos.end(), off);
  std::vector<float> oa(q.size()), la(static_cast<size_t>(n_q) * heads), ob(oa.size()), lb(la.size());
  ASSERT_TRUE(attention_prefill(q.data(), n_q, heads, paged.view, 0.125f, true, off, oa.data(), la.data()).ok());
  ASSERT_TRUE(attention_prefill_positions(q.data(), n_q, heads, paged.view, 0.125f, q_pos.data(), ob.data(), lb.data()).ok());
  EXPECT_EQ(oa, ob);
  EXPECT_EQ(la, lb);
  // Identity key positions given explicitly: the masked path, same values within rounding.
  std::vector<int32_t> key_pos(len);
  std::iota(key_pos.begin(), key_pos.end(), 0);
  paged.view.key_pos = key_pos.data();
  ASSERT_TRUE(attention_prefill_positions(q.data(), n_q, heads, paged.view, 0.125f, q_pos.data(), ob.data(), lb.data()).ok());
  std::vector<double> ref_o(oa.begin(), oa.end()), ref_l(la.begin(), la.end());
  EXPECT_LT(max_err(ob.data(), ref_o.data(), ob.size()), 1e-6);
  EXPECT_LT(max_err(lb.data(), ref_l.data(), lb.size()), 1e-6);
}

TEST(PrefillPositions, RejectsBadPositions) {
  auto q = random_vec(2 * 64, 5);
  std::vector<float> out(2 * 64), lse(2);
  std::vector<int32_t> table(1, 0);
  auto k = random_vec(16 * 64, 6);
  PagedKv kv{k.data(), k.data(), table.data(), 16, 1, 64, 5};
  std::vector<int32_t> q_pos{-1};
  Status st = attention_prefill_positions(q.data(), 1, 2, kv, 0.125f, q_pos.data(), out.data(), lse.data());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("q_pos[0]"), std::string::npos) << st.message();
  st = attention_prefill_positions(q.data(), 1, 2, kv, 0.125f, nullptr, out.data(), lse.data());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
}

// Decode items with a query position: without key positions it clips the key range, with them it
// masks (holes, later positions); an item that sees nothing gets the identity state; with splits.
TEST(DecodePositions, MatchesReference) {
  const int kvh = 2, group = 2, heads = kvh * group, d = 48;
  const std::vector<int> lens = {7, 33, 129, 600, 33};
  const std::vector<int> block_sizes = {16, 3, 1, 16, 64};
  const std::vector<int32_t> q_positions = {3, 40, 60, 599, 0};
  const std::vector<bool> with_key_pos = {false, true, true, true, true};
  for (int splits : {1, 3, 0}) {
    std::vector<std::vector<float>> qs, kcs, vcs, outs, lses;
    std::vector<std::vector<int32_t>> kps;
    std::vector<PagedData> pages;
    pages.reserve(lens.size());
    std::vector<DecodeItem> items;
    for (size_t s = 0; s < lens.size(); ++s) {
      const uint32_t seed = static_cast<uint32_t>(500 + s * 10 + splits);
      std::mt19937 rng(seed);
      qs.push_back(random_vec(static_cast<size_t>(heads) * d, seed, -2.0f, 2.0f));
      kcs.push_back(random_vec(static_cast<size_t>(lens[s]) * kvh * d, seed + 1, -2.0f, 2.0f));
      vcs.push_back(random_vec(static_cast<size_t>(lens[s]) * kvh * d, seed + 2));
      pages.emplace_back(kcs.back(), vcs.back(), lens[s], kvh, d, block_sizes[s], seed + 3);
      std::vector<int32_t> kp;
      if (with_key_pos[s]) {  // zigzag-like: shuffled positions, every 5th slot a hole
        kp.resize(lens[s]);
        std::iota(kp.begin(), kp.end(), 0);
        std::shuffle(kp.begin(), kp.end(), rng);
        for (int j = 2; j < lens[s]; j += 5) kp[j] = kNoPosition;
        if (s == 4) std::fill(kp.begin(), kp.end(), 5);  // q_pos 0 sees nothing
      }
      kps.push_back(std::move(kp));
      outs.emplace_back(static_cast<size_t>(heads) * d);
      lses.emplace_back(heads);
    }
    for (size_t s = 0; s < lens.size(); ++s) {
      DecodeItem it{qs[s].data(), pages[s].view, outs[s].data(), lses[s].data(), q_positions[s]};
      if (!kps[s].empty()) it.kv.key_pos = kps[s].data();
      items.push_back(it);
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    ASSERT_TRUE(attention_decode(items, heads, scale, splits).ok());
    for (size_t s = 0; s < lens.size(); ++s) {
      std::vector<double> ref_o, ref_l;
      ref_attention_positions(qs[s], 1, heads, kcs[s], vcs[s], lens[s], kvh, d, scale, {q_positions[s]}, kps[s],
                              &ref_o, &ref_l);
      expect_matches(outs[s], lses[s], ref_o, ref_l, d, "decode seq " + std::to_string(s) + " splits " +
                                                            std::to_string(splits));
    }
  }
}

// Decode over keys with shuffled positions and holes (every 7th slot), queries at positions that
// see none, some or all of them; head dims of the vectorised kernel (64, 128) and of the portable
// one (48); lengths across the 16-key chunks and pages of 3 and 16 slots.
class DecodePositionsTest : public ::testing::TestWithParam<std::tuple<int, int, int>> {};  // d, len, block

TEST_P(DecodePositionsTest, MatchesReference) {
  const auto [d, len, bs] = GetParam();
  const int kvh = 2, group = 2, heads = kvh * group;
  const uint32_t seed = static_cast<uint32_t>(d * 31 + len * 7 + bs);
  std::mt19937 rng(seed);
  auto kc = random_vec(static_cast<size_t>(len) * kvh * d, seed + 1, -2.0f, 2.0f);
  auto vc = random_vec(static_cast<size_t>(len) * kvh * d, seed + 2);
  PagedData paged(kc, vc, len, kvh, d, bs, seed + 3);
  std::vector<int32_t> key_pos(len);
  std::iota(key_pos.begin(), key_pos.end(), 0);
  std::shuffle(key_pos.begin(), key_pos.end(), rng);
  for (int j = 3; j < len; j += 7) key_pos[j] = kNoPosition;
  paged.view.key_pos = key_pos.data();
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (int32_t q_pos : {-1, 0, len / 3, len - 1, len + 9}) {
    if (q_pos < 0) q_pos = 0;
    auto q = random_vec(static_cast<size_t>(heads) * d, seed + 4 + q_pos, -2.0f, 2.0f);
    std::vector<float> out(q.size()), lse(heads);
    DecodeItem it{q.data(), paged.view, out.data(), lse.data()};
    it.q_pos = q_pos;
    ASSERT_TRUE(attention_decode({&it, 1}, heads, scale, 0).ok());
    std::vector<double> ref_o, ref_l;
    ref_attention_positions(q, 1, heads, kc, vc, len, kvh, d, scale, {q_pos}, key_pos, &ref_o, &ref_l);
    expect_matches(out, lse, ref_o, ref_l, d, "decode");
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, DecodePositionsTest,
                         ::testing::Values(std::tuple{64, 45, 16}, std::tuple{64, 300, 3}, std::tuple{128, 33, 16},
                                           std::tuple{48, 45, 3}, std::tuple{64, 17, 1}));

}  // namespace
}  // namespace ragd::kernels
