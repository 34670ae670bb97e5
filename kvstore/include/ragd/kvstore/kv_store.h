// KvStore: the kvstore facade — knowledge tree + chunk cache over an ordered list of tiers (tier.h: three
// local ones, a remote one, and any registered stored tier), with a transfer engine (a small I/O pool)
// that moves segments between them asynchronously. The state and the threads' work are StoreCore
// (src/store_core.h).
//
// Tiers
//   HBM       The engine's KV pool (Options::pool set, the serving configuration): a node in HBM is
//             a set of pool blocks shared by ref count with the sequences that computed or reuse it
//             (copy-on-write), so a hit costs no copy. Pool pressure evicts by the store's policy
//             (reclaim_pool). Without a pool the HBM role is a host tier of SegmentRefs with its own
//             byte capacity (tools, tests).
//   DRAM      A larger host tier (plain host memory here; pinned memory on a CUDA build).
//   SSD       RocksDB + BlobDB in its own directory with a byte capacity; its index is rebuilt from
//             the stored headers at open, so after kill -9 and restart the SSD part is found again.
//   remote    Redis or a Redis Cluster shared by replicas (remote_tier.h), outside the tree: written
//             behind whenever a segment gets a host copy, read by a load after the local tiers miss
//             (LoadOptions::remote); a hit is inserted into DRAM (promoted) like an SSD hit.
//   extra     Stored tiers registered in Options::extra_tiers (a KvTier each): in the tree after SSD,
//             written by demotion (or as SSD is, without one), found again at open, read layer by layer.
//
// Serving use (pool mode), scheduler thread unless noted:
//   auto m = store->match(doc_keys, scope);                // any thread: pool / DRAM / SSD split, pinned
//   auto h = store->load(lower part of m.nodes);           // any thread: async, never blocks
//   table = store->fork_pool(first m.pool_nodes of m.nodes);  // the pool part, shared blocks
//   append_segment(*h->segment(i), pool, table); store->promote_pool(key, table, begin, end);
//   store->insert_pool(parent_docs, doc, table, begin, end, scope);   // after prefill
//   store->reclaim_pool([&] { return pool.free_blocks() >= need; }); // pool pressure
//
// Typical use without a pool:
//   auto hit = store->lookup(doc_keys, scope);            // longest cached path, pinned
//   auto h = store->load(hit.nodes);                       // async: SSD/DRAM -> host staging, promotes
//   ... each step: h->layers_ready(i) / h->node_ready(i); never wait inside a step ...
//   table.append(pool, seg->num_tokens(), seg->k_all(), seg->v_all());
//   store->insert(parent_docs, doc, {n, first_pos, k, v}, scope);    // after prefill
//   hit.pin.release();                                    // request end (or let it go out of scope)
//
// Failures: a checksum mismatch or a segment of another model/format is a miss (the node is dropped
// from the tier it was read from), an error log line and a metric. A RocksDB error (disk full, I/O
// error, unwritable directory) disables the SSD tier with the error in stats(); the other tiers go on.
//
// Thread-safety: every method is thread-safe (one internal mutex for the tree; RocksDB and segment
// copies run outside it, on the I/O pool). Pin and LoadHandle objects may be used and destroyed on
// any thread, also after the store is closed. In pool mode the methods that touch pool blocks
// (fork_pool, insert_pool, reclaim_pool, detach_pool) must also run on the thread that owns the
// engine pool (the scheduler thread): the tree's mutex guards the tree, not the pool. No other
// method places or removes a pool copy. The one exception reads, never writes: the copy thread
// gathers a new node's KV into its DRAM copy through its own fork of the node's blocks (shared,
// so copy-on-write keeps every writer off them); that fork is released by the scheduler thread at
// its next pool call.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ragd/common/hash.h"
#include "ragd/common/status.h"
#include "ragd/engine/kv_cache.h"
#include "ragd/kvstore/eviction.h"
#include "ragd/kvstore/knowledge_tree.h"
#include "ragd/kvstore/kv_events.h"
#include "ragd/kvstore/load_handle.h"
#include "ragd/kvstore/remote_tier.h"
#include "ragd/kvstore/segment.h"
#include "ragd/kvstore/ssd_tier.h"
#include "ragd/kvstore/tier.h"

