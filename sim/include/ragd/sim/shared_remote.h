// SharedRemote: the shared remote KV tier (Redis below every replica's SSD) of a simulated fleet:
// an LRU set of segment keys with a byte capacity (Redis' maxmemory with allkeys-lru). Replicas
// write behind every segment that gets a host copy and look up what their local tiers miss.
// Thread-safety: not thread-safe; the single-threaded simulation owns it.
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>

#include "ragd/common/hash.h"

namespace ragd::sim {

class SharedRemote {
 public:
  explicit SharedRemote(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

  // Stores (or refreshes) a segment; evicts least recently used ones beyond the capacity.
  void put(const Hash128& key, uint64_t bytes);
  // True (and refreshed) when the key is held.
  bool get(const Hash128& key);
  bool contains(const Hash128& key) const { return index_.count(key) != 0; }

  uint64_t used_bytes() const { return used_; }
  uint64_t capacity() const { return capacity_; }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }

 private:
  struct Entry {
    Hash128 key;
    uint64_t bytes;
  };
  uint64_t capacity_;
  uint64_t used_ = 0, hits_ = 0, misses_ = 0;
  std::list<Entry> lru_;  // front = most recent
  std::unordered_map<Hash128, std::list<Entry>::iterator, Hash128Hasher> index_;
};

}  // namespace ragd::sim
