#include <gtest/gtest.h>

#include <random>

#include "ragd/pipelines/hbm_cache.h"

namespace ragd::pipelines {
namespace {

using engine::BlockTable;
using engine::KvLayout;
using engine::KvPool;

std::unique_ptr<KvPool> make_pool(size_t blocks) {
  KvLayout l;
  l.num_layers = 2;
  l.num_kv_heads = 2;
  l.head_dim = 4;
  l.block_size = 4;
  return std::move(KvPool::create(l, blocks)).value();
}

// Fills a table with n tokens of seeded KV whose value encodes (token, layer).
BlockTable filled(KvPool& pool, int n, int seed) {
  BlockTable t;
  const size_t tf = pool.layout().token_floats();
  std::vector<float> k(2 * n * tf), v(2 * n * tf);
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<float>(seed * 1000 + i), v[i] = -k[i];
  EXPECT_TRUE(t.append(pool, n, k.data(), v.data()));
  return t;
}

Hash128 key(int i) { return Hash128{static_cast<uint64_t>(i) * 7919 + 1, static_cast<uint64_t>(i)}; }

TEST(HbmCache, PathMatchIsLongestCachedPrefixWithExactKv) {
  auto pool = make_pool(64);
  HbmCache cache(*pool);
  BlockTable seq = filled(*pool, 33, 1);
  // Path of three nodes ending at tokens 7, 20, 33.
  cache.insert_path(key(0), {}, true, seq, 7);
  cache.insert_path(key(1), key(0), false, seq, 20);
  const Hash128 path[] = {key(0), key(1), key(2)};
  const BlockTable* t = nullptr;
  EXPECT_EQ(cache.match_path(path, &t), 2);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->num_tokens(), 20);
  // Same KV as the source for every token.
  std::vector<float> a(20 * 8), b(20 * 8), c(20 * 8), d(20 * 8);
  for (int l = 0; l < 2; ++l) {
    seq.read(*pool, l, 0, 20, a.data(), b.data());
    t->read(*pool, l, 0, 20, c.data(), d.data());
    EXPECT_EQ(a, c);
    EXPECT_EQ(b, d);
  }
  const Hash128 other[] = {key(5), key(0)};
  EXPECT_EQ(cache.match_path(other, &t), 0);
  EXPECT_EQ(t, nullptr);
  // A child whose parent is not cached is not inserted (the tree stays prefix-closed).
  cache.insert_path(key(9), key(8), false, seq, 33);
  EXPECT_FALSE(cache.contains_path(key(9)));
  seq.release(*pool);
  cache.clear();
  EXPECT_EQ(pool->free_blocks(), pool->num_blocks());
}

TEST(HbmCache, EvictsLeavesFirstAndReturnsBlocks) {
  auto pool = make_pool(64);
  HbmCache cache(*pool);
  {
    BlockTable seq = filled(*pool, 29, 2);
    cache.insert_path(key(0), {}, true, seq, 9);
    cache.insert_path(key(1), key(0), false, seq, 29);
    seq.release(*pool);
  }
  const size_t used = pool->used_blocks();
  EXPECT_GT(used, 0u);
  // Touch the root last: it is still kept while its child is cached.
  const Hash128 root[] = {key(0)};
  const BlockTable* t = nullptr;
  EXPECT_EQ(cache.match_path(root, &t), 1);
  ASSERT_TRUE(cache.evict_one());
  EXPECT_TRUE(cache.contains_path(key(0)));
  EXPECT_FALSE(cache.contains_path(key(1)));
  EXPECT_LT(pool->used_blocks(), used);
  ASSERT_TRUE(cache.evict_one());
  EXPECT_FALSE(cache.evict_one());
  EXPECT_EQ(pool->free_blocks(), pool->num_blocks());
  EXPECT_EQ(cache.stats().evictions, 2);
}

TEST(HbmCache, PrefixMatchFindsLongestCommonPrefix) {
  auto pool = make_pool(64);
  HbmCache cache(*pool, /*max_prefix_entries=*/2);
  std::vector<int32_t> a = {5, 6, 7, 8, 9, 10, 11}, b = {5, 6, 7, 1, 2};
  BlockTable ta = filled(*pool, 7, 3), tb = filled(*pool, 5, 4);
  cache.insert_prefix(a, ta);
  cache.insert_prefix(b, tb);
  std::vector<int32_t> q = {5, 6, 7, 8, 9, 0};
  const BlockTable* t = nullptr;
  EXPECT_EQ(cache.match_prefix(q, &t), 5);
  ASSERT_NE(t, nullptr);
  std::vector<int32_t> none = {1, 2, 3};
  EXPECT_EQ(cache.match_prefix(none, &t), 0);
  // A third entry evicts the least recently used one (b).
  std::vector<int32_t> c = {9, 9, 9};
  BlockTable tc = filled(*pool, 3, 5);
  cache.insert_prefix(c, tc);
  EXPECT_EQ(cache.stats().prefix_entries, 2u);
  std::vector<int32_t> qb = {5, 6, 7, 1, 2};
  EXPECT_EQ(cache.match_prefix(qb, &t), 3);  // only a's first three tokens remain
  ta.release(*pool);
  tb.release(*pool);
  tc.release(*pool);
  cache.clear();
  EXPECT_EQ(pool->free_blocks(), pool->num_blocks());
}

}  // namespace
}  // namespace ragd::pipelines
