#include "blend_step.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ragd/kernels/kv_deviation.h"

#include "reuse_strategy.h"

namespace ragd::pipelines {

int PendingRepair::candidates() const {
  return static_cast<int>(std::count(candidate.begin(), candidate.end(), uint8_t{1}));
}

PendingRepair plan_repair(std::span<const RepairDoc> docs, ReuseMode mode, const BlendParams& params, int num_layers, int end) {
  const ReuseStrategy& rules = reuse_strategy_rules(mode);
  PendingRepair r;
  r.mode = mode;
  r.params = params;
  r.end = end;
  r.targets.assign(static_cast<size_t>(num_layers), -1);
  for (const RepairDoc& d : docs) {
    if (d.fresh) {
      r.fresh += d.len;
      for (int i = 0; i < d.len; ++i) {
        r.rows.push_back(d.start + i);
        r.candidate.push_back(0);
      }
      continue;
    }
    if (d.in_place) continue;
    r.placed += d.len;
    const int take = rules.repair_rows(d.len, params);
    for (int i = 0; i < take; ++i) {
      r.rows.push_back(d.start + i);
      r.candidate.push_back(rules.selects() ? 1 : 0);
    }
  }
  rules.select(&r, params, num_layers);
  // What the step computes for it: every row in every layer, less CacheBlend's dropped candidates.
  const int n = r.candidates();
  int active = n;
  for (int l = 0; l < num_layers; ++l) {
    r.row_layers += static_cast<long>(r.rows.size()) - n + active;
    if (r.targets[static_cast<size_t>(l)] >= 0) active = std::min(active, r.targets[static_cast<size_t>(l)]);
  }
  return r;
}

void RepairStepHook::add(int seq, const engine::BlockTable& table, const PendingRepair& r) {
  Seq s;
  s.table = &table;
  s.repair = &r;
  seqs_[seq] = std::move(s);
}

bool RepairStepHook::selects() const {
  for (const auto& [seq, s] : seqs_)
    for (int t : s.repair->targets)
      if (t >= 0) return true;
  return false;
}

Status RepairStepHook::on_qkv(const engine::LayerQkv& q, engine::RowSelection* keep) {
  // Per run: its active candidate rows (indices into this layer's active rows).
  std::map<int, std::vector<int>> cand;
  for (int r = 0; r < q.rows; ++r) {
    const engine::StepRow& info = q.row_info[r];
    auto it = seqs_.find(info.seq);
    if (it == seqs_.end()) continue;
    const PendingRepair& p = *it->second.repair;
    if (info.token < static_cast<int>(p.rows.size())) {
      it->second.row_layers += 1;
      if (p.candidate[static_cast<size_t>(info.token)]) cand[info.seq].push_back(r);
    }
  }
  bool narrowed = false;
  std::vector<uint8_t> drop(static_cast<size_t>(q.rows), 0);
  const int width = q.shape.num_kv_heads * q.shape.head_dim;
  for (auto& [seq, s] : seqs_) {
    std::vector<int>& c = cand[seq];
    const int target = q.layer < static_cast<int>(s.repair->targets.size()) ? s.repair->targets[q.layer] : -1;
    if (target < 0 || target >= static_cast<int>(c.size())) {
      s.kept.push_back(static_cast<int>(c.size()));
      continue;
    }
    // Deviation of each candidate's fresh K/V from the KV in its slot (the placed chunk KV, or what
    // an earlier layer of this step wrote: this layer's slots are written after this call).
    const size_t n = c.size();
    old_k_.resize(n * width);
    old_v_.resize(n * width);
    fresh_k_.resize(n * width);
    fresh_v_.resize(n * width);
    for (size_t i = 0; i < n; ++i) {
      const int r = c[i];
      s.table->read(pool_, q.layer, q.row_info[r].slot, 1, old_k_.data() + i * width, old_v_.data() + i * width);
      std::copy_n(q.k + static_cast<size_t>(r) * q.row_stride, width, fresh_k_.data() + i * width);
      std::copy_n(q.v + static_cast<size_t>(r) * q.row_stride, width, fresh_v_.data() + i * width);
    }
    dev_.resize(n);
    kernels::kv_deviation(static_cast<int>(n), width, fresh_k_.data(), fresh_v_.data(), static_cast<size_t>(width),
                          old_k_.data(), old_v_.data(), width, dev_.data());
    std::vector<int> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    // Largest deviation first; ties by row so that the choice is deterministic.
    std::partial_sort(idx.begin(), idx.begin() + target, idx.end(),
                      [&](int a, int b) { return dev_[a] != dev_[b] ? dev_[a] > dev_[b] : a < b; });
    for (size_t i = static_cast<size_t>(target); i < n; ++i) drop[static_cast<size_t>(c[idx[i]])] = 1;
    narrowed = true;
    s.kept.push_back(target);
  }
  if (narrowed) {
    std::vector<int> rows;
    rows.reserve(static_cast<size_t>(q.rows));
    for (int r = 0; r < q.rows; ++r)
      if (!drop[static_cast<size_t>(r)]) rows.push_back(r);
    keep->keep(std::move(rows));
  }
  return Status::OK();
}

RepairOutcome RepairStepHook::outcome(int seq, int num_layers) const {
  RepairOutcome o;
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return o;
  const Seq& s = it->second;
  const PendingRepair& p = *s.repair;
  if (!reuse_strategy_rules(p.mode).selects() || s.kept.empty()) {  // every row, every layer
    o.repaired = static_cast<int>(p.rows.size()) - p.fresh;
    o.selected_first = o.repaired;
    o.row_layers = static_cast<long>(p.rows.size()) * num_layers;
    return o;
  }
  o.repaired = s.kept.back();
  o.selected_first = s.kept.size() > 1 ? s.kept[1] : s.kept[0];
  o.row_layers = s.row_layers;
  return o;
}

}  // namespace ragd::pipelines
