#include "ragd/kvstore/kv_store.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include <fmt/format.h>

#include "ragd/common/json_writer.h"
#include "ragd/common/log.h"
#include "ragd/common/thread_pool.h"
#include "ragd/kvstore/engine_io.h"
#include "store_core.h"

namespace ragd::kvstore {

using detail::StoreCore;
using detail::gather_pool_copy;

// ---- Pin ---------------------------------------------------------------------------------------

Pin::Pin(Pin&& o) noexcept : core_(std::move(o.core_)), pins_(std::move(o.pins_)) { o.pins_.clear(); }
Pin& Pin::operator=(Pin&& o) noexcept {
  if (this != &o) {
    release();
    core_ = std::move(o.core_);
    pins_ = std::move(o.pins_);
    o.pins_.clear();
  }
  return *this;
}
Pin::~Pin() { release(); }
void Pin::release() {
  if (core_ && !pins_.empty()) core_->unpin(pins_);
  pins_.clear();
  core_.reset();
}

int LookupResult::cached_tokens() const {
  int n = 0;
  for (const PathNode& p : nodes) n += p.num_tokens;
  return n;
}

std::vector<PathNode> ChunkLookupResult::hits() const {
  std::vector<PathNode> out;
  for (const auto& c : chunks)
    if (c) out.push_back(*c);
  return out;
}

// ---- KvStore -----------------------------------------------------------------------------------

KvStore::KvStore(std::shared_ptr<StoreCore> core) : core_(std::move(core)) {}
KvStore::~KvStore() { close(); }

Result<std::unique_ptr<KvStore>> KvStore::open(const Options& opt, const KvFormat& fmt) {
  RAGD_RETURN_IF_ERROR(fmt.validate());
  const EvictionPolicy policy = opt.eviction;
  if (!enum_known(policy)) return Status::InvalidArgument("kvstore: eviction policy code out of range");
  if (opt.io_threads <= 0 || opt.io_threads > 64)
    return Status::InvalidArgument(fmt::format("kvstore: io_threads must be in 1..64, got {}", opt.io_threads));
  if (opt.io_queue == 0) return Status::InvalidArgument("kvstore: io_queue must be positive");
  auto core = std::make_shared<StoreCore>();
  core->opt = opt;
  core->fmt = fmt;
  if (opt.pool && (opt.pool->layout().num_layers != fmt.num_layers || opt.pool->layout().num_kv_heads != fmt.num_kv_heads ||
                   opt.pool->layout().head_dim != fmt.head_dim ||
                   fmt.dtype != KvFormat::from_layout(opt.pool->layout(), fmt.model_fingerprint).dtype))
    return Status::InvalidArgument("kvstore: the engine pool's layout does not match the KV format");
  RAGD_RETURN_IF_ERROR(core->configure_tiers());
  if (!opt.remote.url.empty() && (opt.remote_io_threads <= 0 || opt.remote_io_threads > 64))
    return Status::InvalidArgument(fmt::format("kvstore: remote_io_threads must be in 1..64, got {}", opt.remote_io_threads));
  TreeOptions to;
  to.kinds = core->kinds;
  to.capacity = core->capacity;
  to.pool = opt.pool ? core.get() : nullptr;
  to.write_behind = opt.write_behind;
  to.policy = policy;
  to.cost = opt.cost;
  to.max_pending_bytes = opt.ssd_max_pending_bytes;
  to.frequency_history = opt.frequency_history;
  if (!opt.events.endpoint.empty()) {
    RAGD_ASSIGN_OR_RETURN(core->events_pub, KvEventPublisher::start(opt.events));
    const int bs = opt.pool ? opt.pool->layout().block_size : opt.events.block_size;
    KvEventPublisher* pub = core->events_pub.get();
    core->events = std::make_unique<KvEventTracker>(bs, [pub](KvEvent e) { pub->publish(std::move(e)); });
    StoreCore* raw = core.get();
    to.on_tier_change = [raw](const TreeNodeInfo& n, Tier t, bool entered) { raw->on_tier_change_locked(n, t, entered); };
  }
  core->tree = std::make_unique<KnowledgeTree>(to);
  core->ctr.policy = std::string(eviction_policy_name(policy));
  // The stored tiers: SSD (when a directory is given), then the registered ones. One that cannot be
  // opened or read back is disabled (logged, in stats) and serving goes on without it.
  for (int t = 0; t < kMaxTiers; ++t) {
    if (core->kinds[t] != TierKind::kStored) continue;
    const Tier tier = tier_at(t);
    Result<std::unique_ptr<KvTier>> b = Status::NotFound("");
    if (tier == Tier::kSsd) {
      if (opt.ssd_dir.empty()) {
        core->tree->disable_tier(tier);
        continue;
      }
      SsdTierOptions so;
      so.dir = opt.ssd_dir;
      so.min_blob_bytes = opt.ssd_min_blob_bytes;
      so.sync_writes = opt.ssd_sync_writes;
      so.file_system = opt.ssd_file_system;
      Result<std::unique_ptr<SsdTier>> r = SsdTier::open(so);
      if (r.ok()) b = std::unique_ptr<KvTier>(std::move(r).value());
      else b = r.status();
    } else {
      b = opt.extra_tiers[static_cast<size_t>(t - kNumBuiltinTiers)].open(fmt);
    }
    Status st = b.status();
    if (st.ok()) {
      core->backend[t] = std::move(b).value();
      core->up[t].store(true);
      std::lock_guard<std::mutex> lock(core->mu);
      st = core->restore_tier(tier);
    }
    if (!st.ok()) {
      std::lock_guard<std::mutex> lock(core->mu);
      core->disable_tier_locked(tier, st);
      if (core->backend[t]) core->backend[t]->close();
      core->backend[t].reset();
    }
  }
  if (!opt.remote.url.empty()) {
    RAGD_ASSIGN_OR_RETURN(std::unique_ptr<RemoteTier> r, RemoteTier::open(opt.remote, fmt));
    core->remote = r.get();
    core->backend[static_cast<int>(Tier::kRemote)] = std::move(r);
    core->rio = std::make_unique<ThreadPool>(static_cast<size_t>(opt.remote_io_threads), opt.io_queue, "kv-remote");
  }
  core->io = std::make_unique<ThreadPool>(static_cast<size_t>(opt.io_threads), opt.io_queue, "kv-io");
  // Stored-tier writes and pool-to-DRAM copies are nobody's critical path: they run in the background.
  core->writer = std::make_unique<ThreadPool>(1, size_t{1} << 20, "kv-ssd-writer", /*background=*/true);
  if (opt.pool) core->copier = std::make_unique<ThreadPool>(1, size_t{1} << 20, "kv-copy", /*background=*/true);
  return std::unique_ptr<KvStore>(new KvStore(std::move(core)));
}

void KvStore::close() {
  StoreCore& c = *core_;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.closed) return;
  }
  c.io->stop();  // drains queued loads (they may still queue tier writes and remote loads)
  if (c.rio) c.rio->stop();  // drains remote loads
  set_engine_busy(false);          // nothing runs any more: waiting copies may go
  if (c.copier) c.copier->stop();  // drains pool-to-DRAM copies (they may queue tier writes)
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.closed = true;
  }
  c.writer->stop();  // drains queued stored-tier writes
  for (auto& b : c.backend)
    if (b) b->close();  // the remote tier drains its queued writes
  std::lock_guard<std::mutex> lock(c.mu);
  for (int t = 0; t < kMaxTiers; ++t) {
    c.up[t].store(false);
    if (t != static_cast<int>(Tier::kRemote)) c.backend[t].reset();  // stats() still reads the remote one
  }
  if (c.events) c.events->clear_all();  // AllBlocksCleared: subscribers forget this store
  if (c.events_pub) c.events_pub->stop();
}

