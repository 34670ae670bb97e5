// ReuseStrategy: one reuse mode, whole. The planner (reuse_planner.h) does what every mode shares —
// match the path in the knowledge tree, load its lower-tier part, install the exact prefix from
// the pool / DRAM / SSD, publish computed nodes, reclaim — and hands a run's mode-specific steps to
// the strategy of its plan's mode:
//   path          the prompt as a path of tree nodes (document keys and token ends);
//   lookup_rest   after the exact match: start loading what install_rest may use (chunk KV);
//   install_rest  the part after the exact prefix (exact modes: nothing; approximate modes: the
//                 self-check, then placed chunk KV and its repair);
//   publish_rest  before the exact nodes are published (approximate modes: chunk KV to cache);
//   check_key     the self-check's key for a parameter set ("" = an exact mode, never checked);
//   auto_candidates  whether and with which parameters reuse "auto" measures the mode;
//   repair_rows / select / selects  the rows an approximate mode's repair computes (blend_step.h).
//
// Registry: one line per mode in reuse_strategy.cpp (make_reuse_strategy). Families:
// reuse_exact.cpp (none, prefix, knowledge_tree), reuse_blend.{h,cpp} (cacheblend, epic),
// reuse_auto.cpp (auto).
//
// Thread-safety: path() and lookup_rest() may run on any thread (const; they use the KvStore,
// which is thread-safe); every other call runs on the scheduler thread that owns the engine pool.
// A planner owns one instance per mode, so a strategy's members are per model.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ragd/engine/kv_cache.h"
#include "ragd/engine/model.h"
#include "ragd/kvstore/kv_store.h"
#include "ragd/pipelines/blend_fidelity.h"
#include "ragd/pipelines/executor.h"
#include "ragd/pipelines/executor_stats.h"

#include "blend_step.h"
#include "reuse_plan.h"

namespace ragd::pipelines {

class ReuseStrategy;

// What a planner shares with its strategies: the store and model it plans over, and the state
// that spans modes. Owned by the planner.
struct ReuseContext {
  kvstore::KvStore& store;
  engine::Model& model;
  engine::KvPool& pool;
  std::function<void()> on_load_done;  // a lookup's load finished (kvstore I/O thread; must not block)
  BlendCheckOptions check;             // the reuse self-check's bounds
  // On: an approximate run's repair rides in its first prefill step (blend_step.h); off: the
  // standalone repair step at admission.
  bool defer_repair = true;
  double row_layer_ms = 0;  // scheduler thread: EWMA of the repair step's time per row-layer
  std::map<std::string, std::string> verdicts;  // scheduler thread: check key -> "" or the reason
  std::vector<std::unique_ptr<ReuseStrategy>> strategies;  // by ReuseMode

  ReuseStrategy& strategy(ReuseMode m) const { return *strategies[static_cast<size_t>(m)]; }
};

// A parameter set reuse "auto" measures: the mode and its parameters (the run's BlendParams with
// the mode's own parameter set). Auto tries them cheapest first, by ascending cost_rank across
// every mode's candidates: EPIC recomputes k rows per document in every layer, CacheBlend every
// row in two layers and r of them in the rest, so EPIC k 16 = 1, EPIC k 32 = 2, CacheBlend 15 % = 3,
// CacheBlend 30 % = 4.
struct AutoCandidate {
  ReuseMode mode = ReuseMode::kNone;
  BlendParams params;
  int cost_rank = 0;
};

class ReuseStrategy {
 public:
  virtual ~ReuseStrategy() = default;

  // segments: the RAG prompt's path segments ([prefix][doc]...; empty for non-RAG prompts).
  // Fills plan->docs / ends.
  virtual void path(const ReuseContext& ctx, std::span<const int32_t> prompt,
                    std::span<const std::vector<int32_t>> segments, ReusePlan* plan) const = 0;
  // True when node 0 is the pipeline's head, shared by every scope (the other nodes then carry the
  // run's scope in their keys).
  virtual bool shares_head() const { return false; }
  // True when the mode may place KV that a full prefill would not compute (is_approximate).
  virtual bool approximate() const { return false; }

