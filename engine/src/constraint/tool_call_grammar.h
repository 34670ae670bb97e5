// Tool calls to NFA fragments: the grammar kind "tool_calls". The spec's source is JSON:
//   {"format": "hermes", "tools": [{"name": "get_weather", "parameters": {...schema...}}, ...],
//    "min_calls": 1, "max_calls": 0, "text": false}
// The output is the calls as the format writes them (ToolCallFormat::render_calls, tool_calls.h):
// between min_calls and max_calls calls (0 = no bound), each naming one of the tools, its
// arguments an object of its parameter schema (json_schema_grammar.h; no schema = `{}`; an object
// schema that lists "properties" takes no others unless it says additionalProperties). With
// "text": true the output may instead be free text, or free text followed by the calls: the text
// never contains the format's trigger (the calls start at the first one); for a format without a
// trigger (llama3_json) the output is either the calls or text that does not start with '{'.
// Thread-safety: pure functions.
#pragma once

#include <string_view>

#include "nfa_builder.h"

namespace ragd::engine::constraint {

inline constexpr int kMaxTools = 128;

// GrammarError naming the problem (an unknown format, a bad tool name, a schema the JSON Schema
// compiler refuses: "tools[1].parameters: ...").
Frag emit_tool_calls(NfaBuilder& b, std::string_view spec_json, int max_whitespace);

}  // namespace ragd::engine::constraint