const KvFormat& KvStore::format() const { return core_->fmt; }

static PathNode to_path_node(const TreeNodeInfo& i) {
  PathNode p;
  p.key = i.key;
  p.doc = i.doc;
  p.tier = i.fastest;
  p.tiers = i.tiers;
  p.num_tokens = static_cast<int>(i.num_tokens);
  p.first_position = i.first_position;
  p.bytes = i.bytes;
  return p;
}

LookupResult KvStore::lookup(std::span<const Hash128> docs, std::string_view scope, bool pin) {
  StoreCore& c = *core_;
  const Hash128 root = c.tree_root(scope);
  LookupResult r;
  std::lock_guard<std::mutex> lock(c.mu);
  std::vector<TreeNodeInfo> path = c.tree->match(root, docs, /*touch=*/true);
  c.ctr.lookups += 1;
  c.ctr.lookup_docs += docs.size();
  c.ctr.lookup_misses += docs.size() - path.size();
  for (const TreeNodeInfo& i : path) {
    r.nodes.push_back(to_path_node(i));
    TierStats& ts = c.ctr.tiers[static_cast<int>(i.fastest)];
    ts.hits += 1;
    ts.hit_tokens += i.num_tokens;
    if (pin) r.pin.pins_.emplace_back(i.key, c.tree->pin(i.key));
  }
  if (pin) r.pin.core_ = core_;
  return r;
}

