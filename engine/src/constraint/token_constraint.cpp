// TokenVocabulary (the vocabulary's trie) and CompiledConstraint (lazy DFA + memoised masks).
#include "ragd/engine/token_constraint.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "lazy_dfa.h"
#include "nfa_builder.h"

namespace ragd::engine {

namespace {
constexpr size_t kMaxDfaStates = 200'000;
// Memoised masks per compiled constraint, in bytes (1,680 masks of a 152 k vocabulary): past it the
// memo starts over (the states met since are computed again).
constexpr size_t kMaxMemoBytes = size_t{32} << 20;
// State classes: refinement steps a new state may take, classes kept before they start over, and
// failures after which a constraint stops classifying (its states are too varied to share masks).
constexpr size_t kClassBudget = 2048;
constexpr size_t kMaxClasses = 400'000;
constexpr size_t kMaxClassFailures = 8;
constexpr int32_t kNoClass = -2;
constexpr int32_t kDeadClass = -1;
struct OverBudget {};
}  // namespace

std::shared_ptr<const TokenVocabulary> TokenVocabulary::from_tokenizer(const Tokenizer& tok) {
  std::vector<std::string> bytes(static_cast<size_t>(tok.vocab_size()));
  for (int32_t id = 0; id < tok.vocab_size(); ++id)
    if (!tok.is_special(id)) bytes[static_cast<size_t>(id)] = tok.token_bytes(id);
  return from_bytes(std::move(bytes), tok.leading_strip());
}

std::shared_ptr<const TokenVocabulary> TokenVocabulary::from_bytes(std::vector<std::string> bytes, int leading_strip) {
  return std::shared_ptr<const TokenVocabulary>(new TokenVocabulary(std::move(bytes), leading_strip));
}

TokenVocabulary::TokenVocabulary(std::vector<std::string> bytes, int leading_strip)
    : bytes_(std::move(bytes)), leading_strip_(leading_strip) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < bytes_.size(); ++i)
    if (!bytes_[i].empty() && bytes_[i].size() < 65535) ids.push_back(static_cast<int32_t>(i));
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return bytes_[static_cast<size_t>(a)] != bytes_[static_cast<size_t>(b)] ? bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)] : a < b;
  });
  // Preorder trie: `path` holds the open nodes (one per byte of the previous token's prefix).
  std::vector<uint32_t> path;
  std::string prev;
  for (int32_t id : ids) {
    const std::string& s = bytes_[static_cast<size_t>(id)];
    size_t common = 0;
    while (common < prev.size() && common < s.size() && prev[common] == s[common]) ++common;
    while (path.size() > common) {
      trie_[path.back()].end = static_cast<uint32_t>(trie_.size());
      path.pop_back();
    }
    for (size_t k = path.size(); k < s.size(); ++k) {
      TrieNode n;
      n.byte = static_cast<uint8_t>(s[k]);
      n.depth = static_cast<uint16_t>(k + 1);
      n.tok_begin = n.tok_end = static_cast<uint32_t>(trie_tokens_.size());
      path.push_back(static_cast<uint32_t>(trie_.size()));
      trie_.push_back(n);
    }
    TrieNode& leaf = trie_[path.back()];
    if (leaf.tok_begin == leaf.tok_end) leaf.tok_begin = static_cast<uint32_t>(trie_tokens_.size());
    trie_tokens_.push_back(id);
    leaf.tok_end = static_cast<uint32_t>(trie_tokens_.size());
    max_depth_ = std::max(max_depth_, static_cast<int>(s.size()));
    prev = s;
  }
  while (!path.empty()) {
    trie_[path.back()].end = static_cast<uint32_t>(trie_.size());
    path.pop_back();
  }
}

CompiledConstraint::CompiledConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocab)
    : grammar_(std::move(grammar)),
      vocab_(std::move(vocab)),
      dfa_(std::make_unique<constraint::LazyDfa>(grammar_->nfa(), kMaxDfaStates)) {}

CompiledConstraint::~CompiledConstraint() = default;

void CompiledConstraint::reset_classes_locked() const {
  class_at_.clear();
  class_ids_.clear();
  state_class_.clear();
  memo_.clear();  // its class keys name the classes just dropped
}

// Class of `s` at `depth`: dead / alive at depth 0; then the classes at depth - 1 of its successor
// on every byte class. Equal classes at depth d: the same byte strings of length <= d keep both
// states alive, so the same tokens of at most d bytes are allowed from both.
int32_t CompiledConstraint::refine_locked(int32_t s, int depth, size_t& budget) const {
  if (s == constraint::LazyDfa::kDead) return kDeadClass;
  if (depth == 0) return 0;
  const int64_t key = static_cast<int64_t>(s) * (vocab_->max_depth() + 1) + depth;
  if (auto it = class_at_.find(key); it != class_at_.end()) return it->second;
  if (budget == 0) throw OverBudget{};
  --budget;
  const size_t n = dfa_->num_classes();
  std::string sig(sizeof(int32_t) * (n + 1), '\0');
  std::memcpy(sig.data(), &depth, sizeof(int32_t));
  for (size_t c = 0; c < n; ++c) {
    const int32_t child = refine_locked(dfa_->next_class(s, c), depth - 1, budget);
    std::memcpy(sig.data() + sizeof(int32_t) * (c + 1), &child, sizeof(int32_t));
  }
  auto [it, fresh] = class_ids_.emplace(std::move(sig), static_cast<int32_t>(class_ids_.size()) + 1);
  class_at_.emplace(key, it->second);
  return it->second;
}

