// ContextDoc: one retrieved passage as a run's prompt holds it (chunk id, its tokens as laid out,
// its citation), and the prompt order of a set of them. Shared by retrieval, reranking, speculative
// prefill and iterative RAG.
// Thread-safety: plain data.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ragd/pipelines/executor.h"

namespace ragd::pipelines {

// One passage of a run's context.
struct ContextDoc {
  uint64_t chunk_id = 0;
  std::vector<int32_t> tokens;  // as laid out in the prompt
  Source source;
};

// Prompt order: by chunk id, so that the same set of passages always gives the same prompt.
inline void sort_prompt_order(std::vector<ContextDoc>& docs) {
  std::sort(docs.begin(), docs.end(), [](const ContextDoc& a, const ContextDoc& b) { return a.chunk_id < b.chunk_id; });
}
// Leaves out the passages (in rank order, best first) whose score is below `ratio` times the first
// one's; the first always stays. Nothing when ratio <= 0 or the first score is not positive.
inline void keep_above_score_ratio(std::vector<ContextDoc>& docs, double ratio) {
  if (ratio <= 0 || docs.empty() || !(docs.front().source.score > 0)) return;
  const double floor = ratio * docs.front().source.score;
  size_t kept = 1;
  for (size_t i = 1; i < docs.size(); ++i)
    if (docs[i].source.score >= floor) {
      if (kept != i) docs[kept] = std::move(docs[i]);
      ++kept;
    }
  docs.resize(kept);
}
// The passages' chunk ids, in their order.
inline std::vector<uint64_t> chunk_ids(const std::vector<ContextDoc>& docs) {
  std::vector<uint64_t> v;
  v.reserve(docs.size());
  for (const auto& d : docs) v.push_back(d.chunk_id);
  return v;
}

}  // namespace ragd::pipelines
