#include "semantic_cache.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "ragd/retrieval/embedder.h"  // hashing_words

namespace ragd::pipelines {

std::string SemanticCache::key(const std::string& tenant, const std::string& salt, const std::string& pipeline,
                               std::span<const uint64_t> chunk_ids) {
  std::vector<uint64_t> ids(chunk_ids.begin(), chunk_ids.end());
  std::sort(ids.begin(), ids.end());
  // Length-prefixed parts: no two different (tenant, salt, pipeline) tuples make the same key.
  std::string k;
  for (const std::string* s : {&tenant, &salt, &pipeline}) k += std::to_string(s->size()) + ':' + *s;
  for (uint64_t id : ids) k += ',' + std::to_string(id);
  return k;
}

std::vector<std::string> SemanticCache::grounded_terms(std::string_view question,
                                                      std::span<const std::string> question_terms,
                                                      std::span<const std::string> passage_terms) {
  std::vector<std::string> out;
  std::set_intersection(question_terms.begin(), question_terms.end(), passage_terms.begin(), passage_terms.end(),
                        std::back_inserter(out));
  // Question words, the word that makes "how" a question of quantity, time or manner, and
  // negations (a word ending in "n't" counts as "not"): all stopwords to lexical search, all change
  // the question. Words as the hashing embedder splits them (lowercase, "isn't" whole).
  static constexpr std::string_view kAsk[] = {"who",  "whom", "whose", "when",    "where",  "why", "which", "what",
                                              "how",  "many", "much",  "long",    "often",  "old", "far",   "not",
                                              "no",   "nor",  "never", "without", "except", "cannot"};
  for (const std::string& w : retrieval::hashing_words(question)) {
    if (std::find(std::begin(kAsk), std::end(kAsk), w) != std::end(kAsk)) out.push_back("?" + w);
    else if (w.ends_with("n't")) out.push_back("?not");
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::optional<SemanticCache::Hit> SemanticCache::lookup(const std::string& key, std::span<const float> embedding,
                                                        double threshold, const std::vector<std::string>* grounded) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = by_key_.find(key);
  List::iterator best = lru_.end();
  double best_sim = -2;
  if (it != by_key_.end())
    for (List::iterator e : it->second) {
      if (e->embedding.size() != embedding.size() || (grounded && e->grounded != *grounded)) continue;
      double dot = 0;
      for (size_t i = 0; i < embedding.size(); ++i) dot += static_cast<double>(e->embedding[i]) * embedding[i];
      if (dot > best_sim) best_sim = dot, best = e;
    }
  if (best == lru_.end() || best_sim < threshold) {
    ++stats_.misses;
    return std::nullopt;
  }
  ++stats_.hits;
  lru_.splice(lru_.begin(), lru_, best);
  return Hit{best->tokens, best->finish, static_cast<float>(best_sim), best->question};
}

void SemanticCache::insert(const std::string& key, std::vector<float> embedding, std::string question,
                           std::vector<int32_t> tokens, std::string finish, std::vector<std::string> doc_ids,
                           std::vector<std::string> grounded) {
  if (tokens.empty() || embedding.empty() || max_entries_ == 0) return;
  std::lock_guard<std::mutex> lk(mu_);
  lru_.push_front(Entry{key, std::move(embedding), std::move(question), std::move(tokens), std::move(finish), std::move(doc_ids),
                         std::move(grounded)});
  by_key_[key].push_back(lru_.begin());
  ++stats_.inserts;
  while (lru_.size() > max_entries_) {
    erase_locked(std::prev(lru_.end()));
    ++stats_.evicted;
  }
}

void SemanticCache::erase_locked(List::iterator it) {
  auto k = by_key_.find(it->key);
  if (k != by_key_.end()) {
    std::erase(k->second, it);
    if (k->second.empty()) by_key_.erase(k);
  }
  lru_.erase(it);
}

size_t SemanticCache::invalidate(std::span<const std::string> doc_ids) {
  std::lock_guard<std::mutex> lk(mu_);
  size_t n = 0;
  for (auto it = lru_.begin(); it != lru_.end();) {
    const bool hit = std::any_of(it->doc_ids.begin(), it->doc_ids.end(), [&](const std::string& d) {
      return std::find(doc_ids.begin(), doc_ids.end(), d) != doc_ids.end();
    });
    if (!hit) {
      ++it;
      continue;
    }
    auto next = std::next(it);
    erase_locked(it);
    it = next;
    ++n;
  }
  stats_.invalidated += n;
  return n;
}

SemanticCache::Stats SemanticCache::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  Stats s = stats_;
  s.entries = lru_.size();
  return s;
}

}  // namespace ragd::pipelines
