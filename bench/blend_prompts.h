// The fidelity benches' prompts (bench_blend, bench_blend_selection): a question of the QA set, its
// gold passage and ndocs - 1 others drawn at random, in a random order, laid out by the default
// pipeline. The draws come from the caller's generator, so one seed gives one set of prompts.
#pragma once

#include <algorithm>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ragd/engine/tokenizer.h"
#include "ragd/pipelines/pipeline_spec.h"
#include "ragd/pipelines/prompt_builder.h"

namespace ragd::bench {

inline pipelines::PromptSegments gold_among_others(const pipelines::PromptBuilder& builder,
                                                         const pipelines::PipelineSpec& spec,
                                                         const engine::Tokenizer& tok,
                                                         std::span<const std::string_view> passages, size_t gold,
                                                         const std::string& question, int ndocs, std::mt19937& rng) {
  std::vector<size_t> pick = {gold};
  while (static_cast<int>(pick.size()) < ndocs) {
    const size_t o = rng() % passages.size();
    if (std::find(pick.begin(), pick.end(), o) == pick.end()) pick.push_back(o);
  }
  std::shuffle(pick.begin(), pick.end(), rng);
  std::vector<std::vector<int32_t>> docs;
  for (size_t i : pick) docs.push_back(tok.encode(passages[i], false, false));
  return builder.build_rag(spec, docs, question);
}

}  // namespace ragd::bench
