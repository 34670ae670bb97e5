#include "ragd/pipelines/kv_blend.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "blend_step.h"

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

Status place_chunk(engine::Model& model, const kvstore::KvData& kv, engine::BlockTable& table) {
  const int64_t delta = static_cast<int64_t>(table.num_tokens()) - kv.first_position;
  if (delta != 0) return model.append_shifted(table, kv.num_tokens, kv.k, kv.v, delta);
  if (!table.append(model.kv_pool(), kv.num_tokens, kv.k, kv.v))
    return Status::ResourceExhausted(fmt::format("place_chunk: KV pool has no room for {} more tokens", kv.num_tokens));
  return Status::OK();
}


Result<BlendStats> repair(engine::Model& model, engine::BlockTable& table, std::span<const int32_t> tokens,
                          std::span<const BlendDoc> docs, ReuseMode mode, const BlendParams& params) {
  RAGD_RETURN_IF_ERROR(params.validate());
  if (!is_approximate(mode)) return Status::InvalidArgument("repair: reuse mode " + std::string(reuse_mode_name(mode)) + " is exact");
  std::vector<RepairDoc> rd;
  for (const BlendDoc& d : docs) {
    if (d.start < 0 || d.len < 0 || d.start + d.len > table.num_tokens() || d.start + d.len > static_cast<int>(tokens.size()))
      return Status::InvalidArgument(fmt::format("repair: document [{}, {}) is outside the sequence of {} tokens", d.start,
                                                 d.start + d.len, table.num_tokens()));
    rd.push_back({d.start, d.len, d.in_place, /*fresh=*/false});
  }
  // The same rows and selection as the repair riding in a prefill step (blend_step.h), as a step
  // of its own.
  const int layers = model.config().num_hidden_layers;
  const PendingRepair r = plan_repair(rd, mode, params, layers, table.num_tokens());
  BlendStats st;
  st.placed = r.placed;
  if (r.rows.empty()) return st;  // naive concatenation, or every document in place
  std::vector<int32_t> ids;
  for (int32_t row : r.rows) ids.push_back(tokens[static_cast<size_t>(row)]);
  engine::SeqStep s;
  s.table = &table;
  s.tokens = ids;
  s.slots = r.rows;
  s.logits = engine::SeqStep::Logits::kNone;
  RepairStepHook hook(model.kv_pool());
  hook.add(0, table, r);
  engine::StepOutput out;
  if (hook.selects()) RAGD_RETURN_IF_ERROR(model.forward_with_hook(std::span<engine::SeqStep>(&s, 1), hook, &out));
  else RAGD_RETURN_IF_ERROR(model.forward(std::span<engine::SeqStep>(&s, 1), &out));
  const RepairOutcome o = hook.outcome(0, layers);
  st.repaired = o.repaired;
  st.selected_first = o.selected_first;
  st.row_layers = o.row_layers;
  st.ratio = st.placed ? static_cast<double>(st.repaired) / st.placed : 0.0;
  return st;
}

}  // namespace ragd::pipelines
