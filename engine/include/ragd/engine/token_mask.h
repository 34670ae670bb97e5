// The allowed ids of one constrained sampling step: bit (id % 64) of words[id / 64] is set when id
// may be sampled; ids past the words are not allowed. Produced by ConstraintMatcher, applied by
// Sampler::sample (logits of the other ids become -inf before penalties and filters).
// Thread-safety: a view; the words belong to the caller.
#pragma once

#include <cstdint>
#include <span>

namespace ragd::engine {

struct TokenMask {
  std::span<const uint64_t> words;
  bool allows(int32_t id) const {
    const auto w = static_cast<size_t>(id) / 64;
    return id >= 0 && w < words.size() && ((words[w] >> (static_cast<uint32_t>(id) % 64)) & 1u) != 0;
  }
};

}  // namespace ragd::engine
