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

}  // namespace ragd::engine