MatchResult KvStore::match(std::span<const Hash128> docs, std::string_view scope, bool pin, bool touch) {
  StoreCore& c = *core_;
  const Hash128 root = c.tree_root(scope);
  MatchResult m;
  std::lock_guard<std::mutex> lock(c.mu);
  std::vector<TreeNodeInfo> path = c.tree->match(root, docs, touch);
  if (touch) {
    c.ctr.lookups += 1;
    c.ctr.lookup_docs += docs.size();
    c.ctr.lookup_misses += docs.size() - path.size();
  }
  bool in_pool = c.opt.pool != nullptr;
  for (const TreeNodeInfo& i : path) {
    PathNode n = to_path_node(i);
    in_pool = in_pool && (n.tiers & tier_bit(Tier::kHbm));
    if (in_pool) {
      m.pool_nodes += 1;
      m.pool_tokens += n.num_tokens;
    } else if (n.tiers & tier_bit(Tier::kDram)) {
      m.dram_tokens += n.num_tokens;
    } else {
      m.ssd_tokens += n.num_tokens;
    }
    if (touch) {
      TierStats& ts = c.ctr.tiers[static_cast<int>(i.fastest)];
      ts.hits += 1;
      ts.hit_tokens += i.num_tokens;
    }
    if (pin) m.pin.pins_.emplace_back(i.key, c.tree->pin(i.key));
    m.nodes.push_back(n);
  }
  if (pin) m.pin.core_ = core_;
  return m;
}

engine::BlockTable KvStore::fork_pool(std::span<const PathNode> path) {
  StoreCore& c = *core_;
  std::lock_guard<std::mutex> lock(c.mu);
  engine::BlockTable t;
  if (!c.opt.pool) return t;
  for (const PathNode& n : path) {
    const PoolCopy* pc = c.tree->pool_copy(n.key);
    if (!pc || pc->begin != t.num_tokens()) break;
    t.append_shared(*c.opt.pool, pc->table, pc->begin - pc->base, pc->end - pc->begin);
  }
  return t;
}

namespace {
// The tree key of document `doc` under the path `parent_docs`, in the scope of model + KV format
// (+ the request's KV scope when isolation is on): one key scheme for every tier.
SegmentIdentity tree_identity(const StoreCore& c, std::span<const Hash128> parent_docs, const Hash128& doc,
                              std::string_view scope) {
  Hash128 parent = c.tree_root(scope);
  for (const Hash128& d : parent_docs) parent = child_key(parent, d);
  SegmentIdentity id;
  id.key = child_key(parent, doc);
  id.parent_key = parent;
  id.doc_key = doc;
  id.depth = static_cast<uint32_t>(parent_docs.size());
  return id;
}
}  // namespace

std::vector<SegmentIdentity> KvStore::path_identities(std::span<const Hash128> docs, std::string_view scope) const {
  const StoreCore& c = *core_;
  std::vector<SegmentIdentity> ids;
  ids.reserve(docs.size());
  Hash128 parent = c.tree_root(scope);
  for (size_t i = 0; i < docs.size(); ++i) {
    SegmentIdentity id;
    id.key = child_key(parent, docs[i]);
    id.parent_key = parent;
    id.doc_key = docs[i];
    id.depth = static_cast<uint32_t>(i);
    ids.push_back(id);
    parent = id.key;
  }
  return ids;
}

Result<InsertResult> KvStore::insert_pool(std::span<const Hash128> parent_docs, const Hash128& doc,
                                          const engine::BlockTable& table, int begin, int end, std::string_view scope,
                                          std::span<const int32_t> tokens) {
  return insert_pool(tree_identity(*core_, parent_docs, doc, scope), table, begin, end, scope, tokens);
}

