#include "ragd/kvstore/kv_store.h"

#include "ragd/common/json_writer.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "ragd/common/log.h"
#include "ragd/common/thread_pool.h"
#include "ragd/kvstore/engine_io.h"

namespace ragd::kvstore {

namespace detail {

struct StoreCore final : PoolTier {
  Options opt;
  KvFormat fmt;

  // ---- PoolTier (pool mode; scheduler thread, mu held) ----------------------------------------
  SegmentRef export_segment(const TreeNodeInfo& n, const PoolCopy& c) override {
    Result<HostKv> kv = gather_kv(*opt.pool, c.table, c.begin, c.end - c.begin);
    if (!kv.ok()) {
      log::kvstore()->error("pool export of {}: {}", n.key.to_hex(), kv.status().to_string());
      return nullptr;
    }
    SegmentIdentity id;
    id.key = n.key;
    id.parent_key = n.parent_key;
    id.doc_key = n.doc;
    id.depth = n.depth;
    Result<std::shared_ptr<SegmentBuffer>> seg = SegmentBuffer::build(fmt, id, kv->data());
    if (!seg.ok()) {
      log::kvstore()->error("pool export of {}: {}", n.key.to_hex(), seg.status().to_string());
      return nullptr;
    }
    remote_put(*seg);
    return std::move(seg).value();
  }
  void release(PoolCopy& c) override { c.table.release(*opt.pool); }

  mutable std::mutex mu;
  std::unique_ptr<KnowledgeTree> tree;  // guarded by mu
  Stats ctr;                            // guarded by mu (counter fields only)
  bool closed = false;                  // guarded by mu

  std::unique_ptr<SsdTier> ssd;         // set at open; thread-safe; reset only in close()
  std::atomic<bool> ssd_ok{false};

  // KV events (Options::events; null = off): the tracker is guarded by mu (it is the tree's
  // observer); the publisher is thread-safe and never blocks.
  std::unique_ptr<KvEventPublisher> events_pub;
  std::unique_ptr<KvEventTracker> events;

  // mu held: the tree's on_tier_change observer.
  void on_tier_change_locked(const TreeNodeInfo& n, Tier t, bool entered) {
    if (events_pub->take_resync()) events_pub->publish_unbounded(events->resync_events());
    events->on_tier_change(n, t, entered);
  }
  // mu held, before the tree call that may place node `id`: its own token ids, for KV events.
  void note_tokens_locked(const SegmentIdentity& id, bool parent_is_root, const Hash128& scope_root,
                          std::span<const int32_t> tokens, int num_tokens) {
    if (!events || tokens.empty()) return;
    if (static_cast<int>(tokens.size()) != num_tokens) {
      log::kvstore()->warn("kv events: {} token ids given for a node of {} tokens; not announced", tokens.size(), num_tokens);
      return;
    }
    events->set_tokens(id.key, id.parent_key, parent_is_root, scope_root, tokens, tree->info(id.key).has_value());
  }

  std::unique_ptr<ThreadPool> io;       // loads
  // The remote tier and the threads its loads block on (so a slow Redis never holds a local load).
  std::unique_ptr<RemoteTier> remote;   // set at open; thread-safe; closed in close()
  std::unique_ptr<ThreadPool> rio;

  // Write-behind to the remote tier of a segment that just got a host copy. Never blocks.
  void remote_put(const SegmentRef& seg) {
    if (remote && seg) remote->put(seg);
  }
  // Pool-to-DRAM copies of new pool nodes: one thread, so that a parent's copy lands before its
  // child's. A copy reads blocks through its own fork (shared, so nobody writes them); the fork is
  // released on the scheduler thread (done_copies, at its next pool call), which owns the pool.
  std::unique_ptr<ThreadPool> copier;
  std::mutex cmu;
  std::condition_variable ccv;
  uint64_t copy_bytes = 0;              // guarded by cmu: in flight
  bool engine_busy = false;             // guarded by cmu: copies wait while model steps run
  size_t copies_inflight = 0;           // guarded by cmu
  std::vector<PoolCopy> done_copies;    // guarded by mu
  std::function<void()> on_copy_done;   // set before copies start (set_on_pool_copy_done)

