#include "ragd/kvstore/knowledge_tree.h"

#include <algorithm>
#include <deque>
#include <set>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "ragd/common/check.h"

namespace ragd::kvstore {

namespace {

struct Node;
// (priority, last access tick, uid, node): the first unpinned leaf in this order is the victim.
using OrderKey = std::tuple<double, uint64_t, uint64_t, Node*>;

struct Node {
  Hash128 key;
  Hash128 doc;
  uint64_t uid = 0;
  Node* parent = nullptr;
  bool is_root = false;
  std::unordered_map<Hash128, Node*, Hash128Hasher> children;  // by doc key
  uint32_t tokens = 0;
  uint32_t prefix_tokens = 0;
  uint32_t depth = 0;
  int32_t first_position = 0;
  uint64_t bytes = 0;
  uint32_t num_layers = 0;
  uint8_t tiers = 0;
  std::array<int, kMaxTiers> kids_in{};  // children resident in each tier
  int pins = 0;
  double freq = 0;
  uint64_t last = 0;
  std::array<OrderKey, kMaxTiers> entry{};  // valid while in the tier
  // Memory tiers: the host copy (HBM role without a pool, DRAM). Stored tiers: the queued write.
  std::array<SegmentRef, kMaxTiers> buf;
  std::unique_ptr<PoolCopy> pool;           // pool mode: the HBM copy
  uint8_t pending = 0;                      // stored tiers whose write is queued (bits)

  bool in(int t) const { return (tiers >> t) & 1u; }
  uint32_t layers() const { return num_layers; }
};

constexpr int kHbm = static_cast<int>(Tier::kHbm);

}  // namespace

struct KnowledgeTree::Impl {
  TreeOptions opt;
  std::array<bool, kMaxTiers> enabled{};
  std::unordered_map<Hash128, std::unique_ptr<Node>, Hash128Hasher> nodes;  // non-root nodes
  std::unordered_map<Hash128, std::unique_ptr<Node>, Hash128Hasher> roots;
  std::array<std::set<OrderKey>, kMaxTiers> order;
  std::array<TierCounters, kMaxTiers> ctr{};
  uint64_t tick = 0;
  uint64_t next_uid = 1;
  std::array<uint64_t, kMaxTiers> pending_bytes{};  // stored tiers: queued writes
  int dram = -1;  // the slowest memory tier (write-behind's source); -1 = none
  // Access counts of recently removed nodes (frequency history), bounded FIFO.
  std::unordered_map<Hash128, std::pair<double, uint64_t>, Hash128Hasher> ghost;  // key -> (count, seq)
  std::deque<std::pair<Hash128, uint64_t>> ghost_order;
  uint64_t ghost_seq = 0;

  explicit Impl(TreeOptions o) : opt(std::move(o)) {
    for (int t = 0; t < kMaxTiers; ++t) {
      enabled[t] = in_tree(t);
      if (memory(t) && t > kHbm) dram = t;
    }
  }

  bool memory(int t) const { return opt.kinds[t] == TierKind::kMemory; }
  bool stored(int t) const { return opt.kinds[t] == TierKind::kStored; }
  bool in_tree(int t) const { return memory(t) || stored(t); }

  Node* find(const Hash128& k) const {
    auto it = nodes.find(k);
    return it == nodes.end() ? nullptr : it->second.get();
  }

  Node* root(const Hash128& k) {
    auto& r = roots[k];
    if (!r) {
      r = std::make_unique<Node>();
      r->key = k;
      r->is_root = true;
      r->uid = next_uid++;
    }
    return r.get();
  }

  bool usable(int t) const { return enabled[t] && opt.capacity[t] > 0; }  // enabled only for tree tiers
  bool pool_mode() const { return opt.pool != nullptr; }

  // The first usable stored tier (write-behind's and insert_pool's target); -1 = none.
  int first_stored() const {
    for (int t = 0; t < kMaxTiers; ++t)
      if (stored(t) && usable(t)) return t;
    return -1;
  }