Result<InsertResult> KvStore::insert_pool(const SegmentIdentity& id, const engine::BlockTable& table, int begin, int end,
                                          std::string_view scope, std::span<const int32_t> tokens) {
  StoreCore& c = *core_;
  if (!c.opt.pool) return Status::FailedPrecondition("kvstore: insert_pool without an engine pool");
  if (begin < 0 || end <= begin || end > table.num_tokens())
    return Status::InvalidArgument(fmt::format("kvstore: insert_pool tokens [{}, {}) outside a sequence of {}", begin, end,
                                               table.num_tokens()));
  const bool root_node = id.depth == 0;
  InsertResult r;
  r.key = id.key;
  SegmentHeader h;
  h.key = id.key;
  h.parent_key = id.parent_key;
  h.doc_key = id.doc_key;
  h.depth = id.depth;
  h.num_tokens = static_cast<uint32_t>(end - begin);
  h.first_position = begin;
  h.num_layers = static_cast<uint32_t>(c.fmt.num_layers);
  const uint64_t bytes = segment_bytes(c.fmt, end - begin);
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.closed) return Status::Unavailable("kvstore: closed");
  c.release_done_copies_locked();
  const bool known = c.tree->info(id.key).has_value();  // then: touch it, give it the pool copy back
  std::vector<TierAction> actions;
  if (c.events && !tokens.empty())
    c.note_tokens_locked(id, root_node, c.tree_root(scope),
                         tokens, end - begin);
  const int base = engine::BlockTable::range_base(*c.opt.pool, begin);
  PoolCopy copy{table.fork_range(*c.opt.pool, begin, end), begin, end, base};
  r.outcome = c.tree->insert_pool(id.parent_key, root_node, h, bytes, std::move(copy), nullptr, &actions, &r.tier);
  c.submit_actions_locked(actions);
  const bool lower = c.tree->copy_tier().has_value();
  // A node the pool could not take (no pool share: hbm_bytes 0, or no room) has no tier yet: its
  // lower copy inserts it when done.
  const bool pooled = r.outcome == KnowledgeTree::InsertOutcome::kInserted && r.tier == Tier::kHbm;
  const bool unplaced = r.outcome == KnowledgeTree::InsertOutcome::kNoSpace;
  if (known || !lower || !c.copier || (!pooled && !unplaced)) return r;
  // A copy in flight holds its blocks: under pool pressure (less than half the pool free) none is
  // started, and the node is demoted when it is evicted instead.
  if (pool_copy_blocked(pooled, c.opt.pool->free_blocks(), c.opt.pool->num_blocks())) {
    c.ctr.copies_skipped += 1;
    return r;
  }
  // The lower-tier copy, off this thread.
  {
    std::lock_guard<std::mutex> cl(c.cmu);
    if (pool_copy_over_budget(c.copy_bytes, bytes, c.opt.copy_inflight_bytes)) {
      c.ctr.copies_skipped += 1;
      return r;
    }
    c.copy_bytes += bytes;
    c.copies_inflight += 1;
  }
  auto job = std::make_shared<PoolCopy>(PoolCopy{table.fork_range(*c.opt.pool, begin, end), begin, end, base});
  const bool queued = c.copier->submit([&c, job, id, bytes, root = root_node] {
    {
      // Copies wait while model steps run (they take CPU and memory bandwidth from decoding), except
      // with a remote tier: the copy is what the fleet shares, and under steady load the engine is
      // never idle. It runs at background priority then.
      std::unique_lock<std::mutex> cl(c.cmu);
      c.ccv.wait(cl, [&] { return !c.engine_busy || c.remote != nullptr; });
    }
    SegmentRef seg;
    Result<HostKv> kv = gather_pool_copy(*c.opt.pool, *job);
    if (kv.ok()) {
      Result<std::shared_ptr<SegmentBuffer>> b = SegmentBuffer::build(c.fmt, id, kv->data());
      if (b.ok()) seg = std::move(b).value();
    }
    {
      std::lock_guard<std::mutex> l(c.mu);
      if (!c.closed && seg) {
        std::vector<TierAction> acts;
        const Tier t = c.tree->copy_tier().value_or(Tier::kDram);
        bool done = false;
        if (c.tree->info(id.key)) done = c.tree->promote(id.key, t, seg, &acts);
        else done = c.tree->insert(id.parent_key, root, seg, &acts) == KnowledgeTree::InsertOutcome::kInserted;
        if (done) c.ctr.copies += 1;
        c.remote_put(seg);
        c.submit_actions_locked(acts);
      }
      c.done_copies.push_back(std::move(*job));
    }
    // Before end_copy: once the copy stops counting as in flight, wait_copies() may return and the
    // callback's owner go away.
    if (c.on_copy_done) c.on_copy_done();
    c.end_copy(bytes);
  });
  if (!queued) {
    c.release(*job);
    c.ctr.copies_skipped += 1;
    c.end_copy(bytes);
  }
  return r;
}

