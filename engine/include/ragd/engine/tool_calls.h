// Tool calls: how a model writes them (a ToolCallFormat), reading them back out of its output
// (parse_tool_calls for a whole answer, ToolCallStream for one that arrives in pieces), and the
// tools and calls themselves as plain values.
//
// A format is the text a model family is trained to produce when it calls functions:
//   hermes       <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>   (one per call,
//                separated by "\n"; Qwen2.5 / Qwen3, Hermes 2/3, and ragd's built-in templates)
//   llama3_json  {"name": "f", "parameters": {...}}   (the whole answer; calls separated by "; ";
//                Llama 3.1 / 3.2 / 3.3 JSON tool calling)
//   mistral      [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]   (Mistral v3 and later)
// detect_tool_call_format() picks one from the model's chat template. Constrained decoding
// (grammar kind "tool_calls", constraint/tool_call_grammar.h) makes the model write exactly this
// text, so parsing a constrained answer never fails; parsing an unconstrained one may, and then
// the whole answer is content.
// Thread-safety: formats, tools and calls are values; a ToolCallStream belongs to one answer.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/status.h"

namespace ragd::engine {

// A function name a tool may have: [A-Za-z0-9_-]{1,64} (OpenAI's rule; the grammar writes it
// unescaped inside a JSON string).
bool valid_tool_name(std::string_view name);

// A function the model may call (OpenAI's tools[i].function).
struct ToolDef {
  std::string name;         // [A-Za-z0-9_-]{1,64}
  std::string description;  // "" = none
  std::string parameters;   // a JSON Schema (JSON text) of the arguments object; "" = none (no arguments)
};

// One call the model made.
struct ToolCall {
  std::string id;         // set by whoever answers (the daemon: "call_...")
  std::string name;
  std::string arguments;  // the arguments object as JSON text, as the model wrote it
};

struct ToolCallFormat {
  std::string name;
  std::string list_begin, list_end;  // around all calls ("[TOOL_CALLS][" and "]"), or ""
  std::string call_begin, call_end;  // around each call ("<tool_call>\n" and "\n</tool_call>"), or ""
  std::string separator;             // between two calls
  std::string args_key;              // "arguments" or "parameters"

  // The text that opens the calls (list_begin, else call_begin). Empty (llama3_json): the calls
  // are the whole answer, which then starts with '{'.
  const std::string& trigger() const { return list_begin.empty() ? call_begin : list_begin; }
  // One call as this format writes it (arguments: JSON text).
  std::string render_call(std::string_view name, std::string_view arguments) const;
  // Calls as this format writes them, markers and separators included.
  std::string render_calls(const std::vector<ToolCall>& calls) const;
};

// By name ("hermes", "llama3_json", "mistral"); InvalidArgument listing the names otherwise.
Result<ToolCallFormat> tool_call_format(std::string_view name);
std::vector<std::string> tool_call_format_names();
// The format a chat template's source implies: a template that writes "[TOOL_CALLS]" is mistral,
// "<tool_call>" hermes, one that names "parameters" next to "<|python_tag|>" or "ipython" is
// llama3_json; `fallback` (a format name) otherwise.
ToolCallFormat detect_tool_call_format(std::string_view template_source, std::string_view fallback);

// An answer split into its text and its calls. Text after the calls is not kept (the constrained
// grammar allows none). When the calls do not parse, `calls` is empty and `content` is the whole
// answer.
struct ToolOutput {
  std::string content;
  std::vector<ToolCall> calls;
};
ToolOutput parse_tool_calls(const ToolCallFormat& f, std::string_view text);

// The same, fed as the answer is generated: text goes out as content until it may be the start of
// the calls (held back while it could still become the trigger); each call goes out as soon as its
// name is known, then its arguments as they grow.
class ToolCallStream {
 public:
  explicit ToolCallStream(ToolCallFormat f) : f_(std::move(f)) {}

  struct Delta {
    std::string content;  // text to show now
    struct Call {
      size_t index = 0;         // the call's position among the answer's calls
      bool first = false;       // the call's first delta: `name` is set
      std::string name;
      std::string arguments;    // more of the arguments' JSON text
    };
    std::vector<Call> calls;
    bool empty() const { return content.empty() && calls.empty(); }
  };
  Delta feed(std::string_view text);
  // The answer ended: whatever was held back (text that never became calls, or calls that did not
  // parse: then content) goes out.
  Delta finish();
  // Calls seen so far (complete ones only once finish() returned).
  size_t num_calls() const { return sent_.size(); }

 private:
  Delta step(bool final);
  ToolCallFormat f_;
  std::string text_;         // the whole answer so far
  size_t content_sent_ = 0;  // bytes of text_ gone out as content
  bool in_calls_ = false;    // the trigger was seen at calls_at_
  size_t calls_at_ = 0;
  struct Sent {
    std::string name;
    size_t args_sent = 0;
  };
  std::vector<Sent> sent_;
  bool failed_ = false;      // the calls stopped parsing: the rest is content
};

}  // namespace ragd::engine