  // Queues a stored copy of a node that just got into DRAM (write-behind), when its parent is in
  // that tier (or it hangs from a root) and the pending-write budget allows.
  void write_behind(Node* n, std::vector<TierAction>* actions) {
    const int s = first_stored();
    if (!opt.write_behind || s < 0 || dram < 0 || n->in(s) || !n->in(dram) || !n->buf[dram]) return;
    if (!n->parent->is_root && !n->parent->in(s)) return;
    if (!room_for_write(s, n->bytes)) return;
    n->pins += 1;
    if (!n->parent->is_root) n->parent->pins += 1;
    const bool ok = make_room(s, n->bytes, actions);
    n->pins -= 1;
    if (!n->parent->is_root) n->parent->pins -= 1;
    if (!ok) return;
    place(n, s, n->buf[dram], actions, /*write=*/true);
    ctr[s].written_behind += 1;
  }

  double primary(const Node* n, int t) const {
    const double kib = std::max(1.0, static_cast<double>(n->bytes) / 1024.0);
    switch (opt.policy) {
      case EvictionPolicy::kLru: return static_cast<double>(n->last);
      case EvictionPolicy::kLfu: return n->freq;
      case EvictionPolicy::kGdsf: return ctr[t].clock + n->freq / kib;
      case EvictionPolicy::kPgdsf: return ctr[t].clock + n->freq * opt.cost.seconds(n->prefix_tokens, n->tokens) / kib;
    }
    return 0;
  }

  // order[t] holds the leaves of tier t only (nodes in t with no child in t): the only candidates
  // for eviction, so finding a victim does not walk past the internal nodes of a large tree. An
  // internal node's entry is kept current and enters the order when its last child leaves t.
  void reorder(Node* n, int t) {
    const bool leaf = n->kids_in[t] == 0;
    if (leaf) order[t].erase(n->entry[t]);
    n->entry[t] = OrderKey{primary(n, t), n->last, n->uid, n};
    if (leaf) order[t].insert(n->entry[t]);
  }

  void touch(Node* n) {
    n->last = ++tick;
    n->freq += 1;
    for (int t = 0; t < kMaxTiers; ++t)
      if (n->in(t)) reorder(n, t);
  }

  // place() and remove_from() are the only places that set / clear a node's tier bit (and so the
  // only callers of the on_tier_change observer).
  void place(Node* n, int t, const SegmentRef& seg, std::vector<TierAction>* actions, bool write) {
    RAGD_CHECK(!n->in(t)) << "node already in tier " << t;
    n->tiers |= static_cast<uint8_t>(1u << t);
    ctr[t].used_bytes += n->bytes;
    ctr[t].nodes += 1;
    if (!n->parent->is_root && n->parent->kids_in[t]++ == 0) order[t].erase(n->parent->entry[t]);
    n->entry[t] = OrderKey{primary(n, t), n->last, n->uid, n};
    if (n->kids_in[t] == 0) order[t].insert(n->entry[t]);
    if (t == kHbm && pool_mode()) {
      RAGD_CHECK(n->pool != nullptr) << "pool-mode HBM placement without a pool copy";
    } else if (memory(t)) {
      n->buf[t] = seg;
    } else if (write) {
      n->buf[t] = seg;
      n->pending |= static_cast<uint8_t>(1u << t);
      pending_bytes[t] += n->bytes;
      if (actions)
        actions->push_back({TierAction::Kind::kPut, tier_at(t), n->key, n->uid, seg, static_cast<uint32_t>(n->layers())});
    }
    if (opt.on_tier_change) opt.on_tier_change(info_of(n), static_cast<Tier>(t), true);
  }

