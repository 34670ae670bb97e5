// The engine pool as the knowledge tree's HBM tier (pool mode): shared blocks, the pool/DRAM/SSD
// match split, eviction by the store's policy under pool pressure (PGDSF vs LRU), swap out once,
// detach at shutdown, and write-behind to SSD surviving a reopen.
#include <gtest/gtest.h>

#include "kv_test_util.h"
#include "ragd/kvstore/engine_io.h"
#include "ragd/kvstore/kv_store.h"

namespace ragd::kvstore {
namespace {

using engine::BlockTable;
using engine::KvLayout;
using engine::KvPool;
using testing::dk;
using testing::TempDir;

KvLayout layout() {
  KvLayout l;
  l.num_layers = 2;
  l.num_kv_heads = 2;
  l.head_dim = 4;
  l.block_size = 4;
  return l;
}

KvFormat format_of(const KvLayout& l) { return KvFormat::from_layout(l, Hash128{0xfeed, 0xbeef}); }

std::unique_ptr<KvPool> make_pool(size_t blocks) { return std::move(KvPool::create(layout(), blocks)).value(); }

// A sequence of n tokens whose KV encodes (seed, token, layer, element): never zero, all distinct.
BlockTable filled(KvPool& pool, int n, int seed) {
  BlockTable t;
  const size_t per = static_cast<size_t>(n) * pool.layout().token_floats();
  std::vector<float> k(per * pool.layout().num_layers), v(k.size());
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<float>(seed * 100000 + i + 1), v[i] = -k[i];
  EXPECT_TRUE(t.append(pool, n, k.data(), v.data()));
  return t;
}

std::unique_ptr<KvStore> open_store(KvPool* pool, const std::string& eviction = "pgdsf", const std::string& ssd = "",
                                    uint64_t dram = 64ull << 20) {
  Options o;
  o.pool = pool;
  o.hbm_bytes = pool->bytes();
  o.dram_bytes = dram;
  o.ssd_dir = ssd;
  o.eviction = *parse_eviction_policy(eviction);
  auto r = KvStore::open(o, format_of(pool->layout()));
  RAGD_CHECK(r.ok()) << r.status().to_string();
  return std::move(r).value();
}

void expect_same_kv(const KvPool& pool, const BlockTable& a, const BlockTable& b, int t0, int n) {
  auto x = gather_kv(pool, a, t0, n);
  auto y = gather_kv(pool, b, t0, n);
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_EQ(x->k, y->k);
  EXPECT_EQ(x->v, y->v);
}

TEST(PoolTier, NodesShareBlocksAndMatchSplitsPoolFromLowerTiers) {
  auto pool = make_pool(64);
  auto store = open_store(pool.get());
  BlockTable seq = filled(*pool, 33, 1);
  const Hash128 d0 = dk(1), d1 = dk(2), d2 = dk(3);
  ASSERT_TRUE(store->insert_pool({}, d0, seq, 0, 7).ok());
  const Hash128 p1[] = {d0};
  auto r = store->insert_pool(p1, d1, seq, 7, 20);
  store->wait_copies();  // the DRAM copies are made off the caller's thread
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tier, Tier::kHbm);
  const Hash128 path[] = {d0, d1, d2};
  MatchResult m = store->match(path);
  ASSERT_EQ(m.nodes.size(), 2u);
  EXPECT_EQ(m.pool_nodes, 2u);
  EXPECT_EQ(m.pool_tokens, 20);
  EXPECT_EQ(m.lower_tokens(), 0);
  EXPECT_TRUE(m.nodes[1].tiers & tier_bit(Tier::kDram));  // write-through copy
  // The pool copy is the sequence's KV, shared: no new blocks for the first 16 tokens.
  const size_t used = pool->used_blocks();
  // The path's identities chained once are the keys the per-node inserts gave.
  const std::vector<SegmentIdentity> ids = store->path_identities(path);
  ASSERT_EQ(ids.size(), 3u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(ids[i].key, m.nodes[i].key) << "node " << i;
    EXPECT_EQ(ids[i].depth, i);
  }
  EXPECT_EQ(ids[1].parent_key, ids[0].key);
  EXPECT_EQ(ids[2].parent_key, ids[1].key);
  BlockTable hit = store->fork_pool(std::span<const PathNode>(m.nodes).first(2));
  ASSERT_EQ(hit.num_tokens(), 20);
  EXPECT_EQ(pool->used_blocks(), used);
  expect_same_kv(*pool, seq, hit, 0, 20);
  // A child whose parent is not cached is not inserted: the tree stays prefix-closed.
  const Hash128 orphan_parent[] = {dk(9)};
  auto o = store->insert_pool(orphan_parent, dk(10), seq, 20, 33);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->outcome, KnowledgeTree::InsertOutcome::kParentMissing);
  EXPECT_TRUE(store->check_invariants().ok());
  hit.release(*pool);
  seq.release(*pool);
  m.pin.release();
  store->detach_pool();
  EXPECT_EQ(pool->free_blocks(), pool->num_blocks());
  // Detached, the nodes are still in DRAM.
  MatchResult after = store->match(path);
  EXPECT_EQ(after.pool_nodes, 0u);
  EXPECT_EQ(after.dram_tokens, 20);
  EXPECT_TRUE(store->check_invariants().ok());
}