namespace ragd::kvstore {

// The one set of KV tier settings: pipelines::RuntimeOptions nests it (RuntimeOptions::kv), and the
// daemon's config keys set its fields in place.
struct Options {
  // HBM tier capacity in bytes; default 256 MiB. Pool mode: the most pool bytes the tree may hold
  // (0 = the whole pool); the scheduler's need for free blocks evicts earlier (reclaim_pool).
  uint64_t hbm_bytes = 256ull << 20;
  uint64_t dram_bytes = 1ull << 30;    // DRAM tier capacity in bytes; default 1 GiB
  uint64_t ssd_bytes = 8ull << 30;     // SSD tier capacity in bytes; default 8 GiB
  // The engine's KV pool as the HBM tier (pool mode). Not owned; it must outlive the store's pool
  // copies (detach_pool) and is only touched by the pool methods, on the pool owner's thread.
  engine::KvPool* pool = nullptr;
  // Every node that gets into DRAM is queued for the SSD tier too (bounded by
  // ssd_max_pending_bytes, asynchronous on the writer), so a restart finds it. Default on.
  bool write_behind = true;
  std::string ssd_dir;                 // RocksDB directory; "" = no SSD tier
  EvictionPolicy eviction = EvictionPolicy::kPgdsf;  // over every tier (eviction.h); default pgdsf
  int io_threads = 2;                  // transfer engine threads (loads)
  size_t io_queue = 4096;              // most queued loads; beyond it load() fails fast (recompute)
  bool tenant_isolation = false;       // the request's KV scope (kv_scope(): tenant, cache_salt) joins every key
  // KV events in vLLM's format over ZeroMQ (kv_events.h; docs/design/kv-events.md); endpoint "" =
  // off (default). In pool mode the announced block size is the pool's.
  KvEventsOptions events;
  bool promote_on_load = true;         // copy loaded segments into the faster tiers
  bool verify_host_loads = true;       // checksum host-tier segments on every load too
  uint64_t ssd_min_blob_bytes = 4096;  // RocksDB values >= this go to BlobDB; default 4 KiB
  uint64_t ssd_max_pending_bytes = 256ull << 20;  // queued SSD writes; default 256 MiB
  bool ssd_sync_writes = false;        // fsync per SSD write (power loss); default off
  PrefillCostModel cost;               // PGDSF cost model (profile it on the running engine)
  size_t frequency_history = 65536;    // removed nodes whose access counts are remembered (0 = off)
  std::shared_ptr<rocksdb::FileSystem> ssd_file_system;  // SsdTierOptions::file_system; null = default
  // Pool mode: bytes of pool-to-DRAM copies of new nodes in flight (insert_pool); default 64 MiB.
  uint64_t copy_inflight_bytes = 64ull << 20;
  // The remote tier (Redis / Redis Cluster, remote_tier.h); remote.url "" = none. Every segment
  // that gets a host copy (DRAM, or SSD without DRAM) is written behind to it; loads try it after
  // the local tiers (LoadOptions::remote) on remote_io_threads threads of their own.
  RemoteOptions remote;
  int remote_io_threads = 2;
  // Stored tiers below the built-in ones (tier.h; at most kMaxTiers - kNumBuiltinTiers), ids 4, 5 in
  // this order. The same write budget (ssd_max_pending_bytes) and write thread as SSD.
  std::vector<TierRegistration> extra_tiers;

  // The settings a configuration gives (eviction, the remote tier: RemoteOptions::validate),
  // InvalidArgument naming the daemon's config key ("runtime.eviction: value code 9 is not one of
  // ..."). Pure: in ragd_kvstore_options, which links without RocksDB and hiredis.
  Status validate() const;
};

// One node of a lookup result.
struct PathNode {
  Hash128 key;               // segment key
  Hash128 doc;               // document key
  Tier tier = Tier::kSsd;    // fastest tier holding it
  uint8_t tiers = 0;         // every tier holding it (tier_bit)
  int num_tokens = 0;
  int first_position = 0;    // RoPE position of its first token when computed
  uint64_t bytes = 0;
};

// Pins on nodes: a pinned node (and its ancestors) is not evicted. Released on destruction.
class Pin {
 public:
  Pin() = default;
  Pin(Pin&& o) noexcept;
  Pin& operator=(Pin&& o) noexcept;
  Pin(const Pin&) = delete;
  Pin& operator=(const Pin&) = delete;
  ~Pin();
  void release();
  size_t size() const { return pins_.size(); }

