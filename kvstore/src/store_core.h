// StoreCore: the state behind KvStore (kv_store.h) and the work its threads do — the knowledge
// tree, the tier list (tier.h) with the backends of the stored and shared tiers, the transfer
// engine (loads on the I/O pool, remote loads on their own threads, stored-tier writes on one
// writer thread in the tree's order) and the pool-to-DRAM copies of pool mode.
//
// Thread-safety: the tree, the counters and `closed` are guarded by `mu`; the copy bookkeeping by
// `cmu`; the writer's in-flight count by `wmu`. Tier backends are thread-safe (KvTier). Methods
// named *_locked expect `mu` held. Pool methods (export_segment, release, release_done_copies_locked)
// run on the thread that owns the engine pool.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ragd/common/thread_pool.h"
#include "ragd/kvstore/engine_io.h"
#include "ragd/kvstore/keys.h"
#include "ragd/kvstore/kv_store.h"

namespace ragd::kvstore::detail {

// The node's own tokens [begin, end) of a pool copy, gathered to the host; first_position = begin.
Result<HostKv> gather_pool_copy(const engine::KvPool& pool, const PoolCopy& c);

struct StoreCore final : PoolTier {
  Options opt;
  KvFormat fmt;

  // ---- tiers (index = Tier) -----------------------------------------------------------------------
  std::array<std::string, kMaxTiers> names;   // "" = no such tier
  std::array<TierKind, kMaxTiers> kinds{};    // kNone for unused ids
  std::array<uint64_t, kMaxTiers> capacity{};
  // Backends of the stored and shared tiers; set at open, closed in close(). Thread-safe.
  std::array<std::unique_ptr<KvTier>, kMaxTiers> backend;
  std::array<std::atomic<bool>, kMaxTiers> up{};  // stored tiers: usable (false after an I/O error)
  std::array<std::string, kMaxTiers> tier_error;  // guarded by mu: why a tier is disabled
  std::array<uint64_t, kMaxTiers> tier_errors{};  // guarded by mu
  RemoteTier* remote = nullptr;                   // backend[kRemote] when the store has one

  // Fills names / kinds / capacity from the options (built-in tiers, then extra_tiers).
  Status configure_tiers();

  // ---- PoolTier (pool mode; scheduler thread, mu held) ----------------------------------------------
  SegmentRef export_segment(const TreeNodeInfo& n, const PoolCopy& c) override;
  void release(PoolCopy& c) override { c.table.release(*opt.pool); }

  mutable std::mutex mu;
  std::unique_ptr<KnowledgeTree> tree;  // guarded by mu
  Stats ctr;                            // guarded by mu (counter fields only)
  bool closed = false;                  // guarded by mu

  // KV events (Options::events; null = off): the tracker is guarded by mu (it is the tree's
  // observer); the publisher is thread-safe and never blocks.
  std::unique_ptr<KvEventPublisher> events_pub;
  std::unique_ptr<KvEventTracker> events;
  // mu held: the tree's on_tier_change observer.
  void on_tier_change_locked(const TreeNodeInfo& n, Tier t, bool entered);
  // mu held, before the tree call that may place node `id`: its own token ids, for KV events.
  // The tree's root key for a request's KV scope: model + KV format, plus the scope when tenant
  // isolation is on (every tree key descends from it).
  Hash128 tree_root(std::string_view scope) const {
    return tree_scope_key(fmt, opt.tenant_isolation ? scope : std::string_view{});
  }
  void note_tokens_locked(const SegmentIdentity& id, bool parent_is_root, const Hash128& scope_root,
                          std::span<const int32_t> tokens, int num_tokens);

  std::unique_ptr<ThreadPool> io;   // loads
  std::unique_ptr<ThreadPool> rio;  // remote loads (a slow Redis never holds a local load)

  // Write-behind to the remote tier of a segment that just got a host copy. Never blocks.
  void remote_put(const SegmentRef& seg) {
    if (remote && seg) (void)remote->store(seg);
  }

  // ---- pool-to-DRAM copies of new pool nodes ------------------------------------------------------
  // One thread, so that a parent's copy lands before its child's. A copy reads blocks through its
  // own fork (shared, so nobody writes them); the fork is released on the scheduler thread
  // (done_copies, at its next pool call), which owns the pool.
  std::unique_ptr<ThreadPool> copier;
  std::mutex cmu;
  std::condition_variable ccv;
  uint64_t copy_bytes = 0;              // guarded by cmu: in flight
  bool engine_busy = false;             // guarded by cmu: copies wait while model steps run
  size_t copies_inflight = 0;           // guarded by cmu
  std::vector<PoolCopy> done_copies;    // guarded by mu
  std::function<void()> on_copy_done;   // set before copies start (set_on_pool_copy_done)
  void end_copy(uint64_t bytes);        // a copy of `bytes` is over (done, or never queued)
  void release_done_copies_locked();    // mu held, scheduler thread

  // ---- stored-tier writes -------------------------------------------------------------------------
  std::unique_ptr<ThreadPool> writer;   // one thread: the tree's order
  std::mutex wmu;
  std::condition_variable wcv;
  size_t writes_inflight = 0;           // guarded by wmu
  void write_done();
  // mu held: an I/O error disables stored tier t (its nodes leave the tree); the others go on.
  void disable_tier_locked(Tier t, const Status& st);
  // mu held: hands the tree's tier actions to the writer, in order.
  void submit_actions_locked(std::vector<TierAction>& actions);
  // Opens stored tier t's backend index: every segment found is restored into the tree; corrupt,
  // foreign and orphaned ones are removed.
  Status restore_tier(Tier t);

  // ---- loads ----------------------------------------------------------------------------------------
  // Reads one node from its fastest tier into `h` slot i; *src_out receives the tier read.
  Status load_one(LoadHandle& h, size_t i, const PathNode& pn, Tier* src_out);
  void run_load(const std::shared_ptr<LoadHandle>& h, const std::vector<PathNode>& nodes, bool independent,
                std::shared_ptr<const RemoteTail> tail = nullptr);
  // Slots [base, base + tail->size()) of `h` from the remote tier, on its own threads; finishes h.
  void start_remote(const std::shared_ptr<LoadHandle>& h, size_t base, std::shared_ptr<const RemoteTail> tail, bool broken);
  void run_remote(const std::shared_ptr<LoadHandle>& h, size_t base, const RemoteTail& t);

  void unpin(const std::vector<std::pair<Hash128, uint64_t>>& pins);

  // LoadHandle's filling side (LoadHandle befriends StoreCore), for the tiers' sinks.
  static void publish(LoadHandle& h, size_t i, SegmentRef seg, Tier src);
  static void set_layers(LoadHandle& h, size_t i, int layers);
};

}  // namespace ragd::kvstore::detail
