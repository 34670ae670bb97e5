#include "reuse_planner.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include <fmt/format.h>

#include "ragd/common/log.h"
#include "ragd/kvstore/engine_io.h"
#include "ragd/kvstore/keys.h"

namespace ragd::pipelines {

namespace {

// Tokens [begin, end) of the prompt (empty when the prompt is not known or shorter): a node's token
// ids for KV events.
std::span<const int32_t> node_tokens(std::span<const int32_t> prompt, int begin, int end) {
  if (begin < 0 || end < begin || static_cast<size_t>(end) > prompt.size()) return {};
  return prompt.subspan(static_cast<size_t>(begin), static_cast<size_t>(end - begin));
}

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

// Modes whose path starts with the pipeline's head ([system prefix][doc]...), which every scope
// may share.
bool shares_head(ReuseMode m) {
  return m == ReuseMode::kKnowledgeTree || m == ReuseMode::kCacheBlend || m == ReuseMode::kEpic || m == ReuseMode::kAuto;
}

}  // namespace

std::unique_ptr<ReuseStrategy> make_reuse_strategy(ReuseMode mode, int chunk_tokens) {
  switch (mode) {
    case ReuseMode::kNone: return std::make_unique<NoReuse>();
    case ReuseMode::kPrefix: return std::make_unique<PrefixReuse>(chunk_tokens);
    case ReuseMode::kKnowledgeTree:
    case ReuseMode::kCacheBlend:  // the exact part first; the planner blends the rest
    case ReuseMode::kEpic:
    case ReuseMode::kAuto: return std::make_unique<KnowledgeTreeReuse>();
  }
  return std::make_unique<NoReuse>();
}

ReusePlanner::ReusePlanner(kvstore::KvStore& store, engine::Model& model, std::function<void()> on_load_done)
    : store_(store), model_(model), pool_(model.kv_pool()), on_load_done_(std::move(on_load_done)) {
  for (int m = 0; m < kNumReuseModes; ++m)
    strategies_.push_back(make_reuse_strategy(static_cast<ReuseMode>(m), pool_.layout().block_size));
}

void ReusePlanner::lookup(std::span<const int32_t> prompt, std::span<const std::vector<int32_t>> segments,
                          ReusePlan* p) const {
  p->docs.clear();
  p->ends.clear();
  strategies_[static_cast<size_t>(p->mode)]->path(prompt, segments, p);
  if (p->docs.empty()) return;
  // The RAG head (the pipeline's system prompt: server configuration) is shared by every scope;
  // the documents under it carry the run's scope (tenant + cache_salt) in their own keys. Other
  // paths (plain prompts, whose first tokens are the client's) are scoped whole.
  p->tree_scope = p->scope;
  if (shares_head(p->mode) && !p->scope.empty()) {
    for (size_t i = 1; i < p->docs.size(); ++i) p->docs[i] = kvstore::scoped_doc_key(p->docs[i], p->scope);
    p->tree_scope.clear();
  }
  kvstore::MatchResult m = store_.match(p->docs, p->tree_scope, /*pin=*/true);
  p->hint_tokens = m.cached_tokens();
  // Past the local path, the remote tier (shared by replicas) may hold the next nodes.
  const bool remote = store_.has_remote() && m.nodes.size() < p->docs.size();
  if (is_approximate(p->mode) && (!m.nodes.empty() || remote) && m.nodes.size() < p->docs.size()) {
    // The documents after the exact part: their chunk KV (computed after this head), loaded now:
    // local hits first, then the misses from the remote tier.
    std::vector<Hash128> keys;
    std::vector<size_t> nodes;
    for (size_t i = std::max<size_t>(m.nodes.size(), 1); i < p->docs.size(); ++i) {
      keys.push_back(kvstore::chunk_key(p->docs[0], p->docs[i]));
      nodes.push_back(i);
    }
    kvstore::ChunkLookupResult c = store_.lookup_chunks(keys, p->scope, /*pin=*/true);
    std::vector<kvstore::PathNode> hits;
    kvstore::RemoteTail misses;
    misses.chunks = true;
    misses.tenant = p->scope;
    std::vector<size_t> miss_nodes;
    for (size_t i = 0; i < c.chunks.size(); ++i) {
      if (!c.chunks[i]) {
        misses.docs.push_back(keys[i]);
        miss_nodes.push_back(nodes[i]);
        continue;
      }
      hits.push_back(*c.chunks[i]);
      p->chunk_nodes.push_back(nodes[i]);
      p->hint_tokens += c.chunks[i]->num_tokens;
    }
    kvstore::LoadOptions lo;
    if (remote && !misses.docs.empty()) {
      for (size_t j : miss_nodes) {
        const auto t = node_tokens(prompt, p->ends[j - 1], p->ends[j]);
        misses.tokens.emplace_back(t.begin(), t.end());
      }
      p->chunk_nodes.insert(p->chunk_nodes.end(), miss_nodes.begin(), miss_nodes.end());
      lo.remote = std::move(misses);
    }
    if (!hits.empty() || lo.remote) {
      lo.on_done = on_load_done_;
      lo.independent = true;
      p->chunk_load = store_.load(hits, std::move(lo));
      p->chunk_pin = std::move(c.pin);
    }
  }
  if (m.nodes.size() <= m.pool_nodes && !remote) return;  // all in the pool (or nothing cached): no load
  p->load_from = m.pool_nodes;
  kvstore::LoadOptions lo;
  lo.on_done = on_load_done_;
  if (remote) {
    kvstore::RemoteTail tail{p->docs, m.nodes.size(), p->tree_scope, /*chunks=*/false, {}};
    for (size_t i = m.nodes.size(); i < p->docs.size(); ++i) {
      const auto t = node_tokens(prompt, i ? p->ends[i - 1] : 0, p->ends[i]);
      tail.tokens.emplace_back(t.begin(), t.end());
    }
    lo.remote = std::move(tail);
  }
  p->load = store_.load(std::span<const kvstore::PathNode>(m.nodes).subspan(m.pool_nodes), std::move(lo));
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
  kvstore::MatchResult m = store_.match(p.docs, p.tree_scope, /*pin=*/false, /*touch=*/false);
  size_t d = 0;
  if (m.pool_nodes > 0) {
    table = store_.fork_pool(m.nodes[m.pool_nodes - 1].key);
    if (table.num_tokens() == p.ends[m.pool_nodes - 1]) {
      d = m.pool_nodes;
      in.tokens = table.num_tokens();
      in.from[kvstore::Tier::kHbm] = in.tokens;
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
      in.from[h.source(i)] += n;
      // Back in the pool: later runs find it there.
      auto r = store_.insert_pool(std::span<const Hash128>(p.docs.data(), d), p.docs[d], table, start, p.ends[d], p.tree_scope,
                                  node_tokens(prompt, start, p.ends[d]));
      if (!r.ok()) log::pipelines()->warn("kv promote into the pool failed: {}", r.status().to_string());
    }
  }
  p.installed_nodes = d;
  p.load.reset();
  p.pin.release();
  if (is_approximate(p.mode) && d < p.docs.size()) {
    if (d == 0) p.note = "the prompt head's KV is not in memory (not cached yet, or evicted since the lookup): exact prefill";
    else blend(p, prompt, d, table, ensure_free, &in);
  }
  if (p.mode == ReuseMode::kAuto) {  // nothing to blend (the whole path cached, or no head): exact
    p.mode = ReuseMode::kKnowledgeTree;
    if (p.note.empty()) p.auto_note = "auto: exact (the documents' KV was cached in this order)";
  }
  p.chunk_load.reset();
  p.chunk_pin.release();
  return in;
}

void ReusePlanner::blend(ReusePlan& p, std::span<const int32_t> prompt, size_t d, engine::BlockTable& table,
                         const std::function<bool(int)>& ensure_free, Installed* in) {
  const int head_len = p.ends[0];
  const int exact_end = p.ends[d - 1];
  const size_t n = p.docs.size();
  if (table.num_tokens() != exact_end || static_cast<int>(prompt.size()) < p.ends[n - 1]) {
    p.note = "internal: the exact part does not match the path; exact prefill";
    return;
  }
  if (p.mode == ReuseMode::kAuto) {
    if (!resolve_auto(p, prompt)) return;  // auto's own measurement stands in for the self-check
  } else if (std::string why = self_check(p, prompt); !why.empty()) {
    p.note = why;
    return;
  }
  auto doc_tokens = [&](size_t j) {
    return prompt.subspan(p.ends[j - 1], p.ends[j] - p.ends[j - 1]);
  };
  // Chunk KV per document (k null: not there): a view of a segment loaded from the chunk cache (src
  // = the tier it came from; p.chunk_load holds the segment until install() returns, `owned` a
  // widened copy), or computed now after the head (no src, in `owned`). An f32 segment is placed
  // from its own bytes, not copied.
  std::vector<kvstore::KvData> kv(n);
  std::vector<kvstore::HostKv> owned(n);
  std::vector<std::optional<kvstore::Tier>> src(n);
  if (p.chunk_load && p.chunk_load->done()) {
    const kvstore::LoadHandle& h = *p.chunk_load;
    for (size_t i = 0; i < p.chunk_nodes.size() && i < h.size(); ++i) {
      const size_t j = p.chunk_nodes[i];
      if (j < d || !h.node_ok(i)) continue;
      const kvstore::SegmentRef seg = h.segment(i);
      if (!seg || seg->num_tokens() != p.ends[j] - p.ends[j - 1] || static_cast<int>(seg->header().first_position) != head_len)
        continue;
      kv[j] = kvstore::host_kv_view(*seg, &owned[j]);
      src[j] = h.source(i);
    }
  }
  std::vector<size_t> missing;
  std::vector<std::span<const int32_t>> missing_tokens;
  int side_blocks = 0;
  const int bs = pool_.layout().block_size;
  for (size_t j = d; j < n; ++j) {
    if (kv[j].k) continue;
    missing.push_back(j);
    missing_tokens.push_back(doc_tokens(j));
    side_blocks += (head_len % bs + static_cast<int>(doc_tokens(j).size()) + bs - 1) / bs + 1;
  }
  auto give_up = [&](const std::string& why) {
    table.truncate(pool_, exact_end);
    p.note = why + ": exact prefill";
    log::pipelines()->warn("{} reuse falls back to exact prefill: {}", reuse_mode_name(p.mode), why);
  };
  using BClock = std::chrono::steady_clock;
  const auto ms_since = [](BClock::time_point t) { return std::chrono::duration<double, std::milli>(BClock::now() - t).count(); };
  if (defer_repair_) return blend_deferred(p, d, missing, kv, src, table, ensure_free, in);
  const auto t_chunk = BClock::now();
  double chunk_ms = 0, place_ms = 0;
  if (!missing.empty()) {
    if (!ensure_free(side_blocks)) return give_up("no KV pool room to compute chunk KV");
    Result<std::vector<kvstore::HostKv>> fresh = compute_chunk_kv(model_, table, head_len, missing_tokens);
    if (!fresh.ok()) return give_up("computing chunk KV failed: " + fresh.status().to_string());
    for (size_t i = 0; i < missing.size(); ++i) {
      const size_t j = missing[i];
      auto r = store_.insert_chunk(kvstore::chunk_key(p.docs[0], p.docs[j]), (*fresh)[i].data(), p.scope, doc_tokens(j));
      if (!r.ok()) log::pipelines()->warn("chunk kv insert failed: {}", r.status().to_string());
      in->computed += (*fresh)[i].num_tokens;
      owned[j] = std::move((*fresh)[i]);
      kv[j] = owned[j].data();
    }
  }
  chunk_ms = ms_since(t_chunk);
  const auto t_place = BClock::now();
  std::vector<BlendDoc> docs;
  for (size_t j = d; j < n; ++j) {
    const int len = kv[j].num_tokens;
    if (!ensure_free(table.blocks_needed(pool_, len))) return give_up("no KV pool room to place chunk KV");
    if (Status st = place_chunk(model_, kv[j], table); !st.ok()) return give_up(st.to_string());
    docs.push_back({p.ends[j - 1], len, /*in_place=*/j == 1});
  }
  place_ms = ms_since(t_place);
  const auto t_repair = std::chrono::steady_clock::now();
  Result<BlendStats> st = repair(model_, table, prompt, docs, p.mode, p.blend);
  if (!st.ok()) return give_up("repair step failed: " + st.status().to_string());
  st->chunk_ms = chunk_ms;
  st->place_ms = place_ms;
  st->repair_ms = ms_since(t_repair);
  if (st->row_layers > 0) {
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_repair).count();
    const double per = ms / st->row_layers;
    row_layer_ms_ = row_layer_ms_ == 0 ? per : 0.8 * row_layer_ms_ + 0.2 * per;
  }
  // Loading controller: the ratio whose per-layer recompute matches the per-layer load time.
  int slow_loaded = 0;
  for (size_t j = d; j < n; ++j)
    if (src[j] && *src[j] != kvstore::Tier::kHbm) slow_loaded += kv[j].num_tokens;
  if (slow_loaded > 0 && p.chunk_load && row_layer_ms_ > 0 && st->placed > 0) {
    const int layers = model_.config().num_hidden_layers;
    st->ratio_floor = std::min(1.0, p.chunk_load->elapsed_ms() / (row_layer_ms_ * layers * st->placed));
  }
  for (size_t j = d; j < n; ++j) {
    const int len = kv[j].num_tokens;
    in->tokens += len;
    if (!src[j]) continue;  // computed in this run
    in->from[*src[j]] += len;
  }
  in->computed += st->repaired;
  p.blended = *st;
  p.approximate = st->placed > 0;
  p.installed_nodes = n;  // blended KV is never published to the tree
}

