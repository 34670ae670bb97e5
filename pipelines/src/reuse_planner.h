// ReusePlanner: where a run's prompt KV comes from. One strategy per reuse mode turns the prompt
// into a path of nodes of the kvstore's one knowledge tree (pool + DRAM + SSD); the planner then
//   lookup   (retrieval thread)  matches the path and starts an asynchronous load of the part that
//                                is not in the engine pool (DRAM / SSD), never waiting for it;
//   install  (scheduler thread)  at admission, once the load is done: forks the pool part into the
//                                run's block table (shared blocks, no copy), appends the loaded
//                                nodes and registers them in the pool;
//   publish  (scheduler thread)  after the prompt's prefill: registers the newly computed nodes.
//
// Strategies: none (empty path), prefix (the prompt in chunks of block_size tokens, so a shared
// token prefix is found at chunk granularity), knowledge_tree ([system prefix][doc 1]..[doc n]:
// a document's KV is reused exactly when the same documents precede it), cacheblend / epic (the
// knowledge-tree path; after its exact part, every further document's chunk KV — from the chunk
// cache, or computed on its own after the prompt head and cached — is placed at its position and
// the placed documents are repaired by a sparse recompute step, kv_blend.h). An approximate run
// publishes only exact nodes: blended KV never enters the tree. Its first document after the head
// is exact where it stands, so a run that computed it also caches it as a chunk.
//
// Thread-safety: lookup() may run on any thread; install(), publish() and reclaim() only on the
// scheduler thread that owns the engine pool. The KvStore is thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ragd/common/hash.h"
#include "ragd/engine/kv_cache.h"
#include "ragd/kvstore/kv_store.h"
#include "ragd/pipelines/executor.h"

#include "ragd/pipelines/blend_fidelity.h"
#include "ragd/pipelines/kv_blend.h"

#include "blend_step.h"

namespace ragd::pipelines {

// One run's reuse state, carried from lookup to publish.
struct ReusePlan {
  ReuseMode mode = ReuseMode::kNone;
  std::string scope;                     // KV key scope (tenant + cache_salt, kvstore::kv_scope; "" = shared)
  // The scope the tree path is keyed under: `scope`, or "" when the head is shared (knowledge-tree
  // paths: their documents then carry `scope` in their doc keys, kvstore::scoped_doc_key).
  std::string tree_scope;
  std::vector<Hash128> docs;             // path node document keys
  std::vector<int> ends;                 // cumulative token end of each node
  std::shared_ptr<kvstore::LoadHandle> load;  // nodes [load_from, ...) coming up from DRAM / SSD / remote
  size_t load_from = 0;
  kvstore::Pin pin;                      // keeps the matched nodes while they load
  int hint_tokens = 0;                   // cached tokens seen at lookup (scheduler ordering)
  size_t installed_nodes = 0;            // nodes reused at the last admission
  bool published = false;
  // Approximate modes (cacheblend / epic).
  BlendParams blend;
  std::shared_ptr<kvstore::LoadHandle> chunk_load;  // chunk-cache hits coming up from DRAM / SSD
  std::vector<size_t> chunk_nodes;                  // path node of each chunk_load entry
  kvstore::Pin chunk_pin;
  bool approximate = false;  // the last admission placed blended KV
  BlendStats blended;        // what it did
  std::string note;          // why an approximate run served exact reuse instead ("" = it did not)
  std::string auto_note;     // reuse "auto": the mode it chose and that mode's measured fidelity
  // Deferred repair (the default): what the run's first prefill step computes besides the prompt's
  // rest (blend_step.h), and the first-seen documents (path nodes) whose chunk KV publish() computes.
  std::optional<PendingRepair> pending;
  std::vector<size_t> pending_chunks;

