// SpeculationCache: RaLMSpec's per-run cache of retrieved passages. Every real search of an
// iterative run adds its top hits with their stored embeddings; a speculation ranks the cached
// passages for the current query by the index's own score (inner product), so when the cache holds
// the true top-k, the speculation equals the search. With an IVF index, a search sees only the
// passages of the lists it probes: each entry keeps its own list and a speculation ranks only the
// entries of the lists the real search would probe (VectorIndex::coarse_lists), so it reproduces
// the approximate search, not an exact one. Bounded: the least recently added or returned passage
// goes first.
// Thread-safety: not thread-safe; one run's, on the scheduler thread.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "context_doc.h"

namespace ragd::pipelines {

class SpeculationCache {
 public:
  explicit SpeculationCache(size_t capacity = 256) : capacity_(capacity) {}

  // Adds (or refreshes) a passage with its embedding and its IVF list (-1: none).
  void add(const ContextDoc& doc, std::vector<float> vec, int64_t list = -1);
  // The k best cached passages for `query` (score = inner product; ties: smaller chunk id) among
  // those of the `probed` lists (empty = all), best first; fewer when the cache holds fewer.
  std::vector<ContextDoc> top_k(std::span<const float> query, int k, std::span<const int64_t> probed = {});
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    ContextDoc doc;
    std::vector<float> vec;
    int64_t list = -1;
    uint64_t stamp = 0;
  };
  size_t capacity_;
  uint64_t clock_ = 0;
  std::unordered_map<uint64_t, Entry> entries_;  // by chunk id
};

}  // namespace ragd::pipelines
