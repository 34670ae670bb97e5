#include "reuse_planner.h"

#include "ragd/common/log.h"
#include "ragd/kvstore/engine_io.h"

namespace ragd::pipelines {

namespace {

class NoReuse final : public ReuseStrategy {
 public:
  void path(std::span<const int32_t>, std::span<const std::vector<int32_t>>, ReusePlan*) const override {}
};

// The prompt in fixed chunks: node i holds tokens [i * chunk, (i + 1) * chunk); the last node holds
// the remainder (shorter), so a repeated prompt is found whole.
class PrefixReuse final : public ReuseStrategy {
 public:
  explicit PrefixReuse(int chunk) : chunk_(std::max(1, chunk)) {}
  void path(std::span<const int32_t> prompt, std::span<const std::vector<int32_t>>, ReusePlan* p) const override {
    for (size_t at = 0; at < prompt.size(); at += chunk_) {
      const size_t n = std::min(chunk_, prompt.size() - at);
      p->docs.push_back(kvstore::doc_key(prompt.subspan(at, n)));
      p->ends.push_back(static_cast<int>(at + n));
    }
  }

 private:
  size_t chunk_;
};

// [system prefix][doc 1]..[doc n]: one node per segment.
class KnowledgeTreeReuse final : public ReuseStrategy {
 public:
  void path(std::span<const int32_t>, std::span<const std::vector<int32_t>> segs, ReusePlan* p) const override {
    int end = 0;
    for (const auto& s : segs) {
      if (s.empty()) break;  // a node needs tokens; the path stops at an empty segment
      end += static_cast<int>(s.size());
      p->docs.push_back(kvstore::doc_key(s));
      p->ends.push_back(end);
    }
  }
};

}  // namespace

std::unique_ptr<ReuseStrategy> make_reuse_strategy(ReuseMode mode, int chunk_tokens) {
  switch (mode) {
    case ReuseMode::kNone: return std::make_unique<NoReuse>();
    case ReuseMode::kPrefix: return std::make_unique<PrefixReuse>(chunk_tokens);
    case ReuseMode::kKnowledgeTree: return std::make_unique<KnowledgeTreeReuse>();
  }
  return std::make_unique<NoReuse>();
}

ReusePlanner::ReusePlanner(kvstore::KvStore& store, engine::KvPool& pool, std::function<void()> on_load_done)
    : store_(store), pool_(pool), on_load_done_(std::move(on_load_done)) {
  for (ReuseMode m : {ReuseMode::kNone, ReuseMode::kPrefix, ReuseMode::kKnowledgeTree})
    strategies_.push_back(make_reuse_strategy(m, pool.layout().block_size));
}

void ReusePlanner::lookup(std::span<const int32_t> prompt, std::span<const std::vector<int32_t>> segments,
                          ReusePlan* p) const {
  p->docs.clear();
  p->ends.clear();
  strategies_[static_cast<size_t>(p->mode)]->path(prompt, segments, p);
  if (p->docs.empty()) return;
  kvstore::MatchResult m = store_.match(p->docs, p->scope, /*pin=*/true);
  p->hint_tokens = m.cached_tokens();
  if (m.nodes.size() <= m.pool_nodes) return;  // all in the pool (or nothing cached): no load
  p->load_from = m.pool_nodes;
  kvstore::LoadOptions lo;
  lo.on_done = on_load_done_;
  p->load = store_.load(std::span<const kvstore::PathNode>(m.nodes).subspan(m.pool_nodes), std::move(lo));
  p->pin = std::move(m.pin);
}

Installed ReusePlanner::install(ReusePlan& p, engine::BlockTable& table, const std::function<bool(int)>& ensure_free) {
  Installed in;
  p.installed_nodes = 0;
  if (p.docs.empty()) return in;
  kvstore::MatchResult m = store_.match(p.docs, p.scope, /*pin=*/false, /*touch=*/false);
  size_t d = 0;
  if (m.pool_nodes > 0) {
    table = store_.fork_pool(m.nodes[m.pool_nodes - 1].key);
    if (table.num_tokens() == p.ends[m.pool_nodes - 1]) {
      d = m.pool_nodes;
      in.tokens = in.hbm = table.num_tokens();
    } else {
      table.release(pool_);
    }
  }
  if (p.load && p.load->done()) {
    const kvstore::LoadHandle& h = *p.load;
    for (; d < p.docs.size() && d >= p.load_from; ++d) {
      const size_t i = d - p.load_from;
      if (i >= h.size() || !h.node_ok(i)) break;
      const kvstore::SegmentRef seg = h.segment(i);
      const int start = d ? p.ends[d - 1] : 0;
      const int n = p.ends[d] - start;
      if (!seg || seg->num_tokens() != n || seg->header().first_position != start) break;
      if (!ensure_free(table.blocks_needed(pool_, n))) break;
      if (!kvstore::append_segment(*seg, pool_, table).ok()) break;
      in.tokens += n;
      (h.source(i) == kvstore::Tier::kSsd ? in.ssd : in.dram) += n;
      // Back in the pool: later runs find it there.
      auto r = store_.insert_pool(std::span<const Hash128>(p.docs.data(), d), p.docs[d], table, start, p.ends[d], p.scope);
      if (!r.ok()) log::pipelines()->warn("kv promote into the pool failed: {}", r.status().to_string());
    }
  }
  p.installed_nodes = d;
  p.load.reset();
  p.pin.release();
  return in;
}

void ReusePlanner::publish(ReusePlan& p, const engine::BlockTable& table) {
  p.published = true;
  for (size_t i = p.installed_nodes; i < p.docs.size() && p.ends[i] <= table.num_tokens(); ++i) {
    const int start = i ? p.ends[i - 1] : 0;
    auto r = store_.insert_pool(std::span<const Hash128>(p.docs.data(), i), p.docs[i], table, start, p.ends[i], p.scope);
    if (!r.ok()) {
      log::pipelines()->warn("kv insert failed: {}", r.status().to_string());
      break;
    }
  }
}

bool ReusePlanner::reclaim(int blocks) {
  return store_.reclaim_pool([&] { return static_cast<int>(pool_.free_blocks()) >= blocks; });
}

}  // namespace ragd::pipelines