TEST(PoolTier, PoolPressureEvictsLeavesFirstAndSwapsOutOnce) {
  auto pool = make_pool(64);
  auto store = open_store(pool.get());
  {
    BlockTable seq = filled(*pool, 29, 2);
    ASSERT_TRUE(store->insert_pool({}, dk(1), seq, 0, 9).ok());
    const Hash128 p[] = {dk(1)};
    ASSERT_TRUE(store->insert_pool(p, dk(2), seq, 9, 29).ok());
    store->wait_copies();
    seq.release(*pool);
  }
  // The root is touched last, but it is kept while its child is in the pool.
  const Hash128 root[] = {dk(1)};
  (void)store->match(root, {}, /*pin=*/false);
  const size_t free0 = pool->free_blocks();
  EXPECT_TRUE(store->reclaim_pool([&] { return pool->free_blocks() > free0; }));
  const Hash128 path[] = {dk(1), dk(2)};
  MatchResult m = store->match(path, {}, /*pin=*/false);
  ASSERT_EQ(m.nodes.size(), 2u);
  EXPECT_EQ(m.pool_nodes, 1u);    // the leaf left the pool
  EXPECT_EQ(m.dram_tokens, 20);   // ... and is still in DRAM
  Stats s = store->stats();
  EXPECT_EQ(s.tiers[0].evictions, 1u);
  EXPECT_EQ(s.tiers[1].demotions, 0u);  // it had a DRAM copy: nothing was rewritten
  // Everything can go; then nothing more is evictable.
  EXPECT_TRUE(store->reclaim_pool([&] { return pool->free_blocks() == pool->num_blocks(); }));
  EXPECT_FALSE(store->reclaim_pool([] { return false; }));
  EXPECT_TRUE(store->check_invariants().ok());
}

// PGDSF, not recency, decides which pool copy goes: a frequently hit, expensive node survives while
// a cheap one touched more recently is evicted. Under LRU the outcome is the opposite.
class PoolEviction : public ::testing::TestWithParam<const char*> {};

TEST_P(PoolEviction, FrequentExpensiveNodeVersusRecentCheapNode) {
  const std::string policy = GetParam();
  auto pool = make_pool(64);
  auto store = open_store(pool.get(), policy);
  const Hash128 a = dk(11), b = dk(12);
  {
    BlockTable sa = filled(*pool, 24, 3);  // expensive: 24 tokens of prefill
    ASSERT_TRUE(store->insert_pool({}, a, sa, 0, 24).ok());
    sa.release(*pool);
  }
  for (int i = 0; i < 4; ++i) (void)store->match(std::span<const Hash128>(&a, 1), {}, /*pin=*/false);  // hit often
  {
    BlockTable sb = filled(*pool, 4, 4);  // cheap: 4 tokens
    ASSERT_TRUE(store->insert_pool({}, b, sb, 0, 4).ok());
    store->wait_copies();
    sb.release(*pool);
  }
  (void)store->match(std::span<const Hash128>(&b, 1), {}, /*pin=*/false);  // the most recent access
  const size_t free0 = pool->free_blocks();
  ASSERT_TRUE(store->reclaim_pool([&] { return pool->free_blocks() > free0; }));
  const bool a_in_pool = store->match(std::span<const Hash128>(&a, 1), {}, false, false).pool_nodes == 1;
  const bool b_in_pool = store->match(std::span<const Hash128>(&b, 1), {}, false, false).pool_nodes == 1;
  if (policy == "lru") {
    EXPECT_FALSE(a_in_pool);
    EXPECT_TRUE(b_in_pool);
  } else {
    EXPECT_TRUE(a_in_pool) << policy << " evicted the frequent, expensive node";
    EXPECT_FALSE(b_in_pool) << policy << " kept the cheap node";
  }
  EXPECT_TRUE(store->check_invariants().ok());
  store->detach_pool();
}

