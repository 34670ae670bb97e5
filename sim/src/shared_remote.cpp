#include "ragd/sim/shared_remote.h"

namespace ragd::sim {

void SharedRemote::put(const Hash128& key, uint64_t bytes) {
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return;
  }
  if (bytes > capacity_) return;
  lru_.push_front({key, bytes});
  index_[key] = lru_.begin();
  used_ += bytes;
  while (used_ > capacity_) {
    const Entry& e = lru_.back();
    used_ -= e.bytes;
    index_.erase(e.key);
    lru_.pop_back();
  }
}

bool SharedRemote::get(const Hash128& key) {
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++misses_;
    return false;
  }
  ++hits_;
  lru_.splice(lru_.begin(), lru_, it->second);
  return true;
}

}  // namespace ragd::sim
