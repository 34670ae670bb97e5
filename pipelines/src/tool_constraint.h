// Private to pipelines: the constraint that makes a chat run's answer follow its tools —
// OpenAI's tool_choice over the model's tool-call format (engine/tool_calls.h), as the grammar
// kind "tool_calls" (engine constraint/tool_call_grammar.h):
//   auto      text, or text then calls (the calls start at the format's trigger)
//   required  one call or more, nothing else
//   function  exactly one call of that function
//   none      no constraint (the tools are still shown to the model)
// parallel_tool_calls = false bounds the calls to one.
// Thread-safety: pure functions.
#pragma once

#include <memory>

#include "ragd/common/status.h"
#include "ragd/engine/constraint_spec.h"
#include "ragd/engine/tool_calls.h"
#include "ragd/pipelines/executor.h"

namespace ragd::pipelines {

// nullptr when the run has no tools or tool_choice is none. InvalidArgument naming the problem:
// tools on a pipeline run, tools with another constraint (response_format, guided_*), a
// tool_choice naming a function that is not among the tools, required / a function without
// tools, a bad or repeated function name.
Result<std::shared_ptr<const engine::ConstraintSpec>> tool_constraint(const RunRequest& r, const engine::ToolCallFormat& f);

}  // namespace ragd::pipelines