void ReusePlanner::blend_deferred(ReusePlan& p, size_t d, std::span<const size_t> missing,
                                  std::span<const kvstore::KvData> kv,
                                  const std::vector<std::optional<kvstore::Tier>>& src, engine::BlockTable& table,
                                  const std::function<bool(int)>& ensure_free, Installed* in) {
  const size_t n = p.docs.size();
  const int exact_end = p.ends[d - 1];
  const auto t_place = std::chrono::steady_clock::now();
  auto give_up = [&](const std::string& why) {
    table.truncate(pool_, exact_end);
    p.note = why + ": exact prefill";
    log::pipelines()->warn("{} reuse falls back to exact prefill: {}", reuse_mode_name(p.mode), why);
  };
  // Placed chunk KV, or a placeholder (reserved slots the repair step writes in every layer) for a
  // first-seen document: its chunk KV is computed after the first token.
  std::vector<RepairDoc> docs;
  int fresh = 0;
  for (size_t j = d; j < n; ++j) {
    const int start = p.ends[j - 1], len = p.ends[j] - start;
    if (!ensure_free(table.blocks_needed(pool_, len))) return give_up("no KV pool room to place chunk KV");
    if (kv[j].k) {
      if (Status st = place_chunk(model_, kv[j], table); !st.ok()) return give_up(st.to_string());
      docs.push_back({start, len, /*in_place=*/j == 1, /*fresh=*/false});
    } else {
      if (!table.reserve(pool_, len)) return give_up("no KV pool room for a first-seen document");
      table.commit(len);
      docs.push_back({start, len, false, /*fresh=*/true});
      fresh += len;
    }
  }
  PendingRepair r = plan_repair(docs, p.mode, p.blend, model_.config().num_hidden_layers, table.num_tokens());
  BlendStats st;
  st.placed = r.placed;
  st.place_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_place).count();
  p.blended = st;
  p.approximate = r.placed > 0;
  if (!r.rows.empty()) p.pending = std::move(r);
  p.pending_chunks.assign(missing.begin(), missing.end());
  for (size_t j = d; j < n; ++j) {
    const int len = p.ends[j] - p.ends[j - 1];
    in->tokens += len;
    if (!src[j]) continue;  // first seen: computed in the repair step
    in->from[*src[j]] += len;
  }
  in->computed += fresh;
  p.installed_nodes = n;  // blended KV is never published to the tree
}

