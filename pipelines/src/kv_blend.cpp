#include "ragd/pipelines/kv_blend.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "ragd/engine/layer_hook.h"
#include "ragd/kernels/kv_deviation.h"

namespace ragd::pipelines {

Result<std::vector<kvstore::HostKv>> compute_chunk_kv(engine::Model& model, const engine::BlockTable& head, int head_len,
                                                      std::span<const std::span<const int32_t>> docs) {
  engine::KvPool& pool = model.kv_pool();
  if (head_len <= 0 || head.num_tokens() < head_len)
    return Status::InvalidArgument(fmt::format("compute_chunk_kv: head of {} tokens, table holds {}", head_len, head.num_tokens()));
  std::vector<engine::BlockTable> sides;
  sides.reserve(docs.size());
  std::vector<engine::SeqStep> batch;
  for (const auto& d : docs) {
    sides.push_back(head.fork_prefix(pool, head_len));
    engine::SeqStep s;
    s.table = &sides.back();
    s.tokens = d;
    s.logits = engine::SeqStep::Logits::kNone;
    batch.push_back(s);
  }
  auto release = [&] {
    for (auto& t : sides) t.release(pool);
  };
  engine::StepOutput out;
  if (Status st = model.forward(batch, &out); !st.ok()) {
    release();
    return st;
  }
  std::vector<kvstore::HostKv> kv;
  kv.reserve(docs.size());
  for (size_t i = 0; i < docs.size(); ++i) {
    Result<kvstore::HostKv> r = kvstore::gather_kv(pool, sides[i], head_len, static_cast<int>(docs[i].size()));
    if (!r.ok()) {
      release();
      return r.status();
    }
    kv.push_back(std::move(r).value());
  }
  release();
  return kv;
}

Status place_chunk(engine::Model& model, kvstore::HostKv& kv, engine::BlockTable& table) {
  engine::KvPool& pool = model.kv_pool();
  const engine::KvLayout& L = pool.layout();
  const int64_t delta = static_cast<int64_t>(table.num_tokens()) - kv.first_position;
  if (delta != 0) {
    RAGD_RETURN_IF_ERROR(model.rerotate_keys(kv.k.data(), static_cast<size_t>(L.num_layers) * kv.num_tokens, delta));
    kv.first_position += static_cast<int>(delta);
  }
  if (!table.append(pool, kv.num_tokens, kv.k.data(), kv.v.data()))
    return Status::ResourceExhausted(fmt::format("place_chunk: KV pool has no room for {} more tokens", kv.num_tokens));
  return Status::OK();
}

namespace {

// CacheBlend's selection: keeps, at each selection layer, the active rows whose fresh K/V deviate
// most from the K/V in their slots (the placed chunk KV, or what an earlier layer of this step
// wrote: layer l's slots still hold the placed KV when on_qkv runs). It also counts what the step
// computed: rows per layer, and the rows that went on past each layer.
class DeviationFilter final : public engine::LayerHook {
 public:
  DeviationFilter(const engine::KvPool& pool, const engine::BlockTable& table, std::vector<int> targets)
      : pool_(pool), table_(table), targets_(std::move(targets)) {}

  Status on_qkv(const engine::LayerQkv& q, engine::RowSelection* keep) override {
    row_layers_ += q.rows;
    kept_.push_back(q.rows);
    if (q.layer >= static_cast<int>(targets_.size())) return Status::OK();
    const int target = targets_[q.layer];
    if (target < 0 || target >= q.rows) return Status::OK();  // no selection at this layer
    const int width = q.shape.num_kv_heads * q.shape.head_dim;
    old_k_.resize(static_cast<size_t>(q.rows) * width);
    old_v_.resize(old_k_.size());
    for (int r = 0; r < q.rows; ++r)
      table_.read(pool_, q.layer, q.row_info[r].slot, 1, old_k_.data() + static_cast<size_t>(r) * width,
                  old_v_.data() + static_cast<size_t>(r) * width);
    dev_.resize(q.rows);
    kernels::kv_deviation(q.rows, width, q.k, q.v, q.row_stride, old_k_.data(), old_v_.data(), width, dev_.data());
    std::vector<int> idx(q.rows);
    std::iota(idx.begin(), idx.end(), 0);
    // Largest deviation first; ties by row so that the choice is deterministic.
    std::partial_sort(idx.begin(), idx.begin() + target, idx.end(),
                      [&](int a, int b) { return dev_[a] != dev_[b] ? dev_[a] > dev_[b] : a < b; });
    idx.resize(target);
    std::sort(idx.begin(), idx.end());
    kept_.back() = target;
    keep->keep(std::move(idx));
    return Status::OK();
  }
  // Rows that went on past layer l (after its selection).
  int kept_after(int l) const { return kept_.at(l); }
  long row_layers() const { return row_layers_; }