int32_t CompiledConstraint::class_locked(int32_t state) const {
  if (classes_off_ || vocab_->max_depth() == 0) return kNoClass;
  if (auto it = state_class_.find(state); it != state_class_.end()) return it->second;
  if (class_ids_.size() > kMaxClasses) reset_classes_locked();
  size_t budget = kClassBudget;
  int32_t c = kNoClass;
  try {
    c = refine_locked(state, vocab_->max_depth(), budget);
  } catch (const OverBudget&) {
    ++stats_.unclassed;
    // Classes that do not pay (most states over the budget: long multi-byte futures, such as JSON
    // strings under a 128-byte longest token) are switched off: masks by state from then on.
    const size_t classed = state_class_.size() - class_failures_;
    if (++class_failures_ > kMaxClassFailures && class_failures_ > 2 * classed) classes_off_ = true;
  } catch (const constraint::GrammarError&) {
    classes_off_ = true;  // the exploration reached the DFA's state limit: masks by state from now on
    c = kNoClass;
  }
  state_class_.emplace(state, c);
  return c;
}

Result<std::shared_ptr<const CompiledConstraint::Mask>> CompiledConstraint::mask(int32_t state, bool strip_leading) const {
  strip_leading = strip_leading && vocab_->leading_strip() > 0;
  std::lock_guard<std::mutex> lk(mu_);
  try {
    const auto t0 = std::chrono::steady_clock::now();
    // Memo keys: a class (negative) when the state has one, else the state itself.
    const int32_t cls = strip_leading ? kNoClass : class_locked(state);
    const int64_t key = cls >= 0 ? -1 - static_cast<int64_t>(cls) : static_cast<int64_t>(state) * 2 + (strip_leading ? 1 : 0);
    auto it = memo_.find(key);
    if (it != memo_.end()) {
      ++stats_.mask_hits;
      stats_.mask_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      return it->second;
    }
    auto m = compute_locked(state, strip_leading);
    stats_.mask_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ++stats_.masks_computed;
    if ((memo_.size() + 1) * m->size() * sizeof(uint64_t) > kMaxMemoBytes) memo_.clear();
    memo_.emplace(key, m);
    return m;
  } catch (const constraint::GrammarError& e) {
    return Status::ResourceExhausted(e.what());
  }
}

std::shared_ptr<const CompiledConstraint::Mask> CompiledConstraint::compute_locked(int32_t state, bool strip_leading) const {
  auto m = std::make_shared<Mask>((static_cast<size_t>(vocab_->size()) + 63) / 64, 0);
  auto set = [&](int32_t id) { (*m)[static_cast<size_t>(id) / 64] |= uint64_t{1} << (static_cast<uint32_t>(id) % 64); };
  if (strip_leading) {
    // First token of a decoder that strips leading spaces: token by token (once per request).
    for (int32_t id = 0; id < vocab_->size(); ++id) {
      std::string_view b = vocab_->bytes(id);
      if (b.empty()) continue;
      size_t k = 0;
      while (k < b.size() && k < static_cast<size_t>(vocab_->leading_strip()) && b[k] == ' ') ++k;
      int32_t s = state;
      for (size_t i = k; i < b.size() && s != constraint::LazyDfa::kDead; ++i) s = dfa_->next(s, static_cast<uint8_t>(b[i]));
      if (s != constraint::LazyDfa::kDead) set(id);
    }
    return m;
  }
  // One walk of the trie; a rejected prefix skips its subtree.
  const auto& trie = vocab_->trie();
  const auto& toks = vocab_->trie_tokens();
  std::vector<int32_t> at(static_cast<size_t>(vocab_->max_depth()) + 1);
  at[0] = state;
  for (size_t i = 0; i < trie.size();) {
    const TokenVocabulary::TrieNode& n = trie[i];
    const int32_t s = dfa_->next(at[n.depth - 1u], n.byte);
    if (s == constraint::LazyDfa::kDead) {
      i = n.end;
      continue;
    }
    at[n.depth] = s;
    for (uint32_t k = n.tok_begin; k < n.tok_end; ++k) set(toks[k]);
    ++i;
  }
  return m;
}

int32_t CompiledConstraint::advance(int32_t state, std::string_view bytes) const {
  std::lock_guard<std::mutex> lk(mu_);
  try {
    for (char c : bytes) {
      state = dfa_->next(state, static_cast<uint8_t>(c));
      if (state == constraint::LazyDfa::kDead) return kRejected;
    }
  } catch (const constraint::GrammarError&) {
    return kRejected;
  }
  return state;
}

bool CompiledConstraint::accepting(int32_t state) const {
  std::lock_guard<std::mutex> lk(mu_);
  return dfa_->accepting(state);
}

bool CompiledConstraint::can_continue(int32_t state) const {
  std::lock_guard<std::mutex> lk(mu_);
  return dfa_->can_continue(state);
}

CompiledConstraint::Stats CompiledConstraint::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  Stats s = stats_;
  s.dfa_states = dfa_->num_states();
  s.classes = class_ids_.size();
  return s;
}

}  // namespace ragd::engine