  // Lookup, after the path matched `matched` nodes (`remote`: the remote tier may hold the rest).
  virtual void lookup_rest(const ReuseContext&, ReusePlan&, std::span<const int32_t> /*prompt*/, size_t /*matched*/,
                           bool /*remote*/) const {}
  // Install, after the exact part: `table` holds nodes [0, d) of the path. ensure_free as in
  // ReusePlanner::install. May change plan.mode (auto: to the mode it chose).
  virtual void install_rest(ReuseContext&, ReusePlan&, std::span<const int32_t> /*prompt*/, size_t /*d*/,
                            engine::BlockTable& /*table*/, const std::function<bool(int)>& /*ensure_free*/,
                            Installed* /*in*/) {}
  // Publish, before the path's computed nodes are registered.
  virtual void publish_rest(ReuseContext&, ReusePlan&, const engine::BlockTable& /*table*/,
                            std::span<const int32_t> /*prompt*/) {}
  // After the step that carried plan.pending: its stats (ms = the step's time attributed to it).
  virtual void finish_repair(ReuseContext&, ReusePlan&, const RepairOutcome&, double /*ms*/) {}

  // The self-check verdict's key for `params` ("cacheblend:0.15", "epic:16"; "" = not checked).
  virtual std::string check_key(const BlendParams&) const { return ""; }
  // The parameter sets reuse "auto" measures for this mode (empty: not a candidate).
  virtual std::vector<AutoCandidate> auto_candidates(const BlendParams& /*base*/) const { return {}; }
  // usage.recompute_ratio of a run of this mode.
  virtual double usage_recompute_ratio(const BlendParams&) const { return 0.0; }
  // The mode's entries in ExecutorStats.
  virtual void stats(ExecutorStats*) const {}

  // Repair planning (plan_repair, blend_step.h). Leading rows of a placed document of `len` tokens
  // that the repair computes in every layer it runs.
  virtual int repair_rows(int len, const BlendParams&) const { return len; }
  // True when those rows are candidates of a per-layer deviation selection (select()).
  virtual bool selects() const { return false; }
  // Narrows r (its rows, candidates and per-layer targets) once every document's rows are in.
  virtual void select(PendingRepair* /*r*/, const BlendParams&, int /*num_layers*/) const {}
};

// The registry: a new strategy of `mode` (reuse_strategy.cpp, one line per mode).
std::unique_ptr<ReuseStrategy> make_reuse_strategy(ReuseMode mode);
// A process-wide instance for the mode's stateless properties (approximate(), the repair rules,
// check_key, usage_recompute_ratio); its const calls are safe from any thread.
const ReuseStrategy& reuse_strategy_rules(ReuseMode mode);

// The members, one factory each (reuse_exact.cpp, reuse_blend.cpp, reuse_auto.cpp).
std::unique_ptr<ReuseStrategy> make_no_reuse();
std::unique_ptr<ReuseStrategy> make_prefix_reuse();
std::unique_ptr<ReuseStrategy> make_knowledge_tree_reuse();
std::unique_ptr<ReuseStrategy> make_cacheblend_reuse();
std::unique_ptr<ReuseStrategy> make_epic_reuse();
std::unique_ptr<ReuseStrategy> make_auto_reuse();

// The knowledge-tree path, [system prefix][doc 1]..[doc n] one node per segment (reuse_exact.cpp);
// the approximate modes' path too (its exact part).
void knowledge_tree_path(std::span<const std::vector<int32_t>> segments, ReusePlan* plan);

// Tokens [begin, end) of the prompt (empty when the prompt is not known or shorter): a node's token
// ids for KV events.
inline std::span<const int32_t> node_tokens(std::span<const int32_t> prompt, int begin, int end) {
  if (begin < 0 || end < begin || static_cast<size_t>(end) > prompt.size()) return {};
  return prompt.subspan(static_cast<size_t>(begin), static_cast<size_t>(end - begin));
}

}  // namespace ragd::pipelines