  // True when install() may run (no load, or the loads finished).
  bool ready() const { return (!load || load->done()) && (!chunk_load || chunk_load->done()); }
};

struct Installed {
  int tokens = 0;  // KV tokens now in the run's table
  kvstore::TierCounts from;  // where the reused ones came from (tokens per tier)
  int computed = 0;  // tokens computed during installation (chunks seen first, blend repairs)
};

// A reuse mode's path over a prompt.
class ReuseStrategy {
 public:
  virtual ~ReuseStrategy() = default;
  // segments: the RAG prompt's path segments ([prefix][doc]...; empty for non-RAG prompts).
  virtual void path(std::span<const int32_t> prompt, std::span<const std::vector<int32_t>> segments,
                    ReusePlan* plan) const = 0;
};
std::unique_ptr<ReuseStrategy> make_reuse_strategy(ReuseMode mode, int chunk_tokens);

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
  void set_defer_repair(bool on) { defer_repair_ = on; }
  // reuse "auto": the last choice ("epic:16", "cacheblend:0.15", ..., "exact"; "" = none yet) and
  // the chosen mode's self-check fidelity.
  const std::string& auto_choice() const { return auto_choice_; }
  const Fidelity& auto_fidelity() const { return auto_fidelity_; }
  // After the step that carried plan.pending: its stats (ms = the step's time attributed to it).
  void finish_repair(ReusePlan& plan, const RepairOutcome& o, double ms);
  void set_blend_check(const BlendCheckOptions& o) { check_ = o; }

 private:
  // The approximate part of install(): docs [d, n) after the exact part.
  void blend(ReusePlan& plan, std::span<const int32_t> prompt, size_t d, engine::BlockTable& table,
             const std::function<bool(int)>& ensure_free, Installed* in);
  // blend() with the repair deferred to the run's first prefill step (blend_step.h).
  void blend_deferred(ReusePlan& plan, size_t d, std::span<const size_t> missing,
                      std::span<const kvstore::KvData> kv, const std::vector<std::optional<kvstore::Tier>>& src,
                      engine::BlockTable& table, const std::function<bool(int)>& ensure_free, Installed* in);
  // Computes and caches the chunk KV of the first-seen documents of a deferred repair.
  void publish_pending_chunks(ReusePlan& plan, const engine::BlockTable& table, std::span<const int32_t> prompt);
  // Caches the KV of path node 1 (the first document) as a chunk when `table` computed it right
  // after the head.
  void publish_first_chunk(const ReusePlan& plan, const engine::BlockTable& table, std::span<const int32_t> prompt);
  // The self-check verdict for plan's mode and parameters ("" = approximate reuse may be used),
  // measured on this run's documents the first time.
  std::string self_check(const ReusePlan& plan, std::span<const int32_t> prompt);
  // The self-check verdict's key: the approximate mode and its parameter.
  static std::string check_key(const ReusePlan& plan);

  kvstore::KvStore& store_;
  engine::Model& model_;
  engine::KvPool& pool_;
  std::function<void()> on_load_done_;
  std::vector<std::unique_ptr<ReuseStrategy>> strategies_;  // by ReuseMode
  BlendCheckOptions check_;
  bool defer_repair_ = true;
  // reuse "auto": picks the mode (sets plan.mode / blend); false = exact (plan.note says why).
  bool resolve_auto(ReusePlan& plan, std::span<const int32_t> prompt);
  // The run's documents in orders it does not have (the self-check's cases).
  static std::vector<BlendCase> reorder_cases(const ReusePlan& plan, std::span<const int32_t> prompt);
  // reuse "auto": every candidate measured on the first kAutoRuns blending runs, then decided once.
  static constexpr int kAutoRuns = 4;
  std::map<std::string, std::vector<Fidelity>> auto_samples_;
  int auto_runs_ = 0;
  bool auto_decided_ = false;
  std::string auto_choice_, auto_why_;
  Fidelity auto_fidelity_;
  std::map<std::string, std::string> verdicts_;
  double row_layer_ms_ = 0;  // scheduler thread: EWMA of the repair step's time per row-layer  // scheduler thread: "mode:param" -> "" or the reason
};

}  // namespace ragd::pipelines
