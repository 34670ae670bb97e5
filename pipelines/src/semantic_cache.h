// Private to pipelines: semantic reuse of answers. A pipeline with [semantic_cache] answers a
// question from an earlier answer when the earlier question's embedding is within `threshold`
// (cosine) of this one's, asked by the same tenant with the same cache_salt, to the same pipeline,
// over the same retrieved passages (their chunk ids, which change when a document changes). The
// answer's tokens go out as the run's tokens (usage.semantic_cache says so); nothing is prefilled
// or decoded.
//
// Grounding check (on by default, [semantic_cache] grounding): the two questions must also ask
// about the same things of those passages — their grounded terms, the question's lexical terms
// (retrieval/lexical_terms.h: stemmed, stopwords out) that occur in the passages' text, must be the
// same set. A question that names another person, place, number or topic of the same passages (a
// near-miss: one word apart, so its embedding is close) differs in a grounded term; a paraphrase
// keeps the words the passages hold and changes the others. The question words (who, when, how
// many, ...) and negations (not, no, never, without, n't, ...), stopwords to lexical search, count
// too, as "?who", "?not", ...: "who did X" and "when did X", "is X safe" and "isn't X safe" ask
// different things of the same passages. grounded_terms() computes the set.
//
// Entries are grouped by key (scope, pipeline, passages) and bounded in number overall (least
// recently used first out). A document that changes or goes invalidates every entry whose passages
// came from it (the context key already keeps such entries from matching; this frees them).
// Answers are kept with how they ended ("stop", or "length": cut at the run's max_tokens, which
// then answers only a run with that same max_tokens).
// Thread-safety: thread-safe (one mutex); lookups run on retrieval threads, inserts on the
// scheduler thread, invalidations on the documents API's callers.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ragd::pipelines {

class SemanticCache {
 public:
  explicit SemanticCache(size_t max_entries = 4096) : max_entries_(max_entries) {}

  // What an answer is keyed by: the tenant and cache_salt, the pipeline, and the passages.
  static std::string key(const std::string& tenant, const std::string& salt, const std::string& pipeline,
                         std::span<const uint64_t> chunk_ids);
  // The terms of the question (`question_terms`: sorted, unique) that are also terms of
  // `passage_terms` (sorted, unique), and its question words ("?who", ...); sorted, unique.
  static std::vector<std::string> grounded_terms(std::string_view question, std::span<const std::string> question_terms,
                                                 std::span<const std::string> passage_terms);

  struct Hit {
    std::vector<int32_t> tokens;
    std::string finish;    // how the earlier answer ended: "stop", or "length" (cut at its max_tokens)
    float similarity = 0;
    std::string question;  // the earlier question
  };
  // The most similar entry of `key` at or above `threshold` (embedding: unit length); with
  // `grounded` set, only among entries whose grounded terms are exactly those.
  std::optional<Hit> lookup(const std::string& key, std::span<const float> embedding, double threshold,
                            const std::vector<std::string>* grounded = nullptr);
  void insert(const std::string& key, std::vector<float> embedding, std::string question, std::vector<int32_t> tokens,
              std::string finish, std::vector<std::string> doc_ids, std::vector<std::string> grounded = {});
  // Entries whose passages came from any of these documents go. Returns how many went.
  size_t invalidate(std::span<const std::string> doc_ids);

  struct Stats {
    uint64_t hits = 0, misses = 0, inserts = 0, invalidated = 0, evicted = 0;
    size_t entries = 0;
  };
  Stats stats() const;

 private:
  struct Entry {
    std::string key;
    std::vector<float> embedding;
    std::string question;
    std::vector<int32_t> tokens;
    std::string finish;
    std::vector<std::string> doc_ids;
    std::vector<std::string> grounded;
  };
  using List = std::list<Entry>;
  void erase_locked(List::iterator it);
  size_t max_entries_;
  mutable std::mutex mu_;
  List lru_;                                                       // front = most recent
  std::unordered_map<std::string, std::vector<List::iterator>> by_key_;
  Stats stats_;
};

}  // namespace ragd::pipelines
