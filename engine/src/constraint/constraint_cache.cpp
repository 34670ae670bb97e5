#include "ragd/engine/constraint_cache.h"

#include <chrono>

namespace ragd::engine {

ConstraintCache::ConstraintCache(std::shared_ptr<const TokenVocabulary> vocab, size_t capacity)
    : vocab_(std::move(vocab)), capacity_(capacity == 0 ? 1 : capacity) {}

Result<std::shared_ptr<const CompiledConstraint>> ConstraintCache::get(const ConstraintSpec& spec) {
  const std::string key = spec.cache_key();
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++stats_.hits;
      return it->second->second;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  Result<std::shared_ptr<const Grammar>> g = compile_grammar(spec);
  if (!g.ok()) {
    if (spec.origin.empty()) return g.status();
    return Status(g.status().code(), spec.origin + ": " + g.status().message());
  }
  auto c = std::make_shared<const CompiledConstraint>(*g, vocab_);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lk(mu_);
  ++stats_.misses;
  stats_.compile_ms += ms;
  auto it = index_.find(key);
  if (it != index_.end()) return it->second->second;  // compiled meanwhile by another thread: keep one
  lru_.emplace_front(key, c);
  index_[key] = lru_.begin();
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return std::shared_ptr<const CompiledConstraint>(c);
}

ConstraintCache::Stats ConstraintCache::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  Stats s = stats_;
  s.entries = lru_.size();
  return s;
}

}  // namespace ragd::engine
