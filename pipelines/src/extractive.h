// Extractive answers: generation restricted to spans of the prompt. Before each sampling step the
// logits of every token that would not continue a copy of some span of the prompt are set to -inf:
// the answer so far (g_1 .. g_k) must occur in the prompt as a run of tokens, and the next token is
// one that follows an occurrence; once the answer is non-empty a stop id may end it. The answer is
// then a verbatim copy of the passages or the question — a named entity cannot be misspelt, only
// chosen from the wrong place. Stateless (recomputed from the prompt and the generated tokens), so
// a run's checkpoints and prompt replacements need nothing more.
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ragd::pipelines {

// Masks `logits` (one vocabulary row) in place. When the generated tokens do not occur in the
// prompt (they were not generated under the mask) only the stop ids stay allowed.
void mask_to_prompt_spans(std::span<const int32_t> prompt, std::span<const int32_t> generated,
                          std::span<const int32_t> stop_ids, std::span<float> logits);

}  // namespace ragd::pipelines
