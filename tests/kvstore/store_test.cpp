// KvStore without faults: lookup / insert / load across the tiers, chunks, tenants, concurrency.
#include "ragd/kvstore/kv_store.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "kv_test_util.h"

namespace ragd::kvstore {
namespace {

using testing::dk;
using testing::make_kv;
using testing::TempDir;
using testing::test_format;

// Bytes of a test segment of `tokens` tokens in format f.
uint64_t seg_bytes(const KvFormat& f, int tokens) { return segment_header_size(f.num_layers) + f.bytes_per_token() * tokens; }

std::unique_ptr<KvStore> open_store(const Options& o, const KvFormat& f) {
  auto r = KvStore::open(o, f);
  RAGD_CHECK(r.ok()) << r.status().to_string();
  return std::move(r).value();
}

// Checks a loaded segment against the data make_kv produced for `doc`.
void expect_kv(const SegmentBuffer& s, const KvFormat& f, uint64_t doc) {
  auto want = make_kv(f, s.num_tokens(), doc);
  for (size_t i = 0; i < want.k.size(); ++i) {
    ASSERT_EQ(s.k_all()[i], want.k[i]) << "doc " << doc << " k[" << i << "]";
    ASSERT_EQ(s.v_all()[i], want.v[i]) << "doc " << doc << " v[" << i << "]";
  }
}

// Inserts the path docs[0..n) (doc ids), each `tokens` long.
void insert_path(KvStore& s, const KvFormat& f, const std::vector<uint64_t>& docs, int tokens, std::string_view tenant = {}) {
  std::vector<Hash128> parents;
  for (uint64_t d : docs) {
    auto kv = make_kv(f, tokens, d);
    auto r = s.insert(parents, dk(d), kv.data(static_cast<int>(parents.size()) * tokens), tenant);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_TRUE(r->outcome == KnowledgeTree::InsertOutcome::kInserted || r->outcome == KnowledgeTree::InsertOutcome::kExists);
    parents.push_back(dk(d));
  }
}

std::vector<Hash128> keys_of(const std::vector<uint64_t>& docs) {
  std::vector<Hash128> k;
  for (uint64_t d : docs) k.push_back(dk(d));
  return k;
}

TEST(KvStore, InsertLookupLoadFromHbmRole) {
  const KvFormat f = test_format(3, 2, 5);
  Options o;
  o.hbm_bytes = 1 << 20;
  auto store = open_store(o, f);
  insert_path(*store, f, {1, 2, 3}, 33);
  auto docs = keys_of({1, 2, 3, 4});
  auto hit = store->lookup(docs);
  ASSERT_EQ(hit.nodes.size(), 3u);
  EXPECT_EQ(hit.cached_tokens(), 99);
  EXPECT_EQ(hit.pin.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(hit.nodes[i].tier, Tier::kHbm);
    EXPECT_EQ(hit.nodes[i].first_position, static_cast<int>(i) * 33);
  }
  std::atomic<int> progress{0};
  LoadOptions lo;
  lo.on_progress = [&](size_t, int) { progress.fetch_add(1); };
  auto h = store->load(hit.nodes, std::move(lo));
  h->wait();
  ASSERT_TRUE(h->status().ok()) << h->status().to_string();
  EXPECT_EQ(h->prefix_ok(), 3u);
  EXPECT_EQ(progress.load(), 9);  // 3 nodes x 3 layers
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(h->layers_ready(i), 3);
    EXPECT_EQ(h->source(i), Tier::kHbm);
    expect_kv(*h->segment(i), f, i + 1);
  }
  Stats st = store->stats();
  EXPECT_EQ(st.tiers[0].hits, 3u);
  EXPECT_EQ(st.lookup_misses, 1u);
  EXPECT_EQ(st.pinned_nodes, 3u);
  hit.pin.release();
  EXPECT_EQ(store->stats().pinned_nodes, 0u);
  EXPECT_TRUE(store->check_invariants().ok());
}

TEST(KvStore, EvictedToDramAndSsdThenLoadedAndPromoted) {
  const KvFormat f = test_format(2, 2, 4);
  TempDir dir;
  Options o;
  o.eviction = EvictionPolicy::kLru;
  o.hbm_bytes = seg_bytes(f, 7) * 2;
  o.dram_bytes = seg_bytes(f, 7) * 3;
  o.ssd_dir = dir.sub("ssd");
  auto store = open_store(o, f);
  for (uint64_t d = 1; d <= 8; ++d) insert_path(*store, f, {d}, 7);
  ASSERT_TRUE(store->flush().ok());
  // Oldest first: 1..3 were pushed to SSD, 4..6 sit in DRAM, 7..8 in the HBM role.
  std::vector<Tier> tiers;
  for (uint64_t d = 1; d <= 8; ++d) {
    auto r = store->lookup(keys_of({d}), {}, false);
    ASSERT_EQ(r.nodes.size(), 1u) << d;
    tiers.push_back(r.nodes[0].tier);
  }
  EXPECT_EQ(tiers, (std::vector<Tier>{Tier::kSsd, Tier::kSsd, Tier::kSsd, Tier::kDram, Tier::kDram, Tier::kDram, Tier::kHbm,
                                      Tier::kHbm}));
  auto hit = store->lookup(keys_of({2}));
  auto h = store->load(hit.nodes);
  h->wait();
  ASSERT_TRUE(h->status().ok()) << h->status().to_string();
  EXPECT_EQ(h->source(0), Tier::kSsd);
  expect_kv(*h->segment(0), f, 2);
  auto again = store->lookup(keys_of({2}), {}, false);
  EXPECT_EQ(again.nodes[0].tier, Tier::kHbm);
  EXPECT_EQ(again.nodes[0].tiers, tier_bit(Tier::kHbm) | tier_bit(Tier::kDram) | tier_bit(Tier::kSsd));
  Stats st = store->stats();
  EXPECT_EQ(st.tiers[2].loads, 1u);
  EXPECT_EQ(st.tiers[0].promotions, 1u);
  EXPECT_EQ(st.tiers[1].promotions, 1u);
  EXPECT_GT(st.tiers[2].used_bytes, 0u);
  EXPECT_TRUE(store->check_invariants().ok());
  const std::string js = store->stats_json();
  for (const char* field : {"\"hbm\"", "\"dram\"", "\"ssd\"", "\"checksum_failures\":0", "\"evictions\"", "\"promotions\"",
                            "\"used_bytes\"", "\"policy\":\"lru\""})
    EXPECT_NE(js.find(field), std::string::npos) << field << " in " << js;
}

TEST(KvStore, PathLoadStreamsLayersAndDeliversBlockTableLayout) {
  const KvFormat f = test_format(5, 1, 3);
  TempDir dir;
  Options o;
  o.hbm_bytes = 0;
  o.dram_bytes = 0;
  o.ssd_dir = dir.sub("ssd");
  o.promote_on_load = false;
  auto store = open_store(o, f);
  insert_path(*store, f, {10, 11}, 129);
  ASSERT_TRUE(store->flush().ok());
  auto hit = store->lookup(keys_of({10, 11}));
  ASSERT_EQ(hit.nodes.size(), 2u);
  EXPECT_EQ(hit.nodes[1].tier, Tier::kSsd);
  std::mutex mu;
  std::vector<std::pair<size_t, int>> events;
  LoadOptions lo;
  lo.on_progress = [&](size_t n, int l) {
    std::lock_guard<std::mutex> lock(mu);
    events.emplace_back(n, l);
  };
  auto h = store->load(hit.nodes, std::move(lo));
  h->wait();
  ASSERT_TRUE(h->status().ok());
  // Layer readiness is signalled in order, one layer at a time, node after node.
  ASSERT_EQ(events.size(), 10u);
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i], std::make_pair(i / 5, static_cast<int>(i % 5) + 1));
  for (size_t n = 0; n < 2; ++n) expect_kv(*h->segment(n), f, 10 + n);
  EXPECT_EQ(h->segment(1)->header().first_position, 129);
}

