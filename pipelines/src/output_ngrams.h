// Private to pipelines: drafts for speculative decoding from the answers a scope's earlier runs
// gave (llama.cpp's lookup decoding keeps such a cache across generations too). A model repeats
// itself across answers — openers, connecting clauses, the sentences it falls back on when it leaves
// a passage — where the prompt lookup (ngram_drafter.h) finds nothing to copy. Each finished run's
// output is indexed by every n-gram (n = kOrder) with the tokens that followed it (up to kSpan), the
// latest answer winning; a run's draft after its last n tokens is that continuation.
// Keys carry the scope (tenant and cache salt, as KV does), so one tenant's answers never draft
// another's: drafts change only the speed of a run, never its output, but speed is observable.
// Bounded: at most max_entries n-grams over all scopes, the oldest forgotten first.
// Thread-safety: not thread-safe; owned by the executor's scheduler thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ragd::pipelines {

class OutputNgrams {
 public:
  static constexpr int kOrder = 3;  // tokens of context a draft is looked up by
  static constexpr int kSpan = 16;  // tokens kept after each n-gram
  explicit OutputNgrams(size_t max_entries = 65536) : max_entries_(max_entries) {}

  // Indexes a finished run's generated tokens under `scope`.
  void add(std::string_view scope, std::span<const int32_t> output);
  // Up to k tokens that followed the last kOrder of `tokens` in the scope's latest answer holding
  // them; empty when none did.
  std::vector<int32_t> draft(std::string_view scope, std::span<const int32_t> tokens, int k) const;
  size_t size() const { return map_.size(); }

 private:
  struct Entry {
    int32_t next[kSpan];
    int len = 0;
  };
  static uint64_t key(uint64_t scope_hash, const int32_t* gram);
  size_t max_entries_;
  std::unordered_map<uint64_t, Entry> map_;
  std::deque<uint64_t> order_;  // keys in first-insertion order: the oldest is forgotten first
};

}  // namespace ragd::pipelines