void KvStore::set_on_pool_copy_done(std::function<void()> fn) { core_->on_copy_done = std::move(fn); }

void KvStore::set_engine_busy(bool busy) {
  StoreCore& c = *core_;
  std::lock_guard<std::mutex> cl(c.cmu);
  if (c.engine_busy == busy) return;
  c.engine_busy = busy;
  c.ccv.notify_all();
}

void KvStore::wait_copies() {
  StoreCore& c = *core_;
  std::unique_lock<std::mutex> lock(c.cmu);
  c.ccv.wait(lock, [&] { return c.copies_inflight == 0; });
}

bool KvStore::reclaim_pool(const std::function<bool()>& enough) {
  StoreCore& c = *core_;
  std::lock_guard<std::mutex> lock(c.mu);
  if (!c.closed) c.release_done_copies_locked();
  std::vector<TierAction> actions;
  bool ok = enough();
  while (!ok && c.opt.pool && c.tree->evict_one(Tier::kHbm, &actions)) ok = enough();
  if (!c.closed) c.submit_actions_locked(actions);
  return ok;
}

void KvStore::detach_pool() {
  StoreCore& c = *core_;
  set_engine_busy(false);  // the engine has stopped
  wait_copies();           // no copy reads the pool after this
  std::lock_guard<std::mutex> lock(c.mu);
  if (!c.opt.pool) return;
  c.release_done_copies_locked();
  std::vector<TierAction> actions;
  c.tree->detach_pool(&actions);
  if (!c.closed) c.submit_actions_locked(actions);
}

ChunkLookupResult KvStore::lookup_chunks(std::span<const Hash128> docs, std::string_view scope, bool pin) {
  StoreCore& c = *core_;
  const Hash128 root = chunk_scope_key(c.fmt, c.opt.tenant_isolation ? scope : std::string_view{});
  ChunkLookupResult r;
  std::lock_guard<std::mutex> lock(c.mu);
  for (const Hash128& d : docs) {
    std::vector<TreeNodeInfo> m = c.tree->match(root, std::span<const Hash128>(&d, 1), /*touch=*/true);
    c.ctr.chunk_lookups += 1;
    if (m.empty()) {
      c.ctr.chunk_misses += 1;
      r.chunks.emplace_back(std::nullopt);
      continue;
    }
    c.ctr.chunk_hits += 1;
    TierStats& ts = c.ctr.tiers[static_cast<int>(m[0].fastest)];
    ts.hits += 1;
    ts.hit_tokens += m[0].num_tokens;
    r.chunks.emplace_back(to_path_node(m[0]));
    if (pin) r.pin.pins_.emplace_back(m[0].key, c.tree->pin(m[0].key));
  }
  if (pin) r.pin.core_ = core_;
  return r;
}

Result<InsertResult> KvStore::insert(std::span<const Hash128> parent_docs, const Hash128& doc, const KvData& kv,
                                     std::string_view scope, std::span<const int32_t> tokens) {
  StoreCore& c = *core_;
  const SegmentIdentity id = tree_identity(c, parent_docs, doc, scope);
  RAGD_ASSIGN_OR_RETURN(std::shared_ptr<SegmentBuffer> seg, SegmentBuffer::build(c.fmt, id, kv));
  InsertResult r;
  r.key = id.key;
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.closed) return Status::Unavailable("kvstore: closed");
  if (c.events && !tokens.empty())
    c.note_tokens_locked(id, parent_docs.empty(), c.tree_root(scope),
                         tokens, kv.num_tokens);
  std::vector<TierAction> actions;
  r.outcome = c.tree->insert(id.parent_key, parent_docs.empty(), seg, &actions, &r.tier);
  c.submit_actions_locked(actions);
  if (r.outcome == KnowledgeTree::InsertOutcome::kInserted) c.remote_put(seg);
  return r;
}