  // A copy of `bytes` is over (done, or never queued): it no longer counts as in flight.
  void end_copy(uint64_t bytes) {
    std::lock_guard<std::mutex> cl(cmu);
    copy_bytes -= bytes;
    copies_inflight -= 1;
    ccv.notify_all();
  }

  // mu held, scheduler thread: forks of finished copies go back to the pool.
  void release_done_copies_locked() {
    for (PoolCopy& pc : done_copies) release(pc);
    done_copies.clear();
  }
  std::unique_ptr<ThreadPool> writer;   // SSD puts / deletes, one thread: FIFO order
  std::mutex wmu;
  std::condition_variable wcv;
  size_t writes_inflight = 0;           // guarded by wmu

  // ---- SSD ---------------------------------------------------------------------------------------
  // mu held.
  void disable_ssd_locked(const Status& st) {
    ctr.ssd_errors += 1;
    if (!ssd_ok.exchange(false)) return;
    ctr.ssd_error = st.to_string();
    log::kvstore()->error("SSD tier disabled: {} (serving continues from HBM/DRAM and recompute)", ctr.ssd_error);
    tree->disable_tier(Tier::kSsd);
  }

  void write_done() {
    std::lock_guard<std::mutex> lock(wmu);
    writes_inflight -= 1;
    if (writes_inflight == 0) wcv.notify_all();
  }

  // mu held: hands SSD actions to the writer in order.
  void submit_actions_locked(std::vector<SsdAction>& actions) {
    for (SsdAction& a : actions) {
      if (!ssd_ok.load()) {
        if (a.kind == SsdAction::Kind::kPut) tree->ssd_write_done(a.key, a.uid);
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(wmu);
        writes_inflight += 1;
      }
      bool queued = writer->submit([this, a] {
        if (ssd_ok.load()) {
          Status st = a.kind == SsdAction::Kind::kPut ? ssd->put(*a.segment) : ssd->remove(a.key, a.num_layers);
          std::lock_guard<std::mutex> lock(mu);
          if (!st.ok()) {
            disable_ssd_locked(st);
          } else if (a.kind == SsdAction::Kind::kPut) {
            tree->ssd_write_done(a.key, a.uid);
          }
        }
        write_done();
      });
      if (!queued) {
        write_done();
        disable_ssd_locked(Status::Unavailable("ssd tier: writer queue is closed or full"));
      }
    }
    actions.clear();
  }

  Status open_ssd() {
    SsdTierOptions so;
    so.dir = opt.ssd_dir;
    so.min_blob_bytes = opt.ssd_min_blob_bytes;
    so.sync_writes = opt.ssd_sync_writes;
    so.file_system = opt.ssd_file_system;
    Result<std::unique_ptr<SsdTier>> r = SsdTier::open(so);
    if (!r.ok()) return r.status();
    ssd = std::move(r).value();
    ssd_ok.store(true);
    // Rebuild the index from the stored headers.
    std::vector<SegmentHeader> found;
    std::vector<std::pair<Hash128, uint32_t>> bad;  // (key, layers) to delete
    uint64_t corrupt = 0, foreign = 0;
    Status st = ssd->scan_headers([&](const Hash128& key, std::span<const std::byte> b) {
      Result<SegmentHeader> h = decode_segment_header(b);
      if (!h.ok()) {
        corrupt += 1;
        log::kvstore()->error("ssd tier {}: dropping stored segment {}: {}", opt.ssd_dir, key.to_hex(), h.status().to_string());
        bad.emplace_back(key, static_cast<uint32_t>(fmt.num_layers));
        return;
      }
      if (!check_segment_format(*h, fmt).ok() || h->key != key) {
        foreign += 1;
        bad.emplace_back(key, h->num_layers);
        return;
      }
      found.push_back(std::move(h).value());
    });
    if (!st.ok()) return st;
    std::stable_sort(found.begin(), found.end(), [](const SegmentHeader& a, const SegmentHeader& b) { return a.depth < b.depth; });
    std::vector<SsdAction> actions;
    uint64_t restored = 0;
    for (const SegmentHeader& h : found) {
      if (tree->restore_ssd(h)) {
        restored += 1;
      } else {
        bad.emplace_back(h.key, h.num_layers);  // orphan: its parent is gone
      }
    }
    for (const auto& [k, layers] : bad) RAGD_RETURN_IF_ERROR(ssd->remove(k, layers));
    tree->enforce_capacity(&actions);
    for (const SsdAction& a : actions)
      if (a.kind == SsdAction::Kind::kDelete) RAGD_RETURN_IF_ERROR(ssd->remove(a.key, a.num_layers));
    ctr.restored_segments = restored;
    ctr.checksum_failures += corrupt;
    ctr.format_rejects += foreign;
    log::kvstore()->info("ssd tier {}: found {} segments again ({} removed: {} of another model/format, {} corrupt, rest orphans)",
                         opt.ssd_dir, restored, bad.size(), foreign, corrupt);
    return Status::OK();
  }