 private:
  const engine::KvPool& pool_;
  const engine::BlockTable& table_;
  std::vector<int> targets_;  // per layer: rows to keep (-1 = no selection)
  std::vector<float> old_k_, old_v_, dev_;
  std::vector<int> kept_;     // per layer seen: rows that went on
  long row_layers_ = 0;       // rows computed, summed over layers
};

}  // namespace

Result<BlendStats> repair(engine::Model& model, engine::BlockTable& table, std::span<const int32_t> tokens,
                          std::span<const BlendDoc> docs, ReuseMode mode, const BlendParams& params) {
  RAGD_RETURN_IF_ERROR(params.validate());
  if (!is_approximate(mode)) return Status::InvalidArgument("repair: reuse mode " + std::string(reuse_mode_name(mode)) + " is exact");
  BlendStats st;
  std::vector<int32_t> rows;  // slots (= positions) of the rows of the step
  for (const BlendDoc& d : docs) {
    if (d.start < 0 || d.len < 0 || d.start + d.len > table.num_tokens() || d.start + d.len > static_cast<int>(tokens.size()))
      return Status::InvalidArgument(fmt::format("repair: document [{}, {}) is outside the sequence of {} tokens", d.start,
                                                 d.start + d.len, table.num_tokens()));
    if (d.in_place) continue;
    st.placed += d.len;
    const int take = mode == ReuseMode::kEpic ? std::min(params.epic_k, d.len) : d.len;
    for (int i = 0; i < take; ++i) rows.push_back(d.start + i);
  }
  const int layers = model.config().num_hidden_layers;
  const int n = static_cast<int>(rows.size());
  int target = n;
  if (mode == ReuseMode::kCacheBlend) target = static_cast<int>(std::ceil(params.recompute_ratio * n - 1e-9));
  if (n == 0 || target == 0) return st;  // naive concatenation
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = tokens[rows[i]];
  engine::SeqStep s;
  s.table = &table;
  s.tokens = ids;
  s.slots = rows;
  s.logits = engine::SeqStep::Logits::kNone;
  engine::StepOutput out;
  if (mode == ReuseMode::kEpic || target >= n) {
    RAGD_RETURN_IF_ERROR(model.forward(std::span<engine::SeqStep>(&s, 1), &out));
    st.repaired = n;
    st.selected_first = n;
    st.row_layers = static_cast<long>(n) * layers;
  } else {
    // Layer 0's K/V equal the placed ones (they depend on the token and its position only); the
    // first layer that can tell is 1. Gradual filtering: 2r there, r from layer 2 on.
    std::vector<int> targets(layers, -1);
    if (layers > 1) targets[1] = layers > 2 ? std::min(n, 2 * target) : target;
    if (layers > 2) targets[2] = target;
    DeviationFilter hook(model.kv_pool(), table, std::move(targets));
    RAGD_RETURN_IF_ERROR(model.forward_with_hook(std::span<engine::SeqStep>(&s, 1), hook, &out));
    st.repaired = hook.kept_after(layers - 1);
    st.selected_first = hook.kept_after(std::min(1, layers - 1));
    st.row_layers = hook.row_layers();
  }
  st.ratio = st.placed ? static_cast<double>(st.repaired) / st.placed : 0.0;
  return st;
}

}  // namespace ragd::pipelines