Result<InsertResult> KvStore::insert_chunk(const Hash128& doc, const KvData& kv, std::string_view scope,
                                           std::span<const int32_t> tokens) {
  StoreCore& c = *core_;
  SegmentIdentity id;
  id.parent_key = chunk_scope_key(c.fmt, c.opt.tenant_isolation ? scope : std::string_view{});
  id.key = child_key(id.parent_key, doc);
  id.doc_key = doc;
  id.is_chunk = true;
  RAGD_ASSIGN_OR_RETURN(std::shared_ptr<SegmentBuffer> seg, SegmentBuffer::build(c.fmt, id, kv));
  InsertResult r;
  r.key = id.key;
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.closed) return Status::Unavailable("kvstore: closed");
  c.note_tokens_locked(id, true, id.parent_key, tokens, kv.num_tokens);
  std::vector<TierAction> actions;
  r.outcome = c.tree->insert(id.parent_key, true, seg, &actions, &r.tier);
  c.submit_actions_locked(actions);
  if (r.outcome == KnowledgeTree::InsertOutcome::kInserted) c.remote_put(seg);
  return r;
}

std::shared_ptr<LoadHandle> KvStore::load(std::span<const PathNode> nodes, LoadOptions opts) {
  StoreCore& c = *core_;
  std::shared_ptr<const RemoteTail> tail;
  if (opts.remote && opts.remote->size() > 0) tail = std::make_shared<const RemoteTail>(std::move(*opts.remote));
  opts.remote.reset();
  const size_t remote_n = tail ? tail->size() : 0;
  auto h = std::make_shared<LoadHandle>(nodes.size() + remote_n, c.fmt.num_layers);
  const bool independent = opts.independent;
  h->opts_ = std::move(opts);
  std::vector<PathNode> list(nodes.begin(), nodes.end());
  bool closed;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    closed = c.closed;
  }
  StoreCore* raw = &c;  // the pool is drained in close(), before the core can go away
  if (closed || !c.io->submit([raw, h, list, independent, tail] { raw->run_load(h, list, independent, tail); })) {
    const Status st = closed ? Status::Unavailable("kvstore: closed") : Status::ResourceExhausted("kvstore: I/O queue full");
    for (size_t i = 0; i < list.size() + remote_n; ++i) h->fail(i, st);
    {
      std::lock_guard<std::mutex> lock(c.mu);
      c.ctr.load_failures += list.size();
    }
    h->finish();  // callbacks run without the store's lock
  }
  return h;
}

void KvStore::drain_writes() {
  StoreCore& c = *core_;
  {
    std::unique_lock<std::mutex> lock(c.wmu);
    c.wcv.wait(lock, [&] { return c.writes_inflight == 0; });
  }
  if (c.remote) c.remote->drain();
}

Status KvStore::flush() {
  StoreCore& c = *core_;
  drain_writes();
  std::lock_guard<std::mutex> lock(c.mu);
  Status first = Status::OK();
  for (int t = 0; t < kMaxTiers; ++t) {
    if (c.kinds[t] != TierKind::kStored || !c.backend[t] || !c.up[t].load()) continue;
    Status st = c.backend[t]->flush();
    if (st.ok()) continue;
    c.disable_tier_locked(tier_at(t), st);
    if (first.ok()) first = st;
  }
  return first;
}

bool KvStore::has_remote() const { return core_->remote != nullptr; }

