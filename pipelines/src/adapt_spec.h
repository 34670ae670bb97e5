// Parsing of a pipeline spec's [adapt] table (pipeline_spec.cpp calls it) and of the fitted profile
// files beside specs. Errors are InvalidArgument naming the source and the key
// ("qa.toml: [adapt] candidates[2].tempo: unknown knob (top_k | rerank | extractive | ...)").
// Thread-safety: pure functions.
#pragma once

#include <string_view>

#include <toml++/toml.h>

#include "ragd/common/status.h"
#include "ragd/pipelines/adapt_policy.h"

namespace ragd::pipelines {

// `adapt`: the [adapt] table. `iterative`: the pipeline is iterative (retrieval_interval is a knob
// there, rerank is not). `spec_top_k`: unused other than in messages.
Result<AdaptSpec> parse_adapt_table(const toml::table& adapt, std::string_view source, bool iterative);

}  // namespace ragd::pipelines