  // ---- loads -----------------------------------------------------------------------------------
  // Reads one node from its fastest tier into `h` slot i. Returns the source tier on success.
  Result<Tier> load_one(LoadHandle& h, size_t i, const PathNode& pn, Tier* src_out) {
    SegmentRef host;
    Tier& src = *src_out;
    src = Tier::kSsd;
    {
      std::lock_guard<std::mutex> lock(mu);
      std::optional<TreeNodeInfo> info = tree->info(pn.key);
      if (!info) return Status::NotFound(fmt::format("kv segment {} is no longer cached", pn.key.to_hex()));
      for (int t = 0; t < kNumTiers && !host; ++t) {
        if (!(info->tiers & tier_bit(static_cast<Tier>(t)))) continue;
        src = static_cast<Tier>(t);
        host = tree->segment(pn.key, src);  // null for an SSD segment already written
        if (src == Tier::kSsd) break;
      }
      if (!host && (src != Tier::kSsd || !ssd_ok.load()))
        return Status::NotFound(fmt::format("kv segment {} is no longer cached", pn.key.to_hex()));
    }
    if (host) {
      Status st = check_segment_format(host->header(), fmt);
      if (!st.ok()) return st;
      if (host->header().key != pn.key) return Status::FailedPrecondition("kv segment: key in header does not match");
      h.publish_segment(i, host, src);
      for (int l = 0; l < h.num_layers(); ++l) {
        if (opt.verify_host_loads) RAGD_RETURN_IF_ERROR(host->verify_layer(l));
        h.set_layers(i, l + 1);
      }
      return src;
    }
    // SSD: header, then layer by layer.
    std::string buf;
    RAGD_RETURN_IF_ERROR(ssd->read_header(pn.key, &buf));
    RAGD_ASSIGN_OR_RETURN(SegmentHeader hd,
                          decode_segment_header({reinterpret_cast<const std::byte*>(buf.data()), buf.size()}));
    RAGD_RETURN_IF_ERROR(check_segment_format(hd, fmt));
    if (hd.key != pn.key)
      return Status::FailedPrecondition(fmt::format("kv segment: header key {} does not match {}", hd.key.to_hex(), pn.key.to_hex()));
    std::shared_ptr<SegmentBuffer> seg = SegmentBuffer::allocate(hd);
    h.publish_segment(i, seg, Tier::kSsd);
    const size_t lb = hd.layer_bytes();
    for (uint32_t l = 0; l < hd.num_layers; ++l) {
      Status st = ssd->read_layer(pn.key, l, lb, seg->mutable_layer_k(static_cast<int>(l)), seg->mutable_layer_v(static_cast<int>(l)));
      if (st.code() == StatusCode::kNotFound)
        return Status::Corruption(fmt::format("kv segment {}: layer {} record missing", pn.key.to_hex(), l));
      RAGD_RETURN_IF_ERROR(st);
      RAGD_RETURN_IF_ERROR(seg->verify_layer(static_cast<int>(l)));
      h.set_layers(i, static_cast<int>(l) + 1);
    }
    return Tier::kSsd;
  }

