// SimKvHost: the scheduler's KV host for a simulated replica. The real pipelines::Scheduler plans
// against it exactly as against the executor's PoolKvHost, and the real kvstore::KnowledgeTree
// (pool mode, its eviction policy and tier capacities) decides what stays cached; only the bytes
// are missing. The engine pool is a block count: free = total - blocks of the runs' own tails -
// blocks of live pool copies (a copy stays alive while the tree or a run that installed it refers
// to it, as the real pool's ref counts keep blocks). Document KV follows the executor's reuse
// planner for the knowledge-tree mode: lookup after retrieval matches the path [prefix][doc]...;
// when part of it must be loaded from below HBM (DRAM / SSD / the shared remote tier, on per-tier
// channels) the matched nodes stay pinned until admission, otherwise nothing is pinned;
// admission installs it (hits in the pool are shared, loaded nodes take blocks and are promoted
// into the pool); after the prompt's prefill publish() inserts the newly computed nodes into the
// pool (insert_pool, no host copy yet).
//
// Publication follows KvStore::insert_pool: a new pool node's lower-tier copy (DRAM, write-behind
// SSD, the remote tier) is made later by the store's one copy thread, which starts a copy only
// while the engine is idle (at once with a remote tier); a copy is skipped when less than half the
// pool is free or when copy_inflight_bytes are already queued, and such a node is gathered from the
// pool (demoted) when the pool evicts it. Each copy or demotion costs serving.publish_s_per_byte
// of engine time per byte: a demotion in the step that evicts, a copy in the idle time it runs in,
// and what is left of a running copy when a step starts is added to that step (the two share the
// cores).
//
// Not modelled: SSD write bandwidth (writes complete at once), the blocks a copy in flight holds,
// CacheBlend / EPIC, chunk granularity of the prefix mode.
//
// Thread-safety: not thread-safe; one simulated replica owns it (single-threaded simulation).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "ragd/common/hash.h"
#include "ragd/kvstore/knowledge_tree.h"
#include "ragd/pipelines/scheduler.h"
#include "ragd/sim/cost_model.h"
#include "ragd/sim/shared_remote.h"
#include "ragd/sim/workload.h"

namespace ragd::sim {

struct KvHostOptions {
  int pool_blocks = 2048;       // engine pool blocks (kv_pool_bytes / block bytes)
  int block_size = 16;          // tokens per block
  bool hbm_cache = true;        // the tree may keep document KV in the pool
  uint64_t hbm_bytes = 0;       // tree's pool share; 0 = the whole pool
  uint64_t dram_bytes = 1ull << 30;
  uint64_t ssd_bytes = 8ull << 30;
  kvstore::EvictionPolicy eviction = kvstore::EvictionPolicy::kPgdsf;
  uint64_t swap_bytes = 512ull << 20;  // host memory for swapped-out runs
  bool tenant_isolation = false;       // a tree root per tenant (else one shared root)
  uint64_t copy_inflight_bytes = 64ull << 20;  // pool-to-DRAM copies queued or running at once
                                               // (kvstore Options::copy_inflight_bytes); more are skipped
};

// The store's copy thread, counted (SimResult sums them over replicas).
struct PublishCounters {
  uint64_t copies = 0;          // lower-tier copies of new pool nodes made
  uint64_t copies_skipped = 0;  // skipped: pool less than half free, or copy_inflight_bytes reached
  uint64_t demotions = 0;       // pool nodes gathered for a slower tier when evicted
  double engine_s = 0;          // engine time they cost (publish_s_per_byte)
};

// Where a run's reused prompt tokens came from (first admission).
using ReuseCounts = kvstore::TierCounts;  // prompt tokens reused, by source tier

struct LookupOutcome {
  double ready_s = 0;     // when the loads below HBM are done (>= now)
  int hint_tokens = 0;    // tokens expected to be reused (scheduler ordering)
};

class SimKvHost final : public pipelines::KvHost {
 public:
  // `remote` (shared by every replica, may be null) must outlive the host.
  SimKvHost(const KvHostOptions& opts, const CostModel& cost, SharedRemote* remote);
  ~SimKvHost() override;
  SimKvHost(const SimKvHost&) = delete;
  SimKvHost& operator=(const SimKvHost&) = delete;

  // The scheduler whose sequence lengths admit() caps to (set once, before any admission).
  void set_scheduler(const pipelines::Scheduler* s) { sched_ = s; }

