// KnowledgeTree: the bookkeeping half of the kvstore (RAGCache's knowledge tree), without I/O.
//
// Nodes are documents under their parent path (a root per scope key: model + format + tenant).
// Every node lives in one or more of the tree's tiers (tier.h: the kMemory and kStored tiers of the
// store's list — HBM role, DRAM, SSD and any registered stored tier). Invariants, checked by
// check_invariants():
//   - a node in tier t has its parent in tier t (or its parent is a root);
//   - every node is in at least one tier (a node that leaves its last tier is removed);
//   - bytes used in tier t <= capacity of t;
//   - eviction takes leaves of a tier only (no child in that tier) and never a pinned node.
// Eviction from a memory tier t of a node that is in no slower tier demotes it to the next slower
// tier that has room (copying first any ancestors missing there, which are all in t); a node
// already in a slower tier is just dropped from t (swap out once). Eviction from a stored tier
// drops (its bytes are not at hand to copy). Which leaf goes first is decided by the eviction
// policy (eviction.h), with one clock per tier.
//
// Memory tiers (HBM role, DRAM) hold SegmentRefs; a stored tier (SSD, registered ones) is
// represented by TierActions the caller carries out in order (put / delete), with the segment kept
// as "pending" until the caller reports the write done (write_done), within a pending-write budget
// per stored tier.
//
// Pool mode (TreeOptions::pool set): the HBM tier is the engine's KV pool. A node's HBM copy is a
// PoolCopy (a BlockTable sharing, by ref count, the pool blocks of the node's whole token prefix;
// copy-on-write as for any sequence), placed with insert_pool / promote_pool. Leaving the HBM tier
// releases the copy's blocks through the PoolTier; an HBM node demoted to a slower tier is exported
// (gathered) only when it is in no slower tier yet (swap out once). Segment inserts and promotions
// skip the HBM tier in pool mode. Pool pressure (the scheduler needs free blocks) evicts by the same
// policy with evict_one(kHbm).
//
// Write-behind (TreeOptions::write_behind): every node placed in the slowest memory tier (DRAM) is
// also queued for the first usable stored tier (a TierAction put) while the pending-write budget
// allows, so a stored copy exists before DRAM evicts it and a restart finds it again; without a
// DRAM tier insert_pool queues the stored copy itself.
//
// Thread-safety: NOT thread-safe; KvStore serialises access with its mutex. In pool mode every
// call that can place or remove an HBM copy (insert_pool, promote_pool, evict_one(kHbm),
// detach_pool, make_room in HBM) must run on the thread that owns the engine pool.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "ragd/common/hash.h"
#include "ragd/common/status.h"
#include "ragd/engine/kv_cache.h"
#include "ragd/kvstore/eviction.h"
#include "ragd/kvstore/segment.h"
#include "ragd/kvstore/tier.h"

