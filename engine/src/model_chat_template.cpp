#include "ragd/engine/model_chat_template.h"

#include <filesystem>

#include "ragd/common/text_file.h"

namespace ragd::engine {

namespace {

namespace fs = std::filesystem;

// transformers' SPECIAL_TOKENS_ATTRIBUTES: what apply_chat_template passes to the template.
constexpr std::string_view kSpecialTokens[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                               "pad_token", "cls_token", "mask_token"};

// A token is a string or an AddedToken dict {"content": "...", ...}.
std::optional<std::string> token_text(const jinja::Value& v) {
  if (v.is_string()) return v.as_string();
  if (const jinja::Value* c = v.get("content"); c != nullptr && c->is_string()) return c->as_string();
  return std::nullopt;
}

jinja::Value special_tokens_of(const jinja::Value& config) {
  std::vector<std::pair<std::string, jinja::Value>> out;
  for (std::string_view name : kSpecialTokens)
    if (const jinja::Value* v = config.get(name))
      if (auto t = token_text(*v)) out.emplace_back(std::string(name), *t);
  if (const jinja::Value* extra = config.get("additional_special_tokens"); extra != nullptr && extra->is_list()) {
    std::vector<jinja::Value> toks;
    for (const jinja::Value& v : extra->items())
      if (auto t = token_text(v)) toks.emplace_back(*t);
    out.emplace_back("additional_special_tokens", jinja::Value::list(std::move(toks)));
  }
  return jinja::Value::dict(std::move(out));
}

}  // namespace

ModelChatTemplate::~ModelChatTemplate() = default;

Result<std::unique_ptr<ModelChatTemplate>> ModelChatTemplate::from_source(std::string_view source,
                                                                          jinja::Value special_tokens,
                                                                          std::string origin) {
  std::unique_ptr<ModelChatTemplate> t(new ModelChatTemplate());
  RAGD_ASSIGN_OR_RETURN(t->default_, jinja::Template::compile(source, origin));
  if (special_tokens.is_dict()) t->special_tokens_ = special_tokens.entries();
  t->origin_ = std::move(origin);
  t->tool_format_ = detect_tool_call_format(source, "hermes");
  return t;
}

Result<std::unique_ptr<ModelChatTemplate>> ModelChatTemplate::from_tokenizer_config(std::string_view json,
                                                                                    std::string origin) {
  auto config = jinja::Value::from_json(json);
  if (!config.ok()) return config.status().with_context(origin);
  if (!config->is_dict()) return Status::InvalidArgument(origin + ": expected a JSON object");
  const jinja::Value* ct = config->get("chat_template");
  if (ct == nullptr || ct->is_none()) return std::unique_ptr<ModelChatTemplate>();
  const jinja::Value specials = special_tokens_of(*config);
  if (ct->is_string()) return from_source(ct->as_string(), specials, origin + " chat_template");
  if (!ct->is_list())
    return Status::InvalidArgument(origin + ": chat_template must be a string or a list of {name, template}");
  std::string default_src, tool_src;
  bool has_default = false, has_tool = false;
  for (const jinja::Value& item : ct->items()) {
    const jinja::Value* name = item.get("name");
    const jinja::Value* src = item.get("template");
    if (name == nullptr || src == nullptr || !name->is_string() || !src->is_string())
      return Status::InvalidArgument(origin + ": chat_template list entries need a string 'name' and 'template'");
    if (name->as_string() == "default") default_src = src->as_string(), has_default = true;
    if (name->as_string() == "tool_use") tool_src = src->as_string(), has_tool = true;
  }
  if (!has_default)
    return Status::InvalidArgument(origin + ": chat_template lists named templates but none is named 'default'");
  RAGD_ASSIGN_OR_RETURN(auto t, from_source(default_src, specials, origin + " chat_template 'default'"));
  if (has_tool) {
    RAGD_ASSIGN_OR_RETURN(t->tool_use_, jinja::Template::compile(tool_src, origin + " chat_template 'tool_use'"));
    t->tool_format_ = detect_tool_call_format(tool_src, t->tool_format_.name);
  }
  t->origin_ = origin + " chat_template";
  return t;
}

Result<std::unique_ptr<ModelChatTemplate>> ModelChatTemplate::load(const std::string& model_dir) {
  const fs::path dir(model_dir);
  const fs::path config_path = dir / "tokenizer_config.json";
  std::string config_text;
  std::error_code ec;
  if (fs::exists(config_path, ec)) {
    RAGD_ASSIGN_OR_RETURN(config_text, read_text_file(config_path.string(), "tokenizer config"));
  }
  // transformers reads a chat_template.jinja beside the config in preference to the config's own.
  const fs::path jinja_path = dir / "chat_template.jinja";
  if (fs::exists(jinja_path, ec)) {
    RAGD_ASSIGN_OR_RETURN(std::string src, read_text_file(jinja_path.string(), "chat template"));
    jinja::Value specials = jinja::Value::dict({});
    if (!config_text.empty()) {
      auto config = jinja::Value::from_json(config_text);
      if (!config.ok()) return config.status().with_context(config_path.string());
      specials = special_tokens_of(*config);
    }
    return from_source(src, specials, "chat_template.jinja");
  }
  if (config_text.empty()) return std::unique_ptr<ModelChatTemplate>();
  return from_tokenizer_config(config_text, "tokenizer_config.json");
}

Result<std::string> ModelChatTemplate::render(const Request& r, const jinja::RenderOptions& o) const {
  const jinja::Template& t = tool_use_ != nullptr && !r.tools.is_none() ? *tool_use_ : *default_;
  std::vector<std::pair<std::string, jinja::Value>> ctx = special_tokens_;
  for (const auto& kv : r.extra) ctx.push_back(kv);
  ctx.emplace_back("messages", r.messages);
  ctx.emplace_back("tools", r.tools);
  ctx.emplace_back("documents", r.documents);
  ctx.emplace_back("add_generation_prompt", r.add_generation_prompt);
  return t.render(jinja::Value::dict(std::move(ctx)), o);
}

jinja::Value ModelChatTemplate::message_value(const ChatMessage& m) {
  std::vector<std::pair<std::string, jinja::Value>> d;
  d.emplace_back("role", m.role);
  // transformers' convention (and vLLM's): an assistant turn that only calls tools has no content.
  if (m.role == "assistant" && !m.tool_calls.empty() && m.content.empty()) d.emplace_back("content", jinja::Value());
  else d.emplace_back("content", m.content);
  if (!m.tool_calls.empty()) {
    std::vector<jinja::Value> calls;
    for (const ToolCall& c : m.tool_calls) {
      // Templates render arguments with tojson: a dict, as transformers passes it; text that is
      // not a JSON object stays a string.
      jinja::Value args = c.arguments;
      if (auto v = jinja::Value::from_json(c.arguments); v.ok() && v->is_dict()) args = std::move(*v);
      std::vector<std::pair<std::string, jinja::Value>> call;
      if (!c.id.empty()) call.emplace_back("id", c.id);
      call.emplace_back("type", "function");
      call.emplace_back("function", jinja::Value::dict({{"name", c.name}, {"arguments", std::move(args)}}));
      calls.push_back(jinja::Value::dict(std::move(call)));
    }
    d.emplace_back("tool_calls", jinja::Value::list(std::move(calls)));
  }
  if (!m.tool_call_id.empty()) d.emplace_back("tool_call_id", m.tool_call_id);
  if (!m.name.empty()) d.emplace_back("name", m.name);
  return jinja::Value::dict(std::move(d));
}

jinja::Value ModelChatTemplate::tools_value(std::span<const ToolDef> tools) {
  if (tools.empty()) return jinja::Value();
  std::vector<jinja::Value> out;
  for (const ToolDef& t : tools) {
    std::vector<std::pair<std::string, jinja::Value>> fn;
    fn.emplace_back("name", t.name);
    if (!t.description.empty()) fn.emplace_back("description", t.description);
    jinja::Value params = jinja::Value::dict({{"type", "object"}, {"properties", jinja::Value::dict({})}});
    if (!t.parameters.empty())
      if (auto v = jinja::Value::from_json(t.parameters); v.ok()) params = std::move(*v);
    fn.emplace_back("parameters", std::move(params));
    out.push_back(jinja::Value::dict({{"type", "function"}, {"function", jinja::Value::dict(std::move(fn))}}));
  }
  return jinja::Value::list(std::move(out));
}

Result<std::string> ModelChatTemplate::render(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                              std::span<const ToolDef> tools) const {
  Request r;
  std::vector<jinja::Value> ms;
  ms.reserve(messages.size());
  for (const ChatMessage& m : messages) ms.push_back(message_value(m));
  r.messages = jinja::Value::list(std::move(ms));
  r.tools = tools_value(tools);
  r.add_generation_prompt = add_generation_prompt;
  return render(r);
}

}  // namespace ragd::engine