  void run_load(const std::shared_ptr<LoadHandle>& h, const std::vector<PathNode>& nodes, bool independent,
                std::shared_ptr<const RemoteTail> tail = nullptr) {
    bool broken = false;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (broken) {
        h->fail(i, Status::Cancelled("kv load: an earlier node of the path failed"));
        continue;
      }
      Tier src = Tier::kSsd;
      Result<Tier> r = load_one(*h, i, nodes[i], &src);
      std::lock_guard<std::mutex> lock(mu);
      if (!r.ok()) {
        const Status& st = r.status();
        h->fail(i, st);
        ctr.load_failures += 1;
        if (!independent) broken = true;
        std::vector<SsdAction> actions;
        if (st.code() == StatusCode::kCorruption) {
          ctr.checksum_failures += 1;
          log::kvstore()->error("kv load: {} — treated as a miss, segment dropped from {}", st.to_string(), tier_name(src));
          if (!closed) tree->drop_subtree(nodes[i].key, src, &actions);
        } else if (st.code() == StatusCode::kFailedPrecondition) {
          ctr.format_rejects += 1;
          log::kvstore()->error("kv load: {} — rejected, segment dropped from {}", st.to_string(), tier_name(src));
          if (!closed) tree->drop_subtree(nodes[i].key, src, &actions);
        } else if (st.code() == StatusCode::kIOError) {
          disable_ssd_locked(st);
        }
        if (!closed) submit_actions_locked(actions);
        continue;
      }
      TierStats& ts = ctr.tiers[static_cast<int>(src)];
      ts.loads += 1;
      ts.load_bytes += h->segment(i)->size();
      if (opt.promote_on_load && !closed && src != Tier::kHbm) {
        std::vector<SsdAction> actions;
        const int fastest = opt.pool ? static_cast<int>(Tier::kDram) : 0;  // pool copies come from the scheduler
        for (int t = static_cast<int>(src) - 1; t >= fastest; --t)
          tree->promote(nodes[i].key, static_cast<Tier>(t), h->segment(i), &actions);
        submit_actions_locked(actions);
      }
    }
    if (tail && tail->size() > 0) {
      start_remote(h, nodes.size(), std::move(tail), broken && !independent);
      return;
    }
    h->finish();
  }

  // Slots [base, base + tail->size()) of `h` from the remote tier, on its own threads; finishes h.
  void start_remote(const std::shared_ptr<LoadHandle>& h, size_t base, std::shared_ptr<const RemoteTail> tail, bool broken) {
    const size_t n = tail->size();
    Status why = Status::OK();
    if (broken) why = Status::Cancelled("kv load: an earlier node of the path failed");
    else if (!remote) why = Status::NotFound("kv load: no remote tier");
    else if (!remote->available()) why = Status::Unavailable("remote kv tier: circuit breaker open");
    if (why.ok() && rio->submit([this, h, base, tail] { run_remote(h, base, *tail); })) return;
    if (why.ok()) why = Status::ResourceExhausted("remote kv tier: load queue full");
    for (size_t j = 0; j < n; ++j) h->fail(base + j, why);
    h->finish();
  }

