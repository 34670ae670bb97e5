// Compiled constraints by spec, for one vocabulary: a request's schema is compiled (grammar.h) the
// first time it is seen and its CompiledConstraint (with the DFA states and token masks it has
// built since) is shared by every later request with the same spec. Bounded: the least recently
// used entry goes beyond `capacity` (runs holding it keep it alive).
// Thread-safety: thread-safe (one mutex over the map; compilation runs outside it).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "ragd/common/status.h"
#include "ragd/engine/constraint_spec.h"
#include "ragd/engine/token_constraint.h"

namespace ragd::engine {

class ConstraintCache {
 public:
  explicit ConstraintCache(std::shared_ptr<const TokenVocabulary> vocab, size_t capacity = 32);
  // InvalidArgument naming the problem when the spec does not compile (compile_grammar).
  Result<std::shared_ptr<const CompiledConstraint>> get(const ConstraintSpec& spec);

  struct Stats {
    uint64_t hits = 0, misses = 0;
    size_t entries = 0;
    double compile_ms = 0;  // total grammar compile time of the misses
  };
  Stats stats() const;
  const std::shared_ptr<const TokenVocabulary>& vocabulary() const { return vocab_; }

 private:
  using Lru = std::list<std::pair<std::string, std::shared_ptr<const CompiledConstraint>>>;
  std::shared_ptr<const TokenVocabulary> vocab_;
  size_t capacity_;
  mutable std::mutex mu_;
  Lru lru_;                                          // guarded by mu_; front = most recent
  std::unordered_map<std::string, Lru::iterator> index_;  // guarded by mu_
  Stats stats_;                                      // guarded by mu_
};

}  // namespace ragd::engine
