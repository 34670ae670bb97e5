// Round trip engine BlockTable -> kvstore segment (through the SSD tier) -> another BlockTable.
#include "ragd/kvstore/engine_io.h"

#include <random>

#include <gtest/gtest.h>

#include "kv_test_util.h"
#include "ragd/kvstore/kv_store.h"

namespace ragd::kvstore {
namespace {

using testing::dk;

TEST(EngineIo, BlockTableToSegmentAndBackIsExact) {
  engine::KvLayout layout;
  layout.num_layers = 3;
  layout.num_kv_heads = 2;
  layout.head_dim = 5;
  layout.block_size = 16;
  auto pool_r = engine::KvPool::create(layout, 64);
  ASSERT_TRUE(pool_r.ok()) << pool_r.status().to_string();
  engine::KvPool& pool = **pool_r;
  // A sequence of 7 + 33 tokens with seeded, non-zero KV, written as the forward pass would.
  const int n0 = 7, n1 = 33, total = n0 + n1;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.5f, 1.5f);
  engine::BlockTable seq;
  ASSERT_TRUE(seq.reserve(pool, total));
  std::vector<std::vector<float>> ks(3), vs(3);
  for (int l = 0; l < 3; ++l) {
    ks[l].resize(static_cast<size_t>(total) * layout.token_floats());
    vs[l].resize(ks[l].size());
    for (auto& x : ks[l]) x = u(rng);
    for (auto& x : vs[l]) x = -u(rng);
    seq.write(pool, l, 0, total, ks[l].data(), vs[l].data());
  }
  seq.commit(total);

  const KvFormat fmt = KvFormat::from_layout(layout, Hash128{3, 4});
  testing::TempDir dir;
  Options o;
  o.hbm_bytes = 0;
  o.dram_bytes = 0;
  o.ssd_dir = dir.sub("ssd");
  auto store_r = KvStore::open(o, fmt);
  ASSERT_TRUE(store_r.ok());
  auto& store = *store_r;
  auto a = gather_kv(pool, seq, 0, n0);
  auto b = gather_kv(pool, seq, n0, n1);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(b->first_position, n0);
  EXPECT_EQ(host_kv_bytes(layout, n1), (b->k.size() + b->v.size()) * sizeof(float));  // known before gathering
  ASSERT_EQ(store->insert({}, dk(1), a->data())->outcome, KnowledgeTree::InsertOutcome::kInserted);
  std::vector<Hash128> parent = {dk(1)};
  ASSERT_EQ(store->insert(parent, dk(2), b->data())->outcome, KnowledgeTree::InsertOutcome::kInserted);
  ASSERT_TRUE(store->flush().ok());

  std::vector<Hash128> docs = {dk(1), dk(2)};
  auto hit = store->lookup(docs);
  ASSERT_EQ(hit.nodes.size(), 2u);
  auto h = store->load(hit.nodes);
  h->wait();
  ASSERT_TRUE(h->status().ok()) << h->status().to_string();
  engine::BlockTable copy;
  for (size_t i = 0; i < 2; ++i) ASSERT_TRUE(append_segment(*h->segment(i), pool, copy).ok());
  ASSERT_EQ(copy.num_tokens(), total);
  std::vector<float> k(static_cast<size_t>(total) * layout.token_floats()), v(k.size());
  for (int l = 0; l < 3; ++l) {
    copy.read(pool, l, 0, total, k.data(), v.data());
    for (size_t i = 0; i < k.size(); ++i) {
      ASSERT_EQ(k[i], ks[l][i]) << "layer " << l << " k " << i;
      ASSERT_EQ(v[i], vs[l][i]) << "layer " << l << " v " << i;
    }
  }
  EXPECT_EQ(h->segment(1)->header().first_position, n0);
  EXPECT_TRUE(h->segment(1)->header().k_rotated);
  seq.release(pool);
  copy.release(pool);
}

TEST(EngineIo, BadRangeAndShapeMismatchAreNamed) {
  engine::KvLayout layout;
  layout.num_layers = 2;
  layout.num_kv_heads = 1;
  layout.head_dim = 4;
  auto pool = engine::KvPool::create(layout, 4);
  ASSERT_TRUE(pool.ok());
  engine::BlockTable t;
  auto r = gather_kv(**pool, t, 0, 3);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not inside the sequence of 0 tokens"), std::string::npos) << r.status().message();
  const KvFormat other = testing::test_format(3, 1, 4);
  SegmentIdentity id;
  auto kv = testing::make_kv(other, 5, 1);
  auto seg = SegmentBuffer::build(other, id, kv.data());
  ASSERT_TRUE(seg.ok());
  Status st = append_segment(**seg, **pool, t);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("does not match the pool layout"), std::string::npos) << st.message();
  // A pool too small: the table is unchanged.
  const KvFormat same = KvFormat::from_layout(layout, Hash128{});
  auto big = testing::make_kv(same, 16 * 5, 2);
  auto seg2 = SegmentBuffer::build(same, id, big.data());
  ASSERT_TRUE(seg2.ok());
  st = append_segment(**seg2, **pool, t);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(t.num_tokens(), 0);
}

// host_kv: a loaded segment as host KV (what kv_blend places), K and V of every layer and the
// position its first token had, without the caller reading the segment's header.
TEST(EngineIo, HostKvOfASegmentIsItsKvAndPosition) {
  for (KvDtype dt : {KvDtype::kF32, KvDtype::kBF16}) {
    KvFormat f = testing::test_format(3, 2, 5);
    f.dtype = dt;
    const auto kv = testing::make_kv(f, 33, 4);
    auto seg = SegmentBuffer::build(f, SegmentIdentity{}, kv.data(129));
    ASSERT_TRUE(seg.ok()) << seg.status().to_string();
    const HostKv h = host_kv(**seg);
    EXPECT_EQ(h.num_tokens, 33);
    EXPECT_EQ(h.first_position, 129);
    ASSERT_EQ(h.k.size(), kv.k.size());
    ASSERT_EQ(h.v.size(), kv.v.size());
    std::vector<float> k(kv.k.size()), v(kv.v.size());
    (*seg)->read_all(k.data(), v.data());
    EXPECT_EQ(h.k, k);
    EXPECT_EQ(h.v, v);
    if (dt == KvDtype::kF32) {
      EXPECT_EQ(h.k, kv.k);
      EXPECT_EQ(h.v, kv.v);
    }
  }
}

}  // namespace
}  // namespace ragd::kvstore
