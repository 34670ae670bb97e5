#include "reuse_planner.h"

#include "ragd/common/log.h"
#include "ragd/kvstore/engine_io.h"
#include "ragd/kvstore/keys.h"

namespace ragd::pipelines {

ReusePlanner::ReusePlanner(kvstore::KvStore& store, engine::Model& model, std::function<void()> on_load_done)
    : ctx_{store, model, model.kv_pool(), std::move(on_load_done)} {
  for (int m = 0; m < kNumReuseModes; ++m) ctx_.strategies.push_back(make_reuse_strategy(static_cast<ReuseMode>(m)));
}

void ReusePlanner::lookup(std::span<const int32_t> prompt, std::span<const std::vector<int32_t>> segments,
                          ReusePlan* p) const {
  p->docs.clear();
  p->ends.clear();
  const ReuseStrategy& s = ctx_.strategy(p->mode);
  s.path(ctx_, prompt, segments, p);
  if (p->docs.empty()) return;
  // The RAG head (the pipeline's system prompt: server configuration) is shared by every scope;
  // the documents under it carry the run's scope (tenant + cache_salt) in their own keys. Other
  // paths (plain prompts, whose first tokens are the client's) are scoped whole.
  p->tree_scope = p->scope;
  if (s.shares_head() && !p->scope.empty()) {
    for (size_t i = 1; i < p->docs.size(); ++i) p->docs[i] = kvstore::scoped_doc_key(p->docs[i], p->scope);
    p->tree_scope.clear();
  }
  kvstore::MatchResult m = ctx_.store.match(p->docs, p->tree_scope, /*pin=*/true);
  p->hint_tokens = m.cached_tokens();
  // Past the local path, the remote tier (shared by replicas) may hold the next nodes.
  const bool remote = ctx_.store.has_remote() && m.nodes.size() < p->docs.size();
  s.lookup_rest(ctx_, *p, prompt, m.nodes.size(), remote);
  if (m.nodes.size() <= m.pool_nodes && !remote) return;  // all in the pool (or nothing cached): no load
  p->load_from = m.pool_nodes;
  kvstore::LoadOptions lo;
  lo.on_done = ctx_.on_load_done;
  if (remote) {
    kvstore::RemoteTail tail{p->docs, m.nodes.size(), p->tree_scope, /*chunks=*/false, {}};
    for (size_t i = m.nodes.size(); i < p->docs.size(); ++i) {
      const auto t = node_tokens(prompt, i ? p->ends[i - 1] : 0, p->ends[i]);
      tail.tokens.emplace_back(t.begin(), t.end());
    }
    lo.remote = std::move(tail);
  }
  p->load = ctx_.store.load(std::span<const kvstore::PathNode>(m.nodes).subspan(m.pool_nodes), std::move(lo));
  p->pin = std::move(m.pin);
}

Installed ReusePlanner::install(ReusePlan& p, std::span<const int32_t> prompt, engine::BlockTable& table,
                                const std::function<bool(int)>& ensure_free) {
  Installed in;
  p.installed_nodes = 0;
  p.approximate = false;
  p.blended = {};
  p.pending.reset();  // a re-admission (after a dropped preemption) plans again
  p.pending_chunks.clear();
  if (p.docs.empty()) return in;
  engine::KvPool& pool = ctx_.pool;
  kvstore::MatchResult m = ctx_.store.match(p.docs, p.tree_scope, /*pin=*/false, /*touch=*/false);
  size_t d = 0;
  if (m.pool_nodes > 0) {
    table = ctx_.store.fork_pool(std::span<const kvstore::PathNode>(m.nodes).first(m.pool_nodes));
    if (table.num_tokens() == p.ends[m.pool_nodes - 1]) {
      d = m.pool_nodes;
      in.tokens = table.num_tokens();
      in.from[kvstore::Tier::kHbm] = in.tokens;
    } else {
      table.release(pool);
    }
  }
  if (p.load && p.load->done()) {
    const kvstore::LoadHandle& h = *p.load;
    const std::vector<kvstore::SegmentIdentity> ids = ctx_.store.path_identities(p.docs, p.tree_scope);
    for (; d < p.docs.size() && d >= p.load_from; ++d) {
      const size_t i = d - p.load_from;
      if (i >= h.size() || !h.node_ok(i)) break;
      const kvstore::SegmentRef seg = h.segment(i);
      const int start = d ? p.ends[d - 1] : 0;
      const int n = p.ends[d] - start;
      if (!seg || seg->num_tokens() != n || seg->header().first_position != start) break;
      if (!ensure_free(table.blocks_needed(pool, n))) break;
      if (!kvstore::append_segment(*seg, pool, table).ok()) break;
      in.tokens += n;
      in.from[h.source(i)] += n;
      // Back in the pool: later runs find it there.
      auto r = ctx_.store.insert_pool(ids[d], table, start, p.ends[d], p.tree_scope, node_tokens(prompt, start, p.ends[d]));
      if (!r.ok()) log::pipelines()->warn("kv promote into the pool failed: {}", r.status().to_string());
    }
  }
  p.installed_nodes = d;
  p.load.reset();
  p.pin.release();
  ctx_.strategy(p.mode).install_rest(ctx_, p, prompt, d, table, ensure_free, &in);
  p.chunk_load.reset();
  p.chunk_pin.release();
  return in;
}

void ReusePlanner::finish_repair(ReusePlan& p, const RepairOutcome& o, double ms) {
  ctx_.strategy(p.mode).finish_repair(ctx_, p, o, ms);
}

void ReusePlanner::publish(ReusePlan& p, const engine::BlockTable& table, std::span<const int32_t> prompt) {
  p.published = true;
  ctx_.strategy(p.mode).publish_rest(ctx_, p, table, prompt);
  if (p.installed_nodes >= p.docs.size()) return;
  const std::vector<kvstore::SegmentIdentity> ids = ctx_.store.path_identities(p.docs, p.tree_scope);
  for (size_t i = p.installed_nodes; i < p.docs.size() && p.ends[i] <= table.num_tokens(); ++i) {
    const int start = i ? p.ends[i - 1] : 0;
    auto r = ctx_.store.insert_pool(ids[i], table, start, p.ends[i], p.tree_scope, node_tokens(prompt, start, p.ends[i]));
    if (!r.ok()) {
      log::pipelines()->warn("kv insert failed: {}", r.status().to_string());
      break;
    }
  }
}

bool ReusePlanner::reclaim(int blocks) {
  return ctx_.store.reclaim_pool([&] { return static_cast<int>(ctx_.pool.free_blocks()) >= blocks; });
}

void ReusePlanner::stats(ExecutorStats* x) const {
  for (const auto& s : ctx_.strategies) s->stats(x);
}

}  // namespace ragd::pipelines
