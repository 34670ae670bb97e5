// BlendReuse: the approximate modes (cacheblend, epic; auto builds on it). Path: the knowledge
// tree's. After its exact part, every further document's chunk KV — from the chunk cache, or
// computed on its own after the prompt head and cached — is placed at its position and the placed
// documents are repaired by a sparse recompute step (kv_blend.h), by default riding in the run's
// first prefill step (blend_step.h). An approximate run publishes only exact nodes: blended KV
// never enters the tree. Its first document after the head is exact where it stands, so a run that
// computed it also caches it as a chunk.
//
// Before a mode and parameter set is first used with a model, the reuse self-check measures it on
// the run's documents in orders it does not have (BlendCheckOptions); a failed verdict serves exact
// reuse with the reason in plan.note.
//
// The members differ in their repair rows (repair_rows / selects / select), their self-check key
// and their auto candidates. Thread-safety: as ReuseStrategy.
#pragma once

#include <string>
#include <vector>

#include "reuse_strategy.h"

namespace ragd::pipelines {

class BlendReuse : public ReuseStrategy {
 public:
  void path(const ReuseContext&, std::span<const int32_t>, std::span<const std::vector<int32_t>> segments,
            ReusePlan* p) const override {
    knowledge_tree_path(segments, p);
  }
  bool shares_head() const override { return true; }
  bool approximate() const override { return true; }
  // Loads the chunk KV of the documents after the exact part: local hits, then the remote tier's.
  void lookup_rest(const ReuseContext& ctx, ReusePlan& p, std::span<const int32_t> prompt, size_t matched,
                   bool remote) const override;
  void install_rest(ReuseContext& ctx, ReusePlan& p, std::span<const int32_t> prompt, size_t d,
                    engine::BlockTable& table, const std::function<bool(int)>& ensure_free, Installed* in) override;
  // Caches the chunk KV of a deferred repair's first-seen documents and of the first document.
  void publish_rest(ReuseContext& ctx, ReusePlan& p, const engine::BlockTable& table,
                    std::span<const int32_t> prompt) override;
  void finish_repair(ReuseContext& ctx, ReusePlan& p, const RepairOutcome& o, double ms) override;

 protected:
  // Whether this run may blend (false: plan.note says why it serves exact reuse). The members:
  // the self-check; auto: its candidacy, which may set plan.mode / blend to the mode it chose.
  virtual bool admit(ReuseContext& ctx, ReusePlan& p, std::span<const int32_t> prompt);
  // The self-check verdict for plan's mode and parameters ("" = approximate reuse may be used),
  // measured on this run's documents the first time.
  std::string self_check(ReuseContext& ctx, const ReusePlan& p, std::span<const int32_t> prompt) const;
  // The run's documents in orders it does not have (the self-check's cases).
  static std::vector<BlendCase> reorder_cases(const ReusePlan& p, std::span<const int32_t> prompt);

 private:
  // Places docs [d, n) after the exact part and repairs them (plan.mode's rows), or gives up with
  // plan.note set and `table` back at the exact part.
  void blend(ReuseContext& ctx, ReusePlan& p, std::span<const int32_t> prompt, size_t d, engine::BlockTable& table,
             const std::function<bool(int)>& ensure_free, Installed* in) const;
  // blend() with the repair deferred to the run's first prefill step (blend_step.h).
  void blend_deferred(ReuseContext& ctx, ReusePlan& p, size_t d, std::span<const size_t> missing,
                      std::span<const kvstore::KvData> kv, const std::vector<std::optional<kvstore::Tier>>& src,
                      engine::BlockTable& table, const std::function<bool(int)>& ensure_free, Installed* in) const;
  // Computes and caches the chunk KV of the first-seen documents of a deferred repair.
  void publish_pending_chunks(ReuseContext& ctx, ReusePlan& p, const engine::BlockTable& table,
                              std::span<const int32_t> prompt) const;
  // Caches the KV of path node 1 (the first document) as a chunk when `table` computed it right
  // after the head.
  void publish_first_chunk(ReuseContext& ctx, const ReusePlan& p, const engine::BlockTable& table,
                           std::span<const int32_t> prompt) const;
};

}  // namespace ragd::pipelines