Stats KvStore::stats() const {
  StoreCore& c = *core_;
  std::lock_guard<std::mutex> lock(c.mu);
  Stats s = c.ctr;
  if (c.events_pub) {
    const KvEventCounters e = c.events_pub->counters();
    s.kv_events_batches = e.batches;
    s.kv_events_events = e.events;
    s.kv_events_dropped = e.dropped;
    s.kv_events_replays = e.replays;
    s.kv_events_auth_denied = e.auth_denied;
  }
  for (int t = 0; t < kMaxTiers; ++t) {
    const Tier tier = tier_at(t);
    TierStats& ts = s.tiers[t];
    ts.name = c.names[t];
    ts.kind = c.kinds[t];
    ts.errors = c.tier_errors[t];
    ts.error = c.tier_error[t];
    if (!c.tree->in_tree(tier)) continue;
    TierCounters tc = c.tree->counters(tier);
    ts.enabled = c.tree->tier_enabled(tier) && c.tree->capacity(tier) > 0;
    ts.capacity_bytes = c.tree->capacity(tier);
    ts.used_bytes = tc.used_bytes;
    ts.nodes = tc.nodes;
    ts.inserts = tc.inserts;
    ts.evictions = tc.evictions;
    ts.demotions = tc.demotions;
    ts.promotions = tc.promotions;
    ts.drops = tc.drops;
    ts.written_behind = tc.written_behind;
  }
  s.tree_nodes = c.tree->num_nodes();
  s.pinned_nodes = c.tree->num_pinned();
  s.ssd_errors = c.tier_errors[static_cast<int>(Tier::kSsd)];  // the SSD tier's, kept under their old names
  s.ssd_error = c.tier_error[static_cast<int>(Tier::kSsd)];
  if (c.remote) s.remote = c.remote->stats();
  return s;
}

Status KvStore::check_invariants() const {
  std::lock_guard<std::mutex> lock(core_->mu);
  return core_->tree->check_invariants();
}

std::string Stats::to_json() const {
  std::string s = fmt::format(R"({{"policy":{},"kv_events":{{"batches":{},"events":{},"dropped":{},"replays":{},"auth_denied":{}}},"tiers":{{)",
                              json_quote(policy), kv_events_batches, kv_events_events, kv_events_dropped, kv_events_replays,
                              kv_events_auth_denied);
  bool first = true;
  for (const TierStats& x : tiers) {
    if (x.kind != TierKind::kMemory && x.kind != TierKind::kStored) continue;  // the tree's tiers
    s += fmt::format(
        R"({}{}:{{"enabled":{},"capacity_bytes":{},"used_bytes":{},"nodes":{},"hits":{},"hit_tokens":{},"loads":{},"load_bytes":{},"inserts":{},"evictions":{},"demotions":{},"promotions":{},"drops":{}}})",
        first ? "" : ",", json_quote(x.name), x.enabled ? "true" : "false", x.capacity_bytes, x.used_bytes, x.nodes, x.hits,
        x.hit_tokens, x.loads, x.load_bytes, x.inserts, x.evictions, x.demotions, x.promotions, x.drops);
    first = false;
  }
  s += fmt::format(
      R"(}},"lookups":{},"lookup_docs":{},"lookup_misses":{},"chunk_lookups":{},"chunk_hits":{},"chunk_misses":{},"load_failures":{},"checksum_failures":{},"format_rejects":{},"ssd_errors":{},"ssd_error":{},"tree_nodes":{},"pinned_nodes":{},"restored_segments":{},"copies":{},"copies_skipped":{})",
      lookups, lookup_docs, lookup_misses, chunk_lookups, chunk_hits, chunk_misses, load_failures, checksum_failures,
      format_rejects, ssd_errors, json_quote(ssd_error), tree_nodes, pinned_nodes, restored_segments, copies, copies_skipped);
  const RemoteStats& r = remote;
  s += fmt::format(
      R"(,"remote_loads":{},"remote_load_tokens":{},"remote":{{"enabled":{},"breaker":{},"last_error":{},"gets":{},"hits":{},"misses":{},"hit_bytes":{},"puts":{},"put_bytes":{},"puts_dropped":{},"errors":{},"skipped":{},"checksum_failures":{},"mac_failures":{},"format_rejects":{},"partial_misses":{},"breaker_trips":{},"queued_bytes":{}}}}})",
      remote_loads, remote_load_tokens, r.enabled ? "true" : "false", json_quote(r.breaker), json_quote(r.last_error), r.gets,
      r.hits, r.misses, r.hit_bytes, r.puts, r.put_bytes, r.puts_dropped, r.errors, r.skipped, r.checksum_failures, r.mac_failures,
      r.format_rejects, r.partial_misses, r.breaker_trips, r.queued_bytes);
  return s;
}

}  // namespace ragd::kvstore
