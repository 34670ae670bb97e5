// The chat template a model ships, compiled when the model loads and rendered as transformers'
// apply_chat_template renders it.
//
// Where it comes from (the first found): <model>/chat_template.jinja, then tokenizer_config.json's
// "chat_template": a string, or a list of {"name", "template"} of which "default" serves chats
// and "tool_use" chats that pass tools (transformers' choice). The render context is what
// transformers passes: messages, tools (none without), documents (none without),
// add_generation_prompt, and the special tokens tokenizer_config.json names (bos_token, eos_token,
// unk_token, pad_token, ... as strings; absent ones stay undefined).
//
// Messages are jinja Values (dicts), so fields beyond role and content (tool_calls, name,
// tool_call_id) reach the template unchanged.
// Thread-safety: immutable after load; render from any thread.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/engine/jinja.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/engine/tool_calls.h"

namespace ragd::engine {

class ModelChatTemplate {
 public:
  ~ModelChatTemplate();

  // nullptr (and OK) when the directory ships no template. Errors name the file: unreadable or
  // invalid JSON, a "chat_template" of the wrong shape, a named list without "default", or a
  // template that does not compile ("tokenizer_config.json chat_template: line 12: unsupported
  // construct '{% include %}'").
  static Result<std::unique_ptr<ModelChatTemplate>> load(const std::string& model_dir);
  // tokenizer_config.json's text alone (tests, tools); `origin` names it in errors.
  static Result<std::unique_ptr<ModelChatTemplate>> from_tokenizer_config(std::string_view json,
                                                                          std::string origin = "tokenizer_config.json");
  // One template source with the given special tokens (a dict of name -> string).
  static Result<std::unique_ptr<ModelChatTemplate>> from_source(std::string_view source, jinja::Value special_tokens,
                                                                std::string origin = "chat_template");

  struct Request {
    jinja::Value messages = jinja::Value::list({});  // list of dicts: role, content, ...
    jinja::Value tools;                              // none, or a list of tool schemas
    jinja::Value documents;                          // none, or a list of documents
    bool add_generation_prompt = true;
    std::vector<std::pair<std::string, jinja::Value>> extra;  // more template variables
  };
  // Errors: InvalidArgument with the template's message (raise_exception's text, a type error),
  // prefixed by the origin and line.
  Result<std::string> render(const Request& r, const jinja::RenderOptions& o = {}) const;
  // A conversation (tool calls and results included) and the tools it may call.
  Result<std::string> render(std::span<const ChatMessage> messages, bool add_generation_prompt = true,
                             std::span<const ToolDef> tools = {}) const;
  // A message as transformers passes it: role, content (null for an assistant turn that only calls
  // tools), tool_calls [{id, type: "function", function: {name, arguments (a dict)}}],
  // tool_call_id, name.
  static jinja::Value message_value(const ChatMessage& m);
  // Tools as transformers passes them: [{type: "function", function: {name, description, parameters}}].
  static jinja::Value tools_value(std::span<const ToolDef> tools);

  // How this template writes tool calls (detect_tool_call_format on its source; hermes when it
  // shows none).
  const ToolCallFormat& tool_call_format() const { return tool_format_; }

  // "chat_template.jinja" or "tokenizer_config.json chat_template" (", named 'default'").
  const std::string& origin() const { return origin_; }
  bool has_tool_use_template() const { return tool_use_ != nullptr; }

 private:
  ModelChatTemplate() = default;
  std::unique_ptr<jinja::Template> default_, tool_use_;
  std::vector<std::pair<std::string, jinja::Value>> special_tokens_;
  std::string origin_;
  ToolCallFormat tool_format_;
};

}  // namespace ragd::engine
