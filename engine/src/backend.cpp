// Helpers shared by the backends (backend.h).
#include "backend.h"

#include <algorithm>
#include <string>
#include <utility>

#include "ragd/kernels/rope.h"

namespace ragd::engine {

std::vector<float> rope_inv_freq(const ModelConfig& cfg) {
  kernels::RopeConfig r;
  r.head_dim = cfg.head_dim;
  r.theta = cfg.rope_theta;
  switch (cfg.rope_scaling.type) {
    case RopeScaling::Type::kNone: r.scaling = kernels::RopeConfig::Scaling::kNone; break;
    case RopeScaling::Type::kLinear: r.scaling = kernels::RopeConfig::Scaling::kLinear; break;
    case RopeScaling::Type::kLlama3: r.scaling = kernels::RopeConfig::Scaling::kLlama3; break;
  }
  r.factor = cfg.rope_scaling.factor;
  r.low_freq_factor = cfg.rope_scaling.low_freq_factor;
  r.high_freq_factor = cfg.rope_scaling.high_freq_factor;
  r.original_max_position_embeddings = cfg.rope_scaling.original_max_position_embeddings;
  std::vector<float> inv_freq(cfg.head_dim / 2);
  kernels::rope_inv_freq(r, inv_freq.data());
  return inv_freq;
}

void rerotate_host_keys(const ModelConfig& cfg, const float* inv_freq, float* k, size_t rows, int64_t delta) {
  const int hd = cfg.head_dim, nkv = cfg.num_key_value_heads;
  const size_t row_floats = static_cast<size_t>(nkv) * hd;
  constexpr size_t kChunk = 1 << 20;  // the kernel takes an int row count
  for (size_t r0 = 0; r0 < rows; r0 += kChunk) {
    const int n = static_cast<int>(std::min(kChunk, rows - r0));
    kernels::rope_rerotate(k + r0 * row_floats, n, nkv, hd, static_cast<int>(row_floats), delta, inv_freq);
  }
}

void Backend::write_rerotated(KvStorage& st, std::span<const int32_t> blocks, int t0, int n, const float* k,
                              const float* v, int64_t delta) const {
  const KvLayout& L = st.layout();
  const size_t floats = static_cast<size_t>(L.num_layers) * n * L.token_floats();
  std::vector<float> rotated(k, k + floats);
  rerotate_keys(rotated.data(), static_cast<size_t>(L.num_layers) * n, delta);
  st.write_tokens_all_layers(blocks, t0, n, rotated.data(), v);
}

LayerQkv qkv_view(int layer, std::span<const StepRow> rows, const LayerShape& shape, float* qkv, size_t stride) {
  const size_t q_dim = static_cast<size_t>(shape.num_heads) * shape.head_dim;
  const size_t kv_dim = static_cast<size_t>(shape.num_kv_heads) * shape.head_dim;
  LayerQkv v;
  v.layer = layer;
  v.rows = static_cast<int>(rows.size());
  v.row_info = rows;
  v.shape = shape;
  v.q = qkv;
  v.k = qkv + q_dim;
  v.v = qkv + q_dim + kv_dim;
  v.row_stride = stride;
  return v;
}

LayerAttention attention_view(int layer, std::span<const StepRow> rows, const LayerShape& shape, float scale,
                              const float* q, size_t q_stride, float* out, float* lse, std::function<Status()> local) {
  LayerAttention a;
  a.layer = layer;
  a.rows = static_cast<int>(rows.size());
  a.row_info = rows;
  a.shape = shape;
  a.scale = scale;
  a.q = q;
  a.q_stride = q_stride;
  a.out = out;
  a.lse = lse;
  a.local = std::move(local);
  return a;
}

Status check_kept_rows(const std::vector<int>& keep, int rows) {
  for (size_t i = 0; i < keep.size(); ++i) {
    if (keep[i] < 0 || keep[i] >= rows || (i > 0 && keep[i] <= keep[i - 1])) {
      return Status::InvalidArgument("layer hook: kept rows must be ascending, distinct and in [0, " +
                                     std::to_string(rows) + "); entry " + std::to_string(i) + " is " +
                                     std::to_string(keep[i]));
    }
  }
  return Status::OK();
}

void narrow_runs(std::span<const StepRow> kept, std::vector<SeqRun>* runs) {
  std::vector<int> count(runs->size(), 0);
  for (const StepRow& r : kept) ++count[r.seq];
  int row0 = 0;
  for (size_t si = 0; si < runs->size(); ++si) {
    SeqRun& run = (*runs)[si];
    run.contiguous = run.contiguous && count[si] == run.n;
    run.row0 = row0;
    run.n = count[si];
    row0 += count[si];
  }
}

Result<std::vector<int>> logit_active_rows(const StepPlan& plan, bool narrowed, std::span<const int> step_row, int total) {
  std::vector<int> active;
  if (narrowed) {
    active.assign(total, -1);
    for (size_t r = 0; r < step_row.size(); ++r) active[step_row[r]] = static_cast<int>(r);
  }
  std::vector<int> out(plan.logit_rows.size() + plan.pick_rows.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const int s = i < plan.logit_rows.size() ? plan.logit_rows[i] : plan.pick_rows[i - plan.logit_rows.size()];
    out[i] = narrowed ? active[s] : s;
    if (out[i] < 0) {
      return Status::InvalidArgument("layer hook dropped step row " + std::to_string(s) + ", whose logits were requested");
    }
  }
  return out;
}

}  // namespace ragd::engine
