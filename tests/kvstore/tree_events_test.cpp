// KnowledgeTree's on_tier_change observer: every path that changes a node's tiers reports it, once,
// so that a replay of the reports gives the tree's own state (what KV events rely on).
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "kv_test_util.h"
#include "ragd/kvstore/keys.h"
#include "ragd/kvstore/knowledge_tree.h"

namespace ragd::kvstore {
namespace {
constexpr int kTreeTiers = 3;  // the built-in tiers the tree holds: hbm, dram, ssd

const KvFormat kFmt = testing::test_format(1, 1, 4);

SegmentRef seg_for(const Hash128& parent, uint64_t doc, int tokens, uint32_t depth) {
  SegmentIdentity id;
  id.doc_key = testing::dk(doc);
  id.parent_key = parent;
  id.key = child_key(parent, id.doc_key);
  id.depth = depth;
  auto kv = testing::make_kv(kFmt, tokens, doc);
  auto s = SegmentBuffer::build(kFmt, id, kv.data());
  RAGD_CHECK(s.ok()) << s.status().to_string();
  return *s;
}

// A pool tier that exports the node's registered segment and releases nothing (no real pool).
struct FakePool final : PoolTier {
  std::map<Hash128, SegmentRef> segs;
  SegmentRef export_segment(const TreeNodeInfo& n, const PoolCopy&) override {
    auto it = segs.find(n.key);
    return it == segs.end() ? nullptr : it->second;
  }
  void release(PoolCopy&) override {}
};

// The observer's replay: tier bits per node, with every report checked against the replay.
struct Replay {
  std::map<Hash128, uint8_t> tiers;
  std::array<int, kTreeTiers> enters{}, leaves{};
  std::string error;
  void on(const TreeNodeInfo& n, Tier t, bool entered) {
    uint8_t& m = tiers[n.key];
    const uint8_t bit = tier_bit(t);
    if (entered) {
      if (m & bit) error = "entered tier twice: " + n.key.to_hex();
      m |= bit;
      enters[static_cast<int>(t)] += 1;
    } else {
      if (!(m & bit)) error = "left a tier it was not in: " + n.key.to_hex();
      m &= static_cast<uint8_t>(~bit);
      leaves[static_cast<int>(t)] += 1;
    }
    if (m != n.tiers && error.empty()) error = "reported tiers differ from the replay: " + n.key.to_hex();
    if (m == 0) tiers.erase(n.key);
  }
};

void expect_same(const Replay& r, const KnowledgeTree& tree, int op) {
  ASSERT_TRUE(r.error.empty()) << "op " << op << ": " << r.error;
  ASSERT_EQ(r.tiers.size(), tree.num_nodes()) << "op " << op;
  for (const auto& [k, m] : r.tiers) {
    auto info = tree.info(k);
    ASSERT_TRUE(info.has_value()) << "op " << op;
    ASSERT_EQ(info->tiers, m) << "op " << op;
  }
  for (int t = 0; t < kTreeTiers; ++t) {
    uint64_t in = 0;
    for (const auto& [k, m] : r.tiers) in += (m >> t) & 1;
    ASSERT_EQ(in, tree.counters(static_cast<Tier>(t)).nodes) << "op " << op << " tier " << t;
  }
}

void run_random(bool pool_mode, uint64_t seed) {
  Replay rep;
  FakePool pool;
  TreeOptions o;
  o.capacity = {2500, 5000, 9000};
  o.policy = EvictionPolicy::kLru;
  o.max_pending_bytes = 1ull << 40;
  o.write_behind = seed % 2 == 0;
  if (pool_mode) o.pool = &pool;
  o.on_tier_change = [&](const TreeNodeInfo& n, Tier t, bool e) { rep.on(n, t, e); };
  KnowledgeTree tree(o);
  const Hash128 root{11, 12};
  std::mt19937_64 rng(seed);
  std::vector<TierAction> actions;
  std::vector<std::pair<Hash128, uint64_t>> pins;
  for (int op = 0; op < 2500; ++op) {
    const int kind = static_cast<int>(rng() % 100);
    std::vector<Hash128> keys;
    for (const auto& [k, m] : rep.tiers) keys.push_back(k);
    if (kind < 40 || keys.empty()) {
      const bool under_root = keys.empty() || rng() % 3 == 0;
      const Hash128 parent = under_root ? root : keys[rng() % keys.size()];
      const uint64_t doc = rng() % 12;
      SegmentRef s = seg_for(parent, doc, 1 + static_cast<int>(rng() % 24), 0);
      if (pool_mode) {
        pool.segs[s->header().key] = s;
        tree.insert_pool(parent, under_root, s->header(), s->size(), PoolCopy{}, rng() % 2 ? s : nullptr, &actions);
      } else {
        tree.insert(parent, under_root, s, &actions);
      }
    } else if (kind < 55) {
      const Hash128 k = keys[rng() % keys.size()];
      SegmentRef s;
      for (int src = 0; src < 2 && !s; ++src) s = tree.segment(k, static_cast<Tier>(src));
      if (!s) s = pool.segs.count(k) ? pool.segs[k] : nullptr;
      if (pool_mode && rng() % 2) tree.promote_pool(k, PoolCopy{}, &actions);
      else if (s) tree.promote(k, static_cast<Tier>(rng() % 2), s, &actions);
    } else if (kind < 70) {
      tree.evict_one(static_cast<Tier>(rng() % kTreeTiers), &actions);
    } else if (kind < 78) {
      const Hash128 k = keys[rng() % keys.size()];
      pins.emplace_back(k, tree.pin(k));
    } else if (kind < 86) {
      if (!pins.empty()) {
        tree.unpin(pins.back().first, pins.back().second);
        pins.pop_back();
      }
    } else if (kind < 94) {
      const Hash128 k = keys[rng() % keys.size()];
      tree.drop_subtree(k, static_cast<Tier>(rng() % kTreeTiers), &actions);
    } else if (kind < 96 && pool_mode) {
      tree.detach_pool(&actions);
    } else if (kind == 99 && op > 2000 && tree.tier_enabled(Tier::kSsd)) {
      tree.disable_tier(Tier::kSsd);
    }
    for (TierAction& a : actions)
      if (a.kind == TierAction::Kind::kPut) tree.write_done(a.key, a.tier, a.uid);
    actions.clear();
    expect_same(rep, tree, op);
    if (::testing::Test::HasFatalFailure()) return;
  }
  // Every tier saw traffic both ways, and what entered and did not leave is what the tree holds.
  for (int t = 0; t < kTreeTiers; ++t) {
    EXPECT_GT(rep.enters[t], 0) << "tier " << t;
    EXPECT_EQ(static_cast<uint64_t>(rep.enters[t] - rep.leaves[t]), tree.counters(static_cast<Tier>(t)).nodes);
  }
}

TEST(KnowledgeTreeEvents, EveryPathReportsBalancedTierChanges) {
  for (uint64_t seed : {1, 2, 3}) {
    run_random(false, seed);
    if (HasFatalFailure()) return;
  }
}

TEST(KnowledgeTreeEvents, PoolModeReportsBalancedTierChanges) {
  for (uint64_t seed : {4, 5, 6}) {
    run_random(true, seed);
    if (HasFatalFailure()) return;
  }
}

TEST(KnowledgeTreeEvents, RestoreAndDisableAreReported) {
  Replay rep;
  TreeOptions o;
  o.capacity = {1 << 20, 1 << 20, 1 << 20};
  o.on_tier_change = [&](const TreeNodeInfo& n, Tier t, bool e) { rep.on(n, t, e); };
  KnowledgeTree tree(o);
  const Hash128 root{1, 2};
  SegmentRef a = seg_for(root, 1, 8, 0);
  SegmentRef b = seg_for(a->header().key, 2, 8, 1);
  SegmentHeader ha = a->header(), hb = b->header();
  ha.depth = 0;
  hb.depth = 1;
  ASSERT_TRUE(tree.restore(Tier::kSsd, ha));
  ASSERT_TRUE(tree.restore(Tier::kSsd, hb));
  EXPECT_EQ(rep.enters[2], 2);
  expect_same(rep, tree, 0);
  ASSERT_TRUE(tree.promote(ha.key, Tier::kDram, a, nullptr));
  tree.disable_tier(Tier::kSsd);
  EXPECT_EQ(rep.leaves[2], 2);
  expect_same(rep, tree, 1);
  EXPECT_EQ(tree.num_nodes(), 1u);  // b was only on SSD
}

}  // namespace
}  // namespace ragd::kvstore