  void run_remote(const std::shared_ptr<LoadHandle>& h, size_t base, const RemoteTail& t) {
    const std::string_view scope = opt.tenant_isolation ? std::string_view(t.tenant) : std::string_view{};
    // Chunks: every entry sits under the chunk scope. Path: each node under the one before, the
    // first under the path docs [0, from).
    const Hash128 root = t.chunks ? chunk_scope_key(fmt, scope) : tree_scope_key(fmt, scope);
    Hash128 parent = root;
    if (!t.chunks)
      for (size_t i = 0; i < t.from && i < t.docs.size(); ++i) parent = child_key(parent, t.docs[i]);
    bool broken = false;
    for (size_t j = 0; j < t.size(); ++j) {
      const size_t slot = base + j;
      if (broken) {
        h->fail(slot, Status::Cancelled("kv load: an earlier node of the path failed"));
        continue;
      }
      const size_t depth = t.chunks ? 0 : t.from + j;
      const Hash128& doc = t.chunks ? t.docs[j] : t.docs[t.from + j];
      const Hash128 pkey = parent;
      const Hash128 key = child_key(pkey, doc);
      Result<SegmentRef> r = remote->get(key);
      if (r.ok()) {
        const SegmentHeader& hd = (*r)->header();
        if (hd.doc_key != doc || hd.parent_key != pkey || hd.is_chunk != t.chunks || hd.depth != depth)
          r = Status::FailedPrecondition(fmt::format("remote kv segment {}: identity does not match its key", key.to_hex()));
      }
      if (!r.ok()) {
        h->fail(slot, r.status());
        if (!t.chunks) broken = true;
        continue;
      }
      const SegmentRef seg = std::move(r).value();
      h->publish_segment(slot, seg, Tier::kRemote);
      h->set_layers(slot, h->num_layers());  // parse() verified every layer
      {
        std::lock_guard<std::mutex> lock(mu);
        ctr.remote_loads += 1;
        ctr.remote_load_tokens += static_cast<uint64_t>(seg->num_tokens());
        if (!closed && opt.promote_on_load && !tree->info(key)) {  // promoted: later runs find it locally
          if (j < t.tokens.size()) {
            SegmentIdentity id;
            id.key = key;
            id.parent_key = pkey;
            id.doc_key = doc;
            id.depth = static_cast<uint32_t>(depth);
            id.is_chunk = t.chunks;
            note_tokens_locked(id, t.chunks || depth == 0, root, t.tokens[j],
                               seg->num_tokens());
          }
          std::vector<SsdAction> actions;
          tree->insert(pkey, t.chunks || depth == 0, seg, &actions);
          submit_actions_locked(actions);
        }
      }
      if (!t.chunks) parent = key;
    }
    h->finish();
  }

  void unpin(const std::vector<std::pair<Hash128, uint64_t>>& pins) {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& [k, uid] : pins) tree->unpin(k, uid);
  }
};

}  // namespace detail

using detail::StoreCore;

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
  TreeOptions to;
  const uint64_t hbm = opt.pool ? std::min<uint64_t>(opt.hbm_bytes, opt.pool->bytes()) : opt.hbm_bytes;
  to.capacity = {hbm, opt.dram_bytes, opt.ssd_dir.empty() ? 0 : opt.ssd_bytes};
  to.pool = opt.pool ? core.get() : nullptr;
  to.write_behind = opt.write_behind;
  to.policy = policy;
  to.cost = opt.cost;
  to.ssd_max_pending_bytes = opt.ssd_max_pending_bytes;
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
  if (opt.ssd_dir.empty()) {
    core->tree->disable_tier(Tier::kSsd);
  } else {
    Status st = core->open_ssd();
    if (!st.ok()) {
      core->ssd.reset();
      core->ssd_ok.store(false);
      core->ctr.ssd_errors += 1;
      core->ctr.ssd_error = st.to_string();
      core->tree = std::make_unique<KnowledgeTree>(to);  // forget a partial restore
      core->tree->disable_tier(Tier::kSsd);
      log::kvstore()->error("SSD tier disabled at open: {} (serving continues from HBM/DRAM and recompute)", core->ctr.ssd_error);
    }
  }
  if (!opt.remote.url.empty()) {
    if (opt.remote_io_threads <= 0 || opt.remote_io_threads > 64)
      return Status::InvalidArgument(fmt::format("kvstore: remote_io_threads must be in 1..64, got {}", opt.remote_io_threads));
    RAGD_ASSIGN_OR_RETURN(core->remote, RemoteTier::open(opt.remote, fmt));
    core->rio = std::make_unique<ThreadPool>(static_cast<size_t>(opt.remote_io_threads), opt.io_queue, "kv-remote");
  }
  core->io = std::make_unique<ThreadPool>(static_cast<size_t>(opt.io_threads), opt.io_queue, "kv-io");
  // SSD writes and pool-to-DRAM copies are nobody's critical path: they run in the background.
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
  c.io->stop();  // drains queued loads (they may still queue SSD writes and remote loads)
  if (c.rio) c.rio->stop();  // drains remote loads
  set_engine_busy(false);          // nothing runs any more: waiting copies may go
  if (c.copier) c.copier->stop();  // drains pool-to-DRAM copies (they may queue SSD writes)
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.closed = true;
  }
  c.writer->stop();  // drains queued SSD writes
  if (c.remote) c.remote->close();  // drains queued remote writes
  std::lock_guard<std::mutex> lock(c.mu);
  c.ssd_ok.store(false);
  c.ssd.reset();
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
  const Hash128 root = tree_scope_key(c.fmt, c.opt.tenant_isolation ? scope : std::string_view{});
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
  const Hash128 root = tree_scope_key(c.fmt, c.opt.tenant_isolation ? scope : std::string_view{});
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

