#include "ragd/pipelines/hbm_cache.h"

#include <algorithm>

namespace ragd::pipelines {

HbmCache::~HbmCache() { clear(); }

int HbmCache::match_path(std::span<const Hash128> keys, const engine::BlockTable** table) {
  int depth = 0;
  PathEntry* last = nullptr;
  for (const Hash128& k : keys) {
    auto it = paths_.find(k);
    if (it == paths_.end()) break;
    last = &it->second;
    path_lru_.splice(path_lru_.begin(), path_lru_, it->second.lru);
    ++depth;
  }
  if (depth > 0) {
    ++stats_.path_hits;
    stats_.hit_tokens += last->table.num_tokens();
    *table = &last->table;
  } else {
    ++stats_.path_misses;
    *table = nullptr;
  }
  return depth;
}

void HbmCache::insert_path(const Hash128& key, const Hash128& parent, bool is_root, const engine::BlockTable& src,
                           int num_tokens) {
  if (paths_.count(key)) return;
  if (!is_root) {
    auto p = paths_.find(parent);
    if (p == paths_.end()) return;  // parent evicted meanwhile: keep the tree prefix-closed
    ++p->second.children;
  }
  PathEntry e;
  e.table = src.fork_prefix(pool_, num_tokens);
  e.parent = parent;
  e.is_root = is_root;
  path_lru_.push_front(key);
  e.lru = path_lru_.begin();
  paths_.emplace(key, std::move(e));
  ++stats_.inserts;
}

int HbmCache::match_prefix(std::span<const int32_t> tokens, const engine::BlockTable** table) {
  int best = 0;
  auto best_it = prefixes_.end();
  for (auto it = prefixes_.begin(); it != prefixes_.end(); ++it) {
    const size_t n = std::min<size_t>(tokens.size(), it->tokens.size());
    size_t i = 0;
    while (i < n && tokens[i] == it->tokens[i]) ++i;
    if (static_cast<int>(i) > best) {
      best = static_cast<int>(i);
      best_it = it;
    }
  }
  if (best_it == prefixes_.end()) {
    ++stats_.prefix_misses;
    *table = nullptr;
    return 0;
  }
  prefixes_.splice(prefixes_.begin(), prefixes_, best_it);
  ++stats_.prefix_hits;
  stats_.hit_tokens += best;
  *table = &prefixes_.front().table;
  return best;
}

void HbmCache::insert_prefix(std::span<const int32_t> tokens, const engine::BlockTable& src) {
  // An entry that is a prefix of the new one is superseded.
  for (auto it = prefixes_.begin(); it != prefixes_.end();) {
    if (it->tokens.size() <= tokens.size() && std::equal(it->tokens.begin(), it->tokens.end(), tokens.begin())) {
      it->table.release(pool_);
      it = prefixes_.erase(it);
    } else if (it->tokens.size() >= tokens.size() && std::equal(tokens.begin(), tokens.end(), it->tokens.begin())) {
      prefixes_.splice(prefixes_.begin(), prefixes_, it);
      return;  // already covered
    } else {
      ++it;
    }
  }
  PrefixEntry e;
  e.tokens.assign(tokens.begin(), tokens.end());
  e.table = src.fork_prefix(pool_, static_cast<int>(tokens.size()));
  prefixes_.push_front(std::move(e));
  ++stats_.inserts;
  while (prefixes_.size() > max_prefix_entries_) {
    prefixes_.back().table.release(pool_);
    prefixes_.pop_back();
    ++stats_.evictions;
  }
}

bool HbmCache::evict_one() {
  // Prefix entries and path leaves compete; take the older of the two LRU candidates. Path LRU
  // order is approximate across kinds: prefixes go first when both exist (they are recreated by
  // every finished prompt, paths only by retrieval hits).
  if (!prefixes_.empty()) {
    prefixes_.back().table.release(pool_);
    prefixes_.pop_back();
    ++stats_.evictions;
    return true;
  }
  for (auto it = path_lru_.rbegin(); it != path_lru_.rend(); ++it) {
    auto e = paths_.find(*it);
    if (e->second.children > 0) continue;
    if (!e->second.is_root) {
      auto p = paths_.find(e->second.parent);
      if (p != paths_.end()) --p->second.children;
    }
    e->second.table.release(pool_);
    path_lru_.erase(e->second.lru);
    paths_.erase(e);
    ++stats_.evictions;
    return true;
  }
  return false;
}

void HbmCache::clear() {
  for (auto& [k, e] : paths_) e.table.release(pool_);
  paths_.clear();
  path_lru_.clear();
  for (auto& p : prefixes_) p.table.release(pool_);
  prefixes_.clear();
}

HbmCacheStats HbmCache::stats() const {
  HbmCacheStats s = stats_;
  s.path_entries = paths_.size();
  s.prefix_entries = prefixes_.size();
  return s;
}

}  // namespace ragd::pipelines