  // Removes n from tier t; erases n when it has no tier left. Returns false when n was erased.
  bool remove_from(Node* n, int t, std::vector<TierAction>* actions) {
    RAGD_CHECK(n->in(t)) << "node not in tier " << t;
    order[t].erase(n->entry[t]);
    n->tiers &= static_cast<uint8_t>(~(1u << t));
    ctr[t].used_bytes -= n->bytes;
    ctr[t].nodes -= 1;
    if (!n->parent->is_root && --n->parent->kids_in[t] == 0 && n->parent->in(t)) order[t].insert(n->parent->entry[t]);
    if (t == kHbm && n->pool) {
      opt.pool->release(*n->pool);
      n->pool.reset();
    } else if (memory(t)) {
      n->buf[t].reset();
    } else {
      clear_pending(n, t);
      if (actions) actions->push_back({TierAction::Kind::kDelete, tier_at(t), n->key, n->uid, nullptr, n->layers()});
    }
    if (opt.on_tier_change) opt.on_tier_change(info_of(n), static_cast<Tier>(t), false);
    if (n->tiers == 0) {
      RAGD_CHECK(n->children.empty()) << "a node in no tier still has children";
      remember(n->key, n->freq);
      n->parent->children.erase(n->doc);
      nodes.erase(n->key);
      return false;
    }
    return true;
  }

  void remember(const Hash128& k, double freq) {
    if (opt.frequency_history == 0) return;
    const uint64_t seq = ++ghost_seq;
    ghost[k] = {freq, seq};
    ghost_order.emplace_back(k, seq);
    while (ghost_order.size() > opt.frequency_history) {
      auto [key, s] = ghost_order.front();
      ghost_order.pop_front();
      auto it = ghost.find(key);
      if (it != ghost.end() && it->second.second == s) ghost.erase(it);  // not re-remembered since
    }
  }
  double recall(const Hash128& k) {
    auto it = ghost.find(k);
    if (it == ghost.end()) return 0;
    const double f = it->second.first;
    ghost.erase(it);
    return f;
  }

  Node* pick_victim(int t) const {
    for (const OrderKey& e : order[t]) {
      Node* n = std::get<3>(e);
      if (n->pins == 0 && n->kids_in[t] == 0) return n;
    }
    return nullptr;
  }

  // A stored tier's write budget: true for any other tier.
  bool room_for_write(int t, uint64_t bytes) const {
    return !stored(t) || pending_bytes[t] + bytes <= opt.max_pending_bytes;
  }
  void clear_pending(Node* n, int t) {
    if (!(n->pending & (1u << t))) return;
    pending_bytes[t] -= n->bytes;
    n->pending &= static_cast<uint8_t>(~(1u << t));
    n->buf[t].reset();
  }

  // Makes room for `bytes` more in tier t. False (some evictions may have happened) when pinned
  // or internal nodes block it.
  bool make_room(int t, uint64_t bytes, std::vector<TierAction>* actions) {
    if (!usable(t) || bytes > opt.capacity[t]) return false;
    while (ctr[t].used_bytes + bytes > opt.capacity[t]) {
      Node* v = pick_victim(t);
      if (!v) return false;
      evict(v, t, actions);
    }
    return true;
  }

  // Copies v (and any ancestors missing there) into tier u; all of them are in tier t.
  bool demote(Node* v, int t, int u, std::vector<TierAction>* actions) {
    std::vector<Node*> chain;
    for (Node* a = v; !a->is_root && !a->in(u); a = a->parent) chain.push_back(a);
    std::reverse(chain.begin(), chain.end());
    if (chain.empty()) return true;
    // Keep the chain, and the ancestor it hangs from in u, while room is made.
    Node* anchor = chain.front()->parent->is_root ? nullptr : chain.front()->parent;
    if (anchor) anchor->pins += 1;
    for (Node* a : chain) a->pins += 1;
    bool ok = true;
    for (Node* a : chain) {
      SegmentRef seg = a->buf[t];
      if (t == kHbm && a->pool) seg = opt.pool->export_segment(info_of(a), *a->pool);
      if (!seg || !room_for_write(u, a->bytes) || !make_room(u, a->bytes, actions)) {
        ok = false;
        break;
      }
      place(a, u, seg, actions, /*write=*/true);
      ctr[u].demotions += 1;
      if (u == dram) write_behind(a, actions);
    }
    for (Node* a : chain) a->pins -= 1;
    if (anchor) anchor->pins -= 1;
    return ok;
  }