engine::BlockTable KvStore::fork_pool(const Hash128& key) {
  StoreCore& c = *core_;
  std::lock_guard<std::mutex> lock(c.mu);
  const PoolCopy* pc = c.opt.pool ? c.tree->pool_copy(key) : nullptr;
  if (!pc) return {};
  return pc->table.fork_prefix(*c.opt.pool, pc->end);
}

namespace {
// The tree key of document `doc` under the path `parent_docs`, in the scope of model + KV format
// (+ the request's KV scope when isolation is on): one key scheme for every tier.
SegmentIdentity tree_identity(const StoreCore& c, std::span<const Hash128> parent_docs, const Hash128& doc,
                              std::string_view scope) {
  Hash128 parent = tree_scope_key(c.fmt, c.opt.tenant_isolation ? scope : std::string_view{});
  for (const Hash128& d : parent_docs) parent = child_key(parent, d);
  SegmentIdentity id;
  id.key = child_key(parent, doc);
  id.parent_key = parent;
  id.doc_key = doc;
  id.depth = static_cast<uint32_t>(parent_docs.size());
  return id;
}
}  // namespace

Result<InsertResult> KvStore::insert_pool(std::span<const Hash128> parent_docs, const Hash128& doc,
                                          const engine::BlockTable& table, int begin, int end, std::string_view scope,
                                          std::span<const int32_t> tokens) {
  StoreCore& c = *core_;
  if (!c.opt.pool) return Status::FailedPrecondition("kvstore: insert_pool without an engine pool");
  if (begin < 0 || end <= begin || end > table.num_tokens())
    return Status::InvalidArgument(fmt::format("kvstore: insert_pool tokens [{}, {}) outside a sequence of {}", begin, end,
                                               table.num_tokens()));
  const SegmentIdentity id = tree_identity(c, parent_docs, doc, scope);
  InsertResult r;
  r.key = id.key;
  SegmentHeader h;
  h.key = id.key;
  h.parent_key = id.parent_key;
  h.doc_key = doc;
  h.depth = id.depth;
  h.num_tokens = static_cast<uint32_t>(end - begin);
  h.first_position = begin;
  h.num_layers = static_cast<uint32_t>(c.fmt.num_layers);
  const uint64_t bytes = segment_bytes(c.fmt, end - begin);
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.closed) return Status::Unavailable("kvstore: closed");
  c.release_done_copies_locked();
  const bool known = c.tree->info(id.key).has_value();  // then: touch it, give it the pool copy back
  std::vector<SsdAction> actions;
  if (c.events && !tokens.empty())
    c.note_tokens_locked(id, parent_docs.empty(), tree_scope_key(c.fmt, c.opt.tenant_isolation ? scope : std::string_view{}),
                         tokens, end - begin);
  PoolCopy copy{table.fork_prefix(*c.opt.pool, end), begin, end};
  r.outcome = c.tree->insert_pool(id.parent_key, parent_docs.empty(), h, bytes, std::move(copy), nullptr, &actions, &r.tier);
  c.submit_actions_locked(actions);
  const bool lower = c.tree->capacity(Tier::kDram) > 0 || c.tree->capacity(Tier::kSsd) > 0;
  // A node the pool could not take (no pool share: hbm_bytes 0, or no room) has no tier yet: its
  // lower copy inserts it when done.
  const bool pooled = r.outcome == KnowledgeTree::InsertOutcome::kInserted && r.tier == Tier::kHbm;
  const bool unplaced = r.outcome == KnowledgeTree::InsertOutcome::kNoSpace;
  if (known || !lower || !c.copier || (!pooled && !unplaced)) return r;
  // A copy in flight holds its blocks: under pool pressure (less than half the pool free) none is
  // started, and the node is demoted when it is evicted instead.
  if (pooled && c.opt.pool->free_blocks() * 2 < c.opt.pool->num_blocks()) {
    c.ctr.copies_skipped += 1;
    return r;
  }
  // The lower-tier copy, off this thread.
  {
    std::lock_guard<std::mutex> cl(c.cmu);
    if (c.copy_bytes + bytes > c.opt.copy_inflight_bytes) {
      c.ctr.copies_skipped += 1;
      return r;
    }
    c.copy_bytes += bytes;
    c.copies_inflight += 1;
  }
  auto job = std::make_shared<PoolCopy>(PoolCopy{table.fork_prefix(*c.opt.pool, end), begin, end});
  const bool root = parent_docs.empty();
  const bool queued = c.copier->submit([&c, job, id, bytes, root] {
    {
      // Copies wait while model steps run (they take CPU and memory bandwidth from decoding), except
      // with a remote tier: the copy is what the fleet shares, and under steady load the engine is
      // never idle. It runs at background priority then.
      std::unique_lock<std::mutex> cl(c.cmu);
      c.ccv.wait(cl, [&] { return !c.engine_busy || c.remote != nullptr; });
    }
    SegmentRef seg;
    Result<HostKv> kv = gather_kv(*c.opt.pool, job->table, job->begin, job->end - job->begin);
    if (kv.ok()) {
      Result<std::shared_ptr<SegmentBuffer>> b = SegmentBuffer::build(c.fmt, id, kv->data());
      if (b.ok()) seg = std::move(b).value();
    }
    {
      std::lock_guard<std::mutex> l(c.mu);
      if (!c.closed && seg) {
        std::vector<SsdAction> acts;
        const Tier t = c.tree->capacity(Tier::kDram) > 0 ? Tier::kDram : Tier::kSsd;
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
  std::vector<SsdAction> actions;
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
  std::vector<SsdAction> actions;
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
    c.note_tokens_locked(id, parent_docs.empty(), tree_scope_key(c.fmt, c.opt.tenant_isolation ? scope : std::string_view{}),
                         tokens, kv.num_tokens);
  std::vector<SsdAction> actions;
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
  std::vector<SsdAction> actions;
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
  if (!c.ssd || !c.ssd_ok.load()) return Status::OK();
  Status st = c.ssd->flush();
  if (!st.ok()) c.disable_ssd_locked(st);
  return st;
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
  for (int t = 0; t < kNumTiers; ++t) {
    const Tier tier = static_cast<Tier>(t);
    TierCounters tc = c.tree->counters(tier);
    TierStats& ts = s.tiers[t];
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
  for (int t = 0; t < kNumTiers; ++t) {
    const TierStats& x = tiers[t];
    s += fmt::format(
        R"({}"{}":{{"enabled":{},"capacity_bytes":{},"used_bytes":{},"nodes":{},"hits":{},"hit_tokens":{},"loads":{},"load_bytes":{},"inserts":{},"evictions":{},"demotions":{},"promotions":{},"drops":{}}})",
        t ? "," : "", tier_name(static_cast<Tier>(t)), x.enabled ? "true" : "false", x.capacity_bytes, x.used_bytes, x.nodes,
        x.hits, x.hit_tokens, x.loads, x.load_bytes, x.inserts, x.evictions, x.demotions, x.promotions, x.drops);
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
