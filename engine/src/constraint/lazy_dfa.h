// A DFA over a ByteNfa, built lazily: a DFA state is an epsilon-closed set of NFA nodes, created
// the first time a transition leads to it; transitions are over byte classes (bytes no NFA edge
// tells apart share a class), filled on first use.
// Thread-safety: not thread-safe (CompiledConstraint guards it).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "ragd/engine/grammar.h"

namespace ragd::engine::constraint {

class LazyDfa {
 public:
  static constexpr int32_t kDead = -1;
  LazyDfa(const ByteNfa& nfa, size_t max_states);

  // State 0 is the start.
  // The state after `byte`, kDead when no NFA node moves on it. GrammarError past max_states.
  int32_t next(int32_t s, uint8_t byte) {
    const size_t at = static_cast<size_t>(s) * ncls_ + cls_[byte];
    const int32_t t = trans_[at];
    return t != kUnknown ? t : build(s, byte);
  }
  // Byte classes: bytes no NFA edge tells apart; next_class(s, c) = next(s, any byte of class c).
  size_t num_classes() const { return ncls_; }
  int32_t next_class(int32_t s, size_t c) { return next(s, class_byte_[c]); }
  bool accepting(int32_t s) const { return (flags_[static_cast<size_t>(s)] & kAccepting) != 0; }
  bool can_continue(int32_t s) const { return (flags_[static_cast<size_t>(s)] & kContinues) != 0; }
  size_t num_states() const { return sets_.size(); }

 private:
  static constexpr int32_t kUnknown = -2;
  static constexpr uint8_t kAccepting = 1, kContinues = 2;
  int32_t build(int32_t s, uint8_t byte);
  int32_t intern(std::vector<int32_t>& set);  // set: epsilon-closed, sorted

  const ByteNfa& nfa_;
  size_t max_states_;
  std::array<uint8_t, 256> cls_{};
  std::vector<uint8_t> class_byte_;  // a byte of each class
  size_t ncls_ = 1;
  std::vector<int32_t> trans_;  // [state * ncls_ + class]
  std::vector<std::vector<int32_t>> sets_;
  std::vector<uint8_t> flags_;
  std::unordered_map<std::string, int32_t> index_;  // a set's ids as bytes -> state
  std::vector<char> seen_;                          // scratch, all 0 between calls
};

}  // namespace ragd::engine::constraint
