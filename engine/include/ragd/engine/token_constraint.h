// Constrained decoding, step 2: a Grammar (grammar.h) bound to a tokenizer's vocabulary.
//
// TokenVocabulary holds every token's bytes in a trie (byte-level BPE: 152 k tokens for Qwen2).
// CompiledConstraint turns the grammar's NFA into a DFA lazily (a state = a set of NFA nodes,
// built the first time a byte leads to it, over byte classes), and computes the token mask of a
// DFA state by one walk of the trie that prunes every subtree whose prefix the DFA rejects. A mask
// depends only on the DFA state, so it is computed once per state and memoised: a JSON schema
// visits a bounded set of states (inside a string every character leads back to the same state),
// so after the first requests of a schema nearly every step is a lookup. This is the
// context-independent precomputation of XGrammar done lazily; the grammar kinds ragd compiles are
// regular (recursion is expanded to a bounded depth), so no token is context-dependent.
// States that differ only beyond the longest token share a mask: a state's class is its behaviour
// over every byte string up to the vocabulary's longest token (dead or alive after each), computed
// by bounded partition refinement (exact, interned), and masks are memoised by class. The states of
// a long bounded string (`maxLength: 10000`) that still have room for the longest token all fall in
// one class, so they cost one trie walk instead of one each (XGrammar issues #465 / #852) — when
// the refinement stays within its budget per state: single-byte repetitions (`[a-z0-9]{0,5000}`)
// do; a JSON string's characters (multi-byte UTF-8, escapes) under a 128-byte longest token do
// not, and a constraint whose states mostly go over the budget stops classifying (masks by state).
//
// Special tokens (Tokenizer::is_special) and tokens with no bytes are never allowed by a grammar;
// the caller (ConstraintMatcher) adds the stop ids when the output is complete.
//
// Memory: a mask is one bit per id (19 KB at 152 k ids); a compiled constraint keeps at most 32 MB
// of them (then starts over) and its DFA at most 200 k states.
// Thread-safety: TokenVocabulary is immutable. CompiledConstraint is thread-safe: its DFA and its
// mask memo are guarded by one mutex (held while a missing mask is computed: sequences of the same
// schema wait for it rather than compute it twice); masks are returned as shared immutable vectors.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/engine/grammar.h"
#include "ragd/engine/tokenizer.h"

namespace ragd::engine {

namespace constraint {
class LazyDfa;
}

class TokenVocabulary {
 public:
  // A trie node, in depth-first preorder: the node's byte, its depth (1 = a first byte), the index
  // just past its subtree, and the ids whose bytes end here (tokens[tok_begin, tok_end)).
  struct TrieNode {
    uint8_t byte = 0;
    uint16_t depth = 0;
    uint32_t end = 0;
    uint32_t tok_begin = 0, tok_end = 0;
  };

  static std::shared_ptr<const TokenVocabulary> from_tokenizer(const Tokenizer& tok);
  // bytes[id] = the token's bytes; "" = never allowed (special tokens). For tests.
  static std::shared_ptr<const TokenVocabulary> from_bytes(std::vector<std::string> bytes, int leading_strip = 0);

  int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  // Spaces the decoder strips from the first token (Tokenizer::leading_strip).
  int leading_strip() const { return leading_strip_; }
  const std::vector<TrieNode>& trie() const { return trie_; }
  const std::vector<int32_t>& trie_tokens() const { return trie_tokens_; }
  int max_depth() const { return max_depth_; }

 private:
  TokenVocabulary(std::vector<std::string> bytes, int leading_strip);
  std::vector<std::string> bytes_;
  int leading_strip_ = 0;
  std::vector<TrieNode> trie_;
  std::vector<int32_t> trie_tokens_;
  int max_depth_ = 0;
};

class CompiledConstraint {
 public:
  using Mask = std::vector<uint64_t>;  // bit id % 64 of word id / 64
  static constexpr int32_t kRejected = -1;

  CompiledConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocab);
  ~CompiledConstraint();
  CompiledConstraint(const CompiledConstraint&) = delete;
  CompiledConstraint& operator=(const CompiledConstraint&) = delete;

  const Grammar& grammar() const { return *grammar_; }
  const TokenVocabulary& vocabulary() const { return *vocab_; }
  int32_t start_state() const { return 0; }

  // The ids whose bytes (leading spaces stripped as the decoder strips them from the first token,
  // when strip_leading) keep `state` alive. ResourceExhausted when the DFA outgrows its state limit.
  Result<std::shared_ptr<const Mask>> mask(int32_t state, bool strip_leading = false) const;
  // The state after `bytes`; kRejected when the automaton rejects them.
  int32_t advance(int32_t state, std::string_view bytes) const;
  // The output so far is complete / can be continued by at least one byte.
  bool accepting(int32_t state) const;
  bool can_continue(int32_t state) const;

  struct Stats {
    size_t dfa_states = 0;
    size_t masks_computed = 0;  // trie walks
    size_t mask_hits = 0;       // memo lookups that found the mask
    double mask_ms = 0;         // time in trie walks and state classes
    size_t classes = 0;         // distinct state classes (masks are memoised by class)
    size_t unclassed = 0;       // states whose class went over the budget
  };
  Stats stats() const;

 private:
  std::shared_ptr<const Mask> compute_locked(int32_t state, bool strip_leading) const;
  // The state's class up to the longest token (kNoClass when over the budget); mu_ held.
  int32_t class_locked(int32_t state) const;
  int32_t refine_locked(int32_t state, int depth, size_t& budget) const;
  void reset_classes_locked() const;
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  mutable std::mutex mu_;
  mutable std::unique_ptr<constraint::LazyDfa> dfa_;                        // guarded by mu_
  mutable std::unordered_map<int64_t, std::shared_ptr<const Mask>> memo_;   // guarded by mu_; key: state * 2 + strip
  mutable Stats stats_;                                                     // guarded by mu_
  // Classes (guarded by mu_): (state, depth) -> class id; signature -> class id; state -> its class
  // at the longest token's depth (kNoClass: over the budget).
  mutable std::unordered_map<int64_t, int32_t> class_at_;
  mutable std::unordered_map<std::string, int32_t> class_ids_;
  mutable std::unordered_map<int32_t, int32_t> state_class_;
  mutable size_t class_failures_ = 0;
  mutable bool classes_off_ = false;
};

}  // namespace ragd::engine
