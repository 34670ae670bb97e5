// KvPool / BlockTable: allocation, ref counts, fork / fork_prefix with copy-on-write, truncate,
// read / write / append round trips on block-unaligned lengths, and all-or-nothing reservation;
// explicit slots (per-slot positions, holes, rewrites in the middle of shared blocks) and the
// storage seam (a pool over storage it did not make).
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <string_view>
#include <vector>

#include "ragd/common/process.h"
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

// Resident memory follows the KV in use, not the pool's size: a large pool maps zero pages until a
// block is written, and the blocks handed out first sit together at the front of each layer.
TEST(KvPool, ResidentMemoryFollowsTheBlocksWritten) {
  if (resident_bytes() == 0) GTEST_SKIP() << "no /proc/self/statm";
  KvLayout l = layout(16);
  l.num_layers = 4;
  l.num_kv_heads = 4;
  l.head_dim = 64;  // 16 KiB per block per layer for K (f32), 128 KiB of K and V per block
  const size_t blocks = 4096;  // 512 MiB
  const size_t before = resident_bytes();
  auto pool = std::move(KvPool::create(l, blocks).value());
  ASSERT_EQ(pool->bytes(), size_t{512} << 20);
  const size_t created = resident_bytes();
  EXPECT_LT(created, before + (size_t{16} << 20)) << "creating the pool mapped its pages";
  // Write an eighth of the blocks (64 MiB of KV) with random values.
  BlockTable t;
  const int n = static_cast<int>(blocks / 8) * l.block_size;
  std::vector<float> k = rnd(static_cast<size_t>(n) * l.token_floats(), 5), v = rnd(k.size(), 6);
  ASSERT_TRUE(t.reserve(*pool, n));
  for (int layer = 0; layer < l.num_layers; ++layer) t.write(*pool, layer, 0, n, k.data(), v.data());
  t.commit(n);
  const size_t written = resident_bytes();
  const size_t kv = pool->bytes() / 8;
  EXPECT_GT(written, created + kv * 9 / 10) << "the written blocks are not resident";
  EXPECT_LT(written, created + kv * 3 / 2) << "writing an eighth of the pool mapped more than its pages";
  // Discarding the second half of the written blocks gives their pages back; the first half keeps
  // its values (a page shared with a kept block stays).
  auto* host = dynamic_cast<HostKvStorage*>(&pool->storage());
  ASSERT_NE(host, nullptr);
  const int half = n / 2;
  std::vector<int32_t> second(t.blocks().begin() + half / l.block_size, t.blocks().end());
  host->discard(second);
  const size_t after = resident_bytes();
  EXPECT_LT(after, written - kv * 4 / 10) << "discarded pages still resident";
  std::vector<float> kb(static_cast<size_t>(n) * l.token_floats()), vb(kb.size());
  t.read(*pool, 1, 0, n, kb.data(), vb.data());
  for (size_t i = 0; i < static_cast<size_t>(half) * l.token_floats(); ++i) {
    ASSERT_EQ(kb[i], k[i]) << "float " << i;
    ASSERT_EQ(vb[i], v[i]) << "float " << i;
  }
  t.release(*pool);
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

// A path cut at random (block-unaligned) node boundaries: each node's fork_range holds only the
// blocks of its own tokens (at most one block of the node before it), and joining the nodes'
// tables with append_shared gives back the path's KV and positions, sharing every block, and
// taking new blocks only for what is appended after it.
TEST_P(BlockTableTest, RangeForksJoinBackIntoThePath) {
  const int bs = GetParam();
  std::mt19937 g(static_cast<uint32_t>(bs) * 31u);
  for (int trial = 0; trial < 20; ++trial) {
    auto pool = std::move(KvPool::create(layout(bs), 400).value());
    BlockTable path;
    const int total = 20 + static_cast<int>(g() % 120);
    auto [k, v] = append_random(*pool, path, total, 100 + trial);
    if (trial % 2) {  // explicit positions (e.g. a shard's imported KV) travel with the slots
      std::vector<int32_t> pos(total);
      for (int i = 0; i < total; ++i) pos[i] = 1000 + 3 * i;
      path.set_positions(0, pos);
    }
    std::vector<int> ends;
    for (int at = 0; at < total;) {
      at = std::min(total, at + 1 + static_cast<int>(g() % 40));
      ends.push_back(at);
    }
    std::vector<BlockTable> nodes;
    int begin = 0;
    for (int end : ends) {
      nodes.push_back(path.fork_range(*pool, begin, end));
      const int base = BlockTable::range_base(*pool, begin);
      EXPECT_EQ(base % bs, 0);
      EXPECT_LE(base, begin);
      EXPECT_EQ(nodes.back().num_tokens(), end - base);
      EXPECT_EQ(static_cast<int>(nodes.back().blocks().size()), (end - base + bs - 1) / bs);
      for (int l = 0; l < 2; ++l) expect_tokens(*pool, nodes.back(), l, begin - base, k, v, total, begin, end - begin);
      begin = end;
    }
    const size_t used = pool->used_blocks();
    BlockTable joined;
    begin = 0;
    for (size_t i = 0; i < ends.size(); ++i) {
      const int base = BlockTable::range_base(*pool, begin);
      joined.append_shared(*pool, nodes[i], begin - base, ends[i] - begin);
      begin = ends[i];
    }
    EXPECT_EQ(pool->used_blocks(), used) << "joined by sharing, nothing copied";
    ASSERT_EQ(joined.num_tokens(), total);
    EXPECT_EQ(joined.blocks(), path.blocks());
    for (int l = 0; l < 2; ++l) expect_tokens(*pool, joined, l, 0, k, v, total, 0, total);
    for (int i = 0; i < total; ++i) ASSERT_EQ(joined.position(i), path.position(i)) << "slot " << i;
    // Appending after the join copies the shared partial last block and leaves the path as it was.
    auto [k2, v2] = append_random(*pool, joined, 5, 900 + trial);
    for (int l = 0; l < 2; ++l) {
      expect_tokens(*pool, path, l, 0, k, v, total, 0, total);
      expect_tokens(*pool, joined, l, total, k2, v2, 5, 0, 5);
    }
    joined.release(*pool);
    for (BlockTable& n : nodes) n.release(*pool);
    path.release(*pool);
    EXPECT_EQ(pool->free_blocks(), 400u);
  }
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

// ---- explicit slots and positions --------------------------------------------------------------

TEST(BlockTableSlots, OutOfOrderWritesLeaveHolesUntilFilled) {
  auto pool = std::move(KvPool::create(layout(3), 20).value());
  BlockTable t;
  const std::vector<int32_t> s1{7, 2, 5}, p1{7, 2, 5};
  EXPECT_EQ(t.blocks_needed(*pool, s1), 3);  // blocks 0..2 (7 / 3 = 2)
  ASSERT_TRUE(t.reserve_slots(*pool, s1));
  t.commit_slots(s1, p1);
  EXPECT_EQ(t.num_tokens(), 8);
  EXPECT_FALSE(t.positions_are_slots());
  for (int s : {0, 1, 3, 4, 6}) EXPECT_EQ(t.position(s), kNoPosition) << "slot " << s;
  for (int s : {2, 5, 7}) EXPECT_EQ(t.position(s), s);
  const std::vector<int32_t> s2{0, 1, 3, 4, 6};
  ASSERT_TRUE(t.reserve_slots(*pool, s2));
  t.commit_slots(s2, s2);
  EXPECT_TRUE(t.positions_are_slots());  // every hole filled with its own position: identity again
  EXPECT_EQ(t.num_tokens(), 8);
  t.release(*pool);
  EXPECT_EQ(pool->free_blocks(), 20u);
}

TEST(BlockTableSlots, ExplicitPositionsSurviveAppendForkAndTruncate) {
  auto pool = std::move(KvPool::create(layout(4), 20).value());
  BlockTable t;
  // A zigzag shard: positions 0..2 and 9..11 in slots 0..5.
  const std::vector<int32_t> slots{0, 1, 2, 3, 4, 5}, pos{0, 1, 2, 9, 10, 11};
  ASSERT_TRUE(t.reserve_slots(*pool, slots));
  t.commit_slots(slots, pos);
  ASSERT_TRUE(t.reserve(*pool, 2));  // plain append: slot = position = 6, 7
  t.commit(2);
  EXPECT_EQ(std::vector<int32_t>(t.positions().begin(), t.positions().end()),
            (std::vector<int32_t>{0, 1, 2, 9, 10, 11, 6, 7}));
  BlockTable f = t.fork_prefix(*pool, 5);
  EXPECT_EQ(f.position(4), 10);
  t.truncate(*pool, 3);  // back to an identity prefix
  EXPECT_TRUE(t.positions_are_slots());
  const std::vector<int32_t> relabel{20, 21};
  f.set_positions(3, relabel);
  EXPECT_EQ(f.position(3), 20);
  EXPECT_EQ(f.position(4), 21);
  t.release(*pool);
  f.release(*pool);
  EXPECT_EQ(pool->free_blocks(), 20u);
}

// Rewriting slots in the middle of a forked table copies the shared blocks it touches (and only
// those); the other table's KV is unchanged.
TEST(BlockTableSlots, RewriteInTheMiddleCopiesSharedBlocks) {
  const int bs = 4;
  auto pool = std::move(KvPool::create(layout(bs), 20).value());
  BlockTable a;
  auto [ka, va] = append_random(*pool, a, 13, 21);  // blocks 0..3, last one partial
  BlockTable b = a.fork(*pool);
  const std::vector<int32_t> slots{5, 9, 6};  // blocks 1 and 2
  EXPECT_EQ(b.blocks_needed(*pool, slots), 2);
  const size_t free_before = pool->free_blocks();
  ASSERT_TRUE(b.reserve_slots(*pool, slots));
  EXPECT_EQ(pool->free_blocks(), free_before - 2);
  EXPECT_EQ(b.blocks()[0], a.blocks()[0]);
  EXPECT_NE(b.blocks()[1], a.blocks()[1]);
  EXPECT_NE(b.blocks()[2], a.blocks()[2]);
  EXPECT_EQ(b.blocks()[3], a.blocks()[3]);
  const size_t tf = pool->layout().token_floats();
  auto kn = rnd(tf, 22), vn = rnd(tf, 23);
  for (int l = 0; l < 2; ++l) {
    for (int32_t s : slots) b.write(*pool, l, s, 1, kn.data(), vn.data());
  }
  b.commit_slots(slots, slots);
  EXPECT_TRUE(b.positions_are_slots());
  EXPECT_EQ(b.num_tokens(), 13);
  for (int l = 0; l < 2; ++l) {
    expect_tokens(*pool, a, l, 0, ka, va, 13, 0, 13);     // a untouched
    expect_tokens(*pool, b, l, 0, ka, va, 13, 0, 5);      // b's copies keep the rest
    expect_tokens(*pool, b, l, 7, ka, va, 13, 7, 2);
    expect_tokens(*pool, b, l, 10, ka, va, 13, 10, 3);
    std::vector<float> k(tf), v(tf);
    b.read(*pool, l, 9, 1, k.data(), v.data());
    EXPECT_EQ(k, kn);
    EXPECT_EQ(v, vn);
  }
  a.release(*pool);
  b.release(*pool);
  EXPECT_EQ(pool->free_blocks(), 20u);
}

TEST(BlockTableSlots, ReserveSlotsIsAllOrNothing) {
  auto pool = std::move(KvPool::create(layout(4), 4).value());
  BlockTable a;
  append_random(*pool, a, 8, 30);  // 2 blocks
  BlockTable b = a.fork(*pool);
  const std::vector<int32_t> slots{1, 6, 12};  // 2 copies + 2 new blocks (2, 3) = 4 > 2 free
  EXPECT_EQ(b.blocks_needed(*pool, slots), 4);
  const auto before = b.blocks();
  EXPECT_FALSE(b.reserve_slots(*pool, slots));
  EXPECT_EQ(b.blocks(), before);
  EXPECT_EQ(pool->free_blocks(), 2u);
  a.release(*pool);
  b.release(*pool);
}

// A pool over storage it did not make: the bookkeeping reaches the bytes only through KvStorage.
class CountingStorage final : public KvStorage {
 public:
  explicit CountingStorage(const KvLayout& l, size_t n) : KvStorage(l, n), inner_(std::move(HostKvStorage::create(l, n).value())) {}
  std::string_view device() const override { return "test"; }
  void copy_block(int32_t dst, int32_t src) override {
    ++copies;
    inner_->copy_block(dst, src);
  }
  void read(int layer, int32_t block, int slot, int n, float* k, float* v) const override {
    inner_->read(layer, block, slot, n, k, v);
  }
  void write(int layer, int32_t block, int slot, int n, const float* k, const float* v) override {
    ++writes;
    inner_->write(layer, block, slot, n, k, v);
  }
  int copies = 0, writes = 0;

 private:
  std::unique_ptr<HostKvStorage> inner_;
};

TEST(KvPool, OverBackendStorage) {
  auto owned = std::make_unique<CountingStorage>(layout(3), 10);
  CountingStorage* st = owned.get();
  auto pool = std::move(KvPool::create(std::move(owned)).value());
  EXPECT_EQ(pool->storage().device(), "test");
  EXPECT_EQ(pool->bytes(), 10u * layout(3).block_bytes());
  BlockTable a;
  auto [k, v] = append_random(*pool, a, 5, 40);
  EXPECT_GT(st->writes, 0);
  BlockTable b = a.fork(*pool);
  append_random(*pool, b, 1, 41);  // copy-on-write of the shared partial block
  EXPECT_EQ(st->copies, 1);
  expect_tokens(*pool, b, 1, 0, k, v, 5, 0, 5);
  a.release(*pool);
  b.release(*pool);
  EXPECT_FALSE(KvPool::create(std::unique_ptr<KvStorage>()).ok());
}

}  // namespace
}  // namespace ragd::engine