void ReusePlanner::finish_repair(ReusePlan& p, const RepairOutcome& o, double ms) {
  if (!p.pending) return;
  p.blended.repaired = o.repaired;
  p.blended.selected_first = o.selected_first;
  p.blended.row_layers = o.row_layers;
  p.blended.ratio = p.blended.placed ? static_cast<double>(o.repaired) / p.blended.placed : 0.0;
  p.blended.repair_ms = ms;
  if (o.row_layers > 0) {
    const double per = ms / o.row_layers;
    row_layer_ms_ = row_layer_ms_ == 0 ? per : 0.8 * row_layer_ms_ + 0.2 * per;
  }
  p.pending.reset();
}

bool ReusePlanner::resolve_auto(ReusePlan& p, std::span<const int32_t> prompt) {
  // Cheapest first: EPIC recomputes k rows per document in every layer, CacheBlend every row in
  // two layers and r of them in the rest.
  struct Candidate {
    ReuseMode mode;
    double ratio;
    int k;
  };
  static constexpr Candidate kCandidates[] = {
      {ReuseMode::kEpic, 0, 16}, {ReuseMode::kEpic, 0, 32}, {ReuseMode::kCacheBlend, 0.15, 0}, {ReuseMode::kCacheBlend, 0.30, 0}};
  auto trial_of = [&](const Candidate& c) {
    ReusePlan t;
    t.mode = c.mode;
    t.blend = p.blend;
    if (c.mode == ReuseMode::kEpic) t.blend.epic_k = c.k;
    else t.blend.recompute_ratio = c.ratio;
    t.docs = p.docs;
    t.ends = p.ends;
    return t;
  };
  auto use = [&](const ReusePlan& t, const std::string& why) {
    p.mode = t.mode;
    p.blend = t.blend;
    p.auto_note = "auto: " + auto_choice_ + " (" + why + ")";
    return true;
  };
  if (!check_.enabled) {  // no measurement: the cheapest mode
    auto_choice_ = check_key(trial_of(kCandidates[0]));
    return use(trial_of(kCandidates[0]), "self-check off");
  }
  if (auto_decided_) {
    for (const Candidate& c : kCandidates)
      if (check_key(trial_of(c)) == auto_choice_) return use(trial_of(c), auto_why_);
    p.mode = ReuseMode::kKnowledgeTree;
    p.auto_note = "auto: exact (" + auto_why_ + ")";
    return false;
  }
  // Deciding: every candidate measured on the documents of the first kAutoRuns runs that blend
  // (one run's documents can be easy for every mode); exact meanwhile.
  if (p.docs.size() >= 3) {
    const std::vector<BlendCase> cases = reorder_cases(p, prompt);
    for (const Candidate& c : kCandidates) {
      const ReusePlan t = trial_of(c);
      Result<Fidelity> f = measure_fidelity(model_, cases, t.mode, t.blend, check_.greedy_tokens);
      if (!f.ok()) {
        p.mode = ReuseMode::kKnowledgeTree;
        p.note = "auto: the reuse self-check could not run (" + f.status().message() + ")";
        return false;
      }
      auto_samples_[check_key(t)].push_back(*f);
    }
    ++auto_runs_;
  }
  if (auto_runs_ < kAutoRuns) {
    p.mode = ReuseMode::kKnowledgeTree;
    p.auto_note = fmt::format("auto: measuring the modes on this model ({} of {} runs); exact meanwhile", auto_runs_, kAutoRuns);
    return false;
  }
  auto_decided_ = true;
  std::string failed;
  for (const Candidate& c : kCandidates) {
    const std::string key = check_key(trial_of(c));
    Fidelity mean;
    const auto& v = auto_samples_[key];
    for (const Fidelity& f : v) {
      mean.greedy_agreement += f.greedy_agreement / v.size();
      mean.first_token_kl += f.first_token_kl / v.size();
    }
    log::pipelines()->info("reuse auto: {} over {} runs: greedy agreement {:.2f}, first-token KL {:.4f}", key, v.size(),
                           mean.greedy_agreement, mean.first_token_kl);
    const bool ok = mean.greedy_agreement >= std::max(check_.min_greedy_agreement, check_.auto_min_greedy_agreement) &&
                    mean.first_token_kl <= std::min(check_.max_first_token_kl, check_.auto_max_first_token_kl);
    if (!ok) {
      failed += fmt::format("{}{} {:.2f} / {:.4f}", failed.empty() ? "" : ", ", key, mean.greedy_agreement, mean.first_token_kl);
      continue;
    }
    auto_choice_ = key;
    auto_fidelity_ = mean;
    auto_why_ = fmt::format("self-check over {} runs on this model: greedy agreement {:.2f}, first-token KL {:.4f}", v.size(),
                            mean.greedy_agreement, mean.first_token_kl);
    return use(trial_of(c), auto_why_);
  }
  auto_choice_ = "exact";
  auto_why_ = "no approximate mode passed the self-check on this model: " + failed;
  p.mode = ReuseMode::kKnowledgeTree;
  p.auto_note = "auto: exact (" + auto_why_ + ")";
  return false;
}