namespace ragd::kvstore {

struct TreeNodeInfo;

// A node's copy in the engine pool: the node's own tokens are [begin, end) of its path, and `table`
// holds path tokens [base, end) in shared blocks (BlockTable::fork_range: base is begin rounded down
// to the block size), so a node holds its own blocks, not the whole path before it.
struct PoolCopy {
  engine::BlockTable table;
  int begin = 0;
  int end = 0;
  int base = 0;
};

// Pool mode's lower-tier copies of new pool nodes (KvStore::insert_pool; the simulator's host
// model runs the same rules): a copy in flight holds its blocks, so none starts for a node in the
// pool while less than half the pool is free (the node is demoted when the pool evicts it), and at
// most `limit` bytes of copies are in flight.
inline bool pool_copy_blocked(bool pooled, uint64_t free_blocks, uint64_t total_blocks) {
  return pooled && free_blocks * 2 < total_blocks;
}
inline bool pool_copy_over_budget(uint64_t inflight_bytes, uint64_t bytes, uint64_t limit) {
  return inflight_bytes + bytes > limit;
}

// The engine pool's side of the HBM tier (implemented by KvStore). Called with the tree's lock held,
// on the thread that owns the pool.
class PoolTier {
 public:
  virtual ~PoolTier() = default;
  // A host segment of the node's own tokens (for a demotion); null when it cannot be built.
  virtual SegmentRef export_segment(const TreeNodeInfo& node, const PoolCopy& copy) = 0;
  // Returns the copy's blocks to the pool (ref counts -1).
  virtual void release(PoolCopy& copy) = 0;
};

struct TreeOptions {
  // Kind of each tier (index = Tier; tier.h): the tree holds kMemory and kStored tiers and ignores
  // the others (kShared: the remote tier; kNone: unused ids).
  std::array<TierKind, kMaxTiers> kinds = {TierKind::kMemory, TierKind::kMemory, TierKind::kStored, TierKind::kShared,
                                           TierKind::kNone, TierKind::kNone};
  // Byte capacity per tier (index = Tier). 0 = the tier holds nothing. Defaults: those of
  // kvstore::Options (256 MiB, 1 GiB, 8 GiB).
  std::array<uint64_t, kMaxTiers> capacity = {256ull << 20, 1ull << 30, 8ull << 30, 0, 0, 0};
  EvictionPolicy policy = EvictionPolicy::kPgdsf;
  PrefillCostModel cost;  // PGDSF cost; analytic default when not profiled
  // Most bytes of writes that may be queued (not yet written) per stored tier; demotions beyond it
  // drop.
  uint64_t max_pending_bytes = 256ull << 20;  // default 256 MiB
  // How many removed nodes keep their access count, so a re-inserted popular document resumes
  // its frequency (lfu / gdsf / pgdsf). 0 = forget on removal. Default 65536 entries.
  size_t frequency_history = 65536;
  // The engine pool as the HBM tier (pool mode); null = the HBM role holds host segments.
  PoolTier* pool = nullptr;
  // Queue a stored copy of every node placed in DRAM (write-behind). Default off.
  bool write_behind = false;
  // Observer of tier membership: called once each time a node enters a tier (entered = true) and
  // once each time it leaves one (false), on every path (insert, promotion, demotion, eviction,
  // drop, disable, detach, restore), with the node's state after the change (a node that left its
  // last tier has tiers == 0 and is gone after the call). Called with the tree's lock held (the
  // caller's): it must not block nor call back into the tree. Null = none.
  std::function<void(const TreeNodeInfo&, Tier, bool entered)> on_tier_change;
};

// A write the caller carries out on a stored tier, in order.
struct TierAction {
  enum class Kind : uint8_t { kPut, kDelete } kind = Kind::kPut;
  Tier tier = Tier::kSsd;
  Hash128 key;
  uint64_t uid = 0;        // node incarnation (for write completion)
  SegmentRef segment;      // kPut
  uint32_t num_layers = 0;
};

struct TreeNodeInfo {
  Hash128 key;
  Hash128 parent_key;  // the parent's key (a scope key at depth 0)
  Hash128 doc;
  uint64_t uid = 0;
  uint8_t tiers = 0;       // bit set of tier_bit()
  Tier fastest = Tier::kSsd;
  uint32_t num_tokens = 0;
  int32_t first_position = 0;
  uint32_t prefix_tokens = 0;  // tokens of all ancestors
  uint32_t depth = 0;
  uint64_t bytes = 0;
  int pins = 0;
  double frequency = 0;      // access count (lookups + inserts), incl. remembered history
  uint8_t pending = 0;       // stored tiers (tier_bit) whose write is queued, not yet done
};

struct TierCounters {
  uint64_t used_bytes = 0;
  uint64_t nodes = 0;
  uint64_t inserts = 0;     // new nodes placed here
  uint64_t evictions = 0;   // nodes evicted from here by capacity pressure
  uint64_t demotions = 0;   // nodes copied here because a faster tier evicted them
  uint64_t promotions = 0;  // nodes copied here from a slower tier on use
  uint64_t drops = 0;       // nodes removed for corruption or a disabled tier
  uint64_t written_behind = 0;  // stored tiers: copies queued because DRAM got the node (write-behind)
  double clock = 0;
};

class KnowledgeTree {
 public:
  enum class InsertOutcome : uint8_t { kInserted, kExists, kParentMissing, kNoSpace };

  explicit KnowledgeTree(TreeOptions opts);
  ~KnowledgeTree();
  KnowledgeTree(const KnowledgeTree&) = delete;
  KnowledgeTree& operator=(const KnowledgeTree&) = delete;

