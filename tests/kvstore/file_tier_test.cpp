// A tier registered from outside the kvstore library (file_tier.h) through the KvTier interface:
// placement and demotion into it, write-behind, loads layer by layer, restore after a restart,
// corruption, and registration errors.
#include "file_tier.h"

#include <atomic>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "kv_test_util.h"
#include "ragd/kvstore/kv_store.h"

namespace ragd::kvstore {
namespace {

using testing::dk;
using testing::FileTier;
using testing::make_kv;
using testing::TempDir;
using testing::test_format;

constexpr Tier kFile = tier_at(kNumBuiltinTiers);  // the first registered tier

uint64_t seg_bytes(const KvFormat& f, int tokens) { return segment_header_size(f.num_layers) + f.bytes_per_token() * tokens; }

std::unique_ptr<KvStore> open_store(const Options& o, const KvFormat& f) {
  auto r = KvStore::open(o, f);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(r).value() : nullptr;
}

void insert_doc(KvStore& s, const KvFormat& f, std::vector<Hash128>& parents, uint64_t doc, int tokens) {
  auto kv = make_kv(f, tokens, doc);
  auto r = s.insert(parents, dk(doc), kv.data(static_cast<int>(parents.size()) * tokens));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  parents.push_back(dk(doc));
}

void expect_kv(const SegmentBuffer& s, const KvFormat& f, uint64_t doc) {
  auto want = make_kv(f, s.num_tokens(), doc);
  for (size_t i = 0; i < want.k.size(); ++i) {
    ASSERT_EQ(s.k_all()[i], want.k[i]) << "doc " << doc << " k[" << i << "]";
    ASSERT_EQ(s.v_all()[i], want.v[i]) << "doc " << doc << " v[" << i << "]";
  }
}

Tier tier_of(KvStore& s, uint64_t doc) {
  auto r = s.lookup(std::vector<Hash128>{dk(doc)}, {}, false);
  return r.nodes.empty() ? Tier::kRemote : r.nodes[0].tier;
}

// No SSD tier; a DRAM tier of 3 segments over the HBM role's 2: evictions from DRAM demote into the
// registered tier, which serves them back layer by layer and survives a restart.
TEST(RegisteredTier, DemotedIntoLoadedFromAndRestoredAfterRestart) {
  const KvFormat f = test_format(3, 2, 5);
  TempDir dir;
  Options o;
  o.eviction = EvictionPolicy::kLru;
  o.hbm_bytes = seg_bytes(f, 9) * 2;
  o.dram_bytes = seg_bytes(f, 9) * 3;
  o.write_behind = false;
  o.extra_tiers.push_back(FileTier::registration(dir.sub("file"), seg_bytes(f, 9) * 100));
  {
    auto store = open_store(o, f);
    ASSERT_TRUE(store);
    for (uint64_t d = 1; d <= 9; ++d) {
      std::vector<Hash128> parents;
      insert_doc(*store, f, parents, d, 9);
    }
    ASSERT_TRUE(store->flush().ok());
    for (uint64_t d = 1; d <= 4; ++d) EXPECT_EQ(tier_of(*store, d), kFile) << d;
    for (uint64_t d = 5; d <= 7; ++d) EXPECT_EQ(tier_of(*store, d), Tier::kDram) << d;
    for (uint64_t d = 8; d <= 9; ++d) EXPECT_EQ(tier_of(*store, d), Tier::kHbm) << d;
    const Stats st = store->stats();
    EXPECT_EQ(st.tiers[static_cast<int>(kFile)].name, "file");
    EXPECT_EQ(tier_name(kFile), "file") << "the one name table knows the registered tier";
    TierCounts reused;
    reused[kFile] = 7;
    std::string named;
    reused.for_each([&](std::string_view n, int64_t c) { named += std::string(n) + "=" + std::to_string(c) + " "; });
    EXPECT_EQ(named, "hbm=0 dram=0 ssd=0 remote=0 file=7 ");
    EXPECT_EQ(st.tiers[static_cast<int>(kFile)].kind, TierKind::kStored);
    EXPECT_EQ(st.tiers[static_cast<int>(kFile)].nodes, 4u);
    EXPECT_EQ(st.tiers[static_cast<int>(kFile)].demotions, 4u);
    EXPECT_NE(store->stats_json().find("\"file\":{\"enabled\":true"), std::string::npos) << store->stats_json();

    std::atomic<int> progress{0};
    LoadOptions lo;
    lo.on_progress = [&](size_t, int) { progress.fetch_add(1); };
    auto hit = store->lookup(std::vector<Hash128>{dk(2)});
    auto h = store->load(hit.nodes, std::move(lo));
    h->wait();
    ASSERT_TRUE(h->status().ok()) << h->status().to_string();
    EXPECT_EQ(h->source(0), kFile);
    EXPECT_EQ(progress.load(), 3);  // layer by layer
    expect_kv(*h->segment(0), f, 2);
    EXPECT_EQ(store->stats().tiers[static_cast<int>(kFile)].loads, 1u);
    EXPECT_EQ(tier_of(*store, 2), Tier::kHbm) << "promoted on load";
    EXPECT_TRUE(store->check_invariants().ok()) << store->check_invariants().to_string();
  }
  // Restart: the registered tier's segments are found again; memory tiers start empty.
  auto store = open_store(o, f);
  ASSERT_TRUE(store);
  EXPECT_GE(store->stats().restored_segments, 4u);
  for (uint64_t d : {1, 3, 4}) {
    ASSERT_EQ(tier_of(*store, d), kFile) << d;
    auto hit = store->lookup(std::vector<Hash128>{dk(d)});
    auto h = store->load(hit.nodes);
    h->wait();
    ASSERT_TRUE(h->status().ok()) << h->status().to_string();
    expect_kv(*h->segment(0), f, d);
  }
  EXPECT_TRUE(store->check_invariants().ok());
}

// Without an SSD tier, write-behind targets the registered tier; a path keeps its order there.
TEST(RegisteredTier, WriteBehindWritesAPathAndAFlippedByteIsAMiss) {
  const KvFormat f = test_format(2, 1, 8);
  TempDir dir;
  Options o;
  o.hbm_bytes = 0;
  o.dram_bytes = seg_bytes(f, 5) * 10;
  o.write_behind = true;
  o.extra_tiers.push_back(FileTier::registration(dir.sub("file"), seg_bytes(f, 5) * 10));
  auto store = open_store(o, f);
  ASSERT_TRUE(store);
  std::vector<Hash128> parents;
  for (uint64_t d : {11, 12, 13}) insert_doc(*store, f, parents, d, 5);
  store->drain_writes();
  auto m = store->lookup(parents, {}, false);
  ASSERT_EQ(m.nodes.size(), 3u);
  std::vector<std::string> files;
  for (const PathNode& n : m.nodes) {
    EXPECT_EQ(n.tier, Tier::kDram);
    EXPECT_TRUE(n.tiers & tier_bit(kFile)) << "written behind";
    auto t = FileTier::open(dir.sub("file"), f);
    ASSERT_TRUE(t.ok());
    files.push_back((*t)->path_of(n.key));
    EXPECT_TRUE(std::filesystem::exists(files.back()));
  }
  EXPECT_EQ(store->stats().tiers[static_cast<int>(kFile)].written_behind, 3u);
  store.reset();

  // Reopened without a DRAM copy: flip one byte of the middle node's last layer on disk.
  {
    std::fstream fsx(files[1], std::ios::in | std::ios::out | std::ios::binary);
    fsx.seekg(0, std::ios::end);
    const auto size = static_cast<std::streamoff>(fsx.tellg());
    fsx.seekp(size - 3);
    char c = 0;
    fsx.seekg(size - 3);
    fsx.read(&c, 1);
    c = static_cast<char>(c ^ 0x40);
    fsx.seekp(size - 3);
    fsx.write(&c, 1);
  }
  store = open_store(o, f);
  ASSERT_TRUE(store);
  auto hit = store->lookup(parents);
  ASSERT_EQ(hit.nodes.size(), 3u);
  auto h = store->load(hit.nodes);
  h->wait();
  EXPECT_TRUE(h->node_ok(0));
  EXPECT_FALSE(h->node_ok(1));
  EXPECT_EQ(h->status().code(), StatusCode::kCorruption) << h->status().to_string();
  EXPECT_EQ(h->prefix_ok(), 1u);
  hit.pin.release();
  const Stats st = store->stats();
  EXPECT_EQ(st.checksum_failures, 1u);
  store->drain_writes();
  EXPECT_EQ(store->lookup(parents, {}, false).nodes.size(), 1u) << "the bad node and its child dropped";
  EXPECT_FALSE(std::filesystem::exists(files[1]));
  EXPECT_FALSE(std::filesystem::exists(files[2]));
  EXPECT_TRUE(store->check_invariants().ok());
}

TEST(RegisteredTier, RegistrationErrorsAreNamed) {
  const KvFormat f = test_format(2, 1, 4);
  TempDir dir;
  Options o;
  o.extra_tiers.push_back(FileTier::registration(dir.sub("a"), 1 << 20));
  o.extra_tiers.back().name = "ssd";
  auto r = KvStore::open(o, f);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'ssd' is taken"), std::string::npos) << r.status().to_string();
  o.extra_tiers.back().name = "";
  EXPECT_NE(KvStore::open(o, f).status().message().find("has no name"), std::string::npos);
  o.extra_tiers.back().name = "x";
  o.extra_tiers.back().open = nullptr;
  EXPECT_NE(KvStore::open(o, f).status().message().find("no open function"), std::string::npos);
  o.extra_tiers.assign(3, FileTier::registration(dir.sub("b"), 1 << 20));
  EXPECT_NE(KvStore::open(o, f).status().message().find("at most 2 extra tiers"), std::string::npos);
}

// A tier that cannot be opened is disabled (its error in stats); serving goes on without it.
TEST(RegisteredTier, OneThatFailsToOpenIsDisabled) {
  const KvFormat f = test_format(2, 1, 4);
  Options o;
  TierRegistration r;
  r.name = "broken";
  r.capacity_bytes = 1 << 20;
  r.open = [](const KvFormat&) -> Result<std::unique_ptr<KvTier>> { return Status::IOError("device gone"); };
  o.extra_tiers.push_back(r);
  auto store = open_store(o, f);
  ASSERT_TRUE(store);
  const Stats st = store->stats();
  EXPECT_FALSE(st.tiers[static_cast<int>(kFile)].enabled);
  EXPECT_NE(st.tiers[static_cast<int>(kFile)].error.find("device gone"), std::string::npos);
  std::vector<Hash128> parents;
  insert_doc(*store, f, parents, 1, 4);
  EXPECT_EQ(tier_of(*store, 1), Tier::kHbm);
  EXPECT_TRUE(store->check_invariants().ok());
}

}  // namespace
}  // namespace ragd::kvstore
