// KvPool / BlockTable: allocation, ref counts, fork / fork_prefix with copy-on-write, truncate,
// read / write / append round trips on block-unaligned lengths, and all-or-nothing reservation.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "ragd/engine/kv_cache.h"

namespace ragd::engine {
namespace {

KvLayout layout(int bs) {
  KvLayout l;
  l.num_layers = 2;
  l.num_kv_heads = 2;
  l.head_dim = 3;
  l.block_size = bs;
  return l;
}

std::vector<float> rnd(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// Appends n tokens of random KV for all layers; returns what was written ([layers][n, tf] each).
std::pair<std::vector<float>, std::vector<float>> append_random(KvPool& pool, BlockTable& t, int n, uint32_t seed) {
  const size_t per = static_cast<size_t>(n) * pool.layout().token_floats() * pool.layout().num_layers;
  auto k = rnd(per, seed), v = rnd(per, seed + 1);
  EXPECT_TRUE(t.append(pool, n, k.data(), v.data()));
  return {k, v};
}

void expect_tokens(const KvPool& pool, const BlockTable& t, int layer, int t0, const std::vector<float>& k_all,
                   const std::vector<float>& v_all, int n_all, int src0, int n) {
  const size_t tf = pool.layout().token_floats();
  std::vector<float> k(n * tf), v(n * tf);
  t.read(pool, layer, t0, n, k.data(), v.data());
  for (size_t i = 0; i < n * tf; ++i) {
    ASSERT_EQ(k[i], k_all[layer * n_all * tf + src0 * tf + i]) << "layer " << layer << " float " << i;
    ASSERT_EQ(v[i], v_all[layer * n_all * tf + src0 * tf + i]);
  }
}

TEST(KvPool, RejectsBadLayout) {
  KvLayout l = layout(16);
  l.head_dim = 0;
  auto r = KvPool::create(l, 4);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("head_dim"), std::string::npos);
  EXPECT_FALSE(KvPool::create(layout(16), 0).ok());
}

TEST(KvPool, AllocateReleaseAndBytes) {
  auto pool = std::move(KvPool::create(layout(3), 5).value());
  EXPECT_EQ(pool->bytes(), 2u * 4 * 5 * 2 * (3 * 2 * 3));
  std::vector<int32_t> got;
  while (auto b = pool->allocate()) got.push_back(*b);
  EXPECT_EQ(got.size(), 5u);
  EXPECT_EQ(pool->free_blocks(), 0u);
  pool->retain(got[0]);
  pool->release(got[0]);
  EXPECT_EQ(pool->refcount(got[0]), 1);
  pool->release(got[0]);
  EXPECT_EQ(pool->free_blocks(), 1u);
  EXPECT_EQ(*pool->allocate(), got[0]);
}

class BlockTableTest : public ::testing::TestWithParam<int> {};

TEST_P(BlockTableTest, AppendReadRoundTripUnaligned) {
  const int bs = GetParam();
  auto pool = std::move(KvPool::create(layout(bs), 200).value());
  BlockTable t;
  auto [k1, v1] = append_random(*pool, t, 7, 1);
  auto [k2, v2] = append_random(*pool, t, 33, 2);
  EXPECT_EQ(t.num_tokens(), 40);
  EXPECT_EQ(static_cast<int>(t.blocks().size()), (40 + bs - 1) / bs);
  for (int l = 0; l < 2; ++l) {
    expect_tokens(*pool, t, l, 0, k1, v1, 7, 0, 7);
    expect_tokens(*pool, t, l, 7, k2, v2, 33, 0, 33);
  }
  t.release(*pool);
  EXPECT_EQ(pool->free_blocks(), 200u);
}

TEST_P(BlockTableTest, ForkPrefixCopyOnWriteKeepsBothSides) {
  const int bs = GetParam();
  auto pool = std::move(KvPool::create(layout(bs), 300).value());
  BlockTable a;
  auto [ka, va] = append_random(*pool, a, 33, 3);
  const size_t used_before = pool->used_blocks();
  BlockTable b = a.fork_prefix(*pool, 20);  // unaligned for bs 3 and 16
  EXPECT_EQ(pool->used_blocks(), used_before);  // shared, no copy yet
  EXPECT_EQ(pool->refcount(a.blocks()[0]), 2);
  auto [kb, vb] = append_random(*pool, b, 13, 4);  // writes after token 20: copies a shared partial block
  for (int l = 0; l < 2; ++l) {
    expect_tokens(*pool, a, l, 0, ka, va, 33, 0, 33);  // a unchanged
    expect_tokens(*pool, b, l, 0, ka, va, 33, 0, 20);  // b's prefix is a's
    expect_tokens(*pool, b, l, 20, kb, vb, 13, 0, 13);
  }
  BlockTable c = a.fork(*pool);
  EXPECT_EQ(c.num_tokens(), 33);
  auto [kc, vc] = append_random(*pool, c, 5, 5);
  for (int l = 0; l < 2; ++l) expect_tokens(*pool, a, l, 0, ka, va, 33, 0, 33);
  a.release(*pool);
  b.release(*pool);
  c.release(*pool);
  EXPECT_EQ(pool->free_blocks(), 300u);
}

TEST_P(BlockTableTest, TruncateReleasesBlocksAndRewrites) {
  const int bs = GetParam();
  auto pool = std::move(KvPool::create(layout(bs), 300).value());
  BlockTable a;
  auto [ka, va] = append_random(*pool, a, 40, 6);
  BlockTable b = a.fork(*pool);
  a.truncate(*pool, 10);
  EXPECT_EQ(a.num_tokens(), 10);
  EXPECT_EQ(static_cast<int>(a.blocks().size()), (10 + bs - 1) / bs);
  auto [kn, vn] = append_random(*pool, a, 9, 7);  // overwrites old tokens 10.. in a's copy only
  for (int l = 0; l < 2; ++l) {
    expect_tokens(*pool, a, l, 0, ka, va, 40, 0, 10);
    expect_tokens(*pool, a, l, 10, kn, vn, 9, 0, 9);
    expect_tokens(*pool, b, l, 0, ka, va, 40, 0, 40);
  }
  a.release(*pool);
  b.release(*pool);
  EXPECT_EQ(pool->free_blocks(), 300u);
}

INSTANTIATE_TEST_SUITE_P(BlockSizes, BlockTableTest, ::testing::Values(1, 3, 16, 64));

TEST(BlockTable, ReserveIsAllOrNothing) {
  auto pool = std::move(KvPool::create(layout(4), 3).value());
  BlockTable a;
  append_random(*pool, a, 6, 8);  // 2 blocks
  BlockTable b = a.fork(*pool);   // shares both; b's next write needs a copy of block 1
  EXPECT_EQ(b.blocks_needed(*pool, 2), 1);  // copy of the shared partial block (2 free slots in it)
  EXPECT_EQ(b.blocks_needed(*pool, 3), 2);  // + one new block
  const auto blocks_before = b.blocks();
  EXPECT_FALSE(b.reserve(*pool, 3));  // needs 2, has 1 free
  EXPECT_EQ(b.blocks(), blocks_before);
  EXPECT_EQ(pool->free_blocks(), 1u);
  EXPECT_TRUE(b.reserve(*pool, 2));
  EXPECT_EQ(pool->free_blocks(), 0u);
  EXPECT_NE(b.blocks()[1], a.blocks()[1]);
  a.release(*pool);
  b.release(*pool);
}

}  // namespace
}  // namespace ragd::engine
