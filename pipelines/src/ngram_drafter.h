// Private to pipelines: drafts for speculative decoding from the run's own tokens (prompt-lookup /
// n-gram drafting, as vLLM's `ngram` method and llama.cpp's lookup decoding): the tokens that
// followed the latest earlier occurrence of the sequence's last n tokens (n from max_ngram down to
// min_ngram), up to k of them. RAG answers copy names, numbers and clauses of the retrieved
// passages that stand in the prompt, so such drafts are often accepted there; they cost a scan of
// the sequence and no model.
//
// NgramDrafter also keeps the run's draft length: it grows after a draft that was accepted whole
// and shrinks after one that was not, within [1, max_k]; after two drafts in a row of which
// nothing was accepted it drafts nothing for the next kCoolSteps decode steps (a run whose output
// does not copy stops paying for verification rows).
// Thread-safety: a value type owned by one run (the scheduler thread).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ragd::pipelines {

// The draft after `tokens`: empty when no n-gram of the suffix recurs. Pure function.
std::vector<int32_t> ngram_draft(std::span<const int32_t> tokens, int k, int max_ngram = 4, int min_ngram = 2);

class NgramDrafter {
 public:
  static constexpr int kCoolSteps = 8;
  explicit NgramDrafter(int max_k) : max_k_(max_k < 1 ? 1 : max_k), k_(max_k_ < 4 ? max_k_ : 4) {}
  // The draft length for the next decode step: 0 while cooling down, else k() (each call is one
  // step). A source other than the n-gram lookup drafts that many tokens (benchmarks' scripted
  // drafts, RuntimeTestHooks::draft_source).
  int take_length();
  // The n-gram draft for the next decode step: ngram_draft(tokens, take_length()).
  std::vector<int32_t> draft(std::span<const int32_t> tokens) { return ngram_draft(tokens, take_length()); }
  // After a verification: `drafted` tokens proposed, the first `accepted` of them taken.
  void observe(int drafted, int accepted);
  int k() const { return k_; }

 private:
  int max_k_;
  int k_;
  int misses_ = 0;  // drafts in a row of which nothing was accepted
  int cool_ = 0;    // decode steps left without drafts
};

}  // namespace ragd::pipelines