  // Longest cached path from `root` along `docs`. With touch, every matched node counts an access.
  std::vector<TreeNodeInfo> match(const Hash128& root, std::span<const Hash128> docs, bool touch);
  std::optional<TreeNodeInfo> info(const Hash128& key) const;

  // Inserts `seg` (its header carries key, doc, depth, token count) under parent_key (a node key,
  // or a root key when parent_is_root). Placed in the fastest tier that has the parent and room.
  // *placed receives the tier when inserted.
  InsertOutcome insert(const Hash128& parent_key, bool parent_is_root, const SegmentRef& seg,
                       std::vector<TierAction>* actions, Tier* placed = nullptr);
  // Pool mode: inserts a node whose KV is in the engine pool (`copy`), and also in DRAM when `seg`
  // (the node's own tokens) is given. `h` names the node (key, doc, depth, token count, position,
  // layers; no payload) and `bytes` is its segment size. Placed in HBM when the parent is there and
  // room can be made; in DRAM otherwise (needs seg). An existing node is touched (kExists) and, when
  // not in HBM yet, gets the copy (promote_pool). A copy that is not kept is released.
  InsertOutcome insert_pool(const Hash128& parent_key, bool parent_is_root, const SegmentHeader& h, uint64_t bytes,
                            PoolCopy copy, const SegmentRef& seg, std::vector<TierAction>* actions,
                            Tier* placed = nullptr);
  // Pool mode: an existing node (in DRAM / SSD) is now also in the pool. False (copy released) when
  // its parent is not in HBM or no room can be made.
  bool promote_pool(const Hash128& key, PoolCopy copy, std::vector<TierAction>* actions);
  // The node's pool copy (pool mode), null when it is not in HBM. Valid until the next mutation.
  const PoolCopy* pool_copy(const Hash128& key) const;
  // Evicts one leaf of tier t by policy (demoting it when it is in no slower tier). False when no
  // unpinned leaf exists.
  bool evict_one(Tier t, std::vector<TierAction>* actions);
  // Pool mode, shutdown: every node leaves the HBM tier, pins ignored (demoted first when it is in
  // no slower tier), so no pool block stays referenced.
  void detach_pool(std::vector<TierAction>* actions);

  // Re-registers a node found in stored tier t's index at startup (no action). False when its
  // parent is missing from that tier (orphan) or it already exists.
  bool restore(Tier t, const SegmentHeader& h);

  // Copies a node into a faster tier t (parent must be in t). True when it is in t afterwards.
  bool promote(const Hash128& key, Tier t, const SegmentRef& seg, std::vector<TierAction>* actions);
  // Removes a node and its descendants from tier t (corruption). Counts as drops.
  void drop_subtree(const Hash128& key, Tier t, std::vector<TierAction>* actions);
  // Disables a tier: every node leaves it (nodes only there are removed); capacity becomes 0.
  void disable_tier(Tier t);
  // Evicts until every tier fits its capacity (after restore).
  void enforce_capacity(std::vector<TierAction>* actions);

  // Pins keep a node (and so its ancestors in each of its tiers) from eviction.
  // pin returns the node's uid (0 when the key is unknown); unpin is a no-op for a stale uid.
  uint64_t pin(const Hash128& key);
  void unpin(const Hash128& key, uint64_t uid);

  // The host copy in memory tier t, or the pending write's buffer in stored tier t; null if none.
  SegmentRef segment(const Hash128& key, Tier t) const;
  // The caller finished a put to stored tier t for (key, uid).
  void write_done(const Hash128& key, Tier t, uint64_t uid);

  // Where a pool node's lower copy goes: the first tree tier below HBM with capacity (DRAM, else
  // the first stored tier); nullopt = none.
  std::optional<Tier> copy_tier() const;
  TierKind kind(Tier t) const;
  bool in_tree(Tier t) const;  // a kMemory or kStored tier
  bool tier_enabled(Tier t) const;
  TierCounters counters(Tier t) const;
  uint64_t capacity(Tier t) const;
  size_t num_nodes() const;
  size_t num_pinned() const;
  EvictionPolicy policy() const;

  // Full structural check (tests): Internal naming the violated invariant.
  Status check_invariants() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ragd::kvstore
