// Private to the daemon: OpenAI tool calling on /v1/chat/completions.
//
// Request: `tools` ([{type: "function", function: {name, description?, parameters?, strict?}}]),
// `tool_choice` ("auto" (default with tools) | "none" | "required" |
// {type: "function", function: {name}}), `parallel_tool_calls` (default true); in `messages`,
// assistant turns with `tool_calls` (content may then be null) and `tool` turns
// ({role: "tool", tool_call_id, content}). The run's answer is constrained to the model's
// tool-call format (pipelines' tool_constraint.h), so calls always parse and their arguments
// always follow their function's parameter schema.
// Response: `message.tool_calls` ([{id: "call_...", type: "function", function: {name,
// arguments}}], arguments as JSON text), `content` the text before the calls or null,
// finish_reason "tool_calls" (tool_choice auto / required; a named function answers "stop", as
// OpenAI does); streamed as OpenAI streams them: a delta per call that opens it (index, id, type,
// function.name, function.arguments ""), then deltas of arguments text.
// Thread-safety: the parsers are pure; OaiToolState belongs to one choice (its consumer's calls
// are ordered).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "json_fields.h"
#include "ragd/common/json_writer.h"
#include "ragd/engine/tool_calls.h"
#include "ragd/pipelines/executor.h"

namespace ragd::daemon {

// tools, tool_choice and parallel_tool_calls into `run`.
ApiError parse_tools(const Fields& f, pipelines::RunRequest* run);
// An assistant message's `tool_calls` (where = "messages[3].tool_calls").
ApiError parse_message_tool_calls(simdjson::dom::element el, const std::string& where, std::vector<engine::ToolCall>* out);

// A choice's view of its run's tool calls: how to read them out of the answer, and their ids.
struct OaiToolState {
  engine::ToolCallFormat format;
  bool named = false;        // tool_choice named a function
  std::string id_prefix;     // calls are id_prefix + index
  std::unique_ptr<engine::ToolCallStream> stream;  // streaming answers
};

// The tool state of a run whose answer may hold calls; null when it may not (no tools, or
// tool_choice none).
std::shared_ptr<OaiToolState> make_tool_state(const pipelines::RunRequest& run, engine::ToolCallFormat format,
                                              const std::string& id_prefix);

// The message's tool_calls array.
void write_tool_calls(JsonWriter& w, const std::vector<engine::ToolCall>& calls, const std::string& id_prefix);
// A streamed delta's `tool_calls` array.
void write_tool_call_deltas(JsonWriter& w, const std::vector<engine::ToolCallStream::Delta::Call>& calls,
                            const std::string& id_prefix);
// The finish_reason of an answer that called `n` functions.
std::string tool_finish_reason(const OaiToolState& t, size_t n, const std::string& finish);

}  // namespace ragd::daemon
