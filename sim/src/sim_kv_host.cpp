#include "ragd/sim/sim_kv_host.h"

#include <algorithm>
#include <limits>
#include <string>

#include "ragd/common/check.h"
#include "ragd/kvstore/keys.h"
#include "ragd/kvstore/segment.h"

namespace ragd::sim {

using kvstore::Tier;

struct SimKvHost::Run {
  Hash128 root;
  std::vector<Hash128> docs;  // path node document keys
  std::vector<Hash128> keys;  // path node keys
  std::vector<int> ends;      // cumulative token end of each node
  size_t avail = 0;           // nodes found at lookup (local tiers, then remote)
  std::vector<Tier> src;      // per found node: the tier it comes from
  std::vector<std::pair<Hash128, uint64_t>> pins;
  int kv = 0;                 // tokens whose blocks the run holds
  int shared_end = 0;         // tokens [0, shared_end) are in pool copies the run refers to
  std::vector<int> copies;
  int swapped = -1;           // tokens swapped out to host memory; -1 = none
  bool admitted = false, published = false;
  size_t reused_nodes = 0;
  ReuseCounts reused;

  int begin(size_t i) const { return i == 0 ? 0 : ends[i - 1]; }
};

// The pool's side of the HBM tier: copies are accounted by the tier observer; a demotion gathers
// the node from the pool on the scheduler thread (costed by the host).
class SimKvHost::Pool final : public kvstore::PoolTier {
 public:
  Pool(SimKvHost* host, const kvstore::SegmentRef* host_copy) : host_(host), host_copy_(host_copy) {}
  kvstore::SegmentRef export_segment(const kvstore::TreeNodeInfo& n, const kvstore::PoolCopy&) override {
    host_->on_export(n.bytes);
    return *host_copy_;
  }
  void release(kvstore::PoolCopy&) override {}