 private:
  friend class KvStore;
  std::shared_ptr<detail::StoreCore> core_;
  std::vector<std::pair<Hash128, uint64_t>> pins_;  // (key, node uid)
};

struct LookupResult {
  std::vector<PathNode> nodes;  // longest cached prefix of the requested documents
  Pin pin;
  int cached_tokens() const;
};

struct ChunkLookupResult {
  std::vector<std::optional<PathNode>> chunks;  // per requested document, hit or miss
  std::vector<PathNode> hits() const;           // the hits, in request order
  Pin pin;
};

// Where a document path's KV is (pool mode): the leading pool_nodes nodes are in the engine pool;
// the rest of `nodes` must come up from DRAM / SSD (load()).
struct MatchResult {
  std::vector<PathNode> nodes;  // longest cached path over every tier
  size_t pool_nodes = 0;        // leading nodes in the pool (no copy needed)
  int pool_tokens = 0;          // tokens of those nodes
  int dram_tokens = 0;          // tokens of the other nodes whose fastest copy is in DRAM
  int ssd_tokens = 0;           // ... in a stored tier only (SSD, a registered one)
  Pin pin;
  int cached_tokens() const { return pool_tokens + dram_tokens + ssd_tokens; }
  int lower_tokens() const { return dram_tokens + ssd_tokens; }
};

struct InsertResult {
  KnowledgeTree::InsertOutcome outcome = KnowledgeTree::InsertOutcome::kNoSpace;
  Tier tier = Tier::kHbm;  // where it was placed (kInserted)
  Hash128 key;
};

struct TierStats {
  std::string name;                       // "" = no tier with this id
  TierKind kind = TierKind::kNone;
  bool enabled = true;
  uint64_t capacity_bytes = 0, used_bytes = 0, nodes = 0;
  uint64_t hits = 0, hit_tokens = 0;      // lookups whose node was fastest in this tier
  uint64_t loads = 0, load_bytes = 0;     // segments read from this tier by load()
  uint64_t inserts = 0, evictions = 0, demotions = 0, promotions = 0, drops = 0;
  uint64_t written_behind = 0;            // stored tiers: copies queued by write-behind
  uint64_t errors = 0;                    // stored tiers: failed writes / reads
  std::string error;                      // why the tier is disabled ("" = fine)
};

struct Stats {
  std::string policy;
  std::array<TierStats, kMaxTiers> tiers;  // index = Tier; the tree's tiers have a kind of kMemory / kStored
  uint64_t lookups = 0, lookup_docs = 0, lookup_misses = 0;  // tree: requested docs past the cached path
  uint64_t chunk_lookups = 0, chunk_hits = 0, chunk_misses = 0;
  // KV events (Options::events): batches / events published, events dropped (queue full), replay
  // requests served.
  uint64_t kv_events_batches = 0, kv_events_events = 0, kv_events_dropped = 0, kv_events_replays = 0;
  uint64_t kv_events_auth_denied = 0;  // CURVE handshakes refused (a key not in the allowed list)
  uint64_t load_failures = 0;      // nodes a load could not deliver (-> recompute)
  uint64_t checksum_failures = 0;  // segments whose checksum did not match
  uint64_t format_rejects = 0;     // segments of another model / dtype / layout
  uint64_t ssd_errors = 0;         // = tiers[kSsd].errors
  std::string ssd_error;           // = tiers[kSsd].error: why the SSD tier is disabled ("" = fine)
  uint64_t tree_nodes = 0, pinned_nodes = 0;
  uint64_t restored_segments = 0;  // SSD segments found again at open
  uint64_t copies = 0, copies_skipped = 0;  // pool-to-DRAM copies of new nodes: made / skipped (bound)
  RemoteStats remote;              // the remote tier (remote.enabled false without one)
  uint64_t remote_loads = 0, remote_load_tokens = 0;  // segments (tokens) a load took from the remote tier
  std::string to_json() const;
};

class KvStore {
 public:
  // Opens the store for one model/KV format. An SSD directory that cannot be opened disables the
  // SSD tier (logged, in stats().ssd_error); bad options are InvalidArgument.
  static Result<std::unique_ptr<KvStore>> open(const Options& opts, const KvFormat& fmt);
  ~KvStore();
  KvStore(const KvStore&) = delete;
  KvStore& operator=(const KvStore&) = delete;

  // Drains queued loads and SSD writes and closes RocksDB. Idempotent.
  void close();
  const KvFormat& format() const;

  // `scope` below: the request's KV scope (kv_scope(): tenant and cache_salt), which joins every key
  // when Options::tenant_isolation; ignored otherwise.
  //
  // Knowledge tree: longest cached path along `docs` (document keys, doc_key()). Counts an access
  // of each matched node; pins them when `pin`.
  LookupResult lookup(std::span<const Hash128> docs, std::string_view scope = {}, bool pin = true);
  // Inserts the KV of `doc` under the cached path `parent_docs` (which must be fully cached:
  // kParentMissing otherwise). Soft outcomes: kExists, kParentMissing, kNoSpace.
  // `tokens`: the document's token ids, for KV events (kv_events.h); a node inserted without them
  // is not announced.
  Result<InsertResult> insert(std::span<const Hash128> parent_docs, const Hash128& doc, const KvData& kv,
                              std::string_view scope = {}, std::span<const int32_t> tokens = {});