std::vector<BlendCase> ReusePlanner::reorder_cases(const ReusePlan& p, std::span<const int32_t> prompt) {
  // This run's documents in orders it does not have: reversed, rotated by one, and (with three or
  // more documents) rotated by two.
  const size_t n = p.docs.size();
  BlendCase rev, rot;
  rev.head.assign(prompt.begin(), prompt.begin() + p.ends[0]);
  rev.tail.assign(prompt.begin() + p.ends[n - 1], prompt.end());
  rot.head = rev.head;
  rot.tail = rev.tail;
  for (size_t j = 1; j < n; ++j) {
    std::vector<int32_t> d(prompt.begin() + p.ends[j - 1], prompt.begin() + p.ends[j]);
    rev.docs.insert(rev.docs.begin(), d);
    rot.docs.push_back(std::move(d));
  }
  std::rotate(rot.docs.begin(), rot.docs.begin() + 1, rot.docs.end());
  std::vector<BlendCase> cases = {rev, rot};
  if (rot.docs.size() >= 3) {
    BlendCase rot2 = rot;
    std::rotate(rot2.docs.begin(), rot2.docs.begin() + 1, rot2.docs.end());
    cases.push_back(std::move(rot2));
  }
  return cases;
}

std::string ReusePlanner::self_check(const ReusePlan& p, std::span<const int32_t> prompt) {
  const size_t n = p.docs.size();
  if (!check_.enabled || n < 3) return "";  // one document after the head is in place: exact
  const std::string key = check_key(p);
  if (auto it = verdicts_.find(key); it != verdicts_.end()) return it->second;
  const std::vector<BlendCase> cases = reorder_cases(p, prompt);
  Result<Fidelity> f = measure_fidelity(model_, cases, p.mode, p.blend, check_.greedy_tokens);
  std::string verdict;
  if (!f.ok()) {
    // Not a verdict on the model (e.g. no pool room right now): exact this time, ask again later.
    log::pipelines()->warn("reuse self-check for {} could not run: {}", key, f.status().to_string());
    return "the reuse self-check could not run (" + f.status().message() + ")";
  }
  if (f->greedy_agreement < check_.min_greedy_agreement || f->first_token_kl > check_.max_first_token_kl)
    verdict = fmt::format("reuse self-check failed for {} on this model: greedy agreement {:.2f} (min {:.2f}), "
                          "first-token KL {:.3f} (max {:.3f}); serving exact reuse",
                          key, f->greedy_agreement, check_.min_greedy_agreement, f->first_token_kl,
                          check_.max_first_token_kl);
  log::pipelines()->info("reuse self-check {}: greedy agreement {:.2f}, first-token KL {:.4f}, max |dlogit| {:.3f} -> {}",
                         key, f->greedy_agreement, f->first_token_kl, f->max_abs_logit, verdict.empty() ? "pass" : "fail");
  verdicts_[key] = verdict;
  return verdict;
}

