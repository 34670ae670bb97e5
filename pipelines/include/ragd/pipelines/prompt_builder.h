// Prompt layout for RAG runs, as token segments:
//   [system prefix + context header][doc 1 + separator]...[doc N + separator][question + suffix]
// Each segment is tokenized on its own and the ids are concatenated, so a document's tokens do not
// depend on its neighbours and its KV can be keyed by the token path (knowledge tree). The chat
// template is rendered once with a marker in the user turn; what precedes the marker becomes the
// prefix, what follows it the suffix.
// Thread-safety: immutable after construction; safe from any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

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
  PromptBuilder(const engine::Tokenizer& tok, const engine::ModelConfig& cfg);

  // Template named in the spec ("auto" picks by the tokenizer's special tokens / architecture).
  engine::ChatTemplate resolve(const std::string& name) const;
  // docs: token ids of each retrieved chunk, already in prompt order.
  PromptSegments build_rag(const PipelineSpec& spec, std::span<const std::vector<int32_t>> docs,
                           const std::string& question) const;
  std::vector<int32_t> build_chat(std::span<const engine::ChatMessage> messages) const;
  std::vector<int32_t> build_raw(const std::string& prompt) const;

 private:
  std::vector<int32_t> encode_head(const std::string& text) const;  // adds BOS when the template lacks it
  const engine::Tokenizer& tok_;
  engine::ChatTemplate auto_;
};

}  // namespace ragd::pipelines
