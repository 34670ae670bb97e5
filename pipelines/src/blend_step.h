// The repair of an approximate run (CacheBlend / EPIC) inside the scheduler's step.
//
// At admission the planner places every reused document's chunk KV and leaves placeholder slots
// (reserved, not yet written) for the documents seen for the first time; what is left to compute
// is a PendingRepair. The run's first prefill step then carries, in one SeqStep with explicit
// slots, the repair rows, the first-seen documents' rows and the rest of the prompt: one forward
// repairs the placed KV, computes the new documents in their context and the question, and gives
// the first token's logits. That step is batched with the other runs' prefill and decode like any
// other, so there is no separate repair step, chunk step or question step on the path to the first
// token. The first-seen documents' position-independent chunk KV (for later runs) is computed after
// the first token (ReusePlanner::publish).
//
// Rows of the step, per run: rows[] (ascending slots = positions) then the prompt's remaining tokens.
// Which rows each layer computes:
//   epic        every row, every layer (the first k tokens of each placed document, the new
//               documents' tokens, the question);
//   cacheblend  every row in layers 0 and 1; from the selection layers on, the placed rows whose
//               fresh K/V deviate most from their slots (2r of them at layer 1, r from layer 2 on:
//               gradual filtering), and always every first-seen and question row.
// Equivalent to ReusePlanner's standalone repair() followed by the prefill of the question (the
// question's rows at layer l see the document rows' final layer-l KV either way, because a layer's
// K/V are written before its attention), in one forward instead of two or three.
//
// Thread-safety: the scheduler thread (it owns the pool and the model).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "ragd/engine/kv_cache.h"
#include "ragd/engine/layer_hook.h"
#include "ragd/pipelines/executor.h"
#include "ragd/pipelines/kv_blend.h"

namespace ragd::pipelines {

struct PendingRepair {
  ReuseMode mode = ReuseMode::kCacheBlend;
  BlendParams params;
  std::vector<int32_t> rows;       // slots (= positions) computed before the prompt's rest, ascending
  std::vector<uint8_t> candidate;  // per row: 1 = a placed row CacheBlend's selection may drop
  int placed = 0;                  // tokens of the placed documents not in place (the approximate part)
  int fresh = 0;                   // tokens of first-seen documents, computed in context
  int end = 0;                     // the table's end after placing: where the prompt's prefill resumes
  // Per layer: rows to keep among the candidates (-1 = no selection at that layer).
  std::vector<int> targets;
  long row_layers = 0;             // rows the step will compute for it, summed over layers (estimate)
  int candidates() const;
  // Its cost in prompt tokens of the scheduler's budget: row_layers / layers, rounded up.
  int budget_rows(int num_layers) const { return num_layers > 0 ? static_cast<int>((row_layers + num_layers - 1) / num_layers) : 0; }
};

// Builds the rows of a pending repair over `docs` (the placed and first-seen documents of a prompt,
// in order; first-seen ones have `fresh`).
struct RepairDoc {
  int start = 0, len = 0;
  bool in_place = false;  // exact where it stands: nothing to repair
  bool fresh = false;     // first seen: every row computed in context
};
PendingRepair plan_repair(std::span<const RepairDoc> docs, ReuseMode mode, const BlendParams& params, int num_layers, int end);

// What the step did for one run.
struct RepairOutcome {
  int repaired = 0;        // placed rows computed in the last layer
  int selected_first = 0;  // placed rows kept at the first selection layer
  long row_layers = 0;     // repair rows (placed + fresh) computed, summed over layers
};

// The step's hook: CacheBlend's selection per run; every other row passes.
class RepairStepHook final : public engine::LayerHook {
 public:
  explicit RepairStepHook(const engine::KvPool& pool) : pool_(pool) {}
  // The batch's SeqStep `seq` starts with `r.rows` of `table`.
  void add(int seq, const engine::BlockTable& table, const PendingRepair& r);
  bool selects() const;  // true when some run needs CacheBlend's selection (else no hook is needed)
  Status on_qkv(const engine::LayerQkv& q, engine::RowSelection* keep) override;
  RepairOutcome outcome(int seq, int num_layers) const;

 private:
  struct Seq {
    const engine::BlockTable* table = nullptr;
    const PendingRepair* repair = nullptr;
    std::vector<int> kept;  // per layer seen: candidate rows that went on
    long row_layers = 0;
  };
  const engine::KvPool& pool_;
  std::map<int, Seq> seqs_;
  std::vector<float> old_k_, old_v_, fresh_k_, fresh_v_, dev_;
};

}  // namespace ragd::pipelines
