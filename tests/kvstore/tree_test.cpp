#include "ragd/kvstore/knowledge_tree.h"

#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "kv_test_util.h"

namespace ragd::kvstore {
namespace {

using testing::make_kv;

const KvFormat kFmt = testing::test_format(1, 1, 4);
const Hash128 kRootA{11, 12};
const Hash128 kRootB{21, 22};

// A segment of `tokens` tokens for doc under parent (its size is what the tree accounts).
SegmentRef seg_for(const Hash128& parent, uint64_t doc, int tokens, uint32_t depth) {
  SegmentIdentity id;
  id.doc_key = testing::dk(doc);
  id.parent_key = parent;
  id.key = child_key(parent, id.doc_key);
  id.depth = depth;
  auto kv = make_kv(kFmt, tokens, doc);
  auto s = SegmentBuffer::build(kFmt, id, kv.data());
  RAGD_CHECK(s.ok()) << s.status().to_string();
  return *s;
}

TreeOptions small_opts(EvictionPolicy p, uint64_t hbm, uint64_t dram, uint64_t ssd) {
  TreeOptions o;
  o.capacity = {hbm, dram, ssd};
  o.policy = p;
  o.max_pending_bytes = 1ull << 40;
  return o;
}

// ---- reference model: the spec, written the slow obvious way --------------------------------------
struct RefTree {
  struct N {
    Hash128 key, parent, doc;
    bool parent_root = false;
    uint64_t bytes = 0;
    uint8_t tiers = 0;
    uint64_t last = 0;
    int pins = 0;
  };
  std::map<Hash128, N> nodes;
  std::array<uint64_t, 3> cap{};
  std::array<bool, 3> enabled{true, true, true};
  std::array<uint64_t, 3> used{};
  uint64_t tick = 0;