  void evict(Node* v, int t, std::vector<TierAction>* actions) {
    if (opt.policy == EvictionPolicy::kGdsf || opt.policy == EvictionPolicy::kPgdsf)
      ctr[t].clock = std::max(ctr[t].clock, std::get<0>(v->entry[t]));
    ctr[t].evictions += 1;
    bool in_slower = false;
    for (int u = t + 1; u < kMaxTiers; ++u) in_slower |= v->in(u);
    if (!in_slower && memory(t)) {
      v->pins += 1;  // not a victim of the cascade below
      for (int u = t + 1; u < kMaxTiers; ++u) {
        if (usable(u) && demote(v, t, u, actions)) break;
      }
      v->pins -= 1;
    }
    remove_from(v, t, actions);
  }

  void drop_subtree(Node* n, int t, std::vector<TierAction>* actions) {
    std::vector<Node*> kids;
    for (auto& [d, c] : n->children)
      if (c->in(t)) kids.push_back(c);
    for (Node* c : kids) drop_subtree(c, t, actions);
    ctr[t].drops += 1;
    remove_from(n, t, actions);
  }

  TreeNodeInfo info_of(const Node* n) const {
    TreeNodeInfo i;
    i.key = n->key;
    i.parent_key = n->parent->key;
    i.doc = n->doc;
    i.uid = n->uid;
    i.tiers = n->tiers;
    for (int t = kMaxTiers - 1; t >= 0; --t)
      if (n->in(t)) i.fastest = static_cast<Tier>(t);
    i.num_tokens = n->tokens;
    i.first_position = n->first_position;
    i.prefix_tokens = n->prefix_tokens;
    i.depth = n->depth;
    i.bytes = n->bytes;
    i.pins = n->pins;
    i.frequency = n->freq;
    i.pending = n->pending;
    return i;
  }

  Node* new_node(Node* parent, const SegmentHeader& h, uint64_t bytes) {
    auto owned = std::make_unique<Node>();
    Node* n = owned.get();
    n->key = h.key;
    n->doc = h.doc_key;
    n->uid = next_uid++;
    n->parent = parent;
    n->tokens = h.num_tokens;
    n->first_position = h.first_position;
    n->depth = h.depth;
    n->prefix_tokens = parent->is_root ? 0 : parent->prefix_tokens + parent->tokens;
    n->bytes = bytes;
    n->num_layers = h.num_layers;
    nodes.emplace(h.key, std::move(owned));
    parent->children.emplace(h.doc_key, n);
    return n;
  }

  void erase_tierless(Node* n) {
    if (n->tiers != 0) return;
    n->parent->children.erase(n->doc);
    nodes.erase(n->key);
  }

