#include "ragd/pipelines/prompt_builder.h"

#include <algorithm>

#include "ragd/common/log.h"

namespace ragd::pipelines {

namespace {
constexpr std::string_view kMarker = "\x01RAGD_CONTEXT\x01";
}

std::vector<int32_t> PromptSegments::flat() const {
  std::vector<int32_t> out;
  for (const auto& s : segs) out.insert(out.end(), s.begin(), s.end());
  return out;
}

PromptBuilder::PromptBuilder(const engine::Tokenizer& tok, const engine::ModelConfig& cfg,
                             std::shared_ptr<const engine::ModelChatTemplate> model_template)
    : tok_(tok), model_(std::move(model_template)) {
  if (tok.token_to_id("<|start_header_id|>")) auto_ = engine::ChatTemplate::kLlama3;
  else if (tok.token_to_id("<|im_start|>")) auto_ = engine::ChatTemplate::kChatML;
  else if (cfg.architecture == engine::Architecture::kMistral || tok.token_to_id("[INST]")) auto_ = engine::ChatTemplate::kMistral;
  else if (cfg.architecture == engine::Architecture::kQwen2) auto_ = engine::ChatTemplate::kChatML;
  else auto_ = engine::ChatTemplate::kNone;
}

engine::ChatTemplate PromptBuilder::resolve(const std::string& name) const {
  if (name.empty() || name == "auto" || name == "model") return auto_;
  auto t = engine::parse_chat_template(name);
  return t.ok() ? *t : auto_;
}

std::vector<int32_t> PromptBuilder::encode_head(const std::string& text) const {
  std::vector<int32_t> ids = tok_.encode(text, /*add_bos=*/false, /*parse_special=*/true);
  auto bos = tok_.bos_id();
  if (bos && (ids.empty() || ids.front() != *bos)) ids.insert(ids.begin(), *bos);
  return ids;
}

std::optional<std::string> PromptBuilder::render_model_rag(const std::string& system_prompt) const {
  std::vector<engine::ChatMessage> msgs;
  if (!system_prompt.empty()) msgs.push_back({"system", system_prompt});
  msgs.push_back({"user", std::string(kMarker)});
  auto r = model_->render(msgs, true);
  if (r.ok()) return std::move(*r);
  if (!system_prompt.empty()) {
    // Templates without a system role (they raise on one): the system prompt opens the user turn.
    const std::vector<engine::ChatMessage> merged = {{"user", system_prompt + "\n\n" + std::string(kMarker)}};
    auto m = model_->render(merged, true);
    if (m.ok()) return std::move(*m);
  }
  if (!warned_->exchange(true))
    log::pipelines()->warn("{}: cannot render a RAG prompt ({}); using the built-in '{}' template", model_->origin(),
                           r.status().message(), enum_name(auto_));
  return std::nullopt;
}

PromptSegments PromptBuilder::build_rag(const PipelineSpec& spec, std::span<const std::vector<int32_t>> docs,
                                        const std::string& question) const {
  const engine::ChatTemplate t = resolve(spec.chat_template);
  std::optional<std::string> model_rendered;
  if (uses_model_template(spec.chat_template)) model_rendered = render_model_rag(spec.system_prompt);
  std::string head, tail;
  if (!model_rendered && t == engine::ChatTemplate::kNone) {
    head = spec.system_prompt + "\n\n" + spec.context_header;
    tail = spec.question_prefix + question + "\nAnswer:";
  } else {
    std::vector<engine::ChatMessage> msgs;
    if (!spec.system_prompt.empty()) msgs.push_back({"system", spec.system_prompt});
    msgs.push_back({"user", std::string(kMarker)});
    const std::string rendered = model_rendered ? *model_rendered : engine::apply_chat_template(t, msgs, true);
    const size_t pos = rendered.find(kMarker);
    head = rendered.substr(0, pos == std::string::npos ? rendered.size() : pos) + spec.context_header;
    tail = spec.question_prefix + question + (pos == std::string::npos ? "" : rendered.substr(pos + kMarker.size()));
  }
  PromptSegments p;
  p.segs.push_back(encode_head(head));
  const std::vector<int32_t> sep = tok_.encode(spec.separator, false, false);
  for (const auto& d : docs) {
    std::vector<int32_t> ids;
    if (spec.number_passages) ids = tok_.encode("[" + std::to_string(p.segs.size()) + "] ", false, false);
    ids.insert(ids.end(), d.begin(), d.end());
    ids.insert(ids.end(), sep.begin(), sep.end());
    p.segs.push_back(std::move(ids));
  }
  p.segs.push_back(tok_.encode(tail, false, true));
  if (p.segs.back().empty()) p.segs.back() = sep.empty() ? p.segs.front() : sep;  // never an empty tail
  return p;
}

Result<std::vector<int32_t>> PromptBuilder::build_chat(std::span<const engine::ChatMessage> messages,
                                                       std::span<const engine::ToolDef> tools) const {
  if (model_ != nullptr) {
    RAGD_ASSIGN_OR_RETURN(const std::string text, model_->render(messages, true, tools));
    return encode_head(text);
  }
  std::vector<engine::ChatMessage> folded;
  const bool has_tools = !tools.empty() || std::any_of(messages.begin(), messages.end(), [](const engine::ChatMessage& m) {
    return m.role == "tool" || !m.tool_calls.empty();
  });
  if (has_tools) {
    folded = engine::fold_tools_into_messages(tool_call_format(), messages, tools);
    messages = folded;
  }
  const engine::ChatTemplate t = auto_;
  if (t == engine::ChatTemplate::kNone) {
    std::string text;
    for (const auto& m : messages) text += m.role + ": " + m.content + "\n";
    text += "assistant:";
    return encode_head(text);
  }
  return encode_head(engine::apply_chat_template(t, messages, true));
}

engine::ToolCallFormat PromptBuilder::tool_call_format() const {
  if (model_ != nullptr) return model_->tool_call_format();
  return *engine::tool_call_format(engine::builtin_tool_call_format(auto_));
}

std::vector<int32_t> PromptBuilder::build_raw(const std::string& prompt) const { return encode_head(prompt); }

}  // namespace ragd::pipelines