TEST(KvStore, ChunkCacheIsFlatAndSeparateFromTheTree) {
  const KvFormat f = test_format();
  Options o;
  auto store = open_store(o, f);
  for (uint64_t d : {5, 6, 7}) {
    auto kv = make_kv(f, 7, d);
    auto r = store->insert_chunk(dk(d), kv.data(100 + static_cast<int>(d)));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->outcome, KnowledgeTree::InsertOutcome::kInserted);
  }
  auto c = store->lookup_chunks(keys_of({7, 8, 5}));
  ASSERT_EQ(c.chunks.size(), 3u);
  ASSERT_TRUE(c.chunks[0].has_value());
  EXPECT_FALSE(c.chunks[1].has_value());
  ASSERT_TRUE(c.chunks[2].has_value());
  EXPECT_EQ(c.chunks[0]->first_position, 107);
  auto hits = c.hits();
  LoadOptions lo;
  lo.independent = true;
  auto h = store->load(hits, std::move(lo));
  h->wait();
  ASSERT_TRUE(h->status().ok());
  expect_kv(*h->segment(0), f, 7);
  expect_kv(*h->segment(1), f, 5);
  // Chunks are not tree nodes and vice versa.
  EXPECT_TRUE(store->lookup(keys_of({5})).nodes.empty());
  insert_path(*store, f, {9}, 7);
  EXPECT_FALSE(store->lookup_chunks(keys_of({9})).chunks[0].has_value());
  Stats st = store->stats();
  EXPECT_EQ(st.chunk_hits, 2u);
  EXPECT_EQ(st.chunk_misses, 2u);
}