  // ---- pool mode (Options::pool) ----
  // lookup() split by where the KV is: the pool prefix and the DRAM / SSD rest. Any thread.
  // touch=false: no access is counted (a re-check of an earlier match).
  MatchResult match(std::span<const Hash128> docs, std::string_view scope = {}, bool pin = true, bool touch = true);
  // Scheduler thread: a table sharing the pool blocks of the path's nodes, root first (each node
  // holds only its own tokens' blocks: their tables are joined). It stops at the first node no
  // longer in the pool, so it may cover fewer tokens than the path: the caller checks num_tokens().
  engine::BlockTable fork_pool(std::span<const PathNode> path);
  // Scheduler thread: registers tokens [begin, end) of `table` (a sequence whose tokens [0, begin)
  // are the parent path) as node `doc` under `parent_docs`: the node keeps a fork of the blocks of
  // the table's tokens [begin, end) in the pool (no copy; BlockTable::fork_range). Its DRAM copy (so that a pool eviction is a drop, and
  // write-behind to SSD) is made once, later, on the store's copy thread from another fork of the
  // same blocks; at most Options::copy_inflight_bytes are in flight, and none starts while less
  // than half the pool is free (a copy holds its blocks); a skipped copy leaves the node to be
  // demoted when it is evicted from the pool. The caller never waits for it.
  // An existing node is touched and, if it left the pool, gets the fork back.
  Result<InsertResult> insert_pool(std::span<const Hash128> parent_docs, const Hash128& doc,
                                   const engine::BlockTable& table, int begin, int end, std::string_view scope = {},
                                   std::span<const int32_t> tokens = {});  // tokens [begin, end), for KV events
  // The same for a node whose identity path_identities() gave (no re-hash of its parents).
  Result<InsertResult> insert_pool(const SegmentIdentity& id, const engine::BlockTable& table, int begin, int end,
                                   std::string_view scope = {}, std::span<const int32_t> tokens = {});
  // The tree identity of every node of a path (node i: docs[i] under docs[0, i)), chained once:
  // O(path), where insert_pool with parent_docs hashes each node's parents again (a long prompt's
  // prefix path has a node per block: 65,536 at 1M tokens). Any thread.
  std::vector<SegmentIdentity> path_identities(std::span<const Hash128> docs, std::string_view scope = {}) const;
  // Any thread: waits until every pool-to-DRAM copy started so far is in its tier (tests, stop).
  void wait_copies();
  // The engine's owner says whether model steps are running: pool-to-DRAM copies wait while they
  // are (they take CPU and memory bandwidth from decoding) and run when the engine is idle; while
  // they wait they count against copy_inflight_bytes, so under steady load new copies are skipped.
  // With a remote tier they do not wait (at background priority): the copy is what replicas share.
  // Default: idle.
  void set_engine_busy(bool busy);
  // Called on the copy thread after each pool-to-DRAM copy finished, so that the pool's owner makes
  // a pool call (e.g. reclaim_pool) soon and the copy's fork goes back to the pool even when no
  // request follows. Set once, before copies start; the function must outlive the store's copies.
  void set_on_pool_copy_done(std::function<void()> fn);
  // Scheduler thread: evicts pool copies by policy (demoting what is in no slower tier) until
  // enough() or nothing evictable is left. Returns enough().
  bool reclaim_pool(const std::function<bool()>& enough);
  // Scheduler thread (or after it stopped), before the pool goes away: every pool copy leaves,
  // demoted to DRAM / SSD when it has no copy there. Idempotent.
  void detach_pool();

  // Flat position-independent chunk cache (keys without parent), beside the tree.
  ChunkLookupResult lookup_chunks(std::span<const Hash128> docs, std::string_view scope = {}, bool pin = true);
  // tokens: the chunk's own token ids, for KV events.
  Result<InsertResult> insert_chunk(const Hash128& doc, const KvData& kv, std::string_view scope = {},
                                    std::span<const int32_t> tokens = {});

  // Starts an asynchronous load of `nodes` (from a lookup, still pinned) into host memory; loaded
  // segments are promoted into the faster tiers when promote_on_load. Never blocks on I/O.
  std::shared_ptr<LoadHandle> load(std::span<const PathNode> nodes, LoadOptions opts = {});

  // Waits until the queued SSD writes are done (each is durable in RocksDB's WAL by then), and the
  // remote tier's queued writes are written or dropped.
  void drain_writes();
  // drain_writes() plus a RocksDB memtable flush (shutdown, tests).
  Status flush();

  // True when the store has a remote tier (Options::remote.url), whatever its breaker says.
  bool has_remote() const;

  Stats stats() const;
  std::string stats_json() const { return stats().to_json(); }
  Status check_invariants() const;  // tests

 private:
  explicit KvStore(std::shared_ptr<detail::StoreCore> core);
  std::shared_ptr<detail::StoreCore> core_;
};

}  // namespace ragd::kvstore