INSTANTIATE_TEST_SUITE_P(Policies, PoolEviction, ::testing::Values("pgdsf", "lru"));

TEST(PoolTier, WriteBehindSurvivesReopenAndSsdCopiesAreNotRewritten) {
  TempDir dir;
  const std::string ssd = dir.sub("ssd");
  auto pool = make_pool(64);
  BlockTable seq = filled(*pool, 30, 5);
  std::vector<float> want_k, want_v;
  {
    auto r = gather_kv(*pool, seq, 10, 20);
    ASSERT_TRUE(r.ok());
    want_k = r->k;
    want_v = r->v;
  }
  const Hash128 path[] = {dk(21), dk(22)};
  {
    // DRAM on: the DRAM copy is written behind to SSD.
    auto store = open_store(pool.get(), "pgdsf", ssd);
    ASSERT_TRUE(store->insert_pool({}, path[0], seq, 0, 10).ok());
    ASSERT_TRUE(store->insert_pool(std::span<const Hash128>(path, 1), path[1], seq, 10, 30).ok());
    store->wait_copies();
    ASSERT_TRUE(store->flush().ok());
    Stats s = store->stats();
    EXPECT_EQ(s.tiers[2].nodes, 2u);
    EXPECT_EQ(s.tiers[2].written_behind, 2u);
    store->detach_pool();
    store->close();
  }
  {
    // Reopened on the same directory with an empty pool: both nodes are found on SSD.
    auto store = open_store(pool.get(), "pgdsf", ssd, /*dram=*/0);
    MatchResult m = store->match(path);
    ASSERT_EQ(m.nodes.size(), 2u);
    EXPECT_EQ(m.pool_nodes, 0u);
    EXPECT_EQ(m.ssd_tokens, 30);
    auto h = store->load(m.nodes);
    h->wait();
    ASSERT_TRUE(h->status().ok()) << h->status().to_string();
    EXPECT_EQ(h->source(1), Tier::kSsd);
    auto seg = h->segment(1);
    ASSERT_EQ(seg->num_tokens(), 20);
    EXPECT_EQ(seg->header().first_position, 10);
    EXPECT_EQ(std::vector<float>(seg->k_all(), seg->k_all() + want_k.size()), want_k);
    EXPECT_EQ(std::vector<float>(seg->v_all(), seg->v_all() + want_v.size()), want_v);
    // Without DRAM, a pool copy that leaves the pool is demoted to SSD only when it is not there.
    BlockTable t;
    ASSERT_TRUE(append_segment(*h->segment(0), *pool, t).ok());
    ASSERT_TRUE(append_segment(*seg, *pool, t).ok());
    ASSERT_TRUE(store->insert_pool({}, path[0], t, 0, 10).ok());  // exists: back in the pool
    ASSERT_TRUE(store->insert_pool(std::span<const Hash128>(path, 1), path[1], t, 10, 30).ok());
    store->wait_copies();
    EXPECT_EQ(store->match(path, {}, false, false).pool_nodes, 2u);
    t.release(*pool);
    m.pin.release();
    store->detach_pool();
    Stats s = store->stats();
    EXPECT_EQ(s.tiers[2].demotions, 0u);  // already on SSD: swap out once
    EXPECT_TRUE(store->check_invariants().ok());
  }
  seq.release(*pool);
  EXPECT_EQ(pool->free_blocks(), pool->num_blocks());
}

