// HbmCache: reusable KV kept inside the engine's KvPool (the HBM tier).
//
// Two kinds of entries, both holding a BlockTable that shares blocks (ref counts) with the
// sequences that produced or reuse them, so a hit costs no copy:
//   - document paths (knowledge tree): an entry per node key (the content-hash chain
//     key_i = H(key_{i-1}, tokens of segment i)), holding the KV of the whole token prefix up to
//     the end of segment i. Since the key commits to every token before it, a hit is exact KV at
//     exactly the same positions.
//   - token prefixes (prefix mode): the prompt KV of recent sequences, matched by longest common
//     token prefix (block granularity is not required: the partial last block is shared and
//     copied on the next write).
// Eviction is LRU over unpinned entries, leaves first for paths (a node with cached children is
// kept while they are).
//
// Thread-safety: NOT thread-safe; owned by the executor's scheduler thread with the KvPool.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "ragd/common/hash.h"
#include "ragd/engine/kv_cache.h"

namespace ragd::pipelines {

struct HbmCacheStats {
  long path_hits = 0, path_misses = 0, prefix_hits = 0, prefix_misses = 0;
  long inserts = 0, evictions = 0;
  long hit_tokens = 0;
  size_t path_entries = 0, prefix_entries = 0;
};

class HbmCache {
 public:
  explicit HbmCache(engine::KvPool& pool, size_t max_prefix_entries = 64)
      : pool_(pool), max_prefix_entries_(max_prefix_entries) {}
  ~HbmCache();
  HbmCache(const HbmCache&) = delete;
  HbmCache& operator=(const HbmCache&) = delete;

  // Deepest i such that keys[0..i] are all cached; returns i + 1 (0 = miss) and, when > 0, the
  // entry's table in *table (valid until the next mutation). Touches the matched entries.
  int match_path(std::span<const Hash128> keys, const engine::BlockTable** table);
  // Inserts a node holding KV of `num_tokens` prefix tokens, shared from `src` (fork_prefix).
  // parent: the previous key on the path (ignored when is_root). No-op when present.
  void insert_path(const Hash128& key, const Hash128& parent, bool is_root, const engine::BlockTable& src,
                   int num_tokens);
  bool contains_path(const Hash128& key) const { return paths_.count(key) != 0; }

  // Longest common prefix with a cached sequence; *table as above. Returns the token count.
  int match_prefix(std::span<const int32_t> tokens, const engine::BlockTable** table);
  void insert_prefix(std::span<const int32_t> tokens, const engine::BlockTable& src);

  // Evicts one entry (LRU, unpinned, leaf first). False when nothing can be evicted.
  bool evict_one();
  void clear();
  HbmCacheStats stats() const;

 private:
  struct PathEntry {
    engine::BlockTable table;
    Hash128 parent;
    bool is_root = false;
    int children = 0;
    std::list<Hash128>::iterator lru;
  };
  struct PrefixEntry {
    std::vector<int32_t> tokens;
    engine::BlockTable table;
  };
  engine::KvPool& pool_;
  size_t max_prefix_entries_;
  std::unordered_map<Hash128, PathEntry, Hash128Hasher> paths_;
  std::list<Hash128> path_lru_;      // front = most recent
  std::list<PrefixEntry> prefixes_;  // front = most recent
  HbmCacheStats stats_;
};

}  // namespace ragd::pipelines