std::string ReusePlanner::check_key(const ReusePlan& p) {
  return p.mode == ReuseMode::kCacheBlend ? fmt::format("cacheblend:{}", p.blend.recompute_ratio)
                                          : fmt::format("epic:{}", p.blend.epic_k);
}

void ReusePlanner::publish_first_chunk(const ReusePlan& p, const engine::BlockTable& table, std::span<const int32_t> prompt) {
  if (p.docs.size() < 2 || p.installed_nodes > 1 || table.num_tokens() < p.ends[1] || !table.positions_are_slots()) return;
  // A mode that failed the self-check never places chunks: no copy for it on every run.
  if (auto it = verdicts_.find(check_key(p)); it != verdicts_.end() && !it->second.empty()) return;
  Result<kvstore::HostKv> kv = kvstore::gather_kv(pool_, table, p.ends[0], p.ends[1] - p.ends[0]);
  if (!kv.ok()) return;
  auto r = store_.insert_chunk(kvstore::chunk_key(p.docs[0], p.docs[1]), kv->data(), p.scope, node_tokens(prompt, p.ends[0], p.ends[1]));
  if (!r.ok()) log::pipelines()->warn("chunk kv insert failed: {}", r.status().to_string());
}

void ReusePlanner::publish_pending_chunks(ReusePlan& p, const engine::BlockTable& table, std::span<const int32_t> prompt) {
  std::vector<size_t> js;
  js.swap(p.pending_chunks);
  const int head_len = p.ends.empty() ? 0 : p.ends[0];
  if (js.empty() || head_len <= 0 || table.num_tokens() < head_len || prompt.size() < static_cast<size_t>(p.ends.back()))
    return;
  std::vector<std::span<const int32_t>> toks;
  for (size_t j : js) toks.push_back(prompt.subspan(p.ends[j - 1], p.ends[j] - p.ends[j - 1]));
  const auto t0 = std::chrono::steady_clock::now();
  Result<std::vector<kvstore::HostKv>> fresh = compute_chunk_kv(model_, table, head_len, toks);
  if (!fresh.ok()) {
    log::pipelines()->warn("chunk kv of {} first-seen documents not cached: {}", js.size(), fresh.status().to_string());
    return;
  }
  for (size_t i = 0; i < js.size(); ++i) {
    auto r = store_.insert_chunk(kvstore::chunk_key(p.docs[0], p.docs[js[i]]), (*fresh)[i].data(), p.scope, toks[i]);
    if (!r.ok()) log::pipelines()->warn("chunk kv insert failed: {}", r.status().to_string());
  }
  p.blended.chunk_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void ReusePlanner::publish(ReusePlan& p, const engine::BlockTable& table, std::span<const int32_t> prompt) {
  p.published = true;
  if (is_approximate(p.mode)) {
    publish_pending_chunks(p, table, prompt);
    publish_first_chunk(p, table, prompt);
  }
  for (size_t i = p.installed_nodes; i < p.docs.size() && p.ends[i] <= table.num_tokens(); ++i) {
    const int start = i ? p.ends[i - 1] : 0;
    auto r = store_.insert_pool(std::span<const Hash128>(p.docs.data(), i), p.docs[i], table, start, p.ends[i], p.tree_scope,
                                node_tokens(prompt, start, p.ends[i]));
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
