// Constrained decoding, step 3: one sequence's position in a CompiledConstraint. Each step the
// matcher gives the allowed ids (the grammar's continuations; the stop ids too once the output is
// complete); the sampler applies them (Sampler::sample's mask); the accepted token advances the
// matcher. It keeps the state after every accepted token, so a run that rolls back (speculative
// retrieval, RunState::restore) rolls the matcher back to any earlier token count.
// Thread-safety: one matcher per sequence, not thread-safe; matchers of different sequences may be
// used on different threads at once (CompiledConstraint is thread-safe).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ragd/engine/token_constraint.h"
#include "ragd/engine/token_mask.h"

namespace ragd::engine {

class ConstraintMatcher {
 public:
  // stop_ids: the ids that end the run (EOS, stop_token_ids); allowed only once the output is complete.
  ConstraintMatcher(std::shared_ptr<const CompiledConstraint> c, std::vector<int32_t> stop_ids);

  // The ids allowed as the next token; valid until the next accept / rollback. When the automaton
  // failed (DFA state limit) or no token continues the output, only the stop ids are allowed
  // (`failed()` tells).
  TokenMask mask();
  // Advances by a sampled token (not a stop id). False (state unchanged) when it is not allowed.
  bool accept(int32_t token);
  // The output is a complete value and nothing can follow it: the run ends.
  bool complete() const;
  // The output is a complete value (more may follow, e.g. digits of a number).
  bool accepting() const;
  bool failed() const { return failed_; }
  size_t num_accepted() const { return states_.size() - 1; }
  // Back to the state after the first n accepted tokens (n <= num_accepted()).
  void rollback(size_t n);

 private:
  std::shared_ptr<const CompiledConstraint> c_;
  std::vector<int32_t> stop_ids_;
  std::vector<int32_t> states_;  // states_[k]: after k accepted tokens
  std::shared_ptr<const CompiledConstraint::Mask> grammar_mask_;
  std::vector<uint64_t> buf_;    // grammar mask + stop ids
  bool failed_ = false;
};

}  // namespace ragd::engine
