#include "extractive.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ragd::pipelines {

void mask_to_prompt_spans(std::span<const int32_t> prompt, std::span<const int32_t> generated,
                          std::span<const int32_t> stop_ids, std::span<float> logits) {
  const size_t vocab = logits.size(), k = generated.size(), n = prompt.size();
  std::vector<char> allowed(vocab, 0);
  bool any = false;
  // Every occurrence of the answer so far in the prompt allows the token after it.
  for (size_t j = 0; j + k < n; ++j) {
    if (std::equal(generated.begin(), generated.end(), prompt.begin() + static_cast<std::ptrdiff_t>(j))) {
      const int32_t next = prompt[j + k];
      if (next >= 0 && static_cast<size_t>(next) < vocab) allowed[static_cast<size_t>(next)] = any = true;
    }
  }
  if (k > 0 || !any) {
    for (int32_t s : stop_ids) {
      if (s >= 0 && static_cast<size_t>(s) < vocab) allowed[static_cast<size_t>(s)] = 1;
    }
  }
  for (size_t v = 0; v < vocab; ++v) {
    if (!allowed[v]) logits[v] = -INFINITY;
  }
}

}  // namespace ragd::pipelines
