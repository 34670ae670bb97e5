// Built-in chat templates (the Jinja templates of the model families, written out by hand).
#include <fmt/format.h>

#include "ragd/engine/tokenizer.h"

namespace ragd::engine {

namespace {

std::string_view trim(std::string_view s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

}  // namespace

std::string apply_chat_template(ChatTemplate t, std::span<const ChatMessage> messages, bool add_generation_prompt) {
  std::string s;
  switch (t) {
    case ChatTemplate::kLlama3:
      // <|begin_of_text|><|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>...
      s = "<|begin_of_text|>";
      for (const auto& m : messages)
        s += fmt::format("<|start_header_id|>{}<|end_header_id|>\n\n{}<|eot_id|>", m.role, trim(m.content));
      if (add_generation_prompt) s += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      return s;
    case ChatTemplate::kChatML:
      // <|im_start|>role\ncontent<|im_end|>\n...
      for (const auto& m : messages) s += fmt::format("<|im_start|>{}\n{}<|im_end|>\n", m.role, m.content);
      if (add_generation_prompt) s += "<|im_start|>assistant\n";
      return s;
    case ChatTemplate::kMistral: {
      // <s>[INST] user [/INST] answer</s>[INST] user [/INST]; a system message is prepended to
      // the first user turn (separated by a blank line).
      s = "<s>";
      std::string system;
      for (const auto& m : messages) {
        if (m.role == "system") {
          system += std::string(trim(m.content));
        } else if (m.role == "user") {
          std::string content(trim(m.content));
          if (!system.empty()) {
            content = system + "\n\n" + content;
            system.clear();
          }
          s += fmt::format("[INST] {} [/INST]", content);
        } else {
          s += fmt::format(" {}</s>", trim(m.content));
        }
      }
      return s;
    }
    case ChatTemplate::kNone:
      for (const auto& m : messages) {
        if (!s.empty()) s += "\n";
        s += m.content;
      }
      return s;
  }
  return s;
}

std::string_view builtin_tool_call_format(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::kLlama3: return "llama3_json";
    case ChatTemplate::kMistral: return "mistral";
    default: return "hermes";
  }
}

std::vector<ChatMessage> fold_tools_into_messages(const ToolCallFormat& f, std::span<const ChatMessage> messages,
                                                  std::span<const ToolDef> tools) {
  std::string guide;
  if (!tools.empty()) {
    guide = "You can call these functions; each line gives one, with the JSON Schema of its arguments:\n";
    for (const ToolDef& t : tools) {
      guide += "{\"name\": \"" + t.name + "\"";
      if (!t.description.empty()) {
        guide += ", \"description\": \"";
        for (char c : t.description) {
          if (c == '"' || c == '\\') guide += '\\';
          if (c == '\n') {
            guide += "\\n";
            continue;
          }
          guide += c;
        }
        guide += "\"";
      }
      guide += ", \"parameters\": " + (t.parameters.empty() ? std::string("{}") : t.parameters) + "}\n";
    }
    guide += "\nTo call a function, answer with " + f.render_calls({{"", "NAME", "{ARGUMENTS}"}}) +
             ", the arguments as a JSON object; several calls are written one after another.";
  }
  std::vector<ChatMessage> out;
  if (!guide.empty() && (messages.empty() || messages.front().role != "system")) out.push_back({"system", guide, {}, "", ""});
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    ChatMessage c{m.role, m.content, {}, "", ""};
    if (i == 0 && m.role == "system" && !guide.empty()) c.content = std::string(trim(m.content)) + "\n\n" + guide;
    if (m.role == "assistant" && !m.tool_calls.empty())
      c.content = (m.content.empty() ? "" : m.content + "\n") + f.render_calls(m.tool_calls);
    if (m.role == "tool") {
      c.role = "user";
      c.content = "<tool_response>\n" + m.content + "\n</tool_response>";
    }
    // Consecutive tool results are one user turn (templates that alternate roles want that).
    if (c.role == "user" && m.role == "tool" && !out.empty() && i > 0 && messages[i - 1].role == "tool")
      out.back().content += "\n" + c.content;
    else
      out.push_back(std::move(c));
  }
  return out;
}

}  // namespace ragd::engine
