#include "ngram_drafter.h"

#include <algorithm>

namespace ragd::pipelines {

std::vector<int32_t> ngram_draft(std::span<const int32_t> tokens, int k, int max_ngram, int min_ngram) {
  const size_t len = tokens.size();
  if (k <= 0) return {};
  for (int n = max_ngram; n >= min_ngram; --n) {
    const size_t un = static_cast<size_t>(n);
    if (len < un + 1) continue;
    const std::span<const int32_t> suffix = tokens.subspan(len - un);
    // The latest earlier occurrence that is followed by at least one token.
    for (size_t start = len - un; start-- > 0;) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + static_cast<std::ptrdiff_t>(start))) continue;
      const size_t from = start + un;
      const size_t take = std::min(static_cast<size_t>(k), len - from);
      return std::vector<int32_t>(tokens.begin() + static_cast<std::ptrdiff_t>(from),
                                  tokens.begin() + static_cast<std::ptrdiff_t>(from + take));
    }
  }
  return {};
}

int NgramDrafter::take_length() {
  if (cool_ > 0) {
    --cool_;
    return 0;
  }
  return k_;
}

void NgramDrafter::observe(int drafted, int accepted) {
  if (drafted <= 0) return;
  misses_ = accepted == 0 ? misses_ + 1 : 0;
  if (misses_ >= 2) misses_ = 0, cool_ = kCoolSteps;
  if (accepted == drafted) k_ = std::min(max_k_, k_ + 2);
  else if (accepted == 0) k_ = std::max(1, k_ / 2);
  else k_ = std::max(1, std::min(max_k_, accepted + 1));
}

}  // namespace ragd::pipelines
