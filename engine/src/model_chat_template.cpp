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

Result<std::string> ModelChatTemplate::render(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  Request r;
  std::vector<jinja::Value> ms;
  ms.reserve(messages.size());
  for (const ChatMessage& m : messages) ms.push_back(jinja::Value::dict({{"role", m.role}, {"content", m.content}}));
  r.messages = jinja::Value::list(std::move(ms));
  r.add_generation_prompt = add_generation_prompt;
  return render(r);
}

}  // namespace ragd::engine
