// Prompt layout for RAG runs, as token segments:
//   [system prefix + context header][doc 1 + separator]...[doc N + separator][question + suffix]
// Each segment is tokenized on its own and the ids are concatenated, so a document's tokens do not
// depend on its neighbours and its KV can be keyed by the token path (knowledge tree). The chat
// template is rendered once with a marker in the user turn; what precedes the marker becomes the
// prefix, what follows it the suffix.
//
// Templates: "model" (the default) renders with the model's own chat template (its
// tokenizer_config.json / chat_template.jinja, engine::ModelChatTemplate) when it ships one, and
// otherwise as "auto"; "auto" picks a built-in template by the tokenizer's special tokens /
// architecture; the built-in names choose one. A RAG prompt whose model template refuses a system
// turn is rendered with the system prompt at the head of the user turn; one that still fails
// falls back to "auto" (logged once).
// Thread-safety: immutable after construction (the one-time warning flag aside); safe from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/engine/model_chat_template.h"
#include "ragd/engine/model_config.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/pipelines/pipeline_spec.h"

namespace ragd::pipelines {

struct PromptSegments {
  // segs[0] = prefix, segs[1..n_docs] = documents, segs.back() = question tail.
  std::vector<std::vector<int32_t>> segs;
  std::vector<int32_t> flat() const;
};

class PromptBuilder {
 public:
  // model_template: the model's own chat template, or null when it ships none.
  PromptBuilder(const engine::Tokenizer& tok, const engine::ModelConfig& cfg,
                std::shared_ptr<const engine::ModelChatTemplate> model_template = nullptr);

  // Built-in template named in the spec ("auto" picks by the tokenizer's special tokens /
  // architecture; "model" is "auto" here, the built-in a model without its own template gets).
  engine::ChatTemplate resolve(const std::string& name) const;
  // Whether `name` renders with the model's own template ("model" and a model that has one).
  bool uses_model_template(const std::string& name) const { return model_ != nullptr && name == "model"; }
  // docs: token ids of each retrieved chunk, already in prompt order.
  PromptSegments build_rag(const PipelineSpec& spec, std::span<const std::vector<int32_t>> docs,
                           const std::string& question) const;
  // The model's own template when it has one (its errors, e.g. raise_exception's "roles must
  // alternate", are InvalidArgument), else the "auto" built-in.
  // With tools: the model's template gets them as transformers passes them; a built-in template
  // gets them folded into the conversation (engine::fold_tools_into_messages).
  Result<std::vector<int32_t>> build_chat(std::span<const engine::ChatMessage> messages,
                                          std::span<const engine::ToolDef> tools = {}) const;
  // How the model writes tool calls: its own template's format, else the built-in's.
  engine::ToolCallFormat tool_call_format() const;
  std::vector<int32_t> build_raw(const std::string& prompt) const;

 private:
  std::vector<int32_t> encode_head(const std::string& text) const;  // adds BOS when the template lacks it
  // The model template's rendering of [system?, user(marker)]; nullopt when it refuses both layouts.
  std::optional<std::string> render_model_rag(const std::string& system_prompt) const;
  const engine::Tokenizer& tok_;
  engine::ChatTemplate auto_;
  std::shared_ptr<const engine::ModelChatTemplate> model_;
  std::shared_ptr<std::atomic<bool>> warned_ = std::make_shared<std::atomic<bool>>(false);  // fallback logged
};

}  // namespace ragd::pipelines
