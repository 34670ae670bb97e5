// What an output-length predictor may know about a request when it is admitted, and the sparse
// feature vector a trained length head reads.
//
// Features (binary unless stated): a bias; log1p(prompt tokens) / 8 and log1p(max_tokens) / 8
// (real-valued); hashed indicators of the pipeline, of the prompt length's and max_tokens' log2
// bins, of every lower-cased word of the question (its first 64 words), of every word pair in
// order, and of the first two words (question words: "list", "how many", "when", "explain").
// Hashing is xxh3 (never process-seeded), so a head trained in one process reads the same
// features in another. The true output length, and anything that decides it, is never a feature.
//
// Thread-safety: value types; the functions are pure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ragd::pipelines {

struct LengthFeatures {
  std::string pipeline;  // "" for runs without a pipeline
  std::string text;      // the user's question (pipeline runs), last user message, or the end of
                         // a raw prompt (length_prompt_text)
  int prompt_tokens = 0;
  int max_tokens = 0;    // the request's limit, as the scheduler sees it
};

// One sparse row: (index, value) pairs, indices unique and ascending, all < kLengthDenseFeatures + dim.
using SparseRow = std::vector<std::pair<uint32_t, float>>;

inline constexpr uint32_t kLengthDenseFeatures = 3;  // bias, log prompt, log max_tokens

// The feature row of `f` with `dim` hashed slots (dim >= 1).
SparseRow length_feature_row(const LengthFeatures& f, uint32_t dim);

// The text the features read of a raw completion prompt: its last 256 bytes from a word boundary
// on (the instruction or question usually ends a prompt; a long context before it says little).
std::string length_prompt_text(std::string_view prompt);

// Lower-cased ASCII-alphanumeric words of `text` (other bytes separate words; UTF-8 multi-byte
// sequences are kept inside words), at most max_words.
std::vector<std::string> length_words(std::string_view text, size_t max_words = 64);

}  // namespace ragd::pipelines