  static bool in(const N& n, int t) { return (n.tiers >> t) & 1; }
  bool usable(int t) const { return enabled[t] && cap[t] > 0; }
  int kids_in(const Hash128& k, int t) const {
    int c = 0;
    for (auto& [kk, n] : nodes) c += !n.parent_root && n.parent == k && in(n, t);
    return c;
  }
  N* parent_of(const N& n) { return n.parent_root ? nullptr : &nodes.at(n.parent); }
  const N* victim(int t) const {
    const N* best = nullptr;
    for (auto& [k, n] : nodes)
      if (in(n, t) && n.pins == 0 && kids_in(k, t) == 0 && (!best || n.last < best->last)) best = &n;
    return best;
  }
  void place(N& n, int t) {
    n.tiers |= 1 << t;
    used[t] += n.bytes;
  }
  void remove(const Hash128& k, int t) {
    N& n = nodes.at(k);
    n.tiers &= ~(1 << t);
    used[t] -= n.bytes;
    if (n.tiers == 0) nodes.erase(k);
  }
  bool make_room(int t, uint64_t b) {
    if (!usable(t) || b > cap[t]) return false;
    while (used[t] + b > cap[t]) {
      const N* v = victim(t);
      if (!v) return false;
      evict(v->key, t);
    }
    return true;
  }
  bool demote(const Hash128& k, int u) {
    std::vector<Hash128> chain;
    for (N* a = &nodes.at(k); a && !in(*a, u); a = parent_of(*a)) chain.insert(chain.begin(), a->key);
    if (chain.empty()) return true;
    N* anchor = parent_of(nodes.at(chain.front()));
    if (anchor) anchor->pins++;
    for (auto& c : chain) nodes.at(c).pins++;
    bool ok = true;
    for (auto& c : chain) {
      if (!make_room(u, nodes.at(c).bytes)) {
        ok = false;
        break;
      }
      place(nodes.at(c), u);
    }
    for (auto& c : chain) nodes.at(c).pins--;
    if (anchor) anchor->pins--;
    return ok;
  }
  void evict(const Hash128& k, int t) {
    N& v = nodes.at(k);
    bool slower = false;
    for (int u = t + 1; u < 3; ++u) slower |= in(v, u);
    if (!slower && t < 2) {
      v.pins++;
      for (int u = t + 1; u < 3; ++u)
        if (usable(u) && demote(k, u)) break;
      nodes.at(k).pins--;
    }
    remove(k, t);
  }
  N* child(const Hash128& parent, bool root, const Hash128& doc) {
    for (auto& [k, n] : nodes)
      if (n.parent == parent && n.parent_root == root && n.doc == doc) return &n;
    return nullptr;
  }
  KnowledgeTree::InsertOutcome insert(const Hash128& parent, bool root, const SegmentRef& s) {
    N* p = root ? nullptr : (nodes.count(parent) ? &nodes.at(parent) : nullptr);
    if (!root && !p) return KnowledgeTree::InsertOutcome::kParentMissing;
    if (N* c = child(parent, root, s->header().doc_key)) {
      c->last = ++tick;
      return KnowledgeTree::InsertOutcome::kExists;
    }
    N n;
    n.key = s->header().key;
    n.parent = parent;
    n.parent_root = root;
    n.doc = s->header().doc_key;
    n.bytes = s->size();
    n.pins = 1;
    nodes[n.key] = n;  // tierless while room is made (never a victim)
    if (p) p->pins++;
    bool ok = false;
    for (int t = 0; t < 3 && !ok; ++t) {
      if (!usable(t)) continue;
      if (p && !in(*p, t)) continue;
      if (!make_room(t, n.bytes)) continue;
      N& m = nodes.at(n.key);
      m.last = ++tick;
      place(m, t);
      ok = true;
    }
    nodes.at(n.key).pins--;
    if (p) p->pins--;
    if (!ok) {
      nodes.erase(n.key);
      return KnowledgeTree::InsertOutcome::kNoSpace;
    }
    return KnowledgeTree::InsertOutcome::kInserted;
  }
  size_t match(const Hash128& root, const std::vector<Hash128>& docs) {
    Hash128 cur = root;
    bool is_root = true;
    size_t n = 0;
    for (auto& d : docs) {
      N* c = child(cur, is_root, d);
      if (!c) break;
      c->last = ++tick;
      cur = c->key;
      is_root = false;
      ++n;
    }
    return n;
  }
  bool promote(const Hash128& k, int t) {
    if (!nodes.count(k)) return false;
    N& n = nodes.at(k);
    if (in(n, t)) return true;
    if (!usable(t)) return false;
    N* p = parent_of(n);
    if (p && !in(*p, t)) return false;
    n.pins++;
    if (p) p->pins++;
    bool ok = make_room(t, n.bytes);
    if (ok) place(nodes.at(k), t);
    nodes.at(k).pins--;
    if (p) p->pins--;
    return ok;
  }
  void drop_subtree(const Hash128& k, int t) {
    std::vector<Hash128> kids;
    for (auto& [kk, n] : nodes)
      if (!n.parent_root && n.parent == k && in(n, t)) kids.push_back(kk);
    for (auto& c : kids) drop_subtree(c, t);
    remove(k, t);
  }
  void disable(int t) {
    enabled[t] = false;
    std::vector<Hash128> tops;
    for (auto& [k, n] : nodes)
      if (n.parent_root && in(n, t)) tops.push_back(k);
    for (auto& k : tops) drop_subtree(k, t);
  }
};

void apply_actions(std::vector<TierAction>& actions, std::set<Hash128>* ssd, KnowledgeTree* tree) {
  for (auto& a : actions) {
    if (a.kind == TierAction::Kind::kPut) {
      EXPECT_TRUE(ssd->insert(a.key).second) << "double put";
      tree->write_done(a.key, a.tier, a.uid);
    } else {
      ssd->erase(a.key);
    }
  }
  actions.clear();
}

TEST(KnowledgeTree, RandomOperationsMatchReferenceModel) {
  for (uint64_t seed : {1, 2, 3}) {
    KnowledgeTree tree(small_opts(EvictionPolicy::kLru, 2500, 5000, 9000));
    RefTree ref;
    ref.cap = {2500, 5000, 9000};
    std::set<Hash128> ssd_records;  // what the SSD would hold after carrying out the actions
    std::mt19937_64 rng(seed);
    std::vector<TierAction> actions;
    std::map<Hash128, uint64_t> pinned;  // key -> uid (one pin each at most)
    for (int op = 0; op < 3000; ++op) {
      const int kind = static_cast<int>(rng() % 100);
      std::vector<Hash128> keys;
      for (auto& [k, n] : ref.nodes) keys.push_back(k);
      auto any_key = [&]() { return keys[rng() % keys.size()]; };
      const Hash128 root = (rng() % 4 == 0) ? kRootB : kRootA;
      if (kind < 40 || keys.empty()) {
        // insert under the root or a random existing node
        bool under_root = keys.empty() || rng() % 3 == 0;
        Hash128 parent = under_root ? root : any_key();
        uint32_t depth = 0;
        const uint64_t doc = rng() % 10;
        const int tokens = 1 + static_cast<int>(rng() % 24);
        SegmentRef s = seg_for(parent, doc, tokens, depth);
        auto got = tree.insert(parent, under_root, s, &actions);
        auto want = ref.insert(parent, under_root, s);
        ASSERT_EQ(static_cast<int>(got), static_cast<int>(want)) << "op " << op;
      } else if (kind < 65) {
        std::vector<Hash128> docs;
        const int n = 1 + static_cast<int>(rng() % 4);
        for (int i = 0; i < n; ++i) docs.push_back(testing::dk(rng() % 10));
        auto got = tree.match(root, docs, true);
        ASSERT_EQ(got.size(), ref.match(root, docs)) << "op " << op;
      } else if (kind < 73) {
        Hash128 k = any_key();
        if (!pinned.count(k)) {
          pinned[k] = tree.pin(k);
          ref.nodes.at(k).pins++;
        }
      } else if (kind < 81) {
        if (!pinned.empty()) {
          auto it = pinned.begin();
          std::advance(it, rng() % pinned.size());
          tree.unpin(it->first, it->second);
          if (ref.nodes.count(it->first)) ref.nodes.at(it->first).pins--;
          pinned.erase(it);
        }
      } else if (kind < 95) {
        Hash128 k = any_key();
        const int t = static_cast<int>(rng() % 2);
        SegmentRef s;
        for (int src = 0; src < 2 && !s; ++src) s = tree.segment(k, static_cast<Tier>(src));
        if (!s) s = seg_for(kRootA, 1, static_cast<int>((ref.nodes.at(k).bytes - 192) / 32), 0);  // same size
        ASSERT_EQ(tree.promote(k, static_cast<Tier>(t), s, &actions), ref.promote(k, t)) << "op " << op;
      } else if (kind < 98) {
        Hash128 k = any_key();
        const int t = static_cast<int>(rng() % 3);
        if (RefTree::in(ref.nodes.at(k), t)) {
          tree.drop_subtree(k, static_cast<Tier>(t), &actions);
          ref.drop_subtree(k, t);
        }
      } else if (op > 2000 && seed == 3 && ref.enabled[2]) {
        tree.disable_tier(Tier::kSsd);
        ref.disable(2);
        ssd_records.clear();  // a disabled tier's records are not ours to track
        actions.clear();
      }
      apply_actions(actions, &ssd_records, &tree);
      // Same residency everywhere.
      ASSERT_EQ(tree.num_nodes(), ref.nodes.size()) << "op " << op;
      std::set<Hash128> ref_ssd;
      for (auto& [k, n] : ref.nodes) {
        auto info = tree.info(k);
        ASSERT_TRUE(info.has_value()) << "op " << op;
        ASSERT_EQ(info->tiers, n.tiers) << "op " << op << " key " << k.to_hex();
        ASSERT_EQ(info->pins, n.pins) << "op " << op;
        if (RefTree::in(n, 2)) ref_ssd.insert(k);
      }
      for (int t = 0; t < 3; ++t) ASSERT_EQ(tree.counters(static_cast<Tier>(t)).used_bytes, ref.used[t]) << "op " << op;
      if (ref.enabled[2]) {
        ASSERT_EQ(ssd_records, ref_ssd) << "op " << op;
      }
      Status inv = tree.check_invariants();
      ASSERT_TRUE(inv.ok()) << "op " << op << ": " << inv.to_string();
      // Pins that outlived their node do not resurrect it.
      for (auto it = pinned.begin(); it != pinned.end();)
        it = ref.nodes.count(it->first) ? std::next(it) : pinned.erase(it);
    }
    EXPECT_GT(tree.counters(Tier::kHbm).evictions, 50u);
    EXPECT_GT(tree.counters(Tier::kDram).demotions, 20u);
  }
}

TEST(KnowledgeTree, InvariantsHoldForEveryPolicyAndPinsAreNeverEvicted) {
  for (EvictionPolicy p : {EvictionPolicy::kLru, EvictionPolicy::kLfu, EvictionPolicy::kGdsf, EvictionPolicy::kPgdsf}) {
    KnowledgeTree tree(small_opts(p, 3000, 6000, 12000));
    std::mt19937_64 rng(77);
    std::vector<TierAction> actions;
    std::set<Hash128> ssd;
    std::vector<Hash128> known;
    std::map<Hash128, std::pair<uint64_t, uint8_t>> pinned;  // key -> (uid, tiers when pinned)
    for (int op = 0; op < 4000; ++op) {
      const int kind = static_cast<int>(rng() % 10);
      if (kind < 5 || known.empty()) {
        bool under_root = known.empty() || rng() % 3 == 0;
        Hash128 parent = under_root ? kRootA : known[rng() % known.size()];
        auto s = seg_for(parent, rng() % 12, 1 + static_cast<int>(rng() % 30), 0);
        if (tree.insert(parent, under_root, s, &actions) == KnowledgeTree::InsertOutcome::kInserted) known.push_back(s->header().key);
      } else if (kind < 8) {
        std::vector<Hash128> docs;
        for (int i = 0; i < 3; ++i) docs.push_back(testing::dk(rng() % 12));
        tree.match(kRootA, docs, true);
      } else if (kind == 8) {
        Hash128 k = known[rng() % known.size()];
        auto info = tree.info(k);
        if (info && !pinned.count(k)) pinned[k] = {tree.pin(k), info->tiers};
      } else if (!pinned.empty()) {
        auto it = pinned.begin();
        tree.unpin(it->first, it->second.first);
        pinned.erase(it);
      }
      apply_actions(actions, &ssd, &tree);
      Status inv = tree.check_invariants();
      ASSERT_TRUE(inv.ok()) << eviction_policy_name(p) << " op " << op << ": " << inv.to_string();
      for (auto& [k, v] : pinned) {
        auto info = tree.info(k);
        ASSERT_TRUE(info.has_value()) << "pinned node evicted";
        ASSERT_EQ(info->tiers & v.second, v.second) << "pinned node left a tier";
      }
    }
    EXPECT_GT(tree.counters(Tier::kHbm).evictions, 30u) << eviction_policy_name(p);
  }
}

TEST(KnowledgeTree, DemotionCopiesMissingAncestorsAndEvictsLeavesOnly) {
  KnowledgeTree tree(small_opts(EvictionPolicy::kLru, 1000, 10000, 0));
  std::vector<TierAction> actions;
  auto a = seg_for(kRootA, 1, 10, 0);   // 512 bytes
  auto b = seg_for(a->header().key, 2, 5, 1);  // 352 bytes
  ASSERT_EQ(tree.insert(kRootA, true, a, &actions), KnowledgeTree::InsertOutcome::kInserted);
  ASSERT_EQ(tree.insert(a->header().key, false, b, &actions), KnowledgeTree::InsertOutcome::kInserted);
  EXPECT_EQ(tree.info(a->header().key)->tiers, tier_bit(Tier::kHbm));
  // A new root-level document needs room: B (the leaf) goes, not A, and B's demotion to DRAM
  // copies A there first.
  auto c = seg_for(kRootA, 3, 3, 0);
  ASSERT_EQ(tree.insert(kRootA, true, c, &actions), KnowledgeTree::InsertOutcome::kInserted);
  EXPECT_EQ(tree.info(b->header().key)->tiers, tier_bit(Tier::kDram));
  EXPECT_EQ(tree.info(a->header().key)->tiers, tier_bit(Tier::kHbm) | tier_bit(Tier::kDram));
  EXPECT_EQ(tree.counters(Tier::kDram).demotions, 2u);
  ASSERT_TRUE(tree.check_invariants().ok());
  // Lookup reports the fastest tier per node.
  std::vector<Hash128> docs = {testing::dk(1), testing::dk(2)};
  auto path = tree.match(kRootA, docs, false);
  ASSERT_EQ(path.size(), 2u);
  EXPECT_EQ(path[0].fastest, Tier::kHbm);
  EXPECT_EQ(path[1].fastest, Tier::kDram);
}

TEST(KnowledgeTree, SwapOutOnce) {
  KnowledgeTree tree(small_opts(EvictionPolicy::kLru, 600, 10000, 0));
  std::vector<TierAction> actions;
  auto a = seg_for(kRootA, 1, 10, 0);  // 512 bytes
  ASSERT_EQ(tree.insert(kRootA, true, a, &actions), KnowledgeTree::InsertOutcome::kInserted);
  auto b = seg_for(kRootA, 2, 10, 0);
  ASSERT_EQ(tree.insert(kRootA, true, b, &actions), KnowledgeTree::InsertOutcome::kInserted);  // A -> DRAM
  EXPECT_EQ(tree.counters(Tier::kDram).demotions, 1u);
  ASSERT_TRUE(tree.promote(a->header().key, Tier::kHbm, a, &actions));  // B -> DRAM, A in both
  EXPECT_EQ(tree.counters(Tier::kDram).demotions, 2u);
  EXPECT_EQ(tree.info(a->header().key)->tiers, tier_bit(Tier::kHbm) | tier_bit(Tier::kDram));
  ASSERT_TRUE(tree.promote(b->header().key, Tier::kHbm, b, &actions));  // A leaves HBM: already in DRAM
  EXPECT_EQ(tree.counters(Tier::kDram).demotions, 2u) << "A was written to DRAM a second time";
  EXPECT_EQ(tree.info(a->header().key)->tiers, tier_bit(Tier::kDram));
}

TEST(KnowledgeTree, PinnedPathBlocksEvictionAndInsertReportsNoSpace) {
  KnowledgeTree tree(small_opts(EvictionPolicy::kLru, 600, 0, 0));
  std::vector<TierAction> actions;
  auto a = seg_for(kRootA, 1, 10, 0);
  ASSERT_EQ(tree.insert(kRootA, true, a, &actions), KnowledgeTree::InsertOutcome::kInserted);
  uint64_t uid = tree.pin(a->header().key);
  auto b = seg_for(kRootA, 2, 10, 0);
  EXPECT_EQ(tree.insert(kRootA, true, b, &actions), KnowledgeTree::InsertOutcome::kNoSpace);
  EXPECT_TRUE(tree.info(a->header().key).has_value());
  tree.unpin(a->header().key, uid);
  EXPECT_EQ(tree.insert(kRootA, true, b, &actions), KnowledgeTree::InsertOutcome::kInserted);
  EXPECT_FALSE(tree.info(a->header().key).has_value()) << "no slower tier: evicted for good";
  auto orphan = seg_for(Hash128{5, 5}, 3, 2, 1);
  EXPECT_EQ(tree.insert(Hash128{5, 5}, false, orphan, &actions), KnowledgeTree::InsertOutcome::kParentMissing);
}

TEST(KnowledgeTree, PgdsfKeepsCostlierNodesThanLru) {
  // Two leaves of equal size and frequency: one deep under a long cached prefix (attention over
  // the prefix makes it costlier to recompute), one at the root. LRU evicts the older (deep) one;
  // PGDSF evicts the cheaper one.
  for (EvictionPolicy p : {EvictionPolicy::kLru, EvictionPolicy::kPgdsf}) {
    TreeOptions o = small_opts(p, 0, 0, 0);
    auto cost = PrefillCostModel::from_grid({0, 10000}, {1, 1000}, {1e-4, 0.1, 1.0, 1.0e3});
    ASSERT_TRUE(cost.ok());
    o.cost = *cost;
    auto prefix = seg_for(kRootA, 1, 200, 0);
    auto deep = seg_for(prefix->header().key, 2, 10, 1);
    auto shallow = seg_for(kRootA, 3, 10, 0);
    auto extra = seg_for(kRootA, 4, 10, 0);
    o.capacity[0] = prefix->size() + deep->size() + shallow->size();
    KnowledgeTree tree(o);
    std::vector<TierAction> actions;
    ASSERT_EQ(tree.insert(kRootA, true, prefix, &actions), KnowledgeTree::InsertOutcome::kInserted);
    ASSERT_EQ(tree.insert(prefix->header().key, false, deep, &actions), KnowledgeTree::InsertOutcome::kInserted);
    ASSERT_EQ(tree.insert(kRootA, true, shallow, &actions), KnowledgeTree::InsertOutcome::kInserted);
    uint64_t uid = tree.pin(prefix->header().key);  // keep the prefix out of the comparison
    ASSERT_EQ(tree.insert(kRootA, true, extra, &actions), KnowledgeTree::InsertOutcome::kInserted);
    tree.unpin(prefix->header().key, uid);
    const bool deep_kept = tree.info(deep->header().key).has_value();
    const bool shallow_kept = tree.info(shallow->header().key).has_value();
    if (p == EvictionPolicy::kLru) {
      EXPECT_FALSE(deep_kept);
      EXPECT_TRUE(shallow_kept);
    } else {
      EXPECT_TRUE(deep_kept);
      EXPECT_FALSE(shallow_kept);
      EXPECT_GT(tree.counters(Tier::kHbm).clock, 0.0);  // the clock moved to the victim's priority
    }
  }
}

TEST(KnowledgeTree, FrequencyHistorySurvivesRemoval) {
  for (size_t history : {size_t{0}, size_t{16}}) {
    TreeOptions o = small_opts(EvictionPolicy::kLfu, 100000, 0, 0);
    o.frequency_history = history;
    KnowledgeTree tree(o);
    std::vector<TierAction> actions;
    auto a = seg_for(kRootA, 1, 5, 0);
    ASSERT_EQ(tree.insert(kRootA, true, a, &actions), KnowledgeTree::InsertOutcome::kInserted);
    std::vector<Hash128> docs = {testing::dk(1)};
    for (int i = 0; i < 5; ++i) tree.match(kRootA, docs, true);
    EXPECT_EQ(tree.info(a->header().key)->frequency, 6.0);
    tree.drop_subtree(a->header().key, Tier::kHbm, &actions);
    ASSERT_FALSE(tree.info(a->header().key).has_value());
    ASSERT_EQ(tree.insert(kRootA, true, a, &actions), KnowledgeTree::InsertOutcome::kInserted);
    EXPECT_EQ(tree.info(a->header().key)->frequency, history ? 7.0 : 1.0);
  }
  // The history is bounded: the oldest remembered counts are forgotten first.
  TreeOptions o = small_opts(EvictionPolicy::kLfu, 100000, 0, 0);
  o.frequency_history = 2;
  KnowledgeTree tree(o);
  std::vector<TierAction> actions;
  std::vector<SegmentRef> segs;
  for (uint64_t d = 1; d <= 3; ++d) {
    segs.push_back(seg_for(kRootA, d, 3, 0));
    ASSERT_EQ(tree.insert(kRootA, true, segs.back(), &actions), KnowledgeTree::InsertOutcome::kInserted);
  }
  for (auto& s : segs) tree.drop_subtree(s->header().key, Tier::kHbm, &actions);
  for (auto& s : segs) ASSERT_EQ(tree.insert(kRootA, true, s, &actions), KnowledgeTree::InsertOutcome::kInserted);
  EXPECT_EQ(tree.info(segs[0]->header().key)->frequency, 1.0);
  EXPECT_EQ(tree.info(segs[1]->header().key)->frequency, 2.0);
  EXPECT_EQ(tree.info(segs[2]->header().key)->frequency, 2.0);
}

TEST(KnowledgeTree, RestoreRejectsOrphansAndDisableDropsSubtrees) {
  KnowledgeTree tree(small_opts(EvictionPolicy::kLru, 10000, 10000, 100000));
  auto a = seg_for(kRootA, 1, 4, 0);
  auto b = seg_for(a->header().key, 2, 4, 1);
  EXPECT_FALSE(tree.restore(Tier::kSsd, b->header())) << "parent not restored yet";
  EXPECT_TRUE(tree.restore(Tier::kSsd, a->header()));
  EXPECT_TRUE(tree.restore(Tier::kSsd, b->header()));
  EXPECT_FALSE(tree.restore(Tier::kSsd, b->header())) << "duplicate";
  EXPECT_EQ(tree.info(b->header().key)->tiers, tier_bit(Tier::kSsd));
  std::vector<TierAction> actions;
  ASSERT_TRUE(tree.promote(a->header().key, Tier::kDram, a, &actions));
  tree.disable_tier(Tier::kSsd);
  EXPECT_FALSE(tree.info(b->header().key).has_value());
  EXPECT_EQ(tree.info(a->header().key)->tiers, tier_bit(Tier::kDram));
  EXPECT_EQ(tree.capacity(Tier::kSsd), 0u);
  EXPECT_TRUE(tree.check_invariants().ok());
}

}  // namespace
}  // namespace ragd::kvstore