 private:
  SimKvHost* host_;
  const kvstore::SegmentRef* host_copy_;
};

namespace {

Hash128 hash_of(std::string_view tag, uint64_t v) {
  Hasher128 h;
  h.str(tag).u64(v);
  return h.digest();
}

// A one-token segment standing for every host copy: the tree accounts node bytes itself.
kvstore::SegmentRef make_host_copy() {
  kvstore::KvFormat fmt;
  fmt.num_layers = 1;
  fmt.num_kv_heads = 1;
  fmt.head_dim = 1;
  const float k = 0, v = 0;
  kvstore::KvData kv;
  kv.num_tokens = 1;
  kv.k = &k;
  kv.v = &v;
  auto seg = kvstore::SegmentBuffer::build(fmt, kvstore::SegmentIdentity{}, kv);
  RAGD_CHECK(seg.ok()) << seg.status().to_string();
  return std::move(seg).value();
}

}  // namespace

SimKvHost::SimKvHost(const KvHostOptions& opts, const CostModel& cost, SharedRemote* remote)
    : opts_(opts), cost_(cost), remote_(remote) {
  block_bytes_ = static_cast<uint64_t>(cost_.shape.kv_bytes_per_token() * opts_.block_size);
  host_copy_ = make_host_copy();
  pool_ = std::make_unique<Pool>(this, &host_copy_);
  kvstore::TreeOptions to;
  const uint64_t pool_bytes = static_cast<uint64_t>(opts_.pool_blocks) * block_bytes_;
  to.capacity = {opts_.hbm_cache ? (opts_.hbm_bytes ? std::min(opts_.hbm_bytes, pool_bytes) : pool_bytes) : 0,
                 opts_.dram_bytes, opts_.ssd_bytes};
  to.policy = opts_.eviction;
  to.pool = pool_.get();
  to.write_behind = true;  // as the runtime configures the store
  to.on_tier_change = [this](const kvstore::TreeNodeInfo& n, Tier t, bool entered) { on_tier_change(n, t, entered); };
  tree_ = std::make_unique<kvstore::KnowledgeTree>(std::move(to));
}

SimKvHost::~SimKvHost() = default;

SimKvHost::Run& SimKvHost::run(uint64_t id) {
  auto it = runs_.find(id);
  RAGD_CHECK(it != runs_.end()) << "sim kv host: unknown run " << id;
  return *it->second;
}
const SimKvHost::Run& SimKvHost::run(uint64_t id) const {
  auto it = runs_.find(id);
  RAGD_CHECK(it != runs_.end()) << "sim kv host: unknown run " << id;
  return *it->second;
}

int SimKvHost::own_blocks(int kv, int shared_end) const {
  if (kv <= shared_end) return 0;
  const int bs = opts_.block_size;
  return (kv + bs - 1) / bs - (shared_end + bs - 1) / bs;
}

void SimKvHost::set_own(Run& r, int kv, int shared_end) {
  used_blocks_ += own_blocks(kv, shared_end) - own_blocks(r.kv, r.shared_end);
  r.kv = kv;
  r.shared_end = shared_end;
}

void SimKvHost::unref(int copy_id) {
  auto it = copies_.find(copy_id);
  RAGD_CHECK(it != copies_.end()) << "sim kv host: unknown pool copy " << copy_id;
  if (--it->second.refs == 0) {
    used_blocks_ -= it->second.blocks;
    copies_.erase(it);
  }
}

void SimKvHost::on_tier_change(const kvstore::TreeNodeInfo& n, Tier t, bool entered) {
  if (t == Tier::kHbm) {
    if (entered) {
      const int bs = opts_.block_size;
      const int begin = static_cast<int>(n.prefix_tokens), end = begin + static_cast<int>(n.num_tokens);
      const int id = next_copy_++;
      Copy c;
      c.blocks = (end + bs - 1) / bs - (begin + bs - 1) / bs;
      c.refs = 1;
      used_blocks_ += c.blocks;
      node_copy_[n.key] = id;
      if (placing_) {  // the copy shares the placing run's blocks of these tokens
        c.refs += 1;
        placing_->copies.push_back(id);
        if (placing_->shared_end == begin && placing_->kv >= end) set_own(*placing_, placing_->kv, end);
      }
      copies_[id] = c;
    } else {
      auto it = node_copy_.find(n.key);
      RAGD_CHECK(it != node_copy_.end()) << "sim kv host: node left the pool without a copy";
      const int id = it->second;
      node_copy_.erase(it);
      unref(id);
    }
  } else if (t == Tier::kDram && entered && remote_) {
    remote_->put(n.key, n.bytes);  // written behind to the shared tier
  }
}

void SimKvHost::drain(std::vector<kvstore::TierAction>& actions) {
  for (const auto& a : actions)
    if (a.kind == kvstore::TierAction::Kind::kPut) tree_->write_done(a.key, a.tier, a.uid);
  actions.clear();
}

void SimKvHost::build_path(const SimRequest& req, Run& r) const {
  r.root = hash_of("ragd.sim.root", opts_.tenant_isolation ? static_cast<uint64_t>(req.tenant) : 0);
  Hash128 parent = r.root;
  int end = 0;
  for (const PathSegment& p : req.path) {
    r.docs.push_back(hash_of("ragd.sim.doc", p.doc));
    parent = kvstore::child_key(parent, r.docs.back());
    r.keys.push_back(parent);
    end += p.tokens;
    r.ends.push_back(end);
  }
}

kvstore::SegmentHeader SimKvHost::header_of(const Run& r, size_t i) const {
  kvstore::SegmentHeader h;
  h.key = r.keys[i];
  h.parent_key = i == 0 ? r.root : r.keys[i - 1];
  h.doc_key = r.docs[i];
  h.depth = static_cast<uint32_t>(i);
  h.num_tokens = static_cast<uint32_t>(r.ends[i] - r.begin(i));
  h.first_position = r.begin(i);
  h.num_layers = static_cast<uint32_t>(cost_.shape.layers);
  return h;
}

LookupOutcome SimKvHost::lookup(const SimRequest& req, double now) {
  auto owned = std::make_unique<Run>();
  Run& r = *owned;
  runs_[req.id] = std::move(owned);
  build_path(req, r);
  LookupOutcome out{now, 0};
  if (r.keys.empty()) return out;
  for (const kvstore::TreeNodeInfo& n : tree_->match(r.root, r.docs, /*touch=*/true)) {
    r.pins.emplace_back(n.key, tree_->pin(n.key));
    r.src.push_back(n.fastest);
  }
  r.avail = r.src.size();
  const bool ask_remote = remote_ && r.avail < r.keys.size();
  if (ask_remote) {
    while (r.avail < r.keys.size() && remote_->get(r.keys[r.avail])) {
      r.src.push_back(Tier::kRemote);
      ++r.avail;
    }
  }
  // As the reuse planner: a path found wholly in the pool needs no load and keeps no pin (its nodes
  // may be evicted before admission, which then installs what is still there).
  if (!ask_remote && std::all_of(r.src.begin(), r.src.end(), [](Tier t) { return t == Tier::kHbm; })) {
    for (const auto& [key, uid] : r.pins) tree_->unpin(key, uid);
    r.pins.clear();
  }
  double bytes[4] = {0, 0, 0, 0};
  int nodes[4] = {0, 0, 0, 0};
  const double bpt = cost_.shape.kv_bytes_per_token();
  for (size_t i = 0; i < r.avail; ++i) {
    const int t = static_cast<int>(r.src[i]);
    bytes[t] += (r.ends[i] - r.begin(i)) * bpt;
    nodes[t] += 1;
  }
  const ServingRates& s = cost_.serving;
  auto channel = [&](double* free_at, double b, double bw, double latency) {
    const double start = std::max(now, *free_at);
    *free_at = start + CostModel::transfer_s(b, bw, latency);
    out.ready_s = std::max(out.ready_s, *free_at);
  };
  if (nodes[1]) channel(&dram_free_at_, bytes[1], s.dram_bytes_per_s, 0);
  if (nodes[2]) channel(&ssd_free_at_, bytes[2], s.ssd_bytes_per_s, s.ssd_latency_s * nodes[2]);
  if (nodes[3]) channel(&remote_free_at_, bytes[3], s.remote_bytes_per_s, s.remote_latency_s * nodes[3]);
  out.hint_tokens = r.avail ? std::min(r.ends[r.avail - 1], req.prompt_tokens) : 0;
  return out;
}

int SimKvHost::cached_tokens(const SimRequest& req) {
  Run r;
  build_path(req, r);
  const auto m = tree_->match(r.root, r.docs, /*touch=*/false);
  return m.empty() ? 0 : r.ends[m.size() - 1];
}

void SimKvHost::reserve(uint64_t id, int kv_tokens) {
  Run& r = run(id);
  if (kv_tokens > r.kv) set_own(r, kv_tokens, r.shared_end);
}

bool SimKvHost::ensure_free(int blocks) {
  std::vector<kvstore::TierAction> actions;
  while (opts_.pool_blocks - used_blocks_ < blocks) {
    if (!tree_->evict_one(Tier::kHbm, &actions)) {
      drain(actions);
      return false;
    }
  }
  drain(actions);
  return true;
}

int SimKvHost::blocks_needed(uint64_t id, int n) const {
  const Run& r = run(id);
  return own_blocks(r.kv + n, r.shared_end) - own_blocks(r.kv, r.shared_end);
}

int SimKvHost::admit(uint64_t id, int keep_free) {
  Run& r = run(id);
  const bool first = !r.admitted;
  const int len = sched_ ? sched_->seq_len(id) : r.ends.empty() ? 1 : r.ends.back() + 1;
  RAGD_CHECK(r.kv == 0 && r.copies.empty()) << "sim kv host: admit of a run holding KV";
  ReuseCounts got;
  std::vector<kvstore::TierAction> actions;
  // As the reuse planner's install: the part of the path in the pool now (shared blocks), then,
  // on the first admission, the nodes the lookup loaded from below the pool (new blocks, promoted
  // into the pool so later runs find them there).
  size_t d = 0;
  for (; d < r.keys.size(); ++d) {
    auto c = node_copy_.find(r.keys[d]);
    if (c == node_copy_.end()) break;
    copies_[c->second].refs += 1;
    r.copies.push_back(c->second);
    set_own(r, r.ends[d], r.ends[d]);
    got[Tier::kHbm] += r.ends[d] - r.begin(d);
  }
  for (; first && d < r.avail && r.src[d] != Tier::kHbm; ++d) {
    const int need = own_blocks(r.ends[d], r.shared_end) - own_blocks(r.kv, r.shared_end);
    if (!ensure_free(keep_free + need)) break;
    set_own(r, r.ends[d], r.shared_end);
    placing_ = &r;
    if (tree_->info(r.keys[d])) {
      if (r.src[d] == Tier::kSsd || r.src[d] == Tier::kRemote) tree_->promote(r.keys[d], Tier::kDram, host_copy_, &actions);
      tree_->promote_pool(r.keys[d], kvstore::PoolCopy{}, &actions);
    } else {  // only in the remote tier (or evicted meanwhile): it joins the local tree
      const uint64_t bytes = static_cast<uint64_t>((r.ends[d] - r.begin(d)) * cost_.shape.kv_bytes_per_token());
      tree_->insert_pool(d == 0 ? r.root : r.keys[d - 1], d == 0, header_of(r, d), bytes, kvstore::PoolCopy{}, host_copy_,
                         &actions);
    }
    placing_ = nullptr;
    drain(actions);
    const int tokens = r.ends[d] - r.begin(d);
    got[r.src[d]] += tokens;
  }
  const size_t installed = d;
  if (r.kv >= len) {  // the last token is always fed, to get its logits
    int over = r.kv - (len - 1);
    set_own(r, len - 1, std::min(r.shared_end, len - 1));
    got.trim(over);
  }
  if (first) {
    r.admitted = true;
    r.reused = got;
    r.reused_nodes = installed;
    for (const auto& [key, uid] : r.pins) tree_->unpin(key, uid);
    r.pins.clear();
  }
  return r.kv;
}

void SimKvHost::publish(uint64_t id) {
  Run& r = run(id);
  r.published = true;
  std::vector<kvstore::TierAction> actions;
  const bool lower = tree_->copy_tier().has_value();
  for (size_t i = r.reused_nodes; i < r.keys.size(); ++i) {
    const uint64_t bytes = static_cast<uint64_t>((r.ends[i] - r.begin(i)) * cost_.shape.kv_bytes_per_token());
    const bool known = tree_->info(r.keys[i]).has_value();
    const Hash128 parent = i == 0 ? r.root : r.keys[i - 1];
    Tier placed = Tier::kSsd;
    placing_ = &r;
    // As KvStore::insert_pool: the node goes into the pool only; its lower-tier copy comes later.
    auto out = tree_->insert_pool(parent, i == 0, header_of(r, i), bytes, kvstore::PoolCopy{}, nullptr, &actions, &placed);
    bool pooled = out == kvstore::KnowledgeTree::InsertOutcome::kInserted && placed == Tier::kHbm;
    if (out == kvstore::KnowledgeTree::InsertOutcome::kNoSpace && lower) {
      // No room in the pool's share: the daemon's copy places it below later; here at once, its
      // copy still costed below.
      out = tree_->insert_pool(parent, i == 0, header_of(r, i), bytes, kvstore::PoolCopy{}, host_copy_, &actions, &placed);
    }
    placing_ = nullptr;
    drain(actions);
    if (out == kvstore::KnowledgeTree::InsertOutcome::kParentMissing ||
        out == kvstore::KnowledgeTree::InsertOutcome::kNoSpace)
      break;
    if (known || !lower || out != kvstore::KnowledgeTree::InsertOutcome::kInserted) continue;
    // A copy in flight holds its blocks: under pool pressure none starts (the node is demoted when
    // the pool evicts it), and at most copy_inflight_bytes are queued.
    if (kvstore::pool_copy_blocked(pooled, static_cast<uint64_t>(opts_.pool_blocks - used_blocks_),
                                   static_cast<uint64_t>(opts_.pool_blocks)) ||
        kvstore::pool_copy_over_budget(copy_inflight_, bytes, opts_.copy_inflight_bytes)) {
      pub_.copies_skipped += 1;
      continue;
    }
    copy_inflight_ += bytes;
    copy_q_.push_back(CopyJob{r.keys[i], bytes, static_cast<double>(bytes) * cost_.serving.publish_s_per_byte, pooled});
  }
}

void SimKvHost::on_export(uint64_t bytes) {
  pub_.demotions += 1;
  const double s = static_cast<double>(bytes) * cost_.serving.publish_s_per_byte;
  pub_.engine_s += s;
  transfer_s_ += s;
}

void SimKvHost::complete_copy() {
  const CopyJob j = copy_q_.front();
  copy_q_.pop_front();
  head_started_ = false;
  head_done_s_ = 0;
  copy_inflight_ -= j.bytes;
  pub_.copies += 1;
  pub_.engine_s += j.work_s;
  if (!j.promote) return;
  // The node may have left the pool (demoted) or the tree meanwhile: then there is nothing to add.
  const auto n = tree_->info(j.key);
  const std::optional<Tier> t = tree_->copy_tier();
  if (!n || !t || (n->tiers & kvstore::tier_bit(*t))) return;
  std::vector<kvstore::TierAction> actions;
  tree_->promote(j.key, *t, host_copy_, &actions);
  drain(actions);
}

void SimKvHost::advance(double now) {
  if (engine_busy_ || now <= bg_t_) {
    bg_t_ = std::max(bg_t_, now);
    return;
  }
  while (!copy_q_.empty()) {  // the engine is idle: copies run back to back at full speed
    head_started_ = true;
    const double left = copy_q_.front().work_s - head_done_s_;
    if (bg_t_ + left > now) {
      head_done_s_ += now - bg_t_;
      break;
    }
    bg_t_ += left;
    complete_copy();
  }
  bg_t_ = now;
}

void SimKvHost::engine_busy(double now) {
  advance(now);
  engine_busy_ = true;
}

void SimKvHost::engine_idle(double now) {
  engine_busy_ = false;
  bg_t_ = std::max(bg_t_, now);
}

void SimKvHost::drain_copies() {
  engine_busy_ = false;
  advance(std::numeric_limits<double>::infinity());
}

double SimKvHost::take_background_s() {
  double s = 0;
  while (!copy_q_.empty() && (head_started_ || remote_)) {
    s += copy_q_.front().work_s - head_done_s_;
    complete_copy();
    if (!remote_) break;
  }
  return s;
}

bool SimKvHost::published(uint64_t id) const { return run(id).published; }
ReuseCounts SimKvHost::reused(uint64_t id) const { return run(id).reused; }

double SimKvHost::take_transfer_s() {
  const double t = transfer_s_;
  transfer_s_ = 0;
  return t;
}

bool SimKvHost::swap_in(uint64_t id, int keep_free) {
  Run& r = run(id);
  if (r.swapped < 0) return false;
  const int need = own_blocks(r.swapped, 0);
  if (!ensure_free(keep_free + need)) return false;
  set_own(r, r.swapped, 0);
  const double bytes = r.swapped * cost_.shape.kv_bytes_per_token();
  swap_used_ -= static_cast<uint64_t>(bytes);
  transfer_s_ += bytes / cost_.serving.dram_bytes_per_s;
  r.swapped = -1;
  return true;
}

bool SimKvHost::preempt(uint64_t id, bool swap) {
  Run& r = run(id);
  const int n = r.kv;
  const uint64_t bytes = static_cast<uint64_t>(n * cost_.shape.kv_bytes_per_token());
  const bool ok = swap && n > 0 && swap_used_ + bytes <= opts_.swap_bytes;
  release(id);
  if (ok) {
    r.swapped = n;
    swap_used_ += bytes;
    transfer_s_ += static_cast<double>(bytes) / cost_.serving.dram_bytes_per_s;
  }
  return ok;
}

void SimKvHost::release(uint64_t id) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return;
  Run& r = *it->second;
  set_own(r, 0, 0);
  for (int c : r.copies) unref(c);
  r.copies.clear();
  if (r.swapped >= 0) {
    swap_used_ -= static_cast<uint64_t>(r.swapped * cost_.shape.kv_bytes_per_token());
    r.swapped = -1;
  }
}

void SimKvHost::truncate(uint64_t id, int n) {
  Run& r = run(id);
  if (r.kv > n) set_own(r, n, std::min(r.shared_end, n));
}

void SimKvHost::forget(uint64_t id) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return;
  release(id);
  for (const auto& [key, uid] : it->second->pins) tree_->unpin(key, uid);
  runs_.erase(it);
}

}  // namespace ragd::sim
