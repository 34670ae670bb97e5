// The exact reuse modes: none, prefix, knowledge_tree. Only their paths differ; what the path
// matches is installed and published by the planner, and nothing comes after it.
#include <algorithm>

#include "ragd/kvstore/keys.h"

#include "reuse_strategy.h"

namespace ragd::pipelines {

namespace {

class NoReuse final : public ReuseStrategy {
 public:
  void path(const ReuseContext&, std::span<const int32_t>, std::span<const std::vector<int32_t>>,
            ReusePlan*) const override {}
};

// The prompt in chunks of the pool's block size: node i holds tokens [i * chunk, (i + 1) * chunk);
// the last node holds the remainder (shorter), so a repeated prompt is found whole and a shared
// token prefix at chunk granularity.
class PrefixReuse final : public ReuseStrategy {
 public:
  void path(const ReuseContext& ctx, std::span<const int32_t> prompt, std::span<const std::vector<int32_t>>,
            ReusePlan* p) const override {
    const size_t chunk = static_cast<size_t>(std::max(1, ctx.pool.layout().block_size));
    for (size_t at = 0; at < prompt.size(); at += chunk) {
      const size_t n = std::min(chunk, prompt.size() - at);
      p->docs.push_back(kvstore::doc_key(prompt.subspan(at, n)));
      p->ends.push_back(static_cast<int>(at + n));
    }
  }
};

// [system prefix][doc 1]..[doc n]: one node per segment; a document's KV is reused exactly when the
// same documents precede it.
class KnowledgeTreeReuse final : public ReuseStrategy {
 public:
  void path(const ReuseContext&, std::span<const int32_t>, std::span<const std::vector<int32_t>> segs,
            ReusePlan* p) const override {
    knowledge_tree_path(segs, p);
  }
  bool shares_head() const override { return true; }
};

}  // namespace

void knowledge_tree_path(std::span<const std::vector<int32_t>> segs, ReusePlan* p) {
  int end = 0;
  for (const auto& s : segs) {
    if (s.empty()) break;  // a node needs tokens; the path stops at an empty segment
    end += static_cast<int>(s.size());
    p->docs.push_back(kvstore::doc_key(s));
    p->ends.push_back(end);
  }
}

std::unique_ptr<ReuseStrategy> make_no_reuse() { return std::make_unique<NoReuse>(); }
std::unique_ptr<ReuseStrategy> make_prefix_reuse() { return std::make_unique<PrefixReuse>(); }
std::unique_ptr<ReuseStrategy> make_knowledge_tree_reuse() { return std::make_unique<KnowledgeTreeReuse>(); }

}  // namespace ragd::pipelines
