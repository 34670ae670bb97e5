#include "reuse_blend.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "ragd/common/log.h"
#include "ragd/kvstore/engine_io.h"
#include "ragd/kvstore/keys.h"

namespace ragd::pipelines {

void BlendReuse::lookup_rest(const ReuseContext& ctx, ReusePlan& p, std::span<const int32_t> prompt, size_t matched,
                             bool remote) const {
  if ((matched == 0 && !remote) || matched >= p.docs.size()) return;
  // The documents after the exact part: their chunk KV (computed after this head), loaded now:
  // local hits first, then the misses from the remote tier.
  std::vector<Hash128> keys;
  std::vector<size_t> nodes;
  for (size_t i = std::max<size_t>(matched, 1); i < p.docs.size(); ++i) {
    keys.push_back(kvstore::chunk_key(p.docs[0], p.docs[i]));
    nodes.push_back(i);
  }
  kvstore::ChunkLookupResult c = ctx.store.lookup_chunks(keys, p.scope, /*pin=*/true);
  std::vector<kvstore::PathNode> hits;
  kvstore::RemoteTail misses;
  misses.chunks = true;
  misses.tenant = p.scope;
  std::vector<size_t> miss_nodes;
  for (size_t i = 0; i < c.chunks.size(); ++i) {
    if (!c.chunks[i]) {
      misses.docs.push_back(keys[i]);
      miss_nodes.push_back(nodes[i]);
      continue;
    }
    hits.push_back(*c.chunks[i]);
    p.chunk_nodes.push_back(nodes[i]);
    p.hint_tokens += c.chunks[i]->num_tokens;
  }
  kvstore::LoadOptions lo;
  if (remote && !misses.docs.empty()) {
    for (size_t j : miss_nodes) {
      const auto t = node_tokens(prompt, p.ends[j - 1], p.ends[j]);
      misses.tokens.emplace_back(t.begin(), t.end());
    }
    p.chunk_nodes.insert(p.chunk_nodes.end(), miss_nodes.begin(), miss_nodes.end());
    lo.remote = std::move(misses);
  }
  if (!hits.empty() || lo.remote) {
    lo.on_done = ctx.on_load_done;
    lo.independent = true;
    p.chunk_load = ctx.store.load(hits, std::move(lo));
    p.chunk_pin = std::move(c.pin);
  }
}

void BlendReuse::install_rest(ReuseContext& ctx, ReusePlan& p, std::span<const int32_t> prompt, size_t d,
                              engine::BlockTable& table, const std::function<bool(int)>& ensure_free, Installed* in) {
  const size_t n = p.docs.size();
  if (d >= n) return;
  if (d == 0) {
    p.note = "the prompt head's KV is not in memory (not cached yet, or evicted since the lookup): exact prefill";
    return;
  }
  if (table.num_tokens() != p.ends[d - 1] || static_cast<int>(prompt.size()) < p.ends[n - 1]) {
    p.note = "internal: the exact part does not match the path; exact prefill";
    return;
  }
  if (!admit(ctx, p, prompt)) return;
  blend(ctx, p, prompt, d, table, ensure_free, in);
}

bool BlendReuse::admit(ReuseContext& ctx, ReusePlan& p, std::span<const int32_t> prompt) {
  if (std::string why = self_check(ctx, p, prompt); !why.empty()) {
    p.note = why;
    return false;
  }
  return true;
}

void BlendReuse::blend(ReuseContext& ctx, ReusePlan& p, std::span<const int32_t> prompt, size_t d, engine::BlockTable& table,
                       const std::function<bool(int)>& ensure_free, Installed* in) const {
  const int head_len = p.ends[0];
  const int exact_end = p.ends[d - 1];
  const size_t n = p.docs.size();
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
  const int bs = ctx.pool.layout().block_size;
  for (size_t j = d; j < n; ++j) {
    if (kv[j].k) continue;
    missing.push_back(j);
    missing_tokens.push_back(doc_tokens(j));
    side_blocks += (head_len % bs + static_cast<int>(doc_tokens(j).size()) + bs - 1) / bs + 1;
  }
  auto give_up = [&](const std::string& why) {
    table.truncate(ctx.pool, exact_end);
    p.note = why + ": exact prefill";
    log::pipelines()->warn("{} reuse falls back to exact prefill: {}", reuse_mode_name(p.mode), why);
  };
  using BClock = std::chrono::steady_clock;
  const auto ms_since = [](BClock::time_point t) { return std::chrono::duration<double, std::milli>(BClock::now() - t).count(); };
  if (ctx.defer_repair) return blend_deferred(ctx, p, d, missing, kv, src, table, ensure_free, in);
  const auto t_chunk = BClock::now();
  double chunk_ms = 0, place_ms = 0;
  if (!missing.empty()) {
    if (!ensure_free(side_blocks)) return give_up("no KV pool room to compute chunk KV");
    Result<std::vector<kvstore::HostKv>> fresh = compute_chunk_kv(ctx.model, table, head_len, missing_tokens);
    if (!fresh.ok()) return give_up("computing chunk KV failed: " + fresh.status().to_string());
    for (size_t i = 0; i < missing.size(); ++i) {
      const size_t j = missing[i];
      auto r = ctx.store.insert_chunk(kvstore::chunk_key(p.docs[0], p.docs[j]), (*fresh)[i].data(), p.scope, doc_tokens(j));
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
    if (!ensure_free(table.blocks_needed(ctx.pool, len))) return give_up("no KV pool room to place chunk KV");
    if (Status st = place_chunk(ctx.model, kv[j], table); !st.ok()) return give_up(st.to_string());
    docs.push_back({p.ends[j - 1], len, /*in_place=*/j == 1});
  }
  place_ms = ms_since(t_place);
  const auto t_repair = std::chrono::steady_clock::now();
  Result<BlendStats> st = repair(ctx.model, table, prompt, docs, p.mode, p.blend);
  if (!st.ok()) return give_up("repair step failed: " + st.status().to_string());
  st->chunk_ms = chunk_ms;
  st->place_ms = place_ms;
  st->repair_ms = ms_since(t_repair);
  if (st->row_layers > 0) {
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_repair).count();
    const double per = ms / st->row_layers;
    ctx.row_layer_ms = ctx.row_layer_ms == 0 ? per : 0.8 * ctx.row_layer_ms + 0.2 * per;
  }
  // Loading controller: the ratio whose per-layer recompute matches the per-layer load time.
  int slow_loaded = 0;
  for (size_t j = d; j < n; ++j)
    if (src[j] && *src[j] != kvstore::Tier::kHbm) slow_loaded += kv[j].num_tokens;
  if (slow_loaded > 0 && p.chunk_load && ctx.row_layer_ms > 0 && st->placed > 0) {
    const int layers = ctx.model.config().num_hidden_layers;
    st->ratio_floor = std::min(1.0, p.chunk_load->elapsed_ms() / (ctx.row_layer_ms * layers * st->placed));
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

void BlendReuse::blend_deferred(ReuseContext& ctx, ReusePlan& p, size_t d, std::span<const size_t> missing,
                                std::span<const kvstore::KvData> kv,
                                const std::vector<std::optional<kvstore::Tier>>& src, engine::BlockTable& table,
                                const std::function<bool(int)>& ensure_free, Installed* in) const {
  const size_t n = p.docs.size();
  const int exact_end = p.ends[d - 1];
  const auto t_place = std::chrono::steady_clock::now();
  auto give_up = [&](const std::string& why) {
    table.truncate(ctx.pool, exact_end);
    p.note = why + ": exact prefill";
    log::pipelines()->warn("{} reuse falls back to exact prefill: {}", reuse_mode_name(p.mode), why);
  };
  // Placed chunk KV, or a placeholder (reserved slots the repair step writes in every layer) for a
  // first-seen document: its chunk KV is computed after the first token.
  std::vector<RepairDoc> docs;
  int fresh = 0;
  for (size_t j = d; j < n; ++j) {
    const int start = p.ends[j - 1], len = p.ends[j] - start;
    if (!ensure_free(table.blocks_needed(ctx.pool, len))) return give_up("no KV pool room to place chunk KV");
    if (kv[j].k) {
      if (Status st = place_chunk(ctx.model, kv[j], table); !st.ok()) return give_up(st.to_string());
      docs.push_back({start, len, /*in_place=*/j == 1, /*fresh=*/false});
    } else {
      if (!table.reserve(ctx.pool, len)) return give_up("no KV pool room for a first-seen document");
      table.commit(len);
      docs.push_back({start, len, false, /*fresh=*/true});
      fresh += len;
    }
  }
  PendingRepair r = plan_repair(docs, p.mode, p.blend, ctx.model.config().num_hidden_layers, table.num_tokens());
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

void BlendReuse::finish_repair(ReuseContext& ctx, ReusePlan& p, const RepairOutcome& o, double ms) {
  if (!p.pending) return;
  p.blended.repaired = o.repaired;
  p.blended.selected_first = o.selected_first;
  p.blended.row_layers = o.row_layers;
  p.blended.ratio = p.blended.placed ? static_cast<double>(o.repaired) / p.blended.placed : 0.0;
  p.blended.repair_ms = ms;
  if (o.row_layers > 0) {
    const double per = ms / o.row_layers;
    ctx.row_layer_ms = ctx.row_layer_ms == 0 ? per : 0.8 * ctx.row_layer_ms + 0.2 * per;
  }
  p.pending.reset();
}

std::vector<BlendCase> BlendReuse::reorder_cases(const ReusePlan& p, std::span<const int32_t> prompt) {
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

std::string BlendReuse::self_check(ReuseContext& ctx, const ReusePlan& p, std::span<const int32_t> prompt) const {
  const size_t n = p.docs.size();
  if (!ctx.check.enabled || n < 3) return "";  // one document after the head is in place: exact
  const std::string key = ctx.strategy(p.mode).check_key(p.blend);
  if (auto it = ctx.verdicts.find(key); it != ctx.verdicts.end()) return it->second;
  const std::vector<BlendCase> cases = reorder_cases(p, prompt);
  Result<Fidelity> f = measure_fidelity(ctx.model, cases, p.mode, p.blend, ctx.check.greedy_tokens);
  std::string verdict;
  if (!f.ok()) {
    // Not a verdict on the model (e.g. no pool room right now): exact this time, ask again later.
    log::pipelines()->warn("reuse self-check for {} could not run: {}", key, f.status().to_string());
    return "the reuse self-check could not run (" + f.status().message() + ")";
  }
  if (f->greedy_agreement < ctx.check.min_greedy_agreement || f->first_token_kl > ctx.check.max_first_token_kl)
    verdict = fmt::format("reuse self-check failed for {} on this model: greedy agreement {:.2f} (min {:.2f}), "
                          "first-token KL {:.3f} (max {:.3f}); serving exact reuse",
                          key, f->greedy_agreement, ctx.check.min_greedy_agreement, f->first_token_kl,
                          ctx.check.max_first_token_kl);
  log::pipelines()->info("reuse self-check {}: greedy agreement {:.2f}, first-token KL {:.4f}, max |dlogit| {:.3f} -> {}",
                         key, f->greedy_agreement, f->first_token_kl, f->max_abs_logit, verdict.empty() ? "pass" : "fail");
  ctx.verdicts[key] = verdict;
  return verdict;
}

void BlendReuse::publish_first_chunk(ReuseContext& ctx, const ReusePlan& p, const engine::BlockTable& table,
                                     std::span<const int32_t> prompt) const {
  if (p.docs.size() < 2 || p.installed_nodes > 1 || table.num_tokens() < p.ends[1] || !table.positions_are_slots()) return;
  // A mode that failed the self-check never places chunks: no copy for it on every run.
  if (auto it = ctx.verdicts.find(ctx.strategy(p.mode).check_key(p.blend)); it != ctx.verdicts.end() && !it->second.empty()) return;
  Result<kvstore::HostKv> kv = kvstore::gather_kv(ctx.pool, table, p.ends[0], p.ends[1] - p.ends[0]);
  if (!kv.ok()) return;
  auto r = ctx.store.insert_chunk(kvstore::chunk_key(p.docs[0], p.docs[1]), kv->data(), p.scope, node_tokens(prompt, p.ends[0], p.ends[1]));
  if (!r.ok()) log::pipelines()->warn("chunk kv insert failed: {}", r.status().to_string());
}

void BlendReuse::publish_pending_chunks(ReuseContext& ctx, ReusePlan& p, const engine::BlockTable& table,
                                        std::span<const int32_t> prompt) const {
  std::vector<size_t> js;
  js.swap(p.pending_chunks);
  const int head_len = p.ends.empty() ? 0 : p.ends[0];
  if (js.empty() || head_len <= 0 || table.num_tokens() < head_len || prompt.size() < static_cast<size_t>(p.ends.back()))
    return;
  std::vector<std::span<const int32_t>> toks;
  for (size_t j : js) toks.push_back(prompt.subspan(p.ends[j - 1], p.ends[j] - p.ends[j - 1]));
  const auto t0 = std::chrono::steady_clock::now();
  Result<std::vector<kvstore::HostKv>> fresh = compute_chunk_kv(ctx.model, table, head_len, toks);
  if (!fresh.ok()) {
    log::pipelines()->warn("chunk kv of {} first-seen documents not cached: {}", js.size(), fresh.status().to_string());
    return;
  }
  for (size_t i = 0; i < js.size(); ++i) {
    auto r = ctx.store.insert_chunk(kvstore::chunk_key(p.docs[0], p.docs[js[i]]), (*fresh)[i].data(), p.scope, toks[i]);
    if (!r.ok()) log::pipelines()->warn("chunk kv insert failed: {}", r.status().to_string());
  }
  p.blended.chunk_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void BlendReuse::publish_rest(ReuseContext& ctx, ReusePlan& p, const engine::BlockTable& table,
                              std::span<const int32_t> prompt) {
  publish_pending_chunks(ctx, p, table, prompt);
  publish_first_chunk(ctx, p, table, prompt);
}

namespace {

// CacheBlend: every placed row in layers 0 and 1; from the selection layers on, the placed rows
// whose fresh K/V deviate most from their slots (2r at layer 1, r from layer 2 on).
class CacheBlendReuse final : public BlendReuse {
 public:
  std::string check_key(const BlendParams& b) const override { return fmt::format("cacheblend:{}", b.recompute_ratio); }
  std::vector<AutoCandidate> auto_candidates(const BlendParams& base) const override {
    std::vector<AutoCandidate> c;
    int rank = 3;
    for (double r : {0.15, 0.30}) {
      AutoCandidate a{ReuseMode::kCacheBlend, base, rank++};
      a.params.recompute_ratio = r;
      c.push_back(a);
    }
    return c;
  }
  double usage_recompute_ratio(const BlendParams& b) const override { return b.recompute_ratio; }
  bool selects() const override { return true; }
  void select(PendingRepair* r, const BlendParams& params, int num_layers) const override {
    const int n = r->candidates();
    const int target = static_cast<int>(std::ceil(params.recompute_ratio * n - 1e-9));
    if (target == 0) {
      // Naive concatenation: the placed rows keep their KV; only first-seen rows are computed.
      std::vector<int32_t> rows;
      std::vector<uint8_t> cand;
      for (size_t i = 0; i < r->rows.size(); ++i)
        if (!r->candidate[i]) rows.push_back(r->rows[i]), cand.push_back(0);
      r->rows = std::move(rows);
      r->candidate = std::move(cand);
    } else if (target < n) {
      // Layer 0's K/V equal the placed ones (they depend on the token and its position only); the
      // first layer that can tell is 1. Gradual filtering: 2r there, r from layer 2 on (as repair()).
      if (num_layers > 1) r->targets[1] = num_layers > 2 ? std::min(n, 2 * target) : target;
      if (num_layers > 2) r->targets[2] = target;
    }
  }
};

// EPIC: the first k tokens of every placed document not in place, in every layer.
class EpicReuse final : public BlendReuse {
 public:
  std::string check_key(const BlendParams& b) const override { return fmt::format("epic:{}", b.epic_k); }
  std::vector<AutoCandidate> auto_candidates(const BlendParams& base) const override {
    std::vector<AutoCandidate> c;
    int rank = 1;
    for (int k : {16, 32}) {
      AutoCandidate a{ReuseMode::kEpic, base, rank++};
      a.params.epic_k = k;
      c.push_back(a);
    }
    return c;
  }
  int repair_rows(int len, const BlendParams& params) const override { return std::min(params.epic_k, len); }
};

}  // namespace

std::unique_ptr<ReuseStrategy> make_cacheblend_reuse() { return std::make_unique<CacheBlendReuse>(); }
std::unique_ptr<ReuseStrategy> make_epic_reuse() { return std::make_unique<EpicReuse>(); }

}  // namespace ragd::pipelines