  // After retrieval: matches the request's path (touching it) and starts its loads (pinning the
  // matched nodes until admission when there is something to load).
  LookupOutcome lookup(const SimRequest& req, double now);
  // Prompt tokens a router would find cached here for `req` (any local tier; no touch).
  int cached_tokens(const SimRequest& req);
  // After planning: the run's KV now has room for `kv_tokens` tokens (the step writes them).
  void reserve(uint64_t id, int kv_tokens);
  // The run's prompt KV is complete: registers the path nodes it computed.
  void publish(uint64_t id);
  bool published(uint64_t id) const;
  // Reuse of the run's first admission.
  ReuseCounts reused(uint64_t id) const;
  // Seconds of swap copies and demotions planned since the last call (added to the step that
  // carries them).
  double take_transfer_s();
  // The copy thread's clock. advance(now): copies run over the idle time up to now (nothing starts
  // while the engine is busy). engine_busy(now) / engine_idle(now): the replica starts a step /
  // has nothing to step. take_background_s(): at a step's start, the rest of the copy that was
  // running (with a remote tier: of every queued copy), completed now; the step is that much longer.
  void advance(double now);
  void engine_busy(double now);
  void engine_idle(double now);
  double take_background_s();
  // At the end of a simulation: the queued copies run in the idle time after it.
  void drain_copies();
  const PublishCounters& publish_counters() const { return pub_; }
  // Forgets a finished run (after Scheduler::finish released it).
  void forget(uint64_t id);

  int used_blocks() const { return used_blocks_; }
  int total_blocks() const { return opts_.pool_blocks; }
  uint64_t block_bytes() const { return block_bytes_; }
  kvstore::TierCounters tier(kvstore::Tier t) const { return tree_->counters(t); }
  uint64_t swap_used_bytes() const { return swap_used_; }
  const kvstore::KnowledgeTree& tree() const { return *tree_; }

  // KvHost
  bool ensure_free(int blocks) override;
  int blocks_needed(uint64_t id, int n) const override;
  int admit(uint64_t id, int keep_free) override;
  bool swap_in(uint64_t id, int keep_free) override;
  bool preempt(uint64_t id, bool swap) override;
  void release(uint64_t id) override;
  void truncate(uint64_t id, int n) override;

 private:
  struct Copy {
    int blocks = 0;
    int refs = 0;
  };
  struct Run;
  class Pool;
  struct CopyJob {
    Hash128 key;
    uint64_t bytes = 0;
    double work_s = 0;
    bool promote = true;  // false: the node was placed below the pool at once (no pool share)
  };

  Run& run(uint64_t id);
  const Run& run(uint64_t id) const;
  int own_blocks(int kv, int shared_end) const;
  void set_own(Run& r, int kv, int shared_end);
  void unref(int copy_id);
  void on_tier_change(const kvstore::TreeNodeInfo& n, kvstore::Tier t, bool entered);
  void drain(std::vector<kvstore::TierAction>& actions);
  kvstore::SegmentHeader header_of(const Run& r, size_t i) const;
  void build_path(const SimRequest& req, Run& r) const;
  void on_export(uint64_t bytes);
  void complete_copy();

  KvHostOptions opts_;
  const CostModel& cost_;
  SharedRemote* remote_;
  const pipelines::Scheduler* sched_ = nullptr;
  uint64_t block_bytes_ = 0;
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<kvstore::KnowledgeTree> tree_;
  kvstore::SegmentRef host_copy_;  // stands for every host-tier copy (bytes are accounted by the tree)
  std::unordered_map<uint64_t, std::unique_ptr<Run>> runs_;
  std::unordered_map<Hash128, int, Hash128Hasher> node_copy_;  // node in HBM -> its copy
  std::unordered_map<int, Copy> copies_;
  int next_copy_ = 1;
  int used_blocks_ = 0;
  Run* placing_ = nullptr;  // the run whose blocks a copy being placed shares
  uint64_t swap_used_ = 0;
  double transfer_s_ = 0;
  double dram_free_at_ = 0, ssd_free_at_ = 0, remote_free_at_ = 0;  // load channels
  std::deque<CopyJob> copy_q_;   // the copy thread's queue; the front runs first
  bool head_started_ = false;    // the front copy has started (it runs to its end)
  double head_done_s_ = 0;       // work of the front copy done
  double bg_t_ = 0;              // the copy thread's clock
  bool engine_busy_ = false;
  uint64_t copy_inflight_ = 0;   // bytes of queued and running copies
  PublishCounters pub_;
};

}  // namespace ragd::sim
