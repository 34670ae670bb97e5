// ReusePlanner: where a run's prompt KV comes from. The strategy of the run's reuse mode
// (reuse_strategy.h) turns the prompt into a path of nodes of the kvstore's one knowledge tree
// (pool + DRAM + SSD); the planner then
//   lookup   (retrieval thread)  matches the path and starts an asynchronous load of the part that
//                                is not in the engine pool (DRAM / SSD), never waiting for it;
//   install  (scheduler thread)  at admission, once the load is done: forks the pool part into the
//                                run's block table (shared blocks, no copy), appends the loaded
//                                nodes and registers them in the pool;
//   publish  (scheduler thread)  after the prompt's prefill: registers the newly computed nodes.
// Each step hands the mode's own part to the strategy: what to load besides the path, what to
// install after the exact prefix (approximate modes: blended chunk KV, reuse_blend.h), what to
// cache besides the path's nodes.
//
// Thread-safety: lookup() may run on any thread; install(), publish(), finish_repair() and
// reclaim() only on the scheduler thread that owns the engine pool. The KvStore is thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "ragd/engine/kv_cache.h"
#include "ragd/kvstore/kv_store.h"
#include "ragd/pipelines/blend_fidelity.h"
#include "ragd/pipelines/executor.h"
#include "ragd/pipelines/executor_stats.h"

#include "blend_step.h"
#include "reuse_plan.h"
#include "reuse_strategy.h"

namespace ragd::pipelines {

class ReusePlanner {
 public:
  // on_load_done runs on a kvstore I/O thread when a lookup's load finishes (must not block).
  // The model runs the approximate modes' chunk computations and repair steps (scheduler thread).
  ReusePlanner(kvstore::KvStore& store, engine::Model& model, std::function<void()> on_load_done);

  // Builds the path for plan->mode, matches it and starts loading the lower-tier part.
  void lookup(std::span<const int32_t> prompt, std::span<const std::vector<int32_t>> segments, ReusePlan* plan) const;
  // Installs reusable KV into `table` (empty); `prompt` is the run's prompt. ensure_free(n) makes n
  // more blocks free or says it cannot. Returns the tokens installed (the caller trims to prompt
  // length - 1).
  Installed install(ReusePlan& plan, std::span<const int32_t> prompt, engine::BlockTable& table,
                    const std::function<bool(int)>& ensure_free);
  // Registers every path node whose tokens `table` now holds and that was not reused.
  // `prompt` (the run's prompt) gives the nodes' token ids to KV events.
  void publish(ReusePlan& plan, const engine::BlockTable& table, std::span<const int32_t> prompt = {});
  // Evicts pool copies by policy until `blocks` blocks are free. False when it cannot.
  bool reclaim(int blocks);
  // On (default): an approximate run's repair rides in its first prefill step (blend_step.h) and
  // first-seen documents are computed there in context; off: the standalone repair step at
  // admission and chunk prefill of first-seen documents before it (measure the difference).
  void set_defer_repair(bool on) { ctx_.defer_repair = on; }
  // The strategies' entries in ExecutorStats (reuse "auto": its choice and that mode's fidelity).
  void stats(ExecutorStats* x) const;
  // After the step that carried plan.pending: its stats (ms = the step's time attributed to it).
  void finish_repair(ReusePlan& plan, const RepairOutcome& o, double ms);
  void set_blend_check(const BlendCheckOptions& o) { ctx_.check = o; }

 private:
  ReuseContext ctx_;  // the store, the model, the strategies (by ReuseMode) and their shared state
};

}  // namespace ragd::pipelines