// A pool copy whose DRAM copy was evicted is exported (gathered from its blocks) when it leaves
// the pool: the demoted segment holds exactly the pool's KV at the node's positions.
TEST(PoolTier, PoolOnlyNodeIsExportedToDramWhenItLeaves) {
  auto pool = make_pool(64);
  KvFormat f = format_of(pool->layout());
  const uint64_t one_node = segment_header_size(f.num_layers) + f.bytes_per_token() * 12;
  auto store = open_store(pool.get(), "lru", "", /*dram=*/one_node);
  BlockTable sa = filled(*pool, 12, 6), sb = filled(*pool, 12, 7);
  const Hash128 a = dk(31), b = dk(32);
  ASSERT_TRUE(store->insert_pool({}, a, sa, 0, 12).ok());
  ASSERT_TRUE(store->insert_pool({}, b, sb, 0, 12).ok());  // DRAM holds one node: a's copy goes
  store->wait_copies();
  EXPECT_EQ(store->match(std::span<const Hash128>(&a, 1), {}, false, false).nodes[0].tiers, tier_bit(Tier::kHbm));
  auto want = gather_kv(*pool, sa, 0, 12);
  ASSERT_TRUE(want.ok());
  sa.release(*pool);
  sb.release(*pool);
  const size_t free0 = pool->free_blocks();
  // LRU: a goes first; it is only in the pool, so it is exported to DRAM (b's DRAM copy makes room).
  ASSERT_TRUE(store->reclaim_pool([&] { return pool->free_blocks() > free0; }));
  MatchResult m = store->match(std::span<const Hash128>(&a, 1));
  ASSERT_EQ(m.nodes.size(), 1u);
  EXPECT_EQ(m.pool_nodes, 0u);
  EXPECT_EQ(m.dram_tokens, 12);
  auto h = store->load(m.nodes);
  h->wait();
  ASSERT_TRUE(h->status().ok()) << h->status().to_string();
  auto seg = h->segment(0);
  EXPECT_EQ(std::vector<float>(seg->k_all(), seg->k_all() + want->k.size()), want->k);
  EXPECT_EQ(std::vector<float>(seg->v_all(), seg->v_all() + want->v.size()), want->v);
  EXPECT_EQ(store->stats().tiers[1].demotions, 1u) << store->stats_json();
  EXPECT_TRUE(store->check_invariants().ok());
  m.pin.release();
  store->detach_pool();
  EXPECT_EQ(pool->free_blocks(), pool->num_blocks());
}

// A bf16 pool's KV goes to the lower tiers as bf16 segments (half of f32's bytes) and comes back
// bit for bit: bf16 -> segment -> bf16 loses nothing, from DRAM and from SSD.
TEST(PoolTier, Bf16PoolKvRoundTripsExactlyThroughBf16Segments) {
  TempDir dir;
  KvLayout l = layout();
  l.dtype = kernels::KvDtype::kBF16;
  auto pool = std::move(KvPool::create(l, 64)).value();
  const KvFormat f = format_of(l);
  EXPECT_EQ(f.dtype, KvDtype::kBF16);
  EXPECT_EQ(f.bytes_per_token() * 2, format_of(layout()).bytes_per_token());
  Options o;
  o.pool = pool.get();
  o.hbm_bytes = pool->bytes();
  o.dram_bytes = 64ull << 20;
  o.ssd_dir = dir.str();
  o.eviction = EvictionPolicy::kLru;
  auto store = std::move(KvStore::open(o, f)).value();
  // Values that bf16 cannot hold exactly: the pool rounds them, the tiers must not round again.
  const int n = 13;
  std::vector<float> k(static_cast<size_t>(n) * l.token_floats() * l.num_layers), v(k.size());
  for (size_t i = 0; i < k.size(); ++i) k[i] = 1.0f + 1e-3f * static_cast<float>(i), v[i] = -0.37f * k[i];
  BlockTable seq;
  ASSERT_TRUE(seq.append(*pool, n, k.data(), v.data()));
  auto want = gather_kv(*pool, seq, 0, n);
  ASSERT_TRUE(want.ok());
  EXPECT_NE(want->k, k) << "the pool stores bf16";
  const Hash128 d = dk(77);
  ASSERT_TRUE(store->insert_pool({}, d, seq, 0, n).ok());
  store->wait_copies();
  seq.release(*pool);
  ASSERT_TRUE(store->reclaim_pool([&] { return pool->free_blocks() == pool->num_blocks(); }));
  store->drain_writes();
  MatchResult m = store->match(std::span<const Hash128>(&d, 1));
  ASSERT_EQ(m.nodes.size(), 1u);
  EXPECT_EQ(m.pool_nodes, 0u);
  auto h = store->load(m.nodes);
  h->wait();
  ASSERT_TRUE(h->status().ok()) << h->status().to_string();
  auto seg = h->segment(0);
  EXPECT_EQ(seg->header().dtype, KvDtype::kBF16);
  EXPECT_EQ(seg->header().payload_bytes, f.bytes_per_token() * n);
  BlockTable back;
  ASSERT_TRUE(append_segment(*seg, *pool, back).ok());
  auto got = gather_kv(*pool, back, 0, n);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->k, want->k);
  EXPECT_EQ(got->v, want->v);
  back.release(*pool);
  m.pin.release();
  store->detach_pool();
}

}  // namespace
}  // namespace ragd::kvstore
