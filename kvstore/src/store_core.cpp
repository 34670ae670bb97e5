#include "store_core.h"

#include <algorithm>

#include <fmt/format.h>

#include "ragd/common/log.h"
#include "ragd/kvstore/engine_io.h"

namespace ragd::kvstore::detail {

namespace {

// A LoadHandle slot as a tier's sink: the segment is published as read from `src`.
class SlotSink final : public SegmentSink {
 public:
  SlotSink(LoadHandle& h, size_t slot, Tier src) : h_(h), slot_(slot), src_(src) {}
  void begin(SegmentRef seg) override { StoreCore::publish(h_, slot_, std::move(seg), src_); }
  void layers_ready(int n) override { StoreCore::set_layers(h_, slot_, n); }

 private:
  LoadHandle& h_;
  size_t slot_;
  Tier src_;
};

}  // namespace

void StoreCore::publish(LoadHandle& h, size_t i, SegmentRef seg, Tier src) { h.publish_segment(i, std::move(seg), src); }
void StoreCore::set_layers(LoadHandle& h, size_t i, int layers) { h.set_layers(i, layers); }

// ---- tiers ------------------------------------------------------------------------------------------

Status StoreCore::configure_tiers() {
  const uint64_t hbm = opt.pool ? std::min<uint64_t>(opt.hbm_bytes, opt.pool->bytes()) : opt.hbm_bytes;
  const std::array<TierKind, kNumBuiltinTiers> builtin_kinds = {TierKind::kMemory, TierKind::kMemory, TierKind::kStored,
                                                                TierKind::kShared};
  const std::array<uint64_t, kNumBuiltinTiers> builtin_capacity = {hbm, opt.dram_bytes, opt.ssd_dir.empty() ? 0 : opt.ssd_bytes, 0};
  for (int t = 0; t < kNumBuiltinTiers; ++t) {
    names[t] = std::string(tier_name(tier_at(t)));
    kinds[t] = builtin_kinds[t];
    capacity[t] = builtin_capacity[t];
  }
  if (opt.extra_tiers.size() > static_cast<size_t>(kMaxTiers - kNumBuiltinTiers))
    return Status::InvalidArgument(fmt::format("kvstore: at most {} extra tiers, got {}", kMaxTiers - kNumBuiltinTiers,
                                               opt.extra_tiers.size()));
  for (size_t i = 0; i < opt.extra_tiers.size(); ++i) {
    const TierRegistration& r = opt.extra_tiers[i];
    const int t = kNumBuiltinTiers + static_cast<int>(i);
    if (r.name.empty()) return Status::InvalidArgument(fmt::format("kvstore: extra tier {} has no name", i));
    for (int u = 0; u < t; ++u)
      if (names[u] == r.name) return Status::InvalidArgument(fmt::format("kvstore: tier name '{}' is taken", r.name));
    if (!r.open) return Status::InvalidArgument(fmt::format("kvstore: extra tier '{}' has no open function", r.name));
    names[t] = r.name;
    record_tier_name(tier_at(t), r.name);
    kinds[t] = TierKind::kStored;
    capacity[t] = r.capacity_bytes;
  }
  return Status::OK();
}

Result<HostKv> gather_pool_copy(const engine::KvPool& pool, const PoolCopy& c) {
  Result<HostKv> kv = gather_kv(pool, c.table, c.begin - c.base, c.end - c.begin);
  if (kv.ok()) kv->first_position = c.begin;
  return kv;
}

SegmentRef StoreCore::export_segment(const TreeNodeInfo& n, const PoolCopy& c) {
  Result<HostKv> kv = gather_pool_copy(*opt.pool, c);
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

void StoreCore::on_tier_change_locked(const TreeNodeInfo& n, Tier t, bool entered) {
  if (events_pub->take_resync()) events_pub->publish_unbounded(events->resync_events());
  events->on_tier_change(n, t, entered);
}

void StoreCore::note_tokens_locked(const SegmentIdentity& id, bool parent_is_root, const Hash128& scope_root,
                                   std::span<const int32_t> tokens, int num_tokens) {
  if (!events || tokens.empty()) return;
  if (static_cast<int>(tokens.size()) != num_tokens) {
    log::kvstore()->warn("kv events: {} token ids given for a node of {} tokens; not announced", tokens.size(), num_tokens);
    return;
  }
  events->set_tokens(id.key, id.parent_key, parent_is_root, scope_root, tokens, tree->info(id.key).has_value());
}

// ---- copies -----------------------------------------------------------------------------------------

void StoreCore::end_copy(uint64_t bytes) {
  std::lock_guard<std::mutex> cl(cmu);
  copy_bytes -= bytes;
  copies_inflight -= 1;
  ccv.notify_all();
}

void StoreCore::release_done_copies_locked() {
  for (PoolCopy& pc : done_copies) release(pc);
  done_copies.clear();
}

// ---- stored-tier writes -----------------------------------------------------------------------------

void StoreCore::disable_tier_locked(Tier t, const Status& st) {
  const int i = static_cast<int>(t);
  tier_errors[i] += 1;
  const bool was_up = up[i].exchange(false);
  if (!was_up && !tier_error[i].empty()) return;  // already disabled (a tier that failed to open was never up)
  tier_error[i] = st.to_string();
  log::kvstore()->error("{} tier disabled: {} (serving continues from the other tiers and recompute)", names[i], tier_error[i]);
  tree->disable_tier(t);
}

void StoreCore::write_done() {
  std::lock_guard<std::mutex> lock(wmu);
  writes_inflight -= 1;
  if (writes_inflight == 0) wcv.notify_all();
}

void StoreCore::submit_actions_locked(std::vector<TierAction>& actions) {
  for (TierAction& a : actions) {
    const int ti = static_cast<int>(a.tier);
    if (!up[ti].load()) {
      if (a.kind == TierAction::Kind::kPut) tree->write_done(a.key, a.tier, a.uid);
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(wmu);
      writes_inflight += 1;
    }
    bool queued = writer->submit([this, a, ti] {
      if (up[ti].load()) {
        KvTier& b = *backend[ti];
        Status st = a.kind == TierAction::Kind::kPut ? b.store(a.segment) : b.evict(a.key, a.num_layers);
        std::lock_guard<std::mutex> lock(mu);
        if (!st.ok()) {
          disable_tier_locked(a.tier, st);
        } else if (a.kind == TierAction::Kind::kPut) {
          tree->write_done(a.key, a.tier, a.uid);
        }
      }
      write_done();
    });
    if (!queued) {
      write_done();
      disable_tier_locked(a.tier, Status::Unavailable(fmt::format("{} tier: writer queue is closed or full", names[ti])));
    }
  }
  actions.clear();
}

Status StoreCore::restore_tier(Tier t) {
  const int ti = static_cast<int>(t);
  KvTier& b = *backend[ti];
  std::vector<SegmentHeader> found;
  std::vector<std::pair<Hash128, uint32_t>> bad;  // (key, layers) to delete
  uint64_t corrupt = 0, foreign = 0;
  Status st = b.scan([&](const Hash128& key, std::span<const std::byte> bytes) {
    Result<SegmentHeader> h = decode_segment_header(bytes);
    if (!h.ok()) {
      corrupt += 1;
      log::kvstore()->error("{} tier: dropping stored segment {}: {}", names[ti], key.to_hex(), h.status().to_string());
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
  uint64_t restored = 0;
  for (const SegmentHeader& h : found) {
    if (tree->restore(t, h)) {
      restored += 1;
    } else {
      bad.emplace_back(h.key, h.num_layers);  // orphan: its parent is gone
    }
  }
  for (const auto& [k, layers] : bad) RAGD_RETURN_IF_ERROR(b.evict(k, layers));
  std::vector<TierAction> actions;
  tree->enforce_capacity(&actions);
  for (const TierAction& a : actions)
    if (a.kind == TierAction::Kind::kDelete) RAGD_RETURN_IF_ERROR(backend[static_cast<int>(a.tier)]->evict(a.key, a.num_layers));
  ctr.restored_segments += restored;
  ctr.checksum_failures += corrupt;
  ctr.format_rejects += foreign;
  log::kvstore()->info("{} tier: found {} segments again ({} removed: {} of another model/format, {} corrupt, rest orphans)",
                       names[ti], restored, bad.size(), foreign, corrupt);
  return Status::OK();
}

// ---- loads ------------------------------------------------------------------------------------------

Status StoreCore::load_one(LoadHandle& h, size_t i, const PathNode& pn, Tier* src_out) {
  SegmentRef host;
  Tier& src = *src_out;
  src = Tier::kSsd;
  {
    std::lock_guard<std::mutex> lock(mu);
    std::optional<TreeNodeInfo> info = tree->info(pn.key);
    if (!info) return Status::NotFound(fmt::format("kv segment {} is no longer cached", pn.key.to_hex()));
    bool found = false;
    for (int t = 0; t < kMaxTiers && !host; ++t) {
      if (!(info->tiers & tier_bit(tier_at(t)))) continue;
      src = tier_at(t);
      found = true;
      host = tree->segment(pn.key, src);  // a memory copy, or a stored tier's write still queued
      if (kinds[t] == TierKind::kStored) break;
    }
    if (!found || (!host && (kinds[static_cast<int>(src)] != TierKind::kStored || !up[static_cast<int>(src)].load())))
      return Status::NotFound(fmt::format("kv segment {} is no longer cached", pn.key.to_hex()));
  }
  if (host) {
    RAGD_RETURN_IF_ERROR(check_segment_format(host->header(), fmt));
    if (host->header().key != pn.key) return Status::FailedPrecondition("kv segment: key in header does not match");
    h.publish_segment(i, host, src);
    for (int l = 0; l < h.num_layers(); ++l) {
      if (opt.verify_host_loads) RAGD_RETURN_IF_ERROR(host->verify_layer(l));
      h.set_layers(i, l + 1);
    }
    return Status::OK();
  }
  SlotSink sink(h, i, src);
  return backend[static_cast<int>(src)]->load(pn.key, fmt, sink);
}

void StoreCore::run_load(const std::shared_ptr<LoadHandle>& h, const std::vector<PathNode>& nodes, bool independent,
                         std::shared_ptr<const RemoteTail> tail) {
  bool broken = false;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (broken) {
      h->fail(i, Status::Cancelled("kv load: an earlier node of the path failed"));
      continue;
    }
    Tier src = Tier::kSsd;
    const Status st = load_one(*h, i, nodes[i], &src);
    std::lock_guard<std::mutex> lock(mu);
    if (!st.ok()) {
      h->fail(i, st);
      ctr.load_failures += 1;
      if (!independent) broken = true;
      std::vector<TierAction> actions;
      if (st.code() == StatusCode::kCorruption) {
        ctr.checksum_failures += 1;
        log::kvstore()->error("kv load: {} — treated as a miss, segment dropped from {}", st.to_string(), names[static_cast<int>(src)]);
        if (!closed) tree->drop_subtree(nodes[i].key, src, &actions);
      } else if (st.code() == StatusCode::kFailedPrecondition) {
        ctr.format_rejects += 1;
        log::kvstore()->error("kv load: {} — rejected, segment dropped from {}", st.to_string(), names[static_cast<int>(src)]);
        if (!closed) tree->drop_subtree(nodes[i].key, src, &actions);
      } else if (st.code() == StatusCode::kIOError && kinds[static_cast<int>(src)] == TierKind::kStored) {
        disable_tier_locked(src, st);
      }
      if (!closed) submit_actions_locked(actions);
      continue;
    }
    TierStats& ts = ctr.tiers[static_cast<int>(src)];
    ts.loads += 1;
    ts.load_bytes += h->segment(i)->size();
    if (opt.promote_on_load && !closed && src != Tier::kHbm) {
      std::vector<TierAction> actions;
      const int fastest = opt.pool ? static_cast<int>(Tier::kDram) : 0;  // pool copies come from the scheduler
      for (int t = static_cast<int>(src) - 1; t >= fastest; --t)
        if (tree->in_tree(tier_at(t))) tree->promote(nodes[i].key, tier_at(t), h->segment(i), &actions);
      submit_actions_locked(actions);
    }
  }
  if (tail && tail->size() > 0) {
    start_remote(h, nodes.size(), std::move(tail), broken && !independent);
    return;
  }
  h->finish();
}

void StoreCore::start_remote(const std::shared_ptr<LoadHandle>& h, size_t base, std::shared_ptr<const RemoteTail> tail,
                             bool broken) {
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

void StoreCore::run_remote(const std::shared_ptr<LoadHandle>& h, size_t base, const RemoteTail& t) {
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
    h->set_layers(slot, h->num_layers());  // get() verified every layer
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
          note_tokens_locked(id, t.chunks || depth == 0, root, t.tokens[j], seg->num_tokens());
        }
        std::vector<TierAction> actions;
        tree->insert(pkey, t.chunks || depth == 0, seg, &actions);
        submit_actions_locked(actions);
      }
    }
    if (!t.chunks) parent = key;
  }
  h->finish();
}

void StoreCore::unpin(const std::vector<std::pair<Hash128, uint64_t>>& pins) {
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& [k, uid] : pins) tree->unpin(k, uid);
}

}  // namespace ragd::kvstore::detail
