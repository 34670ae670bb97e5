// The reranking stage with a cross-encoder (passage_reranker.h): the passages' prompt tokens are
// decoded back to text with the generator's tokenizer (the cross-encoder reads what the generator
// would read) and scored as (question, passage) pairs by retrieval::CrossEncoderReranker, batched.
// Thread-safety: thread-safe (the cross-encoder and the tokenizer are immutable).
#pragma once

#include <memory>

#include "passage_reranker.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/retrieval/reranker.h"

namespace ragd::pipelines {

class CrossEncoderStage final : public PassageReranker {
 public:
  CrossEncoderStage(std::shared_ptr<const retrieval::CrossEncoderReranker> model,
                    std::shared_ptr<const engine::Tokenizer> tokenizer)
      : model_(std::move(model)), tok_(std::move(tokenizer)) {}
  Status keep_best(const PipelineSpec& spec, const std::string& question, const std::string& scope,
                   std::vector<ContextDoc>* docs, int keep = -1) override;

 private:
  std::shared_ptr<const retrieval::CrossEncoderReranker> model_;
  std::shared_ptr<const engine::Tokenizer> tok_;
};

}  // namespace ragd::pipelines