TEST(KvStore, TenantIsolation) {
  const KvFormat f = test_format();
  for (bool isolate : {true, false}) {
    Options o;
    o.tenant_isolation = isolate;
    auto store = open_store(o, f);
    insert_path(*store, f, {1, 2}, 7, "alice");
    EXPECT_EQ(store->lookup(keys_of({1, 2}), "alice").nodes.size(), 2u);
    EXPECT_EQ(store->lookup(keys_of({1, 2}), "bob").nodes.size(), isolate ? 0u : 2u);
  }
}

TEST(KvStore, InsertOutcomes) {
  const KvFormat f = test_format();
  Options o;
  o.hbm_bytes = seg_bytes(f, 7);
  o.dram_bytes = 0;
  auto store = open_store(o, f);
  auto kv = make_kv(f, 7, 1);
  auto r = store->insert(keys_of({42}), dk(1), kv.data());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, KnowledgeTree::InsertOutcome::kParentMissing);
  r = store->insert({}, dk(1), kv.data());
  EXPECT_EQ(r->outcome, KnowledgeTree::InsertOutcome::kInserted);
  r = store->insert({}, dk(1), kv.data());
  EXPECT_EQ(r->outcome, KnowledgeTree::InsertOutcome::kExists);
  auto big = make_kv(f, 8, 2);
  r = store->insert({}, dk(2), big.data());
  EXPECT_EQ(r->outcome, KnowledgeTree::InsertOutcome::kNoSpace);
  auto pinned = store->lookup(keys_of({1}));
  auto other = make_kv(f, 7, 3);
  r = store->insert({}, dk(3), other.data());
  EXPECT_EQ(r->outcome, KnowledgeTree::InsertOutcome::kNoSpace) << "the only node is pinned";
  pinned.pin.release();
  r = store->insert({}, dk(3), other.data());
  EXPECT_EQ(r->outcome, KnowledgeTree::InsertOutcome::kInserted);
  KvData bad = kv.data();
  bad.num_tokens = -1;
  r = store->insert({}, dk(4), bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("num_tokens"), std::string::npos);
}

TEST(KvStore, BadOptionsAreNamed) {
  const KvFormat f = test_format();
  Options o;
  o.io_threads = 0;
  auto r = KvStore::open(o, f);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("io_threads"), std::string::npos);
  KvFormat g = f;
  g.head_dim = 0;
  r = KvStore::open(Options(), g);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("head_dim"), std::string::npos);
}