  // An insert pins the new node and its parent while it makes room in the tiers (pin_new), then
  // unpins them; a node that found no tier is removed again (end_insert).
  void pin_new(Node* n, Node* parent) {
    n->pins += 1;
    if (!parent->is_root) parent->pins += 1;
  }
  KnowledgeTree::InsertOutcome end_insert(Node* n, Node* parent, bool ok) {
    n->pins -= 1;
    if (!parent->is_root) parent->pins -= 1;
    if (!ok) {
      erase_tierless(n);
      return InsertOutcome::kNoSpace;
    }
    return InsertOutcome::kInserted;
  }
};

KnowledgeTree::KnowledgeTree(TreeOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {}
KnowledgeTree::~KnowledgeTree() = default;

std::vector<TreeNodeInfo> KnowledgeTree::match(const Hash128& root, std::span<const Hash128> docs, bool touch) {
  std::vector<TreeNodeInfo> out;
  auto rit = impl_->roots.find(root);
  if (rit == impl_->roots.end()) return out;
  Node* cur = rit->second.get();
  for (const Hash128& d : docs) {
    auto it = cur->children.find(d);
    if (it == cur->children.end()) break;
    cur = it->second;
    if (touch) impl_->touch(cur);
    out.push_back(impl_->info_of(cur));
  }
  return out;
}

std::optional<TreeNodeInfo> KnowledgeTree::info(const Hash128& key) const {
  const Node* n = impl_->find(key);
  if (!n) return std::nullopt;
  return impl_->info_of(n);
}

KnowledgeTree::InsertOutcome KnowledgeTree::insert(const Hash128& parent_key, bool parent_is_root, const SegmentRef& seg,
                                                   std::vector<TierAction>* actions, Tier* placed) {
  Impl& m = *impl_;
  const SegmentHeader& h = seg->header();
  Node* parent = parent_is_root ? m.root(parent_key) : m.find(parent_key);
  if (!parent) return InsertOutcome::kParentMissing;
  if (auto it = parent->children.find(h.doc_key); it != parent->children.end()) {
    m.touch(it->second);
    return InsertOutcome::kExists;
  }
  if (m.find(h.key)) return InsertOutcome::kExists;
  Node* n = m.new_node(parent, h, seg->size());
  m.pin_new(n, parent);
  bool ok = false;
  for (int t = 0; t < kMaxTiers && !ok; ++t) {
    if (!m.usable(t) || (t == kHbm && m.pool_mode())) continue;
    if (!parent->is_root && !parent->in(t)) continue;
    if (!m.room_for_write(t, n->bytes)) continue;
    if (!m.make_room(t, n->bytes, actions)) continue;
    n->last = ++m.tick;
    n->freq = 1 + m.recall(n->key);
    m.place(n, t, seg, actions, /*write=*/true);
    m.ctr[t].inserts += 1;
    if (placed) *placed = static_cast<Tier>(t);
    if (t == m.dram) m.write_behind(n, actions);
    ok = true;
  }
  return m.end_insert(n, parent, ok);
}

KnowledgeTree::InsertOutcome KnowledgeTree::insert_pool(const Hash128& parent_key, bool parent_is_root,
                                                        const SegmentHeader& h, uint64_t bytes, PoolCopy copy,
                                                        const SegmentRef& seg, std::vector<TierAction>* actions,
                                                        Tier* placed) {
  Impl& m = *impl_;
  RAGD_CHECK(m.pool_mode()) << "insert_pool without a pool tier";
  Node* parent = parent_is_root ? m.root(parent_key) : m.find(parent_key);
  if (!parent) {
    m.opt.pool->release(copy);
    return InsertOutcome::kParentMissing;
  }
  Node* existing = nullptr;
  if (auto it = parent->children.find(h.doc_key); it != parent->children.end()) existing = it->second;
  else existing = m.find(h.key);
  if (existing) {
    m.touch(existing);
    if (existing->in(kHbm)) m.opt.pool->release(copy);
    else promote_pool(existing->key, std::move(copy), actions);
    return InsertOutcome::kExists;
  }
  Node* n = m.new_node(parent, h, bytes);
  m.pin_new(n, parent);
  n->last = ++m.tick;
  n->freq = 1 + m.recall(n->key);
  bool ok = false;
  if (m.usable(kHbm) && (parent->is_root || parent->in(kHbm)) && m.make_room(kHbm, n->bytes, actions)) {
    n->pool = std::make_unique<PoolCopy>(std::move(copy));
    m.place(n, kHbm, nullptr, actions, /*write=*/false);
    m.ctr[kHbm].inserts += 1;
    if (placed) *placed = Tier::kHbm;
    ok = true;
  } else {
    m.opt.pool->release(copy);
  }
  // The DRAM copy (write-through): a later eviction from the pool is then a drop (swap out once).
  const int d = m.dram;
  if (seg && d >= 0 && m.usable(d) && (parent->is_root || parent->in(d)) && m.make_room(d, n->bytes, actions)) {
    m.place(n, d, seg, actions, /*write=*/true);
    m.ctr[d].inserts += 1;
    if (!ok && placed) *placed = tier_at(d);
    ok = true;
    m.write_behind(n, actions);
  }
  // No DRAM tier (or no room): the lower copy goes straight to the first stored tier, as a segment
  // insert would, when there is no pool copy or write-behind asks for a durable one.
  const int s = m.first_stored();
  if ((!ok || m.opt.write_behind) && (d < 0 || !n->in(d)) && seg && s >= 0 && (parent->is_root || parent->in(s)) &&
      m.room_for_write(s, n->bytes) && m.make_room(s, n->bytes, actions)) {
    m.place(n, s, seg, actions, /*write=*/true);
    m.ctr[s].inserts += 1;
    if (!ok && placed) *placed = tier_at(s);
    ok = true;
  }
  return m.end_insert(n, parent, ok);
}

bool KnowledgeTree::promote_pool(const Hash128& key, PoolCopy copy, std::vector<TierAction>* actions) {
  Impl& m = *impl_;
  RAGD_CHECK(m.pool_mode()) << "promote_pool without a pool tier";
  Node* n = m.find(key);
  bool ok = n && !n->in(kHbm) && m.usable(kHbm) && (n->parent->is_root || n->parent->in(kHbm));
  if (ok) {
    n->pins += 1;
    if (!n->parent->is_root) n->parent->pins += 1;
    ok = m.make_room(kHbm, n->bytes, actions);
    if (ok) {
      n->pool = std::make_unique<PoolCopy>(std::move(copy));
      m.place(n, kHbm, nullptr, actions, /*write=*/false);
      m.ctr[kHbm].promotions += 1;
    }
    n->pins -= 1;
    if (!n->parent->is_root) n->parent->pins -= 1;
  }
  if (!ok) m.opt.pool->release(copy);
  return ok;
}

const PoolCopy* KnowledgeTree::pool_copy(const Hash128& key) const {
  const Node* n = impl_->find(key);
  return n && n->in(kHbm) ? n->pool.get() : nullptr;
}

bool KnowledgeTree::evict_one(Tier tier, std::vector<TierAction>* actions) {
  const int t = static_cast<int>(tier);
  Node* v = impl_->pick_victim(t);
  if (!v) return false;
  impl_->evict(v, t, actions);
  return true;
}

void KnowledgeTree::detach_pool(std::vector<TierAction>* actions) {
  Impl& m = *impl_;
  for (;;) {
    Node* v = nullptr;
    for (const OrderKey& e : m.order[kHbm]) {
      Node* n = std::get<3>(e);
      if (n->kids_in[kHbm] == 0) {
        v = n;
        break;
      }
    }
    if (!v) break;
    const int pins = v->pins;
    const Hash128 key = v->key;
    const uint64_t uid = v->uid;
    v->pins = 0;  // shutdown: a leftover pin must not keep blocks of a pool that goes away
    m.evict(v, kHbm, actions);
    if (Node* still = m.find(key); still && still->uid == uid) still->pins = pins;
  }
}

bool KnowledgeTree::restore(Tier tier, const SegmentHeader& h) {
  Impl& m = *impl_;
  const int t = static_cast<int>(tier);
  if (!m.stored(t) || !m.enabled[t]) return false;
  Node* parent = h.depth == 0 ? m.root(h.parent_key) : m.find(h.parent_key);
  if (!parent || (!parent->is_root && !parent->in(t))) return false;
  Node* n = m.find(h.key);
  if (n) {
    // Found in an earlier stored tier too: one node, in both.
    if (n->in(t) || n->parent != parent) return false;
    m.place(n, t, nullptr, nullptr, /*write=*/false);
    return true;
  }
  if (parent->children.count(h.doc_key)) return false;
  n = m.new_node(parent, h, h.total_bytes());
  n->last = ++m.tick;
  n->freq = 1;
  m.place(n, t, nullptr, nullptr, /*write=*/false);
  return true;
}

bool KnowledgeTree::promote(const Hash128& key, Tier tier, const SegmentRef& seg, std::vector<TierAction>* actions) {
  Impl& m = *impl_;
  const int t = static_cast<int>(tier);
  Node* n = m.find(key);
  if (!n) return false;
  if (n->in(t)) return true;
  if (!m.usable(t) || !seg || (t == kHbm && m.pool_mode())) return false;
  if (!n->parent->is_root && !n->parent->in(t)) return false;
  if (!m.room_for_write(t, n->bytes)) return false;
  n->pins += 1;
  if (!n->parent->is_root) n->parent->pins += 1;
  const bool ok = m.make_room(t, n->bytes, actions);
  if (ok) {
    m.place(n, t, seg, actions, /*write=*/true);
    m.ctr[t].promotions += 1;
    if (t == m.dram) m.write_behind(n, actions);
  }
  n->pins -= 1;
  if (!n->parent->is_root) n->parent->pins -= 1;
  return ok;
}

void KnowledgeTree::drop_subtree(const Hash128& key, Tier tier, std::vector<TierAction>* actions) {
  Node* n = impl_->find(key);
  if (!n || !n->in(static_cast<int>(tier))) return;
  impl_->drop_subtree(n, static_cast<int>(tier), actions);
}

void KnowledgeTree::disable_tier(Tier tier) {
  Impl& m = *impl_;
  const int t = static_cast<int>(tier);
  m.enabled[t] = false;
  std::vector<Node*> tops;
  for (auto& [k, r] : m.roots)
    for (auto& [d, c] : r->children)
      if (c->in(t)) tops.push_back(c);
  for (Node* c : tops) m.drop_subtree(c, t, nullptr);
  m.pending_bytes[t] = 0;
}

void KnowledgeTree::enforce_capacity(std::vector<TierAction>* actions) {
  Impl& m = *impl_;
  for (int t = 0; t < kMaxTiers; ++t) {
    if (!m.in_tree(t)) continue;
    while (m.ctr[t].used_bytes > m.opt.capacity[t]) {
      Node* v = m.pick_victim(t);
      if (!v) break;
      m.evict(v, t, actions);
    }
  }
}

uint64_t KnowledgeTree::pin(const Hash128& key) {
  Node* n = impl_->find(key);
  if (!n) return 0;
  n->pins += 1;
  return n->uid;
}

void KnowledgeTree::unpin(const Hash128& key, uint64_t uid) {
  Node* n = impl_->find(key);
  if (!n || n->uid != uid) return;
  RAGD_CHECK(n->pins > 0) << "unpin of an unpinned node " << key.to_hex();
  n->pins -= 1;
}

SegmentRef KnowledgeTree::segment(const Hash128& key, Tier tier) const {
  const Node* n = impl_->find(key);
  const int t = static_cast<int>(tier);
  if (!n || !n->in(t)) return nullptr;
  return n->buf[t];
}

void KnowledgeTree::write_done(const Hash128& key, Tier tier, uint64_t uid) {
  Node* n = impl_->find(key);
  if (!n || n->uid != uid) return;
  impl_->clear_pending(n, static_cast<int>(tier));
}

std::optional<Tier> KnowledgeTree::copy_tier() const {
  for (int t = kHbm + 1; t < kMaxTiers; ++t)
    if (impl_->usable(t)) return tier_at(t);
  return std::nullopt;
}

TierKind KnowledgeTree::kind(Tier t) const { return impl_->opt.kinds[static_cast<int>(t)]; }
bool KnowledgeTree::in_tree(Tier t) const { return impl_->in_tree(static_cast<int>(t)); }
bool KnowledgeTree::tier_enabled(Tier t) const { return impl_->enabled[static_cast<int>(t)]; }
TierCounters KnowledgeTree::counters(Tier t) const { return impl_->ctr[static_cast<int>(t)]; }
uint64_t KnowledgeTree::capacity(Tier t) const {
  return impl_->enabled[static_cast<int>(t)] ? impl_->opt.capacity[static_cast<int>(t)] : 0;
}
size_t KnowledgeTree::num_nodes() const { return impl_->nodes.size(); }
size_t KnowledgeTree::num_pinned() const {
  size_t n = 0;
  for (auto& [k, node] : impl_->nodes) n += node->pins > 0;
  return n;
}
EvictionPolicy KnowledgeTree::policy() const { return impl_->opt.policy; }

Status KnowledgeTree::check_invariants() const {
  const Impl& m = *impl_;
  std::array<uint64_t, kMaxTiers> used{}, count{}, leaves{}, pending{};
  for (auto& [k, owned] : m.nodes) {
    const Node* n = owned.get();
    const std::string id = k.to_hex();
    if (n->tiers == 0) return Status::Internal("node " + id + " is in no tier");
    if (n->pins < 0) return Status::Internal("node " + id + " has a negative pin count");
    auto pit = n->parent->children.find(n->doc);
    if (pit == n->parent->children.end() || pit->second != n) return Status::Internal("node " + id + " not linked under its parent");
    if (!n->parent->is_root && m.nodes.count(n->parent->key) == 0) return Status::Internal("node " + id + " has an erased parent");
    for (int t = 0; t < kMaxTiers; ++t) {
      int kids = 0;
      for (auto& [d, c] : n->children) kids += c->in(t);
      if (kids != n->kids_in[t]) return Status::Internal(fmt::format("node {}: kids_in[{}] {} != {}", id, t, n->kids_in[t], kids));
      if (!n->in(t)) {
        if (n->buf[t] || (t == kHbm && n->pool) || (n->pending & (1u << t)))
          return Status::Internal(fmt::format("node {} holds a buffer for tier {} it is not in", id, t));
        continue;
      }
      if (!m.in_tree(t)) return Status::Internal(fmt::format("node {} in tier {}, which is not the tree's", id, t));
      if (!m.enabled[t]) return Status::Internal(fmt::format("node {} in disabled tier {}", id, t));
      if (!n->parent->is_root && !n->parent->in(t))
        return Status::Internal(fmt::format("node {} in tier {} but its parent is not", id, tier_name(static_cast<Tier>(t))));
      const bool has_copy = (t == kHbm && m.pool_mode()) ? n->pool != nullptr : n->buf[t] != nullptr;
      if (m.memory(t) && !has_copy) return Status::Internal(fmt::format("node {} in tier {} without a buffer", id, t));
      if (m.stored(t) && (n->buf[t] != nullptr) != (((n->pending >> t) & 1u) != 0))
        return Status::Internal(fmt::format("node {}: tier {}'s pending write and buffer disagree", id, t));
      if ((n->pending >> t) & 1u) pending[t] += n->bytes;
      if (m.order[t].count(n->entry[t]) != (n->kids_in[t] == 0 ? 1u : 0u))
        return Status::Internal(fmt::format("node {}: {} the order of tier {}", id, n->kids_in[t] == 0 ? "leaf missing from" : "internal node in", t));
      used[t] += n->bytes;
      count[t] += 1;
      leaves[t] += n->kids_in[t] == 0;
    }
  }
  for (auto& [k, r] : m.roots)
    for (auto& [d, c] : r->children)
      if (c->parent != r.get()) return Status::Internal("root child with a wrong parent");
  for (int t = 0; t < kMaxTiers; ++t) {
    if (pending[t] != m.pending_bytes[t]) return Status::Internal(fmt::format("tier {}: pending bytes out of sync", t));
    if (used[t] != m.ctr[t].used_bytes)
      return Status::Internal(fmt::format("tier {}: used {} != sum of node bytes {}", t, m.ctr[t].used_bytes, used[t]));
    if (used[t] > m.opt.capacity[t] && m.enabled[t])
      return Status::Internal(fmt::format("tier {}: used {} exceeds capacity {}", t, used[t], m.opt.capacity[t]));
    if (leaves[t] != m.order[t].size() || count[t] != m.ctr[t].nodes)
      return Status::Internal(fmt::format("tier {}: order holds {} entries for {} leaves ({} nodes)", t, m.order[t].size(), leaves[t], count[t]));
  }
  return Status::OK();
}

}  // namespace ragd::kvstore