TEST(KvStore, LoadAfterCloseFailsFastAndPinsOutliveTheStore) {
  const KvFormat f = test_format();
  auto store = open_store(Options(), f);
  insert_path(*store, f, {1}, 7);
  auto hit = store->lookup(keys_of({1}));
  // Callbacks may call back into the store (they run without its lock).
  std::atomic<int> calls{0};
  LoadOptions lo;
  lo.on_done = [&] {
    (void)store->stats();
    calls.fetch_add(1);
  };
  auto h0 = store->load(hit.nodes, lo);
  h0->wait();
  EXPECT_TRUE(h0->status().ok());
  store->close();
  auto h = store->load(hit.nodes, lo);
  ASSERT_TRUE(h->done());
  EXPECT_EQ(calls.load(), 2);
  EXPECT_EQ(h->status().code(), StatusCode::kUnavailable);
  store.reset();
  hit.pin.release();  // core still alive through the pin
}

// Several threads look up, load, insert and unpin at once over small tiers with an SSD. Every
// delivered segment must hold exactly its document's KV; the tree's invariants hold at the end.
TEST(KvStore, ConcurrentUseKeepsDataAndInvariants) {
  const KvFormat f = test_format(2, 1, 4);
  TempDir dir;
  Options o;
  o.hbm_bytes = seg_bytes(f, 9) * 6;
  o.dram_bytes = seg_bytes(f, 9) * 10;
  o.ssd_bytes = seg_bytes(f, 9) * 30;
  o.ssd_dir = dir.sub("ssd");
  o.io_threads = 3;
  auto store = open_store(o, f);
  std::atomic<int> bad{0}, delivered{0};
  auto worker = [&](int id) {
    std::mt19937_64 rng(id);
    for (int it = 0; it < 150; ++it) {
      std::vector<uint64_t> docs;
      for (int i = 0; i < 3; ++i) docs.push_back(1 + rng() % 12);
      auto keys = keys_of(docs);
      auto hit = store->lookup(keys);
      auto h = store->load(hit.nodes);
      // Insert the rest of the path meanwhile (what a scheduler does after prefill).
      std::vector<Hash128> parents(keys.begin(), keys.begin() + static_cast<long>(hit.nodes.size()));
      for (size_t i = hit.nodes.size(); i < docs.size(); ++i) {
        auto kv = make_kv(f, 9, docs[i]);
        auto r = store->insert(parents, keys[i], kv.data());
        if (!r.ok() || r->outcome == KnowledgeTree::InsertOutcome::kParentMissing) break;
        parents.push_back(keys[i]);
      }
      h->wait();
      for (size_t i = 0; i < h->prefix_ok(); ++i) {
        auto want = make_kv(f, 9, docs[i]);
        const SegmentBuffer& s = *h->segment(i);
        if (std::memcmp(s.k_all(), want.k.data(), want.k.size() * 4) || std::memcmp(s.v_all(), want.v.data(), want.v.size() * 4))
          bad.fetch_add(1);
        delivered.fetch_add(1);
      }
      if (rng() % 2) hit.pin.release();
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(worker, t + 1);
  std::thread stats_reader([&] {
    for (int i = 0; i < 50; ++i) (void)store->stats_json();
  });
  for (auto& t : threads) t.join();
  stats_reader.join();
  ASSERT_TRUE(store->flush().ok());
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(delivered.load(), 100);
  Status inv = store->check_invariants();
  EXPECT_TRUE(inv.ok()) << inv.to_string();
  Stats st = store->stats();
  EXPECT_EQ(st.pinned_nodes, 0u);
  EXPECT_EQ(st.checksum_failures, 0u);
  EXPECT_TRUE(st.ssd_error.empty()) << st.ssd_error;
  EXPECT_GT(st.tiers[0].evictions, 0u);
}

}  // namespace
}  // namespace ragd::kvstore
